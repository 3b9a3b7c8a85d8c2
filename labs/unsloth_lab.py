"""Lab L7.2: the L7.1 recipe with Unsloth and vLLM Standby on Qwen3-4B, or its CPU stand-in.

Same run folder (labs.runfolder), same rewards, same data, same evaluation as L7.1 (this module calls
``labs.l71``, ``labs.recipe`` and ``labs.evaluation``; it copies none of them). What changes is how the
model is loaded and trained::

    python -m labs l72 [--profile cpu|ci|rtx5090] [--run-name NAME] [--fresh] [--set key=value ...]

GPU path (``rtx5090``: CUDA visible, Unsloth installed)
    ``UNSLOTH_VLLM_STANDBY=1`` is set before ``import unsloth``, and unsloth is imported before trl,
    transformers and peft (:func:`enable_standby_and_import_unsloth`). ``FastLanguageModel`` loads
    ``unsloth/Qwen3-4B-Instruct-2507`` in 4 bits with vLLM inside (``fast_inference=True``), adds LoRA
    adapters with the lesson's rank, alpha and targets and Unsloth's gradient checkpointing, and TRL's
    GRPOTrainer (patched by Unsloth) trains them with the lesson's hyperparameters
    (``recipe.grpo_config_kwargs``). vLLM and the trainer share one copy of the weights, so after
    training vLLM still holds the *base* weights: the trained model is evaluated by passing the saved
    adapter to every generation (``lora_request=model.load_lora(path)``), and
    :func:`evaluate_unsloth` refuses to evaluate "trained" without one (it would silently measure the
    base model).

CPU path (``cpu``, ``ci``)
    Unsloth 2026.10.9 trains only SFT on a CPU: ``from_pretrained(fast_inference=True)`` raises
    ``NotImplementedError`` and TRL's GRPO trainer is left unpatched. The same recipe then runs with
    transformers + PEFT: a LoRA adapter of the same rank, alpha and targets (``recipe.lora_config``,
    passed as ``peft_config`` to GRPOTrainer), generation in TRL's colocated vLLM engine when the
    profile says so. The output says so plainly.

Both paths print the VRAM plan of both routes (labs.vram) before loading anything, write ``run.json``
with ``"lab": "L7.2"``, the back-end that actually ran (``backend_used``) and the vLLM memory fraction in
force (``vllm_memory_fraction``), and record the memory the run used in ``resources.json``.

The second half of the module puts L7.1 and L7.2 side by side from their run folders (memory, seconds
per step, reward, accuracy) for the notebook ``notebooks/L7_2_unsloth_standby.ipynb``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from labs import data as course_data
from labs import evaluation, l71, models, preflight, recipe, resources, vram
from labs.paths import runs_dir
from labs.profiles import Profile, get_profile
from labs.resources import RESOURCES_JSON, ResourceMonitor, gib, nvidia_smi_used_gib, read_resources, write_resources
from labs.runfolder import RUN_JSON, RunFolder, read_json, write_json

LAB = "L7.2"
STANDBY_ENV = "UNSLOTH_VLLM_STANDBY"
UTIL_OVERRIDE_ENV = "UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE"
# Unsloth patches these when it is imported; a copy imported earlier keeps the unpatched code
# (unsloth/_gpu_init.py names the same three in its own warning).
ORDER_SENSITIVE_MODULES = ("trl", "transformers", "peft")

BACKEND_UNSLOTH = "unsloth+vllm-standby"
BACKEND_FALLBACK = "transformers+peft"

WHY_NO_UNSLOTH_ON_CPU_ES = (
    "Unsloth 2026.10.9 solo entrena SFT en CPU: FastLanguageModel.from_pretrained(fast_inference=True) "
    "lanza NotImplementedError y el GRPOTrainer de TRL se queda sin parchear. Por eso aquí NO se usa la "
    "ruta GPU de Unsloth: la misma receta (mismos datos, recompensas, hiperparámetros y evaluación) corre "
    "con transformers + PEFT, con un adaptador LoRA del mismo rango, alfa y módulos."
)


class ImportOrderError(RuntimeError):
    """trl, transformers or peft were imported before unsloth; only a fresh process fixes that."""


class LoraNotLoaded(RuntimeError):
    """A "trained" evaluation would not see the trained adapter (it would measure the base model)."""


class BackendUnavailable(RuntimeError):
    """A GPU profile on a machine that cannot run Unsloth's GPU path."""


class UnslothLoadFailed(RuntimeError):
    """Loading the model (and vLLM) with Unsloth failed; the message says whether to restart."""


# --------------------------------------------------------------------------------------------------
# The two Unsloth calls, as keyword dictionaries built from the profile (vetted by tests/test_api_drift.py)
# --------------------------------------------------------------------------------------------------


def from_pretrained_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.from_pretrained``: the model, 4-bit or not, and vLLM inside."""
    return dict(
        model_name=profile.unsloth_model,
        max_seq_length=profile.max_seq_length,
        load_in_4bit=profile.load_in_4bit,
        fast_inference=True,  # vLLM generates the completions
        max_lora_rank=profile.lora_r,
        gpu_memory_utilization=profile.vllm_gpu_memory_utilization,  # ignored under Standby
    )


def get_peft_model_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.get_peft_model``: the LoRA adapters and Unsloth's checkpointing."""
    return dict(
        r=profile.lora_r,
        lora_alpha=profile.lora_alpha,
        target_modules=list(profile.lora_targets),
        use_gradient_checkpointing="unsloth",
        random_state=profile.seed,
    )


# --------------------------------------------------------------------------------------------------
# Which back-end runs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    name: str  # BACKEND_UNSLOTH or BACKEND_FALLBACK
    reason_es: str

    @property
    def is_unsloth(self) -> bool:
        return self.name == BACKEND_UNSLOTH


