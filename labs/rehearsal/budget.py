"""The rehearsal's budget: the profile's real model, G, batch, LoRA, quantisation and vLLM settings, with
tiny amounts of everything that only costs time (steps, prompts, completion length, evaluation)."""

from __future__ import annotations

import re

from labs.core.profiles import PROFILE_ENV, Profile, get_profile

MAX_STEPS = 3  # 2-3 optimizer steps: the first one includes warm-up, the others time a step
MAX_COMPLETION_TOKENS = 128  # short completions: the step time is scaled up to the real length
MAX_EVAL_PROBLEMS = 8
HOLDOUT_PROBLEMS = 200  # the base model's holdout accuracy (issue 18): ~200 GSM8K test problems


def steps(profile: Profile) -> int:
    return max(1, min(profile.max_steps, MAX_STEPS))


def rehearsal_profile(profile: Profile) -> Profile:
    """``profile`` with the rehearsal's budget.

    Kept from the profile: model, back-end settings, G, per-device batch and accumulation (so a step
    generates and trains on as many completions as the real run), learning rate, beta, LoRA, 4-bit,
    vLLM mode and fraction, precision, format pass. Shrunk: steps, prompts, completion length,
    evaluation. ``max_prompt_tokens`` grows by what the completions lose, so the colocated engine's
    context (prompt + completion) still holds a full-length holdout answer (``HOLDOUT_PROBLEMS``).
    """
    n = steps(profile)
    completion = min(profile.max_completion_length, MAX_COMPLETION_TOKENS)
    return profile.replace(
        max_steps=n,
        save_steps=n,  # one checkpoint, at the end: its size is measured, then it is deleted
        save_total_limit=1,
        keep_checkpoints=True,
        train_size=min(profile.train_size, 2 * n * profile.prompts_per_step),
        max_completion_length=completion,
        max_prompt_tokens=profile.max_prompt_tokens + max(0, profile.eval_max_new_tokens - completion),
        eval_size=min(profile.eval_size, MAX_EVAL_PROBLEMS),
        eval_max_new_tokens=min(profile.eval_max_new_tokens, MAX_COMPLETION_TOKENS),
    )


def holdout_profile(profile: Profile) -> Profile:
    """The profile's own evaluation settings on ``HOLDOUT_PROBLEMS`` problems (fewer if it has fewer)."""
    return profile.replace(eval_size=min(profile.eval_size, HOLDOUT_PROBLEMS))


# Before any choice is saved the rehearsal rehearses the profile it will almost always recommend
# (labs.grading.outlook: the instruct model's answers leave criterion 2 no reason to grow): the base
# profile, with its LoRA format pass, its merge and its r=32 training, which would otherwise first run
# inside the multi-hour job (issue 33, item 5).
UNCHOSEN_GPU_PROFILE = "rtx5090-base"


def default_profile(name: str | None, environ, cuda_visible: bool, runs_root=None) -> Profile:
    """What the rehearsal rehearses: what will run. The named profile; else COURSE_PROFILE; else the saved
    choice (``python -m labs profile``); else, with a GPU, the one it is about to recommend
    (``UNCHOSEN_GPU_PROFILE``); without a GPU ``ci`` (a saved GPU choice does not apply there)."""
    from labs.core import profile_choice

    if name:
        return get_profile(name)
    if (environ.get(PROFILE_ENV) or "").strip():
        return get_profile(environ[PROFILE_ENV])
    saved = profile_choice.saved_default(lambda: cuda_visible, runs_root)
    if saved is not None and cuda_visible:
        return get_profile(saved[0])
    return get_profile(UNCHOSEN_GPU_PROFILE if cuda_visible else "ci")


def device_tag(gpu_name: str | None) -> str:
    """``NVIDIA GeForce RTX 5090`` -> ``rtx-5090``; no GPU -> ``cpu``."""
    if not gpu_name:
        return "cpu"
    name = re.sub(r"^(nvidia\s+)?(geforce\s+)?", "", gpu_name.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"
