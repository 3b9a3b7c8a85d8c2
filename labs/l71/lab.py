"""The L7.1 recipe as steps (``Lab``), and ``run_lab`` that runs them all; the notebook calls the steps one by one."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from labs.training import data as course_data
from labs.training import evaluation, format_pass, models, preflight, recipe
from labs.core import distributed, resources, runinfo
from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import RUN_JSON, SCHEMA_VERSION, STATE_FINISHED, RunFolder, now_iso, write_json
from rewards import REWARD_VALUES, reward_functions

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


class Lab:
    """The L7.1 recipe as steps, so the notebook can run and explain them one at a time.

    ``run_lab`` calls the same steps in order; the notebook calls them cell by cell. Either way the
    run folder is the same.
    """

    def __init__(self, profile=None, run_name=None, fresh=False, reward_names=None, lab=LAB, **overrides):
        preflight.refuse_removed_keywords(overrides)
        profile = profile if isinstance(profile, Profile) else get_profile(profile)
        self.profile = profile.replace(**overrides) if overrides else profile
        self.lab = lab
        self.reward_funcs = reward_functions(reward_names)
        prepare(self.profile, self.reward_funcs)  # before any model is loaded
        self.run = new_run(self.profile, run_name, fresh, lab)
        self.trainer = None
        self.monitor: resources.ResourceMonitor | None = None

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
        self.base_model, self.base_label = base_model_for(self.profile, self.start_model, self.splits)
        if distributed.is_main_process():  # under accelerate, rank 0 alone writes the run folder
            extra = {"base_label": self.base_label, "processes": distributed.world_size()}
            write_run_json(self.run, self.profile, self.lab, self.reward_funcs, self.base_model, extra)
        return self.base_model

    def build_trainer(self):
        self.trainer = recipe.make_trainer(
            self.profile, self.run, self.base_model, self.reward_funcs, course_data.to_dataset(self.splits["train"])
        )
        self.generate = generator(self.trainer, self.profile)
        return self.trainer

    def evaluate_base(self) -> list[dict]:
        """The holdout before GRPO; under accelerate the main process evaluates and the others wait."""
        self.base_records = []
        if distributed.is_main_process():
            self.base_records = evaluation.evaluate(self.splits["eval"], self.generate, self.run, "base")
        distributed.wait_for_everyone()
        return self.base_records

    def train(self) -> None:
        recipe.train(self.trainer, self.profile, self.run)

    def evaluate_trained(self) -> dict | None:
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
        distributed.wait_for_everyone()  # every process is done with the checkpoints finish() may delete
        if not distributed.is_main_process():
            return
        fields = self.resource_fields()
        if distributed.is_distributed():
            fields["processes"] = distributed.world_size()  # the peak is the main process's own
        resources.record(self.run, self.monitor, self.lab, **fields)
        finish(self.run, self.profile, self.trainer.state.global_step)

    def close(self) -> None:
        """Stop the memory sampling thread (a failed run never reaches ``finish``)."""
        if self.monitor is not None:
            self.monitor.stop()

    def run_all(self) -> Path:
        if self.finished:
            distributed.say(f"[run] {self.run.root} ya terminó; para empezar otro usa --fresh (o fresh=True).")
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


def run_lab(profile=None, run_name=None, fresh=False, reward_names=None, lab=LAB, **overrides) -> Path:
    """Run lab L7.1 (or a variant of it, for the exercises) and return the run folder."""
    lab = Lab(profile, run_name, fresh, reward_names, lab, **overrides)
    try:
        return lab.run_all()
    finally:
        lab.close()


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


def finish(run: RunFolder, profile: Profile, step: int) -> None:
    """Curves, the what-to-watch findings and the grading report, then mark the run finished."""
    from labs.training import curves

    curves.draw(run)
    for line in curves.what_to_watch_lines(run):
        print(f"[qué observar] {line}")
    report = curves.grade(run)
    run.write_status(STATE_FINISHED, step, profile.max_steps)
    if not profile.keep_checkpoints:
        freed = run.remove_checkpoints()
        if freed:
            print(
                f"[run] Checkpoints borrados ({freed / 1e9:.1f} GB): el run terminó y model/ tiene los pesos "
                "finales. Para conservarlos, --set keep_checkpoints=true."
            )
    print(f"[run] Terminado. Carpeta del run: {run.root}\n[run] Informe de evaluación C2b: {report}")
