"""The L7.1 recipe as steps (``Lab``), and ``run_lab`` that runs them all; the notebook calls the steps one by one."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from labs.training import data as course_data
from labs.training import console, evaluation, format_pass, models, preflight, reasoning, recipe, runrecord
from labs.core import distributed, resources, runinfo
from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import RUN_JSON, SCHEMA_VERSION, STATE_FINISHED, RunFolder, now_iso, read_json, write_json
from labs.l71 import recipe_identity
from rewards import REWARD_NAMES, REWARD_VALUES, reward_functions
from rewards.own import describe_reward_functions

LAB = "L7.1"


def new_run(profile: Profile, run_name: str | None = None, fresh: bool = False, lab: str = LAB) -> RunFolder:
    """The run folder for this lab and profile: the same name resumes, ``fresh`` makes a new one."""
    stem = f"{lab.lower().replace('.', '')}-{profile.name}"
    name = run_name or stem
    if fresh:
        # Under accelerate every process must pick the same folder: the launcher's start time is shared.
        when = datetime.now()
        if distributed.is_distributed():
            import psutil

            when = datetime.fromtimestamp(psutil.Process(os.getppid()).create_time())
        name = f"{name}-{when.strftime('%Y%m%d-%H%M%S')}"
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
        # where each function came from; a student's own: its file and a SHA-256 of its source
        "reward_sources": describe_reward_functions(reward_funcs, REWARD_NAMES),
        "base_model": base_model,
        "dataset": "openai/gsm8k:main",
        # the recipe's identity (knobs + reward sources): what L7.2, the sweeps and the grader match runs by
        recipe_identity.KEY: recipe_identity.of_run(profile, reward_funcs),
        **runinfo.collect(),
    }
    record.update(extra or {})
    write_json(run.path(RUN_JSON), record)


def prepare(profile: Profile, reward_funcs, overrides_keywords=(), trains: bool = True) -> None:
    """Everything that can be checked before a model is loaded.

    ``trains=False`` (a finished run, only read) skips the machine check: reading a 5090 run's folder needs no GPU.
    """
    preflight.preflight(profile, reward_funcs, columns=("prompt", "answer", "id"), keywords=overrides_keywords)
    if trains:
        from labs.doctor import require_runnable

        require_runnable(profile)


def base_model_for(profile: Profile, tokenizer_path: str, splits: dict) -> tuple[str, str]:
    """The model GRPO starts from, and how the evaluation names it."""
    if profile.format_pass and splits["format"]:
        primed = format_pass.prime(tokenizer_path, profile, splits["format"])
        return str(primed), f"{Path(tokenizer_path).name} + pase de formato"
    return tokenizer_path, Path(tokenizer_path).name


class Lab:
    """The L7.1 recipe as steps, so the notebook can run and explain them one at a time.

    ``run_lab`` calls the same steps in order; the notebook calls them cell by cell. Either way the
    run folder is the same.
    """

    opened = True  # the notebook's section 4 opened a run (``labs.l71.notebook.NotOpened`` when it did not)

    def __init__(self, profile=None, run_name=None, fresh=False, reward_names=None, lab=LAB,
                 accept_changes=False, settings_from=None, variant_from=None, *, reward_funcs=None, **overrides):
        preflight.refuse_removed_keywords(overrides)
        self.settings_from = settings_from  # the L7.1 notebook's saved settings (labs.l71.settings), for run.json
        self.variant_from = variant_from  # E1-E3: the student's function that built this variant, for run.json
        console.quiet_third_party()  # once, before TRL and vLLM are imported
        profile = profile if isinstance(profile, Profile) else get_profile(profile)
        self.profile = profile.replace(**overrides) if overrides else profile
        self.lab = lab
        # the functions themselves (the L7.1 notebook's saved ones: labs.l71.student_rewards), or by name
        self.reward_funcs = list(reward_funcs) if reward_funcs is not None else reward_functions(reward_names)
        self.run = new_run(self.profile, run_name, fresh, lab)  # only a path: nothing is created yet
        # before any model is loaded (and before any folder is made); a finished run needs no GPU to be read
        prepare(self.profile, self.reward_funcs, trains=not self.run.is_finished())
        if self.profile.use_cpu:
            resources.keep_freed_memory()
        self.trainer: Any = None  # TRL's GRPOTrainer once build_trainer or use_trainer ran (or the notebook's own)
        self.generate = None
        self.monitor: resources.ResourceMonitor | None = None
        # A finished run (from the terminal or an earlier session) is only read: no model, no training.
        self.read_only = self.run.is_finished()
        # A resume trains with the recipe run.json recorded, or says what differs (before any model loads).
        self.accept_changes = accept_changes
        self.resumed = not self.read_only and self.run.path(RUN_JSON).exists()
        if self.resumed:
            runrecord.check_resume(self.run, self.recipe_now(), accept_changes, write=distributed.is_main_process())

    def recipe_now(self) -> dict:
        """What this start would train with, in the terms ``run.json`` records (labs.training.runrecord)."""
        grpo = recipe.grpo_config_kwargs(self.profile, str(self.run.checkpoints))
        return runrecord.recipe_of(self.profile, grpo, describe_reward_functions(self.reward_funcs, REWARD_NAMES))

    @property
    def finished(self) -> bool:
        return self.run.is_finished()

    def load_data(self) -> dict:
        """Tokenizer, the three disjoint subsets (format pass, GRPO prompts, holdout)."""
        from transformers import AutoTokenizer

        if self.monitor is None:  # memory from before the first model is loaded (resources.json)
            self.monitor = resources.ResourceMonitor(gpu=None if self.profile.use_cpu else "torch").start()
        self.start_model = models.model_path(self.profile)
        self.tokenizer = AutoTokenizer.from_pretrained(self.start_model)
        self.splits = course_data.course_splits(self.profile, self.tokenizer)
        return self.splits

    def format_pass(self) -> str:
        """The optional supervised format pass; returns the model GRPO starts from."""
        if self.read_only:  # what the finished run recorded; run.json is left as it is
            info = read_json(self.run.path(RUN_JSON))
            self.base_model = info.get("base_model") or self.start_model
            self.base_label = info.get("base_label") or Path(self.base_model).name
            return self.base_model
        self.base_model, self.base_label = base_model_for(self.profile, self.start_model, self.splits)
        # run.json is written once, when the run starts; a resume was compared with it in __init__
        if self.resumed:
            runrecord.check_base_model(self.run, self.base_model, self.accept_changes, distributed.is_main_process())
        elif distributed.is_main_process():
            extra = {"base_label": self.base_label, "processes": distributed.world_size()}
            if self.settings_from:
                extra["settings_from"] = self.settings_from
            if self.variant_from:
                extra["variant_from"] = self.variant_from
            write_run_json(self.run, self.profile, self.lab, self.reward_funcs, self.base_model, extra)
        return self.base_model

    def build_trainer(self):
        if self.read_only:
            print(f"[run] {self.run.root} ya terminó: no cargo el modelo ni el motor vLLM, solo leo la carpeta.")
            return None
        return self.use_trainer(recipe.make_trainer(
            self.profile, self.run, self.base_model, self.reward_funcs, course_data.to_dataset(self.splits["train"])
        ))

    def use_trainer(self, trainer):
        """Take the trainer (the notebook builds its own ``GRPOTrainer``): evaluation generates with it.

        A ``GRPOConfig`` value changed by hand in the notebook's cell is recorded in ``run.json``
        (``grpo_config`` holds what the trainer really got, ``grpo_config_changes`` the profile's value
        beside it) and said here, so the run folder never claims the profile's value.
        """
        self.trainer = trainer
        # every process: the tokenizer is loaded anew, and Qwen3's <think> must reach the rewards (issue 41)
        reasoning.prepare_trainer_tokenizer(trainer, None if self.resumed else self.run)
        self.generate = generator(trainer, self.profile)
        if self.resumed:  # run.json stays as the run's start wrote it; the values used then must hold
            runrecord.check_resume(self.run, accept=self.accept_changes, write=distributed.is_main_process(),
                                   args=trainer.args)
            return trainer
        changes = config_changes(recipe.grpo_config_kwargs(self.profile, str(self.run.checkpoints)), trainer.args)
        if changes and self.run.path(RUN_JSON).exists():
            record = read_json(self.run.path(RUN_JSON))
            record["grpo_config"].update({k: new for k, (_, new) in changes.items()})
            record["grpo_config_changes"] = {k: {"perfil": old, "usado": new} for k, (old, new) in changes.items()}
            knobs = {k: new for k, (_, new) in changes.items() if k in recipe_identity.LESSON_KNOBS}
            used = self.profile.replace(**knobs)  # only the lesson's knobs: other GRPOConfig keys are no profile field
            record[recipe_identity.KEY] = recipe_identity.of_run(used, self.reward_funcs)  # what the trainer got
            write_json(self.run.path(RUN_JSON), record)
        for key, (old, new) in changes.items():
            print(f"[run] {key}: {new!r} en lugar del valor del perfil {old!r} (queda apuntado en run.json).")
        return trainer

    def evaluate_base(self) -> list[dict]:
        """The holdout before GRPO; under accelerate the main process evaluates and the others wait."""
        self.base_records = []
        if distributed.is_main_process():
            self.base_records = evaluation.evaluate(self.splits["eval"], self.generate, self.run, "base")
        distributed.wait_for_everyone()
        return self.base_records

    def train(self) -> None:
        if self.read_only:
            status = self.run.status() or {}
            print(f"[run] Entrenamiento ya hecho ({status.get('step')} de {status.get('max_steps')} pasos): no entreno otra vez.")
            return
        recipe.train(self.trainer, self.profile, self.run)

    def evaluate_trained(self) -> dict | None:
        if self.read_only:
            evaluation.evaluate(self.splits["eval"], None, self.run, "trained")  # says it reuses the file
            self.summary = read_json(self.run.path("eval/summary.json"))
            return self.summary
        sync = sync_engine(self.trainer, self.profile)  # every process: ZeRO-3 gathers the weights to sync
        self.trainer.save_model(str(self.run.model_dir))  # every process; the trainer writes from rank 0
        if not distributed.is_main_process():
            self.summary = None
            return None
        trained = evaluation.evaluate(self.splits["eval"], self.generate, self.run, "trained")
        summary = evaluation.summarize(self.run, self.base_records, trained, self.base_label)
        if sync is not None:
            summary["engine_weight_max_abs_diff"] = sync["max_abs_diff"]
            write_json(self.run.path("eval/summary.json"), summary)
        self.summary = summary
        return summary

    def resource_fields(self) -> dict:
        """Extra fields for resources.json (L7.2 adds the back-end that ran)."""
        return {}

    def finish(self) -> None:
        if self.read_only:
            write_missing_report(self.run)
            return
        distributed.wait_for_everyone()  # every process is done with the checkpoints finish() may delete
        if not distributed.is_main_process():
            return
        fields = self.resource_fields()
        if distributed.is_distributed():
            fields["processes"] = distributed.world_size()  # the peak is the main process's own
        resources.record(self.run, self.monitor, self.lab, **fields)
        # max_steps as the trainer ran it (a notebook may change it in its GRPOConfig cell)
        finish(self.run, self.profile.replace(max_steps=self.trainer.args.max_steps), self.trainer.state.global_step)

    def close(self) -> None:
        """Stop the memory sampling thread (a failed run never reaches ``finish``)."""
        if self.monitor is not None:
            self.monitor.stop()

    def run_all(self) -> Path:
        if self.finished:
            distributed.say(f"[run] {self.run.root} ya terminó; para empezar otro usa --fresh (o fresh=True).")
            if distributed.is_main_process():
                write_missing_report(self.run)
            return self.run.root
        self.load_data()
        self.format_pass()
        processes = f" en {distributed.world_size()} procesos" if distributed.is_distributed() else ""
        distributed.say(
            f"[run] {self.lab} con el perfil '{self.profile.name}'{processes}: {len(self.splits['train'])} prompts "
            f"de GRPO, {len(self.splits['eval'])} de evaluación, {self.profile.max_steps} pasos -> {self.run.root}"
        )
        self.build_trainer()
        self.evaluate_base()
        self.train()
        self.evaluate_trained()
        self.finish()
        return self.run.root


def run_lab(profile=None, run_name=None, fresh=False, reward_names=None, lab=LAB, accept_changes=False,
            settings_from=None, variant_from=None, *, reward_funcs=None, **overrides) -> Path:
    """Run lab L7.1 (or a variant of it, for the exercises) and return the run folder.

    ``accept_changes``: resume an unfinished run with settings or reward code other than run.json's,
    recording the change there (without it such a resume is refused before any model loads).
    ``settings_from``: where the L7.1 notebook's saved settings came from (labs.l71.settings), for run.json;
    ``variant_from``: which student function built an exercise's variant (``labs.exercises.student``);
    ``reward_funcs``: the functions to train instead of ``reward_names`` (the L7.1 notebook's saved ones)."""
    lab = Lab(profile, run_name, fresh, reward_names, lab, accept_changes, settings_from, variant_from,
              reward_funcs=reward_funcs, **overrides)
    try:
        return lab.run_all()
    finally:
        lab.close()


def config_changes(recipe_kwargs: dict, args) -> dict:
    """``{key: (recipe's value, value in args)}`` for every recipe keyword the config does not keep."""
    changes = {}
    for key, value in recipe_kwargs.items():
        used = getattr(args, key, value)
        if used != value:
            changes[key] = (value, used)
    return changes


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
    from labs.training import vllm_cpu_shim

    if vllm_cpu_shim.is_applied() and not hasattr(trainer.model, "peft_config"):
        diff = vllm_cpu_shim.engine_weight_diff(trainer)
        print(f"[vllm] Pesos del motor vLLM frente a los del trainer: diferencia máxima {diff['max_abs_diff']:.3g}")
        return diff
    return None


def write_missing_report(run: RunFolder) -> None:
    """A finished run whose report is missing (a crash after it was marked finished) gets it now."""
    from labs.training import curves

    if not (run.root / curves.GRADING_DIR / "informe.md").exists():
        print(f"[run] Informe de evaluación C2b (faltaba): {curves.grade(run)}")


def finish(run: RunFolder, profile: Profile, step: int) -> None:
    """Mark the run finished, then draw its curves, print what to watch and write its grading report.

    The state comes first so that the report grades the finished run (criterion 1 reads status.json).
    Training, evaluation and the final weights are done by now, so a crash in what follows leaves a
    finished run whose report ``python -m labs grade`` can write again, never a run stuck "running".
    """
    from labs.training import curves

    run.write_status(STATE_FINISHED, step, profile.max_steps)
    curves.draw(run)
    for line in curves.what_to_watch_lines(run):
        print(f"[qué observar] {line}")
    try:
        report = curves.grade(run)
    except Exception as exc:  # the run is finished and complete: only its report is missing
        report = None
        print(
            f"[run] AVISO: no se pudo escribir el informe C2b ({type(exc).__name__}: {exc}). El run está terminado; "
            f"para escribirlo: python -m labs grade {run.root} --out {run.root / curves.GRADING_DIR}"
        )
    if not profile.keep_checkpoints:
        freed = run.remove_checkpoints()
        if freed:
            print(
                f"[run] Checkpoints borrados ({freed / 1e9:.1f} GB): el run terminó y model/ tiene los pesos "
                "finales. Para conservarlos, --set keep_checkpoints=true."
            )
    print(f"[run] Terminado. Carpeta del run: {run.root}")
    if report is not None:
        print(f"[run] Informe de evaluación C2b: {report}")