def gpu_path(profile: Profile) -> tuple[bool, str]:
    """Whether Unsloth's GPU path runs here with this profile, and why (never raises)."""
    try:
        backend = choose_backend(profile)
    except BackendUnavailable as exc:
        return False, str(exc)
    return backend.is_unsloth, backend.reason_es


def unsloth_installed() -> bool:
    """Whether ``import unsloth`` could work, without importing it (the import itself patches trl)."""
    return importlib.util.find_spec("unsloth") is not None


def choose_backend(profile: Profile, cuda: bool | None = None, installed: bool | None = None) -> Backend:
    """Unsloth on a GPU profile; transformers + PEFT on a CPU profile. A GPU profile never falls back.

    A GPU profile without CUDA or without Unsloth raises (the doctor says the same, earlier): quietly
    training Qwen3-4B another way would not be lab L7.2.
    """
    if profile.use_cpu:
        return Backend(BACKEND_FALLBACK, f"el perfil '{profile.name}' es de CPU. {WHY_NO_UNSLOTH_ON_CPU_ES}")
    from labs.profiles import cuda_available

    cuda = cuda_available() if cuda is None else cuda
    installed = unsloth_installed() if installed is None else installed
    missing = []
    if not cuda:
        missing.append("no se ve ninguna GPU CUDA")
    if not installed:
        missing.append("Unsloth no está instalado (pip install -r requirements-gpu.txt)")
    if missing:
        raise BackendUnavailable(
            f"El perfil '{profile.name}' es de GPU, pero {' y '.join(missing)}. Usa el perfil 'cpu' o 'ci' "
            "para la versión de CPU del lab, o `python -m labs doctor` para ver qué falta."
        )
    return Backend(BACKEND_UNSLOTH, "GPU CUDA visible y Unsloth instalado: Unsloth + vLLM con Standby.")


# --------------------------------------------------------------------------------------------------
# Import order
# --------------------------------------------------------------------------------------------------


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
    if "unsloth" in modules:
        if environ.get(STANDBY_ENV, "0") == "0":
            raise ImportOrderError(
                "unsloth ya está importado en este proceso sin UNSLOTH_VLLM_STANDBY=1, y Standby solo se "
                "activa si la variable existe ANTES de importar unsloth. Reinicia el kernel (o el proceso) "
                "y ejecuta primero la celda que activa Standby."
            )
        return modules["unsloth"]
    early = [name for name in ORDER_SENSITIVE_MODULES if name in modules]
    if early:
        raise ImportOrderError(
            f"Ya se importó {', '.join(early)} antes que unsloth. Unsloth parchea esos módulos al "
            "importarse; lo que se importó antes se queda sin parchear (sin el motor vLLM compartido, sin "
            "Standby, sin su pérdida por trozos) y no hay forma de arreglarlo dentro de este proceso. "
            "Reinicia el kernel y ejecuta esta celda antes que cualquier import de trl, transformers o peft."
        )
    environ[STANDBY_ENV] = "1"
    import unsloth  # noqa: PLC0415 - the whole point is *when* this runs

    return unsloth


# --------------------------------------------------------------------------------------------------
# The vLLM memory fraction in force
# --------------------------------------------------------------------------------------------------

# unsloth_zoo 2026.10.9, vllm_utils.load_vllm: with Standby on and no override, Unsloth replaces
# gpu_memory_utilization by a target picked from the card's total memory ("ten percent" = total GiB / 10),
# lowered by 5% for vLLM >= 0.11. tests/test_unsloth_lab.py runs the pinned release's own code against
# these tables.
STANDBY_TIERS = ((4.0, 0.925), (2.5, 0.9), (2.0, 0.825), (1.4, 0.8), (1.0, 0.775), (0.0, 0.75))
STANDBY_TIERS_BEFORE_VLLM_0_11 = ((9.0, 0.9), (4.0, 0.875), (2.5, 0.85), (2.0, 0.825), (1.4, 0.8), (1.0, 0.75),
                                  (0.0, 0.7))  # fmt: skip
NEWER_VLLM_FACTOR = 0.95


