"""Exercises E1 to E3 of lesson 7.7: the variants each one runs and the numbers that answer it.

- **E1, group size.** ``num_generations`` G = 4 against G = 16 (2 against 4 on the ``ci`` profile) with
  the same number of *prompts* per optimizer step, so both runs see the same problems at the same step
  and differ only in how many answers they sample per problem. The student's ``perfil_con_grupo`` keeps
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
  ``correctness_reward`` afterwards. ``labs.core.diagnostics.detect_format_hacking`` gives the verdict.
- **E3, KL weight.** ``beta`` = 0.2 and 0.0 against the recipe's 0.04 (0.0 only, on ci): the logged KL, the completion
  length, and fluency measured on the holdout completions: repetition inside an answer, distinct-1 and
  distinct-2 across answers, and the perplexity of the base (reference) model on them. TRL logs no KL
  when beta = 0, so the KL to the base model is also estimated here, with the k3 estimator TRL uses, on
  the completions sampled at the last training step.

Every number comes from the run folders (``labs.core.runfolder``); nothing here trains. The variants run
through ``labs.exercises.sweep``. Run names carry the profile name; a variant whose settings are identical to the
reference recipe (``reference_variant``) is that same run, shared between exercises (and, where the
exercises' budget is the lab's, shared with the student's finished L7.1 run).

Which module does what (this package only re-exports, so ``from labs import exercises as ex; ex.e1_rows``
keeps working in the notebooks):

- ``variant``: what one variant is (``Variant``) and the checks on a list of them;
- ``variants``: what the course decides (the G and betas compared, the budgets, the shared reference run, the
  planned runs for hours and disk), ``settings_table``;
- ``student``: the variants as the student builds them in each notebook (``perfil_con_grupo``,
  ``recompensas_sin_correccion``, ``perfil_con_beta``), saved for ``python -m labs sweep`` and read back;
- ``sweep``: running the variants one after another (``run_sweep``) and ``python -m labs sweep E1|E2|E3``;
- ``child``: one child process of a sweep (start, output, stop, why it failed);
- ``runs``: reading a run folder (``load_run``), its logged completions and the gold answers, and the runs' metrics
  as one table (``metrics_frame``), what the student's comparison in each notebook reads;
- ``curves``: statistics of one curve (spread, threshold, steps and seconds to reach it);
- ``e1``, ``e2``, ``e3``: the course's side of each exercise's comparison (rows and table columns; the student's
  ``comparar_e1`` ... computes the rest from ``metrics_frame``);
- ``fluency_measures``: repetition, distinct-n, and a model's log-probabilities (perplexity, KL estimate) for E3;
- ``plots``: tables and figures for the notebooks;
"""

from __future__ import annotations

from labs.exercises import sweep  # noqa: F401  (``ex.sweep`` as before)
from labs.exercises.curves import (
    THRESHOLD_FRACTION,
    curve_spread,
    mean_std,
    seconds_until,
    shared_threshold,
    steps_to_threshold,
)
from labs.exercises.e1 import E1_COLUMNS, e1_rows, group_statistics
from labs.exercises.e2 import (
    E2_COLUMNS,
    accuracy_curve,
    e2_rows,
    format_curve,
    hacking_examples,
    training_correctness,
    training_examples,
)
from labs.exercises.e3 import DEFAULT_FLUENCY_SAMPLES, E3_COLUMNS, FLUENCY_SAMPLES, e3_rows, fluency_samples
from labs.exercises.fluency_measures import (
    REPETITION_N,
    LogProbScorer,
    distinct_n,
    fluency,
    k3_per_token,
    kl_estimate,
    mean_repetition,
    ngrams,
    perplexity,
    repetition_rate,
    words,
)
from labs.exercises.plots import COLORS, FIGURES_DIR, figure_path, fmt, plot_bars, plot_series, table
from labs.exercises.runs import (
    RunData,
    completion_files,
    eval_pairs,
    gold_by_question,
    last_step_samples,
    load_run,
    load_runs,
    logged_completions,
    metrics_frame,
    user_question,
)
from labs.exercises.student import (
    e1_variants,
    e2_variants,
    e3_variants,
    ejercicios_hechos,
    saved_path,
    saved_variants,
    variants_from,
)
from labs.exercises.variant import Variant, settings_mismatch
from labs.exercises.variants import (
    BUDGETS,
    PLANNED_E2_REWARDS,
    EXERCISE_HOURS,
    E3_BETAS,
    E3_BETAS_BY_PROFILE,
    GROUP_SIZES,
    LESSON_GROUP_SIZES,
    SMOKE_OVERRIDES,
    base_overrides,
    budget_note,
    budget_steps,
    e3_beta_values,
    e3_betas,
    group_sizes,
    is_smoke_test,
    lab_run_names,
    planned_hours,
    planned_hours_es,
    planned_variants,
    profile_for,
    recorded_budget,
    reference_variant,
    resolve_profile,
    save_budget,
    same_settings,
    settings_table,
    shared_with_reference,
)

__all__ = [
    "metrics_frame",
    "BUDGETS", "EXERCISE_HOURS", "budget_steps", "planned_hours", "planned_hours_es", "recorded_budget", "save_budget",
    "COLORS", "DEFAULT_FLUENCY_SAMPLES", "E1_COLUMNS", "E2_COLUMNS", "PLANNED_E2_REWARDS", "E3_BETAS", "E3_BETAS_BY_PROFILE",
    "E3_COLUMNS", "FIGURES_DIR", "FLUENCY_SAMPLES", "GROUP_SIZES", "LESSON_GROUP_SIZES", "REPETITION_N",
    "SMOKE_OVERRIDES", "THRESHOLD_FRACTION", "LogProbScorer", "RunData", "Variant",
    "accuracy_curve", "base_overrides", "budget_note", "completion_files", "curve_spread", "distinct_n",
    "e1_rows", "e1_variants", "e2_rows", "e2_variants", "e3_beta_values", "e3_betas", "ejercicios_hechos", "e3_rows", "e3_variants", "eval_pairs",
    "figure_path", "fluency", "fluency_samples", "fmt", "format_curve", "gold_by_question", "planned_variants",
    "group_sizes", "group_statistics", "hacking_examples", "is_smoke_test", "k3_per_token", "kl_estimate",
    "lab_run_names", "last_step_samples", "load_run", "load_runs", "logged_completions", "mean_repetition",
    "mean_std", "ngrams", "perplexity", "plot_bars", "plot_series", "profile_for", "reference_variant",
    "repetition_rate", "resolve_profile", "saved_path", "saved_variants", "variants_from", "same_settings", "seconds_until", "settings_mismatch", "settings_table",
    "shared_threshold", "shared_with_reference", "steps_to_threshold", "sweep", "table", "training_correctness",
    "training_examples", "user_question", "words",
]
