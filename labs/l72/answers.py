"""Checks of what the student writes in the L7.2 notebook, cheap enough for ``grader.check``: behaviour, not text.

Nothing here loads a model or imports unsloth, and no check reads the student's code or prints the value it
expects: a wrong answer gets the rule it breaks.

1. ``standby_posible(modulos, entorno)``: whether Unsloth with Standby can still be started in a process, and why.
   :func:`standby_errors` asks it about many processes (which packages are imported, what the variable holds) and
   compares with the guard's rule (:func:`labs.l72.standby.import_order_problem`).
2. ``importar_unsloth()``: :func:`import_errors` runs it among stand-ins for unsloth, trl, transformers and peft
   (:mod:`labs.l72.sandbox`), with the variable unset, ``"0"`` and ``"1"``, and looks at what it did: Standby on
   when unsloth came in, unsloth first, and ``FastLanguageModel`` returned.
3. and 4. ``cargar_modelo`` and ``anadir_lora``: called with :class:`KeywordRecorder` in the place of
   ``FastLanguageModel``, on several profiles (:func:`check_profiles`, one of them with every value changed), and
   each argument, bound as Unsloth binds it (defaults included), is judged by its rule (:mod:`labs.l72.rules`).
"""

from __future__ import annotations

import itertools

from labs.core import pending
from labs.core.answer_calls import course_call_message, describe_error, watching
from labs.core.profiles import Profile, get_profile
from labs.l72 import rules
from labs.l72.sandbox import course_module, in_labs, run_in_sandbox
from labs.l72.standby import ORDER_SENSITIVE_MODULES, STANDBY_ENV, import_order_problem, standby_on

# ------------------------------------------------------------------------------------------ the profiles


def other_profile() -> Profile:
    """A profile whose every value the two calls read differs from rtx5090's and ci's: numbers typed from the
    screen fail on it, while values derived by the lesson's rules pass."""
    return get_profile("rtx5090").replace(
        name="otro", unsloth_model="unsloth/Qwen3-4B-Base", model="unsloth/Qwen3-4B-Base", load_in_4bit=False,
        max_prompt_tokens=1024, max_completion_length=2048, max_seq_length=3200, lora_r=32, lora_alpha=64,
        seed=7, vllm_gpu_memory_utilization=0.6)


def check_profiles() -> list[Profile]:
    return [get_profile("rtx5090"), get_profile("ci"), other_profile()]


# ------------------------------------------------------------------------------ 1. can Standby still start

# The processes the first question is asked about: which packages are imported, and the variable's value.
_IMPORTED = [(), ("torch",), ("trl",), ("transformers", "torch"), ("peft",), ("trl", "transformers", "peft"),
             ("unsloth",), ("unsloth", "trl", "transformers"), ("numpy", "unsloth", "peft")]
_VARIABLE = [None, "0", "1"]


def standby_cases() -> list[tuple[dict, dict]]:
    return [({name: object() for name in imported}, {} if value is None else {STANDBY_ENV: value, "HOME": "/root"})
            for imported, value in itertools.product(_IMPORTED, _VARIABLE)]


def _describe(modules: dict, environ: dict) -> str:
    imported = ", ".join(sorted(modules)) or "nada"
    value = environ.get(STANDBY_ENV)
    return f"importado: {imported}; {STANDBY_ENV} {'sin definir' if value is None else f'= {value!r}'}"


# The course's own solution of each question: an answer that calls one fails, named (labs.core.answer_calls).
REFERENCES = {
    "standby_posible": ["labs.l72.standby.import_order_problem"],
    "importar_unsloth": ["labs.l72.standby.enable_standby_and_import_unsloth"],
    "from_pretrained": ["labs.l72.gpu.from_pretrained_kwargs", "labs.l72.gpu.load_unsloth_model"],
    "get_peft_model": ["labs.l72.gpu.get_peft_model_kwargs", "labs.l72.gpu.load_unsloth_model"],
}


