"""From the rehearsal's measurements to the hours and disk of the full runs. Pure arithmetic.

Time of a full run = steps x seconds per step + the two holdout evaluations (base and trained).

* Seconds per step: the rehearsal's steady step (the fastest after the first, which includes warm-up),
  scaled by the completions per step (E1 changes G) and by the completion length. The rehearsal caps
  completions at a few tokens, so the length factor is a range: ``low`` assumes the full run's
  completions are as long as the rehearsal's were (they stopped on their own), ``high`` that every
  completion runs to ``max_completion_length`` (generation and the loss grow about linearly with it).
* Evaluation: seconds per problem measured on the base holdout, which runs with the profile's own
  ``eval_max_new_tokens``; twice (base and trained) the profile's ``eval_size``.

Disk of a full run: what the rehearsal wrote, by kind: one checkpoint (x ``save_total_limit`` while the
run trains; a finished run deletes its checkpoints), the final weights or adapter (``model/``), the
per-step logs (x steps, x the length factor) and the evaluation files (x problems).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from labs.core.profiles import Profile


@dataclass(frozen=True)
class Measured:
    """One rehearsed lab: what a full run's estimate is scaled from."""

    step_seconds: list[float]  # every optimizer step, in order
    completions_per_step: int
    mean_completion_tokens: float  # what the rehearsal's completions actually used
    eval_seconds_per_problem: float  # at the profile's own eval_max_new_tokens
    checkpoint_bytes: float
    model_bytes: float
    log_bytes_per_step: float
    eval_bytes_per_problem: float

    @property
    def seconds_per_step(self) -> float:
        steady = self.step_seconds[1:] or self.step_seconds
        return min(steady)


@dataclass(frozen=True)
class Estimate:
    name: str
    steps: int
    hours_low: float
    hours_high: float
    disk_peak_gb: float  # while training (checkpoints kept up to save_total_limit)
    disk_final_gb: float  # after a finished run deletes its checkpoints (keep_checkpoints=False)

    def as_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def length_factors(measured: Measured, profile: Profile) -> tuple[float, float]:
    """(low, high) multipliers from the rehearsal's completion length to the full run's."""
    used = max(measured.mean_completion_tokens, 1.0)
    return 1.0, max(1.0, profile.max_completion_length / used)


def estimate_run(name: str, measured: Measured, profile: Profile) -> Estimate:
    """Hours and disk of one full run of ``profile`` from one rehearsed lab's measurements."""
    low, high = length_factors(measured, profile)
    per_step = measured.seconds_per_step * profile.generation_batch_size / max(measured.completions_per_step, 1)
    evaluation = 2 * profile.eval_size * measured.eval_seconds_per_problem
    steps = profile.max_steps
    hours = [(steps * per_step * f + evaluation) / 3600 for f in (low, high)]
    logs = measured.log_bytes_per_step * steps * high * profile.generation_batch_size / max(
        measured.completions_per_step, 1)
    final = measured.model_bytes + logs + measured.eval_bytes_per_problem * 2 * profile.eval_size
    checkpoints = measured.checkpoint_bytes * min(profile.save_total_limit, max(1, steps // profile.save_steps))
    peak = final + checkpoints
    if profile.keep_checkpoints:
        final = peak
    return Estimate(name, steps, hours[0], hours[1], peak / 1e9, final / 1e9)


def estimate_all(profile: Profile, l71: Measured | None, l72: Measured | None,
                 exercise_profiles: dict[str, Profile]) -> dict:
    """L7.1, L7.2 and every exercise run (from L7.1's measurements: they train on its path), and totals.

    ``exercise_profiles``: run name -> that variant's profile (``labs.exercises.variants``), each run
    once even when two exercises share it.
    """
    runs = []
    if l71 is not None:
        runs.append(estimate_run("L7.1", l71, profile))
    if l72 is not None:
        from labs.l72.steps import profile_for_l72  # rtx5090-base's route runs L7.2 on rtx5090

        runs.append(estimate_run("L7.2", l72, profile_for_l72(profile)[0].replace(backend="unsloth")))
    if l71 is not None:
        runs += [estimate_run(name, l71, p) for name, p in sorted(exercise_profiles.items())]
    total = {
        "hours_low": round(sum(r.hours_low for r in runs), 3),
        "hours_high": round(sum(r.hours_high for r in runs), 3),
        # runs finish one after another, each deleting its checkpoints: the peak is the finished runs'
        # final folders plus the largest one in training
        "disk_peak_gb": round(sum(r.disk_final_gb for r in runs)
                              + max((r.disk_peak_gb - r.disk_final_gb for r in runs), default=0.0), 3),
        "disk_final_gb": round(sum(r.disk_final_gb for r in runs), 3),
    }
    return {"runs": [r.as_dict() for r in runs], "total": total}
