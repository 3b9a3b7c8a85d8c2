"""vLLM Standby in L7.2: its environment variables, the import order it needs, and the load guard.

Standby (``UNSLOTH_VLLM_STANDBY=1``) is switched on by an environment variable that Unsloth reads when it
is imported. Two things here are fixed for the life of a process, so only a fresh process (a kernel
restart) repairs them: the import order (:func:`enable_standby_and_import_unsloth`) and a failed load of
vLLM under Standby (:func:`standby_load_guard`).
"""

from __future__ import annotations

import contextlib
import os
import sys

from labs.core.profiles import Profile

STANDBY_ENV = "UNSLOTH_VLLM_STANDBY"
UTIL_OVERRIDE_ENV = "UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE"
# Unsloth patches these when it is imported; a copy imported earlier keeps the unpatched code
# (unsloth/_gpu_init.py names the same three in its own warning).
ORDER_SENSITIVE_MODULES = ("trl", "transformers", "peft")
# The allocator settings unsloth_zoo's import strips expandable_segments from, when Standby's variable is "1".
ALLOC_CONF_KEYS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def standby_on(value: str | None) -> bool:
    """Standby's variable as unsloth_zoo 2026.10.9 reads it (``os.getenv("UNSLOTH_VLLM_STANDBY", "0") != "0"`` in
    vllm_utils.py, "any truthy value ... not just '1'"), and as labs.l72.memory reads it: any value but "0"."""
    return (value if value is not None else "0") != "0"


class ImportOrderError(RuntimeError):
    """trl, transformers or peft were imported before unsloth; only a fresh process fixes that."""


class UnslothLoadFailed(RuntimeError):
    """Loading the model (and vLLM) with Unsloth failed; the message says whether to restart."""


# --------------------------------------------------------------------------------------------------
# Import order
# --------------------------------------------------------------------------------------------------


def import_order_problem(modules, environ) -> str | None:
    """Why the import order is already wrong in ``modules``/``environ`` (Spanish), or None if it is right.

    The rule the guard below enforces, also used on the order of a student's cell (labs.l72.answers):
    unsloth imported without ``UNSLOTH_VLLM_STANDBY=1``, or trl/transformers/peft imported before unsloth.
    """
    if "unsloth" in modules:
        value = environ.get(STANDBY_ENV)
        if not standby_on(value):
            return ("unsloth ya está importado en este proceso sin UNSLOTH_VLLM_STANDBY=1, y Standby solo se "
                    "activa si la variable existe ANTES de importar unsloth. Reinicia el kernel (o el proceso) "
                    "y ejecuta primero la celda que activa Standby.")
        kept = [key for key in ALLOC_CONF_KEYS if "expandable_segments:True" in environ.get(key, "")]
        if kept and value != "1":  # unsloth_zoo's import strips expandable_segments only for exactly "1"
            return (f"unsloth se importó con UNSLOTH_VLLM_STANDBY={value!r}: Standby está activo, pero unsloth_zoo "
                    f"solo quita expandable_segments de {', '.join(kept)} cuando la variable vale exactamente '1', y "
                    "el modo sleep de vLLM no funciona con él. Reinicia el kernel (o el proceso) y activa Standby "
                    "con UNSLOTH_VLLM_STANDBY=1 antes de importar unsloth.")
        return None
    early = [name for name in ORDER_SENSITIVE_MODULES if name in modules]
    if early:
        return (f"Ya se importó {', '.join(early)} antes que unsloth. Unsloth parchea esos módulos al "
                "importarse; lo que se importó antes se queda sin parchear (sin el motor vLLM compartido, sin "
                "Standby, sin su pérdida por trozos) y no hay forma de arreglarlo dentro de este proceso. "
                "Reinicia el kernel y ejecuta esta celda antes que cualquier import de trl, transformers o peft.")
    return None


