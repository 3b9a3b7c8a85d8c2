"""Lesson 7.9's references, each tied to the place in the course that applies it, and checked by running it.

``check_all()`` goes through ``REFERENCES`` in the lesson's order. Each names the course objects that apply it
by dotted path (``"labs.training.recipe.grpo_config_kwargs"``), resolves every one with ``importlib`` (a
renamed object raises ``ReferenceBroken`` naming it, like a broken link in a documentation build), then runs
its check: a function that calls or reads those objects and returns what it found, in Spanish. It sits in
``labs.l72``, the layer that sees both labs, because the references span L7.1 (TRL) and L7.2 (Unsloth); the L7.1
notebook's section 13 shows them.

The URLs of TRL's pages carry the version each stack pins (``requirements.txt`` on a CPU,
``requirements-gpu.txt`` on the 5090; ``labs.doctor.pins``). Nothing here touches the network.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Callable

from labs.core.profiles import PROFILES, Profile, get_profile
from labs.doctor import pins
from labs.l71.trap import lr_tag

R1_COMPLETION = "<think>En mayo vendió 48 / 2 = 24; en total 48 + 24 = 72.</think>\n<answer>72</answer>"


class ReferenceBroken(RuntimeError):
    """A course object a reference points at no longer exists or no longer does what the reference says."""


@dataclass(frozen=True)
class Reference:
    title: str  # as lesson 7.9 names it
    urls: tuple[str, ...]  # "{trl_cpu}" / "{trl_gpu}": the pinned TRL versions
    where_es: str  # the place in the course that applies it
    objects: tuple[str, ...]  # dotted paths of the course objects that apply it
    check: Callable[[dict, Profile], str]  # (resolved objects by name, profile) -> what it found


def resolve(dotted: str):
    """The object at ``dotted`` (module path, then attributes); ``ReferenceBroken`` if any part is gone."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError as exc:
            raise ReferenceBroken(f"{dotted}: {exc}") from exc
        return obj
    raise ReferenceBroken(f"{dotted}: no existe ese módulo")


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise ReferenceBroken(what)


def _rl_guide(o: dict, p: Profile) -> str:
    kwargs = o["labs.l72.gpu.from_pretrained_kwargs"](PROFILES["rtx5090"])
    _require(kwargs.get("fast_inference") is True, "L7.2 ya no carga el modelo con fast_inference=True")
    return (f"FastLanguageModel.from_pretrained({kwargs['model_name']!r}, fast_inference=True, "
            f"load_in_4bit={kwargs['load_in_4bit']}) con unsloth=={_pin('unsloth', 'gpu')}")


def _advanced_notebook(o: dict, p: Profile) -> str:
    base = o["labs.core.profiles.PROFILES"]["rtx5090-base"]
    _require(base.model == "unsloth/Qwen3-4B-Base" and base.format_pass, "rtx5090-base ya no es la receta del cuaderno")
    return (f"rtx5090-base: {base.model}, pase de formato (SFT) con LoRA a {lr_tag(base.format_pass_learning_rate)}, "
            f"GRPO con LoRA r={base.lora_r}, alpha={base.lora_alpha} a {lr_tag(base.learning_rate)}")


def _standby(o: dict, p: Profile) -> str:
    env, plan = o["labs.l72.standby.STANDBY_ENV"], o["labs.vram.planner.plan"]
    _require(env == "UNSLOTH_VLLM_STANDBY", f"L7.2 enciende Standby con {env!r}")
    vram = plan(PROFILES["rtx5090"], "unsloth", 32, standby=True, suggest=False)
    gen, train = vram.phase_gib("generación"), vram.phase_gib("entrenamiento")
    return (f"`{env}=1` antes de importar unsloth; en 32 GB la generación ({gen:.1f} GiB, caché KV incluida) y el "
            f"paso de entrenamiento ({train:.1f} GiB) se turnan: pico de {vram.total_gib:.1f} GiB en lugar de "
            f"{vram.phase_gib('común') + gen + train:.1f}")


def _grpo_trainer(o: dict, p: Profile) -> str:
    import trl

    kwargs = o["labs.training.recipe.grpo_config_kwargs"](p, "/tmp/referencias")
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    unknown = sorted(set(kwargs) - fields)
    _require(not unknown, f"GRPOConfig de trl {trl.__version__} no acepta {unknown}")
    stack = "CPU" if trl.__version__ == _pin("trl", "cpu") else "GPU" if trl.__version__ == _pin("trl", "gpu") else None
    _require(stack is not None, f"trl {trl.__version__} instalado no es ninguna de las versiones fijadas")
    return f"trl {trl.__version__} (la fijada para {stack}): GRPOConfig acepta las {len(kwargs)} claves del perfil {p.name}"


def _colocate(o: dict, p: Profile) -> str:
    kwargs = o["labs.training.recipe.grpo_config_kwargs"](p, "/tmp/referencias")
    _require(kwargs.get("vllm_mode") == "colocate", f"el perfil {p.name} ya no usa vllm_mode='colocate'")
    return (f"perfil {p.name}: use_vllm={kwargs['use_vllm']}, vllm_mode='colocate', "
            f"vllm_gpu_memory_utilization={kwargs['vllm_gpu_memory_utilization']} (en CPU, fracción de la RAM)")


