"""Which process am I, under ``accelerate launch``: the one rule every writer of a run folder follows.

``accelerate launch --num_processes N`` (and ``torchrun``) start N copies of the same command, one per
device, and tell each its place through ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``. Every copy trains,
but only the main process (rank 0) writes the run folder (``run.json``, ``status.json``,
``metrics.jsonl``, evaluation, curves, report, ``resources.json``); the trainer itself already saves
checkpoints from the right ranks. A plain ``python -m labs l71`` has none of these variables and is the
main (and only) process.

No framework is imported at module level: ``torch.distributed`` is touched only when a process group
exists, which TRL's ``GRPOConfig`` (through accelerate) creates.
"""

from __future__ import annotations

import contextlib
import os
import sys

# What the launchers set; a child process that must train on its own starts without them.
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                      "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                      "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                      "TORCHELASTIC_ERROR_FILE", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_CONFIG_FILE",
                      "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_USE_FSDP")


def _int_env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def world_size() -> int:
    """How many processes train together (1 without a launcher)."""
    return max(_int_env("WORLD_SIZE", 1), 1)


def rank() -> int:
    return _int_env("RANK", 0)


def is_distributed() -> bool:
    return world_size() > 1


def is_main_process() -> bool:
    """True in the one process that writes the run folder (rank 0, or a plain single process)."""
    return rank() == 0


def say(message: str) -> None:
    """Print a console line once, from the main process (N copies of every line help nobody)."""
    if is_main_process():
        print(message, flush=True)


@contextlib.contextmanager
def single_process_env():
    """Inside the block, ``os.environ`` has no launcher variables: a child process started there trains
    alone (the format pass), instead of waiting forever for the other ranks to join its process group."""
    saved = {k: os.environ.pop(k) for k in LAUNCHER_VARIABLES if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _group():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def wait_for_everyone() -> None:
    """A barrier across the processes, when there are several and their group exists."""
    dist = _group()
    if dist is not None and dist.get_world_size() > 1:
        dist.barrier()


def shutdown() -> None:
    """Close the process groups before exit (under a launcher gloo aborts the interpreter otherwise).

    vLLM's colocated engine keeps groups of its own on top of torch's default one, and its exit hook
    destroys them. They go first, through vLLM: with torch's group gone before them, that hook printed a
    traceback ("Invalid process group specified") after every finished `make`.
    """
    parallel_state = sys.modules.get("vllm.distributed.parallel_state")  # only if vLLM is in use
    if parallel_state is not None:
        parallel_state.destroy_model_parallel()
        parallel_state.destroy_distributed_environment()
    dist = _group()
    if dist is not None:
        dist.destroy_process_group()
