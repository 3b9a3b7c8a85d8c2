"""L7.1's checks cannot be fooled: for every question, plausible wrong answers fail and a correct answer in
another style passes.

The checks are the notebook's own (the test cells between otter's ``# BEGIN TESTS`` and ``# END TESTS`` in
``sources/``), run the way ``grader.check`` runs them (``tests/wrong_answers.py``). The wrong answers are the mistakes
a student makes: one gold answer for every row, the screen's ``72``, a format regex without ``re.DOTALL``, the
message list read as a dict, the lesson's old batch rule, a learning rate from supervised fine-tuning, ``beta=0``,
values copied from the 5090's table onto a CPU profile. The right answers in another style include a tuple or a
numpy array from a reward (TRL accepts both), a harmless extra keyword, and a dict built another way.

Also here: the hints (``failure_message``) and the stub comments name the concept, never the code to type; no check
prints what it expects; ``labs.l71.pending`` names an unwritten exercise; and the untouched student notebook runs to
the end without a traceback and without training.
"""

from __future__ import annotations

import re

import pytest

from labs import assign
from wrong_answers import Checks, cell_text, course_code_test, hint_leaks, parse, run_untouched, standard_tests, stub_comments

NAME = "L7_1_grpo_trl_vllm.ipynb"
SOURCE = assign.SOURCES_DIR / NAME
STUDENT = assign.STUDENT_DIR / NAME
# What the notebook's exercise-context cells give the answers: the imports and the lesson's extract_answer.
PRELUDE = '''import re
import numpy as np
from trl import GRPOConfig
from labs import l71
from labs.l71 import settings
from labs.training import data, recipe

def extract_answer(text: str):
    m = re.search(r"<answer>\\s*(-?\\d[\\d,]*)\\s*</answer>", text)
    return m.group(1).replace(",", "") if m else None
'''

CHECKS = Checks(SOURCE, prelude=PRELUDE)
TESTS, SOLUTIONS = parse(SOURCE)

_CONFIG = '''
def mi_config(p, output_dir):
    return GRPOConfig(**settings.rest_of_recipe(p, output_dir), num_generations={G}, per_device_train_batch_size={b},
                      gradient_accumulation_steps={acc}, max_completion_length={length}, learning_rate={lr},
                      beta={beta}, logging_steps={logging}, max_steps={steps})'''


def config_answer(**changes) -> str:
    values = dict(G=4, b=4, acc=1, length=32, lr=5e-6, beta=0.04, logging=1, steps="p.max_steps")
    return _CONFIG.format(**{**values, **changes})


_TRAINER = '''
def argumentos_trainer(p, modelo, recompensas, config, filas, run):
    return dict(model=modelo, reward_funcs={rewards}, args={args}, train_dataset={dataset},
                callbacks={callbacks}, peft_config={peft})'''


def trainer_answer(**changes) -> str:
    values = dict(rewards="recompensas", args="config", dataset="data.to_dataset(filas)",
                  callbacks="recipe.run_folder_callbacks(run)", peft="recipe.lora_config(p) if p.use_lora else None")
    return _TRAINER.format(**{**values, **changes})


