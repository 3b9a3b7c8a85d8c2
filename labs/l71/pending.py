"""Which L7.1 exercises a notebook cell needs are still unwritten, said in Spanish (``labs.core.pending``).

Each entry: the function's name -> (the exercise, as the notebook titles it; a tiny valid input). A cell that uses
the student's functions starts with ``if l71.ejercicios_hechos(f, g, ...):``; for a stub it names the exercise to
finish and skips its body, so an untouched notebook runs to the end without a traceback and without training.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

from labs.core import pending as _core
from labs.core.profiles import get_profile
from labs.core.runfolder import RunFolder


def _chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


_HONEST = "<think>\n1 + 1 = 2\n</think>\n<answer>2</answer>"
EXERCISES = {
    "texto": ("«el texto de una completion» (sección 1)", lambda: (_chat(_HONEST),)),
    "correctness_reward": ("«correctness_reward» (sección 1)", lambda: ([_chat(_HONEST)], ["2"])),
    "format_reward": ("«format_reward y soft_format_reward» (sección 1)", lambda: ([_chat(_HONEST)],)),
    "soft_format_reward": ("«format_reward y soft_format_reward» (sección 1)", lambda: ([_chat(_HONEST)],)),
    "argumentos_dispositivo": ("«el dispositivo» (sección 2)", lambda: (False,)),
    "calcula_kl": ("«beta» (sección 2)", lambda: (SimpleNamespace(beta=0.04),)),
    "lote_valido": ("«¿vale este lote?» (sección 2)", lambda: (2, 4, 8)),
    "mi_config": ("«GRPOConfig(...)» (sección 3)", lambda: (get_profile(), str(Path(tempfile.gettempdir()) / "grpo_gsm8k"))),
    "argumentos_trainer": ("«los argumentos de GRPOTrainer(...)» (sección 3)",
                           lambda: (get_profile("ci"), "modelo", [], None, [],
                                    RunFolder(Path(tempfile.gettempdir()) / "grpo_gsm8k"))),
}


def ejercicios_hechos(*functions) -> bool:
    """True when every function answers; otherwise print which L7.1 exercises to finish first and return False."""
    return _core.ejercicios_hechos(*functions, table=EXERCISES)