def _version_tuple(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return Version(version).release


def standby_target_fraction(total_gib: float, vllm_version: str) -> float:
    """The fraction Unsloth picks under Standby for a card of ``total_gib`` GiB and this vLLM."""
    ten_percent = total_gib * 0.1
    newer = _version_tuple(vllm_version) >= (0, 11, 0)
    for threshold, target in STANDBY_TIERS if newer else STANDBY_TIERS_BEFORE_VLLM_0_11:
        if ten_percent >= threshold:
            return target * NEWER_VLLM_FACTOR if newer else target
    raise AssertionError("unreachable: the last tier starts at 0")


@dataclass(frozen=True)
class MemoryFraction:
    """How much memory vLLM may take: what the profile asked for, and what is actually in force."""

    requested: float
    in_force: float | None  # None: no vLLM engine in this run
    rule: str  # "standby" | "standby-override" | "no-standby" | "trl-colocate" | "no-vllm"
    card_gib: float | None = None
    vllm_version: str | None = None
    engine_value: float | None = None  # read back from the running engine, when there is one
    device: str = "gpu"  # "gpu" or "cpu" (vLLM's CPU back-end: the fraction is of host RAM)

    def with_engine_value(self, value: float | None) -> "MemoryFraction":
        data = asdict(self)
        data["engine_value"] = value
        if self.rule in ("trl-colocate",) and value is not None:
            data["in_force"] = value  # nothing rewrites it on this path: the engine's value is the one
        return MemoryFraction(**data)

    def as_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def describe_es(self) -> str:
        memoria = "de la RAM del host (backend CPU de vLLM)" if self.device == "cpu" else "de la memoria de la GPU"
        engine = ""
        if self.engine_value is not None:
            engine = f" Leído del motor vLLM en marcha: {_fmt(self.engine_value)}."
            if self.rule == "standby" and abs(self.engine_value - (self.in_force or 0)) > 5e-4:
                engine += (" (Unsloth aplica su fracción a la memoria libre al cargar y descuenta las "
                           "activaciones del entrenamiento; por eso el motor recibe algo menos.)")
        if self.rule == "no-vllm":
            return "Sin vLLM en este run (use_vllm=False): no hay fracción de memoria reservada para generar."
        if self.rule == "trl-colocate":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria} (la que pide el "
                    f"perfil, vllm_gpu_memory_utilization={_fmt(self.requested)}; sin Unsloth nadie la "
                    f"cambia).{engine}")
        card = f"{self.card_gib:.1f} GiB".replace(".", ",") if self.card_gib else "?"
        if self.rule == "standby":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria}. El perfil pide "
                    f"{_fmt(self.requested)}, pero con Standby Unsloth la ignora y elige la suya según la "
                    f"memoria total de la tarjeta ({card}, vLLM {self.vllm_version}). Para imponer la "
                    f"tuya: {UTIL_OVERRIDE_ENV}=1 antes de importar unsloth.{engine}")
        if self.rule == "standby-override":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria}: Standby activo, "
                    f"pero {UTIL_OVERRIDE_ENV}=1 hace que Unsloth respete la del perfil.{engine}")
        return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria} (Standby apagado: "
                f"se usa la del perfil).{engine}")


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}".replace(".", ",")


def unsloth_memory_fraction(requested: float, total_gib: float, vllm_version: str, *, standby: bool = True,
                            override: bool = False) -> MemoryFraction:
    """The fraction Unsloth hands to vLLM (before its own free-memory adjustment), and why."""
    if standby and not override:
        in_force, rule = standby_target_fraction(total_gib, vllm_version), "standby"
    else:
        in_force, rule = requested, ("standby-override" if standby else "no-standby")
    return MemoryFraction(requested, in_force, rule, total_gib, vllm_version)