def standby_errors(fn) -> list[str]:
    """Spanish problems with the student's ``standby_posible`` over :func:`standby_cases`, [] if right."""
    if not callable(fn):
        return ["Define la función standby_posible(modulos, entorno)."]
    for modules, environ in standby_cases():
        where = f"En un proceso con {_describe(modules, environ)}"
        with watching(REFERENCES["standby_posible"]) as called:
            answer = None
            try:
                answer, error = fn(dict(modules), dict(environ)), None
            except Exception as exc:  # noqa: BLE001 - the student's code: report it
                error = exc
        if called:
            return [course_call_message(called[0])]
        if error is not None:
            return [f"{where}, la función lanzó {describe_error(error)}"]
        if not (isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[0] in (True, False)):
            return [f"{where}, la función devolvió {answer!r}: debe devolver dos cosas, sí o no (un bool) y por qué."]
        can, why = answer
        problem = import_order_problem(modules, environ)
        if bool(can) != (problem is None):
            verdict = "que sí se puede" if can else "que no se puede"
            return [f"{where}, tu función dice {verdict}, y no es así: repasa las dos reglas de orden."]
        if problem is None:
            continue
        if not isinstance(why, str) or not why.strip():
            return [f"{where}, no se puede, pero la función no explica por qué (un texto)."]
        early = [m for m in ORDER_SENSITIVE_MODULES if m in modules] if "unsloth" not in modules else []
        if early and not all(m in why for m in early):
            return [f"{where}, el motivo debe nombrar lo que se importó antes de tiempo."]
        wrongly_named = [m for m in ORDER_SENSITIVE_MODULES if m in why and m not in early]
        if early and wrongly_named:
            return [f"{where}, el motivo culpa a algo que no se ha importado ({', '.join(wrongly_named)})."]
        if not early and "standby" not in why.lower():
            return [f"{where}, el motivo debe decir qué le pasó a Standby."]
    return []


# ------------------------------------------------------------------------------------- 2. import unsloth


def import_errors(fn) -> list[str]:
    """Spanish problems with the student's ``importar_unsloth`` run among stand-ins, [] if right.

    Run three times: in a process without the variable, in one where it holds ``"0"`` (a ``setdefault`` keeps that,
    and Standby stays off), and in one where it is already ``"1"``.
    """
    if not callable(fn):
        return ["Define la función importar_unsloth()."]
    for before in (None, "0", "1"):
        with watching(REFERENCES["importar_unsloth"]) as called:
            record, result, error = run_in_sandbox(fn, before)
        if called:
            return [course_call_message(called[0])]
        where = f"Con la variable ya a {before!r}" if before else "En un proceso sin la variable de Standby"
        if error is not None:
            return [f"{where}, la función lanzó {describe_error(error)}"]
        if "unsloth" not in record.order:
            return [f"{where}, la función no importa unsloth."]
        early = record.before_unsloth()
        if early:
            return [f"{where}, la función importa {', '.join(early)} antes que unsloth, que lo deja sin parchear."]
        if in_labs(record.unsloth_importer):  # another course function than the guard imported it for the answer
            return [course_call_message(course_module(record.unsloth_importer))]
        if not standby_on(record.standby_at_unsloth):
            held = "sin definir" if record.standby_at_unsloth is None else f"= {record.standby_at_unsloth!r}"
            return [f"{where}, unsloth se importó con {STANDBY_ENV} {held}: Standby no se activa."]
        if result is not record.exports["unsloth"]["FastLanguageModel"]:
            what = "el módulo unsloth" if getattr(result, "__name__", None) == "unsloth" else repr(result)
            return [f"{where}, la función devuelve {what}: debe devolver la clase con la que se carga el modelo."]
    return []


# -------------------------------------------------------------------------------- 3. and 4. the two calls