WRONG = {
    "texto-completion": [
        ("siempre el primer mensaje (falla con un str)", """
def texto(completion):
    return completion[0]["content"]"""),
        ("la lista leída como un diccionario", """
def texto(completion):
    return completion if isinstance(completion, str) else completion["content"]"""),
        ("el último mensaje", """
def texto(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]"""),
        ("todos los mensajes juntos", """
def texto(completion):
    return completion if isinstance(completion, str) else " ".join(m["content"] for m in completion)"""),
        ("str() de la lista", """
def texto(completion):
    return str(completion)"""),
    ],
    "recompensa-correccion": [
        ("una sola respuesta de oro para todas las filas", """
def correctness_reward(completions, answer, **kwargs):
    gold = answer[0]
    return [2.0 if extract_answer(texto(c)) == gold else 0.0 for c in completions]"""),
        ("el 72 de la pantalla", """
def correctness_reward(completions, answer, **kwargs):
    return [2.0 if extract_answer(texto(c)) == "72" else 0.0 for c in completions]"""),
        ("el número contenido en el oro", """
def correctness_reward(completions, answer, **kwargs):
    out = []
    for c, gold in zip(completions, answer):
        pred = extract_answer(texto(c))
        out.append(2.0 if pred is not None and pred in gold else 0.0)
    return out"""),
        ("la regex sobre la lista de mensajes", """
def correctness_reward(completions, answer, **kwargs):
    return [2.0 if extract_answer(c) == g else 0.0 for c, g in zip(completions, answer)]"""),
        ("c['content'] en vez de c[0]['content']", """
def correctness_reward(completions, answer, **kwargs):
    return [2.0 if extract_answer(c["content"]) == g else 0.0 for c, g in zip(completions, answer)]"""),
        ("el oro en cualquier parte del texto", """
def correctness_reward(completions, answer, **kwargs):
    return [2.0 if g in texto(c) else 0.0 for c, g in zip(completions, answer)]"""),
    ],
    "recompensas-formato": [
        ("la regex sin re.DOTALL", """
def format_reward(completions, **kwargs):
    pat = re.compile(r"<think>.*?</think>\\s*<answer>.*?</answer>")
    return [0.5 if pat.search(texto(c)) else 0.0 for c in completions]

def soft_format_reward(completions, **kwargs):
    return [0.1 * (("<think>" in texto(c)) + ("<answer>" in texto(c))) for c in completions]"""),
        ("re.match: la respuesta tiene que empezar por la etiqueta", """
def format_reward(completions, **kwargs):
    pat = re.compile(r"<think>.*?</think>\\s*<answer>.*?</answer>", re.DOTALL)
    return [0.5 if pat.match(texto(c)) else 0.0 for c in completions]

def soft_format_reward(completions, **kwargs):
    return [0.1 * (("<think>" in texto(c)) + ("<answer>" in texto(c))) for c in completions]"""),
        ("la parcial cuenta cada aparición", """
def format_reward(completions, **kwargs):
    pat = re.compile(r"<think>.*?</think>\\s*<answer>.*?</answer>", re.DOTALL)
    return [0.5 if pat.search(texto(c)) else 0.0 for c in completions]

def soft_format_reward(completions, **kwargs):
    return [0.1 * (texto(c).count("<think>") + texto(c).count("<answer>")) for c in completions]"""),
        ("la parcial paga también las de cierre", """
def format_reward(completions, **kwargs):
    pat = re.compile(r"<think>.*?</think>\\s*<answer>.*?</answer>", re.DOTALL)
    return [0.5 if pat.search(texto(c)) else 0.0 for c in completions]

def soft_format_reward(completions, **kwargs):
    return [0.1 * (("think>" in texto(c)) + ("answer>" in texto(c))) for c in completions]"""),
        ("la parcial con 'in' sobre la lista (la errata de la lección)", """
def format_reward(completions, **kwargs):
    pat = re.compile(r"<think>.*?</think>\\s*<answer>.*?</answer>", re.DOTALL)
    return [0.5 if pat.search(texto(c)) else 0.0 for c in completions]

def soft_format_reward(completions, **kwargs):
    return [0.1 * (("<think>" in c) + ("<answer>" in c)) for c in completions]"""),
    ],
    "dispositivo": [
        ("al revés", """
def argumentos_dispositivo(hay_gpu):
    return {"use_cpu": hay_gpu, "bf16": not hay_gpu}"""),
        ("siempre la CPU (lo que vale en esta máquina)", """
def argumentos_dispositivo(hay_gpu):
    return {"use_cpu": True, "bf16": False}"""),
        ("sin la precisión", """
def argumentos_dispositivo(hay_gpu):
    return {"use_cpu": not hay_gpu}"""),
        ("fp16 en la GPU", """
def argumentos_dispositivo(hay_gpu):
    return {"use_cpu": not hay_gpu, "bf16": False, "fp16": hay_gpu}"""),
        ("un argumento que GRPOConfig no tiene", """
def argumentos_dispositivo(hay_gpu):
    return {"device": "cuda" if hay_gpu else "cpu", "bf16": hay_gpu}"""),
    ],
    "beta-por-defecto": [
        ("siempre hay KL", """
def calcula_kl(config):
    return True"""),
        ("nunca hay KL (el valor de la pantalla)", """
def calcula_kl(config):
    return False"""),
        ("solo con el beta de la lección", """
def calcula_kl(config):
    return config.beta == 0.04"""),
        ("basta con que exista el atributo", """
def calcula_kl(config):
    return config.beta is not None"""),
        ("un número en vez de una respuesta", """
def calcula_kl(config):
    return config.beta"""),
    ],
    "regla-del-lote": [
        ("la regla de la lección: el lote por dispositivo múltiplo de G", """
def lote_valido(por_dispositivo, acumulacion, G, procesos=1):
    return por_dispositivo % G == 0"""),
        ("olvida los procesos", """
def lote_valido(por_dispositivo, acumulacion, G, procesos=1):
    return (por_dispositivo * acumulacion) % G == 0"""),
        ("al revés: G múltiplo del lote", """
def lote_valido(por_dispositivo, acumulacion, G, procesos=1):
    return G % (por_dispositivo * acumulacion * procesos) == 0"""),
        ("suma en vez de producto", """
def lote_valido(por_dispositivo, acumulacion, G, procesos=1):
    return (por_dispositivo + acumulacion) * procesos % G == 0"""),
    ],
    "grpo-config": [
        ("un grupo partido entre pasos", config_answer(G=4, b=6, acc=1)),
        ("el learning rate de un ajuste supervisado", config_answer(lr=2e-4)),
        ("beta=0 (el valor por defecto de TRL)", config_answer(beta=0.0)),
        ("los valores de la 5090 copiados en un perfil de CPU", config_answer(G=8, b=8, acc=4, length=1024, lr=1e-5)),
        ("una sola fila de métricas", config_answer(logging=10)),
        ("sin la receta del curso", """
def mi_config(p, output_dir):
    return GRPOConfig(output_dir=output_dir, num_generations=4, per_device_train_batch_size=4, max_completion_length=32,
                      learning_rate=5e-6, beta=0.04, logging_steps=1, max_steps=p.max_steps)"""),
        ("con max_prompt_length", """
def mi_config(p, output_dir):
    return GRPOConfig(**settings.rest_of_recipe(p, output_dir), num_generations=4, per_device_train_batch_size=4,
                      max_prompt_length=256, max_completion_length=32, learning_rate=5e-6, beta=0.04, logging_steps=1,
                      max_steps=p.max_steps)"""),
    ],
    "argumentos-trainer": [
        ("sin los callbacks del run", """
def argumentos_trainer(p, modelo, recompensas, config, filas, run):
    return dict(model=modelo, reward_funcs=recompensas, args=config, train_dataset=data.to_dataset(filas),
                peft_config=recipe.lora_config(p) if p.use_lora else None)"""),
        ("LoRA en todos los perfiles", trainer_answer(peft="recipe.lora_config(p)")),
        ("las filas sin convertir", trainer_answer(dataset="filas")),
        ("la configuración de la receta, no la tuya", trainer_answer(args="GRPOConfig(**recipe.grpo_config_kwargs(p, str(run.checkpoints)))")),
        ("las recompensas del curso, no las tuyas", trainer_answer(rewards="__import__('rewards').reward_functions()")),
    ],
}

