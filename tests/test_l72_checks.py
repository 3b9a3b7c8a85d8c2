"""The machinery under L7.2's checks: the import sandbox, the model-id lookup (errata 2), the rules' record of
Unsloth's signatures, and the demo's use of the student's functions.

The sandbox must leave the process as it found it (a GPU kernel holds the real unsloth and trl), and the lookup
must never ask the hub on a CPU profile. Unsloth's defaults and its Qwen3 table are copied into the course
(``labs.l72.rules``, ``data/unsloth/qwen3_models.txt``); both are held here against the pinned wheel, when the
wheel is at hand (``labs.training.pinned_api``: the course cache, or a pip download).
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import types

import pytest

from labs.core.profiles import get_profile
from labs.l72 import answers, demo, model_ids, rules
from labs.l72.sandbox import ImportSandbox, run_in_sandbox
from labs.l72.standby import STANDBY_ENV, import_order_problem
from labs.l72.standin import CpuFastLanguageModel
from labs.training import pinned_api as pa

WRONG_ID, RIGHT_ID = "unsloth/Qwen3-4B-Instruct", "unsloth/Qwen3-4B-Instruct-2507"


# ------------------------------------------------------------------------------------------- the sandbox


def test_the_sandbox_records_the_order_and_puts_the_process_back(monkeypatch):
    real_peft = types.ModuleType("peft")
    monkeypatch.setitem(sys.modules, "peft", real_peft)
    monkeypatch.setenv(STANDBY_ENV, "0")
    before = set(sys.modules)

    def importar():
        import peft  # noqa: F401
        os.environ[STANDBY_ENV] = "1"
        import unsloth.models  # a submodule brings its package first
        from trl import GRPOTrainer  # noqa: F401
        return unsloth.FastLanguageModel

    record, result, error = run_in_sandbox(importar)
    assert error is None and record.order == ["peft", "unsloth", "trl"] and record.before_unsloth() == ["peft"]
    assert record.standby_at_unsloth == "1" and result is record.exports["unsloth"]["FastLanguageModel"]
    assert sys.modules["peft"] is real_peft and os.environ[STANDBY_ENV] == "0"
    assert set(sys.modules) == before  # no stand-in left behind, nothing real imported


def test_the_sandbox_lets_no_name_exist_that_the_package_lacks():
    def importar():
        from transformers import FastLanguageModel
        return FastLanguageModel

    _, _, error = run_in_sandbox(importar)
    assert isinstance(error, ImportError)
    with ImportSandbox() as record:
        import trl

        assert trl.__name__ == "trl" and record.order == ["trl"] and STANDBY_ENV not in os.environ


def test_standby_counts_as_unsloth_zoo_counts_it():
    """unsloth_zoo turns Standby on for any value but "0" (vllm_utils.py: "not just '1'"), as memory.py's fraction
    does; its import strips expandable_segments from the allocator only for exactly "1", so another value with
    expandable_segments still set is refused, with the reason."""
    unsloth = {"unsloth": object()}
    assert import_order_problem(unsloth, {STANDBY_ENV: "1"}) is None
    assert import_order_problem(unsloth, {STANDBY_ENV: "true"}) is None
    assert import_order_problem(unsloth, {STANDBY_ENV: "0"}) and import_order_problem(unsloth, {})
    segments = {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    kept = import_order_problem(unsloth, {STANDBY_ENV: "true", **segments})
    assert kept and "solo quita expandable_segments de PYTORCH_ALLOC_CONF" in kept
    assert import_order_problem(unsloth, {STANDBY_ENV: "1", **segments}) is None  # the import stripped it
    from labs.l72.memory import expected_gpu_fraction

    fractions = {v: expected_gpu_fraction(get_profile("rtx5090"), 31.4, "0.31.0", {STANDBY_ENV: v}).rule
                 for v in ("1", "true", "0")}
    assert fractions == {"1": "standby", "true": "standby", "0": "no-standby"}


# -------------------------------------------------------------------------------------- the model ids


def test_the_lessons_id_is_refused_and_the_right_one_accepted_without_the_hub(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(model_ids, "_ask_hub", lambda name: pytest.fail("a CPU profile asked the hub"))
    wrong, right = model_ids.look_up(WRONG_ID, use_cpu=True), model_ids.look_up(RIGHT_ID, use_cpu=True)
    assert wrong.exists is False and right.exists is True
    assert RIGHT_ID in wrong.describe_es() and "NO existe" in wrong.describe_es()
    assert model_ids.look_up("Qwen/Qwen3-4B-Instruct").exists is False
    assert model_ids.look_up("Qwen/Qwen3-4B-Instruct-2507").exists is True
    table = model_ids.unsloth_table()  # the installed Unsloth's whole table, or the snapshot of its Qwen3 entries
    assert model_ids.look_up("org/another-model").exists is (None if table.family else False)
    assert model_ids.same_model("Qwen/Qwen3-4B-Instruct-2507", RIGHT_ID)
    assert not model_ids.same_model("unsloth/Qwen3-4B-Base", RIGHT_ID)


def test_on_a_gpu_profile_the_hub_answers(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    def model_info(name, timeout=None):
        if name == WRONG_ID:
            error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
            Exception.__init__(error, "404 Client Error")
            raise error
        return types.SimpleNamespace(id=name)

    monkeypatch.setattr(huggingface_hub, "model_info", model_info)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    wrong, right = model_ids.look_up(WRONG_ID, use_cpu=False), model_ids.look_up(RIGHT_ID, use_cpu=False)
    assert (wrong.exists, right.exists) == (False, True) and "hub" in wrong.source_es
    assert "RepositoryNotFoundError" in wrong.describe_es()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: the table answers, the hub is not asked
    assert "tabla" in model_ids.look_up(WRONG_ID, use_cpu=False).source_es


def _wheel_text(dist: str, path: str) -> str:
    version = pa.pinned_version(dist, "gpu")
    try:
        return pa.wheel_source(dist, version, path)
    except pa.WheelUnavailable as exc:
        pytest.skip(f"{dist} {version} wheel not cached and not downloadable: {exc}")


def test_the_qwen3_snapshot_is_the_pinned_unsloths_table():
    source = _wheel_text("unsloth", "unsloth/models/mapper.py")
    version = pa.pinned_version("unsloth", "gpu")
    assert model_ids.SNAPSHOT.read_text(encoding="utf-8") == model_ids.snapshot_text(source, version), (
        "data/unsloth/qwen3_models.txt is not the pinned Unsloth's table: write it again with "
        "labs.l72.model_ids.snapshot_text")


def _signature(source: str, cls: str, method: str) -> ast.arguments:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return next(f.args for f in node.body if isinstance(f, ast.FunctionDef) and f.name == method)
    raise AssertionError(f"{cls}.{method} not found")


@pytest.mark.parametrize("call,path,cls", [("from_pretrained", "unsloth/models/loader.py", "FastLanguageModel"),
                                           ("get_peft_model", "unsloth/models/llama.py", "FastLlamaModel")])
def test_the_rules_know_unsloths_parameters_and_defaults(call, path, cls):
    args = _signature(_wheel_text("unsloth", path), cls, call)
    names = [a.arg for a in args.args]
    assert tuple(names[:len(rules.POSITIONAL[call])]) == rules.POSITIONAL[call]
    defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
    for key, value in rules.DEFAULTS[call].items():
        if key in defaults and isinstance(defaults[key], (ast.Constant, ast.List)):
            assert ast.literal_eval(defaults[key]) == value, key
        else:  # a name (the default target modules): the same list, defined in llama.py
            assert key == "target_modules" and value == list(rules.LORA_TARGETS)
    assert set(rules.OTHER_PARAMETERS[call]) <= set(names) | {a.arg for a in args.kwonlyargs}


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (TypeError, ValueError) as exc:
        return type(exc)


def test_the_precision_rule_is_unsloths_own_check():
    """``rules.precision_flags_conflict`` agrees with the pinned wheel's ``_precision_flags_conflict`` (run from its
    source) on every combination of the four flags, with the values a student may write (``0``, ``2``, ``None``,
    ``"no"`` as well as booleans): the same answer, or the same exception where Unsloth's ``int()`` refuses one;
    and the check names a problem exactly where the load would stop."""
    import itertools

    tree = ast.parse(_wheel_text("unsloth", "unsloth/models/loader.py"))
    wheel_rule = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "_precision_flags_conflict")
    namespace: dict = {}
    exec(compile(ast.Module(body=[wheel_rule], type_ignores=[]), "unsloth/models/loader.py", "exec"), namespace)
    values_ = (False, True, 0, 1, 2, None, "no")
    for four, eight, sixteen, fp8 in itertools.product(values_, values_, values_, (*values_, "block")):
        values = {"load_in_4bit": four, "load_in_8bit": eight, "load_in_16bit": sixteen, "load_in_fp8": fp8}
        theirs = _outcome(namespace["_precision_flags_conflict"], four, eight, sixteen, fp8)
        assert _outcome(rules.precision_flags_conflict, values) == theirs, values
        assert bool(rules.precision_flag_errors(values)) == (theirs is not False), values


def test_the_precision_flags_problems_say_which_value_and_why_in_spanish():
    assert rules.precision_flag_errors({"load_in_4bit": True, "load_in_8bit": False, "load_in_16bit": False,
                                        "load_in_fp8": 0}) == []
    (twice,) = rules.precision_flag_errors({"load_in_4bit": 2, "load_in_8bit": False, "load_in_16bit": False,
                                            "load_in_fp8": False})
    assert twice.startswith("load_in_4bit=2: Unsloth carga los pesos con una sola precisión")
    (none,) = rules.precision_flag_errors({"load_in_4bit": None, "load_in_8bit": False, "load_in_16bit": False,
                                           "load_in_fp8": False})
    assert none.startswith("load_in_4bit=None: Unsloth suma las banderas de precisión con int()")


def test_the_guard_reads_the_pinned_vllms_allocator_singleton():
    """``standby.vllm_allocator_exists`` reads ``CuMemAllocator.instance``, the singleton the pinned vLLM sets in
    ``get_instance`` (and unsloth_zoo's Standby reuses): the mark that a failed load needs a fresh process."""
    from labs.l72 import standby

    tree = ast.parse(_wheel_text("vllm", standby.CUMEM_MODULE.replace(".", "/") + ".py"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "CuMemAllocator")
    assert any(isinstance(n, ast.AnnAssign) and getattr(n.target, "id", None) == "instance" for n in cls.body)
    assert "CuMemAllocator.instance = CuMemAllocator()" in ast.unparse(cls)


# ---------------------------------------------------------------------------- the demo and the stand-in


def test_the_stand_in_takes_unsloths_defaults():
    inspect.signature(CpuFastLanguageModel.from_pretrained).bind(None, RIGHT_ID, fast_inference=True)
    inspect.signature(CpuFastLanguageModel.get_peft_model).bind(None, "model", 8, ["q_proj"], 16, random_state=1)


def test_the_demo_asks_the_students_function_about_this_process_and_the_guard_decides():
    cpu_demo = object.__new__(demo.Demo)
    said = []
    cpu_demo.profile, cpu_demo.show = get_profile("ci"), said.append
    stand_in = cpu_demo.fast_language_model(lambda: pytest.fail("imported on a CPU"),
                                            lambda modulos, entorno: (False, "no sé"))
    assert isinstance(stand_in, CpuFastLanguageModel)
    agrees = import_order_problem(sys.modules, os.environ) is not None
    assert "Tu standby_posible sobre este proceso: no (no sé)" in said[0]
    assert ("no coincidís" in said[0]) != agrees


def test_the_demo_records_the_adapter_the_student_made():
    cpu_demo = object.__new__(demo.Demo)
    said = []
    cpu_demo.profile, cpu_demo.show = get_profile("ci"), said.append
    model = types.SimpleNamespace(peft_config={"default": types.SimpleNamespace(r=8, lora_alpha=8)})
    assert cpu_demo.add_lora(lambda fast, m, perfil: model, None, None) is model
    assert (cpu_demo.profile.lora_r, cpu_demo.profile.lora_alpha) == (8, 8) and "lora_alpha=8" in said[0]


def test_every_check_profile_differs_from_the_lessons_in_every_value_the_calls_read():
    rtx, ci, other = answers.check_profiles()
    for field in ("unsloth_model", "load_in_4bit", "lora_r", "lora_alpha", "seed", "vllm_gpu_memory_utilization",
                  "max_seq_length"):
        assert getattr(other, field) != getattr(rtx, field), field
    assert other.max_prompt_tokens + other.max_completion_length > rtx.max_seq_length
    assert other.lora_alpha != 16  # the lesson's alpha, typed, fails there
