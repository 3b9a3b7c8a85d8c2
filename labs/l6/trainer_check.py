"""Proof against the real trainer: the advantages ``trl.GRPOTrainer`` used equal ``labs.l6.advantage``.

One real GRPO step on a small model (the bundled SmolLM2-135M-Instruct) with reward functions whose
values are known in advance: they ignore the text and return a fixed pattern by the completion's place
in its group (TRL lays completions out prompt after prompt, ``num_generations`` each). With
``log_completions=True`` TRL 1.x writes ``completions/completions_<step:05d>.parquet`` under
``output_dir``; its columns are ``step``, ``prompt``, ``completion``, one column per reward function
(unweighted) and ``advantage``: the very tensor the loss multiplies (one process, so nothing is
sliced away). We recompute the advantages from the logged rewards with ``group_advantages`` and
report the largest difference, plus two controls that must *not* match: the population standard
deviation, and no ``1e-4`` in the denominator.

Generation is plain transformers (``use_vllm=False``): the advantage code path is the same with vLLM,
and this keeps the check to seconds. It always uses the bundled 135M model, whatever the profile: a
full fine-tuning step of a 4B model would not fit next to nothing, and the check is about arithmetic.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

import numpy as np

from labs.l6.advantage import TRL_EPS, group_advantages
from labs.core.profiles import BUNDLED_MODEL, Profile, cuda_available, get_profile

# Per group: (format points, correctness points) for each of the G completions, as in the lesson's
# table (format 1 point, correct answer 2 points). Group 0 totals [3, 1, 0, 3]; group 1 has a
# single correct answer.
DEFAULT_PATTERNS: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] = (
    ((1.0, 1.0, 0.0, 1.0), (2.0, 0.0, 0.0, 2.0)),
    ((1.0, 0.0, 1.0, 1.0), (0.0, 0.0, 2.0, 0.0)),
)

PROMPTS = (
    "Ana tiene 3 manzanas y compra 5 más. ¿Cuántas tiene ahora?",
    "Un tren recorre 60 km en una hora. ¿Cuántos km recorre en 3 horas?",
)

TOLERANCE = 1e-6

# What the notebook shows of the step's log. The loss of this first step depends on the completion lengths
# under TRL's default loss_type="dapo" (see labs.l6.objective.first_step_loss), hence the lengths.
LOGGED_KEYS = (
    "reward", "reward_std", "frac_reward_zero_std", "loss", "grad_norm",
    "completions/min_length", "completions/max_length", "completions/clipped_ratio",
)


class TrainerCheckError(RuntimeError):
    """The trainer did not leave what the check needs (no parquet, unexpected layout)."""


def pattern_rewards(patterns, num_generations: int):
    """Two reward functions (format, correctness) that return the patterns by completion position.

    Position ``i`` of the batch is completion ``i % G`` of group ``i // G``; groups beyond the given
    patterns cycle through them. The functions accept and ignore everything TRL passes.
    """
    for fmt, ok in patterns:
        if len(fmt) != num_generations or len(ok) != num_generations:
            raise ValueError(f"cada patrón debe tener num_generations={num_generations} valores")

    def value(which: int, i: int) -> float:
        group = patterns[(i // num_generations) % len(patterns)]
        return float(group[which][i % num_generations])

    def format_reward(completions, **kwargs):
        return [value(0, i) for i in range(len(completions))]

    def correctness_reward(completions, **kwargs):
        return [value(1, i) for i in range(len(completions))]

    return [format_reward, correctness_reward]


def grpo_config_kwargs(output_dir: str, num_generations: int, num_prompts: int, scale_rewards: str) -> dict:
    """The ``GRPOConfig`` keywords of the check (a function so tests can vet them against TRL's fields).

    ``use_bias_correction_kl=False`` where TRL has the field (1.16 defaults it to True: it multiplies k3 by the
    ratio, DeepSeek-V3.2's correction): the capstone compares TRL's loss with the lesson's k3 term. The step
    itself runs with ``beta=0``, where the field changes nothing.
    """
    from trl import GRPOConfig

    extra = {"use_bias_correction_kl": False} if "use_bias_correction_kl" in GRPOConfig.__dataclass_fields__ else {}
    return dict(**extra,
        output_dir=output_dir,
        use_vllm=False,
        use_cpu=not cuda_available(),
        bf16=False,
        num_generations=num_generations,
        per_device_train_batch_size=num_generations * num_prompts,  # counts completions
        gradient_accumulation_steps=1,
        max_completion_length=16,
        temperature=1.0,
        beta=0.0,
        learning_rate=1e-6,
        scale_rewards=scale_rewards,
        max_steps=1,
        logging_steps=1,
        log_completions=True,
        save_strategy="no",
        gradient_checkpointing=False,
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )


@contextlib.contextmanager
def _quiet():
    """Keep what TRL prints (its rich table of completions, version warnings) out of the notebook.

    In a Jupyter kernel rich bypasses ``sys.stdout`` and publishes display data, so IPython's
    ``capture_output`` is used when available. Yields a function that returns the captured text.
    """
    try:
        from IPython.utils.capture import capture_output
    except ImportError:  # plain Python: stdout and stderr are all there is
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield lambda: out.getvalue() + err.getvalue()
        return
    with capture_output() as cap:
        yield lambda: cap.stdout + cap.stderr


def _completion_text(c) -> str:
    text = c[0]["content"] if isinstance(c, (list, np.ndarray)) and len(c) else str(c)
    return " ".join(str(text).split())


def run_trainer_check(
    profile: Profile | None = None,
    output_dir: str | None = None,
    num_generations: int = 4,
    patterns=DEFAULT_PATTERNS,
    scale_rewards: str = "group",
    num_threads: int | None = 1,
) -> dict:
    """Run one ``GRPOTrainer`` step and compare its advantages with ``group_advantages``.

    Returns a report: one row per completion (group, position, text, rewards, TRL's advantage, ours,
    difference), ``max_diff`` and the two controls, the logged metrics of the step, the parquet path
    and its columns, and the seconds it took.

    ``num_threads``: torch CPU threads during the step (restored afterwards; ``None`` leaves them
    alone). One is the default: with a 135M model and 8 short completions more threads gain little,
    and on a busy 2-core machine they made the step three times slower (measured: 159 s against 50 s).
    """
    import torch

    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        with _quiet() as captured:
            report = _run_trainer_check(profile, output_dir, num_generations, patterns, scale_rewards)
        report["trainer_output"] = captured()
        report["threads_used"] = torch.get_num_threads()
        report["threads_before"] = threads
        return report
    finally:
        torch.set_num_threads(threads)


def _recording(trainer_class):
    """``trainer_class`` that keeps (detached copies of) the inputs of its first ``compute_loss``: the real batch
    of the step, as TRL hands it to its loss (prompt and completion ids and masks, advantages, ...)."""
    import torch

    class RecordingTrainer(trainer_class):
        recorded_inputs = None

        def compute_loss(self, model, inputs, *args, **kwargs):
            if self.recorded_inputs is None:
                self.recorded_inputs = {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()}
            return super().compute_loss(model, inputs, *args, **kwargs)

    return RecordingTrainer


def _run_trainer_check(profile, output_dir, num_generations, patterns, scale_rewards) -> dict:
    import pandas as pd
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from labs.training.models import model_path

    profile = profile or get_profile()
    if profile.model != BUNDLED_MODEL:
        profile = profile.replace(model=BUNDLED_MODEL)
    started = time.perf_counter()
    model = model_path(profile)
    out = Path(output_dir or tempfile.mkdtemp(prefix="l6-trainer-check-"))
    num_prompts = len(patterns)
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]} for i in range(num_prompts)]
    )
    reward_funcs = pattern_rewards(patterns, num_generations)
    config = GRPOConfig(**grpo_config_kwargs(str(out), num_generations, num_prompts, scale_rewards))
    trainer = _recording(GRPOTrainer)(model=model, reward_funcs=reward_funcs, args=config, train_dataset=dataset)
    trainer.train()
    seconds = time.perf_counter() - started

    parquet = out / "completions" / f"completions_{trainer.state.global_step:05d}.parquet"
    if not parquet.exists():
        raise TrainerCheckError(f"El entrenador no escribió {parquet} (¿log_completions=True?).")
    table = pd.read_parquet(parquet)
    names = [f.__name__ for f in reward_funcs]
    missing = [c for c in ["prompt", "completion", "advantage", *names] if c not in table.columns]
    if missing:
        raise TrainerCheckError(f"Al parquet le faltan las columnas {missing}; tiene {list(table.columns)}.")
    if len(table) != num_generations * num_prompts:
        raise TrainerCheckError(f"Esperaba {num_generations * num_prompts} filas y el parquet tiene {len(table)}.")
    prompts = [str(p) for p in table["prompt"]]
    groups_consistent = all(
        len(set(prompts[g * num_generations : (g + 1) * num_generations])) == 1 for g in range(num_prompts)
    )

    weights = np.asarray(trainer.reward_weights, dtype=np.float64)
    per_func = table[names].to_numpy(dtype=np.float64)
    rewards = per_func @ weights
    trl_adv = table["advantage"].to_numpy(dtype=np.float64)
    ours = group_advantages(rewards, num_generations, std="sample", eps=TRL_EPS, scale_rewards=scale_rewards)
    population = group_advantages(rewards, num_generations, std="population", scale_rewards=scale_rewards)
    no_eps = group_advantages(rewards, num_generations, std="sample", eps=0.0, scale_rewards=scale_rewards)
    logged = next((h for h in trainer.state.log_history if "reward" in h), {})

    rows = [
        {
            "group": i // num_generations,
            "position": i % num_generations,
            "completion": _completion_text(table["completion"].iloc[i]),
            **{name: float(per_func[i, k]) for k, name in enumerate(names)},
            "reward": float(rewards[i]),
            "trl_advantage": float(trl_adv[i]),
            "labs_advantage": float(ours[i]),
            "diff": float(abs(trl_adv[i] - ours[i])),
        }
        for i in range(len(table))
    ]
    return {
        "rows": rows,
        "max_diff": float(np.max(np.abs(trl_adv - ours))),
        "max_diff_population": float(np.max(np.abs(trl_adv - population))),
        "max_diff_no_eps": float(np.max(np.abs(trl_adv - no_eps))),
        "tolerance": TOLERANCE,
        "groups_consistent": groups_consistent,
        "num_generations": num_generations,
        "scale_rewards": scale_rewards,
        "reward_functions": names,
        "reward_weights": weights.tolist(),
        "logged": {k: logged.get(k) for k in LOGGED_KEYS},
        "parquet": str(parquet),
        "columns": list(table.columns),
        "trl_version": trl.__version__,
        "model": model,
        "seconds": seconds,
        "trainer": trainer,  # labs.l6.capstone reuses the built trainer and the batch of its one step
        "batch": trainer.recorded_inputs,
    }


def format_report(report: dict, width: int = 28) -> str:
    """The report as a Spanish table, one line per completion, then the verdict and the controls."""
    head = (
        f"{'grupo':>5} {'pos':>3}  {'respuesta generada':{width}s} {'recomp.':>7} "
        f"{'A (TRL)':>9} {'A (labs)':>9} {'|dif|':>9}"
    )
    lines = [head, "-" * len(head)]
    for row in report["rows"]:
        text = row["completion"][: width - 1] + ("…" if len(row["completion"]) >= width else "")
        lines.append(
            f"{row['group']:>5} {row['position']:>3}  {text:{width}s} {row['reward']:>7.2f} "
            f"{row['trl_advantage']:>+9.5f} {row['labs_advantage']:>+9.5f} {row['diff']:>9.1e}"
        )
    return "\n".join(lines + [""] + format_summary(report).splitlines())


def format_summary(report: dict) -> str:
    """The verdict and the controls without the table of completions (the model's English text): what the notebook
    prints, with ``format_report``'s table folded under it (issue 52: 19 lines)."""
    ok = report["max_diff"] < report["tolerance"]
    lines = [
        f"TRL {report['trl_version']}, G={report['num_generations']}, scale_rewards={report['scale_rewards']!r}, "
        f"columnas del parquet: {report['columns']}",
        f"máxima |dif| con la regla del entrenador (std muestral + 1e-4): {report['max_diff']:.2e} "
        f"-> {'coincide' if ok else 'NO coincide'} (tolerancia {report['tolerance']:.0e})",
        f"control: con la std poblacional la máxima |dif| sería {report['max_diff_population']:.2e}",
        f"control: sin el 1e-4 la máxima |dif| sería {report['max_diff_no_eps']:.2e}",
        f"tiempo: {report['seconds']:.1f} s",
    ]
    return "\n".join(lines)


def format_numbers(report: dict, decimals: int = 4) -> str:
    """The report's numbers only, rounded (no generated text, no timing): what the notebook keeps and nbval compares.

    The trainer computes in float32, so differences below 1e-6 are shown as a verdict, not as a number.
    """
    head = f"{'grupo':>5} {'pos':>3} {'recomp.':>7} {'A (TRL)':>9} {'A (labs)':>9}"
    lines = [head, "-" * len(head)]
    for row in report["rows"]:
        trl_a, labs_a = (round(row[k], decimals) + 0.0 for k in ("trl_advantage", "labs_advantage"))
        lines.append(
            f"{row['group']:>5} {row['position']:>3} {row['reward']:>7.2f} {trl_a:>+9.{decimals}f} {labs_a:>+9.{decimals}f}"
        )
    ok = report["max_diff"] < report["tolerance"]
    lines += [
        "",
        f"regla del entrenador (std muestral + 1e-4): {'coincide' if ok else 'NO coincide'} "
        f"(máxima |dif| por debajo de {report['tolerance']:.0e}: {ok})",
        f"control, std poblacional: máxima |dif| {report['max_diff_population']:.{decimals}f}",
        f"control, sin el 1e-4: máxima |dif| {report['max_diff_no_eps']:.1e}",
    ]
    return "\n".join(lines)
