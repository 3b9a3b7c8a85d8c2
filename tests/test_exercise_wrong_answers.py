"""E1-E3's variant checks cannot be fooled: for each notebook's variant question, plausible wrong answers fail and a
correct answer in another style passes.

The checks are the notebook's own (the test cells between otter's ``# BEGIN TESTS`` and ``# END TESTS`` in
``sources/``), run the way ``grader.check`` runs them (``tests/wrong_answers.py``). The
wrong answers are the mistakes a student makes: the numbers of one profile typed in, G changed alone, the micro-batch
grown to fit the groups, the reward dropped by its position, the input list changed in place, another setting
changed along the way. Also here: the hints and the stub comments name the concept, never the code, and no check
prints what it expects.
"""

from __future__ import annotations

import json
import re

import pytest
from test_l6_wrong_answers import CODE
from wrong_answers import Checks, cell_text, standard_tests

from labs import assign

PRELUDE = "import math\nimport pandas as pd\nfrom labs.core.profiles import get_profile\n"
NOTEBOOKS = {"variantes-e1": "E1_tamano_de_grupo.ipynb", "variantes-e2": "E2_reward_hacking.ipynb",
             "variantes-e3": "E3_peso_kl.ipynb"}


CHECKS = Checks(*(assign.SOURCES_DIR / nb for nb in NOTEBOOKS.values()), prelude=PRELUDE)
run_check = CHECKS.run


WRONG = {
    "variantes-e1": [
        ("solo cambia G (la acumulación queda)", """
def perfil_con_grupo(perfil, G):
    return perfil.replace(num_generations=G)"""),
        ("el micro-lote crece para que quepan los grupos", """
def perfil_con_grupo(perfil, G):
    return perfil.replace(num_generations=G, per_device_train_batch_size=perfil.prompts_per_step * G,
                          gradient_accumulation_steps=1)"""),
        ("la acumulación escalada por G con división entera", """
def perfil_con_grupo(perfil, G):
    acumulacion = perfil.gradient_accumulation_steps * G // perfil.num_generations
    return perfil.replace(num_generations=G, gradient_accumulation_steps=max(1, acumulacion))"""),
        ("los números del perfil ci, escritos a mano", """
def perfil_con_grupo(perfil, G):
    micro = 4 if G % 4 == 0 else 2 if G % 2 == 0 else 1
    return perfil.replace(num_generations=G, per_device_train_batch_size=micro, gradient_accumulation_steps=G // micro)"""),
        ("parte del perfil ci y no del que recibe", """
def perfil_con_grupo(perfil, G):
    base = get_profile("ci")
    respuestas = base.prompts_per_step * G
    micro = math.gcd(base.per_device_train_batch_size, respuestas)
    return base.replace(num_generations=G, per_device_train_batch_size=micro, gradient_accumulation_steps=respuestas // micro)"""),
        ("siempre un micro-lote de 1 (el del perfil cabía)", """
def perfil_con_grupo(perfil, G):
    return perfil.replace(num_generations=G, per_device_train_batch_size=1,
                          gradient_accumulation_steps=perfil.prompts_per_step * G)"""),
        ("además acorta el entrenamiento para compensar", """
def perfil_con_grupo(perfil, G):
    respuestas = perfil.prompts_per_step * G
    micro = math.gcd(perfil.per_device_train_batch_size, respuestas)
    return perfil.replace(num_generations=G, per_device_train_batch_size=micro,
                          gradient_accumulation_steps=respuestas // micro,
                          max_steps=perfil.max_steps * perfil.num_generations // G)"""),
        ("devuelve los ajustes, no el perfil", """
def perfil_con_grupo(perfil, G):
    respuestas = perfil.prompts_per_step * G
    micro = math.gcd(perfil.per_device_train_batch_size, respuestas)
    return {"num_generations": G, "per_device_train_batch_size": micro, "gradient_accumulation_steps": respuestas // micro}"""),
    ],
    "variantes-e2": [
        ("la lista de la lección, escrita a mano", """
def recompensas_sin_correccion(recompensas):
    return ["format_reward", "soft_format_reward"]"""),
        ("quita la primera, sea cual sea", """
def recompensas_sin_correccion(recompensas):
    return recompensas[1:]"""),
        ("quita la de corrección de la lista recibida", """
def recompensas_sin_correccion(recompensas):
    recompensas.remove("correctness_reward")
    return recompensas"""),
        ("diferencia de conjuntos (pierde el orden)", """
def recompensas_sin_correccion(recompensas):
    return sorted(set(recompensas) - {"correctness_reward"})"""),
        ("quita la de formato en vez de la de corrección", """
def recompensas_sin_correccion(recompensas):
    return [n for n in recompensas if n != "format_reward"]"""),
        ("se queda solo con las de formato conocidas", """
def recompensas_sin_correccion(recompensas):
    return [n for n in recompensas if n in ("format_reward", "soft_format_reward")]"""),
    ],
    "variantes-e3": [
        ("beta fijo en 0.2", """
def perfil_con_beta(perfil, beta):
    return perfil.replace(beta=0.2)"""),
        ("parte del perfil ci y no del que recibe", """
def perfil_con_beta(perfil, beta):
    return get_profile("ci").replace(beta=beta)"""),
        ("devuelve el perfil sin cambiar", """
def perfil_con_beta(perfil, beta):
    return perfil"""),
        ("además cambia el learning rate", """
def perfil_con_beta(perfil, beta):
    return perfil.replace(beta=beta, learning_rate=perfil.learning_rate * (1 + beta))"""),
        ("devuelve el ajuste, no el perfil", """
def perfil_con_beta(perfil, beta):
    return {"beta": beta}"""),
    ],
}

