"""L7.1 and L7.2 in child processes, for L7.2's notebook: each lab's whole output to a log, a short summary in the cell.

Beside :mod:`labs.l72.compare`, which reads and compares the finished run folders: this module starts them.
``ensure_l71_run`` finds the L7.1 run of the student's recipe or trains it, never a recipe the student did not save.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from labs.core import childlog
from labs.core.profiles import get_profile
from labs.core.resources import ResourceMonitor, gib, nvidia_smi_used_gib, read_resources, write_resources
from labs.core.spanish import duration_es
from labs.l71 import recipe_identity
from labs.l72.compare import find_lab_run, lab_record, other_recipe_es

LAB_LABELS = {"l71": "L7.1", "l72": "L7.2"}


def run_l71_in_subprocess(profile_name: str, show=print, command: list[str] | None = None) -> Path:
    """``run_lab_in_subprocess`` for L7.1."""
    return run_lab_in_subprocess("l71", profile_name, show, command)


def run_lab_in_subprocess(lab: str, profile_name: str, show=print, command: list[str] | None = None) -> Path:
    """Run ``python -m labs <lab> --profile <name>`` in a child process and record its peak memory.

    A child process, because two vLLM engines cannot share one process (nor, on a 32 GB card, one GPU:
    run this before loading L7.2). The lab writes its own ``resources.json``; the parent also measures the
    child (``wait4`` for its peak resident memory, nvidia-smi on a GPU) and writes that only if the
    child's folder has none. The child's whole output goes to a log (``labs.core.childlog``): ``show``
    gets one line at the start (the command, the log's path) and one at the end (steps, accuracy, folder);
    a failure raises with the log's last lines and its path. ``command`` replaces the lab's (tests: a stand-in).
    """
    label = LAB_LABELS[lab]
    cmd = command or [sys.executable, "-m", "labs", lab, "--profile", profile_name]
    path = childlog.log_path(f"{lab}-{profile_name}")
    show(f"[{lab}] Lanzo {label} en otro proceso ({childlog.command_text(cmd[1:])}); tarda minutos. Su salida "
         f"completa va a {path} (síguela en una terminal con: tail -f {path}).")
    started = time.perf_counter()
    tail: deque[str] = deque(maxlen=childlog.TAIL_LINES)
    run_dir = None
    with childlog.open_log(path, cmd) as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                env=_child_env())
        monitor = ResourceMonitor(gpu="nvidia-smi" if nvidia_smi_used_gib() is not None else None, interval_s=1.0,
                                  pid=proc.pid).start()
        try:
            assert proc.stdout is not None  # stdout=PIPE
            for line in proc.stdout:
                childlog.write(log, line)
                line = line.rstrip("\n")
                tail.append(line.split("\r")[-1])
                if line.startswith("{") and '"run_dir"' in line:
                    run_dir = json.loads(line)["run_dir"]
        except BaseException:  # Ctrl+C in the notebook: do not leave L7.1 training on its own
            proc.kill()
            monitor.stop()
            raise
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampled = monitor.stop()
    seconds = time.perf_counter() - started
    if proc.returncode != 0 or run_dir is None:
        raise RuntimeError(childlog.failure_es(label, proc.returncode, path, tail))
    if read_resources(run_dir) is None:
        write_resources(run_dir, {
            "lab": label, "peak_rss_gib": gib(usage.ru_maxrss * 1024),
            "measured_by": f"el proceso que lanzó {label} (wait4 sobre el hijo; nvidia-smi en GPU)",
            "wall_seconds": round(seconds, 1), **sampled,
        })
    show(f"[{lab}] {label} terminó en {duration_es(seconds)}: {_result_es(Path(run_dir))} Carpeta: {run_dir}")
    return Path(run_dir)


def _child_env() -> dict:
    """The kernel's environment, with a free ``MASTER_PORT`` unless the user set one: TRL's colocate mode tries
    29500 first, and a notebook run beside another training failed with EADDRINUSE (as the sweeps' children did)."""
    env = dict(os.environ)
    if not env.get("MASTER_PORT"):
        env["MASTER_PORT"] = str(childlog.free_port())
    return env


def _result_es(run_root: Path) -> str:
    """A finished run's steps and accuracy, in one Spanish sentence (from its folder)."""
    record = lab_record(run_root)
    accuracy = ""
    if record["base_accuracy"] is not None and record["trained_accuracy"] is not None:
        accuracy = (f"; exactitud {record['base_accuracy']:.0%} antes y {record['trained_accuracy']:.0%} después "
                    f"({record['n_eval']} problemas)")
    return f"{record['steps']} pasos{accuracy}."


_PRIME_SCRIPT = """
import sys
from transformers import AutoTokenizer
from labs.training import data, models
from labs import l71
from labs.core.profiles import get_profile
profile = get_profile(sys.argv[1])
start = models.model_path(profile)
print(l71.base_model_for(profile, start, data.course_splits(profile, AutoTokenizer.from_pretrained(start)))[0])
"""


def prime_format_pass_in_subprocess(profile_name: str, show=print) -> None:
    """Make sure the cached format pass exists before either lab runs (in a child process).

    Whichever lab ran first would otherwise pay for the supervised pass inside its own process, and its
    peak memory would include it: the comparison would measure the format pass, not the two recipes.
    The child's output goes to a log (``labs.core.childlog``); a failure raises with its last lines and path.
    """
    if not get_profile(profile_name).format_pass:
        return
    cmd = [sys.executable, "-c", _PRIME_SCRIPT, profile_name]
    path = childlog.log_path(f"formato-{profile_name}")
    show("[formato] Compruebo (en otro proceso) que el pase de formato ya está en caché para los dos labs.")
    with childlog.open_log(path, cmd) as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        raise RuntimeError(childlog.failure_es("El pase de formato", done.returncode, path, lines))


def ensure_l71_run(profile_name: str, show=print) -> Path | None:
    """L7.1's finished run folder for this profile (its student's recipe), running L7.1 in a child process if
    there is none and the recipe is saved; None, with the L7.1 sections to finish, when it is not saved."""
    found = find_lab_run("L7.1", profile_name)
    if found is not None:
        show(f"[l71] Uso el run de L7.1 que ya existe: {found}")
        return found
    for line in other_recipe_es(profile_name):
        show(line)
    missing = recipe_identity.missing_sections_es(get_profile(profile_name))
    if missing:  # the main run trains the student's recipe: never one of the course's behind the student's back
        show(f"[l71] Aún no hay un run de L7.1 terminado con tu receta, y tu receta no está guardada: termina en el "
             f"cuaderno L7.1 {' y '.join(missing)}; después vuelve a ejecutar esta celda (el run de L7.1, unos "
             "minutos en CPU, se lanza entonces en otro proceso).")
        return None
    prime_format_pass_in_subprocess(profile_name, show)
    return run_l71_in_subprocess(profile_name, show)
