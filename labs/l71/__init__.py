"""Lab L7.1: GRPO on GSM8K with TRL's GRPOTrainer and vLLM in colocate mode, end to end.

One recipe, two front doors: the notebook ``notebooks/L7_1_grpo_trl_vllm.ipynb`` walks through these
steps one by one, and the terminal runs them all::

    python -m labs l71 [--profile cpu|ci|rtx5090|rtx5090-base] [--run-name NAME] [--fresh] [--set key=value ...]

Both write the same run folder (labs.core.runfolder). Running the same command again continues an
unfinished run from its last checkpoint, and returns at once for a finished one; ``--fresh`` starts
a new run folder next to the old one (nothing is deleted).

The GRPO settings the student writes in the notebook are saved under ``<runs>/_ajustes/`` and the terminal
trains them (``labs.l71.settings``; ``--sin-ajustes`` ignores them, ``--set`` overrides them), and with them
the reward functions the student writes in section 1 (``labs.l71.student_rewards``; ``--recompensas-del-curso``
trains the course's hardened ones instead).
"""

from labs.l71.cli import main
from labs.l71.lab import (
    LAB,
    Lab,
    base_model_for,
    finish,
    generator,
    new_run,
    prepare,
    run_lab,
    sync_engine,
    write_run_json,
)
from labs.l71.notebook import ESPERA_ES, RunNotReady, open_run
from labs.l71.pending import ejercicios_hechos  # a cell that needs an unwritten exercise names it, in Spanish
from labs.training.options import add_run_arguments, overrides_from_cli  # shared by every lab's command line

# Re-exported: the notebook, the other labs and the tests use ``from labs import l71`` (l71.new_run, ...).
__all__ = [
    "ESPERA_ES", "LAB", "Lab", "RunNotReady", "add_run_arguments", "base_model_for", "ejercicios_hechos", "finish",
    "generator", "main", "new_run", "open_run", "overrides_from_cli", "prepare", "run_lab", "sync_engine",
    "write_run_json",
]
