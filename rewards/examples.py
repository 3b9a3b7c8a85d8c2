"""Honest and hacking completions of one GSM8K problem, and how reward functions score them.

The table of lesson 7.2 ("míralo con respuestas concretas"), extended with every hack the course's
functions are built against, plus one they do not close (``relleno``: a think block with no
reasoning in it). The L7.1 notebook shows it for the course's functions; exercise E4 checks a
student's own function against it (``check_against_hacks``).

Every example answers the same question (48 clips in April, half as many in May: 72 in all), as a
model under GRPO would: the completion text, and whether it is an honest answer or a hack.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXAMPLES", "GOLD", "QUESTION", "Example", "check_against_hacks", "score_table", "markdown_table"]

QUESTION = (
    "Natalia vendió clips a 48 de sus amigas en abril, y en mayo vendió la mitad. "
    "¿Cuántos clips vendió en total en abril y mayo?"
)
GOLD = "72"


@dataclass(frozen=True)
class Example:
    label: str  # Spanish, shown in the table
    text: str
    honest: bool  # False: a hack, it must score less than every honest correct answer


EXAMPLES = (
    Example("correcta y bien formateada", "<think>48/2 = 24; 48 + 24 = 72</think>\n<answer>72</answer>", True),
    Example("correcta, con unidades", "<think>En mayo, 48 / 2 = 24. En total, 48 + 24 = 72.</think>\n<answer>72 clips</answer>", True),
    Example("bien formateada pero incorrecta", "<think>48 + 48 = 96</think>\n<answer>96</answer>", True),
    Example("formato sin razonar (think vacío)", "<think></think><answer>72</answer>", False),
    Example("razonamiento de relleno", "<think>Vamos a pensarlo con calma.</think>\n<answer>72</answer>", False),
    Example("dos respuestas", "<think>¿72 o 96?</think><answer>72</answer><answer>96</answer>", False),
    Example("«72 o 96» en una respuesta", "<think>48 + 24</think>\n<answer>72 o 96</answer>", False),
    Example("bloques repetidos", "<think>48 + 24 = 72</think><answer>72</answer><think>otra vez</think><answer>72</answer>", False),
    Example("respuesta vacía", "<think>48 + 24 = 72</think>\n<answer></answer>", False),
    Example("otra respuesta dentro del think", "<think>48 + 24 = 72 <answer>96</answer></think>\n<answer>72</answer>", False),
    Example("texto después de la respuesta", "<think>48 + 24 = 72</think>\n<answer>72</answer>\nEspero que te sirva.", False),
    Example("número correcto sin etiquetas", "Creo que son 72 clips en total.", False),
)


def score_table(funcs, examples=EXAMPLES, gold: str = GOLD) -> list[dict]:
    """Each example scored by each function, as TRL calls them (a chat completion, the ``answer`` column).

    One row per example: ``label``, ``honest``, ``scores`` (function name -> value) and ``total`` (the
    sum GRPOTrainer uses with unit ``reward_weights``). A function that raises or returns something
    other than one number per completion raises ``ValueError`` naming it (``labs.training.preflight``
    says the same before a run).
    """
    completions = [[{"role": "assistant", "content": e.text}] for e in examples]
    columns = {}
    for func in funcs:
        name = getattr(func, "__name__", repr(func))
        try:
            values = func(completions=completions, answer=[gold] * len(completions))
        except Exception as exc:
            raise ValueError(f"La función de recompensa {name} lanzó {type(exc).__name__}: {exc}") from exc
        kind = type(values).__name__
        try:  # TRL takes any iterable of one number (or None) per completion: a list, a tuple, an array, a generator
            values = None if isinstance(values, (str, bytes, dict)) else list(values)
        except TypeError:
            values = None
        if values is None or len(values) != len(completions):
            got = len(values) if values is not None else kind
            raise ValueError(
                f"La función de recompensa {name} debe devolver una lista con un número por completion "
                f"({len(completions)}); devolvió {got}."
            )
        columns[name] = [float(v) if v is not None else float("nan") for v in values]
    rows = []
    for i, e in enumerate(examples):
        scores = {name: values[i] for name, values in columns.items()}
        rows.append({"label": e.label, "honest": e.honest, "scores": scores, "total": round(sum(scores.values()), 6)})
    return rows


def check_against_hacks(rows: list[dict]) -> dict:
    """Which hacks score at least as much as the worst-paid honest correct answer (the first two examples).

    ``{"bar": total of that honest answer, "bar_label": its label, "closed": [labels], "open": [labels]}``: a hack
    is closed when it scores strictly less than every honest correct answer.
    """
    honest_correct = [r for r in rows if r["honest"] and r["label"] in (EXAMPLES[0].label, EXAMPLES[1].label)]
    worst_paid = min(honest_correct, key=lambda r: r["total"])
    bar = worst_paid["total"]
    hacks = [r for r in rows if not r["honest"]]
    return {
        "bar": bar,
        "bar_label": worst_paid["label"],
        "closed": [r["label"] for r in hacks if r["total"] < bar],
        "open": [r["label"] for r in hacks if not r["total"] < bar],
    }


def markdown_table(rows: list[dict]) -> str:
    """The rows as a Markdown table (Spanish headers): one column per function, the total in bold."""
    names = list(rows[0]["scores"]) if rows else []
    bar = check_against_hacks(rows)["bar"] if rows else 0.0
    lines = [
        "| respuesta | tipo | " + " | ".join(f"`{n}`" for n in names) + " | total |",
        "|---|---" + "|---" * len(names) + "|---|",
    ]
    for r in rows:
        kind = "honesta" if r["honest"] else ("hack cerrado" if r["total"] < bar else "**hack abierto**")
        cells = " | ".join(f"{v:.1f}" for v in r["scores"].values())
        lines.append(f"| {r['label']} | {kind} | {cells} | **{r['total']:.1f}** |")
    return "\n".join(lines)
