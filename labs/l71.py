"""Lab L7.1: GRPO on GSM8K with TRL's GRPOTrainer and vLLM in colocate mode, end to end.

One recipe, two front doors: the notebook ``notebooks/L7_1_grpo_trl_vllm.ipynb`` walks through these
steps one by one, and the terminal runs them all::

    python -m labs l71 [--profile cpu|ci|rtx5090] [--run-name NAME] [--fresh] [--set key=value ...]

Both write the same run folder (labs.runfolder). Running the same command again continues an
unfinished run from its last checkpoint, and returns at once for a finished one; ``--fresh`` starts
a new run folder next to the old one (nothing is deleted).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

from labs import data as course_data
from labs import evaluation, format_pass, models, preflight, recipe, runinfo
from labs.paths import runs_dir
from labs.profiles import Profile, ProfileError, get_profile, parse_override
from labs.runfolder import RUN_JSON, SCHEMA_VERSION, STATE_FINISHED, RunFolder, now_iso, write_json
from rewards import REWARD_VALUES, reward_functions

LAB = "L7.1"


def new_run(profile: Profile, run_name: str | None = None, fresh: bool = False, lab: str = LAB) -> RunFolder:
    """The run folder for this lab and profile: the same name resumes, ``fresh`` makes a new one."""
    stem = f"{lab.lower().replace('.', '')}-{profile.name}"
    name = run_name or stem
    if fresh:
        name = f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    return RunFolder(runs_dir() / name)


def write_run_json(run: RunFolder, profile: Profile, lab: str, reward_funcs, base_model: str, extra=None) -> None:
    names = [f.__name__ for f in reward_funcs]
    record = {
        "schema": SCHEMA_VERSION,
        "lab": lab,
        "run_name": run.root.name,
        "created": now_iso(),
        "profile": profile.as_dict(),
        "grpo_config": recipe.grpo_config_kwargs(profile, str(run.checkpoints)),
        "reward_functions": names,
        "reward_values": {n: REWARD_VALUES.get(n) for n in names},
        "base_model": base_model,
        "dataset": "openai/gsm8k:main",
        **runinfo.collect(),
    }
    record.update(extra or {})
    write_json(run.path(RUN_JSON), record)


def prepare(profile: Profile, reward_funcs, overrides_keywords=()) -> None:
    """Everything that can be checked before a model is loaded."""
    preflight.preflight(profile, reward_funcs, columns=("prompt", "answer", "id"), keywords=overrides_keywords)
    from labs.doctor import require_runnable

    require_runnable(profile)


def base_model_for(profile: Profile, tokenizer_path: str, splits: dict) -> tuple[str, str]:
    """The model GRPO starts from, and how the evaluation names it."""
    if profile.format_pass and splits["format"]:
        primed = format_pass.prime(tokenizer_path, profile, splits["format"])
        return str(primed), f"{Path(tokenizer_path).name} + pase de formato"
    return tokenizer_path, Path(tokenizer_path).name


def run_lab(
    profile: Profile | str | None = None,
    run_name: str | None = None,
    fresh: bool = False,
    reward_names=None,
    lab: str = LAB,
    **overrides,
) -> Path:
    """Run lab L7.1 (or a variant of it, for the exercises) and return the run folder."""
    removed = [k for k in overrides if k in preflight.REMOVED_KEYWORDS]
    if removed:
        raise preflight.PreflightError(preflight.check_config_keywords(removed))
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    if overrides:
        profile = profile.replace(**overrides)
    reward_funcs = reward_functions(reward_names)
    prepare(profile, reward_funcs)

    run = new_run(profile, run_name, fresh, lab)
    if run.is_finished():
        print(f"[run] {run.root} ya terminó; para empezar otro usa --fresh (o fresh=True).")
        return run.root

    from transformers import AutoTokenizer

    start_model = models.model_path(profile)
    tokenizer = AutoTokenizer.from_pretrained(start_model)
    splits = course_data.course_splits(profile, tokenizer)
    base_model, base_label = base_model_for(profile, start_model, splits)
    write_run_json(run, profile, lab, reward_funcs, base_model, {"base_label": base_label})
    print(
        f"[run] {lab} con el perfil '{profile.name}': {len(splits['train'])} prompts de GRPO, "
        f"{len(splits['eval'])} de evaluación, {profile.max_steps} pasos -> {run.root}"
    )

    trainer = recipe.make_trainer(
        profile, run, base_model, reward_funcs, course_data.to_dataset(splits["train"])
    )
    generate = generator(trainer, profile)
    base = evaluation.evaluate(splits["eval"], generate, run, "base")
    recipe.train(trainer, profile, run)
    sync = sync_engine(trainer, profile)
    trained = evaluation.evaluate(splits["eval"], generate, run, "trained")
    trainer.save_model(str(run.model_dir))
    summary = evaluation.summarize(run, base, trained, base_label)
    if sync is not None:
        summary["engine_weight_max_abs_diff"] = sync["max_abs_diff"]
        write_json(run.path("eval/summary.json"), summary)
    finish(run, profile, trainer.state.global_step)
    return run.root


def generator(trainer, profile: Profile):
    """Greedy generation for the evaluation: the trainer's own vLLM engine when it has one."""
    tokenizer = trainer.processing_class
    max_new = profile.eval_max_new_tokens
    if profile.use_vllm and getattr(trainer, "vllm_generation", None) is not None:
        llm = trainer.vllm_generation.llm
        return lambda rows: evaluation.generate_vllm(llm, tokenizer, rows, max_new)
    return lambda rows: evaluation.generate_hf(trainer.model, tokenizer, rows, max_new)


