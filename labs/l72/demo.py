"""The L7.2 notebook's runs: a short demo through the student's own Unsloth cells, and the long runs it reads.

No notebook trains for hours. The notebook:

* runs a **demo** (:class:`Demo`): the student's functions (imports, ``from_pretrained``, ``get_peft_model``)
  really execute, then a few GRPO steps and a small evaluation land in their own run folder,
  ``runs/l72-demo-<profile>``, remade on every run. On a GPU it is Unsloth + vLLM Standby (minutes on a 5090);
  on a CPU profile the same cells go through the stand-in (labs.l72.standin) with the ``ci`` budget;
* **reads** the long runs (:func:`full_run`, :func:`l71_reference`): a finished run is read; an unfinished one
  on a GPU prints the exact terminal command. Only ``ENTRENAR_AQUI = True`` trains the whole L7.2 run in the
  notebook, through the same cells (``Demo(..., entrenar_aqui=True)``). On the CPU profiles the long runs
  take minutes and run from here when the student asks (``entrenar=True``, the notebook's ``ENTRENAR_EN_CPU``),
  each in a child process whose output goes to a log under ``runs/_logs/``; a Run All of the untouched notebook
  trains nothing (issue 52: it trained the whole L7.2 lab for 8 minutes).

On a GPU, L7.2 always uses the instruct profile ``rtx5090`` (:func:`l72_profile`, see ``ROUTE_ES``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from labs import l71
from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile, student_command
from labs.core.resources import ResourceMonitor
from labs.core.runfolder import STATE_FINISHED, RunFolder
from labs.l72.memory import MemoryFraction
from labs.l72.standby import STANDBY_ENV, ImportOrderError, UnslothLoadFailed, import_order_problem
from labs.l72.standin import CpuFastLanguageModel
from labs.l72.steps import LAB, finish_resources, profile_for_l72, start
from labs.l72.trainer import make_trainer as make_l72_trainer

L72_GPU_PROFILE = "rtx5090"
DEMO_LAB = "L7.2-demo"  # not "L7.2": a demo run is never the lab's run, nor a comparison's
# A few steps and a small holdout: minutes on a 5090 (about 17 s a step by labs.vram.timeplan, plus the load).
DEMO_GPU = dict(max_steps=5, save_steps=5, eval_size=32)
ROUTE_ES = (
    "En la GPU, L7.2 usa siempre el perfil rtx5090 (Qwen3-4B-Instruct-2507). El run que se califica es el de "
    "L7.1; L7.2 compara cómo se entrena la misma receta, y eso lo enseña el modelo instruct, que ya sigue el "
    "formato. El perfil rtx5090-base necesita antes un pase de formato supervisado, que el curso entrena con "
    "TRL (L7.1), no con Unsloth: por eso la ruta Unsloth de este cuaderno lo rechaza."
)


def l72_profile(profile: Profile) -> tuple[Profile, str]:
    """The profile L7.2 trains with here, and why: a CPU profile as it is, ``rtx5090`` on any GPU profile."""
    if profile.use_cpu:
        return profile.replace(backend="unsloth"), (
            f"Perfil de CPU '{profile.name}': Unsloth no hace GRPO en CPU y las mismas celdas van por el sustituto "
            "(transformers + PEFT).")
    chosen = get_profile(L72_GPU_PROFILE).replace(backend="unsloth")
    why = ROUTE_ES if profile.name == L72_GPU_PROFILE else f"Tu perfil es '{profile.name}'. {ROUTE_ES}"
    return chosen, why


def demo_profile(profile: Profile) -> Profile:
    """The demo's budget: a few steps of rtx5090 on a GPU; on a CPU the ``ci`` budget, without vLLM.

    Without vLLM on a CPU because the stand-in loads no engine (it stands for ``fast_inference``), and the
    notebook's CPU run of the whole lab starts its own engine later in the same kernel.
    """
    if profile.use_cpu:
        # 16 new tokens: without vLLM, TRL generates with transformers, and a first ci-sized try at 64 tokens
        # took 411 s for one step on this course's 2-core CI machine (metrics.jsonl, step_time).
        return get_profile("ci").replace(backend="unsloth", use_vllm=False, format_pass=False,
                                         max_completion_length=16, eval_max_new_tokens=16)
    return l72_profile(profile)[0].replace(**DEMO_GPU)


def _hours(profile: Profile) -> str:
    from labs.core.spanish import duration_es
    from labs.vram.timeplan import time_plan

    return duration_es(time_plan(profile, "unsloth").hours * 3600)


def terminal_command(profile: Profile) -> str:
    """The terminal command of L7.2's run, naming ``--profile`` only when ``python -m labs l72`` would not pick
    ``profile`` by itself (on the base route it picks ``rtx5090``: ``steps.profile_for_l72``)."""
    return student_command("l72", profile, picks=profile_for_l72(get_profile())[0].name)


class Demo:
    """The notebook's Unsloth cells, one method a cell: imports, load, LoRA, then train and evaluate."""

    def __init__(self, profile: Profile | str | None = None, entrenar_aqui: bool = False, show=print):
        profile = profile if isinstance(profile, Profile) else get_profile(profile)
        self.show = show
        chosen, why = l72_profile(profile)
        show(why)
        self.full = False
        if entrenar_aqui and not chosen.use_cpu:
            run = l71.new_run(chosen, None, False, LAB)
            if run.is_finished():
                show(f"ENTRENAR_AQUI = True, pero {run.root} ya terminó: hago solo la demo.")
            else:
                self.full = True
                show(f"ENTRENAR_AQUI = True: entreno aquí el run completo de L7.2 en {run.root} (unas {_hours(chosen)}; "
                     "continúa desde su último checkpoint). El entrenamiento queda atado a esta pestaña.")
        target = chosen if self.full else demo_profile(profile)
        run_name = None if self.full else f"l72-demo-{profile.name}"
        if not self.full and (runs_dir() / run_name).exists():
            shutil.rmtree(runs_dir() / run_name)  # the demo is remade every time; the long runs never are
        # the full run trains the saved recipe; the demo keeps its few-step budget (the saved rewards still train)
        self.profile, self.reward_funcs, self.run, self.backend = start(target, run_name, saved=self.full)
        self.fraction: MemoryFraction | None = None
        self.monitor: ResourceMonitor | None = None
        what = "run completo" if self.full else f"demo de {self.profile.max_steps} pasos"
        show(f"{what.capitalize()} con el perfil {self.profile.name}: {self.backend.name}, carpeta {self.run.root}.")
        if self.on_gpu:
            from labs.vram.timeplan import LABEL_ES, time_plan

            show(f"Tiempo en una 5090 ({LABEL_ES}): {time_plan(self.profile, 'unsloth').breakdown_es()}, más la carga.")

    @property
    def on_gpu(self) -> bool:
        return not self.profile.use_cpu

    def fast_language_model(self, importar, standby_posible=None):
        """GPU: the student's ``importar()`` under the import-order guard; CPU: the stand-in (said in Spanish).

        ``standby_posible`` (question 1) is asked about this very process first, beside the guard's own verdict;
        the guard decides.
        """
        problem = import_order_problem(sys.modules, os.environ)
        if standby_posible is not None:
            can, why = standby_posible(sys.modules, os.environ)
            agrees = bool(can) == (problem is None)
            self.show(f"Tu standby_posible sobre este proceso: {'sí' if can else 'no'}{f' ({why})' if why else ''}. "
                      f"El guardián del curso: {'sí' if problem is None else 'no'}"
                      f"{'' if agrees else ' (no coincidís: mira tu pregunta 1)'}.")
        if not self.on_gpu:
            self.show("En CPU no se llama a importar_unsloth(): Unsloth no hace GRPO en CPU. FastLanguageModel es "
                      "aquí el sustituto de transformers + PEFT, con los mismos métodos y argumentos.")
            return CpuFastLanguageModel(self.profile, self.show)
        if problem is not None:
            raise ImportOrderError(problem)
        fast_language_model = importar()
        import unsloth

        problem = import_order_problem(sys.modules, os.environ)  # unsloth is imported now: was Standby set first?
        if problem is not None:
            raise ImportOrderError(problem)
        if fast_language_model is not unsloth.FastLanguageModel:
            raise ImportOrderError("importar_unsloth() debe devolver FastLanguageModel, importado de unsloth.")
        self.show(f"Unsloth {unsloth.__version__} importado con {STANDBY_ENV}=1, antes que trl, transformers y peft.")
        return fast_language_model

    def load(self, cargar_modelo, fast_language_model):
        """The student's ``cargar_modelo`` (their ``from_pretrained``): under the Standby guard on a GPU."""
        requested = self.profile.vllm_gpu_memory_utilization
        if not self.on_gpu:
            self.monitor = ResourceMonitor(gpu=None).start()
            self.fraction = MemoryFraction(requested, None, "no-vllm", device="cpu")
            return cargar_modelo(fast_language_model, self.profile)
        import torch

        from labs.l72.steps import package_version
        from labs.l72.memory import engine_memory_fraction, expected_gpu_fraction
        from labs.l72.standby import standby_load_guard

        self.monitor = ResourceMonitor(gpu="torch").start()
        fraction = expected_gpu_fraction(self.profile, torch.cuda.mem_get_info()[1] / 2**30,
                                         package_version("vllm") or "0")
        self.show(fraction.describe_es())
        with standby_load_guard(self.profile):
            model, tokenizer = cargar_modelo(fast_language_model, self.profile)
        engine = getattr(model, "vllm_engine", None)
        if engine is None:
            raise UnslothLoadFailed("Unsloth cargó el modelo sin vLLM: ¿fast_inference=True? Mira los mensajes de "
                                    "arriba y `python -m labs doctor`. No hace falta reiniciar: vLLM no llegó a cargarse.")
        self.fraction = fraction.with_engine_value(engine_memory_fraction(engine))
        self.show(self.fraction.describe_es())
        return model, tokenizer

    def add_lora(self, anadir_lora, fast_language_model, model):
        """The student's ``anadir_lora`` (their ``get_peft_model``); run.json records the adapter it made."""
        model = anadir_lora(fast_language_model, model, self.profile)
        config = getattr(model, "peft_config", {}).get("default")
        made = (getattr(config, "r", None), getattr(config, "lora_alpha", None))
        if None not in made and made != (self.profile.lora_r, self.profile.lora_alpha):
            self.profile = self.profile.replace(lora_r=made[0], lora_alpha=made[1])
            self.show(f"Tu adaptador: r={made[0]}, lora_alpha={made[1]} (el run lo apunta así).")
        return model

    def train_and_evaluate(self, model, tokenizer) -> Path:
        """Data, run.json, trainer, base evaluation, GRPO steps, adapter, trained evaluation; the run folder."""
        from labs.training import data as course_data
        from labs.training import evaluation, recipe

        profile, run = self.profile, self.run
        splits = course_data.course_splits(profile, tokenizer)
        model_name = profile.unsloth_model if self.on_gpu else profile.model
        base_label = f"{Path(model_name).name} ({'4 bits' if self.on_gpu and profile.load_in_4bit else 'LoRA'})"
        l71.write_run_json(run, profile, LAB if self.full else DEMO_LAB, self.reward_funcs, model_name, {
            "base_label": base_label, "backend_used": self.backend.name, "backend_reason_es": self.backend.reason_es,
            "vllm_memory_fraction": self.fraction.as_dict() if self.fraction else None, "written_by": "el cuaderno L7.2 (celdas del alumno)"})
        # L7.2's trainer (labs.l72.trainer): the course's values pinned where Unsloth's GRPOConfig would swap its
        # own, TRL's "ref" adapter dropped (vLLM refuses its LoRA keys), trainer.args recorded in run.json.
        trainer = make_l72_trainer(profile, run, model, self.reward_funcs, course_data.to_dataset(splits["train"]),
                                   show=self.show, processing_class=tokenizer)
        rows, max_new = splits["eval"], profile.eval_max_new_tokens
        if self.on_gpu:
            from labs.l72.lora import evaluate_unsloth, save_adapter

            base = evaluate_unsloth(rows, model, tokenizer, run, "base", max_new)
            recipe.train(trainer, profile, run)
            adapter_dir = save_adapter(model, tokenizer, run)
            trained = evaluate_unsloth(rows, model, tokenizer, run, "trained", max_new,
                                       lora_request=model.load_lora(str(adapter_dir)), adapter_dir=adapter_dir)
        else:
            from labs.l72.lora import save_adapter

            with model.disable_adapter():  # the base model is the one without the adapter
                base = evaluation.evaluate(rows, lambda b: evaluation.generate_hf(model, tokenizer, b, max_new), run, "base")
            recipe.train(trainer, profile, run)
            save_adapter(model, tokenizer, run)
            trained = evaluation.evaluate(rows, lambda b: evaluation.generate_hf(model, tokenizer, b, max_new), run,
                                          "trained")
        summary = evaluation.summarize(run, base, trained, base_label)
        finish_resources(run, self.monitor, self.backend)
        step = trainer.state.global_step
        if self.full:
            l71.finish(run, profile, step)
        else:
            finish_demo(run, profile, step)
        rewards = [r["reward"] for r in run.metrics() if isinstance(r.get("reward"), (int, float))]
        self.show(f"{step} pasos; recompensa media por paso: {', '.join(f'{r:.2f}' for r in rewards)}. Exactitud en "
                  f"{summary['n']} problemas: base {summary['base_accuracy']:.0%}, entrenado {summary['trained_accuracy']:.0%} "
                  "(con tan pocos pasos no se espera mejora: la demo comprueba que el código corre).")
        return run.root


