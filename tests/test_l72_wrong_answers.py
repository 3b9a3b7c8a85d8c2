"""L7.2's checks cannot be fooled: for every question, plausible wrong answers fail and a correct answer in another
style passes.

The checks are the notebook's own (the test cells between otter's ``# BEGIN TESTS`` and ``# END TESTS`` in
``sources/``), run the way ``grader.check`` runs them (``tests/wrong_answers.py``). The wrong answers are a
student's usual ones: trl imported first, the variable set after the import or only checked for presence,
``FastLanguageModel`` taken from trl or transformers, the module returned instead of the class, the lesson's model
id that does not exist, numbers typed from the screen (they pass the lesson's profile and fail the one with every
value changed), a length without the prompt, a percentage for a fraction, arguments by position in the wrong order.

Also here: the hints (``failure_message``) and the stub comments name the concept, never the code; no failure
shows the value it expects; and the untouched student notebook runs to the end, each cell that needs an
unwritten function naming the exercise to finish (the demo, which trains, is skipped that way).
"""

from __future__ import annotations

import json
import re

import pytest

from labs import assign
from labs.l72 import answers
from wrong_answers import Checks, cell_text, course_code_test, hints, parse, run_untouched, standard_tests

SOURCE = assign.SOURCES_DIR / "L7_2_unsloth_standby.ipynb"
STUDENT = assign.STUDENT_DIR / "L7_2_unsloth_standby.ipynb"
PRELUDE = "import os\nimport sys\nfrom labs.l72 import answers\n"

CHECKS = Checks(SOURCE, prelude=PRELUDE)
TESTS, SOLUTIONS = parse(SOURCE)

LOAD_ARGS = """
        max_seq_length=perfil.max_prompt_tokens + perfil.max_completion_length,
        load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r)"""
TARGETS = '["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]'