def engine_memory_fraction(llm) -> float | None:
    """``gpu_memory_utilization`` as the running vLLM engine holds it (``None`` if it cannot be read)."""
    engine = getattr(llm, "llm_engine", llm)
    for owner in (getattr(engine, "vllm_config", None), engine):
        cache = getattr(owner, "cache_config", None)
        value = getattr(cache, "gpu_memory_utilization", None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _env_on(environ, name: str) -> bool:
    return environ.get(name, "0") != "0"


def expected_gpu_fraction(profile: Profile, total_gib: float, vllm_version: str, environ=None) -> MemoryFraction:
    """What Unsloth will use on this card with the current environment (read before loading)."""
    environ = os.environ if environ is None else environ
    return unsloth_memory_fraction(profile.vllm_gpu_memory_utilization, total_gib, vllm_version,
                                   standby=_env_on(environ, STANDBY_ENV), override=_env_on(environ, UTIL_OVERRIDE_ENV))


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_4bit_vllm_plugin(profile: Profile, vllm_version: str | None, plugin_installed: bool) -> list[str]:
    """vLLM 0.28 moved bitsandbytes out of its tree: 4-bit + vLLM then needs ``vllm-bnb-plugin``.

    Found in unsloth_zoo 2026.10.9 (``load_vllm`` raises without it) and in the vLLM 0.31.0 wheel (no
    bitsandbytes module). Checked before loading, because a failed load under Standby costs a restart.
    """
    if not profile.load_in_4bit or vllm_version is None or _version_tuple(vllm_version) < (0, 28, 0):
        return []
    if plugin_installed:
        return []
    return [
        f"load_in_4bit=True con vLLM {vllm_version} necesita el paquete vllm-bnb-plugin (vLLM 0.28 sacó "
        "bitsandbytes de su código). Instálalo con `pip install vllm-bnb-plugin` o pon load_in_4bit=False "
        "(bf16: más memoria; mira `python -m labs vram --path unsloth --set load_in_4bit=false`)."
    ]


def check_unsloth_path(profile: Profile) -> None:
    """What the GPU path needs beyond L7.1's checks; raise ``PreflightError`` before anything loads."""
    problems = check_4bit_vllm_plugin(profile, package_version("vllm"),
                                      importlib.util.find_spec("vllm_bnb_plugin") is not None)
    if profile.format_pass:
        problems.append(
            "format_pass=True no está disponible en la ruta Unsloth de L7.2: el pase de formato entrena con TRL "
            "sin parchear y tendría que ir antes de importar unsloth. Ponlo a False (el perfil rtx5090 ya lo "
            "tiene así)."
        )
    if problems:
        raise preflight.PreflightError(problems)


# --------------------------------------------------------------------------------------------------
# Loading under Standby: a failure means a restart
# --------------------------------------------------------------------------------------------------

_FAILED_STANDBY_LOAD: str | None = None

RESTART_ES = (
    "Reinicia el kernel (o vuelve a lanzar el proceso) antes de intentarlo otra vez: con Standby, vLLM "
    "reserva la memoria con un asignador (CuMemAllocator) que solo puede existir una vez por proceso, y "
    "un segundo intento en el mismo proceso se apila sobre los restos del fallido y vuelve a fallar."
)


@contextlib.contextmanager
def standby_load_guard(profile: Profile):
    """Wrap ``FastLanguageModel.from_pretrained``: a failure becomes a Spanish "restart the kernel"."""
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


# --------------------------------------------------------------------------------------------------
# Evaluation through vLLM with the trained LoRA actually loaded
# --------------------------------------------------------------------------------------------------


def require_lora_request(lora_request, adapter_dir: str | os.PathLike | None = None):
    """Return ``lora_request`` if it really names the trained adapter; raise :class:`LoraNotLoaded` if not.

    With Unsloth, vLLM shares the training model's *base* weights: the LoRA adapter reaches generation
    only through ``lora_request``. ``fast_generate`` without it answers with the base model, and an
    evaluation called "trained" would quietly report the base model's accuracy.
    """
    if lora_request is None:
        raise LoraNotLoaded(
            "Evaluación 'trained' sin lora_request: vLLM generaría con los pesos base (Unsloth comparte con "
            "vLLM los pesos sin el adaptador), así que medirías el modelo base con la etiqueta de entrenado. "
            "Guarda el adaptador y pasa lora_request=model.load_lora(ruta)."
        )
    if getattr(lora_request, "_unsloth_merged", False):
        return lora_request  # Unsloth's in-memory merged request (load_tensors=True on a bf16 model)
    lora_id = getattr(lora_request, "lora_int_id", None)
    if not isinstance(lora_id, int) or lora_id < 1:
        raise LoraNotLoaded(
            f"{type(lora_request).__name__} no parece una petición LoRA de vLLM (lora_int_id={lora_id!r}; "
            "vLLM exige un entero ≥ 1). Usa lo que devuelve model.load_lora(ruta)."
        )
    if getattr(lora_request, "lora_tensors", None):
        return lora_request  # the adapter travels as tensors (load_tensors=True)
    path = getattr(lora_request, "lora_path", "") or getattr(lora_request, "lora_local_path", "") or ""
    if not path or not (Path(path) / "adapter_config.json").exists():
        raise LoraNotLoaded(
            f"La petición LoRA apunta a '{path}', donde no hay ningún adaptador (falta adapter_config.json). "
            "Guarda primero el adaptador entrenado (model.save_lora(ruta)) y cárgalo desde esa ruta."
        )
    if adapter_dir is not None and Path(path).resolve() != Path(adapter_dir).resolve():
        raise LoraNotLoaded(
            f"La petición LoRA carga '{path}', pero el adaptador de este run está en '{adapter_dir}': "
            "evaluarías otro adaptador."
        )
    return lora_request


class _LoraEngine:
    """vLLM's ``generate`` as labs.evaluation calls it, routed through Unsloth's ``fast_generate``."""

    def __init__(self, model, lora_request=None):
        self.model = model
        self.lora_request = lora_request

    def generate(self, prompts, sampling_params=None, use_tqdm=False):
        return self.model.fast_generate(prompts, sampling_params=sampling_params, use_tqdm=use_tqdm,
                                        lora_request=self.lora_request)


def evaluate_unsloth(rows, model, tokenizer, run: RunFolder, which: str, max_new_tokens: int, lora_request=None,
                     adapter_dir=None) -> list[dict]:
    """labs.evaluation's holdout evaluation, generated by Unsloth's vLLM engine.

    ``which="trained"`` requires the LoRA request of the trained adapter (:func:`require_lora_request`);
    ``which="base"`` refuses one (the base model is the one without the adapter).
    """
    if which == "trained":
        require_lora_request(lora_request, adapter_dir)
    elif lora_request is not None:
        raise ValueError("La evaluación 'base' es la del modelo sin adaptador: no le pases lora_request.")
    engine = _LoraEngine(model, lora_request)
    return evaluation.evaluate(
        rows, lambda batch: evaluation.generate_vllm(engine, tokenizer, batch, max_new_tokens), run, which
    )


def save_adapter(model, tokenizer, run: RunFolder) -> Path:
    """Write the trained LoRA adapter (and the tokenizer) into ``<run>/model`` and return that folder."""
    target = run.model_dir
    target.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "save_lora"):
        model.save_lora(str(target))
    else:
        model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


# CPU path: TRL pushes the trained weights into its colocated engine by merging the adapter.


class _MergedView:
    """The PEFT model's parameters under the names the plain model has (adapter merged beforehand)."""

    def __init__(self, peft_model):
        self._base = peft_model.get_base_model()

    def named_parameters(self):
        for name, param in self._base.named_parameters():
            if ".lora_" in name:
                continue
            yield name.replace(".base_layer", ""), param


def lora_engine_check(trainer) -> dict:
    """After the last sync: does TRL's vLLM engine generate from base + trained LoRA?

    Compares every engine weight with the merged weights (``vllm_cpu_shim.engine_weight_diff`` on a
    merged view) and sets that against the size of the adapter's change. Returns
    ``{"max_abs_diff", "compared", "adapter_max_delta", "engine_has_adapter"}``.
    """
    from types import SimpleNamespace

    from labs import vllm_cpu_shim

    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    delta = 0.0
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "get_delta_weight") and "default" in getattr(module, "lora_A", {}):
                delta = max(delta, float(module.get_delta_weight("default").abs().max()))
    model.merge_adapter()
    try:
        proxy = SimpleNamespace(accelerator=SimpleNamespace(unwrap_model=lambda m: m), model=_MergedView(model),
                                vllm_generation=trainer.vllm_generation)
        diff = vllm_cpu_shim.engine_weight_diff(proxy)
    finally:
        model.unmerge_adapter()
    # If the engine held the base weights, the difference would be the adapter's change itself.
    has_adapter = diff["compared"] > 0 and (delta < 1e-6 or diff["max_abs_diff"] < 0.25 * delta)
    return {"max_abs_diff": diff["max_abs_diff"], "compared": diff["compared"], "adapter_max_delta": delta,
            "engine_has_adapter": has_adapter}


