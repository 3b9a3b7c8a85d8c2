"""L6's checks cannot be fooled: for every question, plausible wrong answers fail and a correct answer in
another style passes.

The checks are the notebook's own (the test cells between otter's ``# BEGIN TESTS`` and ``# END TESTS`` in
``sources/``), run here the way ``grader.check`` runs them (``tests/wrong_answers.py``): each ``test_*`` function is called with the
notebook's functions of the same names, and a check passes when none raises. The notebook's functions are its
solutions, with the answer under test put in place of one of them. The wrong answers are the mistakes a
student makes: a flipped sign, a missing clip side, Bessel's correction where the lesson's table has none, the
padding counted, an unshifted log-probability, and numbers copied from the screen.

Also here: the hints (``failure_message``) and the stub comments name the concept, never the code to type, and
``labs.l6.pending`` says which exercise to finish for a stub.
"""

from __future__ import annotations

import re

import pytest

from labs import assign
from wrong_answers import Checks, course_code_test, hint_leaks, parse, run_untouched, standard_tests, stub_comments

SOURCE = assign.SOURCES_DIR / "L6_de_policy_gradient_a_grpo.ipynb"
STUDENT = assign.STUDENT_DIR / "L6_de_policy_gradient_a_grpo.ipynb"
PRELUDE = "import numpy as np\nimport torch\n"


CHECKS = Checks(SOURCE, prelude=PRELUDE)
TESTS, SOLUTIONS = parse(SOURCE)
run_check = CHECKS.run


