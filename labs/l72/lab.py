"""Lab L7.2 end to end: :func:`run_lab` picks the path (Unsloth on a GPU profile, transformers + PEFT on
a CPU one) and returns the run folder.

Both paths print the VRAM plan of both routes (labs.vram) before loading anything (a CPU profile: one line
naming the command that shows it), write ``run.json``
with ``"lab": "L7.2"``, the back-end that actually ran (``backend_used``) and the vLLM memory fraction in
force (``vllm_memory_fraction``), and record the memory the run used in ``resources.json``.
"""

from __future__ import annotations

from pathlib import Path

from labs.core.profiles import Profile, get_profile
from labs.l72.fallback import FallbackLab
from labs.l72.gpu import _run_unsloth
from labs.l72.steps import print_vram_plans, start

def run_lab(profile: Profile | str | None = None, run_name: str | None = None, fresh: bool = False,
            **overrides) -> Path:
    """Run lab L7.2 and return its run folder (Unsloth on a GPU profile, transformers + PEFT on CPU)."""
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    if profile.use_cpu:
        lab = FallbackLab(profile, run_name, fresh, **overrides)
        try:
            return lab.run_all()
        finally:
            lab.close()
    profile, reward_funcs, run, backend = start(profile, run_name, fresh, **overrides)
    if run.is_finished():
        print(f"[run] {run.root} ya terminó; para empezar otro usa --fresh (o fresh=True).")
        return run.root
    print(f"[backend] {backend.name}: {backend.reason_es}")
    print_vram_plans(profile)
    return _run_unsloth(profile, reward_funcs, run, backend)
