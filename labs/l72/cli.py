"""Lab L7.2: the L7.1 recipe with Unsloth and vLLM Standby on Qwen3-4B, or its CPU stand-in.

The command line (``python -m labs l72``; the first paragraph above is its ``--help`` description)::

    python -m labs l72 [--profile cpu|ci|rtx5090|rtx5090-base] [--run-name NAME] [--fresh] [--set key=value ...]

Exit codes: 0 done (the last line is JSON with ``run_dir`` and ``backend_used``), 2 a setting or the
environment is wrong, 1 the run failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from labs.training import models, recipe
from labs.training.options import add_run_arguments, overrides_from_cli, report_failure
from labs.core import distributed
from labs.core.profiles import get_profile
from labs.core.runfolder import RUN_JSON, read_json
from labs.l72.backend import BackendUnavailable
from labs.l72.lab import run_lab
from labs.l72.lora import LoraNotLoaded
from labs.l72.standby import ImportOrderError, UnslothLoadFailed

# Unsloth's GRPO path shares one copy of the weights between vLLM and training on one GPU (Standby);
# its documentation covers multi-GPU through accelerate/DDP for SFT, not this GRPO + fast_inference path.
MULTI_PROCESS_ES = (
    "ERROR: el lab L7.2 (Unsloth con Standby) corre en una sola GPU: Unsloth comparte una copia de los pesos "
    "entre vLLM y el entrenamiento dentro de un proceso, y su camino GRPO con fast_inference no está "
    "documentado para varios procesos. Se lanzaron {n}. Para varias GPUs usa el lab L7.1 "
    "(accelerate launch --num_processes N -m labs l71; ver el cuaderno L7.3), o lanza L7.2 con un proceso."
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs l72", description=(__doc__ or "").split("\n\n")[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    if distributed.is_distributed():
        print(MULTI_PROCESS_ES.format(n=distributed.world_size()), file=sys.stderr)
        return 2
    try:
        profile = get_profile(args.profile)
        overrides = overrides_from_cli(args.set, profile)
        path = run_lab(profile, run_name=args.run_name, fresh=args.fresh, **overrides)
    except Exception as exc:  # noqa: BLE001 - report_failure re-raises what is not a known failure
        code = report_failure(exc, (ValueError, models.ModelNotAvailable, ImportOrderError, BackendUnavailable),
                              (recipe.RunFailed, UnslothLoadFailed, LoraNotLoaded))
        if code is None:
            raise
        return code
    run = read_json(Path(path) / RUN_JSON)
    print(json.dumps({"run_dir": str(path), "backend_used": run.get("backend_used")}, ensure_ascii=False))
    return 0