# For each question: (label, answer) pairs. WRONG must fail; RIGHT (another style than the solution) must pass.
WRONG = {
    "reinforce-sin-baseline": [
        ("signo al revés", """
def perdida_reinforce(theta, recompensas, acciones):
    return (recompensas[acciones] * torch.log_softmax(theta, dim=0)[acciones]).mean()"""),
        ("probabilidad en vez de su logaritmo", """
def perdida_reinforce(theta, recompensas, acciones):
    return -(recompensas[acciones] * torch.softmax(theta, dim=0)[acciones]).mean()"""),
        ("todas las respuestas posibles en vez de las muestreadas", """
def perdida_reinforce(theta, recompensas, acciones):
    return -(recompensas * torch.log_softmax(theta, dim=0)).mean()"""),
        ("suma en vez de media", """
def perdida_reinforce(theta, recompensas, acciones):
    return -(recompensas[acciones] * torch.log_softmax(theta, dim=0)[acciones]).sum()"""),
        ("un número copiado de la pantalla", """
def perdida_reinforce(theta, recompensas, acciones):
    return torch.tensor(-1.8712, dtype=torch.float64, requires_grad=True)"""),
    ],
    "reinforce-con-baseline": [
        ("media de todo el lote", """
def perdida_reinforce_baseline(theta, recompensas, acciones):
    r = recompensas[acciones]
    return -((r - r.mean()) * torch.log_softmax(theta, dim=0)[acciones]).mean()"""),
        ("media de cada columna (dim equivocada)", """
def perdida_reinforce_baseline(theta, recompensas, acciones):
    r = recompensas[acciones]
    return -((r - r.mean(dim=0, keepdim=True)) * torch.log_softmax(theta, dim=0)[acciones]).mean()"""),
        ("sin baseline", """
def perdida_reinforce_baseline(theta, recompensas, acciones):
    return -(recompensas[acciones] * torch.log_softmax(theta, dim=0)[acciones]).mean()"""),
        ("además divide por la desviación del grupo", """
def perdida_reinforce_baseline(theta, recompensas, acciones):
    r = recompensas[acciones]
    a = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-4)
    return -(a * torch.log_softmax(theta, dim=0)[acciones]).mean()"""),
    ],
    "recorte-ppo": [
        ("solo la versión recortada", """
def objetivo_recortado(rho, A, eps=0.2):
    return torch.clamp(rho, 1 - eps, 1 + eps) * A"""),
        ("máximo en vez de mínimo", """
def objetivo_recortado(rho, A, eps=0.2):
    return torch.maximum(rho * A, torch.clamp(rho, 1 - eps, 1 + eps) * A)"""),
        ("falta el lado de abajo de la franja", """
def objetivo_recortado(rho, A, eps=0.2):
    return torch.minimum(rho * A, torch.clamp(rho, max=1 + eps) * A)"""),
        ("falta el lado de arriba de la franja", """
def objetivo_recortado(rho, A, eps=0.2):
    return torch.minimum(rho * A, torch.clamp(rho, min=1 - eps) * A)"""),
        ("ε fijo en 0.2", """
def objetivo_recortado(rho, A, eps=0.2):
    return torch.minimum(rho * A, torch.clamp(rho, 0.8, 1.2) * A)"""),
        ("una ventaja suelta: el signo de A con if", """
def objetivo_recortado(rho, A, eps=0.2):
    if A >= 0:
        return torch.clamp(rho, max=1 + eps) * A
    return torch.clamp(rho, min=1 - eps) * A"""),
        ("con NumPy (no deriva)", """
def objetivo_recortado(rho, A, eps=0.2):
    rho = np.asarray(rho.detach(), dtype=float)
    return torch.from_numpy(np.minimum(rho * np.asarray(A), np.clip(rho, 1 - eps, 1 + eps) * np.asarray(A)))"""),
    ],
    "ventaja-grupo": [
        ("Bessel también en la poblacional", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    r = np.asarray(recompensas, dtype=float)
    if desviacion == "muestral":
        return (r - r.mean()) / (r.std(ddof=1) + 1e-4)
    return (r - r.mean()) / r.std(ddof=1)"""),
        ("la poblacional también en la de TRL", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    r = np.asarray(recompensas, dtype=float)
    if desviacion == "muestral":
        return (r - r.mean()) / (r.std() + 1e-4)
    return (r - r.mean()) / r.std()"""),
        ("sin el 1e-4 de TRL", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    r = np.asarray(recompensas, dtype=float)
    return (r - r.mean()) / r.std(ddof=1 if desviacion == "muestral" else 0)"""),
        ("el 1e-4 dentro de la raíz", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    r = np.asarray(recompensas, dtype=float)
    if desviacion == "muestral":
        return (r - r.mean()) / np.sqrt(r.var(ddof=1) + 1e-4)
    return (r - r.mean()) / r.std()"""),
        ("los números de la tabla, copiados", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    if desviacion == "muestral":
        return np.array([0.8333, -0.5, -1.1666, 0.8333])
    return np.array([0.9623, -0.5774, -1.3472, 0.9623])"""),
    ],
    "kl-k3": [
        ("k1", """
def kl_k3(logp, ref_logp):
    return logp - ref_logp"""),
        ("la razón al revés", """
def kl_k3(logp, ref_logp):
    d = logp - ref_logp
    return torch.exp(d) - d - 1"""),
        ("k2", """
def kl_k3(logp, ref_logp):
    return 0.5 * (ref_logp - logp) ** 2"""),
        ("con NumPy (no deriva)", """
def kl_k3(logp, ref_logp):
    d = np.asarray(ref_logp.detach()) - np.asarray(logp.detach())
    return torch.from_numpy(np.exp(d) - d - 1)"""),
    ],
    "perdida-grpo": [
        ("la de dapo", """
def perdida_grpo(por_token, mascara):
    return (por_token * mascara).sum() / mascara.sum()"""),
        ("cuenta el relleno", """
def perdida_grpo(por_token, mascara):
    return por_token.mean(dim=1).mean()"""),
        ("divide cada fila por todas sus posiciones", """
def perdida_grpo(por_token, mascara):
    return ((por_token * mascara).sum(dim=1) / por_token.shape[1]).mean()"""),
        ("un número copiado de la pantalla", """
def perdida_grpo(por_token, mascara):
    return torch.tensor(0.3127)"""),
    ],
    "perdida-dapo": [
        ("la de la lección (grpo)", """
def perdida_dapo(por_token, mascara):
    return ((por_token * mascara).sum(dim=1) / mascara.sum(dim=1)).mean()"""),
        ("cuenta el relleno", """
def perdida_dapo(por_token, mascara):
    return por_token.mean()"""),
        ("divide por todas las posiciones", """
def perdida_dapo(por_token, mascara):
    return (por_token * mascara).sum() / por_token.numel()"""),
        ("un número copiado de la pantalla", """
def perdida_dapo(por_token, mascara):
    return torch.tensor(0.2961)"""),
    ],
    "perdida-dr-grpo": [
        ("la de dapo", """
def perdida_dr_grpo(por_token, mascara, max_completion_length):
    return (por_token * mascara).sum() / mascara.sum()"""),
        ("olvida el número de respuestas", """
def perdida_dr_grpo(por_token, mascara, max_completion_length):
    return (por_token * mascara).sum() / max_completion_length"""),
        ("posiciones del tensor en vez de max_completion_length", """
def perdida_dr_grpo(por_token, mascara, max_completion_length):
    return (por_token * mascara).sum() / por_token.numel()"""),
        ("cuenta el relleno", """
def perdida_dr_grpo(por_token, mascara, max_completion_length):
    return por_token.sum() / (por_token.shape[0] * max_completion_length)"""),
    ],
    "logp-por-token": [
        ("sin desplazar (cada posición con su propio token)", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    logp = torch.log_softmax(logits[:, -C:], dim=-1)
    return logp.gather(-1, ids[:, -C:].unsqueeze(-1)).squeeze(-1) * mascara"""),
        ("probabilidad en vez de log-probabilidad", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    p = torch.softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return p[:, -C:] * mascara"""),
        ("normaliza sobre las posiciones, no sobre el vocabulario", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    logp = torch.log_softmax(logits[:, :-1], dim=1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return logp[:, -C:] * mascara"""),
        ("no pone a 0 el relleno", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return logp[:, -C:]"""),
        ("desplazado una posición de más", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    logp = torch.log_softmax(logits[:, :-2], dim=-1).gather(-1, ids[:, 2:].unsqueeze(-1)).squeeze(-1)
    return logp[:, -C:] * mascara"""),
    ],
    "perdida-trl": [
        ("sin el término KL", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = -objetivo_recortado(torch.exp(logp - logp_viejo), ventajas.unsqueeze(1), eps)
    return {"grpo": perdida_grpo, "dapo": perdida_dapo}.get(loss_type, lambda p, m: perdida_dr_grpo(p, m, max_completion_length))(por_token, mascara)"""),
        ("la KL restada en vez de sumada", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = -objetivo_recortado(torch.exp(logp - logp_viejo), ventajas.unsqueeze(1), eps) - beta * kl_k3(logp, logp_ref)
    return {"grpo": perdida_grpo, "dapo": perdida_dapo}.get(loss_type, lambda p, m: perdida_dr_grpo(p, m, max_completion_length))(por_token, mascara)"""),
        ("el ratio sin exponencial", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = -objetivo_recortado(logp - logp_viejo, ventajas.unsqueeze(1), eps) + beta * kl_k3(logp, logp_ref)
    return {"grpo": perdida_grpo, "dapo": perdida_dapo}.get(loss_type, lambda p, m: perdida_dr_grpo(p, m, max_completion_length))(por_token, mascara)"""),
        ("siempre dapo", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = -objetivo_recortado(torch.exp(logp - logp_viejo), ventajas.unsqueeze(1), eps) + beta * kl_k3(logp, logp_ref)
    return perdida_dapo(por_token, mascara)"""),
        ("sin el signo menos (maximiza)", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = objetivo_recortado(torch.exp(logp - logp_viejo), ventajas.unsqueeze(1), eps) + beta * kl_k3(logp, logp_ref)
    return {"grpo": perdida_grpo, "dapo": perdida_dapo}.get(loss_type, lambda p, m: perdida_dr_grpo(p, m, max_completion_length))(por_token, mascara)"""),
        ("ε fijo en 0.2", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    por_token = -objetivo_recortado(torch.exp(logp - logp_viejo), ventajas.unsqueeze(1), 0.2) + beta * kl_k3(logp, logp_ref)
    return {"grpo": perdida_grpo, "dapo": perdida_dapo}.get(loss_type, lambda p, m: perdida_dr_grpo(p, m, max_completion_length))(por_token, mascara)"""),
    ],
    "entropia-token": [
        ("softmax y luego su logaritmo (nan con logits grandes)", """
def entropia_por_token(logits):
    p = torch.softmax(logits, dim=-1)
    return -(p * torch.log(p)).sum(dim=-1)"""),
        ("la media sobre el vocabulario en vez de la suma", """
def entropia_por_token(logits):
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).mean(dim=-1)"""),
        ("sin pesar por la probabilidad", """
def entropia_por_token(logits):
    return -torch.log_softmax(logits, dim=-1).sum(dim=-1)"""),
        ("en bits", """
def entropia_por_token(logits):
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp / torch.log(torch.tensor(2.0, dtype=logits.dtype))).sum(dim=-1)"""),
        ("sobre las posiciones en vez del vocabulario", """
def entropia_por_token(logits):
    logp = torch.log_softmax(logits, dim=0)
    return -(logp.exp() * logp).sum(dim=-1)"""),
    ],
    "logp-y-entropia": [
        ("sin la temperatura", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    logits = modelo(input_ids=ids, attention_mask=atencion).logits
    C = mascara.shape[1]
    return logp_por_token(logits, ids, mascara), entropia_por_token(logits[:, -C - 1:-1]) * mascara"""),
        ("la temperatura multiplicando", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    logits = modelo(input_ids=ids, attention_mask=atencion).logits * temperatura
    C = mascara.shape[1]
    return logp_por_token(logits, ids, mascara), entropia_por_token(logits[:, -C - 1:-1]) * mascara"""),
        ("la temperatura sobre la log-probabilidad", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    logits = modelo(input_ids=ids, attention_mask=atencion).logits
    C = mascara.shape[1]
    return logp_por_token(logits, ids, mascara) / temperatura, entropia_por_token(logits[:, -C - 1:-1] / temperatura) * mascara"""),
        ("la entropía en las posiciones de los tokens, sin desplazar", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    logits = modelo(input_ids=ids, attention_mask=atencion).logits / temperatura
    C = mascara.shape[1]
    return logp_por_token(logits, ids, mascara), entropia_por_token(logits[:, -C:]) * mascara"""),
        ("la entropía sin poner a 0 el relleno", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    logits = modelo(input_ids=ids, attention_mask=atencion).logits / temperatura
    C = mascara.shape[1]
    return logp_por_token(logits, ids, mascara), entropia_por_token(logits[:, -C - 1:-1])"""),
    ],
    "paso-micro-lote": [
        ("sin repartir: cada micro-lote como si fuera el lote", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)
    perdida.backward()
    return perdida.detach()"""),
        ("dapo con los tokens de su micro-lote", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)
    perdida = perdida / pasos_acumulacion
    perdida.backward()
    return perdida.detach()"""),
        ("dapo dividido dos veces", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)
    if loss_type == "dapo":
        perdida = perdida * mascara.sum() / tokens_lote
    perdida = perdida / pasos_acumulacion
    perdida.backward()
    return perdida.detach()"""),
        ("sin backward", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)
    if loss_type == "dapo":
        return (perdida * mascara.sum() / tokens_lote).detach()
    return (perdida / pasos_acumulacion).detach()"""),
        ("devuelve la pérdida con su gradiente", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)
    perdida = perdida * mascara.sum() / tokens_lote if loss_type == "dapo" else perdida / pasos_acumulacion
    perdida.backward(retain_graph=True)
    return perdida"""),
    ],
}