CPU_FLAG = "ENTRENAR_EN_CPU"  # the notebook's section-6 switch: train the missing CPU runs there


def full_run(profile: Profile | str | None = None, show=print, entrenar: bool = False) -> Path | None:
    """The whole L7.2 run: read when finished; else None with the terminal command, or on a CPU profile with
    ``entrenar`` run here, in a child process whose output goes to a log (``child_runs.run_lab_in_subprocess``)."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    chosen, _ = l72_profile(profile)
    run = l71.new_run(chosen, None, False, LAB)
    if run.is_finished():
        show(f"Leo el run terminado de L7.2: {run.root}")
        return run.root
    if chosen.use_cpu and entrenar:
        from labs.l72.child_runs import run_lab_in_subprocess

        return run_lab_in_subprocess("l72", chosen.name, show)  # minutes on a CPU profile
    if chosen.use_cpu:
        show(f"El run completo de L7.2 ({chosen.name}) no está terminado. En CPU son unos minutos: pon "
             f"{CPU_FLAG} = True en esta celda y vuelve a ejecutarla (corre en otro proceso), o lánzalo en una "
             f"terminal: {terminal_command(chosen)}.")
        return None
    state = f"sin terminar (paso {(run.status() or {}).get('step', 0)} de {chosen.max_steps})" if run.exists() else "sin empezar"
    show(f"El run completo de L7.2 está {state}. Lánzalo en una terminal: {terminal_command(chosen)} (unas "
         f"{_hours(chosen)}; continúa desde su último checkpoint). Después vuelve a ejecutar este cuaderno. "
         "(Para entrenarlo aquí, pon ENTRENAR_AQUI = True en la celda de la demo.)")
    return None


def l71_reference(profile: Profile | str | None = None, show=print, entrenar: bool = False) -> Path | None:
    """The L7.1 run L7.2 is compared with: on a GPU the route's own, L7.1's run with the student's profile (the
    graded main run), found, or the terminal command when missing (None); on a CPU profile L7.2's, run here.

    On the base route (``rtx5090-base``) L7.2 trains ``rtx5090`` while L7.1 trains the base model: the route
    makes no ``rtx5090`` L7.1 run, and one made only for this comparison would also compete to be graded. So
    the comparison reads the main run and says where the two recipes differ (``describe_settings_es``).
    """
    from labs.l71.notebook import terminal_command as terminal_command_l71
    from labs.l72.child_runs import ensure_l71_run
    from labs.l72.compare import find_lab_run, other_recipe_es

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    chosen, _ = l72_profile(profile)
    if chosen.use_cpu and entrenar:
        return ensure_l71_run(chosen.name, show)  # minutes, in another process
    found = find_lab_run("L7.1", chosen if chosen.use_cpu else profile)
    if found is None and chosen.use_cpu:
        show(f"No hay un run terminado de L7.1 con el perfil {chosen.name}. En CPU son unos minutos: pon "
             f"{CPU_FLAG} = True en esta celda y vuelve a ejecutarla, o lánzalo en una terminal: "
             f"{terminal_command_l71(chosen)}.")
        return None
    other = (f" L7.2 corre con {chosen.name}: la comparación dice en qué ajustes difieren las dos recetas."
             if chosen.name != profile.name else "")
    if found is not None:
        show(f"Comparo con tu run de L7.1 (perfil {profile.name}, el run principal): {found}.{other}")
        return found
    for line in other_recipe_es(profile):
        show(line)
    show(f"No hay un run terminado de L7.1 con tu perfil {profile.name} y tu receta. Lánzalo en una terminal: "
         f"{terminal_command_l71(profile)}. Sin él, la comparación de la sección 7 no se hace.")
    return None


def finish_demo(run: RunFolder, profile: Profile, step: int) -> None:
    """A demo ends finished, without checkpoints and without a grading report (it is not the lab's run)."""
    run.write_status(STATE_FINISHED, step, profile.max_steps)
    run.remove_checkpoints()
