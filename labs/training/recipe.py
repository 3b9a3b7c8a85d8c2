"""The GRPO recipe shared by every lab: config from a profile, trainer, callbacks, resume, failure.

``grpo_config_kwargs`` is the single place where a profile becomes ``GRPOConfig`` keywords; the
drift guard (tests/test_api_drift.py) checks them against both TRL releases the course supports.
``train`` runs the trainer inside a run folder (labs.core.runfolder): it appends every logged step to
``metrics.jsonl``, keeps ``status.json`` current, resumes from the newest checkpoint, and turns a
crash into a status record plus a Spanish message that says what to change (``labs.training.failures``).

The same pieces, one by one, for a notebook that writes ``GRPOConfig(...)`` and ``GRPOTrainer(...)`` in
its own cells: ``prepare_environment`` (before the trainer), ``run_folder_callbacks`` (its
``callbacks=``), ``resume_point`` and ``recorded_training`` (around ``trainer.train(...)``).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import traceback

from labs.core import distributed, resources
from labs.core.profiles import Profile
from labs.core.runfolder import STATE_FAILED, STATE_RUNNING, RunFolder
from labs.core.spanish import plural
from labs.training import checkpoints, metrics_resume, phases
from labs.training.failures import NonFiniteLoss, RunFailed, classify_failure  # the labs catch RunFailed here


def grpo_config_kwargs(profile: Profile, output_dir: str) -> dict:
    """Every keyword the course passes to ``trl.GRPOConfig`` for this profile."""
    kwargs = dict(
        output_dir=str(output_dir),
        # GRPO
        num_generations=profile.num_generations,
        max_completion_length=profile.max_completion_length,
        per_device_train_batch_size=profile.per_device_train_batch_size,
        gradient_accumulation_steps=profile.gradient_accumulation_steps,
        learning_rate=profile.learning_rate,
        beta=profile.beta,  # explicit: TRL's default is 0.0, which drops the KL term entirely
        loss_type=profile.loss_type,
        temperature=profile.temperature,
        scale_rewards=profile.scale_rewards,
        epsilon=profile.epsilon,
        max_steps=profile.max_steps,
        seed=profile.seed,
        # precision and device
        use_cpu=profile.use_cpu,
        bf16=profile.bf16,
        gradient_checkpointing=profile.gradient_checkpointing,
        # logging and checkpoints
        logging_steps=profile.logging_steps,
        save_strategy="steps",
        save_steps=profile.save_steps,
        save_total_limit=profile.save_total_limit,
        report_to=list(profile.report_to),
        log_completions=True,  # completions/completions_<step>.parquet: what the model wrote
        num_completions_to_print=0,
        # keep the `answer` column: correctness_reward reads it (this is TRL's default too)
        remove_unused_columns=False,
        # generation
        use_vllm=profile.use_vllm,
    )
    if profile.use_vllm:
        kwargs["vllm_importance_sampling_correction"] = profile.vllm_importance_sampling_correction
    if profile.bf16_weights:
        # A model passed by name loads in float32 unless told otherwise: twice the memory. On a CPU (the ci
        # profile where the CPU has bf16 units) the weights stay float32 and bf16=True means autocast only:
        # the float32 vLLM engine then receives exactly the trainer's weights (labs.training.vllm_cpu_shim).
        kwargs["model_init_kwargs"] = {"dtype": "bfloat16"}
    if profile.use_vllm and profile.vllm_mode == "server":
        # The server sizes its own memory and context (`trl vllm-serve --gpu_memory_utilization
        # --max_model_len`, see labs.training.launch); the trainer only needs to find it.
        kwargs.update(vllm_mode="server", vllm_server_host=profile.vllm_server_host,
                      vllm_server_port=profile.vllm_server_port)
    elif profile.use_vllm:
        kwargs.update(
            vllm_mode=profile.vllm_mode,
            vllm_gpu_memory_utilization=profile.vllm_gpu_memory_utilization,
            # Size vLLM's KV cache for prompt + completion, not the model's whole context.
            vllm_max_model_length=profile.vllm_max_model_length,
        )
    return kwargs


def lora_config(profile: Profile):
    """The LoRA adapter for profiles with ``use_lora`` (same rank, alpha and targets as L7.2)."""
    from peft import LoraConfig

    return LoraConfig(
        r=profile.lora_r,
        lora_alpha=profile.lora_alpha,
        target_modules=list(profile.lora_targets),
        task_type="CAUSAL_LM",
    )


def build_grpo_config(profile: Profile, output_dir: str):
    from trl import GRPOConfig

    return GRPOConfig(**grpo_config_kwargs(profile, output_dir))


def run_folder_callbacks(run: RunFolder) -> list:
    """The callbacks that keep ``run``'s bookkeeping: pass them as ``GRPOTrainer(callbacks=...)``.

    One ``RunFolderCallback``: it appends each logged step to ``metrics.jsonl`` (with the process's memory,
    ``labs.core.resources.step_memory``, and the seconds spent generating and in each reward function, once
    ``recorded_training`` times them), keeps ``status.json``
    at the step reached, and stops the run on a non-finite loss or gradient norm.
    """
    from transformers import TrainerCallback

    from labs.training.phases import PhaseTimes

    class RunFolderCallback(TrainerCallback):
        """Append each training log to metrics.jsonl and keep status.json at the step reached."""

        def __init__(self):
            self.run = run
            self.times = PhaseTimes()  # filled by the wrappers recorded_training installs
            self.timed = False
            self.memory = None  # the last step's, from on_step_end (TRL logs after the step ends)

        def on_step_begin(self, args, state, control, **kwargs):
            self.times.reset()

        def on_step_end(self, args, state, control, **kwargs):
            # What the step left resident, then the freed pages back to the kernel (resources.release_freed_memory):
            # recorded before the trim, so the curve shows what the process held, not what the trim left.
            self.memory = resources.step_memory()
            resources.release_freed_memory()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "train_runtime" in logs:  # the end-of-training summary is not a step
                return
            record = {"step": int(state.global_step), **{k: _plain(v) for k, v in logs.items()}}
            record.update(self.memory or resources.step_memory())
            if self.timed:
                record["course/generation_seconds"] = round(self.times.generation, 4)
                for name, seconds in self.times.rewards.items():
                    record[f"course/reward_seconds/{name}"] = round(seconds, 4)
            from labs.core.runfolder import append_jsonl

            # Under accelerate every process logs the same (already averaged) values; one writes them.
            if state.is_world_process_zero:
                append_jsonl(run.metrics_path, record)
                run.write_status(STATE_RUNNING, state.global_step, args.max_steps)
            for key in ("loss", "grad_norm"):
                value = logs.get(key)
                if isinstance(value, float) and not math.isfinite(value):
                    raise NonFiniteLoss(f"{key}={value} en el paso {state.global_step}")

    return [RunFolderCallback()]


def _run_folder_callback(trainer, run: RunFolder):
    """The trainer's RunFolderCallback for ``run``; added if the notebook's cell left it out."""
    for callback in trainer.callback_handler.callbacks:
        own = getattr(callback, "run", None)
        if isinstance(own, RunFolder) and own.root == run.root:
            return callback
    callback = run_folder_callbacks(run)[0]
    trainer.add_callback(callback)
    return callback


def _plain(value):
    try:
        return float(value) if not isinstance(value, (str, bool, int)) else value
    except (TypeError, ValueError):
        return str(value)


def _steps_es(steps: list[int]) -> str:
    return ("el paso " if len(steps) == 1 else "los pasos ") + ", ".join(map(str, steps))


def checkpoint_step(checkpoint) -> int:
    return int(str(checkpoint).rsplit("-", 1)[1])


def prepare_environment(profile: Profile, run: RunFolder) -> None:
    """What must happen before ``GRPOTrainer(...)`` builds its vLLM engine and its loggers."""
    from labs.training import console

    console.quiet_third_party()  # before TRL is imported: its vLLM-range warning fires at import
    if profile.use_vllm:
        from labs.training import vllm_cpu_shim

        vllm_cpu_shim.apply()  # no-op unless vLLM runs on its CPU back-end
        console.quiet_vllm_load_bar()  # vLLM's own English "Loading ... checkpoint shards" bar
        if vllm_cpu_shim.is_applied():
            console.quiet_numa_binding()  # the CPU engine's NUMA note (C++ on stderr), once
    if "wandb" in profile.report_to:
        # Online when logged in (WANDB_API_KEY or ~/.netrc); offline otherwise: no account needed, the run
        # folder keeps it and `wandb sync` uploads it later. WANDB_MODE set by the student wins.
        from labs.core.wandb_account import wandb_facts

        os.environ.setdefault("WANDB_MODE", "online" if wandb_facts()["logged_in"] else "offline")
        os.environ.setdefault("WANDB_DIR", str(run.root))
        os.environ.setdefault("WANDB_PROJECT", "grpo-course")
        os.environ.setdefault("WANDB_NAME", run.root.name)


def make_trainer(profile: Profile, run: RunFolder, model, reward_funcs, train_dataset, **extra):
    """A GRPOTrainer writing into ``run``; ``model`` is a path/id or a (PEFT) model object.

    The L7.1 notebook writes these same calls in its cells (``GRPOConfig(...)``, ``GRPOTrainer(...)``).
    """
    prepare_environment(profile, run)  # before TRL is imported (its vLLM-range warning fires at import)
    from trl import GRPOTrainer

    args = build_grpo_config(profile, str(run.checkpoints))
    if profile.use_lora and "peft_config" not in extra and isinstance(model, str):
        extra["peft_config"] = lora_config(profile)
    return GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=train_dataset,
        callbacks=run_folder_callbacks(run),
        **extra,
    )


@contextlib.contextmanager
def stop_signals_raise_keyboard_interrupt():
    """Ctrl+C (SIGINT) and ``kill`` (SIGTERM) stop training through our failure path.

    vLLM's engine installs its own SIGINT/SIGTERM handlers in this process, which swallow Ctrl+C; a
    run stopped by hand would then die without saying why. During ``trainer.train()`` both signals
    raise KeyboardInterrupt, which ``train`` records as "interrupted" before re-raising.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"señal {signal.Signals(signum).name}")

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def resume_point(run: RunFolder) -> str | None:
    """The newest checkpoint whose files are whole (None: start), dropping metrics logged after it and putting
    back, from the checkpoint's own log, the lines of steps up to it that ``metrics.jsonl`` lost.

    A newer checkpoint that a crash or a full disk left torn (``labs.training.checkpoints.problem``) is
    said, moved into ``checkpoints/_rotos/`` and skipped; a save killed half-way is dropped.
    """
    checkpoint, torn = checkpoints.newest_usable(run.checkpoints)
    main = distributed.is_main_process()  # under accelerate, only rank 0 writes the run folder
    distributed.wait_for_everyone()  # every rank has chosen before rank 0 moves anything
    if main:
        if checkpoints.remove_staging(run.checkpoints):
            print("[run] Quito un guardado de checkpoint que quedó a medias (no llegó a ser checkpoint).")
        for folder, why in torn:
            moved = checkpoints.set_aside(folder)
            print(f"[run] {folder.name} está roto ({why}): no lo uso y lo aparto en "
                  f"{moved.relative_to(run.root)} para que puedas mirarlo (bórralo cuando quieras).")
    distributed.wait_for_everyone()
    if checkpoint is None:
        if main and torn:
            dropped = metrics_resume.trim_after(run, 0)
            print(f"[run] No queda ningún checkpoint completo: empiezo desde el paso 0 "
                  f"({plural(dropped, 'paso registrado se repetirá', 'pasos registrados se repetirán')}).")
        return None
    if main:
        dropped = metrics_resume.trim_after(run, checkpoint_step(checkpoint))
        again = plural(dropped, "paso registrado después se repetirá", "pasos registrados después se repetirán")
        print(f"[run] Continúo desde {checkpoint.name} ({again}).")
        rebuilt, missing = metrics_resume.refill_until(run, checkpoint)
        if rebuilt:
            print(f"[run] metrics.jsonl había perdido {_steps_es(rebuilt)}: {'lo' if len(rebuilt) == 1 else 'los'} "
                  f"recupero del registro de {checkpoint.name} (trainer_state.json), sin los tiempos del curso.")
        if missing:
            print(f"[run] Sin registro en metrics.jsonl ni en {checkpoint.name}: {_steps_es(missing)}. "
                  f"Las curvas tendrán ese hueco; el entrenamiento sigue igual.")
    return str(checkpoint)