def require_engine_has_adapter(check: dict) -> None:
    """Refuse the "trained" evaluation when the engine does not generate from the trained adapter."""
    if not check["engine_has_adapter"]:
        raise LoraNotLoaded(
            f"El motor vLLM no genera con el adaptador entrenado (diferencia máxima con los pesos fusionados "
            f"{check['max_abs_diff']:.3g}, cambio del adaptador {check['adapter_max_delta']:.3g}, "
            f"{check['compared']} tensores comparados): la evaluación 'trained' mediría el modelo base."
        )


# --------------------------------------------------------------------------------------------------
# The lab
# --------------------------------------------------------------------------------------------------


def print_vram_plans(profile: Profile, card_gib: float | None = None) -> list:
    """Both routes' VRAM plans (labs.vram), printed before anything is loaded."""
    # The TRL route with LoRA: L7.1's route on the GPU profile, and what the CPU stand-in of L7.2 runs.
    plans = [vram.plan(profile, "trl", card_gib, lora=True), vram.plan(profile, "unsloth", card_gib)]
    print("[vram] Plan de memoria de las dos rutas, antes de cargar nada:\n")
    print("\n\n".join(p.render_es() for p in plans))
    if profile.use_cpu:
        print("\n[vram] Perfil de CPU: aquí nada va a una GPU (la memoria es la RAM del host). Son los planes de "
              "las dos rutas en una tarjeta de 32 GB con los ajustes de este perfil.")
    return plans


def start(profile: Profile | str | None = None, run_name: str | None = None, fresh: bool = False, **overrides):
    """Profile (with ``backend="unsloth"``), reward functions and run folder of an L7.2 run.

    Everything here is checked before a model is loaded: removed GRPOConfig keywords, the pre-flight
    checks and the doctor's environment checks (``l71.prepare``).
    """
    from rewards import reward_functions

    preflight.refuse_removed_keywords(overrides)
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    profile = profile.replace(backend="unsloth", **overrides)
    reward_funcs = reward_functions()
    l71.prepare(profile, reward_funcs)
    return profile, reward_funcs, l71.new_run(profile, run_name, fresh, LAB)


def record_run(run: RunFolder, profile: Profile, reward_funcs, base_model: str, base_label: str, backend: Backend,
               fraction: MemoryFraction) -> None:
    """run.json, as L7.1 writes it, plus the back-end that ran and the memory fraction in force."""
    l71.write_run_json(run, profile, LAB, reward_funcs, base_model, {
        "base_label": base_label,
        "backend_used": backend.name,
        "backend_reason_es": backend.reason_es,
        "vllm_memory_fraction": fraction.as_dict(),
    })


def update_run_json(run: RunFolder, **fields) -> None:
    record = read_json(run.path(RUN_JSON))
    record.update(fields)
    write_json(run.path(RUN_JSON), record)


def finish_resources(run: RunFolder, monitor: ResourceMonitor, backend: Backend) -> dict:
    return resources.record(run, monitor, LAB, backend_used=backend.name)


def run_lab(profile: Profile | str | None = None, run_name: str | None = None, fresh: bool = False,
            **overrides) -> Path:
    """Run lab L7.2 and return its run folder (Unsloth on a GPU profile, transformers + PEFT on CPU)."""
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    if profile.use_cpu:
        lab = FallbackLab(profile, run_name, fresh, **overrides)
        try:
            return lab.run_all()
        finally:
            lab.close()
    profile, reward_funcs, run = start(profile, run_name, fresh, **overrides)
    backend = choose_backend(profile)
    if run.is_finished():
        print(f"[run] {run.root} ya terminó; para empezar otro usa --fresh (o fresh=True).")
        return run.root
    print(f"[backend] {backend.name}: {backend.reason_es}")
    print_vram_plans(profile)
    return _run_unsloth(profile, reward_funcs, run, backend)