def enable_standby_and_import_unsloth(modules: dict | None = None, environ=None):
    """Set ``UNSLOTH_VLLM_STANDBY=1``, then import unsloth, refusing if the order is already wrong.

    Two orders matter, and both are fixed once a module is imported, so only a fresh process (a kernel
    restart) repairs them:

    1. The variable before ``import unsloth``. ``unsloth_zoo`` reads it *at import time*: without it
       it sets ``PYTORCH_ALLOC_CONF=expandable_segments:True``, which vLLM's sleep-mode allocator (what
       Standby is built on) cannot work with; with it, it strips that setting and prepares vLLM's sleep
       mode. Setting it after the import leaves the wrong allocator configuration in place.
    2. unsloth before trl, transformers and peft. Importing unsloth patches their classes (the
       ``GRPOTrainer`` that TRL exports becomes Unsloth's, with the shared vLLM engine, Standby's
       sleep/wake around generation and the chunked loss). A module imported earlier, and any name
       bound from it (``from trl import GRPOTrainer``), keeps the unpatched code: training would run
       without those memory savings, or fail. Unsloth itself only warns; this guard stops instead,
       because a lab that silently runs the slower path teaches the wrong thing.

    ``modules`` and ``environ`` default to ``sys.modules`` and ``os.environ`` (the tests pass their own
    only for the pure checks). Returns the imported ``unsloth`` module.
    """
    modules = sys.modules if modules is None else modules
    environ = os.environ if environ is None else environ
    problem = import_order_problem(modules, environ)
    if problem is not None:
        raise ImportOrderError(problem)
    if "unsloth" in modules:
        return modules["unsloth"]
    environ[STANDBY_ENV] = "1"
    import unsloth  # noqa: PLC0415 - the whole point is *when* this runs

    return unsloth


# --------------------------------------------------------------------------------------------------
# Loading under Standby: a failure means a restart
# --------------------------------------------------------------------------------------------------

_FAILED_STANDBY_LOAD: str | None = None

RESTART_ES = (
    "Reinicia el kernel (o vuelve a lanzar el proceso) antes de intentarlo otra vez: con Standby, vLLM "
    "reserva la memoria con un asignador (CuMemAllocator) que solo puede existir una vez por proceso, y "
    "un segundo intento en el mismo proceso se apila sobre los restos del fallido y vuelve a fallar."
)


CUMEM_MODULE = "vllm.device_allocator.cumem"


def vllm_allocator_exists(modules=None) -> bool:
    """Has this process created vLLM's sleep-mode allocator (the singleton ``CuMemAllocator.instance``)?

    It is what makes a failed load unrepeatable in the same process. Unsloth refuses some calls before vLLM
    starts (its precision flags, an unknown model name): then no allocator exists and the call can be fixed
    and run again without a restart.
    """
    cumem = (sys.modules if modules is None else modules).get(CUMEM_MODULE)
    return getattr(getattr(cumem, "CuMemAllocator", None), "instance", None) is not None


@contextlib.contextmanager
def standby_load_guard(profile: Profile, modules=None):
    """Wrap ``FastLanguageModel.from_pretrained``: a failure after vLLM's allocator started becomes a Spanish
    "restart the kernel"; one before it says what failed and that a corrected call can run in this process."""
    global _FAILED_STANDBY_LOAD
    if _FAILED_STANDBY_LOAD is not None:
        raise UnslothLoadFailed(
            f"En este proceso ya falló una carga de vLLM con Standby ({_FAILED_STANDBY_LOAD}). {RESTART_ES}"
        )
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        if not vllm_allocator_exists(modules):
            raise UnslothLoadFailed(f"La carga del modelo falló antes de arrancar vLLM: {type(exc).__name__}: "
                                    f"{str(exc)[:500]}. Corrige la llamada y vuelve a ejecutar la celda; no hace "
                                    "falta reiniciar: vLLM no llegó a cargarse.") from exc
        _FAILED_STANDBY_LOAD = f"{type(exc).__name__}: {str(exc)[:300]}"
        oom = "memory" in str(exc).lower() or isinstance(exc, MemoryError)
        hint = ""
        if oom:
            hint = (
                " Para caber: baja max_seq_length (ahora "
                f"{profile.max_seq_length}) o, si de verdad quieres otra fracción, {UTIL_OVERRIDE_ENV}=1 "
                "con una gpu_memory_utilization menor. Mira antes `python -m labs vram --path unsloth`."
            )
        raise UnslothLoadFailed(f"La carga del modelo con vLLM (Standby) falló: {type(exc).__name__}: "
                                f"{str(exc)[:500]}.{hint} {RESTART_ES}") from exc
