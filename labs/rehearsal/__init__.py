"""``python -m labs rehearse``: a ten-minute rehearsal of L7.1 and L7.2 on the student's own machine.

Two or three GRPO steps of each lab with the profile's real model, G, LoRA, quantisation, Standby and
evaluation path, on tiny budgets (a few prompts, short completions); checks that the generation engine
uses the trained weights; measures seconds per step, peak memory and the vLLM fraction in force; the
base model's holdout accuracy; and, from those measurements, the hours and disk of the full L7.1, L7.2
and E1-E3 runs. Writes ``runs/rehearsal-<gpu or cpu>/rehearsal.json`` and ``informe.md``.

``budget`` (the rehearsal's profile), ``estimates`` (pure arithmetic on the measurements), ``measure``
(timers, folder sizes, the holdout summary), ``parts`` (one lab per child process), ``unsloth_part``
(L7.2 on a GPU), ``report`` (the Spanish page) and ``cli``.
"""

from labs.rehearsal.cli import main, rehearse

__all__ = ["main", "rehearse"]