class FallbackLab(l71.Lab):
    """L7.2 on a CPU: L7.1's steps (``l71.Lab``) with a PEFT LoRA of the lesson's rank, alpha and targets.

    What changes against L7.1: ``backend="unsloth"`` in the profile, the ``"L7.2"`` label and folder,
    the LoRA adapter, ``run.json`` fields for the back-end and the memory fraction in force, a check that
    TRL's vLLM engine really generates from the trained adapter before the "trained" evaluation, and
    ``resources.json``.
    """

    def __init__(self, profile=None, run_name=None, fresh=False, **overrides):
        profile = profile if isinstance(profile, Profile) else get_profile(profile)
        super().__init__(profile.replace(backend="unsloth"), run_name, fresh, None, LAB, **overrides)
        self.backend = choose_backend(self.profile)
        requested = self.profile.vllm_gpu_memory_utilization
        self.fraction = (MemoryFraction(requested, requested, "trl-colocate", device="cpu") if self.profile.use_vllm
                         else MemoryFraction(requested, None, "no-vllm", device="cpu"))
        self.engine_check: dict | None = None

    def run_all(self) -> Path:
        if not self.finished:
            print(f"[backend] {self.backend.name}: {self.backend.reason_es}")
            print_vram_plans(self.profile)
        return super().run_all()

    def format_pass(self) -> str:
        base_model = super().format_pass()  # writes run.json as L7.1 does
        update_run_json(self.run, backend_used=self.backend.name, backend_reason_es=self.backend.reason_es,
                        vllm_memory_fraction=self.fraction.as_dict())
        return base_model

    def build_trainer(self):
        self.trainer = recipe.make_trainer(self.profile, self.run, self.base_model, self.reward_funcs,
                                           course_data.to_dataset(self.splits["train"]),
                                           peft_config=recipe.lora_config(self.profile))
        self.generate = l71.generator(self.trainer, self.profile)
        print(f"[lora] LoRA de PEFT: r={self.profile.lora_r}, alpha={self.profile.lora_alpha}, módulos "
              f"{', '.join(self.profile.lora_targets)}.")
        if self._engine() is not None:
            self.fraction = self.fraction.with_engine_value(engine_memory_fraction(self._engine().llm))
            update_run_json(self.run, vllm_memory_fraction=self.fraction.as_dict())
        print(f"[vllm] {self.fraction.describe_es()}")
        return self.trainer

    def _engine(self):
        return getattr(self.trainer, "vllm_generation", None) if self.profile.use_vllm else None

    def evaluate_trained(self) -> dict:
        if self._engine() is not None:
            l71.sync_engine(self.trainer, self.profile)  # TRL merges the adapter and pushes the result
            check = self.engine_check = lora_engine_check(self.trainer)
            print(f"[vllm] Pesos del motor frente al modelo con el adaptador fusionado: diferencia máxima "
                  f"{check['max_abs_diff']:.3g} ({check['compared']} tensores); el adaptador cambia los pesos "
                  f"hasta {check['adapter_max_delta']:.3g}.")
            require_engine_has_adapter(check)
        summary = super().evaluate_trained()  # syncs again (same weights), evaluates, saves, summarises
        if self.engine_check is not None:
            summary["engine_lora_check"] = self.engine_check
            write_json(self.run.path("eval/summary.json"), summary)
        return summary

    def resource_fields(self) -> dict:
        return {"backend_used": self.backend.name}

    def finish(self) -> None:
        print(f"[backend] Recuerda: este run NO usó la ruta GPU de Unsloth. {WHY_NO_UNSLOTH_ON_CPU_ES}")
        super().finish()


def _run_unsloth(profile: Profile, reward_funcs, run: RunFolder, backend: Backend) -> Path:
    """GPU: Unsloth + vLLM Standby. The notebook runs the same steps cell by cell."""
    check_unsloth_path(profile)
    enable_standby_and_import_unsloth()
    import torch
    from unsloth import FastLanguageModel

    with ResourceMonitor(gpu="torch") as monitor:
        total_gib = torch.cuda.mem_get_info()[1] / 2**30
        fraction = expected_gpu_fraction(profile, total_gib, package_version("vllm") or "0")
        print(f"[vllm] {fraction.describe_es()}")
        with standby_load_guard(profile):
            model, tokenizer = FastLanguageModel.from_pretrained(**from_pretrained_kwargs(profile))
        engine = getattr(model, "vllm_engine", None)
        if engine is None:
            raise UnslothLoadFailed(
                "Unsloth cargó el modelo sin vLLM (desactiva fast_inference sin error si falta vLLM o la GPU es "
                "antigua; mira sus mensajes arriba). Sin vLLM no hay Standby ni load_lora: arregla el entorno "
                "(`python -m labs doctor`). No hace falta reiniciar: vLLM no llegó a cargarse."
            )
        fraction = fraction.with_engine_value(engine_memory_fraction(engine))
        print(f"[vllm] {fraction.describe_es()}")
        model = FastLanguageModel.get_peft_model(model, **get_peft_model_kwargs(profile))
        splits = course_data.course_splits(profile, tokenizer)
        base_label = f"{Path(profile.unsloth_model).name} ({'4 bits' if profile.load_in_4bit else 'bf16'})"
        record_run(run, profile, reward_funcs, profile.unsloth_model, base_label, backend, fraction)
        trainer = recipe.make_trainer(profile, run, model, reward_funcs, course_data.to_dataset(splits["train"]),
                                      processing_class=tokenizer)
        base = evaluate_unsloth(splits["eval"], model, tokenizer, run, "base", profile.eval_max_new_tokens)
        recipe.train(trainer, profile, run)
        adapter_dir = save_adapter(model, tokenizer, run)
        lora_request = model.load_lora(str(adapter_dir))
        trained = evaluate_unsloth(splits["eval"], model, tokenizer, run, "trained", profile.eval_max_new_tokens,
                                   lora_request=lora_request, adapter_dir=adapter_dir)
        evaluation.summarize(run, base, trained, base_label)
        finish_resources(run, monitor, backend)
    l71.finish(run, profile, trainer.state.global_step)
    return run.root


# --------------------------------------------------------------------------------------------------
# L7.1 against L7.2, from their run folders
# --------------------------------------------------------------------------------------------------


# The settings two runs must share for a side-by-side comparison to mean anything (the model may differ:
# L7.2 loads the Unsloth copy of the same weights on the GPU).
COMPARABLE_FIELDS = ("data_source", "train_size", "eval_size", "max_prompt_tokens", "data_seed", "num_generations",
                     "max_completion_length", "per_device_train_batch_size", "gradient_accumulation_steps",
                     "learning_rate", "beta", "loss_type", "temperature", "max_steps", "seed", "format_pass",
                     "eval_max_new_tokens", "use_vllm")


def find_lab_run(lab: str, profile: Profile | str, root: str | os.PathLike | None = None) -> Path | None:
    """The newest finished run of ``lab`` under the runs folder made with ``profile``'s recipe, or None.

    A run counts only if its ``run.json`` has the same profile name and the same values for
    :data:`COMPARABLE_FIELDS` (an L7.1 run with ``--set max_steps=2`` is not a reference for L7.2).
    """
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    wanted = {k: getattr(profile, k) for k in COMPARABLE_FIELDS}
    root = Path(root) if root is not None else runs_dir()
    found = []
    for child in root.iterdir() if root.is_dir() else ():
        folder = RunFolder(child)
        try:
            record = read_json(folder.path(RUN_JSON))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue
        saved = record.get("profile") or {}
        same = saved.get("name") == profile.name and all(saved.get(k) == v for k, v in wanted.items())
        if record.get("lab") == lab and same and folder.is_finished():
            found.append((folder.path(RUN_JSON).stat().st_mtime, child))
    return max(found)[1] if found else None


