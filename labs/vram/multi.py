"""The VRAM plan on several cards: TRL's two layouts, with or without DeepSpeed ZeRO.

* ``colocate`` on N cards (``accelerate launch --num_processes N``): every card runs one training process
  and its own vLLM engine, exactly as on one card. Plain DDP (``zero=0``) replicates everything, so each
  card needs what one card needs; what grows is the work per step (the generation batch is
  ``per_device_train_batch_size x N x gradient_accumulation_steps``).
* ``server``: one card runs ``trl vllm-serve`` (weights, activations, KV cache in
  ``--gpu_memory_utilization`` of that card, 0.9 by TRL's default) and the other N-1 cards train, with no
  vLLM copy on them.

DeepSpeed ZeRO splits the training state over the training cards, with the arithmetic of the ZeRO paper
(Rajbhandari et al., 2020, mixed-precision Adam): bf16 weights 2 B and bf16 gradients 2 B per parameter,
and 12 B per parameter of optimizer state (an fp32 master copy and Adam's two fp32 moments). Stage 1 splits
the optimizer state, stage 2 also the gradients, stage 3 also the weights (and TRL's reference model,
which it prepares with the same DeepSpeed config). vLLM always keeps a whole bf16 copy: TRL gathers the
weights layer by layer to push them into it.
"""

from __future__ import annotations

from labs.vram import planner
from labs.vram.planner import Line, VramPlan, _es, _int_es, _num_es
from labs.vram.spec import GIB, card_memory_gib, model_spec, weights_bytes

LAYOUTS = ("colocate", "server")
SERVER_UTILIZATION = 0.9  # `trl vllm-serve --gpu_memory_utilization` default
ZERO_OPTIMIZER_BYTES = 12  # fp32 master weights + two fp32 Adam moments (ZeRO paper, K = 12)
_TRAINED = "Pesos del modelo que se entrena (bf16)"
_GRADS = "Gradientes (bf16)"
_ADAMW = "AdamW: 2 estados (dtype del parámetro, bf16)"
_REFERENCE = "Modelo de referencia (beta ≠ 0, sin LoRA)"


class LayoutError(ValueError):
    """A layout that cannot exist (Spanish message)."""


def training_processes(gpus: int, layout: str) -> int:
    return gpus - 1 if layout == "server" else gpus


def check_layout(gpus: int, layout: str, zero: int) -> None:
    if layout not in LAYOUTS:
        raise LayoutError(f"layout='{layout}': los esquemas son {', '.join(LAYOUTS)}.")
    if gpus < 1:
        raise LayoutError(f"--gpus {gpus}: hace falta al menos una tarjeta.")
    if layout == "server" and gpus < 2:
        raise LayoutError("El modo servidor necesita al menos 2 tarjetas: una para vLLM y otra para entrenar.")
    if zero not in (0, 1, 2, 3):
        raise LayoutError(f"--zero {zero}: las etapas de DeepSpeed ZeRO son 1, 2 y 3 (0 = sin DeepSpeed, DDP).")


def plan_gpus(profile, gpus: int, layout: str = "colocate", zero: int = 0, card_gib: float | None = None,
              lora: bool | None = None, server_utilization: float = SERVER_UTILIZATION,
              suggest: bool = True) -> list[VramPlan]:
    """One plan per kind of card: [training card] for colocate, [training card, vLLM card] for server."""
    check_layout(gpus, layout, zero)
    card = float(card_gib) if card_gib is not None else card_memory_gib()
    base = planner.plan(profile, "trl", card, lora=lora, suggest=False)
    n = training_processes(gpus, layout)
    lines = _shard(base, profile, n, zero)
    if layout == "server":
        lines = [line for line in lines if not line.name.startswith("vLLM:")]
    who = "cada una de las" if n > 1 else "la"
    route = (f"TRL + vLLM colocate en {gpus} tarjetas" if layout == "colocate"
             else f"TRL + servidor vLLM: {n} tarjeta(s) entrenan, 1 genera")
    route += f", {'DeepSpeed ZeRO-' + str(zero) if zero else 'DDP'} — {who} {n} tarjeta(s) de entrenamiento"
    training = VramPlan(profile.name, "trl", base.model, base.params, card, lines, route_es=route)
    gbs = profile.per_device_train_batch_size * n * profile.gradient_accumulation_steps
    training.notes.append(
        f"Lote de generación por paso: {profile.per_device_train_batch_size} × {n} procesos × "
        f"{profile.gradient_accumulation_steps} = {gbs} completions ({gbs // profile.num_generations} prompts "
        f"de G={profile.num_generations}); debe ser múltiplo de G."
    )
    if layout == "colocate":
        training.notes += [n for n in base.notes if n.startswith("La caché KV")]
        training.problems += base.problems
        if zero == 3:
            training.notes.append("Con ZeRO-3, TRL reúne los pesos capa a capa para pasarlos a vLLM: pico breve "
                                  "de una capa completa además de lo anterior.")
    plans = [training]
    if layout == "server":
        plans.append(_server_card(profile, card, server_utilization, gbs, training.model))
    if suggest and not all(p.fits for p in plans):
        training.knobs = _knobs(profile, gpus, layout, zero, card, lora)
    return plans


def _shard(base: VramPlan, profile, n: int, zero: int) -> list[Line]:
    """The single-card lines with the training state split over ``n`` cards as ZeRO ``zero`` does."""
    p = base.params
    out = []
    for line in base.lines:
        if zero and line.name == _ADAMW:  # DeepSpeed keeps fp32 master weights and fp32 moments
            out.append(Line(f"Optimizador de DeepSpeed (fp32: copia maestra + 2 momentos){_part(n)}",
                            p * ZERO_OPTIMIZER_BYTES / n / GIB, f"{_int_es(p)} × {ZERO_OPTIMIZER_BYTES} B{_over(n)}"))
        elif zero >= 2 and line.name == _GRADS:
            out.append(Line(line.name + _part(n), line.gib / n, f"{line.formula}{_over(n)}"))
        elif zero >= 3 and line.name in (_TRAINED, _REFERENCE):
            out.append(Line(line.name + _part(n), line.gib / n, f"{line.formula}{_over(n)}"))
        else:
            out.append(line)
    return out


