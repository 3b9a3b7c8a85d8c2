"""Qwen3's reasoning must reach the rewards: what TRL's decode step would do to ``<think>…</think>``, and the fix.

TRL 1.15 turns a completion's token ids into the text the reward functions read in one of two ways
(``GRPOTrainer._generate``, "Decode completions"):

- the tokenizer has a ``response_template`` (transformers >= 5.13 reads it from ``tokenizer_config.json``) or a
  legacy ``response_schema``: ``trl.chat_template_utils.parse_response`` splits the message, and for Qwen3's
  template ``<think>…</think>`` goes to ``reasoning_content``. ``completion[0]["content"]`` then starts after
  ``</think>``, and every format reward of the course (the student's and ``rewards/``) pays 0;
- otherwise ``batch_decode(..., skip_special_tokens=True)``: if ``<think>`` or ``</think>`` is a *special* token it
  is dropped, with the same result.

Whether the hub tokenizers of the course's Qwen3 models do either cannot be read offline, so the course holds
either way: :func:`keep_reasoning_for_rewards` turns the parser off (the course trains without tools, the only
thing TRL needs it for) and makes special think tags decode as text, on the trainer's own tokenizer, before the
first step. :func:`tokenizer_file_facts` reads the same facts from a downloaded model's files (the doctor), and
:func:`rewards_see_reasoning` sends a well-formed completion through TRL's decode branch with the loaded
tokenizer and asks the course's format reward (the rehearsal's first-step check).
"""

from __future__ import annotations

import json
from pathlib import Path

from labs.core.runfolder import RUN_JSON, read_json, write_json

THINK_TAGS = ("<think>", "</think>")
PARSER_ATTRIBUTES = ("response_template", "response_schema")
SAMPLE_COMPLETION = "<think>48 / 2 = 24; 48 + 24 = 72</think>\n<answer>72</answer>"


def _tokenizer_of(processing_class):
    """The text tokenizer inside a processor (TRL keeps it as ``trainer._tokenizer``), or the tokenizer itself."""
    return getattr(processing_class, "tokenizer", None) or processing_class


def loaded_tokenizer_facts(tokenizer) -> dict:
    """What this loaded tokenizer does to the think tags when TRL decodes a completion."""
    tok = _tokenizer_of(tokenizer)
    parser = [name for name in PARSER_ATTRIBUTES if getattr(tok, name, None) is not None]
    stripped = []
    for tag in THINK_TAGS:
        ids = tok(tag, add_special_tokens=False)["input_ids"]
        if ids and tok.decode(ids, skip_special_tokens=True) == "":
            stripped.append(tag)
    return {"parser": parser, "special_think_tags": stripped}


def tokenizer_file_facts(folder: Path) -> dict | None:
    """The same facts from a model folder's ``tokenizer_config.json`` and ``tokenizer.json`` (None if absent)."""
    config_path, tokenizer_path = Path(folder) / "tokenizer_config.json", Path(folder) / "tokenizer.json"
    if not config_path.exists():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        added = json.loads(tokenizer_path.read_text(encoding="utf-8")).get("added_tokens", []) \
            if tokenizer_path.exists() else []
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    special = {t.get("content") for t in added if t.get("special")}
    for entry in (config.get("added_tokens_decoder") or {}).values():
        if isinstance(entry, dict) and entry.get("special"):
            special.add(entry.get("content"))
    return {"parser": [name for name in PARSER_ATTRIBUTES if config.get(name) is not None],
            "special_think_tags": [tag for tag in THINK_TAGS if tag in special]}


def describe_es(facts: dict | None) -> str:
    """One Spanish sentence: what TRL would do to the reasoning with these facts."""
    if not facts:
        return "no comprobado (el tokenizer no está descargado todavía)"
    if facts.get("error"):
        return f"no pude leer el tokenizer ({facts['error']})"
    parts = []
    if facts.get("parser"):
        parts.append(f"trae {' y '.join(facts['parser'])}: TRL pasaría <think>…</think> a reasoning_content y "
                     "las recompensas leerían el contenido sin él")
    if facts.get("special_think_tags"):
        parts.append(f"marca {' y '.join(facts['special_think_tags'])} como tokens especiales: TRL los borraría al "
                     "decodificar (skip_special_tokens=True)")
    if not parts:
        return "las recompensas ven <think>…</think> tal como lo genera el modelo"
    return "; ".join(parts) + ". El curso lo corrige al construir el trainer (keep_reasoning_for_rewards)"