def run_l71_in_subprocess(profile_name: str, show=print) -> Path:
    """Run ``python -m labs l71 --profile <name>`` in a child process and record its peak memory.

    A child process, because two vLLM engines cannot share one process (nor, on a 32 GB card, one GPU:
    run this before loading L7.2). L7.1 writes its own ``resources.json``; the parent also measures the
    child (``wait4`` for its peak resident memory, nvidia-smi on a GPU) and writes that only if the
    child's folder has none.
    """
    cmd = [sys.executable, "-m", "labs", "l71", "--profile", profile_name]
    show(f"[l71] Lanzo L7.1 en otro proceso: {' '.join(cmd[1:])}")
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    monitor = ResourceMonitor(gpu="nvidia-smi" if nvidia_smi_used_gib() is not None else None, interval_s=1.0,
                              pid=proc.pid).start()
    tail: list[str] = []
    run_dir = None
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-40:]
        if line.startswith("{") and '"run_dir"' in line:
            run_dir = json.loads(line)["run_dir"]
        elif line.startswith(("[", "ERROR")):
            show(line)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampled = monitor.stop()
    if proc.returncode != 0 or run_dir is None:
        raise RuntimeError(f"L7.1 terminó con código {proc.returncode}. Últimas líneas:\n" + "\n".join(tail))
    if read_resources(run_dir) is None:
        write_resources(run_dir, {
            "lab": "L7.1", "peak_rss_gib": gib(usage.ru_maxrss * 1024),
            "measured_by": "el proceso que lanzó L7.1 (wait4 sobre el hijo; nvidia-smi en GPU)",
            "wall_seconds": round(time.perf_counter() - started, 1), **sampled,
        })
    return Path(run_dir)


_PRIME_SCRIPT = """
import sys
from transformers import AutoTokenizer
from labs import data, l71, models
from labs.profiles import get_profile
profile = get_profile(sys.argv[1])
start = models.model_path(profile)
print(l71.base_model_for(profile, start, data.course_splits(profile, AutoTokenizer.from_pretrained(start)))[0])
"""


