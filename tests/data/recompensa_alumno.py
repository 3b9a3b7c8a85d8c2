"""A reward function as a student writes it in exercise E4 (notebooks/E4_tu_recompensa.ipynb).

Loaded by the tests through the same ``"file.py:function"`` name a student passes to ``--rewards``.
"""

import re

from rewards import completion_text

CUENTA = re.compile(r"\d\s*[-+*/×÷x]\s*\d")  # an operation: 48/2, 48 + 24


def razonamiento_con_cuentas(completions, **kwargs):
    """0.3 when the <think> block holds at least one arithmetic operation, else 0.0 (closes filler reasoning)."""
    recompensas = []
    for completion in completions:
        texto = completion_text(completion)
        inicio, fin = texto.find("<think>"), texto.find("</think>")
        inicio = 0 if inicio < 0 else inicio + len("<think>")
        razonamiento = texto[inicio:fin] if fin >= inicio else ""
        recompensas.append(0.3 if CUENTA.search(razonamiento) else 0.0)
    return recompensas


def recompensa_que_falla(completions, **kwargs):
    """Broken on purpose: raises on the first completion."""
    raise KeyError("content")


def recompensa_de_grupo(completions, **kwargs):
    """Broken on purpose: one value for the whole group instead of one per completion."""
    return [1.0]
