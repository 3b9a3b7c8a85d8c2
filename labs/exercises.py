"""Exercises E1 to E3 of lesson 7.7: the variants each one runs and the numbers that answer it.

- **E1, group size.** ``num_generations`` G = 4 against G = 16 (2 against 4 on the ``ci`` profile) with
  the same number of *prompts* per optimizer step, so both runs see the same problems at the same step
  and differ only in how many answers they sample per problem. ``group_size_overrides`` keeps
  ``generation_batch_size / num_generations`` constant: the completions per step grow with G, and so
  does ``gradient_accumulation_steps`` (``per_device_train_batch_size``, the memory of one micro-batch,
  stays as it is whenever it divides the new batch). Measured: the spread of the reward curve around its
  trend, the share of groups whose G rewards were all equal (``frac_reward_zero_std``: no advantage, no
  signal), the mean and spread of ``grad_norm``, the steps (and seconds) until the smoothed reward first
  reaches a shared threshold, the seconds per step (``step_time``), and from the logged completions the
  standard error of each group's baseline, s/sqrt(G) (lesson L6: a larger group estimates the baseline
  better).
- **E2, reward hacking.** The lesson's recipe without ``correctness_reward`` (only the format rewards)
  against the full recipe. Correctness is not a reward in the E2 run, so it is read from the holdout
  (base against trained accuracy) and, step by step, by scoring the logged training completions with
  ``correctness_reward`` afterwards. ``labs.diagnostics.detect_format_hacking`` gives the verdict.
- **E3, KL weight.** ``beta`` = 0.2 and 0.0 against the recipe's 0.04 (0.0 only, on ci): the logged KL, the completion
  length, and fluency measured on the holdout completions: repetition inside an answer, distinct-1 and
  distinct-2 across answers, and the perplexity of the base (reference) model on them. TRL logs no KL
  when beta = 0, so the KL to the base model is also estimated here, with the k3 estimator TRL uses, on
  the completions sampled at the last training step.

Every number comes from the run folders (``labs.runfolder``); nothing here trains. The variants run
through ``labs.sweep``. Run names carry the profile name; a variant whose settings are identical to the
reference recipe (``reference_variant``) is that same run, shared between exercises (and, where the
exercises' budget is the lab's, shared with the student's finished L7.1 run).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from labs import diagnostics as dg
from labs import stats
from labs.paths import runs_dir
from labs.profiles import Profile, get_profile
from labs.runfolder import EVAL_BASE, EVAL_SUMMARY, EVAL_TRAINED, RUN_JSON, RunFolder, read_json, read_jsonl
from labs.sweep import Variant, settings_mismatch
from rewards import REWARD_NAMES

# --------------------------------------------------------------------------------------------------
# budgets and variants
# --------------------------------------------------------------------------------------------------

# Budget overrides per profile. None on ci: the ci profile already has the smallest budgets that run
# every code path, and with the lab's own budget the reference recipe *is* the L7.1 notebook's finished
# run (``reference_variant``), so the test suite trains it once, not once more for the exercises.
SMOKE_OVERRIDES: dict[str, dict] = {}
LESSON_GROUP_SIZES = (4, 16)
# On ci the larger G is the recipe's own G = 4 (shared with the reference run) and the smaller is 2:
# one extra short run instead of a G = 16 (or 8) one that would multiply the completions of the test suite.
GROUP_SIZES: dict[str, tuple[int, int]] = {"ci": (2, 4)}
E3_BETAS = (0.0, 0.2)  # the lesson: "sube beta a 0.2 y bájalo a 0.0", against the recipe's value
# On ci, beta = 0 (no reference model, no logged KL) and the recipe's beta already run every code path;
# a third smoke run would only add minutes.
E3_BETAS_BY_PROFILE: dict[str, tuple[float, ...]] = {"ci": (0.0,)}
E2_REWARDS = ("format_reward", "soft_format_reward")
# How many completions the fluency and KL measures read per run.
FLUENCY_SAMPLES: dict[str, int] = {"ci": 4, "cpu": 16}
DEFAULT_FLUENCY_SAMPLES = 32
REPETITION_N = 3
THRESHOLD_FRACTION = 0.5
FIGURES_DIR = "_ejercicios"


def is_smoke_test(profile: Profile) -> bool:
    return profile.name == "ci"


def budget_note(profile: Profile) -> str:
    """What the numbers of this profile can and cannot say, in Spanish."""
    if is_smoke_test(profile):
        return (
            f"Perfil '{profile.name}': esto es una PRUEBA DE HUMO. Cada variante entrena "
            f"{profile_for(profile).max_steps} pasos y evalúa {profile_for(profile).eval_size} problemas, solo para "
            "comprobar que todo el código corre de principio a fin. Los números de abajo se calculan de verdad, "
            "pero con tan pocos pasos no dicen nada sobre la pregunta del ejercicio: para contestarla usa el "
            "perfil 'rtx5090' (o, como mínimo, 'cpu')."
        )
    if profile.use_cpu:
        return (
            f"Perfil '{profile.name}': presupuesto reducido de CPU ({profile.model}, {profile.max_steps} pasos, "
            f"{profile.eval_size} problemas de evaluación). Las tendencias orientan, pero con tan pocos pasos y "
            "problemas la mayoría de diferencias no serán significativas; las conclusiones, con 'rtx5090'."
        )
    return (
        f"Perfil '{profile.name}': el presupuesto de la lección ({profile.model}, {profile.max_steps} pasos, "
        f"{profile.eval_size} problemas de evaluación). Cada variante tarda horas: el barrido continúa donde se "
        "quedó si lo interrumpes."
    )


def resolve_profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def base_overrides(profile: Profile) -> dict:
    """Settings every exercise variant of this profile changes (the smoke-test budget on ci)."""
    return dict(SMOKE_OVERRIDES.get(profile.name, {}))


def profile_for(profile: Profile) -> Profile:
    """The profile with the exercises' budget applied."""
    return profile.replace(**base_overrides(profile))


