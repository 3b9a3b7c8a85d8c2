"""E2, reward hacking: the recipe without ``correctness_reward`` against the full recipe.

Correctness is not a reward in the E2 run, so it is read from the holdout (base against trained
accuracy, both tag-gated and by the last number, which does not depend on the format) and, step by step, by scoring the logged training completions with ``correctness_reward``
afterwards. ``labs.core.diagnostics.detect_format_hacking`` gives the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from labs.core import diagnostics as dg
from labs.exercises.curves import edges
from labs.exercises.runs import RunData, gold_by_question, logged_completions, user_question


def training_correctness(run: RunData, golds: dict[str, str] | None = None) -> list[dict]:
    """Per training step, the logged completions scored afterwards with the lesson's reward functions.

    ``accuracy``: share with the right number (``correctness_reward`` > 0), whether or not correctness
    was a reward in that run; ``format_rate``: share with the full format (``format_reward`` > 0).
    """
    from rewards import correctness_reward, format_reward

    rows = logged_completions(run)
    if not rows:
        return []
    if golds is None:
        source = (run.record.get("profile") or {}).get("data_source", "bundled")
        golds = gold_by_question(source)
    by_step: dict[int, list[tuple[bool, bool]]] = {}
    for r in rows:
        gold = golds.get(user_question(r["prompt"]))
        if gold is None:
            continue
        right = correctness_reward([r["text"]], [gold])[0] > 0
        formatted = format_reward([r["text"]])[0] > 0
        by_step.setdefault(r["step"], []).append((right, formatted))
    return [
        {
            "step": step,
            "n": len(pairs),
            "accuracy": sum(a for a, _ in pairs) / len(pairs),
            "format_rate": sum(f for _, f in pairs) / len(pairs),
        }
        for step, pairs in sorted(by_step.items())
    ]


def e2_rows(runs: Sequence[RunData], golds: dict[str, str] | None = None) -> list[dict]:
    """The course's side of E2's comparison: correctness while training (scored afterwards) and on the holdout,
    and the hacking verdict. The format reward at the start and at the end is the student's table (``comparar_e2``)."""
    out = []
    for run in runs:
        corr = dg.correctness_series(run.metrics)
        offline = training_correctness(run, golds)
        acc = [r["accuracy"] for r in offline]
        steps = [r["step"] for r in offline]
        s = run.summary or {}
        finding = dg.detect_format_hacking(run.metrics, run.summary)
        corr_first, corr_last = edges(corr.values, corr.steps) if corr is not None else (None, None)
        acc_first, acc_last = edges(acc, steps) if acc else (None, None)
        out.append(
            {
                "label": run.label,
                "rewards": ", ".join(run.reward_names),
                "correctness_reward_first": corr_first,
                "correctness_reward_last": corr_last,
                "train_accuracy_first": acc_first,
                "train_accuracy_last": acc_last,
                "base_accuracy": s.get("base_accuracy"),
                "trained_accuracy": s.get("trained_accuracy"),
                "base_accuracy_last_number": s.get("base_accuracy_last_number"),
                "trained_accuracy_last_number": s.get("trained_accuracy_last_number"),
                "base_format_rate": s.get("base_format_rate"),
                "trained_format_rate": s.get("trained_format_rate"),
                "mcnemar_p": s.get("mcnemar_p"),
                "holdout_n": s.get("n"),
                "hacking": finding.holds,
                "finding": finding,
            }
        )
    return out


E2_COLUMNS = {
    "label": "variante",
    "rewards": "recompensas",
    "correctness_reward_first": "corrección (recompensa) al principio",
    "correctness_reward_last": "corrección (recompensa) al final",
    "train_accuracy_first": "aciertos en entrenamiento al principio",
    "train_accuracy_last": "aciertos en entrenamiento al final",
    "base_accuracy": "precisión base (holdout)",
    "trained_accuracy": "precisión entrenado (holdout)",
    "base_accuracy_last_number": "aritmética base (holdout, último número)",
    "trained_accuracy_last_number": "aritmética entrenado (holdout, último número)",
    "base_format_rate": "formato base (holdout)",
    "trained_format_rate": "formato entrenado (holdout)",
    "mcnemar_p": "McNemar p",
    "holdout_n": "problemas",
}


def hacking_examples(run: RunData, k: int = 3, max_chars: int = 400) -> list[dict]:
    """Holdout problems the trained model answers in perfect format but with the wrong number.

    Each example carries the base model's answer to the same problem. When there are fewer than ``k``
    such problems, wrong answers without the format fill the list (so a student always sees some).
    """
    base = {r.get("id"): r for r in run.eval_records("base")}
    trained = run.eval_records("trained")
    hacked = [r for r in trained if r.get("format_ok") and not r.get("correct")]
    others = [r for r in trained if not r.get("correct") and not r.get("format_ok")]
    picked = (hacked + others)[:k]
    out = []
    for r in picked:
        b = base.get(r.get("id"), {})
        out.append(
            {
                "id": r.get("id"),
                "gold": r.get("gold"),
                "trained_extracted": r.get("extracted"),
                "trained_format_ok": bool(r.get("format_ok")),
                "trained_completion": str(r.get("completion", ""))[:max_chars],
                "base_extracted": b.get("extracted"),
                "base_correct": b.get("correct"),
                "base_completion": str(b.get("completion", ""))[:max_chars],
            }
        )
    return out


def training_examples(run: RunData, golds: dict[str, str] | None = None, k: int = 3, max_chars: int = 400) -> list[dict]:
    """Completions the policy sampled at the last logged step, best format reward first, each scored
    afterwards for correctness (which the E2 run never rewarded)."""
    from rewards import correctness_reward

    rows = logged_completions(run)
    if not rows:
        return []
    if golds is None:
        golds = gold_by_question((run.record.get("profile") or {}).get("data_source", "bundled"))
    last = max(r["step"] for r in rows)
    picked = [r for r in rows if r["step"] == last]
    fmt_names = [n for n in run.reward_names if dg.is_format_name(n)]
    for r in picked:
        r["format_paid"] = sum(r["rewards"].get(n, 0.0) for n in fmt_names)
    picked.sort(key=lambda r: -r["format_paid"])
    out = []
    for r in picked[:k]:
        gold = golds.get(user_question(r["prompt"]))
        out.append(
            {
                "step": r["step"],
                "question": user_question(r["prompt"])[:max_chars],
                "gold": gold,
                "format_paid": r["format_paid"],
                "correct": None if gold is None else correctness_reward([r["text"]], [gold])[0] > 0,
                "completion": r["text"][:max_chars],
            }
        )
    return out


def format_curve(run: RunData):
    s = dg.format_series(run.metrics)
    return (s.steps, s.values) if s is not None else ([], [])


def accuracy_curve(golds: dict[str, str] | None = None):
    """A ``plot_series`` key: the training completions' accuracy, scored afterwards."""

    def curve(run: RunData):
        rows = training_correctness(run, golds)
        return [r["step"] for r in rows], [r["accuracy"] for r in rows]

    return curve
