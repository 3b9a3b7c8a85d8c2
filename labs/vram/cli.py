"""``python -m labs vram``: print the VRAM plan of a profile before anything is loaded."""

from __future__ import annotations

from labs.vram import multi
from labs.vram.planner import plan


def main(argv: list[str] | None = None) -> int:
    """Print the plan of a profile; exit status 1 when it does not fit, so scripts can stop early."""
    import argparse

    from labs.core.profiles import PROFILES, get_profile, parse_override

    parser = argparse.ArgumentParser(prog="python -m labs vram",
                                     description="Plan de VRAM antes de cargar nada (estimación).")
    parser.add_argument("--profile", help=f"perfil ({', '.join(PROFILES)}); por defecto, el que usarían los labs")
    parser.add_argument("--path", choices=["trl", "unsloth", "ambas"], default="ambas", help="ruta del lab L7")
    parser.add_argument("--card-gib", type=float,
                        help="memoria de la tarjeta en GiB (por defecto: la de la GPU, o 32)")
    parser.add_argument("--lora", action="store_true", help="ruta TRL con LoRA en vez de todos los pesos")
    parser.add_argument("--no-standby", action="store_true", help="ruta Unsloth sin Standby")
    parser.add_argument("--set", action="append", default=[], metavar="CLAVE=VALOR",
                        help="cambia un ajuste del perfil (p. ej. --set per_device_train_batch_size=4)")
    parser.add_argument("--gpus", type=int, default=1, help="tarjetas (accelerate launch --num_processes)")
    parser.add_argument("--layout", choices=list(multi.LAYOUTS), default="colocate",
                        help="colocate: vLLM en cada tarjeta; server: una tarjeta solo para vLLM (trl vllm-serve)")
    parser.add_argument("--zero", type=int, default=0, help="etapa de DeepSpeed ZeRO (1, 2, 3; 0 = DDP)")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    if args.set:
        profile = profile.replace(**dict(parse_override(item, profile) for item in args.set))
    if args.gpus > 1 or args.layout != "colocate" or args.zero:
        return _multi(profile, args)
    paths = ["trl", "unsloth"] if args.path == "ambas" else [args.path]
    lora = True if args.lora else None
    plans = [plan(profile, p, args.card_gib, lora=lora, standby=not args.no_standby) for p in paths]
    print("\n\n".join(p.render_es() for p in plans))
    return 0 if all(p.fits for p in plans) else 1


def _multi(profile, args) -> int:
    """The plan on several cards (TRL path only: L7.2's Unsloth Standby runs on one card)."""
    try:
        plans = multi.plan_gpus(profile, args.gpus, args.layout, args.zero, args.card_gib,
                                lora=True if args.lora else None)
    except multi.LayoutError as exc:
        print(f"ERROR: {exc}")
        return 2
    if args.path != "trl":
        print("Nota: con varias tarjetas solo se planifica la ruta TRL (L7.1); L7.2 (Unsloth con Standby) "
              "corre en una sola GPU.\n")
    print(multi.render_es(plans))
    return 0 if all(p.fits for p in plans) else 1