def lab_run_names(profile: Profile) -> tuple[str, ...]:
    """Where lab L7.1 leaves its run on this profile: the command line's and the notebook's default names."""
    return (f"l71-{profile.name}", f"l71-notebook-{profile.name}")


def reference_variant(profile: Profile | str | None = None, runs_root=None) -> Variant:
    """The lesson's recipe (three rewards, the profile's G and beta) on the exercises' budget.

    Its run folder is ``ref-<profile>``, unless that has not finished and the student's own L7.1 run
    (``lab_run_names``) finished with exactly these settings: then that run is the reference, so the
    lesson's recipe is never trained twice (hours on ``rtx5090``; minutes of the test suite on ``ci``).
    """
    profile = resolve_profile(profile)
    p = profile_for(profile)
    label = f"receta de la lección (G={p.num_generations}, beta={p.beta:g}, tres recompensas)"
    ref = Variant(f"ref-{profile.name}", base_overrides(profile), None, label, "L7.1")
    root = Path(runs_root) if runs_root is not None else runs_dir()
    if RunFolder(root / ref.name).is_finished():
        return ref
    for name in lab_run_names(profile):
        folder = RunFolder(root / name)
        candidate = Variant(name, dict(ref.overrides), None, f"{label}, tu ejecución del L7.1", "L7.1")
        if folder.exists() and folder.is_finished() and not settings_mismatch(candidate, profile, folder):
            return candidate
    return ref


def _reward_names(variant: Variant) -> tuple[str, ...]:
    return tuple(REWARD_NAMES) if variant.rewards is None else tuple(variant.rewards)


def same_settings(a: Variant, b: Variant, profile: Profile) -> bool:
    return a.profile(profile).as_dict() == b.profile(profile).as_dict() and _reward_names(a) == _reward_names(b)


def shared_with_reference(variant: Variant, profile: Profile, note: str, runs_root=None) -> Variant:
    """The reference run itself when ``variant`` would train exactly the same thing, else ``variant``."""
    ref = reference_variant(profile, runs_root)
    if same_settings(variant, ref, profile):
        return Variant(ref.name, dict(ref.overrides), ref.rewards, f"{variant.label} = {note}", ref.lab)
    return variant


def group_sizes(profile: Profile) -> tuple[int, int]:
    return GROUP_SIZES.get(profile.name, LESSON_GROUP_SIZES)


