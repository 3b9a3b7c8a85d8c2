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

The check scores the student's reward beside the recipe E4 trains (``e4.trained_functions``: the L7.1 notebook's
saved section 1, else the course's three). Every test here runs in an empty run area of its own (the course's three),
unless it saves a recipe: the lesson's rules as the L7.1 notebook saves them (``tests/lesson_recipe.py``), under which
a hack with the correct number is paid more than an honest answer and only a reward that outweighs that gap (a large
payment or a penalty) closes one; a small bonus, the answer students write first, fails with the gap in its message.
"""

from __future__ import annotations

import json
import re

import lesson_recipe
import numpy as np
import pytest
from test_l6_wrong_answers import CODE
from wrong_answers import Checks, cell_text, run_untouched, standard_tests

from labs import assign
from labs.exercises import e4
from labs.training.reward_outputs import REWARD_OUTPUTS

NOTEBOOK = "E4_tu_recompensa.ipynb"
CHECKS = Checks(assign.SOURCES_DIR / NOTEBOOK, prelude="import re\n")


@pytest.fixture(autouse=True)
def empty_run_area(tmp_path, monkeypatch):
    """A run area of the test's own, empty: the check scores the course's three unless the test saves a recipe (the
    session's run area holds whatever the L7.1 notebook saved there earlier on this worker)."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


# A small bonus to a reasoning with an operation: it closes "razonamiento de relleno" against the course's three
# (2.9 + 0.3 against 2.9) and nothing against the lesson's rules (a correct-number hack 2.7, "72 clips" 0.7 + 0.3).
SMALL_BONUS = """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    pagos = []
    for c in completions:
        razonamiento = completion_text(c).partition("</think>")[0]
        pagos.append(0.3 if re.search(r"\\d\\s*[-+*/]\\s*\\d", razonamiento) else 0.0)
    return pagos"""

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
        ("un pago grande a la cuenta, en vez de restar", """
def mi_recompensa(completions, **kwargs):
    from rewards import completion_text
    return [3.0 if re.search(r"\\d\\s*[-+*/]\\s*\\d", completion_text(c).split("</think>")[0]) else 0.0 for c in completions]"""),
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



def test_the_check_scores_the_saved_recipes_functions_that_e4_trains(tmp_path, monkeypatch):
    """Issue 51, item 4: the check scored the course's three beside the student's reward while E4 trains the recipe's
    (the L7.1 notebook's saved rewrites): it scores ``e4.trained_functions``, the same functions the run trains."""
    from test_recipe_identity import STUDENT, save_recipe

    from labs.core.profiles import get_profile
    from labs.l71 import recipe_identity

    saved = save_recipe(get_profile("ci"))
    funcs = e4.trained_functions()
    assert [f.__name__ for f in funcs] == [f.__name__ for f in STUDENT]
    assert recipe_identity.reward_hashes(funcs) == saved["rewards"]
    assert e4.own_functions([*funcs, *e4.trained_functions(["tests/data/recompensa_alumno.py:razonamiento_con_cuentas"])
                             ])[0]["name"] == "razonamiento_con_cuentas"  # the recipe's rewrites are not E4's own
    scored = []
    real = e4.trained_functions
    monkeypatch.setattr(e4, "trained_functions", lambda *a: scored.append(a) or real(*a))
    assert CHECKS.run("mi-recompensa") is None  # the solution, checked as grader.check checks it
    assert scored, "the check did not score the recipe's functions"


@pytest.mark.parametrize("recipe", ["none saved", "the L7.1 notebook's lesson rules"])
def test_the_reference_answer_passes_with_and_without_a_saved_recipe(recipe, tmp_path):
    """The reference answer closes a hack against the course's three and against the lesson's rules that L7.1's
    section 1 saves (there a correct-number hack is paid 2.0 more than "72 clips": a penalty outweighs it). It failed
    against the lesson's rules when it paid a 0.3 bonus (test_student_notebooks on the merged tree, reverted in ffd7afa)."""
    from rewards import examples

    if recipe != "none saved":
        lesson = lesson_recipe.save(tmp_path)
        recipe_alone = examples.check_against_hacks(examples.score_table(lesson))
        assert recipe_alone["bar"] < 1.0 and recipe_alone["open"]  # the lesson's rules leave correct-number hacks open
        assert [f.__name__ for f in e4.trained_functions()] == [f.__name__ for f in lesson]
    assert CHECKS.run("mi-recompensa") is None
    for label, answer in RIGHT["mi-recompensa"][-1:]:  # a large payment closes one too
        assert CHECKS.run("mi-recompensa", answer) is None, label


def test_a_small_bonus_fails_against_the_lessons_rules_and_says_the_gap(tmp_path):
    """A 0.3 bonus to a reasoning with an operation (the old reference answer, what students write first) closes a hack
    against the course's three but none against the lesson's rules: the check fails and gives the numbers that show
    why, the cheapest open hack's total against the worst-paid honest answer's, with the student's reward counted."""
    from rewards import examples

    assert CHECKS.run("mi-recompensa", SMALL_BONUS) is None  # the course's three: it closes filler reasoning
    lesson = lesson_recipe.save(tmp_path)
    failure = CHECKS.run("mi-recompensa", SMALL_BONUS)
    assert failure is not None and failure.startswith("test_cierra_un_hack_sin_abrir_otro: AssertionError: "), failure
    bonus = CHECKS.namespace("mi-recompensa", SMALL_BONUS)["mi_recompensa"]
    rows = examples.score_table([*lesson, bonus])
    totals = {r["label"]: r["total"] for r in rows}
    bar = examples.check_against_hacks(rows)["bar"]
    open_before = examples.check_against_hacks(examples.score_table(lesson))["open"]
    cheapest, dearest = min(open_before, key=totals.get), max(open_before, key=totals.get)
    assert f"esa es «{examples.EXAMPLES[1].label}», con {bar:.1f}" in failure, failure  # "72 clips": no correctness
    assert f"«{cheapest}», cobra {totals[cheapest]:.1f}" in failure, failure
    assert f"«{dearest}», {totals[dearest]:.1f}" in failure, failure
    assert totals[dearest] - bar > 1.5  # a correct-number hack: what the recipe pays it over the honest answer
    assert "restando a la trampa" in failure and "negativa" in failure, failure


@pytest.mark.parametrize("question,label,answer", [("mi-recompensa", label, answer) for label, answer in WRONG["mi-recompensa"]],
                         ids=lambda v: v if isinstance(v, str) and "\n" not in v else "")
def test_a_wrong_answer_fails_against_the_lessons_rules_too(question, label, answer, tmp_path):
    lesson_recipe.save(tmp_path)
    failure = CHECKS.run(question, answer)
    assert failure is not None and ": AssertionError: " in failure, (label, failure)
