"""E1-E3's checks cannot be fooled: for each notebook's variant question and comparison question, plausible wrong
answers fail and a correct answer in another style passes.

The checks are the notebook's own (the test cells between otter's ``# BEGIN TESTS`` and ``# END TESTS`` in
``sources/``), run the way ``grader.check`` runs them (``tests/wrong_answers.py``). The
wrong answers are the mistakes a student makes: the numbers of one profile typed in, G changed alone, the micro-batch
grown to fit the groups, the reward dropped by its position, the input list changed in place, another setting
changed along the way; and for the comparisons (``comparar_e1`` ...), which the checks run on tables of their own
(other variants, other values, rows out of order, steps without a value), the wrong grouping key, the mean of the
wrong column, the first and last step instead of the window, a sort that loses the steps' order, numbers typed from
the screen. Also here: the hints and the stub comments name the concept, never the code, and no check
prints what it expects.
"""

from __future__ import annotations

import json
import re

import pytest
from test_l6_wrong_answers import CODE
from wrong_answers import Checks, cell_text, course_code_test, run_untouched, standard_tests

from labs import assign

PRELUDE = "import math\nimport pandas as pd\nfrom labs.core.profiles import get_profile\n"
NOTEBOOKS = {"variantes-e1": "E1_tamano_de_grupo.ipynb", "variantes-e2": "E2_reward_hacking.ipynb",
             "variantes-e3": "E3_peso_kl.ipynb", "comparar-e1": "E1_tamano_de_grupo.ipynb",
             "comparar-e2": "E2_reward_hacking.ipynb", "comparar-e3": "E3_peso_kl.ipynb"}
FUNCTIONS = {"variantes-e1": "perfil_con_grupo", "variantes-e2": "recompensas_sin_correccion",
             "variantes-e3": "perfil_con_beta", "comparar-e1": "comparar_e1", "comparar-e2": "comparar_e2",
             "comparar-e3": "comparar_e3"}


