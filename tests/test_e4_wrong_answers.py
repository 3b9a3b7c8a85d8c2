"""E4's check cannot be fooled, and accepts what TRL accepts: plausible wrong reward functions fail, right ones in
another style pass (a numpy array, a tuple with None for "not applicable", keyword-only columns).

The checks are the notebook's own (``sources/E4_tu_recompensa.ipynb``, between otter's ``# BEGIN TESTS`` and
``# END TESTS``), run the way ``grader.check`` runs them (``tests/wrong_answers.py``). What TRL turns into rewards
is the course's one table, ``labs.training.reward_outputs``; the check reads the output through it
(``labs.exercises.e4.trl_rewards``), so nothing here repeats it. The wrong answers: one value for the whole
batch, ``c["content"]`` on conversational completions, a function that closes no hack, a dict, the table's rewards
typed in by position, a reward normalised within the batch (the same answer paid differently beside others). Also here: the hints and the stub
comment name the concept, never the code; and Run All on the untouched student notebook ends without a traceback,
each cell that needs the function saying which exercise to finish, with nothing trained or written.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from test_l6_wrong_answers import CODE
from wrong_answers import Checks, cell_text, run_untouched, standard_tests

from labs import assign
from labs.exercises import e4
from labs.training.reward_outputs import REWARD_OUTPUTS

NOTEBOOK = "E4_tu_recompensa.ipynb"
CHECKS = Checks(assign.SOURCES_DIR / NOTEBOOK, prelude="import re\n")

WRONG = {
    "mi-recompensa": [
        ("un solo valor para todo el lote", """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    return [0.3 if any("+" in completion_text(c) for c in completions) else 0.0]"""),
        ("un número, no una lista", """
def mi_recompensa(completions, **kwargs):
    return 0.3"""),
        ("lee c['content'] aunque cada respuesta es una lista de mensajes", """
def mi_recompensa(completions, **kwargs):
    return [0.3 if re.search(r"\\d\\s*[-+*/]\\s*\\d", c["content"]) else 0.0 for c in completions]"""),
        ("no cierra ningún hack (paga el formato otra vez)", """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    return [0.5 if "<answer>" in completion_text(c) else 0.0 for c in completions]"""),
        ("no cierra ningún hack (siempre cero)", """
def mi_recompensa(completions, **kwargs):
    return [0.0] * len(completions)"""),
        ("devuelve un diccionario texto -> recompensa", """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    return {completion_text(c): (0.3 if "+" in completion_text(c) else 0.0) for c in completions}"""),
        ("las recompensas de la tabla, escritas por posición", """
def mi_recompensa(completions, **kwargs):
    tabla = [0.3, 0.3, 0.3, 0.0, 0.0, 0.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.0]
    return tabla[:len(completions)]"""),
        ("normaliza dentro del lote: la misma respuesta cobra distinto según las demás", """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    cuentas = [len(re.findall(r"\\d\\s*[-+*/]\\s*\\d", completion_text(c).split("</think>")[0])) for c in completions]
    mayor = max(cuentas) or 1
    return [0.6 * n / mayor for n in cuentas]"""),
    ],
}

RIGHT = {
    "mi-recompensa": [
        ("un array de numpy, con la respuesta pedida por nombre", """
def mi_recompensa(prompts=None, completions=None, answer=None, **kwargs):
    import numpy as np
    from rewards import completion_text
    textos = [completion_text(c) for c in completions]
    pensado = [t.split("</think>")[0] for t in textos]
    return np.array([0.4 if re.search(r"\\d\\s*[-+*/×÷x]\\s*\\d", p) else 0.0 for p in pensado])"""),
        ("una tupla, con None para lo que no sabe puntuar", """
def mi_recompensa(completions, **kwargs):
    pagos = []
    for c in completions:
        texto = "".join(m.get("content", "") for m in c if m.get("role") == "assistant")
        if "</think>" not in texto:
            pagos.append(None)  # sin razonamiento cerrado: no aplica
            continue
        razonamiento = texto.split("</think>")[0]
        pagos.append(0.3 if re.search(r"[0-9]\\s*[+*/-]\\s*[0-9]", razonamiento) else 0.0)
    return tuple(pagos)"""),
        ("un generador de floats de numpy", """
def mi_recompensa(completions, **kwargs):
    import numpy as np
    from rewards import completion_text
    return (np.float32(0.3) if re.search(r"\\d ?[+/*-] ?\\d", completion_text(c).partition("</think>")[0]) else np.float32(0)
            for c in completions)"""),
    ],
}

(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(CHECKS, WRONG, RIGHT)


@pytest.mark.parametrize("label,make,trl_accepts,preflight_accepts", REWARD_OUTPUTS, ids=[r[0] for r in REWARD_OUTPUTS])
def test_the_check_reads_a_reward_output_as_trl_and_preflight_do(label, make, trl_accepts, preflight_accepts):
    """Every row of the course's table of reward outputs: what pre-flight accepts, E4's check accepts, and no more."""
    def salida(completions, **kwargs):
        return make()

    completions = [[{"role": "assistant", "content": "x"}]] * 4
    try:
        rewards = e4.trl_rewards(salida, completions, answer=["72"] * 4)
    except ValueError:
        rewards = None
    assert (rewards is not None) is preflight_accepts, label
    if rewards is not None:
        assert len(rewards) == 4 and all(np.isfinite(rewards)), label  # None and NaN add nothing, as in TRL's sum


def test_hints_and_stub_comments_name_the_concept_not_the_code():
    hints = re.findall(r'failure_message: "(.+?)"', "\n".join(CHECKS.tests["mi-recompensa"]))
    assert len(hints) == 3 and not [h for h in hints if CODE.search(h) or re.search(r"\.\w+\b|=", h)], hints
    student = json.loads((assign.STUDENT_DIR / NOTEBOOK).read_text())
    cells = [cell_text(c) for c in student["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])
             and "def mi_recompensa(" in cell_text(c)]
    assert len(cells) == 1
    comments = [line.strip() for line in cells[0].splitlines() if line.strip().startswith("#")]
    assert comments and not [c for c in comments if CODE.search(c) or re.search(r"\.\w+\b|=|completion_text", c)], comments
    assert "import" not in cells[0]  # the stub does not hand over the tools of one solution


def test_an_unwritten_reward_is_named_in_spanish_and_a_written_one_passes(capsys):
    def mi_recompensa(completions, **kwargs):
        ...

    def rota(completions, **kwargs):
        return [c["content"] for c in completions]

    def lista(completions, answer, **kwargs):
        return [0.0 for _ in completions]

    assert not e4.recompensa_hecha(mi_recompensa)
    assert "aún no está escrita (devuelve None): termina el ejercicio «escribe tu función»" in capsys.readouterr().out
    assert not e4.recompensa_hecha(rota)
    assert "`rota` falla (TypeError" in capsys.readouterr().out
    assert e4.recompensa_hecha(lista) and capsys.readouterr().out == ""


@pytest.mark.notebook  # executes the untouched student notebook in a kernel (nothing trains: every run is guarded)
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(tmp_path, monkeypatch):
    """Run All on E4 as generated (the reward a stub): no cell raises, nothing trains, no reward file is written,
    and every cell that needs the student's function says, in Spanish, which exercise to finish."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    said, _ = run_untouched(assign.STUDENT_DIR / NOTEBOOK, tmp_path, guard="e4.recompensa_hecha(")
    assert len(said) >= 3 and all("termina el ejercicio «" in s for s in said), said
    assert not (tmp_path / e4.REWARD_FILE).exists()
    assert not [p for p in (tmp_path / "runs").glob("e4-*")]  # no run started

