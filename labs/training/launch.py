"""The commands that run lab L7.1 on several GPUs (and on two CPU processes, as CI does).

Three layouts, all ``GRPOTrainer`` under ``accelerate launch`` (one training process per GPU):

* ``colocate``: every GPU trains and has its own vLLM engine (TRL's default ``vllm_mode="colocate"``;
  each engine is built with ``distributed_executor_backend="external_launcher"``).
* ``server``: the last GPU runs ``trl vllm-serve`` and only generates; the others train and send it
  prompts over HTTP. After each optimizer step the main process pushes the weights to the server
  through vLLM's NCCL weight-transfer engine (``trl vllm-serve`` starts ``vllm serve`` with
  ``--weight-transfer-config '{"backend": "nccl"}'``), so this layout needs CUDA GPUs.
* ``zero3``: like ``colocate`` with DeepSpeed ZeRO-3 splitting the training state over the GPUs; the
  layout for a full fine-tune of the 4B model (``--set use_lora=false``).

Each function returns the shell lines, computed from the profile (model, context length) so that what
the notebook prints is what runs. ``labs.vram.multi`` gives the memory plan of each layout.
"""

from __future__ import annotations

import shlex

from labs.core.profiles import Profile

CONFIGS = "configs/accelerate"
SERVER_UTILIZATION = 0.9  # `trl vllm-serve --gpu_memory_utilization` default: the card is vLLM's alone


def _lab(profile: Profile, sets: list[str]) -> str:
    words = ["-m", "labs", "l71", "--profile", profile.name]
    for item in sets:
        words += ["--set", item]
    return shlex.join(words)


def _devices(ids) -> str:
    return ",".join(str(i) for i in ids)


def colocate(profile: Profile, gpus: int, sets=()) -> list[str]:
    """``gpus`` training processes, each with its own colocated vLLM engine."""
    return [f"accelerate launch --config_file {CONFIGS}/multi_gpu.yaml --num_processes {gpus} "
            + _lab(profile, list(sets))]


def zero3(profile: Profile, gpus: int, sets=("use_lora=false",)) -> list[str]:
    """A full fine-tune with DeepSpeed ZeRO-3 (``pip install deepspeed`` first)."""
    return [f"accelerate launch --config_file {CONFIGS}/zero3.yaml --num_processes {gpus} "
            + _lab(profile, list(sets))]


def serve_arguments(profile: Profile, utilization: float = SERVER_UTILIZATION) -> list[str]:
    """The ``trl vllm-serve`` arguments (TRL's ``ScriptArguments`` names) for the profile's model."""
    return ["--model", profile.model, "--gpu_memory_utilization", f"{utilization:g}",
            "--max_model_len", str(profile.vllm_max_model_length), "--port", str(profile.vllm_server_port)]


def server(profile: Profile, gpus: int, sets=(), utilization: float = SERVER_UTILIZATION) -> list[str]:
    """Two terminals: the vLLM server on the last GPU, then ``gpus - 1`` training processes."""
    if gpus < 2:
        raise ValueError("El modo servidor necesita al menos 2 GPUs: una para vLLM y otra para entrenar.")
    trainers = gpus - 1
    sets = ["vllm_mode=server", *sets]
    if profile.vllm_server_host not in ("0.0.0.0", "localhost", "127.0.0.1"):
        sets.append(f"vllm_server_host={profile.vllm_server_host}")
    train = (f"accelerate launch --config_file {CONFIGS}/multi_gpu.yaml --num_processes {trainers} "
             if trainers > 1 else "python ")  # one training process needs no launcher
    return [
        f"CUDA_VISIBLE_DEVICES={gpus - 1} trl vllm-serve " + shlex.join(serve_arguments(profile, utilization)),
        f"CUDA_VISIBLE_DEVICES={_devices(range(trainers))} " + train + _lab(profile, sets),
    ]


def cpu_two_processes(profile: Profile, sets=("use_vllm=false",)) -> list[str]:
    """What CI runs: two CPU processes with the gloo back-end.

    ``accelerate launch --cpu`` starts a single process unless MPI is configured; ``--multi_gpu`` is what
    makes accelerate start N processes through torchrun, and a CPU profile (``use_cpu``) then makes
    them use gloo instead of NCCL.
    """
    return ["OMP_NUM_THREADS=1 accelerate launch --multi_gpu --num_processes 2 --num_machines 1 "
            "--mixed_precision no --dynamo_backend no " + _lab(profile, list(sets))]


def commands_es(profile: Profile, gpus: int) -> str:
    """Every layout's commands for ``gpus`` GPUs, with a Spanish line saying when to choose it."""
    blocks = [
        (f"{gpus} GPUs, vLLM colocado en cada una (lo más simple; cada GPU debe caber como una sola):",
         colocate(profile, gpus)),
        (f"1 GPU sirve vLLM y {gpus - 1} {'entrena' if gpus == 2 else 'entrenan'} (generación sin competir por "
         "memoria; pesos por NCCL):",
         server(profile, gpus) if gpus >= 2 else ["(hacen falta al menos 2 GPUs)"]),
        (f"{gpus} GPUs con DeepSpeed ZeRO-3, ajuste completo sin LoRA (pip install deepspeed):",
         zero3(profile, gpus)),
    ]
    return "\n\n".join(title + "\n" + "\n".join(f"  {line}" for line in lines) for title, lines in blocks)