RIGHT = {
    "reinforce-sin-baseline": [("torch.distributions", """
def perdida_reinforce(theta, recompensas, acciones):
    dist = torch.distributions.Categorical(logits=theta)
    return -torch.mean(dist.log_prob(acciones) * recompensas[acciones])""")],
    "reinforce-con-baseline": [("un bucle por grupo y logsumexp", """
def perdida_reinforce_baseline(theta, recompensas, acciones):
    logp_todas = theta - torch.logsumexp(theta, dim=0)
    total = 0
    for fila in acciones:
        r = recompensas[fila]
        total = total + ((r - r.mean()) * logp_todas[fila]).sum()
    return -total / acciones.numel()""")],
    "recorte-ppo": [("torch.where según el signo de la ventaja", """
def objetivo_recortado(rho, A, eps=0.2):
    A = torch.as_tensor(A, dtype=rho.dtype)
    return torch.where(A >= 0, torch.clamp(rho, max=1 + eps) * A, torch.clamp(rho, min=1 - eps) * A)""")],
    "ventaja-grupo": [("suma de cuadrados a mano", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    r = np.array(recompensas, dtype=float)
    G, media = len(r), sum(recompensas) / len(r)
    cuadrados = ((r - media) ** 2).sum()
    if desviacion == "poblacional":
        return (r - media) / np.sqrt(cuadrados / G)
    return (r - media) / (np.sqrt(cuadrados / (G - 1)) + 0.0001)""")],
    "kl-k3": [("con la razón r y expm1", """
def kl_k3(logp, ref_logp):
    log_r = ref_logp - logp
    return torch.expm1(log_r) - log_r""")],
    "perdida-grpo": [("un bucle por respuesta", """
def perdida_grpo(por_token, mascara):
    medias = [por_token[i][mascara[i].bool()].mean() for i in range(por_token.shape[0])]
    return torch.stack(medias).mean()""")],
    "perdida-dapo": [("indexando con la máscara", """
def perdida_dapo(por_token, mascara):
    return por_token[mascara.bool()].mean()""")],
    "perdida-dr-grpo": [("torch.where y dos divisiones", """
def perdida_dr_grpo(por_token, mascara, max_completion_length):
    return torch.where(mascara.bool(), por_token, 0).sum() / len(por_token) / max_completion_length""")],
    "logp-por-token": [("cross_entropy por token", """
def logp_por_token(logits, ids, mascara):
    C = mascara.shape[1]
    pred, objetivo = logits[:, -C - 1:-1], ids[:, -C:]
    nll = torch.nn.functional.cross_entropy(pred.transpose(1, 2), objetivo, reduction="none")
    return torch.where(mascara.bool(), -nll, torch.zeros_like(nll))""")],
    "perdida-trl": [("la fórmula entera en línea, sin las piezas", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    ratio = (logp - logp_viejo).exp()
    A = ventajas[:, None]
    objetivo = torch.minimum(ratio * A, ratio.clamp(1 - eps, 1 + eps) * A)
    u = logp_ref - logp
    por_token = -objetivo + (beta * (u.exp() - u - 1) if beta else 0)
    m = mascara.to(por_token.dtype)
    if loss_type == "grpo":
        return ((por_token * m).sum(-1) / m.sum(-1)).mean()
    divisor = m.sum() if loss_type == "dapo" else len(por_token) * max_completion_length
    return (por_token * m).sum() / divisor""")],
    "entropia-token": [("logsumexp y la esperanza de los logits", """
def entropia_por_token(logits):
    lse = torch.logsumexp(logits, dim=-1)
    p = torch.softmax(logits, dim=-1)
    return lse - (p * logits).sum(dim=-1)""")],
    "logp-y-entropia": [("torch.distributions.Categorical", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    C = mascara.shape[1]
    salida = modelo(input_ids=ids, attention_mask=atencion)
    dist = torch.distributions.Categorical(logits=salida.logits[:, -C - 1:-1] / temperatura)
    m = mascara.to(salida.logits.dtype)
    return dist.log_prob(ids[:, -C:]) * m, dist.entropy() * m""")],
    "paso-micro-lote": [("la suma de tokens escrita a mano para dapo", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    if loss_type == "dapo":
        ratio = torch.exp(logp - logp_viejo)
        por_token = -objetivo_recortado(ratio, ventajas[:, None], eps) + (beta * kl_k3(logp, logp_ref) if beta else 0)
        perdida = (por_token * mascara).sum() / tokens_lote
    else:
        perdida = perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                              max_completion_length) / pasos_acumulacion
    perdida.backward()
    return perdida.detach()""")],
}