def group_size_overrides(profile: Profile, num_generations: int, prompts_per_step: int | None = None) -> dict:
    """Batch settings for G = ``num_generations`` with the same prompts per step as ``profile``.

    Completions per step = prompts x G. ``per_device_train_batch_size`` (one micro-batch) is kept when it
    divides that number (else the largest divisor of both), and ``gradient_accumulation_steps`` makes up
    the rest, so ``generation_batch_size = per_device x accumulation`` is divisible by G and
    ``generation_batch_size / G`` equals the prompts per step.
    """
    g = int(num_generations)
    if g < 2:
        raise ValueError("GRPO necesita al menos 2 generaciones por prompt (num_generations >= 2).")
    prompts = int(prompts_per_step or profile.prompts_per_step)
    if prompts < 1:
        raise ValueError("hace falta al menos un prompt por paso")
    completions = prompts * g
    per_device = math.gcd(profile.per_device_train_batch_size, completions)
    return {
        "num_generations": g,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": completions // per_device,
    }


def e1_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """G small and G large with the same prompts per step (see ``group_size_overrides``)."""
    profile = resolve_profile(profile)
    budget = profile_for(profile)
    out = []
    for g in group_sizes(profile):
        overrides = {**base_overrides(profile), **group_size_overrides(budget, g)}
        v = Variant(f"e1-{profile.name}-g{g}", overrides, None, f"G={g}", "E1")
        out.append(shared_with_reference(v, profile, "la receta de referencia", runs_root))
    return out


def e2_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """The recipe (control) and the recipe without correctness_reward."""
    profile = resolve_profile(profile)
    only_format = Variant(
        f"e2-{profile.name}-solo-formato", base_overrides(profile), E2_REWARDS,
        "solo formato (sin corrección)", "E2",
    )
    ref = reference_variant(profile, runs_root)
    control = Variant(ref.name, dict(ref.overrides), ref.rewards, "con corrección (receta de la lección)", ref.lab)
    return [control, only_format]


def e3_betas(profile: Profile) -> tuple[float, ...]:
    """The betas compared with the recipe's on this profile."""
    return E3_BETAS_BY_PROFILE.get(profile.name, E3_BETAS)


def e3_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """beta 0.0, the recipe's beta and 0.2 (0.2 not on ci), in increasing order."""
    profile = resolve_profile(profile)
    recipe_beta = profile_for(profile).beta
    betas = sorted(set(e3_betas(profile)) | {recipe_beta})
    out = []
    for beta in betas:
        overrides = {**base_overrides(profile), "beta": float(beta)}
        v = Variant(f"e3-{profile.name}-beta{beta:g}", overrides, None, f"beta={beta:g}", "E3")
        out.append(shared_with_reference(v, profile, "la receta de referencia", runs_root))
    return out


