"""Lesson 7.8's trap, run: "LR de SFT (2e-4) en GRPO -> colapso inmediato", beside the course's rate.

Two runs of the L7.1 recipe that differ only in ``learning_rate``: the profile's (the course's rate) and
``TRAP_LEARNING_RATE`` (2e-4, the usual learning rate of a LoRA SFT, Unsloth's among others). ``compare``
returns both runs' logged metrics step by step and the completions of their last step (``Comparison``).

* On a CPU profile (``cpu``, ``ci``) both train here, ``CPU_STEPS`` steps each with the same seed: step 1 is the
  same batch in both runs (no update has happened yet), every later step shows what the updates did. They
  generate with ``transformers`` instead of vLLM: a second colocated engine in a process that already holds the
  lab's (the notebook's kernel) is not reliably freed, and the trap is about the learning rate, not the engine.
  No checkpoint is written (a few steps that are never resumed; TRL's final save of SmolLM2 with its optimizer
  state is 1.6 GB). An unfinished trap run (a kernel stopped in the middle) is trained again from the start.
* On a GPU profile a run takes hours, so the trap is a terminal job (``terminal_command``): the course-rate side
  is the main L7.1 run itself (its first ``GPU_STEPS`` steps) and the trap run trains the same profile at 2e-4 for
  those steps; ``compare`` reads both once they exist and returns None (with the command) before.

The trap's runs live under ``runs/_trampa/`` with the lab label ``TRAP_LAB``: the C2b self-check skips folders
whose name starts with "_", and the grader never takes a run whose lab is not L7.1 for the main one.
"""

from __future__ import annotations

import gc
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from labs.core.metrics import merged_rows
from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import RUN_JSON, STATE_FINISHED, RunFolder, read_json
from labs.core.spanish import duration_es
from labs.l71.lab import Lab, new_run
from labs.training import completions as completion_logs

TRAP_LEARNING_RATE = 2e-4
TRAP_LAB = "L7.8-trampa"  # lesson 7.8, "Trampas comunes"; not "L7.1", so never the graded main run
TRAP_DIR = "_trampa"
CPU_STEPS = 3  # step 1 (no update yet) plus two steps after one and two updates
# The collapse signal the L7.1 notebook claims and tests/test_l71_trap.py asserts on ci: after the first update the
# KL at 2e-4 is at least this many times the course rate's. Measured on ci (December 3, 2-core Intel Xeon with bf16
# units), mean of steps 2-3: about 200 times under ci's bf16 autocast and 145 with bf16=False (what a CPU without
# bf16 units runs), both with two threads; 45 with one thread (OMP_NUM_THREADS=1, as each of the suite's two
# workers runs: other sums, other samples), 37 to 61 step by step.
KL_FACTOR = 10
GPU_STEPS = 20
# What each step row shows: (metrics.jsonl key, Spanish column header).
COLUMNS = (
    ("kl", "KL con la referencia"),
    ("reward", "recompensa media"),
    ("completions/mean_length", "longitud media (tokens)"),
    ("completions/clipped_ratio", "fracción que llega al tope de tokens"),
    ("grad_norm", "grad_norm"),
)


def lr_tag(learning_rate: float) -> str:
    """``2e-4`` for 0.0002: how the run names and the tables write a learning rate."""
    mantissa, exponent = f"{learning_rate:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def trap_run_name(profile: Profile, learning_rate: float) -> str:
    return f"{TRAP_DIR}/l71-{profile.name}-lr{lr_tag(learning_rate)}"


def terminal_command(profile: Profile, steps: int = GPU_STEPS) -> str:
    """The command that trains the trap run of a GPU profile (a short holdout: the trap is read from the curves)."""
    from labs.core.profiles import student_command

    return (f"{student_command('l71', profile)} --lab {TRAP_LAB} --run-name {trap_run_name(profile, TRAP_LEARNING_RATE)}"
            f" --set learning_rate={TRAP_LEARNING_RATE:g} --set max_steps={steps} --set eval_size=32")