WRONG = {
    "standby-posible": [
        ("solo mira la variable", """
def standby_posible(modulos, entorno):
    if entorno.get("UNSLOTH_VLLM_STANDBY") != "1":
        return False, "falta UNSLOTH_VLLM_STANDBY=1"
    return True, "Standby activo\""""),
        ("solo mira el orden", """
def standby_posible(modulos, entorno):
    antes = [m for m in ("trl", "transformers", "peft") if m in modulos and "unsloth" not in modulos]
    if antes:
        return False, " y ".join(antes) + " llegaron antes que unsloth"
    return True, "bien\""""),
        ("basta con que la variable exista", """
def standby_posible(modulos, entorno):
    if "unsloth" in modulos:
        if "UNSLOTH_VLLM_STANDBY" not in entorno:
            return False, "unsloth se importó sin Standby"
        return True, "ya está"
    antes = [m for m in ("trl", "transformers", "peft") if m in modulos]
    return (False, f"{antes} antes que unsloth") if antes else (True, "adelante")"""),
        ("culpa a trl aunque unsloth llegara antes", """
def standby_posible(modulos, entorno):
    antes = [m for m in ("trl", "transformers", "peft") if m in modulos]
    if antes:
        return False, ", ".join(antes) + " ya está importado"
    if "unsloth" in modulos and entorno.get("UNSLOTH_VLLM_STANDBY") != "1":
        return False, "unsloth sin Standby"
    return True, "adelante\""""),
        ("el mismo motivo para todo", """
def standby_posible(modulos, entorno):
    if "unsloth" in modulos:
        ok = entorno.get("UNSLOTH_VLLM_STANDBY") == "1"
    else:
        ok = not any(m in modulos for m in ("trl", "transformers", "peft"))
    return ok, "Standby y unsloth antes que trl, transformers y peft\""""),
        ("llama a la regla del guardián", """
def standby_posible(modulos, entorno):
    from labs.l72.standby import import_order_problem
    problema = import_order_problem(modulos, entorno)
    return problema is None, problema"""),
        ("solo dice sí o no", """
def standby_posible(modulos, entorno):
    if "unsloth" in modulos:
        return entorno.get("UNSLOTH_VLLM_STANDBY") == "1"
    return not any(m in modulos for m in ("trl", "transformers", "peft"))"""),
    ],
    "importar-unsloth": [
        ("trl primero", """
def importar_unsloth():
    from trl import GRPOTrainer
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    import unsloth
    return unsloth.FastLanguageModel"""),
        ("FastLanguageModel de transformers", """
def importar_unsloth():
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    import unsloth
    from transformers import FastLanguageModel
    return FastLanguageModel"""),
        ("FastLanguageModel de trl", """
def importar_unsloth():
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    import unsloth
    from trl import FastLanguageModel
    return FastLanguageModel"""),
        ("devuelve el módulo", """
def importar_unsloth():
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    import unsloth
    return unsloth"""),
        ("la variable después del import", """
def importar_unsloth():
    import unsloth
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    return unsloth.FastLanguageModel"""),
        ("sin la variable (la da por puesta)", """
def importar_unsloth():
    from unsloth import FastLanguageModel
    return FastLanguageModel"""),
        ("la variable como número", """
def importar_unsloth():
    os.environ["UNSLOTH_VLLM_STANDBY"] = 1
    from unsloth import FastLanguageModel
    return FastLanguageModel"""),
        ("setdefault: no cambia un valor que ya estaba", """
def importar_unsloth():
    os.environ.setdefault("UNSLOTH_VLLM_STANDBY", "1")
    from unsloth import FastLanguageModel
    return FastLanguageModel"""),
        ("llama al guardián del curso", """
def importar_unsloth():
    from labs.l72 import enable_standby_and_import_unsloth
    return enable_standby_and_import_unsloth().FastLanguageModel"""),
    ],
    "cargar-modelo": [
        ("el nombre de la lección, que no existe", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(model_name="unsloth/Qwen3-4B-Instruct",""" + LOAD_ARGS),
        ("los números de la pantalla", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(model_name="unsloth/Qwen3-4B-Instruct-2507", max_seq_length=2048,
        load_in_4bit=True, fast_inference=True, max_lora_rank=16, gpu_memory_utilization=0.4)"""),
        ("sin fast_inference", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=perfil.load_in_4bit, max_lora_rank=perfil.lora_r)"""),
        ("max_seq_length sin el prompt", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_completion_length,
        load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r)"""),
        ("max_lora_rank por debajo del rango", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r // 2)"""),
        ("la fracción en porcentaje", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r,
        gpu_memory_utilization=100 * perfil.vllm_gpu_memory_utilization)"""),
        ("todo por posición, en otro orden", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, perfil.max_seq_length, perfil.load_in_4bit, True)"""),
        ("siempre en 4 bits", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=True, fast_inference=True, max_lora_rank=perfil.lora_r)"""),
        ("la precisión del perfil y además 16 bits", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=perfil.load_in_4bit, load_in_16bit=True, fast_inference=True, max_lora_rank=perfil.lora_r)"""),
        ("un argumento mal escrito", """
def cargar_modelo(FastLanguageModel, perfil):
    return FastLanguageModel.from_pretrained(perfil.unsloth_model, max_seq_length=perfil.max_seq_length,
        load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r, load_in_4bits=True)"""),
    ],
    "anadir-lora": [
        ("los números de la pantalla", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=16, lora_alpha=16, target_modules={TARGETS},
        use_gradient_checkpointing="unsloth", random_state=42)"""),
        ("lora_alpha de la lección, fijo", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=perfil.lora_r, lora_alpha=16, target_modules={TARGETS},
        random_state=perfil.seed)"""),
        ("solo la atención", """
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=perfil.lora_r, lora_alpha=perfil.lora_alpha,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], random_state=perfil.seed)"""),
        ("el checkpointing de siempre", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=perfil.lora_r, lora_alpha=perfil.lora_alpha,
        target_modules={TARGETS}, use_gradient_checkpointing=True, random_state=perfil.seed)"""),
        ("sin la semilla del run", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=perfil.lora_r, lora_alpha=perfil.lora_alpha,
        target_modules={TARGETS})"""),
        ("r y lora_alpha cambiados", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(model, r=perfil.lora_alpha, lora_alpha=perfil.lora_r,
        target_modules={TARGETS}, random_state=perfil.seed)"""),
        ("sin el modelo", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    return FastLanguageModel.get_peft_model(r=perfil.lora_r, lora_alpha=perfil.lora_alpha, target_modules={TARGETS},
        random_state=perfil.seed)"""),
        ("devuelve el modelo sin LoRA", f"""
def anadir_lora(FastLanguageModel, model, perfil):
    FastLanguageModel.get_peft_model(model, r=perfil.lora_r, lora_alpha=perfil.lora_alpha, target_modules={TARGETS},
        random_state=perfil.seed)
    return model"""),
    ],
}