def keep_reasoning_for_rewards(processing_class) -> list[str]:
    """Make TRL's decode step hand the rewards the whole completion, ``<think>…</think>`` included.

    Turns off the response parser (``response_template``/``response_schema`` set to None: TRL only needs it to
    parse tool calls, and the course trains without tools) and rebuilds the fast tokenizer with the think tags
    no longer special (their ids do not change; only ``skip_special_tokens`` stops dropping them). Changes the
    object in place, so the trainer's ``processing_class`` and ``_tokenizer`` both see it. Returns what it changed,
    in Spanish, for the run's record (empty when nothing needed changing).
    """
    tok = _tokenizer_of(processing_class)
    facts = loaded_tokenizer_facts(tok)
    changed = []
    for name in facts["parser"]:
        setattr(tok, name, None)
        changed.append(f"{name} apagado: el curso no usa herramientas y el parser apartaba <think>…</think> del "
                       "texto que leen las recompensas")
    if facts["special_think_tags"]:
        from tokenizers import Tokenizer

        spec = json.loads(tok.backend_tokenizer.to_str())
        for token in spec.get("added_tokens", []):
            if token.get("content") in facts["special_think_tags"]:
                token["special"] = False
        tok._tokenizer = Tokenizer.from_str(json.dumps(spec))
        changed.append(f"{' y '.join(facts['special_think_tags'])} ya no son especiales al decodificar (mismos ids): "
                       "skip_special_tokens los borraba")
    still = loaded_tokenizer_facts(tok)
    if still["parser"] or still["special_think_tags"]:
        raise RuntimeError(f"No pude dejar <think>…</think> a la vista de las recompensas: {describe_es(still)}.")
    return changed


def trl_decoded_completion(tokenizer, prompt_ids: list[int], completion_ids: list[int]) -> list[dict]:
    """A conversational completion as TRL's decode step builds it (the two branches, as in its source; TRL 1.16
    also passes the prompt's tools to ``parse_response``, and the course has none)."""
    tok = _tokenizer_of(tokenizer)
    if any(getattr(tok, name, None) is not None for name in PARSER_ATTRIBUTES):
        from trl.chat_template_utils import parse_response

        return [parse_response(tok, completion_ids, prefix=prompt_ids)]
    content = tokenizer.batch_decode([completion_ids], skip_special_tokens=True)[0]
    return [{"role": "assistant", "content": content}]


def rewards_see_reasoning(tokenizer) -> dict:
    """The rehearsal's first-step check: a well-formed completion through TRL's decode branch with this tokenizer
    (its chat template for the prompt), then the course's format reward. ``ok`` if it pays its maximum."""
    from rewards import format_reward as reward
    tok = _tokenizer_of(tokenizer)
    prompt = [{"role": "user", "content": "Natalia vendió 48 clips en abril y la mitad en mayo. ¿Cuántos en total?"}]
    prompt_text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
    completion_ids = tok(SAMPLE_COMPLETION + (tok.eos_token or ""), add_special_tokens=False)["input_ids"]
    completion = trl_decoded_completion(tokenizer, list(prompt_ids), completion_ids)
    paid = reward(prompts=[prompt], completions=[completion], answer=["72"])[0]
    best = reward(prompts=[prompt], completions=[[{"role": "assistant", "content": SAMPLE_COMPLETION}]],
                  answer=["72"])[0]
    out = {"how": "una respuesta bien formada decodificada como la decodifica TRL, pagada por format_reward",
           "content": completion[0].get("content", ""), "paid": paid, "max": best,
           "tokenizer": describe_es(loaded_tokenizer_facts(tok))}
    if paid == best:
        return {**out, "ok": True}
    return {**out, "ok": False, "why_es": (f"format_reward paga {paid} en lugar de {best}: el texto que llega a las "
                                           f"recompensas es {completion[0].get('content', '')!r}")}


def prepare_trainer_tokenizer(trainer, run=None, show=print) -> list[str]:
    """``keep_reasoning_for_rewards`` on a built trainer's tokenizer, before its first step; what changed is said
    and, for a run folder whose run.json exists, recorded there (``reasoning_decoding``)."""
    processing_class = getattr(trainer, "processing_class", None)
    changed = [] if processing_class is None else keep_reasoning_for_rewards(processing_class)
    if changed and run is not None and run.path(RUN_JSON).exists():
        record = read_json(run.path(RUN_JSON))
        record["reasoning_decoding"] = changed
        write_json(run.path(RUN_JSON), record)
    for line in changed:
        show(f"[run] tokenizer: {line} (queda apuntado en run.json).")
    return changed