RIGHT = {
    "texto-completion": [("try/except y next(iter(...))", """
def texto(completion):
    try:
        return next(iter(completion))["content"]
    except TypeError:
        return completion""")],
    "recompensa-correccion": [
        ("un array de numpy", """
def correctness_reward(completions, answer, **kwargs):
    preds = [extract_answer(texto(c)) for c in completions]
    return np.where([p is not None and p == g for p, g in zip(preds, answer)], 2.0, 0.0)"""),
        ("una tupla, comparando enteros", """
def correctness_reward(completions, answer, **kwargs):
    def paga(c, gold):
        pred = extract_answer(texto(c))
        return 2.0 if pred is not None and int(pred) == int(gold) else 0.0
    return tuple(paga(c, g) for c, g in zip(completions, answer))"""),
    ],
    "recompensas-formato": [("flags en línea y un array; la parcial con sum", """
def format_reward(completions, **kwargs):
    return np.array([0.5 * bool(re.search(r"(?s)<think>.*?</think>\\s*<answer>.*?</answer>", texto(c))) for c in completions])

def soft_format_reward(completions, **kwargs):
    return tuple(0.1 * sum(tag in texto(c) for tag in ("<think>", "<answer>")) for c in completions)""")],
    "dispositivo": [("dict() con un fp16=False de más y bool()", """
def argumentos_dispositivo(hay_gpu):
    return dict(use_cpu=not hay_gpu, bf16=bool(hay_gpu), fp16=False)"""),
        ("solo lo que cambia en CPU", """
def argumentos_dispositivo(hay_gpu):
    return {} if hay_gpu else {"use_cpu": True, "bf16": False}""")],
    "beta-por-defecto": [("bool() y getattr", """
def calcula_kl(config):
    return bool(getattr(config, "beta", 0.0))""")],
    "regla-del-lote": [("numpy y not", """
def lote_valido(por_dispositivo, acumulacion, G, procesos=1):
    return not np.mod(np.prod([por_dispositivo, acumulacion, procesos]), G)""")],
    "grpo-config": [
        ("otros valores válidos, con un diccionario", """
def mi_config(p, output_dir):
    mios = dict(num_generations=2, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                max_completion_length=64, learning_rate=1e-6, beta=0.1, logging_steps=2, max_steps=20)
    return GRPOConfig(**{**settings.rest_of_recipe(p, output_dir), **mios})"""),
        ("el perfil donde vale, elegido a mano donde no", """
def mi_config(p, output_dir):
    kw = settings.rest_of_recipe(p, output_dir)
    kw.update(num_generations=p.num_generations, per_device_train_batch_size=p.num_generations * 2,
              gradient_accumulation_steps=1, max_completion_length=48, learning_rate=p.learning_rate,
              beta=0.08, logging_steps=1, max_steps=12)
    return GRPOConfig(**kw)"""),
    ],
    "argumentos-trainer": [("un literal con processing_class de más", """
def argumentos_trainer(p, modelo, recompensas, config, filas, run):
    lora = None
    if p.use_lora:
        lora = recipe.lora_config(p)
    return {"model": modelo, "reward_funcs": list(recompensas), "args": config, "processing_class": None,
            "train_dataset": data.to_dataset(filas), "callbacks": recipe.run_folder_callbacks(run), "peft_config": lora}""")],
}