RIGHT = {
    "standby-posible": [("conjuntos y una tupla con None", """
def standby_posible(modulos, entorno):
    standby = entorno.get("UNSLOTH_VLLM_STANDBY", "") == "1"
    parcheados = {"trl", "transformers", "peft"} & set(modulos)
    if "unsloth" not in modulos and parcheados:
        return (False, "Demasiado tarde: " + " y ".join(sorted(parcheados)) + " llegaron antes que unsloth")
    if "unsloth" in modulos and not standby:
        return (False, "unsloth se importó con Standby apagado")
    return (True, None)""")],
    "importar-unsloth": [
        ("un alias y os.environ.update", """
def importar_unsloth():
    os.environ.update(UNSLOTH_VLLM_STANDBY="1")
    import unsloth as u
    return u.FastLanguageModel"""),
        ("importlib, y trl después de unsloth", """
def importar_unsloth():
    import importlib
    os.environ["UNSLOTH_VLLM_STANDBY"] = "1"
    fast = importlib.import_module("unsloth").FastLanguageModel
    from trl import GRPOTrainer  # después de unsloth: ya parcheado
    return fast"""),
    ],
    "cargar-modelo": [("el nombre por posición, un argumento de más, valores con margen", """
def cargar_modelo(FastLanguageModel, perfil):
    largo = perfil.max_prompt_tokens + perfil.max_completion_length
    ajustes = dict(max_seq_length=2 * largo, load_in_4bit=perfil.load_in_4bit, fast_inference=True,
                   max_lora_rank=2 * perfil.lora_r, dtype=None)
    modelo, tok = FastLanguageModel.from_pretrained(perfil.unsloth_model, **ajustes)
    return modelo, tok""")],
    "anadir-lora": [("por posición, en otro orden, escala 2 y argumentos de más", """
def anadir_lora(FastLanguageModel, model, perfil):
    proyecciones = ("gate_proj", "up_proj", "down_proj", "q_proj", "k_proj", "v_proj", "o_proj")
    return FastLanguageModel.get_peft_model(model, perfil.lora_r, proyecciones, 2 * perfil.lora_r,
                                            lora_dropout=0, bias="none", random_state=perfil.seed)""")],
}