def _part(n: int) -> str:
    return f", 1/{n}" if n > 1 else ""


def _over(n: int) -> str:
    return f" / {n} tarjetas" if n > 1 else ""


def _server_card(profile, card: float, util: float, completions: int, model: str) -> VramPlan:
    """The card that generates. ``model``: the one the training cards train and vLLM serves (the training plan's
    name: ``model_spec``'s is the architecture's, the instruct model's on the base route, issue 52)."""
    spec = model_spec(profile.model)
    w = weights_bytes(spec, four_bit=False) / GIB
    kv = util * card - w - planner.VLLM_OVERHEAD_GIB
    lines = [
        Line("vLLM: pesos (bf16)", w, f"{_int_es(spec.params)} parámetros × 2 B"),
        Line("vLLM: activaciones y CUDA graphs", planner.VLLM_OVERHEAD_GIB, "valor fijo (logs publicados de vLLM)"),
        Line("vLLM: caché KV (lo que queda)", max(kv, 0.0),
             f"{_num_es(util)} (trl vllm-serve --gpu_memory_utilization) × {_es(card)} GiB − pesos − activaciones"),
    ]
    result = VramPlan(profile.name, "trl", model, spec.params, card, lines,
                      route_es="servidor vLLM (trl vllm-serve) — la tarjeta que genera")
    planner._check_kv(result, spec, kv, profile.vllm_max_model_length, completions, "--gpu_memory_utilization")
    remainder = (1 - util) * card
    result.notes.append(f"El resto de la tarjeta ({_es(remainder)} GiB) queda libre: vLLM reserva {_num_es(util)} de ella.")
    return result


def _knobs(profile, gpus: int, layout: str, zero: int, card: float, lora) -> list[str]:
    def outcome(**changes) -> str:
        options = dict(gpus=gpus, layout=layout, zero=zero, card_gib=card, lora=lora, suggest=False)
        options.update(changes)
        plans = plan_gpus(profile, **options)  # each variant below is a valid layout whenever the asked one is
        peak = max(p.total_gib for p in plans)
        return f"{_es(peak)} GiB en la tarjeta más cargada, {'cabe' if all(p.fits for p in plans) else 'sigue sin caber'}"

    out = []
    if zero < 3:
        out.append(f"DeepSpeed ZeRO-3 (configs/accelerate/zero3.yaml): {outcome(zero=3)}")
    out.append(f"el doble de tarjetas ({2 * gpus}): {outcome(gpus=2 * gpus)}")
    if layout == "colocate" and gpus >= 2:
        out.append(f"modo servidor (1 tarjeta para vLLM): {outcome(layout='server')}")
    if not (lora if lora is not None else profile.use_lora):
        out.append(f"LoRA (r={profile.lora_r}) en vez de ajustar todos los pesos: {outcome(lora=True)}")
    return out


def render_es(plans: list[VramPlan]) -> str:
    return "\n\n".join(p.render_es() for p in plans)


def summary_es(plans: list[VramPlan]) -> str:
    """One line per kind of card: what it holds, its total against the card, the margin and the verdict (the
    notebook shows ``render_es``'s detail folded under it)."""
    return "\n".join(f"{p.route_es}: {_es(p.total_gib)} de {_es(p.card_gib)} GiB, margen {_es(p.margin_gib)} GiB: "
                     f"{'cabe' if p.fits else 'NO cabe'}" for p in plans)



# The layouts the L7.3 notebook compares: (GPUs, layout, ZeRO stage, LoRA), the course's order of cost.
COMPARED = ((1, "colocate", 0, True), (2, "colocate", 0, True), (4, "server", 0, True),
            (2, "colocate", 0, False), (8, "colocate", 3, False), (4, "server", 3, False))


def compare(profile, card_gib: float, layouts=COMPARED) -> list[dict]:
    """One row per layout: the most loaded card's estimate, whether every card fits, prompts per step."""
    rows = []
    for gpus, layout, zero, lora in layouts:
        plans = plan_gpus(profile, gpus, layout, zero, card_gib, lora=lora, suggest=False)
        n = training_processes(gpus, layout)
        gbs = profile.per_device_train_batch_size * n * profile.gradient_accumulation_steps
        rows.append({
            "GPUs": gpus, "esquema": layout, "ZeRO": zero or "-", "ajuste": "LoRA" if lora else "completo",
            "GiB en la tarjeta más cargada": round(max(p.total_gib for p in plans), 1),
            "cabe": "sí" if all(p.fits for p in plans) else "no",
            "prompts por paso": gbs // profile.num_generations,
        })
    return rows


def compare_cards(profile, cards=(32.0, 80.0), layouts=COMPARED) -> list[dict]:
    """``compare`` on each card size, one row per layout with a column pair per card (one table, not one a card)."""
    tables = [compare(profile, card, layouts) for card in cards]
    rows = []
    for per_card in zip(*tables):
        row = {k: v for k, v in per_card[0].items() if k not in ("GiB en la tarjeta más cargada", "cabe")}
        for card, r in zip(cards, per_card):
            row[f"GiB ({card:g} GiB)"] = r["GiB en la tarjeta más cargada"]
            row[f"cabe en {card:g} GiB"] = r["cabe"]
        rows.append(row)
    return rows