CHECKS = Checks(*(assign.SOURCES_DIR / nb for nb in sorted(set(NOTEBOOKS.values()))), prelude=PRELUDE)
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
    "comparar-e1": [
        ("agrupa por paso en vez de por variante", """
def comparar_e1(metricas):
    g = metricas.groupby("step")
    return pd.DataFrame({"grupos_sin_varianza": g["frac_reward_zero_std"].mean(),
                         "grad_norm_media": g["grad_norm"].mean(), "grad_norm_std": g["grad_norm"].std()})"""),
        ("la media de la recompensa en vez de la de los grupos sin varianza", """
def comparar_e1(metricas):
    g = metricas.groupby("variante")
    return pd.DataFrame({"grupos_sin_varianza": g["reward"].mean(),
                         "grad_norm_media": g["grad_norm"].mean(), "grad_norm_std": g["grad_norm"].std()})"""),
        ("la desviación típica poblacional (numpy, ddof=0)", """
def comparar_e1(metricas):
    import numpy as np
    g = metricas.groupby("variante")
    return pd.DataFrame({"grupos_sin_varianza": g["frac_reward_zero_std"].mean(),
                         "grad_norm_media": g["grad_norm"].mean(),
                         "grad_norm_std": g["grad_norm"].agg(lambda x: np.std(x.dropna()))})"""),
        ("el índice en el orden de las filas (desalineado con el groupby)", """
def comparar_e1(metricas):
    g = metricas.groupby("variante")
    return pd.DataFrame({"grupos_sin_varianza": g["frac_reward_zero_std"].mean().values,
                         "grad_norm_media": g["grad_norm"].mean().values, "grad_norm_std": g["grad_norm"].std().values},
                        index=metricas["variante"].unique())"""),
        ("los números de la pantalla, escritos a mano", """
def comparar_e1(metricas):
    return pd.DataFrame({"grupos_sin_varianza": [0.412, 0.188], "grad_norm_media": [1.52, 1.47],
                         "grad_norm_std": [0.81, 0.77]}, index=["G=2", "G=4"])"""),
        ("solo los últimos pasos de cada variante", """
def comparar_e1(metricas):
    ultimo = metricas.sort_values("step").groupby("variante").tail(2)
    g = ultimo.groupby("variante")
    return pd.DataFrame({"grupos_sin_varianza": g["frac_reward_zero_std"].mean(),
                         "grad_norm_media": g["grad_norm"].mean(), "grad_norm_std": g["grad_norm"].std()})"""),
    ],
    "comparar-e2": [
        ("el primer y el último paso en vez de la ventana", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        formato = (tabla["rewards/format_reward/mean"] + tabla["rewards/soft_format_reward/mean"]).dropna()
        filas[variante] = {"formato_al_principio": formato.iloc[0], "formato_al_final": formato.iloc[-1]}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("sin ordenar por paso (las filas como llegan)", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.groupby("variante"):
        formato = (tabla["rewards/format_reward/mean"] + tabla["rewards/soft_format_reward/mean"]).dropna()
        k = max(1, round(0.2 * len(formato)))
        filas[variante] = {"formato_al_principio": formato.head(k).mean(), "formato_al_final": formato.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("ordena por el valor del formato, no por el paso", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.groupby("variante"):
        formato = (tabla["rewards/format_reward/mean"] + tabla["rewards/soft_format_reward/mean"]).dropna().sort_values()
        k = max(1, round(0.2 * len(formato)))
        filas[variante] = {"formato_al_principio": formato.head(k).mean(), "formato_al_final": formato.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("solo format_reward (olvida la suave)", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        formato = tabla["rewards/format_reward/mean"].dropna()
        k = max(1, round(0.2 * len(formato)))
        filas[variante] = {"formato_al_principio": formato.head(k).mean(), "formato_al_final": formato.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("la ventana contada con los pasos vacíos", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        k = max(1, round(0.2 * len(tabla)))
        formato = (tabla["rewards/format_reward/mean"] + tabla["rewards/soft_format_reward/mean"]).dropna()
        filas[variante] = {"formato_al_principio": formato.head(k).mean(), "formato_al_final": formato.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("la anchura de la ventana truncada (int) en vez de redondeada", """
def comparar_e2(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        formato = (tabla["rewards/format_reward/mean"] + tabla["rewards/soft_format_reward/mean"]).dropna()
        k = max(1, int(0.2 * len(formato)))
        filas[variante] = {"formato_al_principio": formato.head(k).mean(), "formato_al_final": formato.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("los números de la pantalla, escritos a mano", """
def comparar_e2(metricas):
    return pd.DataFrame({"formato_al_principio": [0.21, 0.19], "formato_al_final": [0.52, 0.61]},
                        index=["con corrección", "solo formato"])"""),
    ],
    "comparar-e3": [
        ("la KL que falta, contada como 0", """
def comparar_e3(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        longitud = tabla["completions/mean_length"].dropna()
        k = max(1, round(0.2 * len(longitud)))
        kl = tabla["kl"].fillna(0).mean() if "kl" in tabla else 0.0
        filas[variante] = {"kl_media": kl, "longitud_al_principio": longitud.head(k).mean(),
                           "longitud_al_final": longitud.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("supone que la columna kl siempre existe", """
def comparar_e3(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        longitud = tabla["completions/mean_length"].dropna()
        k = max(1, round(0.2 * len(longitud)))
        filas[variante] = {"kl_media": tabla["kl"].mean(), "longitud_al_principio": longitud.head(k).mean(),
                           "longitud_al_final": longitud.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("el primer y el último paso en vez de la ventana", """
def comparar_e3(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        longitud = tabla["completions/mean_length"].dropna()
        kl = tabla["kl"].mean() if "kl" in tabla else float("nan")
        filas[variante] = {"kl_media": kl, "longitud_al_principio": longitud.iloc[0], "longitud_al_final": longitud.iloc[-1]}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("sin ordenar por paso (las filas como llegan)", """
def comparar_e3(metricas):
    filas = {}
    for variante, tabla in metricas.groupby("variante"):
        longitud = tabla["completions/mean_length"].dropna()
        k = max(1, round(0.2 * len(longitud)))
        kl = tabla["kl"].mean() if "kl" in tabla else float("nan")
        filas[variante] = {"kl_media": kl, "longitud_al_principio": longitud.head(k).mean(),
                           "longitud_al_final": longitud.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
        ("la media de todos los pasos en vez de las ventanas", """
def comparar_e3(metricas):
    g = metricas.groupby("variante")
    media = g["completions/mean_length"].mean()
    kl = g["kl"].mean() if "kl" in metricas else media * float("nan")
    return pd.DataFrame({"kl_media": kl, "longitud_al_principio": media, "longitud_al_final": media})"""),
        ("los números de la pantalla, escritos a mano", """
def comparar_e3(metricas):
    nan = float("nan")
    return pd.DataFrame({"kl_media": [nan, 0.021], "longitud_al_principio": [181.0, 176.5],
                         "longitud_al_final": [243.2, 201.7]}, index=["beta=0", "beta=0.2"])"""),
        ("la anchura de la ventana truncada (int) en vez de redondeada", """
def comparar_e3(metricas):
    filas = {}
    for variante, tabla in metricas.sort_values("step").groupby("variante"):
        longitud = tabla["completions/mean_length"].dropna()
        k = max(1, int(0.2 * len(longitud)))
        kl = tabla["kl"].mean() if "kl" in tabla else float("nan")
        filas[variante] = {"kl_media": kl, "longitud_al_principio": longitud.head(k).mean(),
                           "longitud_al_final": longitud.tail(k).mean()}
    return pd.DataFrame.from_dict(filas, orient="index")"""),
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
    "comparar-e1": [("bucles de Python, sin groupby", """
def comparar_e1(metricas):
    import statistics
    filas = {}
    for variante in sorted(set(metricas["variante"])):
        propia = metricas[metricas["variante"] == variante]
        cero = [x for x in propia["frac_reward_zero_std"] if x == x]
        grad = [x for x in propia["grad_norm"] if x == x]
        filas[variante] = {"grupos_sin_varianza": sum(cero) / len(cero), "grad_norm_media": statistics.mean(grad),
                           "grad_norm_std": statistics.stdev(grad)}
    return pd.DataFrame(filas).T"""),
                    ("agg con nombres", """
def comparar_e1(metricas):
    return metricas.groupby("variante").agg(grupos_sin_varianza=("frac_reward_zero_std", "mean"),
                                            grad_norm_media=("grad_norm", "mean"), grad_norm_std=("grad_norm", "std"))""")],
    "comparar-e2": [("numpy por variante, con math para k", """
def comparar_e2(metricas):
    import numpy as np
    filas = []
    for variante in metricas["variante"].unique():
        propia = metricas[metricas["variante"] == variante].sort_values("step")
        formato = (propia["rewards/format_reward/mean"] + propia["rewards/soft_format_reward/mean"]).to_numpy()
        formato = formato[~np.isnan(formato)]
        k = max(1, int(round(len(formato) / 5)))
        filas.append({"variante": variante, "formato_al_principio": formato[:k].mean(), "formato_al_final": formato[-k:].mean()})
    return pd.DataFrame(filas).set_index("variante")""")],
    "comparar-e3": [("apply por variante, con reindex de kl", """
def comparar_e3(metricas):
    metricas = metricas.reindex(columns=[*metricas.columns, *(["kl"] if "kl" not in metricas else [])])
    def resumen(tabla):
        longitud = tabla.sort_values("step")["completions/mean_length"].dropna()
        k = max(1, round(len(longitud) * 0.2))
        return pd.Series({"kl_media": tabla["kl"].astype(float).mean(), "longitud_al_principio": longitud[:k].mean(),
                          "longitud_al_final": longitud[-k:].mean()})
    return pd.DataFrame({variante: resumen(tabla) for variante, tabla in metricas.groupby("variante")}).T""")],
}


(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(
    CHECKS, WRONG, RIGHT, questions=NOTEBOOKS)


# An answer that calls the course's own plan of E1's variants (issue 42: it passed); it fails, named.
COURSE_CALLS = [
    ("variantes-e1", "variants._planned_group_settings", """
def perfil_con_grupo(perfil, G):
    from labs.exercises import variants
    return perfil.replace(**variants._planned_group_settings(perfil, G))"""),
]
test_an_answer_that_calls_the_course_solution_is_named = course_code_test(CHECKS, COURSE_CALLS)


@pytest.mark.parametrize("question", sorted(NOTEBOOKS))
def test_hints_and_stub_comments_name_the_concept_not_the_code(question):
    hints = re.findall(r'failure_message: "(.+?)"', "\n".join(CHECKS.tests[question]))
    assert hints and not [h for h in hints if CODE.search(h) or re.search(r"\.\w+\b|=", h)], hints
    student = json.loads((assign.STUDENT_DIR / NOTEBOOKS[question]).read_text())
    function = FUNCTIONS[question]
    cells = [cell_text(c) for c in student["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])
             and f"def {function}(" in cell_text(c)]
    assert len(cells) == 1
    comments = [line.strip() for line in cells[0].splitlines() if line.strip().startswith("#")]
    assert comments and not [c for c in comments if CODE.search(c) or re.search(r"\.\w+\b|=", c)], comments
    pandas = re.compile(r"groupby|sort_values|head\(|tail\(|dropna|from_dict|\bmean\(|\bstd\(|\biloc\b|\bloc\[")
    assert not [h for h in hints + comments if pandas.search(h)], (hints, comments)


@pytest.mark.parametrize("question", sorted(NOTEBOOKS))
def test_no_check_prints_what_it_expects(question):
    """A failure message shows the student's input or output, never the expected value (nor a reference's)."""
    for code in CHECKS.tests[question]:
        for message in re.findall(r'f"([^"]*)"', code):
            fields = re.findall(r"\{([^}]*)\}", message)
            assert all(re.fullmatch(r"G|beta|base\.name|lista|list\(tuya\)|donde|otros|micro|lote|lote // G|"
                                    r"tuyo\.\w+|variantes|v!r|columna|faltan|list\(tuya\.(index|columns)\)|"
                                    r"type\(tuya\)\.__name__", f) for f in fields), (question, message)


@pytest.mark.notebook  # executes each untouched student notebook in a kernel (nothing trains: every run is guarded)
@pytest.mark.parametrize("name", sorted(set(NOTEBOOKS.values())))
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(name, tmp_path, monkeypatch):
    """Run All on the student notebook as generated (every exercise a stub): no cell raises, nothing trains, nothing
    is saved for the sweep, and every cell that needs a student function says, in Spanish, which exercise to finish."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    said, _ = run_untouched(assign.STUDENT_DIR / name, tmp_path, guard="ex.ejercicios_hechos(")
    assert len(said) >= 5 and all("termina el ejercicio «" in s for s in said), said
    assert not (tmp_path / "runs").exists()  # no variant saved, no run started