@contextlib.contextmanager
def recorded_training(trainer, profile: Profile, run: RunFolder, resume_from: str | None = None):
    """Wrap ``trainer.train(...)``: ``status.json`` follows it, and a crash leaves its reason there.

    Before: the run is marked running at the step it resumes from, and generation is timed for
    ``metrics.jsonl``. During: Ctrl+C and SIGTERM stop through here. On an exception: ``status.json``
    records the kind ("oom", "disk", ...) and a Spanish message of what to change, and ``RunFailed``
    carries that message. After: the run is marked "trained" (``finished`` comes after evaluation).
    Under ``accelerate launch`` only the main process writes ``status.json`` and prints the step lines.
    """
    from labs.training import console

    main = distributed.is_main_process()
    max_steps = trainer.args.max_steps
    callback = _run_folder_callback(trainer, run)
    phases.time_generation(trainer, callback.times)
    phases.time_rewards(trainer, callback.times, profile.reward_timeout_s)  # a hung reward stops the run
    callback.timed = True
    checkpoints.save_atomically(trainer)  # a kill during a save leaves the previous checkpoint newest
    checkpoints.skip_archive_checksums()  # half the time of writing the optimizer's state, and unread
    watch = None
    if main:
        watch = phases.SlowStepWatch(callback.times).start()  # says what a far-too-long step is stuck in
        console.use_step_lines(trainer, max_steps, times=callback.times, watch=watch)  # not TRL's dicts
        run.write_status(STATE_RUNNING, checkpoint_step(resume_from) if resume_from else 0, max_steps)
    try:
        with stop_signals_raise_keyboard_interrupt():
            yield
    except BaseException as exc:
        if watch is not None:
            watch.stop()
        failure = classify_failure(exc, profile)
        if not main:
            raise RunFailed(f"[{failure.kind}] paso {trainer.state.global_step}: {failure.message_es}") from exc
        run.write_status(
            STATE_FAILED,
            trainer.state.global_step,
            max_steps,
            kind=failure.kind,
            message_es=failure.message_es,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            traceback=traceback.format_exc()[-8000:],
            **failure.details,
        )
        raise RunFailed(f"[{failure.kind}] paso {trainer.state.global_step}: {failure.message_es}") from exc
    # "finished" is written by the lab once evaluation and report are done too.
    if watch is not None:
        watch.stop()
    if main:
        run.write_status(STATE_RUNNING, trainer.state.global_step, max_steps, phase="trained")


