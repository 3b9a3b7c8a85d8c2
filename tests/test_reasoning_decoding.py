"""Qwen3's reasoning reaches the rewards whatever its hub tokenizer does (labs.training.reasoning).

Two tokenizer fixtures built on the bundled model's real tokenizer stand for what the hub tokenizers of the course's
Qwen3 models may do and cannot be read offline: one carries TRL's own Qwen3 ``response_template``
(``trl.chat_template_utils.qwen3_template``: ``<think>…</think>`` goes to ``reasoning_content``), one marks
``<think>`` and ``</think>`` special (``skip_special_tokens=True`` drops them). Through TRL's decode branch, the
course's format reward pays 0 to a well-formed completion with either, until ``keep_reasoning_for_rewards`` runs.
"""

from __future__ import annotations

import inspect
import json

import pytest

from labs.training import reasoning
from labs.training.models import model_path
from labs.core.profiles import get_profile
from rewards import format_reward

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder():
    return model_path(get_profile("ci"))


def _plain(folder):
    return transformers.AutoTokenizer.from_pretrained(folder)


def _with_parser(folder):
    from trl.chat_template_utils import qwen3_template

    tok = _plain(folder)
    tok.response_template = qwen3_template
    return tok


def _with_special_tags(folder):
    tok = _plain(folder)
    tok.add_special_tokens({"additional_special_tokens": list(reasoning.THINK_TAGS)})
    return tok


FIXTURES = {"response_template": _with_parser, "special think tags": _with_special_tags}


def test_trl_decode_branches_are_the_pinned_trainers():
    """``trl_decoded_completion`` mirrors GRPOTrainer's decode step: the same condition and the same two calls."""
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer._generate)
    for line in ('getattr(self._tokenizer, "response_template", None) is not None',
                 'getattr(self._tokenizer, "response_schema", None) is not None',
                 "parse_response(self._tokenizer, ids, prefix=prompt_ids[i]",  # 1.16 adds the prompt's tools
                 "batch_decode(completion_ids, skip_special_tokens=True)"):
        assert line in source, line


def test_the_bundled_tokenizer_needs_nothing(folder):
    tok = _plain(folder)
    assert reasoning.loaded_tokenizer_facts(tok) == {"parser": [], "special_think_tags": []}
    assert reasoning.keep_reasoning_for_rewards(tok) == []
    assert reasoning.rewards_see_reasoning(tok)["ok"] is True


@pytest.mark.parametrize("kind", FIXTURES)
def test_without_the_fix_the_format_reward_pays_nothing(folder, kind):
    check = reasoning.rewards_see_reasoning(FIXTURES[kind](folder))
    assert check["ok"] is False and check["paid"] == 0.0 and "<think>" not in check["content"]
    assert "El curso lo corrige" in check["tokenizer"]


@pytest.mark.parametrize("kind", FIXTURES)
def test_the_fix_hands_the_rewards_the_whole_completion(folder, kind):
    tok = FIXTURES[kind](folder)
    before = tok("<think>a</think><answer>1</answer>", add_special_tokens=False)["input_ids"]
    changed = reasoning.keep_reasoning_for_rewards(tok)
    assert len(changed) == 1
    check = reasoning.rewards_see_reasoning(tok)
    assert check["ok"] is True and check["content"].startswith("<think>48")
    assert check["paid"] == format_reward(completions=[[{"role": "assistant", "content": reasoning.SAMPLE_COMPLETION}]])[0]
    # the ids the model generates and trains on do not change, and other special tokens are still dropped
    assert tok("<think>a</think><answer>1</answer>", add_special_tokens=False)["input_ids"] == before
    assert tok.decode(tok("<|im_end|>", add_special_tokens=False)["input_ids"], skip_special_tokens=True) == ""


def test_the_fix_reaches_a_processor_s_tokenizer(folder):
    class Processor:
        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

    processor = Processor(_with_parser(folder))
    assert reasoning.keep_reasoning_for_rewards(processor)
    assert processor.tokenizer.response_template is None


@pytest.mark.parametrize("kind", FIXTURES)
def test_the_files_say_the_same_as_the_loaded_tokenizer(folder, kind, tmp_path):
    """The doctor reads a downloaded model's files; they give the facts the loaded tokenizer gives."""
    tok = FIXTURES[kind](folder)
    tok.save_pretrained(tmp_path)
    if kind == "response_template":  # transformers writes it into tokenizer_config.json, and reads it back
        assert json.loads((tmp_path / "tokenizer_config.json").read_text())["response_template"]
    assert reasoning.tokenizer_file_facts(tmp_path) == reasoning.loaded_tokenizer_facts(tok)
    assert reasoning.tokenizer_file_facts(tmp_path) == reasoning.loaded_tokenizer_facts(
        transformers.AutoTokenizer.from_pretrained(tmp_path))
    assert reasoning.tokenizer_file_facts(tmp_path / "missing") is None


def test_a_built_trainer_s_tokenizer_is_fixed_and_the_run_records_it(folder, tmp_path):
    """L7.1's ``Lab.use_trainer`` and L7.2's ``prepare_trainer`` call this on every trainer, before its first step."""
    from types import SimpleNamespace

    from labs.core.runfolder import RUN_JSON, RunFolder, read_json, write_json

    run = RunFolder(tmp_path)
    write_json(run.path(RUN_JSON), {"profile": "ci"})
    said = []
    trainer = SimpleNamespace(processing_class=_with_special_tags(folder))
    changed = reasoning.prepare_trainer_tokenizer(trainer, run, show=said.append)
    assert changed and read_json(run.path(RUN_JSON)) == {"profile": "ci", "reasoning_decoding": changed}
    assert said and "run.json" in said[0]
    assert reasoning.rewards_see_reasoning(trainer.processing_class)["ok"] is True
    assert reasoning.prepare_trainer_tokenizer(trainer, run, show=said.append) == []  # once is enough


def test_both_labs_fix_their_trainer_s_tokenizer():
    """The two places every course trainer passes through call the fix (L7.1 on resume too: a new process)."""
    from labs.l71 import lab
    from labs.l72 import trainer

    assert "reasoning.prepare_trainer_tokenizer(trainer" in inspect.getsource(lab.Lab.use_trainer)
    assert "reasoning.prepare_trainer_tokenizer(trainer" in inspect.getsource(trainer.prepare_trainer)