def settings_table(variants: Sequence[Variant], profile: Profile | str | None = None) -> list[dict]:
    """The batch settings each variant trains with (E1 shows how they change with G)."""
    profile = resolve_profile(profile)
    rows = []
    for v in variants:
        p = v.profile(profile)
        rows.append(
            {
                "variante": v.label,
                "carpeta": v.name,
                "G (num_generations)": p.num_generations,
                "per_device_train_batch_size": p.per_device_train_batch_size,
                "gradient_accumulation_steps": p.gradient_accumulation_steps,
                "generation_batch_size": p.generation_batch_size,
                "prompts por paso": p.prompts_per_step,
                "beta": p.beta,
                "recompensas": ", ".join(_reward_names(v)),
                "pasos": p.max_steps,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------------
# reading a run folder
# --------------------------------------------------------------------------------------------------


@dataclass
class RunData:
    """What an exercise reads from one run folder."""

    label: str
    root: Path
    record: dict = field(default_factory=dict)
    metrics: list[dict] = field(default_factory=list)
    summary: dict | None = None

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def num_generations(self) -> int | None:
        return (self.record.get("profile") or {}).get("num_generations")

    @property
    def reward_names(self) -> list[str]:
        names = self.record.get("reward_functions") or []
        return [n.get("name") if isinstance(n, dict) else n for n in names]

    def eval_records(self, which: str = "trained") -> list[dict]:
        path = self.root / (EVAL_TRAINED if which == "trained" else EVAL_BASE)
        return read_jsonl(path) if path.exists() else []

    def series(self, key: str) -> dg.Series | None:
        return dg.series(self.metrics, key)


def load_run(variant: Variant | str | Path, runs_root=None, label: str | None = None) -> RunData:
    """Read a run folder (by variant, by name inside ``runs_root``, or by path)."""
    if isinstance(variant, Variant):
        root = Path(runs_root or runs_dir()) / variant.name
        label = label or variant.label
    else:
        root = Path(variant)
        if not root.is_absolute() and not root.exists():
            root = Path(runs_root or runs_dir()) / root
    folder = RunFolder(root)
    try:
        record = read_json(folder.path(RUN_JSON))
    except (FileNotFoundError, json.JSONDecodeError):
        record = {}
    try:
        summary = read_json(folder.path(EVAL_SUMMARY))
    except (FileNotFoundError, json.JSONDecodeError):
        summary = None
    return RunData(label or root.name, root, record, folder.metrics(), summary)


def load_runs(variants: Sequence[Variant], runs_root=None) -> list[RunData]:
    return [load_run(v, runs_root) for v in variants]


def completion_files(root: Path) -> list[Path]:
    """TRL's per-step completion logs of a run (``checkpoints/completions/completions_*.parquet``)."""
    files = []
    for where in (root / "checkpoints" / "completions", root / "completions"):
        if where.is_dir():
            files += sorted(where.glob("completions_*.parquet"))
    return files


def _as_messages(value):
    if value is None:
        return []
    if isinstance(value, str):
        return value
    return [dict(m) for m in list(value)]


def logged_completions(run: RunData) -> list[dict]:
    """Every logged training completion: step, prompt (messages), text, one reward per function, advantage."""
    import pandas as pd

    from rewards import completion_text

    rows = []
    for path in completion_files(run.root):
        frame = pd.read_parquet(path)
        for rec in frame.to_dict("records"):
            step = int(rec.get("step", 0))
            prompt = _as_messages(rec.get("prompt"))
            completion = _as_messages(rec.get("completion"))
            rewards = {k: float(rec[k]) for k in frame.columns if k in (run.reward_names or REWARD_NAMES) and rec.get(k) is not None}
            rows.append(
                {"step": step, "prompt": prompt, "text": completion_text(completion), "rewards": rewards,
                 "advantage": rec.get("advantage")}
            )
    rows.sort(key=lambda r: r["step"])
    return rows


def user_question(prompt) -> str:
    """The user turn of a conversational prompt (or the prompt itself when it is plain text)."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""


# --------------------------------------------------------------------------------------------------
# E1: curve statistics
# --------------------------------------------------------------------------------------------------


def _finite(values, steps=None) -> tuple[np.ndarray, np.ndarray]:
    y = stats.to_array(values)
    x = np.arange(1, len(y) + 1, dtype=float) if steps is None else stats.to_array(steps)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def curve_spread(values, steps=None) -> float | None:
    """Standard deviation of a curve around its least-squares straight line (its step-to-step noise).

    Removing the line first means a curve that rises steadily is not called "unstable" for rising.
    None with fewer than 3 finite values (a line through 2 points leaves no residual to measure).
    """
    x, y = _finite(values, steps)
    if len(y) < 3:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    return float(np.sqrt(np.sum(residuals**2) / (len(y) - 2)))


def mean_std(values) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the finite values (None where undefined)."""
    _, y = _finite(values)
    if len(y) == 0:
        return None, None
    return float(np.mean(y)), (float(np.std(y, ddof=1)) if len(y) > 1 else None)


def steps_to_threshold(values, steps, threshold: float | None) -> int | None:
    """First step at which the smoothed curve (the EMA the plots draw) reaches ``threshold``."""
    if threshold is None:
        return None
    x, y = _finite(values, steps)
    if len(y) == 0:
        return None
    smoothed = stats.smooth(y)
    hits = np.nonzero(smoothed >= threshold)[0]
    return int(x[hits[0]]) if len(hits) else None


def shared_threshold(curves: Iterable, fraction: float = THRESHOLD_FRACTION) -> float | None:
    """A reward level every compared run can be timed against.

    ``fraction`` of the way from the lowest starting value to the highest final value among the
    smoothed curves: with 0.5, "half of the best improvement any run made". None when no run improved.
    """
    starts, ends = [], []
    for values in curves:
        _, y = _finite(values)
        if len(y) == 0:
            continue
        smoothed = stats.smooth(y)
        starts.append(smoothed[0])
        ends.append(smoothed[-1])
    if not starts:
        return None
    low, high = min(starts), max(ends)
    if not high > low:
        return None
    return float(low + fraction * (high - low))


def seconds_until(run: RunData, step: int | None) -> float | None:
    """Training seconds (sum of ``step_time``) up to and including ``step``."""
    if step is None:
        return None
    s = run.series("step_time")
    if s is None:
        return None
    keep = (s.steps <= step) & np.isfinite(s.values)
    return float(np.sum(s.values[keep])) if keep.any() else None


def group_statistics(run: RunData) -> dict:
    """Per-group numbers from the logged completions: groups, equal-reward share, baseline standard error.

    Each group is the G completions of one prompt at one step; its reward is the sum of the reward
    functions (GRPOConfig's default weights, all 1). The baseline of a group is its mean reward, whose
    standard error is s / sqrt(G) with s the group's sample standard deviation (lesson L6).
    """
    rows = logged_completions(run)
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        if not r["rewards"]:
            continue
        key = (r["step"], json.dumps(r["prompt"], sort_keys=True, ensure_ascii=False))
        groups.setdefault(key, []).append(sum(r["rewards"].values()))
    sizes = [len(g) for g in groups.values()]
    stds = [float(np.std(g, ddof=1)) for g in groups.values() if len(g) > 1]
    ses = [float(np.std(g, ddof=1) / math.sqrt(len(g))) for g in groups.values() if len(g) > 1]
    equal = [bool(np.ptp(g) == 0) for g in groups.values() if len(g) > 1]
    return {
        "groups": len(groups),
        "group_size": int(np.median(sizes)) if sizes else None,
        "within_group_std": float(np.mean(stds)) if stds else None,
        "baseline_se": float(np.mean(ses)) if ses else None,
        "equal_reward_share": float(np.mean(equal)) if equal else None,
    }


def e1_rows(runs: Sequence[RunData], threshold: float | None = None) -> list[dict]:
    """E1's comparison, one dict per run (None where a number cannot be computed)."""
    rewards = [r.series(dg.REWARD) for r in runs]
    if threshold is None:
        threshold = shared_threshold([s.values for s in rewards if s is not None])
    out = []
    for run, reward in zip(runs, rewards):
        grad = run.series("grad_norm")
        zero = run.series(dg.ZERO_STD)
        step_time = run.series("step_time")
        gen = run.series("course/generation_seconds")
        grad_mean, grad_std = mean_std(grad.values if grad is not None else [])
        reached = steps_to_threshold(reward.values, reward.steps, threshold) if reward is not None else None
        groups = group_statistics(run)
        out.append(
            {
                "label": run.label,
                "G": run.num_generations,
                "steps": int(reward.n_finite) if reward is not None else 0,
                "reward_first": stats.trend(reward.values, reward.steps)["first_mean"] if reward is not None else None,
                "reward_last": stats.trend(reward.values, reward.steps)["last_mean"] if reward is not None else None,
                "reward_spread": curve_spread(reward.values, reward.steps) if reward is not None else None,
                "zero_std_share": mean_std(zero.values)[0] if zero is not None else None,
                "grad_norm_mean": grad_mean,
                "grad_norm_std": grad_std,
                "threshold": threshold,
                "steps_to_threshold": reached,
                "seconds_to_threshold": seconds_until(run, reached),
                "seconds_per_step": mean_std(step_time.values)[0] if step_time is not None else None,
                "generation_seconds_per_step": mean_std(gen.values)[0] if gen is not None else None,
                "baseline_se": groups["baseline_se"],
                "within_group_std": groups["within_group_std"],
                "base_accuracy": (run.summary or {}).get("base_accuracy"),
                "trained_accuracy": (run.summary or {}).get("trained_accuracy"),
            }
        )
    return out


E1_COLUMNS = {
    "label": "variante",
    "G": "G",
    "steps": "pasos registrados",
    "reward_first": "recompensa al principio",
    "reward_last": "recompensa al final",
    "reward_spread": "dispersión de la curva (std de residuos)",
    "zero_std_share": "grupos sin varianza (media)",
    "grad_norm_mean": "grad_norm media",
    "grad_norm_std": "grad_norm std",
    "steps_to_threshold": "pasos hasta el umbral",
    "seconds_to_threshold": "segundos hasta el umbral",
    "seconds_per_step": "segundos por paso",
    "generation_seconds_per_step": "de ellos generando",
    "within_group_std": "std de la recompensa dentro del grupo",
    "baseline_se": "error típico de la baseline (s/√G)",
    "base_accuracy": "precisión base (holdout)",
    "trained_accuracy": "precisión entrenado (holdout)",
}


# --------------------------------------------------------------------------------------------------
# E2: reward hacking
# --------------------------------------------------------------------------------------------------


def gold_by_question(source: str = "bundled", split: str = "train") -> dict[str, str]:
    from labs import data

    return {row["question"]: row["answer"] for row in data.load_split(split, source)}


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


def _edges(values, steps=None) -> tuple[float | None, float | None]:
    t = stats.trend(values, steps)
    return t["first_mean"], t["last_mean"]


def e2_rows(runs: Sequence[RunData], golds: dict[str, str] | None = None) -> list[dict]:
    """E2's comparison: format reward, correctness while training (scored afterwards) and on the holdout."""
    out = []
    for run in runs:
        fmt = dg.format_series(run.metrics)
        corr = dg.correctness_series(run.metrics)
        offline = training_correctness(run, golds)
        acc = [r["accuracy"] for r in offline]
        steps = [r["step"] for r in offline]
        s = run.summary or {}
        finding = dg.detect_format_hacking(run.metrics, run.summary)
        fmt_first, fmt_last = _edges(fmt.values, fmt.steps) if fmt is not None else (None, None)
        corr_first, corr_last = _edges(corr.values, corr.steps) if corr is not None else (None, None)
        acc_first, acc_last = _edges(acc, steps) if acc else (None, None)
        out.append(
            {
                "label": run.label,
                "rewards": ", ".join(run.reward_names),
                "format_first": fmt_first,
                "format_last": fmt_last,
                "correctness_reward_first": corr_first,
                "correctness_reward_last": corr_last,
                "train_accuracy_first": acc_first,
                "train_accuracy_last": acc_last,
                "base_accuracy": s.get("base_accuracy"),
                "trained_accuracy": s.get("trained_accuracy"),
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
    "format_first": "formato (recompensa) al principio",
    "format_last": "formato (recompensa) al final",
    "correctness_reward_first": "corrección (recompensa) al principio",
    "correctness_reward_last": "corrección (recompensa) al final",
    "train_accuracy_first": "aciertos en entrenamiento al principio",
    "train_accuracy_last": "aciertos en entrenamiento al final",
    "base_accuracy": "precisión base (holdout)",
    "trained_accuracy": "precisión entrenado (holdout)",
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


# --------------------------------------------------------------------------------------------------
# E3: fluency measures on text
# --------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks: the units of repetition and distinct-n."""
    return _WORD.findall(str(text).lower())


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    if n < 1:
        raise ValueError("n must be at least 1")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repetition_rate(text: str, n: int = REPETITION_N) -> float | None:
    """Share of the n-grams of one answer that repeat an earlier n-gram of the same answer.

    ``1 - unique n-grams / n-grams`` (the "rep-n" of Welleck et al., 2019): 0 for text that never
    repeats itself, close to 1 for a loop. None when the answer has fewer than n words.
    """
    grams = ngrams(words(text), n)
    if not grams:
        return None
    return 1.0 - len(set(grams)) / len(grams)


def distinct_n(texts: Iterable[str], n: int) -> float | None:
    """Distinct-n (Li et al., 2016) over a set of answers: unique n-grams / all n-grams, pooled.

    High when the answers use varied wording, low when they repeat the same phrases (within or
    across answers). None when the answers hold no n-gram at all.
    """
    counts: Counter = Counter()
    for text in texts:
        counts.update(ngrams(words(text), n))
    total = sum(counts.values())
    if total == 0:
        return None
    return len(counts) / total


def mean_repetition(texts: Iterable[str], n: int = REPETITION_N) -> float | None:
    rates = [r for r in (repetition_rate(t, n) for t in texts) if r is not None]
    return float(np.mean(rates)) if rates else None


# --------------------------------------------------------------------------------------------------
# E3: the base model's log-probabilities on completions (perplexity, KL estimate)
# --------------------------------------------------------------------------------------------------


def k3_per_token(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """TRL's per-token KL estimate: exp(ref - logp) - (ref - logp) - 1 (never negative)."""
    delta = np.asarray(logp_ref, dtype=float) - np.asarray(logp_policy, dtype=float)
    return np.exp(delta) - delta - 1.0


class LogProbScorer:
    """A causal LM on CPU (or CUDA when there is one) that scores completions given their prompt."""

    _cache: dict[str, "LogProbScorer"] = {}

    def __init__(self, model_path: str, device: str | None = None, tokenizer=None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a notebook needs no loading bar per model
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        path = Path(model_path)
        if (path / "adapter_config.json").exists():  # a LoRA run saves only its adapter
            from peft import AutoPeftModelForCausalLM

            self.model = AutoPeftModelForCausalLM.from_pretrained(str(path), dtype=dtype)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
        self.model.to(self.device).eval()
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(str(model_path))
        self.path = str(model_path)

    @classmethod
    def get(cls, model_path: str) -> "LogProbScorer":
        """One scorer per model path and process (loading a model is the slow part)."""
        key = str(model_path)
        if key not in cls._cache:
            cls._cache[key] = cls(key)
        return cls._cache[key]

    @classmethod
    def release(cls) -> None:
        cls._cache.clear()

    def token_logprobs(self, prompt, completion: str) -> np.ndarray:
        """Log-probability of each completion token given the chat-formatted prompt and the tokens before it."""
        import torch

        tok = self.tokenizer
        if isinstance(prompt, str):
            prompt_text = prompt
        else:
            prompt_text = tok.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
        completion_ids = tok(completion, add_special_tokens=False)["input_ids"]
        if not completion_ids:
            return np.zeros(0)
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = ids[0, 1:]
        picked = logprobs.gather(1, targets[:, None])[:, 0]
        return picked[len(prompt_ids) - 1 :].cpu().numpy()


def perplexity(scorer: LogProbScorer, pairs: Sequence[tuple]) -> dict:
    """Mean negative log-likelihood per token of (prompt, completion) pairs under ``scorer``, and exp of it."""
    total, count, n = 0.0, 0, 0
    for prompt, completion in pairs:
        lp = scorer.token_logprobs(prompt, completion)
        if len(lp):
            total -= float(np.sum(lp))
            count += len(lp)
            n += 1
    if count == 0:
        return {"nll": None, "perplexity": None, "tokens": 0, "completions": 0}
    nll = total / count
    return {"nll": nll, "perplexity": math.exp(nll), "tokens": count, "completions": n}


def kl_estimate(policy: LogProbScorer, reference: LogProbScorer, pairs: Sequence[tuple]) -> float | None:
    """Mean per-token k3 KL of ``policy`` from ``reference`` on completions sampled from the policy."""
    values = []
    for prompt, completion in pairs:
        lp = policy.token_logprobs(prompt, completion)
        lr = reference.token_logprobs(prompt, completion)
        if len(lp):
            values.append(k3_per_token(lp, lr))
    if not values:
        return None
    return float(np.mean(np.concatenate(values)))


def eval_pairs(run: RunData, which: str = "trained", limit: int | None = None) -> list[tuple]:
    """(prompt messages, completion) for the first ``limit`` holdout problems of a run."""
    from labs import data

    records = [r for r in run.eval_records(which) if isinstance(r.get("completion"), str)]
    if limit is not None:
        records = records[:limit]
    if not records:
        return []
    source = (run.record.get("profile") or {}).get("data_source", "bundled")
    test_rows = data.load_split("test", source)
    by_id = {row["id"]: row for row in test_rows}
    return [(by_id[r["id"]]["prompt"], r["completion"]) for r in records if r.get("id") in by_id]


def last_step_samples(run: RunData, limit: int | None = None) -> list[tuple]:
    """(prompt, completion) sampled by the policy at the last logged training step."""
    rows = logged_completions(run)
    if not rows:
        return []
    last = max(r["step"] for r in rows)
    picked = [(r["prompt"], r["text"]) for r in rows if r["step"] == last and r["text"]]
    return picked[:limit] if limit is not None else picked


def fluency(texts: Sequence[str]) -> dict:
    return {
        "repetition": mean_repetition(texts),
        "distinct_1": distinct_n(texts, 1),
        "distinct_2": distinct_n(texts, 2),
    }


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
            kl_logged_mean=None, kl_logged_last=None, kl_measured=None,
            length_first=None, length_last=None,
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
        length = run.series(dg.LENGTH)
        trained = run.eval_records("trained")
        kl_mean = mean_std(kl.values)[0] if kl is not None else None
        kl_last = float(kl.values[np.isfinite(kl.values)][-1]) if kl is not None and kl.n_finite else None
        length_first, length_last = _edges(length.values, length.steps) if length is not None else (None, None)
        measured = None
        if reference is not None and (run.root / "model").is_dir():
            policy = LogProbScorer(str(run.root / "model"), device=reference.device, tokenizer=reference.tokenizer)
            measured = kl_estimate(policy, reference, last_step_samples(run, samples))
            del policy
        row = {
            "label": run.label,
            "beta": (run.record.get("profile") or {}).get("beta"),
            **fluency(texts),
            "kl_logged_mean": kl_mean,
            "kl_logged_last": kl_last,
            "kl_measured": measured,
            "length_first": length_first,
            "length_last": length_last,
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
    "kl_logged_mean": "KL registrada (media)",
    "kl_logged_last": "KL registrada (último paso)",
    "kl_measured": "KL medida aquí (k3, último paso)",
    "length_first": "longitud al principio (tokens)",
    "length_last": "longitud al final (tokens)",
    "eval_length": "longitud en el holdout (tokens)",
    "repetition": f"repetición ({REPETITION_N}-gramas)",
    "distinct_1": "distinct-1",
    "distinct_2": "distinct-2",
    "base_perplexity": "perplejidad del modelo base",
    "accuracy": "precisión (holdout)",
    "samples": "respuestas medidas",
}


# --------------------------------------------------------------------------------------------------
# tables and figures for the notebooks
# --------------------------------------------------------------------------------------------------


def table(rows: Sequence[dict], columns: dict[str, str]):
    """A pandas DataFrame with the Spanish column names, indexed by variant; None shows as NaN."""
    import pandas as pd

    frame = pd.DataFrame([{columns[k]: r.get(k) for k in columns} for r in rows])
    return frame.set_index(columns["label"])


def figure_path(profile: Profile, name: str, runs_root=None) -> Path:
    path = Path(runs_root or runs_dir()) / FIGURES_DIR / f"{name}-{profile.name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def plot_series(runs: Sequence[RunData], panels: Sequence[tuple], path: Path, title: str = "") -> Path:
    """One panel per ``(key, heading)``, one colour per run (raw faint, EMA solid).

    ``key`` is a metrics key, or a callable ``run -> (steps, values)`` for a derived curve.
    """
    from matplotlib.figure import Figure

    cols = min(2, len(panels))
    rows_n = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(6 * cols, 3.6 * rows_n))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.09, top=0.88 if title else 0.94, hspace=0.45, wspace=0.2)
    axes = np.atleast_1d(fig.subplots(rows_n, cols)).ravel()
    for ax, (key, heading) in zip(axes, panels):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("paso")
        for color, run in zip(COLORS, runs):
            if callable(key):
                steps, values = key(run)
                steps, values = np.asarray(steps, dtype=float), stats.to_array(values)
            else:
                s = run.series(key)
                if s is None:
                    continue
                steps, values = s.steps, s.values
            ok = np.isfinite(values)
            if not ok.any():
                continue
            ax.plot(steps[ok], values[ok], "o-", color=color, alpha=0.3, markersize=3, linewidth=0.8)
            ax.plot(steps, stats.smooth(values), color=color, linewidth=1.8, label=run.label)
        if ax.has_data():
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no registrado", ha="center", va="center", transform=ax.transAxes)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=90)
    return path


def plot_bars(rows: Sequence[dict], keys: Sequence[tuple], path: Path, title: str = "") -> Path:
    """One bar panel per ``(key, heading)``, one bar per row (missing values are left empty)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(keys), 3.6))
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.3, top=0.82 if title else 0.9, wspace=0.35)
    axes = np.atleast_1d(fig.subplots(1, len(keys))).ravel()
    labels = [str(r["label"]) for r in rows]
    for ax, (key, heading) in zip(axes, keys):
        values = [r.get(key) for r in rows]
        heights = [v if isinstance(v, (int, float)) and v is not None and math.isfinite(v) else 0.0 for v in values]
        bars = ax.bar(range(len(rows)), heights, color=[COLORS[i % len(COLORS)] for i in range(len(rows))])
        for bar, v in zip(bars, values):
            text = "n/d" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3g}"
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), text, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        ax.set_title(heading, fontsize=10)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=90)
    return path


def format_curve(run: RunData):
    s = dg.format_series(run.metrics)
    return (s.steps, s.values) if s is not None else ([], [])


def accuracy_curve(golds: dict[str, str] | None = None):
    """A ``plot_series`` key: the training completions' accuracy, scored afterwards."""

    def curve(run: RunData):
        rows = training_correctness(run, golds)
        return [r["step"] for r in rows], [r["accuracy"] for r in rows]

    return curve


def fmt(value, digits: int = 3) -> str:
    """A number for a Spanish sentence ("n/d" when there is none)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/d"
    return f"{value:.{digits}g}"
