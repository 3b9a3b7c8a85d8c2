"""Checks of the Unsloth calls the student writes in the L7.2 notebook, cheap enough for ``grader.check``.

Nothing here loads a model or imports unsloth. The import order is checked on the *source* of the student's
function, replayed statement by statement through the same rule the run's guard applies to ``sys.modules``
(:func:`labs.l72.standby.import_order_problem`). The two ``FastLanguageModel`` calls are checked by calling
the student's function with :class:`KeywordRecorder`, which only writes down the keywords it receives, and
comparing them with the lab's own (:func:`labs.l72.gpu.from_pretrained_kwargs`, ``get_peft_model_kwargs``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from labs.core.profiles import Profile
from labs.l72.standby import ORDER_SENSITIVE_MODULES, STANDBY_ENV, import_order_problem

# Why each keyword has its value, in the words the hint gives the student.
WHY_ES = {
    "model_name": "el modelo de Unsloth del perfil (perfil.unsloth_model)",
    "max_seq_length": "prompt + respuesta caben en perfil.max_seq_length",
    "load_in_4bit": "una sola copia de los pesos, en 4 bits si perfil.load_in_4bit",
    "fast_inference": "True: vLLM genera dentro del mismo proceso, con los mismos pesos",
    "max_lora_rank": "vLLM reserva sitio para adaptadores de rango perfil.lora_r",
    "gpu_memory_utilization": "la fracción del perfil (perfil.vllm_gpu_memory_utilization; con Standby Unsloth elige la suya)",
    "r": "el rango del adaptador: perfil.lora_r",
    "lora_alpha": "la escala del adaptador: perfil.lora_alpha",
    "target_modules": "las siete proyecciones de cada capa: list(perfil.lora_targets)",
    "use_gradient_checkpointing": "\"unsloth\": su checkpointing, que guarda los bordes de capa en la RAM del host",
    "random_state": "la semilla del perfil: perfil.seed",
}


def function_source(fn) -> str | None:
    """The source of a function defined in a notebook cell (None if it is not a function)."""
    if not callable(fn) or not hasattr(fn, "__code__"):
        return None
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None


def _standby_assignment(node) -> str | None:
    """The value given to ``os.environ["UNSLOTH_VLLM_STANDBY"]`` by this statement, if it sets it."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
        target = node.targets[0]
        key = target.slice
        if (ast.unparse(target.value) == "os.environ" and isinstance(key, ast.Constant) and key.value == STANDBY_ENV
                and isinstance(node.value, ast.Constant)):
            return str(node.value.value)
    return None


def import_order_errors(source: str, environ: dict | None = None) -> list[str]:
    """Replay the imports and Standby assignments of ``source`` in order; Spanish problems, [] if right.

    ``environ`` is the environment before the code runs (the notebook's, where an earlier cell set Standby).
    Each ``import unsloth`` is judged by the guard's rule twice: before it (nothing patched imported yet) and
    right after it (Standby already on).
    """
    modules: dict[str, bool] = {}
    environ = dict(environ or {})
    problems: list[str] = []
    nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt)]
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):  # source order, not ast.walk's
        value = _standby_assignment(node)
        if value is not None:
            environ[STANDBY_ENV] = value
            continue
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots = [node.module.split(".")[0]]
        else:
            continue
        for root in roots:
            if root == "unsloth" and "unsloth" not in modules:
                before = import_order_problem(modules, environ)
                modules["unsloth"] = True
                problem = before or import_order_problem(modules, environ)
                if problem:
                    problems.append(f"línea {node.lineno}: {problem}")
            elif root in ORDER_SENSITIVE_MODULES:
                modules[root] = True
    if "unsloth" not in modules:
        problems.append("No hay ningún `import unsloth`: es lo primero que debe importarse.")
    return problems


def imports_fast_language_model(source: str) -> bool:
    """Whether ``source`` takes ``FastLanguageModel`` from unsloth and returns it."""
    tree = ast.parse(source)
    imported = any(isinstance(n, ast.ImportFrom) and n.module == "unsloth"
                   and any(a.name == "FastLanguageModel" and a.asname is None for a in n.names) for n in ast.walk(tree))
    returned = any(isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id == "FastLanguageModel"
                   for n in ast.walk(tree))
    return imported and returned


class KeywordRecorder:
    """Stands where ``FastLanguageModel`` goes and writes down what each call receives (loads nothing)."""

    def __init__(self):
        self.calls: dict[str, tuple[tuple, dict]] = {}

    def from_pretrained(self, *args, **kwargs):
        self.calls["from_pretrained"] = (args, kwargs)
        return "modelo", "tokenizer"

    def get_peft_model(self, model, *args, **kwargs):
        self.calls["get_peft_model"] = ((model, *args), kwargs)
        return "modelo con LoRA"


def keyword_errors(call: str, received: tuple[tuple, dict] | None, expected: dict, positional: int = 0) -> list[str]:
    """Spanish problems with one recorded call against the lab's keywords, [] if they agree."""
    if received is None:
        return [f"La función no llama a FastLanguageModel.{call}(...) con el FastLanguageModel que recibe."]
    args, kwargs = received
    problems = []
    if len(args) > positional:
        problems.append(f"{call}: pasa cada valor con su nombre (model_name=..., r=...), no por posición.")
    for key, value in expected.items():
        if key not in kwargs:
            problems.append(f"{call}: falta {key}= ({WHY_ES.get(key, 'ver el perfil')}).")
        elif kwargs[key] != value:
            problems.append(f"{call}: {key}={kwargs[key]!r}, pero debe ser {value!r} ({WHY_ES.get(key, 'ver el perfil')}).")
    extra = sorted(set(kwargs) - set(expected))
    if extra:
        problems.append(f"{call}: sobra {', '.join(extra)} (el lab no lo pasa).")
    return problems


def call_errors(fn, call: str, profiles: list[Profile], expected_for, *args) -> list[str]:
    """Call the student's ``fn(recorder, *args, perfil)`` for each profile and compare the recorded keywords.

    Several profiles (the lesson's and a CPU one) catch a value typed by hand instead of read from ``perfil``.
    """
    if function_source(fn) is None:
        return ["Define la función pedida (def ...) en la celda de respuesta."]
    problems: list[str] = []
    for profile in profiles:
        recorder = KeywordRecorder()
        try:
            fn(recorder, *args, profile)
        except Exception as exc:  # noqa: BLE001 - the student's code: report, never hide the hint
            return [f"La función lanzó {type(exc).__name__}: {exc}"]
        found = keyword_errors(call, recorder.calls.get(call), expected_for(profile),
                               positional=1 if call == "get_peft_model" else 0)
        problems += [f"con el perfil {profile.name}: {p}" for p in found if p not in problems]
        if found:
            break
    return problems