(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(CHECKS, WRONG, RIGHT)


# Answers that call the course's own solution of the question; each fails, named with the same sentence everywhere.
COURSE_CALLS = [
    ("grpo-config", "recipe.grpo_config_kwargs", """
def mi_config(p, output_dir):
    return GRPOConfig(**recipe.grpo_config_kwargs(p, output_dir))"""),
    ("texto-completion", "parsing.completion_text", """
def texto(completion):
    from rewards.parsing import completion_text
    return completion_text(completion)"""),
    ("recompensa-correccion", "rewards.correctness_reward", """
def correctness_reward(completions, answer, **kwargs):
    import rewards
    return rewards.correctness_reward(completions, answer, **kwargs)"""),
]
test_an_answer_that_calls_the_course_solution_is_named = course_code_test(CHECKS, COURSE_CALLS)


# Code a hint or a stub comment must not dictate: a call, an attribute, an assignment or keyword, an index.
CODE = re.compile(r"\w\(|\w\.\w|=|\[|\bre\.|DOTALL|\b\d+e-\d\b")


def test_hints_name_the_concept_not_the_code():
    assert not hint_leaks(TESTS, CODE)


def test_stub_comments_name_the_concept_not_the_code():
    cells, comments = stub_comments(STUDENT)
    leaks = [c for c in comments if CODE.search(c)]
    assert cells == len(TESTS) and len(comments) >= len(TESTS) - 2 and not leaks, leaks


# What a failure message may show: the student's own output or input, names, counts; never a reference's value.
SHOWN = re.compile(r"tuyo!r|tuyo|value|t!r|oro!r|oro|cerca|int\(oro\):,|f\.__name__|len\(\w+\)|type\(\w+\)\.__name__|hay_gpu|ajenos|faltan|"
                   r"distintos|p\.name|nombre|b|acc|G|procesos|err|describe_error\(err\)|honesta\['scores'\]|"
                   r"'con ' \+ str\(cambios\) if cambios else 'sin cambios'|settings\.problems_es\(rotos\)")


def test_no_check_prints_what_it_expects():
    for question, codes in TESTS.items():
        for code in codes:
            for message in re.findall(r'f"([^"]*)"', code):
                fields = re.findall(r"\{([^{}]*)\}", message)
                assert all(SHOWN.fullmatch(f) for f in fields), (question, message)


def test_a_reason_never_gives_the_value_to_type():
    """The rules' reasons (what the grpo-config check prints) name the rule, not a value for the student's knob."""
    from labs.core.profiles import get_profile
    from labs.l71 import settings

    for name in ("ci", "cpu", "rtx5090"):
        profile = get_profile(name)
        bad = {"num_generations": 3, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1,
               "max_completion_length": 8, "learning_rate": 2e-4, "beta": 0.0, "logging_steps": 5, "max_steps": 5}
        found = settings.problems(bad, profile)
        assert set(found) >= {"per_device_train_batch_size", "max_completion_length", "learning_rate", "beta",
                              "logging_steps"}, found
        for knob, reason in found.items():
            assert not re.search(rf"\b{knob}\s*=", reason) and "por ejemplo" not in reason and "Pon " not in reason, reason


def test_an_unwritten_exercise_is_named_instead_of_a_traceback(capsys):
    from labs.l71.pending import EXERCISES, ejercicios_hechos

    namespace = CHECKS.namespace("texto-completion")
    solved = [namespace[name] for name in EXERCISES]
    assert ejercicios_hechos(*solved) and capsys.readouterr().out == ""

    def mi_config(p, output_dir):  # otter's stub: a body of `...`
        ...

    assert not ejercicios_hechos(namespace["texto"], mi_config)
    out = capsys.readouterr().out
    assert "`mi_config` aún no está escrita" in out and "«GRPOConfig(...)» (sección 3)" in out
    assert "`texto`" not in out and "Traceback" not in out


@pytest.mark.notebook  # executes the untouched student notebook in a kernel (nothing trains: sections 4-10 are guarded)
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(tmp_path, monkeypatch):
    """Run All on the student notebook as generated (every exercise a stub): no cell raises, nothing trains, nothing is
    saved for the terminal run, and every cell that needs a student function says, in Spanish, which exercise to finish."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    # Section 12's trap runs here too: behind its switch (ENTRENAR_TRAMPA = False) it only says how long it would take.
    said, nb = run_untouched(STUDENT, tmp_path, guard="l71.ejercicios_hechos(")
    assert len(said) >= 6 and all("termina el ejercicio «" in s for s in said), said
    assert not (tmp_path / "runs" / "_ajustes").exists()  # no reward file, no settings saved
    assert not any((tmp_path / "runs").glob("l71-*/metrics.jsonl"))  # nothing trained
    # sections 5-10 wait for section 4's run and say so (they printed nothing), and the trap says how to train it
    from labs.l71 import ESPERA_ES

    waiting = [c for c in nb.cells if c.cell_type == "code" and cell_text(c).startswith("if listo:")]
    printed = ["".join(o.get("text", "") for o in c.outputs) for c in waiting]
    assert len(waiting) >= 8 and all(ESPERA_ES in p for p in printed), printed
    trap_cell = next(c for c in nb.cells if "trap.compare(" in cell_text(c))
    assert "ENTRENAR_TRAMPA = True" in "".join(o.get("text", "") for o in trap_cell.outputs)
    # issue 52: section 11 printed a run folder and a C2b report that did not exist; it says what to do instead
    report_cell = next(c for c in nb.cells if '"grading" / "informe.md"' in cell_text(c))
    report_said = "".join(o.get("text", "") for o in report_cell.outputs)
    assert "Aún no hay informe C2b" in report_said and "python -m labs l71" in report_said, report_said