(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(CHECKS, WRONG, RIGHT)


# Answers that call the course's own solution of the question; each fails, named with the same sentence everywhere.
COURSE_CALLS = [
    ("standby-posible", "standby.import_order_problem", next(a for l, a in WRONG["standby-posible"] if "guardián" in l)),
    ("importar-unsloth", "standby.enable_standby_and_import_unsloth",
     next(a for l, a in WRONG["importar-unsloth"] if "guardián" in l)),
    ("cargar-modelo", "gpu.from_pretrained_kwargs", """
def cargar_modelo(FastLanguageModel, perfil):
    from labs.l72 import gpu
    return FastLanguageModel.from_pretrained(**gpu.from_pretrained_kwargs(perfil))"""),
    ("anadir-lora", "gpu.get_peft_model_kwargs", """
def anadir_lora(FastLanguageModel, model, perfil):
    from labs.l72.gpu import get_peft_model_kwargs
    return FastLanguageModel.get_peft_model(model, **get_peft_model_kwargs(perfil))"""),
]
test_an_answer_that_calls_the_course_solution_is_named = course_code_test(CHECKS, COURSE_CALLS)


def test_the_questions_are_the_four_pieces():
    assert CHECKS.questions == ["anadir-lora", "cargar-modelo", "importar-unsloth", "standby-posible"]


# Code a hint or a stub comment must not dictate: a call, an assignment, an attribute of the profile, an import.
CODE = re.compile(r"\w+\(|\bperfil\.\w|os\.environ|\bimport\b|\breturn\b|\b\w+\s*=\s*\S|\"1\"|'1'|\[\"")


def test_hints_name_the_concept_not_the_code():
    found = {q: hints(codes) for q, codes in TESTS.items()}
    assert all(found.values()), found
    leaks = {q: h for q, hs in found.items() for h in hs if CODE.search(h)}
    assert not leaks, leaks


def test_stub_comments_name_the_concept_not_the_code():
    cells = [cell_text(c) for c in json.loads(STUDENT.read_text())["cells"]
             if "otter_answer_cell" in c["metadata"].get("tags", [])]
    assert len(cells) == len(TESTS)
    comments = [line.strip() for cell in cells for line in cell.splitlines() if line.strip().startswith("#")]
    leaks = [c for c in comments if CODE.search(c)]
    assert comments and not leaks, leaks


def _expected_values() -> set[str]:
    """What the checks would have to show to give the answer away: the model ids, the lengths prompt + completion
    of the check's profiles, a projection's name, and the phrases that announce an expected value."""
    values = {"Qwen3-4B-Instruct-2507", "Qwen3-4B-Base", "q_proj", "debe ser", "espera"}
    return values | {str(p.max_prompt_tokens + p.max_completion_length) for p in answers.check_profiles()}


@pytest.mark.parametrize("question", ["cargar-modelo", "anadir-lora"])
def test_no_failure_shows_the_value_it_expects(question):
    """Every wrong answer's failure (and the stub's) may repeat what the student passed, never what was expected."""
    expected = _expected_values()
    for label, answer in [*WRONG[question], ("el stub", None)]:
        stub = answer is None
        if stub:
            name = "cargar_modelo" if question == "cargar-modelo" else "anadir_lora"
            answer = f"def {name}(*args):\n    ...\n"
        failure = CHECKS.run(question, answer)
        assert failure, label
        shown = [v for v in expected if v in failure and v not in answer]
        assert not shown, (label, shown, failure)


def test_no_check_cell_spells_out_code_or_an_expected_value():
    """The check cells' own messages (the modules' messages are tested above by behaviour) dictate nothing."""
    import ast

    for question, codes in TESTS.items():
        for code in codes:
            body = code.split('""" # END TEST CONFIG', 1)[-1]
            texts = [n.value for n in ast.walk(ast.parse(body)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            leaks = [t for t in texts if CODE.search(t) or re.search(r"debe (ser|valer)", t)]
            assert not leaks, (question, leaks)


def test_an_unwritten_exercise_is_named_and_importar_unsloth_is_never_imported_for_real(capsys):
    import sys

    def real_modules():
        return {name: sys.modules.get(name) for name in ("unsloth", "trl", "transformers", "peft")}

    before = real_modules()
    namespace = CHECKS.namespace("standby-posible")
    pieces = [namespace[n] for n in ("standby_posible", "importar_unsloth", "cargar_modelo", "anadir_lora")]
    assert answers.ejercicios_hechos(*pieces) and capsys.readouterr().out == ""
    assert real_modules() == before

    def anadir_lora(*args):  # otter's stub: a body of `...`
        ...

    assert not answers.ejercicios_hechos(pieces[0], anadir_lora)
    out = capsys.readouterr().out
    assert "termina el ejercicio «añadir LoRA» (pregunta 4)" in out and "standby_posible" not in out

    def importar_unsloth():  # written, but imports a name trl does not have
        from trl import FastLanguageModel
        return FastLanguageModel

    assert not answers.ejercicios_hechos(importar_unsloth)
    out = capsys.readouterr().out
    assert "`importar_unsloth` falla (ImportError" in out and "«importar unsloth en el orden que funciona»" in out
    assert real_modules() == before


@pytest.mark.notebook  # executes the untouched student notebook in a kernel (no training: the demo is skipped)
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(tmp_path, monkeypatch):
    """Run All on the student notebook as generated (every exercise a stub): no cell raises, and every demo cell
    names the exercise to finish instead of training. Section 6 runs too (issue 52: it trained the whole L7.2 lab):
    in an empty runs folder it trains nothing, names the switch that would, and the comparison waits."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))  # the kernel inherits it: no finished run to read
    said, nb = run_untouched(STUDENT, tmp_path, guard="ejercicios_hechos(")
    long_runs = "".join(o.get("text", "") for c in nb.cells if "demo.full_run(" in "".join(c.source) for o in c.outputs)
    assert long_runs.count("ENTRENAR_EN_CPU = True") == 2 and not (tmp_path / "runs" / "_logs").exists(), long_runs
    assert len(said) == 4 and all("termina el ejercicio «" in s for s in said), said
    assert not any("mi_demo" in "".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells)
