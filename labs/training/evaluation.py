"""Holdout evaluation: base against trained on the same GSM8K test problems.

Same prompt (labs.training.data.build_prompt), same extractor (rewards.extract_answer), greedy decoding, and
the same problems for both models, so the comparison is paired (labs.core.stats.paired_comparison:
exact McNemar on the discordant pairs and a bootstrap interval for the difference).

Two readings of each answer: ``correct``, the number inside the one ``<answer>`` block (what the reward
pays and criterion 3 grades), and ``correct_last_number``, the last number anywhere in the completion
(``rewards.last_number``, the same strict reader), which does not depend on the format. A run that only
learned the format raises the first (answers become readable) and not the second: "the format rose,
the arithmetic did not".

Generation goes through vLLM when the run has an engine (the colocated engine of GRPOTrainer, whose
weights are the trainer's after a sync), otherwise through transformers' ``generate``.
"""

from __future__ import annotations

from labs.core import stats
from labs.core.runfolder import EVAL_SUMMARY, RunFolder, read_jsonl, write_json, write_jsonl
from labs.core.spanish import plural
from rewards import extract_answer, format_reward, last_number

DATASET_NAME = "openai/gsm8k:main:test"


def _chat_texts(tokenizer, rows: list[dict]) -> list[str]:
    return [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]


def generate_vllm(llm, tokenizer, rows: list[dict], max_new_tokens: int) -> list[tuple[str, int]]:
    """Greedy completions from a vLLM engine: (text, number of completion tokens) per row."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    outputs = llm.generate(_chat_texts(tokenizer, rows), params, use_tqdm=False)
    return [(o.outputs[0].text, len(o.outputs[0].token_ids)) for o in outputs]


def generate_hf(model, tokenizer, rows: list[dict], max_new_tokens: int, batch_size: int = 8):
    """Greedy completions with transformers (left padding so every prompt ends where generation starts)."""
    import torch

    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = _chat_texts(tokenizer, rows)
    results = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
            ).to(model.device)
            with torch.no_grad():
                out = model.generate(
                    **batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
                )
            new_tokens = out[:, batch["input_ids"].shape[1] :]
            for row in new_tokens:
                ids = [t for t in row.tolist() if t != tokenizer.pad_token_id]
                results.append((tokenizer.decode(ids, skip_special_tokens=True), len(ids)))
    finally:
        model.train(was_training)
    return results


def score(rows: list[dict], generations: list[tuple[str, int]]) -> list[dict]:
    """One record per problem, in the run-folder layout (labs.core.runfolder.EVAL_RECORD_KEYS)."""
    records = []
    for row, (text, length) in zip(rows, generations, strict=True):
        extracted = extract_answer(text)
        last = last_number(text)
        gold = int(row["answer"])
        records.append(
            {
                "id": row["id"],
                "gold": gold,
                "extracted": None if extracted is None else format(extracted.normalize(), "f"),
                "correct": extracted is not None and extracted == gold,
                "last_number": None if last is None else format(last.normalize(), "f"),
                "correct_last_number": last is not None and last == gold,
                "format_ok": format_reward([text])[0] > 0,
                "length": length,
                "completion": text,
            }
        )
    return records


def evaluate(rows, generate, run: RunFolder, which: str) -> list[dict]:
    """Generate and score the holdout; write ``eval/<which>.jsonl``. Reuses a complete earlier file."""
    path = run.path(f"eval/{which}.jsonl")
    if path.exists():
        records = read_jsonl(path)
        if [r.get("id") for r in records] == [r["id"] for r in rows]:
            print(f"[eval] Reutilizo {path.relative_to(run.root)} ({plural(len(records), 'problema')}).")
            if any("correct_last_number" not in r for r in records):  # written before the field existed
                write_jsonl(path, with_last_number(records))
            return records
    records = score(rows, generate(rows))
    write_jsonl(path, records)
    return records


def with_last_number(records: list[dict]) -> list[dict]:
    """Records of an older evaluation file get ``correct_last_number`` from their stored completion."""
    for r in records:
        if "correct_last_number" not in r and isinstance(r.get("completion"), str):
            last = last_number(r["completion"])
            r["last_number"] = None if last is None else format(last.normalize(), "f")
            r["correct_last_number"] = last is not None and last == r["gold"]
    return records


def summarize(run: RunFolder, base: list[dict], trained: list[dict], base_label: str) -> dict:
    """Paired comparison of the two evaluation files, written as eval/summary.json."""
    if [r["id"] for r in base] != [r["id"] for r in trained]:
        raise ValueError("base and trained evaluations cover different problems")
    summary = stats.paired_comparison([r["correct"] for r in base], [r["correct"] for r in trained])
    base, trained = with_last_number(base), with_last_number(trained)
    last = stats.paired_comparison([r["correct_last_number"] for r in base], [r["correct_last_number"] for r in trained])
    summary.update(
        dataset=DATASET_NAME,
        base_label=base_label,
        accuracy_field="correct",  # the tag-gated reading: base_accuracy, trained_accuracy, the test
        base_accuracy_last_number=last["base_accuracy"],
        trained_accuracy_last_number=last["trained_accuracy"],
        last_number=last,  # the same paired comparison on correct_last_number (format-independent)
        base_format_rate=sum(r["format_ok"] for r in base) / len(base),
        trained_format_rate=sum(r["format_ok"] for r in trained) / len(trained),
        base_mean_length=sum(r["length"] for r in base) / len(base),
        trained_mean_length=sum(r["length"] for r in trained) / len(trained),
        decoding="greedy",
    )
    write_json(run.path(EVAL_SUMMARY), summary)
    return summary


def describe_es(summary: dict) -> str:
    """The comparison in one Spanish paragraph, from the summary's own numbers."""
    lo, hi = summary["ci95"]
    gained, lost = summary["base_wrong_trained_right"], summary["base_right_trained_wrong"]
    return (
        f"Holdout de {summary['n']} problemas de test (mismos problemas, mismo prompt, decodificación greedy). "
        f"Base ({summary['base_label']}): {summary['base_accuracy']:.1%} de aciertos, "
        f"{summary['base_format_rate']:.0%} con el formato pedido. Entrenado: {summary['trained_accuracy']:.1%}, "
        f"{summary['trained_format_rate']:.0%} con formato. Diferencia {summary['difference']:+.1%} "
        f"(IC 95% bootstrap [{lo:+.1%}, {hi:+.1%}]); {plural(gained, 'problema pasa', 'problemas pasan')} de fallo a acierto y "
        f"{lost} de acierto a fallo; McNemar exacto p = {summary['mcnemar_p']:.3g}."
    ) + (
        f" Leyendo el último número de cada respuesta, con o sin etiquetas (la aritmética sin el formato): "
        f"base {summary['base_accuracy_last_number']:.1%}, entrenado {summary['trained_accuracy_last_number']:.1%}."
        if "base_accuracy_last_number" in summary else ""
    )
