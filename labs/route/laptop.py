"""The route on a machine without a GPU (profiles ``cpu`` and ``ci``), as notebook 00 prints it there.

On a laptop the 5090's route (``labs.route.route``, about 60 lines whose first step installs the GPU stack) is not the
student's: notebook 00 prints this one, a line a step, and leaves the 5090's folded (``labs.core.folded.Folded``)
for a student who plans the GPU run (issue 52).
"""

from __future__ import annotations

from labs.core.profiles import Profile
from labs.route import NOTEBOOK, TERMINAL

CPU_STEPS: tuple[tuple[str, str, str], ...] = (
    (NOTEBOOK, "L6_de_policy_gradient_a_grpo.ipynb", "la teoría, de policy gradient a GRPO"),
    (NOTEBOOK, "L7_1_grpo_trl_vllm.ipynb", "secciones 1-3: escribes tus recompensas y eliges tu GRPOConfig"),
    (TERMINAL, "python -m labs l71", "el lab L7.1 con lo que guardaste, en este perfil"),
    (NOTEBOOK, "L7_1_grpo_trl_vllm.ipynb", "el resto: lee ese run sin entrenar"),
    (NOTEBOOK, "L7_2_unsloth_standby.ipynb", "Unsloth (en CPU, su sustituto); sus runs largos, con ENTRENAR_EN_CPU = True"),
    (NOTEBOOK, "L7_3_mas_alla_de_una_gpu.ipynb", "cuándo y cómo pasar a varias GPU, sin entrenar"),
    (TERMINAL, "python -m labs sweep E1 (E2, E3)", "tras escribir tus variantes en cada cuaderno; luego su resto"),
    (NOTEBOOK, "E4_tu_recompensa.ipynb", "tu recompensa; el cuaderno te da la orden que la entrena"),
    (NOTEBOOK, "C2b_rubrica.ipynb", "autoevaluación con el evaluador del instructor"),
)


def cpu_route_es(profile: Profile) -> str:
    """The steps after notebook 00 on ``profile`` (a CPU one), one line each."""
    lines = [f"Ruta en esta máquina (perfil {profile.name}, sin GPU): los entrenamientos son minutos, no horas."]
    lines += [f"{i:>2}. [{where}] {what}: {why}" for i, (where, what, why) in enumerate(CPU_STEPS, start=1)]
    return "\n".join(lines)
