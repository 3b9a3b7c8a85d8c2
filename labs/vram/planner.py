"""The VRAM plan of a profile on one of the two paths of lesson L7, with the knobs to turn when it
does not fit.

* ``trl``: TRL ``GRPOTrainer`` with vLLM in colocate mode. The training process holds the model in
  bf16, its gradients and AdamW states (full fine-tune: all parameters, in the parameter dtype, since
  ``torch.optim.AdamW`` allocates its states like the parameter; LoRA: the adapters only, in float32),
  a frozen reference copy when ``beta != 0`` and there is no LoRA (with LoRA, TRL disables the adapters
  instead), the activations of one micro-batch and its logits. vLLM reserves
  ``vllm_gpu_memory_utilization`` of the whole card for itself: its own bf16 copy of the weights, its
  activations and CUDA graphs, and the KV cache in whatever is left.
* ``unsloth``: one copy of the weights (4-bit NF4 or bf16) shared by vLLM and training. With Standby,
  vLLM's KV cache is freed while the training step runs, so the peak is the larger of the two phases,
  not their sum; Unsloth then picks the vLLM fraction itself (0.855 of a 32 GB card: the rule of the
  pinned unsloth_zoo, which ``labs.l72.memory.standby_target_fraction`` reproduces and its tests check). Unsloth's gradient checkpointing keeps one layer's activations on the GPU
  (the layer boundaries go to host RAM) and its GRPO loss computes logits one sequence at a time.

``per_device_train_batch_size`` counts completions in TRL 1.x, so it (not ``num_generations``) sets the
size of a training micro-batch; ``num_generations`` only has to divide the generation batch.

Items that are fixed guesses rather than arithmetic say so in their text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labs.vram.spec import (
    FP32, GIB, NF4_BYTES, ModelSpec, card_memory_gib, checkpoint_bytes, kv_cache_bytes, layer_activation_bytes,
    logits_bytes, model_spec, weights_bytes,
)

CUDA_CONTEXT_GIB = 1.0  # fixed guess: CUDA context, kernels, allocator fragmentation
# vLLM's own activations, non-torch memory and CUDA graphs: 0.88 + 0.03 + 0.34 GiB for Qwen3-4B in
# Unsloth's published Qwen3_(4B)-GRPO notebook log (T4); 0.74 + 0.03 + 0.59 GiB for Llama-3.1-8B.
VLLM_OVERHEAD_GIB = 1.25
STANDBY_UTILIZATION = 0.855  # what Unsloth picks under Standby on a 32 GB card (labs.l72.memory: 0.9 x 0.95)
KV_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class Line:
    name: str  # Spanish, shown to the student
    gib: float
    formula: str
    phase: str = "común"  # "común", "generación" or "entrenamiento" (only the Unsloth path has phases)


@dataclass
class VramPlan:
    profile: str
    path: str
    model: str
    params: int
    card_gib: float
    lines: list[Line]
    standby: bool = False
    problems: list[str] = field(default_factory=list)  # Spanish; reasons other than the total
    knobs: list[str] = field(default_factory=list)  # Spanish; filled in when it does not fit
    notes: list[str] = field(default_factory=list)
    route_es: str = ""  # set by labs.vram.multi: which card of a multi-GPU layout this plan is

    def phase_gib(self, phase: str) -> float:
        return sum(line.gib for line in self.lines if line.phase == phase)

    @property
    def total_gib(self) -> float:
        common = self.phase_gib("común")
        gen, train = self.phase_gib("generación"), self.phase_gib("entrenamiento")
        return common + (max(gen, train) if self.standby else gen + train)

    @property
    def margin_gib(self) -> float:
        return self.card_gib - self.total_gib

    @property
    def fits(self) -> bool:
        return self.margin_gib >= 0 and not self.problems

    def line(self, name: str) -> Line:
        for line in self.lines:
            if line.name == name:
                return line
        raise KeyError(name)

    def render_es(self) -> str:
        """The plan for the student: every line with its arithmetic, the total, the margin, the verdict."""
        route = self.route_es or ("TRL + vLLM colocate" if self.path == "trl" else "Unsloth")
        if self.path == "unsloth" and self.standby:
            route += " con Standby"
        out = [
            f"Plan de VRAM — perfil {self.profile}, ruta {route}",
            f"Modelo: {self.model} ({_es(self.params / 1e9)} mil millones de parámetros)",
            "",
        ]
        width = max(len(line.name) for line in self.lines) + 2
        phases = ["común"] if self.path == "trl" else ["común", "generación", "entrenamiento"]
        for phase in phases:
            if len(phases) > 1:
                out.append(f"[{phase}]")
            for line in self.lines:
                if line.phase == phase:
                    out.append(f"  {line.name:<{width}}{_es(line.gib):>8} GiB   = {line.formula}")
        out.append("")
        common, gen, train = (self.phase_gib(p) for p in ("común", "generación", "entrenamiento"))
        if self.path == "trl":
            out.append("  " + " + ".join(_es(line.gib) for line in self.lines))
        elif self.standby:
            out.append("  Standby libera la caché KV mientras entrena: pico = común + máx(generación, "
                       f"entrenamiento) = {_es(common)} + máx({_es(gen)}; {_es(train)})")
        else:
            out.append("  Sin Standby todo convive: común + generación + entrenamiento = "
                       f"{_es(common)} + {_es(gen)} + {_es(train)}")
        for label, value in (("Total estimado", self.total_gib), ("Memoria de la tarjeta", self.card_gib),
                             ("Margen", self.margin_gib)):
            out.append(f"  {label:<{width}}{_es(value):>8} GiB")
        out.extend(f"  Nota: {note}" for note in self.notes)
        out.append("")
        if self.fits:
            out.append("Cabe según esta estimación (es una estimación: deja margen para picos y "
                       "fragmentación).")
            return "\n".join(out)
        out.append("AVISO: según esta estimación NO cabe en la tarjeta.")
        out.extend(f"  - {problem}" for problem in self.problems)
        if self.knobs:
            out.append("Ajustes que puedes cambiar (total estimado si cambias solo ese):")
            out.extend(f"  - {knob}" for knob in self.knobs)
        return "\n".join(out)


def _es(x: float) -> str:
    """Two decimals with a decimal comma and a dot for thousands: 1.234,56."""
    return f"{x:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")


def _int_es(n: int) -> str:
    return f"{n:,}".replace(",", ".")


def _num_es(x: float) -> str:
    return f"{x:g}".replace(".", ",")


def plan(profile, path: str = "trl", card_gib: float | None = None, *, model=None, lora: bool | None = None,
         standby: bool = True, utilization: float | None = None, suggest: bool = True) -> VramPlan:
    """The VRAM plan of ``profile`` on the ``trl`` or ``unsloth`` path.

    ``card_gib``: the card's memory (default: read from torch when a GPU is visible, else 32).
    ``model`` overrides the profile's model (a known name, a config dict or a :class:`ModelSpec`).
    ``lora``: the TRL path fine-tunes every weight unless ``lora=True`` (or the profile has
    ``use_lora=True``); the Unsloth path always trains LoRA adapters. ``standby`` applies to the Unsloth
    path only. ``utilization`` overrides vLLM's fraction of the card (default: the profile's
    ``vllm_gpu_memory_utilization``, or Unsloth's own choice under Standby).
    """
    if path not in ("trl", "unsloth"):
        raise ValueError(f"path must be 'trl' or 'unsloth', not {path!r}")
    requested = model if model is not None else (profile.unsloth_model if path == "unsloth" else profile.model)
    spec = model_spec(requested)
    card = float(card_gib) if card_gib is not None else card_memory_gib()
    if path == "trl":
        use_lora = bool(lora if lora is not None else getattr(profile, "use_lora", False))
        util = profile.vllm_gpu_memory_utilization if utilization is None else utilization
        result = _plan_trl(profile, spec, card, use_lora, util)
    else:
        default = STANDBY_UTILIZATION if standby else profile.vllm_gpu_memory_utilization
        util = default if utilization is None else utilization
        chosen_by = "gpu_memory_utilization"
        if standby and utilization is None:
            chosen_by = "elegido por Unsloth con Standby"
        result = _plan_unsloth(profile, spec, card, standby, util, chosen_by)
    if isinstance(requested, str):
        result.model = requested
    if suggest and not result.fits:
        result.knobs = _knobs(profile, path, dict(card_gib=card, model=model, lora=lora, standby=standby,
                                                  utilization=utilization))
    return result


def _sequence_tokens(profile) -> int:
    """Prompt plus completion: the padded length of a training sequence in the worst case."""
    return profile.max_prompt_tokens + profile.max_completion_length


def _activation_lines(spec: ModelSpec, batch: int, seq: int, mode: str, phase: str) -> list[Line]:
    """``mode``: "none" (no checkpointing), "checkpoint" (transformers') or "unsloth" (offloaded)."""
    per = spec.activation_bytes_per_token_layer()
    one_layer = layer_activation_bytes(spec, batch, seq, 1) / GIB
    if mode == "unsloth":
        return [Line("Activaciones (gradient checkpointing de Unsloth)", one_layer,
                     f"{batch} secuencias × {seq} tokens × {_int_es(per)} B/token de una capa "
                     "(los bordes de capa van a la RAM del host)", phase)]
    if mode == "checkpoint":
        return [
            Line("Activaciones: bordes de capa guardados", checkpoint_bytes(spec, batch, seq) / GIB,
                 f"{batch} × {seq} tokens × {spec.hidden} (h) × {spec.n_layers} capas × 2 B", phase),
            Line("Activaciones: una capa recalculada", one_layer,
                 f"{batch} × {seq} tokens × {_int_es(per)} B/token·capa", phase),
        ]
    return [Line("Activaciones (sin gradient checkpointing)", one_layer * spec.n_layers,
                 f"{batch} × {seq} tokens × {spec.n_layers} capas × {_int_es(per)} B/token·capa", phase)]


def _lora_lines(spec: ModelSpec, profile) -> list[Line]:
    n = spec.lora_params(profile.lora_r, profile.lora_targets)
    text = f"{_int_es(n)} parámetros LoRA (r={profile.lora_r}, {len(profile.lora_targets)} proyecciones)"
    return [
        Line("Adaptadores LoRA (fp32)", n * FP32 / GIB, f"{text} × 4 B"),
        Line("Gradientes LoRA (fp32)", n * FP32 / GIB, f"{text} × 4 B"),
        Line("AdamW: 2 estados LoRA (fp32)", 2 * n * FP32 / GIB, f"{text} × 2 × 4 B"),
    ]


def _logits_line(spec: ModelSpec, sequences: int, completion: int, name: str, why: str, phase: str) -> Line:
    return Line(name, logits_bytes(sequences, completion, spec.vocab) / GIB,
                f"{sequences} × {completion} tokens de respuesta × {_int_es(spec.vocab)} (vocabulario) × 4 B"
                f" ({why})", phase)


def _plan_trl(profile, spec: ModelSpec, card: float, use_lora: bool, util: float) -> VramPlan:
    batch, seq = profile.per_device_train_batch_size, _sequence_tokens(profile)
    p, w = spec.params, weights_bytes(spec, four_bit=False) / GIB
    lines = [Line("Pesos del modelo que se entrena (bf16)", w, f"{_int_es(p)} parámetros × 2 B")]
    if use_lora:
        lines += _lora_lines(spec, profile)
    else:
        lines += [
            Line("Gradientes (bf16)", w, f"{_int_es(p)} × 2 B"),
            Line("AdamW: 2 estados (dtype del parámetro, bf16)", 2 * w, f"{_int_es(p)} × 2 × 2 B"),
        ]
        if profile.beta != 0:
            lines.append(Line("Modelo de referencia (beta ≠ 0, sin LoRA)", w, f"{_int_es(p)} × 2 B"))
    mode = "checkpoint" if profile.gradient_checkpointing else "none"
    lines += _activation_lines(spec, batch, seq, mode, "común")
    lines.append(_logits_line(spec, batch, profile.max_completion_length + 1, "Logits (float32)",
                              "TRL solo calcula los de la respuesta", "común"))
    lines.append(Line("Contexto CUDA y fragmentación", CUDA_CONTEXT_GIB, "valor fijo aproximado"))
    kv = util * card - w - VLLM_OVERHEAD_GIB
    lines += [
        Line("vLLM: su copia de los pesos (bf16)", w, f"{_int_es(p)} × 2 B"),
        Line("vLLM: activaciones y CUDA graphs", VLLM_OVERHEAD_GIB, "valor fijo (logs publicados de vLLM)"),
        Line("vLLM: caché KV (lo que queda)", max(kv, 0.0),
             f"{_num_es(util)} (vllm_gpu_memory_utilization) × {_es(card)} GiB − pesos − "
             "activaciones de vLLM"),
    ]
    result = VramPlan(profile.name, "trl", spec.name, p, card, lines)
    _check_kv(result, spec, kv, profile.vllm_max_model_length, profile.generation_batch_size,
              "vllm_gpu_memory_utilization")
    return result


def _plan_unsloth(profile, spec: ModelSpec, card: float, standby: bool, util: float,
                  chosen_by: str) -> VramPlan:
    four_bit = profile.load_in_4bit
    batch, seq = profile.per_device_train_batch_size, _sequence_tokens(profile)
    w = weights_bytes(spec, four_bit) / GIB
    if four_bit:
        wtext = (f"{_int_es(spec.linear_params)} pesos lineales × {NF4_BYTES:.4f} B (NF4) + "
                 f"{_int_es(spec.embedding_params + spec.norm_params)} de embeddings y normas × 2 B")
    else:
        wtext = f"{_int_es(spec.params)} parámetros × 2 B"
    lines = [Line(f"Pesos compartidos vLLM/entrenamiento ({'4 bits' if four_bit else 'bf16'})", w, wtext)]
    lines += _lora_lines(spec, profile)
    lines.append(Line("Contexto CUDA y fragmentación", CUDA_CONTEXT_GIB, "valor fijo aproximado"))
    kv = util * card - w - VLLM_OVERHEAD_GIB
    lines += [
        Line("vLLM: activaciones y CUDA graphs", VLLM_OVERHEAD_GIB, "valor fijo (logs publicados de vLLM)",
             "generación"),
        Line("vLLM: caché KV (lo que queda)", max(kv, 0.0),
             f"{_num_es(util)} ({chosen_by}) × {_es(card)} GiB − pesos compartidos − activaciones de vLLM",
             "generación"),
    ]
    lines += _activation_lines(spec, batch, seq, "unsloth", "entrenamiento")
    lines.append(_logits_line(spec, 1, profile.max_completion_length + 1, "Logits (float32, una secuencia)",
                              "la pérdida GRPO de Unsloth va secuencia a secuencia", "entrenamiento"))
    result = VramPlan(profile.name, "unsloth", spec.name, spec.params, card, lines, standby=standby)
    if standby:
        result.notes.append("Con Standby, Unsloth ignora gpu_memory_utilization salvo con "
                            "UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE=1.")
    _check_kv(result, spec, kv, profile.max_seq_length, profile.generation_batch_size, "gpu_memory_utilization")
    return result


def _check_kv(result: VramPlan, spec: ModelSpec, kv_gib: float, max_len: int, completions: int, knob: str):
    """vLLM refuses to start without room for one full-length sequence; otherwise, say how many fit."""
    need = kv_cache_bytes(spec, max_len) / GIB
    if kv_gib < need:
        result.problems.append(
            f"A vLLM no le queda sitio para la caché KV de una sola secuencia de {max_len} tokens "
            f"({_es(max(kv_gib, 0))} GiB libres, hacen falta {_es(need)} GiB): vLLM no arrancará. "
            f"Sube {knob} o baja la longitud máxima."
        )
        return
    tokens = int(kv_gib * GIB // spec.kv_bytes_per_token())
    result.notes.append(
        f"La caché KV guarda unos {_int_es(tokens)} tokens: {tokens // max_len} secuencias de {max_len} a la "
        f"vez (cada paso genera {completions}; si no caben todas, vLLM las hace por tandas, más lento)."
    )


def _knobs(profile, path: str, options: dict) -> list[str]:
    """Each knob that applies, with the total the plan would have if only that knob changed."""

    def outcome(prof=profile, route=path, **changes) -> str:
        other = plan(prof, route, **{**options, **changes, "suggest": False})
        return f"{_es(other.total_gib)} GiB, {'cabe' if other.fits else 'sigue sin caber'}"

    out = []
    b, g = profile.per_device_train_batch_size, profile.num_generations
    if b > 1:
        smaller = profile.replace(per_device_train_batch_size=b // 2)
        gbs = smaller.generation_batch_size
        rule = (f"generation_batch_size {gbs} sigue siendo múltiplo de num_generations={g}" if gbs % g == 0
                else f"ojo: generation_batch_size {gbs} deja de ser múltiplo de num_generations={g}; baja "
                "también num_generations o sube gradient_accumulation_steps")
        out.append(f"per_device_train_batch_size {b} → {b // 2} (cuenta completions; {rule}): "
                   f"{outcome(smaller)}")
    c = profile.max_completion_length
    if c > 64:
        shorter = profile.replace(max_completion_length=c // 2)
        out.append(f"max_completion_length {c} → {c // 2}: {outcome(shorter)}")
    standby = options["standby"]
    if path == "trl" or not standby:
        u = options["utilization"] or profile.vllm_gpu_memory_utilization
        lower = round(max(0.05, u - 0.1), 2)
        out.append(f"vllm_gpu_memory_utilization {u} → {lower} (menos caché KV: genera más despacio): "
                   f"{outcome(utilization=lower)}")
    if path == "trl":
        lora = options["lora"] if options["lora"] is not None else getattr(profile, "use_lora", False)
        if not lora:
            out.append(f"LoRA (r={profile.lora_r}) en vez de ajustar todos los pesos: {outcome(lora=True)}")
        if not profile.gradient_checkpointing:
            out.append(f"gradient_checkpointing=True: {outcome(profile.replace(gradient_checkpointing=True))}")
        unsloth = profile.replace(load_in_4bit=True)
        out.append("la ruta Unsloth (pesos en 4 bits compartidos con vLLM, Standby): "
                   f"{outcome(unsloth, 'unsloth', lora=None, standby=True, utilization=None)}")
    else:
        if not profile.load_in_4bit:
            out.append(f"load_in_4bit=True: {outcome(profile.replace(load_in_4bit=True))}")
        if not standby:
            out.append("Standby (UNSLOTH_VLLM_STANDBY=1 antes de importar unsloth): "
                       f"{outcome(standby=True, utilization=None)}")
    return out