def sync_engine(trainer, profile: Profile):
    """Push the final weights into vLLM (TRL syncs before each generation, not after the last step)."""
    if not (profile.use_vllm and getattr(trainer, "vllm_generation", None) is not None):
        return None
    trainer.vllm_generation.sync_weights()
    from labs import vllm_cpu_shim

    if vllm_cpu_shim.is_applied() and not hasattr(trainer.model, "peft_config"):
        diff = vllm_cpu_shim.engine_weight_diff(trainer)
        print(f"[vllm] Pesos del motor vLLM frente a los del trainer: diferencia máxima {diff['max_abs_diff']:.3g}")
        return diff
    return None


def finish(run: RunFolder, profile: Profile, step: int) -> None:
    """Curves, the what-to-watch findings and the grading report, then mark the run finished."""
    from labs import curves

    curves.draw(run)
    for line in curves.what_to_watch_lines(run):
        print(f"[qué observar] {line}")
    report = curves.grade(run)
    run.write_status(STATE_FINISHED, step, profile.max_steps)
    print(f"[run] Terminado. Carpeta del run: {run.root}\n[run] Informe de evaluación C2b: {report}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs l71", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", help="cpu, ci o rtx5090 (por defecto: COURSE_PROFILE o autodetección)")
    parser.add_argument("--run-name", help="nombre de la carpeta del run (mismo nombre = continuar)")
    parser.add_argument("--fresh", action="store_true", help="empezar un run nuevo en otra carpeta")
    parser.add_argument("--set", action="append", default=[], metavar="clave=valor", help="cambiar un ajuste del perfil")
    parser.add_argument(
        "--rewards", help="funciones de recompensa separadas por comas (por defecto las tres de la lección)"
    )
    parser.add_argument("--lab", default=LAB, help="etiqueta del laboratorio en run.json (L7.1, E1, E2, E3)")
    args = parser.parse_args(argv)
    try:
        profile = get_profile(args.profile)
        overrides = {}
        for item in args.set:
            key = item.split("=", 1)[0].strip()
            if key in preflight.REMOVED_KEYWORDS:
                raise preflight.PreflightError(preflight.check_config_keywords([key]))
            k, v = parse_override(item, profile)
            overrides[k] = v
        names = [n.strip() for n in args.rewards.split(",")] if args.rewards else None
        path = run_lab(
            profile, run_name=args.run_name, fresh=args.fresh, reward_names=names, lab=args.lab, **overrides
        )
    except (ValueError, models.ModelNotAvailable) as exc:  # profile, pre-flight, data, reward names
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except recipe.RunFailed as exc:
        print(f"ERROR: el entrenamiento se detuvo. {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        if type(exc).__name__ == "EnvironmentNotReady":
            print(str(exc), file=sys.stderr)
            return 2
        raise
    print(json.dumps({"run_dir": str(path)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