RIGHT = {
    "variantes-e1": [("el mayor micro-lote que cabe, buscado con un bucle", """
def perfil_con_grupo(perfil, G):
    prompts = perfil.generation_batch_size // perfil.num_generations
    lote = prompts * G
    micro = perfil.per_device_train_batch_size
    while lote % micro:
        micro -= 1
    return perfil.replace(per_device_train_batch_size=micro, gradient_accumulation_steps=lote // micro, num_generations=G)""")],
    "variantes-e2": [("con filter, en una tupla", """
def recompensas_sin_correccion(recompensas):
    return tuple(filter(lambda nombre: nombre != "correctness_reward", recompensas))""")],
    "variantes-e3": [("dataclasses.replace, con beta como float", """
def perfil_con_beta(perfil, beta):
    import dataclasses
    return dataclasses.replace(perfil, beta=float(beta))""")],
}


(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(
    CHECKS, WRONG, RIGHT, questions=NOTEBOOKS)


@pytest.mark.parametrize("question", sorted(NOTEBOOKS))
def test_hints_and_stub_comments_name_the_concept_not_the_code(question):
    hints = re.findall(r'failure_message: "(.+?)"', "\n".join(CHECKS.tests[question]))
    assert hints and not [h for h in hints if CODE.search(h) or re.search(r"\.\w+\b|=", h)], hints
    student = json.loads((assign.STUDENT_DIR / NOTEBOOKS[question]).read_text())
    function = {"variantes-e1": "perfil_con_grupo", "variantes-e2": "recompensas_sin_correccion",
                "variantes-e3": "perfil_con_beta"}[question]
    cells = [cell_text(c) for c in student["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])
             and f"def {function}(" in cell_text(c)]
    assert len(cells) == 1
    comments = [line.strip() for line in cells[0].splitlines() if line.strip().startswith("#")]
    assert comments and not [c for c in comments if CODE.search(c) or re.search(r"\.\w+\b|=", c)], comments


@pytest.mark.parametrize("question", sorted(NOTEBOOKS))
def test_no_check_prints_what_it_expects(question):
    """A failure message shows the student's input or output, never the expected value (nor a reference's)."""
    for code in CHECKS.tests[question]:
        for message in re.findall(r'f"([^"]*)"', code):
            fields = re.findall(r"\{([^}]*)\}", message)
            assert all(re.fullmatch(r"G|beta|base\.name|lista|list\(tuya\)|donde|otros|micro|lote|lote // G|"
                                    r"tuyo\.\w+", f) for f in fields), (question, message)


@pytest.mark.notebook  # executes each untouched student notebook in a kernel (nothing trains: every run is guarded)
@pytest.mark.parametrize("name", sorted(set(NOTEBOOKS.values())))
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(name, tmp_path, monkeypatch):
    """Run All on the student notebook as generated (every exercise a stub): no cell raises, nothing trains, nothing
    is saved for the sweep, and every cell that needs a student function says, in Spanish, which exercise to finish."""
    import shutil

    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    student = assign.STUDENT_DIR / name
    shutil.copy(student, tmp_path / name)  # grader.check reads its tests from the notebook's metadata
    nb = nbformat.read(student, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [(cell_text(c)[:60], o.get("ename"), o.get("evalue")) for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    guarded = [c for c in nb.cells if c.cell_type == "code" and "ex.ejercicios_hechos(" in cell_text(c)]
    said = ["".join(o.get("text", "") for o in c.outputs) for c in guarded]
    assert len(guarded) >= 5 and all("termina el ejercicio «" in s for s in said), said
    assert not (tmp_path / "runs").exists()  # no variant saved, no run started
