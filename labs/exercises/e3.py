"""E3, KL weight: the course's side of the comparison of runs with different ``beta`` (the last logged KL, the
measured KL, the holdout's length and fluency; the mean logged KL and the training length are the student's table,
``comparar_e3``).

Fluency is measured on the holdout completions: repetition inside an answer, distinct-1 and distinct-2
across answers, and the perplexity of the base (reference) model on them. TRL logs no KL when beta = 0,
so the KL to the base model is also estimated here, with the k3 estimator TRL uses, on the completions
sampled at the last training step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from labs.core import diagnostics as dg
from labs.core.profiles import Profile
from labs.exercises.fluency_measures import REPETITION_N, LogProbScorer, fluency, kl_estimate, perplexity
from labs.exercises.runs import RunData, eval_pairs, last_step_samples

# How many completions the fluency and KL measures read per run.
FLUENCY_SAMPLES: dict[str, int] = {"ci": 4, "cpu": 16}
DEFAULT_FLUENCY_SAMPLES = 32


def fluency_samples(profile: Profile) -> int:
    return FLUENCY_SAMPLES.get(profile.name, DEFAULT_FLUENCY_SAMPLES)


def e3_rows(runs: Sequence[RunData], samples: int, measure_model: bool = True) -> list[dict]:
    """E3's comparison: one row for the base model (before GRPO), then one per run.

    ``samples`` holdout completions per row feed the fluency measures and the base model's perplexity;
    ``samples`` completions from the last training step feed the KL estimate. With ``measure_model``
    False, only the text measures are computed (no model is loaded).
    """
    rows = []
    base_run = next((r for r in runs if r.eval_records("base")), None)
    reference = None
    if measure_model and base_run is not None and base_run.record.get("base_model"):
        reference = LogProbScorer.get(base_run.record["base_model"])
    if base_run is not None:
        pairs = eval_pairs(base_run, "base", samples)
        texts = [c for _, c in pairs]
        base_records = base_run.eval_records("base")
        row = {"label": "modelo base (antes de GRPO)", "beta": None, **fluency(texts)}
        row.update(
            kl_logged_last=None, kl_measured=None,
            eval_length=float(np.mean([r["length"] for r in base_records])) if base_records else None,
            accuracy=(base_run.summary or {}).get("base_accuracy"),
            samples=len(texts),
        )
        row.update(_perplexity_columns(reference, pairs))
        rows.append(row)
    for run in runs:
        pairs = eval_pairs(run, "trained", samples)
        texts = [c for _, c in pairs]
        kl = run.series(dg.KL)
        trained = run.eval_records("trained")
        kl_last = float(kl.values[np.isfinite(kl.values)][-1]) if kl is not None and kl.n_finite else None
        measured = None
        if reference is not None and (run.root / "model").is_dir():
            policy = LogProbScorer(str(run.root / "model"), device=reference.device, tokenizer=reference.tokenizer)
            measured = kl_estimate(policy, reference, last_step_samples(run, samples))
            del policy
        row = {
            "label": run.label,
            "beta": (run.record.get("profile") or {}).get("beta"),
            **fluency(texts),
            "kl_logged_last": kl_last,
            "kl_measured": measured,
            "eval_length": float(np.mean([r["length"] for r in trained])) if trained else None,
            "accuracy": (run.summary or {}).get("trained_accuracy"),
            "samples": len(texts),
        }
        row.update(_perplexity_columns(reference, pairs))
        rows.append(row)
    return rows


def _perplexity_columns(reference: LogProbScorer | None, pairs) -> dict:
    if reference is None:
        return {"base_nll": None, "base_perplexity": None}
    p = perplexity(reference, pairs)
    return {"base_nll": p["nll"], "base_perplexity": p["perplexity"]}


E3_COLUMNS = {
    "label": "variante",
    "beta": "beta",
    "kl_logged_last": "KL registrada (último paso)",
    "kl_measured": "KL medida aquí (k3, último paso)",
    "eval_length": "longitud en el holdout (tokens)",
    "repetition": f"repetición ({REPETITION_N}-gramas)",
    "distinct_1": "distinct-1",
    "distinct_2": "distinct-2",
    "base_perplexity": "perplejidad del modelo base",
    "accuracy": "precisión (holdout)",
    "samples": "respuestas medidas",
}