class KeywordRecorder:
    """Stands where ``FastLanguageModel`` goes and writes down what each call receives (loads nothing)."""

    MODEL, TOKENIZER, PEFT_MODEL = "modelo", "tokenizer", "modelo con LoRA"

    def __init__(self):
        self.calls: dict[str, tuple[tuple, dict]] = {}

    def from_pretrained(self, *args, **kwargs):
        self.calls["from_pretrained"] = (args, kwargs)
        return self.MODEL, self.TOKENIZER

    def get_peft_model(self, *args, **kwargs):
        self.calls["get_peft_model"] = (args, kwargs)
        return self.PEFT_MODEL


def call_errors(fn, call: str, profiles: list[Profile] | None = None) -> list[str]:
    """Call the student's ``cargar_modelo(recorder, perfil)`` or ``anadir_lora(recorder, model, perfil)`` for each
    profile and judge the recorded call by the rules; Spanish problems, [] if right.

    Several profiles, one with every value changed (:func:`other_profile`), catch a value typed from the screen.
    """
    if not callable(fn):
        return ["Define la función pedida (def ...) en la celda de respuesta."]
    expected_return = ((KeywordRecorder.MODEL, KeywordRecorder.TOKENIZER) if call == "from_pretrained"
                       else KeywordRecorder.PEFT_MODEL)
    for profile in profiles or check_profiles():
        recorder = KeywordRecorder()
        args = (recorder, profile) if call == "from_pretrained" else (recorder, KeywordRecorder.MODEL, profile)
        with watching(REFERENCES[call]) as called:
            returned = None
            try:
                returned, error = fn(*args), None
            except Exception as exc:  # noqa: BLE001 - the student's code: report, never hide the hint
                error = exc
        if called:
            return [course_call_message(called[0])]
        if error is not None:
            return [f"Con el perfil {profile.name}, la función lanzó {describe_error(error)}"]
        received = recorder.calls.get(call)
        if received is None:
            return [f"La función no llama a {call} del FastLanguageModel que recibe."]
        found = rules.errors(call, *received, profile, model=KeywordRecorder.MODEL)
        if found:
            return [f"Con el perfil {profile.name}: {p}" for p in found]
        if returned != expected_return:
            return [f"Con el perfil {profile.name}, la función no devuelve lo que devuelve {call}."]
    return []


# -------------------------------------------------------------------------- unwritten exercises, in Spanish

def _import_in_sandbox(fn):
    """``importar_unsloth()`` among the stand-ins; what it raised is raised here (a written but failing one)."""
    _, result, error = run_in_sandbox(fn)
    if error is not None:
        raise error
    return result


# function name -> (the exercise, as the notebook titles it; how to call it on a tiny input)
EXERCISES = {
    "standby_posible": ("«¿se puede aún arrancar Standby?» (pregunta 1)", lambda fn: fn({"trl": object()}, {})),
    "importar_unsloth": ("«importar unsloth en el orden que funciona» (pregunta 2)", _import_in_sandbox),
    "cargar_modelo": ("«cargar el modelo» (pregunta 3)", lambda fn: fn(KeywordRecorder(), get_profile("ci"))),
    "anadir_lora": ("«añadir LoRA» (pregunta 4)",
                    lambda fn: fn(KeywordRecorder(), KeywordRecorder.MODEL, get_profile("ci"))),
}


def _probe_table() -> dict:
    """``EXERCISES`` in ``labs.core.pending``'s shape; each probe call stays inside our caller below."""
    return {name: (title, lambda: ()) for name, (title, _) in EXERCISES.items()}


def ejercicios_hechos(*functions) -> bool:
    """True when every function answers; otherwise say, in Spanish, which exercise to finish (labs.core.pending).

    ``importar_unsloth`` is called among the stand-ins, never for real.
    """
    wrapped = []
    for function in functions:
        name = getattr(function, "__name__", repr(function))
        _, call = EXERCISES[name]

        def probe(call=call, function=function):
            return call(function)

        probe.__name__ = name
        probe.__wrapped__ = function  # the student's own: labs.core.pending runs its check through it
        wrapped.append(probe)
    return pending.ejercicios_hechos(*wrapped, table=_probe_table())