def _r1(o: dict, p: Profile) -> str:
    tags = [o[f"rewards.parsing.{t}"] for t in ("THINK_OPEN", "THINK_CLOSE", "ANSWER_OPEN", "ANSWER_CLOSE")]
    prompt = o["labs.training.data.SYSTEM_PROMPT"]
    _require(all(t in prompt for t in tags), "el prompt de sistema ya no pide <think> y <answer>")
    paid = o["rewards.format_reward"]([R1_COMPLETION])[0]
    _require(paid > 0, "format_reward ya no paga la plantilla de R1")
    return (f"el prompt de sistema pide {' '.join(f'`{t}`' for t in tags)}; format_reward paga {paid:g} a una "
            f"respuesta con la plantilla de R1")


def _willccbb(o: dict, p: Profile) -> str:
    values = o["rewards.REWARD_VALUES"]
    paid = o["rewards.correctness_reward"]([R1_COMPLETION], answer=["72"])[0]
    _require(paid == values["correctness_reward"] == 2.0, "correctness_reward ya no paga 2.0 por la respuesta exacta")
    return (f"correctness_reward paga {paid:g} por el número exacto (como su correctness_reward_func), "
            f"format_reward {values['format_reward']:g}, soft_format_reward {values['soft_format_reward']:g} por etiqueta")


TRL_DOCS = "https://huggingface.co/docs/trl/v{version}/en/{page}"
REFERENCES = (
    Reference("Docs de Unsloth: RL Guide", ("https://unsloth.ai/docs/get-started/reinforcement-learning-rl-guide",),
              "L7.2: Unsloth con vLLM dentro (en la 5090)", ("labs.l72.gpu.from_pretrained_kwargs",), _rl_guide),
    Reference("Unsloth: cuaderno Advanced GRPO (Qwen3 4B)",
              ("https://github.com/unslothai/notebooks/blob/main/nb/Qwen3_(4B)-GRPO.ipynb",),
              "el perfil rtx5090-base (su receta) y el pase de formato", ("labs.core.profiles.PROFILES",
              "labs.training.format_pass.prime"), _advanced_notebook),
    Reference("Docs de Unsloth: Standby",
              ("https://unsloth.ai/docs/get-started/reinforcement-learning-rl-guide/memory-efficient-rl",),
              "L7.2 lo enciende; el plan de VRAM lo cuenta (python -m labs vram)",
              ("labs.l72.standby.STANDBY_ENV", "labs.vram.planner.plan"), _standby),
    Reference("Docs de TRL: GRPOTrainer", ("grpo_trainer",), "L7.1, secciones 2-3, y labs.training.recipe",
              ("labs.training.recipe.grpo_config_kwargs", "labs.training.recipe.make_trainer"), _grpo_trainer),
    Reference("Docs de TRL: integración con vLLM (colocate)", ("vllm_integration",),
              "L7.1, sección 6; en CPU, labs.training.vllm_cpu_shim",
              ("labs.training.recipe.grpo_config_kwargs", "labs.training.vllm_cpu_shim.apply"), _colocate),
    Reference("DeepSeek-R1 (Guo et al., 2025)", ("https://arxiv.org/abs/2501.12948",),
              "las etiquetas `<think>`/`<answer>` del prompt y de las recompensas; L6, sección 10",
              ("labs.training.data.SYSTEM_PROMPT", "rewards.parsing.THINK_OPEN", "rewards.parsing.THINK_CLOSE",
               "rewards.parsing.ANSWER_OPEN", "rewards.parsing.ANSWER_CLOSE", "rewards.format_reward"), _r1),
    Reference("Funciones de recompensa GSM8K de willccbb",
              ("https://gist.github.com/willccbb/4676755236bb08cab5f4e54a0475d6fb",),
              "L7.1, sección 1: las recompensas de la lección 7.2 (rewards/), endurecidas",
              ("rewards.REWARD_VALUES", "rewards.correctness_reward"), _willccbb),
)


def _pin(dist: str, stack: str) -> str:
    version = pins.read_both()[stack]["pins"].get(pins.normalize(dist))
    if version is None:
        raise ReferenceBroken(f"{dist} no está fijado en {pins.CPU_REQUIREMENTS if stack == 'cpu' else pins.GPU_REQUIREMENTS}")
    return version


def urls(ref: Reference) -> list[tuple[str, str]]:
    """``(label, address)`` of each page; a TRL page once per pinned TRL version (the CPU stack's, the 5090's)."""
    if ref.urls[0].startswith("http"):
        return [("enlace", u) for u in ref.urls]
    cpu, gpu = _pin("trl", "cpu"), _pin("trl", "gpu")
    labels = {cpu: f"v{cpu} (CPU)"} if cpu == gpu else {cpu: f"v{cpu} (CPU)", gpu: f"v{gpu} (5090)"}
    return [(label, TRL_DOCS.format(version=v, page=ref.urls[0])) for v, label in labels.items()]


def check_all(profile: Profile | str | None = None) -> list[dict]:
    """Every reference with its URLs, where the course applies it and what its check found (raises if broken)."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    out = []
    for ref in REFERENCES:
        objects = {name: resolve(name) for name in ref.objects}
        out.append({"title": ref.title, "urls": urls(ref), "where": ref.where_es, "objects": list(ref.objects),
                    "found": ref.check(objects, profile)})
    return out


def markdown_es(rows: list[dict]) -> str:
    lines = ["| referencia | dónde la aplica el curso | comprobado ahora |", "|---|---|---|"]
    for row in rows:
        links = " · ".join(f"[{label}]({url})" for label, url in row["urls"])
        names = ", ".join(f"`{n}`" for n in row["objects"])
        lines.append(f"| {row['title']} ({links}) | {row['where']}: {names} | {row['found']} |")
    return "\n".join(lines)