def train(trainer, profile: Profile, run: RunFolder) -> None:
    """Train (resuming from the newest checkpoint if any); record success or the reason for failure."""
    checkpoint = resume_point(run)
    with recorded_training(trainer, profile, run, checkpoint):
        trainer.train(resume_from_checkpoint=checkpoint)


# Why each non-obvious GRPOConfig keyword has the value it has (shown as a table in the L7.1 notebook).
KNOBS_ES = {
    "num_generations": "G de GRPO: respuestas por prompt. La media del grupo es la baseline (L6); más G, mejor estimación y más cómputo.",
    "per_device_train_batch_size": "Cuenta completions, no prompts (TRL 1.x). Con gradient_accumulation_steps da las completions de cada paso.",
    "gradient_accumulation_steps": "Micro-lotes acumulados por paso de optimizador; generation_batch_size = batch x acumulación.",
    "max_completion_length": "Tokens máximos de cada respuesta. Si muchas llegan al tope (completions/clipped_ratio), el modelo no termina de razonar.",
    "learning_rate": "RL es frágil: ~1e-6 si se entrenan todos los pesos; con LoRA, unas diez veces más (~1e-5, el perfil rtx5090). El LR de SFT (2e-4) colapsa la política.",
    "beta": "Peso de la KL hacia el modelo de referencia. TRL usa 0.0 por defecto (sin KL ni modelo de referencia); el curso fija 0.04.",
    "loss_type": "'dapo' (por defecto en TRL): normaliza por tokens del lote, no por la longitud de cada respuesta como el objetivo original de L6.",
    "temperature": "Muestreo de las G respuestas: sin diversidad dentro del grupo no hay ventaja que aprender.",
    "scale_rewards": "Cómo se escalan las ventajas (L6): 'group' divide por la desviación de cada grupo, 'batch' por la del lote, 'none' no divide (lo que propone Dr. GRPO).",
    "epsilon": "Rango del recorte del cociente de probabilidades (L6): cuánto puede moverse la política en un paso antes de que el gradiente se anule.",
    "use_vllm": "vLLM genera los rollouts (mucho más rápido que generate de transformers).",
    "vllm_mode": "'colocate': vLLM vive en el mismo proceso y comparte la GPU (o la RAM en CPU) con el entrenamiento; 'server' lo lleva a una GPU propia (L7.3).",
    "vllm_gpu_memory_utilization": "Fracción de memoria reservada para vLLM (pesos + caché KV); el resto queda para entrenar. OOM: bájala.",
    "vllm_importance_sampling_correction": "Una pasada más del modelo por cada respuesta para corregir la diferencia entre las probabilidades de vLLM y las del entrenador. En GPU (bf16) hace falta; en CPU ambos calculan en float32 con los mismos pesos y el perfil la apaga.",
    "vllm_max_model_length": "Prompt + respuesta: dimensiona la caché KV para lo que GRPO genera, no para todo el contexto del modelo.",
    "log_completions": "Guarda lo que escribió el modelo en cada paso (parquet) para leerlo después.",
    "remove_unused_columns": "False: mantiene la columna 'answer', que correctness_reward necesita.",
    "use_cpu": "Solo en los perfiles de CPU: sin GPU, GRPOConfig() falla si no se pide CPU y bf16=False.",
    "bf16": "En GPU, pesos y activaciones en bfloat16. En CPU, float32; el perfil ci, en una CPU con instrucciones bf16, calcula los productos de matrices en bf16 (autocast) con los pesos en float32.",
    "model_init_kwargs": "Carga el modelo en bfloat16: pasado por nombre, TRL lo cargaría en float32 (el doble de memoria).",
    "gradient_checkpointing": "Recalcula activaciones en el backward: menos memoria, algo más de tiempo (en CPU solo cuesta tiempo).",
    "save_steps": "Cada cuántos pasos se guarda un checkpoint; relanzar el mismo comando continúa desde el último.",
}