def prime_format_pass_in_subprocess(profile_name: str, show=print) -> None:
    """Make sure the cached format pass exists before either lab runs (in a child process).

    Whichever lab ran first would otherwise pay for the supervised pass inside its own process, and its
    peak memory would include it: the comparison would measure the format pass, not the two recipes.
    """
    if not get_profile(profile_name).format_pass:
        return
    show("[formato] Compruebo (en otro proceso) que el pase de formato ya está en caché para los dos labs.")
    done = subprocess.run([sys.executable, "-c", _PRIME_SCRIPT, profile_name], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("El pase de formato falló:\n" + "\n".join(done.stderr.splitlines()[-20:]))


def ensure_l71_run(profile_name: str, show=print) -> Path:
    """L7.1's finished run folder for this profile, running L7.1 in a child process if there is none."""
    found = find_lab_run("L7.1", profile_name)
    if found is not None:
        show(f"[l71] Uso el run de L7.1 que ya existe: {found}")
        return found
    prime_format_pass_in_subprocess(profile_name, show)
    return run_l71_in_subprocess(profile_name, show)


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if isinstance(v, (int, float)))
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def lab_record(run_root: str | os.PathLike) -> dict:
    """One row of the comparison, read from a run folder only."""
    folder = RunFolder(run_root)
    run = read_json(folder.path(RUN_JSON))
    metrics = folder.metrics()
    rewards = [r["reward"] for r in metrics if isinstance(r.get("reward"), (int, float))]
    tail = rewards[-max(1, len(rewards) // 4):] if rewards else []
    try:
        summary = read_json(folder.path("eval/summary.json"))
    except (FileNotFoundError, json.JSONDecodeError):
        summary = {}
    res = read_resources(folder.root) or {}
    gpu = res.get("gpu") or {}
    on_gpu = not (run.get("profile") or {}).get("use_cpu", True)
    if on_gpu:
        memory, memory_kind = gpu.get("device_used_by_run_gib"), "GPU (pico de memoria ocupada)"
    else:
        memory, memory_kind = res.get("peak_rss_gib"), "RAM (pico de memoria residente)"
    fraction = run.get("vllm_memory_fraction") or {}
    return {
        "lab": run.get("lab"),
        "run": folder.root.name,
        "backend": run.get("backend_used") or ("trl + LoRA de PEFT" if (run.get("profile") or {}).get("use_lora")
                                               else "trl (todos los pesos)"),
        "model": run.get("base_label") or run.get("base_model"),
        "memory_gib": memory,
        "memory_kind": memory_kind,
        "memory_source": res.get("measured_by"),
        "vllm_fraction": fraction.get("in_force", (run.get("profile") or {}).get("vllm_gpu_memory_utilization")),
        "steps": len(metrics),
        "seconds_per_step": _median([r.get("step_time") for r in metrics]),
        "reward_final": sum(tail) / len(tail) if tail else None,
        "reward_steps": [r.get("step") for r in metrics if isinstance(r.get("reward"), (int, float))],
        "rewards": rewards,
        "base_accuracy": summary.get("base_accuracy"),
        "trained_accuracy": summary.get("trained_accuracy"),
        "n_eval": summary.get("n"),
    }


def comparison_table(records: list[dict]):
    """The side-by-side table (a pandas DataFrame, Spanish headings)."""
    import pandas as pd

    rows = {
        "Back-end": [r["backend"] for r in records],
        "Modelo": [r["model"] for r in records],
        "Memoria (GiB)": [r["memory_gib"] for r in records],
        "Qué memoria": [r["memory_kind"] if r["memory_gib"] is not None else "sin registrar" for r in records],
        "Fracción vLLM": [r["vllm_fraction"] for r in records],
        "Pasos": [r["steps"] for r in records],
        "s/paso (mediana)": [r["seconds_per_step"] for r in records],
        "Recompensa final": [r["reward_final"] for r in records],
        "Exactitud base": [r["base_accuracy"] for r in records],
        "Exactitud entrenado": [r["trained_accuracy"] for r in records],
        "Problemas": [r["n_eval"] for r in records],
    }
    return pd.DataFrame(rows, index=[r["lab"] for r in records])


def describe_comparison_es(records: list[dict]) -> list[str]:
    """The comparison in Spanish sentences, from the records' own numbers (first record: the reference)."""
    ref, other = records[0], records[-1]
    lines = []
    if ref["memory_gib"] is not None and other["memory_gib"] is not None:
        ratio = other["memory_gib"] / ref["memory_gib"] if ref["memory_gib"] else float("nan")
        lines.append(f"Memoria: {ref['lab']} {ref['memory_gib']:.2f} GiB, {other['lab']} {other['memory_gib']:.2f} GiB "
                     f"({ratio:.2f} veces; {other['memory_kind']}).")
    else:
        missing = [r["lab"] for r in (ref, other) if r["memory_gib"] is None]
        lines.append(f"Memoria: sin registrar para {', '.join(missing)} (su carpeta de run no tiene {RESOURCES_JSON}).")
    if ref["seconds_per_step"] and other["seconds_per_step"]:
        lines.append(f"Segundos por paso (mediana): {ref['lab']} {ref['seconds_per_step']:.1f}, {other['lab']} "
                     f"{other['seconds_per_step']:.1f} ({other['seconds_per_step'] / ref['seconds_per_step']:.2f} veces).")
    for r in (ref, other):
        if r["base_accuracy"] is not None and r["trained_accuracy"] is not None:
            lines.append(f"{r['lab']}: exactitud {r['base_accuracy']:.1%} antes y {r['trained_accuracy']:.1%} después "
                         f"({r['n_eval']} problemas); recompensa final {r['reward_final']:.3g}.")
    if ref["n_eval"] is not None and ref["n_eval"] < 100:
        lines.append(f"Con {ref['n_eval']} problemas y {ref['steps']} pasos estas diferencias de exactitud son ruido: "
                     "el perfil sirve para comprobar que todo funciona, no para medir. Las cifras que importan salen "
                     "del perfil rtx5090.")
    return lines


def plot_comparison(records: list[dict], path: str | os.PathLike | None = None):
    """Four panels: memory, seconds per step, reward per step, accuracy base/trained."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7.5))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.9, hspace=0.4, wspace=0.25)
    (ax_mem, ax_time), (ax_reward, ax_acc) = fig.subplots(2, 2)
    labels = [r["lab"] for r in records]
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"][: len(records)]
    for ax, key, title in ((ax_mem, "memory_gib", "Memoria pico (GiB)"), (ax_time, "seconds_per_step",
                                                                            "Segundos por paso (mediana)")):
        values = [r[key] if r[key] is not None else 0.0 for r in records]
        bars = ax.bar(labels, values, color=colors)
        for bar, r in zip(bars, records):
            text = "sin registrar" if r[key] is None else f"{r[key]:.3g}"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=9)
        ax.set_title(title, fontsize=10)
    for r, color in zip(records, colors):
        if r["rewards"]:
            ax_reward.plot(r["reward_steps"], r["rewards"], marker="o", color=color, label=r["lab"])
    ax_reward.set_title("Recompensa total por paso", fontsize=10)
    ax_reward.set_xlabel("paso")
    ax_reward.legend(fontsize=8)
    width = 0.38
    for i, r in enumerate(records):
        base, trained = r["base_accuracy"] or 0.0, r["trained_accuracy"] or 0.0
        ax_acc.bar([i - width / 2], [base], width, color=colors[i], alpha=0.45, label=f"{r['lab']} base")
        ax_acc.bar([i + width / 2], [trained], width, color=colors[i], label=f"{r['lab']} entrenado")
    ax_acc.set_xticks(range(len(records)), labels)
    ax_acc.set_title("Exactitud en el holdout (base / entrenado)", fontsize=10)
    ax_acc.legend(fontsize=8)
    fig.suptitle("L7.1 (TRL + vLLM colocate) frente a L7.2 (" + ", ".join(r["backend"] for r in records[1:]) + ")")
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs l72", description=__doc__.split("\n\n")[0])
    l71.add_run_arguments(parser)
    args = parser.parse_args(argv)
    try:
        profile = get_profile(args.profile)
        overrides = l71.overrides_from_cli(args.set, profile)
        path = run_lab(profile, run_name=args.run_name, fresh=args.fresh, **overrides)
    except (ValueError, models.ModelNotAvailable, ImportOrderError, BackendUnavailable) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except (recipe.RunFailed, UnslothLoadFailed, LoraNotLoaded) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        if type(exc).__name__ == "EnvironmentNotReady":
            print(str(exc), file=sys.stderr)
            return 2
        raise
    run = read_json(Path(path) / RUN_JSON)
    print(json.dumps({"run_dir": str(path), "backend_used": run.get("backend_used")}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
