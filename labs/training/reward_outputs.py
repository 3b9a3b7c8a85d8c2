"""What TRL 1.16 does with a reward function's output, and which outputs pre-flight accepts.

TRL's ``GRPOTrainer._calculate_rewards`` (trl/trainer/grpo_trainer.py, 1.16.0) handles a synchronous
function's output in three lines::

    L1630  output_reward_func = [reward if reward is not None else torch.nan for reward in output_reward_func]
    L1631  if len(output_reward_func) != len(prompts): raise ValueError(...)
    L1637  rewards_per_func[:, i] = torch.tensor(output_reward_func, dtype=torch.float32, device=device)

(L1647-1662: the same for an ``async`` function's awaited output.) So TRL accepts any iterable of
``n`` items that are None or that ``torch.tensor`` turns into one float each, and crashes on anything
else. ``REWARD_OUTPUTS`` is that table, row by row; tests/test_reward_outputs.py checks every row
against ``reward_output_problem`` and against TRL's own ``_calculate_rewards``.
"""

from __future__ import annotations

import numbers

import numpy as np

N = 4  # completions in pre-flight's probe (labs.training.preflight._sample_batch)

# (what the function returns, an example of it for N completions, TRL turns it into N rewards, pre-flight accepts)
REWARD_OUTPUTS = (
    ("lista de floats", lambda: [1.0, 0.5, 0.0, 2.0], True, True),
    ("lista de ints", lambda: [1, 0, 0, 2], True, True),
    ("lista de bools", lambda: [True, False, True, False], True, True),
    ("tupla", lambda: (1.0, 0.0, 0.5, 0.0), True, True),
    ("generador", lambda: (float(i) for i in range(N)), True, True),
    ("array de numpy float64", lambda: np.array([1.0, 0.0, 0.5, 0.0]), True, True),
    ("array de numpy float32", lambda: np.zeros(N, dtype=np.float32), True, True),
    ("array de numpy int64", lambda: np.arange(N), True, True),
    ("lista de escalares numpy", lambda: [np.float64(1.0), np.float32(0.5), np.int64(0), np.bool_(True)], True, True),
    ("lista con None (no aplica)", lambda: [1.0, None, 0.0, None], True, True),
    ("todo None", lambda: [None] * N, True, True),
    ("lista con NaN", lambda: [1.0, float("nan"), 0.0, 0.0], True, True),
    # converted by TRL, refused here: an infinite reward makes the group mean inf and every advantage NaN
    ("lista con infinito", lambda: [1.0, float("inf"), 0.0, 0.0], True, False),
    ("un solo float", lambda: 1.0, False, False),
    ("None", lambda: None, False, False),
    ("escalar numpy", lambda: np.float64(1.0), False, False),
    ("lista más corta", lambda: [1.0, 0.0, 0.5], False, False),
    ("lista vacía", lambda: [], False, False),
    ("lista de textos", lambda: ["1.0", "0.0", "0.5", "0.0"], False, False),
    ("texto de N caracteres", lambda: "1000", False, False),
    ("lista de listas", lambda: [[1.0], [0.0], [0.5], [0.0]], False, False),
    ("array de numpy 2D", lambda: np.zeros((N, 1)), False, False),
    ("lista de pares", lambda: [[1.0, 0.0]] * N, False, False),
)


def trl_reward_tensor(name: str, output, n: int):
    """What TRL 1.16 does with a reward function's output (grpo_trainer.py L1630-1637): iterate it,
    None -> NaN, check its length, ``torch.tensor(..., dtype=float32)`` into one column of the
    ``(n, functions)`` reward matrix. Raises exactly where TRL raises (tests/test_reward_outputs.py
    checks every row of ``REWARD_OUTPUTS`` against TRL's own ``_calculate_rewards``)."""
    import torch

    values = [reward if reward is not None else torch.nan for reward in output]
    if len(values) != n:
        raise ValueError(f"The reward function '{name}' returned {len(values)} rewards, but {n} were expected")
    column = torch.zeros(n, 1)
    column[:, 0] = torch.tensor(values, dtype=torch.float32)
    return column[:, 0]


def reward_output_problem(name: str, output, n: int) -> str | None:
    """Spanish problem if TRL could not turn ``output`` into ``n`` rewards, or if it holds an infinity.

    Accepted, as TRL accepts them: a list, tuple, numpy array or any iterable of ``n`` numbers (Python
    or numpy scalars, bools, one-element tensors), ``None`` or NaN for "not applicable". Refused: what
    makes TRL raise (not iterable, wrong length, text, nested lists, ...) and, beyond TRL, an infinite
    reward: it is converted, but the group's mean becomes inf, every advantage NaN, and the run stops at
    its first step with a non-finite loss.
    """
    try:
        items = list(output)  # TRL iterates the output once, in its list comprehension (L1630)
    except TypeError:  # TRL's own message ("'NoneType' object is not iterable") is English: said here instead
        if output is None:
            return (f"La función de recompensa {name} devolvió None: aún no está escrita, o le falta devolver la "
                    f"lista con un número por respuesta ({n} en la prueba).")
        return (f"La función de recompensa {name} devolvió {type(output).__name__}, que TRL no puede recorrer: debe "
                f"devolver una lista con un número por respuesta ({n} en la prueba).")
    if len(items) != n:
        count = len(items)
        return (f"La función de recompensa {name} devolvió {count} valor{'' if count == 1 else 'es'} para {n} "
                "respuestas: debe devolver exactamente uno por respuesta, en el mismo orden.")
    try:
        column = trl_reward_tensor(name, items, n)
    except (TypeError, ValueError, RuntimeError) as exc:  # text, nested lists, ...: not one number each
        return (f"La función de recompensa {name} devolvió valores que TRL no puede convertir en un número por "
                f"respuesta ({_first_odd(items)!r}; TRL: {type(exc).__name__}: {exc}): cada valor debe ser un "
                "número (o None para no puntuar esa respuesta), en una lista plana.")
    import torch

    if torch.isinf(column).any():
        return (f"La función de recompensa {name} devolvió un valor infinito: la media del grupo sería infinita, "
                "todas las ventajas NaN y el run pararía en el primer paso. Devuelve números finitos (o None).")
    return None


def _first_odd(items: list):
    for value in items:
        if value is not None and not isinstance(value, numbers.Number):
            return value
    return items[0] if items else None


