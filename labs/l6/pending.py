"""Which of the L6 exercises a cell needs are still unwritten, said in Spanish instead of a library's traceback.

A student notebook starts with every exercise as otter's stub (a body of ``...`` that returns ``None``).
A cell that uses one, run before the exercise is written, used to end in a traceback from inside torch or
matplotlib. Such cells now start with ``if ejercicios_hechos(f, g, ...):``: each function is called on a
tiny input; one that returns ``None`` (the stub) or raises is named, with the exercise to finish, and the
cell's body is skipped. The check is behaviour (a call), never a reading of the student's code.
Other notebooks pass their own ``table`` (the same shape as ``EXERCISES``): ``labs.exercises.student`` for E1-E3;
the check itself is ``labs.core.pending``.
"""

from __future__ import annotations

import torch

from labs.core import pending as _core

class _TinyModel(torch.nn.Module):
    """A model's interface (``.logits`` of shape (B, L, V)) for the tiny input of ``logp_y_entropia``."""

    def forward(self, input_ids, attention_mask=None):
        from types import SimpleNamespace

        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, 5))


# function name -> (the exercise, as the notebook titles it; a tiny valid input)
EXERCISES = {
    "perdida_reinforce": ("«la pérdida de REINFORCE» (sección 2)",
                          lambda: (torch.zeros(4, dtype=torch.float64, requires_grad=True),
                                   torch.tensor([3.0, 1.0, 0.0, 3.0], dtype=torch.float64), torch.tensor([0, 3]))),
    "perdida_reinforce_baseline": ("«REINFORCE con la media del grupo como baseline» (sección 3)",
                                   lambda: (torch.zeros(4, dtype=torch.float64, requires_grad=True),
                                            torch.tensor([3.0, 1.0, 0.0, 3.0], dtype=torch.float64),
                                            torch.tensor([[0, 3]]))),
    "objetivo_recortado": ("«el objetivo recortado, por token» (sección 4)",
                           lambda: (torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64), 1.0, 0.2)),
    "ventaja_grupo": ("«la ventaja de un grupo» (sección 5)", lambda: ([1.0, 0.0, 1.0], "muestral")),
    "kl_k3": ("«el estimador k3» (sección 7)",
              lambda: (torch.tensor([-1.0, -2.0], dtype=torch.float64), torch.tensor([-1.5, -2.0], dtype=torch.float64))),
    "perdida_grpo": ("«las tres agregaciones de TRL»: grpo (sección 8)", lambda: (torch.ones(2, 3), torch.ones(2, 3))),
    "perdida_dapo": ("«las tres agregaciones de TRL»: dapo (sección 8)", lambda: (torch.ones(2, 3), torch.ones(2, 3))),
    "perdida_dr_grpo": ("«las tres agregaciones de TRL»: dr_grpo (sección 8)",
                        lambda: (torch.ones(2, 3), torch.ones(2, 3), 4)),
    "logp_por_token": ("«la log-probabilidad de cada token» (sección 8)",
                       lambda: (torch.zeros(1, 4, 5), torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 2))),
    "perdida_trl": ("«tu pérdida de GRPO» (sección 8)",
                    lambda: (torch.zeros(2, 3, requires_grad=True), torch.zeros(2, 3), torch.zeros(2, 3),
                             torch.tensor([1.0, -1.0]), torch.ones(2, 3), 0.04, "grpo", 0.2, 3)),
    "entropia_por_token": ("«la entropía de cada posición» (sección 8)", lambda: (torch.zeros(2, 3, 5),)),
    "logp_y_entropia": ("«la respuesta puntuada con la política que la muestreó» (sección 8)",
                        lambda: (_TinyModel(), torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.long),
                                 torch.ones(1, 2, dtype=torch.long), 0.7)),
    "paso_micro_lote": ("«el paso de un micro-lote» (sección 8)",
                        lambda: (torch.zeros(2, 3, requires_grad=True), torch.zeros(2, 3), torch.zeros(2, 3),
                                 torch.tensor([1.0, -1.0]), torch.ones(2, 3), 0.0, "dapo", 0.2, 3, 2, 12)),
}


def pending(*functions) -> list[str]:
    """One Spanish line per function that is not written yet (returns ``None``) or fails on a tiny input."""
    return _core.pending(*functions, table=EXERCISES)


def ejercicios_hechos(*functions) -> bool:
    """True when every function answers; otherwise print which exercises to finish first and return False."""
    return _core.ejercicios_hechos(*functions, table=EXERCISES)