@dataclass
class Side:
    """One run of the comparison: its learning rate, its logged steps, the completions of its last step."""

    learning_rate: float
    root: Path
    rows: list[dict]
    last_completions: list[str] = field(default_factory=list)

    def series(self, key: str) -> list:
        return [row.get(key) for row in self.rows]

    def mean_after_first(self, key: str) -> float | None:
        """The mean of ``key`` over the steps after the first (the steps some update has changed)."""
        values = [v for v in self.series(key)[1:] if isinstance(v, (int, float))]
        return sum(values) / len(values) if values else None


@dataclass
class Comparison:
    profile: str
    steps: int
    course: Side
    trap: Side
    same_batch_first: bool  # both trained here with one seed: step 1 is the same batch in both

    def kl_ratio(self) -> float | None:
        """Mean KL after the first step at 2e-4 over the same at the course's rate."""
        trap, course = self.trap.mean_after_first("kl"), self.course.mean_after_first("kl")
        return trap / course if trap is not None and course else None

    def table_es(self) -> str:
        """Each metric at the course's rate and at 2e-4, one column per step (markdown)."""
        numbers = [row.get("step", i + 1) for i, row in enumerate(self.course.rows[: self.steps])]
        numbers += list(range(len(numbers) + 1, self.steps + 1))
        lines = ["| métrica | learning_rate | " + " | ".join(f"paso {n}" for n in numbers) + " |",
                 "|---|---|" + "---|" * self.steps]
        for key, name in COLUMNS:
            for side in (self.course, self.trap):
                values = side.series(key) + [None] * (self.steps - len(side.rows))
                cells = ["—" if v is None else f"{v:.3g}" for v in values[: self.steps]]
                lines.append(f"| {name} | {lr_tag(side.learning_rate)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def _after_first(self) -> str:
        """The logged steps after the first compared one, as the sentences name them ("2 a 3", "20 a 200")."""
        steps = [row.get("step", i + 1) for i, row in enumerate(self.course.rows)]
        return f"{steps[1]} a {steps[-1]}" if len(steps) > 1 else "—"

    def verdict_es(self) -> list[str]:
        """What the two runs measured, in Spanish sentences (only numbers read from the runs)."""
        a, b = lr_tag(self.course.learning_rate), lr_tag(self.trap.learning_rate)
        out = []
        if self.same_batch_first:
            same = self.course.rows[0].get("reward") == self.trap.rows[0].get("reward")
            out.append(f"Paso 1, antes de ninguna actualización: el mismo lote en los dos runs (recompensa "
                       f"{self.course.rows[0].get('reward'):.3g} y {self.trap.rows[0].get('reward'):.3g}"
                       f"{'' if same else ', distinta: algo más que el learning rate cambió'}).")
        kl_a, kl_b, ratio = self.course.mean_after_first("kl"), self.trap.mean_after_first("kl"), self.kl_ratio()
        if ratio is not None:
            reading = ("la política se aleja de la referencia desde la primera actualización" if ratio >= KL_FACTOR
                       else f"menos de {KL_FACTOR} veces: aquí la trampa no se ve con claridad")
            out.append(f"KL media de los pasos {self._after_first()}: {kl_a:.3g} con {a} y {kl_b:.3g} con {b}, "
                       f"{ratio:.0f} veces más: {reading}.")
        for key, name in (("reward", "Recompensa"), ("completions/clipped_ratio", "Fracción de respuestas cortadas en el tope")):
            x, y = self.course.mean_after_first(key), self.trap.mean_after_first(key)
            if x is not None and y is not None:
                out.append(f"{name}, media de los pasos {self._after_first()}: {x:.3g} con {a} y {y:.3g} con {b}.")
        return out

    def completions_es(self, per_side: int = 4, width: int = 160) -> str:
        lines = []
        for side in (self.course, self.trap):
            lines.append(f"learning_rate {lr_tag(side.learning_rate)}, paso {len(side.rows)}:")
            for text in side.last_completions[:per_side]:
                flat = " ".join(text.split())
                lines.append(f"  · {flat[:width]}{'…' if len(flat) > width else ''}")
        return "\n".join(lines)


def _rows_by_step(root: Path, last_step: int | None = None) -> dict[int, dict]:
    """The run's logged metrics, one merged row per step (``labs.core.metrics.merged_rows``), up to ``last_step``."""
    return {step: {**row, "step": step} for step, row in merged_rows(RunFolder(root).metrics())
            if last_step is None or step <= last_step}


def _side(root: Path, learning_rate: float | None = None, steps: int | None = None,
          only: list[int] | None = None) -> Side:
    """One side: its rows up to step ``steps``, or at exactly the steps ``only`` (the steps both runs logged)."""
    run = RunFolder(root)
    by_step = _rows_by_step(root, steps)
    rows = [by_step[s] for s in only] if only is not None else [by_step[s] for s in sorted(by_step)]
    if learning_rate is None:
        learning_rate = read_json(run.path(RUN_JSON))["grpo_config"]["learning_rate"]
    logged = completion_logs.logged(root)
    last = logged.get(rows[-1]["step"] if rows else 0) or {}
    texts = [c.text for group in last.values() for c in group]
    return Side(learning_rate, root, rows, texts)


def _no_checkpoints():
    """A callback that cancels every checkpoint save (the trap's runs are never resumed)."""
    from transformers import TrainerCallback

    class NoCheckpoints(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_save = False  # after the default flow callback, which asks for one at the last step

    return NoCheckpoints()


def train_here(profile: Profile, learning_rate: float, steps: int = CPU_STEPS) -> Path:
    """Train (or read, when finished) one CPU trap run: the profile at ``learning_rate``, ``steps`` steps, no vLLM."""
    name = trap_run_name(profile, learning_rate)
    folder = new_run(profile, name)
    if folder.exists() and not folder.is_finished():
        print(f"[trampa] {folder.root} quedó sin terminar: lo entreno otra vez desde el principio.")
        shutil.rmtree(folder.root)
    lab = Lab(profile, run_name=name, lab=TRAP_LAB, learning_rate=learning_rate, max_steps=steps, use_vllm=False)
    if lab.finished:
        print(f"[trampa] Leo el run ya terminado {lab.run.root} (learning_rate {lr_tag(learning_rate)}).")
        return lab.run.root
    try:
        lab.load_data()
        lab.format_pass()
        print(f"[trampa] learning_rate {lr_tag(learning_rate)}: {steps} pasos -> {lab.run.root}")
        lab.build_trainer()  # the run is not finished (returned above), so there is a trainer
        lab.trainer.add_callback(_no_checkpoints())
        lab.train()
        lab.run.write_status(STATE_FINISHED, lab.trainer.state.global_step, steps)
    finally:
        lab.close()
        lab.trainer = lab.generate = None  # the model, its reference copy and AdamW's state: free them now
        gc.collect()
    return lab.run.root


def cpu_estimate_es(profile: Profile, steps: int = CPU_STEPS) -> str:
    """How long the two CPU trap runs take, said before they start (Spanish): from the seconds per step the main
    run measured on this profile (its median ``step_time``), or, before it has trained, that nothing is measured."""
    main = new_run(profile)
    times = sorted(r["step_time"] for r in main.metrics() if isinstance(r.get("step_time"), (int, float)))
    work = f"2 runs de {steps} pasos, más cargar el modelo{' y el pase de formato' if profile.format_pass else ''}"
    if not times:
        return (f"{work}; en este perfil aún no hay un paso medido (tu run principal no ha entrenado), así que no "
                "sé cuánto: en CPU, varios minutos por lo menos")
    median = times[len(times) // 2]
    return (f"{work}: unos {duration_es(2 * steps * median)} de pasos a los {median:.0f} s por paso de tu run "
            f"principal ({main.root.name}, mediana; orientativo: la trampa genera sin vLLM)")


def compare(profile: Profile | str | None = None, steps: int | None = None,
            entrenar_aqui: bool = False) -> Comparison | None:
    """The trap beside the course's rate, measured (see the module). None on a GPU profile whose trap run is missing,
    and on a CPU profile whose trap runs are not finished unless ``entrenar_aqui`` (the notebook's switch): a Run All
    trains nothing it was not asked to, and the cell says first how long it would take."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    if profile.use_cpu:
        steps = steps or CPU_STEPS
        names = [trap_run_name(profile, lr) for lr in (profile.learning_rate, TRAP_LEARNING_RATE)]
        done = all(RunFolder(runs_dir() / n).is_finished() for n in names)
        if not done:
            estimate = cpu_estimate_es(profile, steps)
            if not entrenar_aqui:
                print(f"La trampa entrena aquí {estimate}. Para verla, pon ENTRENAR_TRAMPA = True en esta celda y "
                      "vuelve a ejecutarla (cuando termine, la celda solo lee sus runs).")
                return None
            print(f"[trampa] Entreno {estimate}.")
        course = train_here(profile, profile.learning_rate, steps)
        trap = train_here(profile, TRAP_LEARNING_RATE, steps)
        return Comparison(profile.name, steps, _side(course, profile.learning_rate),
                          _side(trap, TRAP_LEARNING_RATE), same_batch_first=True)
    steps = steps or GPU_STEPS
    main, trap = new_run(profile), RunFolder(runs_dir() / trap_run_name(profile, TRAP_LEARNING_RATE))
    reached = max(_rows_by_step(main.root), default=0)  # the main run's last logged step, not its row count
    if not trap.is_finished() or reached < steps:
        from labs.vram.timeplan import time_plan

        planned = duration_es(time_plan(profile.replace(max_steps=steps, eval_size=32)).hours * 3600)
        print(f"Para ver la trampa en {profile.name}: el run principal ({main.root}) necesita {steps} pasos "
              f"(va por el {reached}) y el de 2e-4 ({trap.root}) debe haber terminado "
              f"({'terminado' if trap.is_finished() else 'aún no'}). Lánzalo en una terminal (unos {planned}, "
              f"planificado):\n  {terminal_command(profile, steps)}")
        return None
    differ = recipe_differences(main.root, trap.root)
    if differ:
        print(f"Además del learning rate, tu run principal y el de la trampa difieren en: {', '.join(differ)} "
              "(los dos entrenan tus ajustes y recompensas guardados al lanzarse: los cambiaste entre uno y otro).")
    # step with step: a main run that logs every 10 steps is compared at steps 10 and 20, not rows 1-20 with 1-20
    common = sorted(_rows_by_step(main.root, steps).keys() & _rows_by_step(trap.root, steps).keys())
    if len(common) < 2:
        print(f"Tu run principal y el de la trampa comparten {len(common)} paso(s) registrado(s) hasta el {steps} "
              "(su logging_steps difiere): no hay curva que comparar paso a paso.")
        return None
    return Comparison(profile.name, len(common), _side(main.root, steps=steps, only=common),
                      _side(trap.root, steps=steps, only=common), same_batch_first=False)


def recipe_differences(a: Path, b: Path) -> list[str]:
    """What two runs' ``run.json`` record differently, besides what the trap changes on purpose."""
    ra, rb = (read_json(RunFolder(r).path(RUN_JSON)) for r in (a, b))
    ga, gb = ra.get("grpo_config") or {}, rb.get("grpo_config") or {}
    keys = sorted(k for k in set(ga) | set(gb) if ga.get(k) != gb.get(k)
                  and k not in ("learning_rate", "max_steps", "output_dir"))
    if ra.get("reward_functions") != rb.get("reward_functions") or ra.get("reward_sources") != rb.get("reward_sources"):
        keys.append("las funciones de recompensa")
    return keys