(test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
 test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes) = standard_tests(CHECKS, WRONG, RIGHT)


# Answers that call the course's own solution of the question (issue 42: they passed); each fails, naming it.
COURSE_CALLS = [
    ("kl-k3", "toy_rl.k3", """
def kl_k3(logp, ref_logp):
    from labs.l6 import toy_rl
    return toy_rl.k3(logp, ref_logp)"""),
    ("logp-por-token", "capstone.token_logps", """
def logp_por_token(logits, ids, mascara):
    from labs.l6 import capstone
    return capstone.token_logps(logits, ids, mascara)"""),
    ("perdida-trl", "capstone.reference_loss", """
def perdida_trl(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps=0.2, max_completion_length=None):
    from labs.l6.capstone import reference_loss
    return reference_loss(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps, max_completion_length)"""),
    ("perdida-dapo", "objective.aggregate_loss", """
def perdida_dapo(por_token, mascara):
    from labs.l6 import objective
    return torch.tensor(objective.aggregate_loss(por_token, mascara.double(), "dapo"))"""),
    ("entropia-token", "microstep.token_entropy", """
def entropia_por_token(logits):
    from labs.l6 import microstep
    return microstep.token_entropy(logits)"""),
    ("logp-y-entropia", "microstep.response_logps_and_entropy", """
def logp_y_entropia(modelo, ids, atencion, mascara, temperatura):
    from labs.l6.microstep import response_logps_and_entropy
    return response_logps_and_entropy(modelo, ids, atencion, mascara, temperatura)"""),
    ("paso-micro-lote", "microstep.microbatch_step", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    from labs.l6 import microstep
    return microstep.microbatch_step(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                                     max_completion_length, pasos_acumulacion, tokens_lote)"""),
    ("ventaja-grupo", "advantage.group_advantages", """
def ventaja_grupo(recompensas, desviacion="muestral"):
    from labs.l6.advantage import group_advantages
    r = np.asarray(recompensas, dtype=float)
    if desviacion == "muestral":
        return group_advantages(r, len(r), std="sample", eps=1e-4)
    return group_advantages(r, len(r), std="population", eps=0.0)"""),
]
test_an_answer_that_calls_the_course_solution_is_named = course_code_test(CHECKS, COURSE_CALLS)


# Code a hint or a stub comment must not dictate (a call, an argument, a library name).
CODE = re.compile(r"\b(?:torch|np|numpy)\.|\w+\(|\bdim\s*=|\bddof\b|keepdim|\b1e-4\b|\.mean\b|\.sum\b|\bgather\b|log_softmax")


def test_hints_name_the_concept_not_the_code():
    assert not hint_leaks(TESTS, CODE)


def test_stub_comments_name_the_concept_not_the_code():
    cells, comments = stub_comments(STUDENT)
    leaks = [c for c in comments if CODE.search(c)]
    assert cells == len(TESTS) and comments and not leaks, leaks


def test_no_check_prints_what_it_expects():
    """A failure message may describe the student's input or name the concept, never show the expected value."""
    for question, codes in TESTS.items():
        for code in codes:
            for message in re.findall(r'f"([^"]*)"', code):
                assert not re.search(r"\{[^}]*(esperad|trl|labs|g_trl|aggregate|group_adv)[^}]*\}", message, re.I), (
                    question, message)


def test_an_unwritten_exercise_is_named_instead_of_a_traceback(capsys):
    from labs.l6.pending import EXERCISES, ejercicios_hechos

    namespace: dict = {}
    exec(PRELUDE + "\n\n".join(SOLUTIONS), namespace)
    solved = [namespace[name] for name in EXERCISES]
    assert ejercicios_hechos(*solved) and capsys.readouterr().out == ""

    def perdida_trl(*args):  # otter's stub: a body of `...`
        ...

    assert not ejercicios_hechos(namespace["kl_k3"], perdida_trl)
    out = capsys.readouterr().out
    assert "`perdida_trl` aún no está escrita" in out and "«tu pérdida de GRPO» (sección 8)" in out
    assert "kl_k3" not in out and "Traceback" not in out


def test_a_guard_that_lets_a_wrong_function_through_says_its_check_still_fails(capsys, tmp_path, monkeypatch):
    """A wrong function that answers (not the stub's None) passes the guard: the cell runs, and says which of its
    functions still fail their check (issue 42: it said nothing). Right functions: not a word."""
    import otter

    from labs.l6.pending import ejercicios_hechos

    monkeypatch.chdir(tmp_path)  # otter's Notebook writes its log in the working folder
    for answer, said in ((None, False), (dict(WRONG["kl-k3"])["k1"], True)):
        env = CHECKS.namespace("kl-k3", answer)
        env["grader"] = otter.Notebook(str(STUDENT))  # what the student notebook's first cell makes
        assert ejercicios_hechos(env["kl_k3"], env["objetivo_recortado"]) is True
        out = capsys.readouterr().out
        if said:
            assert 'grader.check("kl-k3")' in out and "aún falla" in out and "objetivo_recortado" not in out, out
        else:
            assert out == "", out


@pytest.mark.notebook  # executes the untouched student notebook in a kernel (without the real trainer step)
def test_the_untouched_student_notebook_runs_to_the_end_and_says_what_to_finish(tmp_path):
    """Run All on the student notebook as generated (every exercise a stub): no cell raises; every cell that uses a
    student function says, in Spanish, which exercise to finish. The section-6 trainer step, the bandit runs and the
    variance table are left out (they use no student function, and the cells that use the step's result are
    guarded): running them is the nbval run's job."""
    heavy = ("run_trainer_check(", "format_numbers(informe)", "train_grpo_bandit", "corridas.items()",
             "variance_table(", "tabla[t]")  # the trainer step, the bandit runs, the variance table: no student code
    said, _ = run_untouched(STUDENT, tmp_path, guard="ejercicios_hechos(", leave_out=heavy)
    assert len(said) >= 7 and all("termina el ejercicio «" in s for s in said), said


class _Stubs(dict):
    """A cell's names: the ones given, and a stub (None) for every other (the student's functions, unwritten)."""

    def __missing__(self, name):
        return None


def test_reading_trls_defaults_leaves_the_section_6_trainers_accelerate_state_alone():
    """Section 12 reads GRPOConfig's defaults after section 6 built a real trainer, and the section-8 comparison
    (``capstone.compare_with_trl``) still uses that trainer: a student who writes the section-8 answers after Run All
    runs it then. Creating a ``GRPOConfig`` resets accelerate's shared state (transformers' ``_setup_devices``), and
    the comparison then ended in accelerate's English "Please make sure to properly initialize your accelerator"
    (issue 52). Every cell after section 6 runs here after an ``Accelerator`` exists; the state must survive."""
    import json

    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from trl import GRPOConfig

    cells = json.loads(STUDENT.read_text())["cells"]
    start = next(i for i, c in enumerate(cells) if "run_trainer_check(" in "".join(c["source"]))
    after = ["".join(c["source"]) for c in cells[start + 1:] if c["cell_type"] == "code"]
    reads_the_config = [s for s in after if re.search(r"\b(GRPOConfig|TrainingArguments)\b", s)]
    assert reads_the_config, "no cell after section 6 reads GRPOConfig: the test would check nothing"
    creates_one = [s[:80] for s in after if re.search(r"\b(GRPOConfig|TrainingArguments)\(", s)]
    assert not creates_one, f"these cells create a config, which resets accelerate's state: {creates_one}"
    Accelerator(cpu=True)
    for source in reads_the_config:  # the guarded cells (exercises unwritten) skip their body, as on a stub
        exec(source, {}, _Stubs(GRPOConfig=GRPOConfig, print=lambda *a, **k: None, ejercicios_hechos=lambda *f: False))
        assert AcceleratorState._shared_state, f"this cell resets accelerate's state: {source[:80]!r}"


def test_one_micro_batch_is_said_in_the_singular():
    """Issue 52: the accumulation check said "Con 1 micro-lotes" on its first case."""
    failure = run_check("paso-micro-lote", """
def paso_micro_lote(logp, logp_viejo, logp_ref, ventajas, mascara, beta, loss_type, eps,
                    max_completion_length, pasos_acumulacion, tokens_lote):
    return (logp * 0).sum().detach()""")
    assert failure is not None and "Con 1 micro-lote," in failure and "micro-lotes," not in failure, failure


def _free_and_bound(source: str) -> tuple[set[str], set[str]]:
    """A cell's names read but bound nowhere in it (what it takes from earlier cells), and the names it binds at the
    notebook's level (not inside its functions; imports left out: re-importing a module binds the same object)."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    loads, local, imported = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (local if isinstance(node.ctx, (ast.Store, ast.Del)) else loads).add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            local.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    bound: set[str] = set()
    todo = list(tree.body)
    while todo:  # the cell's own statements, into if/for/with/try blocks but not into function or class bodies
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                bound.add(child.id)
            elif not isinstance(child, (ast.Lambda, ast.expr_context)):
                todo.append(child)
    return loads - local - imported, bound - imported


def test_no_later_cell_rebinds_what_a_waiting_cell_reads():
    """A cell that waits for the exercises runs again after Run All, once the student writes them; by then every later
    cell has run too. Issue 52 (the browser test): §12's example bound `mascara`, and §8's erratum cell, re-run after the
    answers, mixed it with §8's `por_token` (a shape error, an English traceback). No later cell may rebind a name a
    waiting cell reads from the cells before it."""
    import json

    cells = ["".join(c["source"]) for c in json.loads(STUDENT.read_text())["cells"] if c["cell_type"] == "code"]
    clashes = []
    for i, source in enumerate(cells[1:], start=1):  # not the first cell: the notebook's imports and setup
        if "ejercicios_hechos(" not in source:
            continue
        free, _ = _free_and_bound(source)
        clashes += [(source[:50], later[:50], sorted(free & _free_and_bound(later)[1]))
                    for later in cells[i + 1:] if free & _free_and_bound(later)[1]]
    assert not clashes, clashes
