"""The model's own words: what it wrote during training, and before/after GRPO on one holdout problem.

Where the text comes from (TRL 1.x, ``GRPOConfig(log_completions=True)``, set for every profile by
``recipe.grpo_config_kwargs``): at each logged step the main process writes
``<output_dir>/completions/completions_<step:05d>.parquet``, one row per completion of the step's last
generation batch (so at most ``generation_batch_size`` rows a step: 4 on ``ci``, 32 on ``rtx5090``), with
the columns ``step``, ``prompt`` and ``completion`` (chat messages), one column per reward function (its
unweighted value) and ``advantage``. The course's ``output_dir`` is the run folder's ``checkpoints/``;
``RunFolder.remove_checkpoints`` deletes only the ``checkpoint-*`` folders, so these files stay.
The holdout's greedy answers before and after training are ``eval/base.jsonl`` and ``eval/trained.jsonl``.

API (for the L7.1 and E2 notebooks):

* ``over_training(run_root)``: for one prompt, its completions at the first, middle and last logged step
  where it was generated, each with its rewards (``TrainingSample`` list); ``over_training_es`` prints them.
* ``before_after(run_root)``: the base and the trained model's answers to the same holdout problem
  (``BeforeAfter``); ``before_after_es`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labs.core.runfolder import CHECKPOINTS_DIR, EVAL_BASE, EVAL_TRAINED, RUN_JSON, read_json, read_jsonl

COMPLETIONS_SUBDIR = "completions"  # TRL's folder name under output_dir
_NOT_REWARDS = {"step", "prompt", "completion", "advantage", "image", "images"}


@dataclass
class Completion:
    text: str
    rewards: dict[str, float]  # reward function name -> its value for this completion
    advantage: float | None

    @property
    def total(self) -> float:
        return round(sum(self.rewards.values()), 6)  # what GRPOTrainer sums with unit reward_weights


@dataclass
class TrainingSample:
    """The completions of one prompt at one logged step, best-paid first."""

    step: int
    question: str
    completions: list[Completion] = field(default_factory=list)


@dataclass
class BeforeAfter:
    """One holdout problem answered by the base model and by the trained one (greedy, same prompt)."""

    id: str
    gold: int
    question: str | None
    base: dict  # an eval record: completion, extracted, correct, format_ok, length
    trained: dict


def completion_files(run_root: str | Path) -> list[Path]:
    """TRL's per-step completion logs of a run, oldest step first."""
    where = Path(run_root) / CHECKPOINTS_DIR / COMPLETIONS_SUBDIR
    return sorted(where.glob("completions_*.parquet")) if where.is_dir() else []


def _question(prompt) -> str:
    """The user turn of a conversational prompt (or the prompt itself when it is plain text)."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in list(prompt) if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""


def _reward_names(run_root: Path, columns) -> list[str]:
    try:
        names = read_json(run_root / RUN_JSON).get("reward_functions") or []
    except (FileNotFoundError, ValueError):
        names = []
    names = [n.get("name") if isinstance(n, dict) else n for n in names]
    return [n for n in names if n in columns] or [c for c in columns if c not in _NOT_REWARDS]


def logged(run_root: str | Path) -> dict[int, dict[str, list[Completion]]]:
    """Every logged completion: ``{step: {question: [Completion, ...]}}`` (steps and prompts in order)."""
    import pandas as pd

    from rewards import completion_text

    root = Path(run_root)
    out: dict[int, dict[str, list[Completion]]] = {}
    for path in completion_files(root):
        frame = pd.read_parquet(path)
        names = _reward_names(root, list(frame.columns))
        for rec in frame.to_dict("records"):
            rewards = {n: float(rec[n]) for n in names if rec.get(n) is not None}
            advantage = rec.get("advantage")
            item = Completion(completion_text(_messages(rec.get("completion"))), rewards,
                              None if advantage is None else float(advantage))
            # a file per step; a resumed run rewrites the steps after its checkpoint, so one file wins
            out.setdefault(int(rec["step"]), {}).setdefault(_question(_messages(rec.get("prompt"))), []).append(item)
    return dict(sorted(out.items()))


def _messages(value):
    """Parquet hands chat messages back as numpy arrays of dicts; make them plain lists."""
    if value is None or isinstance(value, str):
        return value
    return [dict(m) for m in list(value)]


def _first_middle_last(items: list) -> list:
    if len(items) <= 3:
        return list(items)
    return [items[0], items[(len(items) - 1) // 2], items[-1]]


def over_training(run_root: str | Path) -> tuple[list[TrainingSample], bool]:
    """For one prompt: its completions at the first, middle and last logged step that generated it.

    The prompt is the one generated at the most logged steps (the earliest on a tie). Returns
    ``(samples, same_prompt)``; when no prompt was generated at two logged steps (a short run over a large
    train set sees each problem once), ``same_prompt`` is False and each sample is the first prompt of the
    first, middle and last logged step. Empty when the run logged no completions.
    """
    steps = logged(run_root)
    if not steps:
        return [], False
    seen: dict[str, list[int]] = {}
    for step, by_question in steps.items():
        for question in by_question:
            seen.setdefault(question, []).append(step)
    question, at = max(seen.items(), key=lambda kv: len(kv[1]))  # max keeps the first of equals: the earliest
    if len(at) >= 2:
        chosen = [(s, question) for s in _first_middle_last(at)]
        same = True
    else:
        chosen = [(s, next(iter(steps[s]))) for s in _first_middle_last(list(steps))]
        same = False
    samples = [TrainingSample(s, q, sorted(steps[s][q], key=lambda c: -c.total)) for s, q in chosen]
    return samples, same


def before_after(run_root: str | Path, problem_id: str | None = None, questions: dict | None = None) -> BeforeAfter | None:
    """The base and trained answers to one holdout problem (None until both evaluations exist).

    ``problem_id`` picks the problem; by default the first that went from wrong to right, else the first
    that went from right to wrong, else the first. ``questions`` (id -> text) adds the question's text.
    """
    root = Path(run_root)
    if not ((root / EVAL_BASE).exists() and (root / EVAL_TRAINED).exists()):
        return None
    base = {r["id"]: r for r in read_jsonl(root / EVAL_BASE)}
    trained = {r["id"]: r for r in read_jsonl(root / EVAL_TRAINED)}
    common = [i for i in base if i in trained]
    if not common:
        return None
    if problem_id is None:
        improved = [i for i in common if trained[i]["correct"] and not base[i]["correct"]]
        worse = [i for i in common if base[i]["correct"] and not trained[i]["correct"]]
        problem_id = (improved or worse or common)[0]
    elif problem_id not in base or problem_id not in trained:
        raise KeyError(f"El problema {problem_id!r} no está en las dos evaluaciones de {root}.")
    return BeforeAfter(problem_id, base[problem_id]["gold"], (questions or {}).get(problem_id),
                       base[problem_id], trained[problem_id])


def _short(text: str, width: int) -> str:
    text = text.strip()
    return text if len(text) <= width else text[:width] + f"… [{len(text) - width} caracteres más]"


def over_training_es(samples: list[TrainingSample], same_prompt: bool, width: int = 500) -> str:
    """The samples in Spanish: per step, the best- and the worst-paid completion of the prompt."""
    if not samples:
        return "Este run no registró completions (¿log_completions=False?)."
    lines = []
    if same_prompt:
        lines.append(f"El mismo problema en {len(samples)} pasos registrados:\n\n{_short(samples[0].question, width)}\n")
    else:
        lines.append("Ningún problema se generó en dos pasos registrados (cada uno se ve una vez en este run): "
                     "cada paso muestra el suyo.\n")
    for s in samples:
        totals = [c.total for c in s.completions]
        lines.append(f"── Paso {s.step}: {len(totals)} respuestas, recompensa total media {sum(totals) / len(totals):.2f} "
                     f"(mejor {max(totals):.2f}, peor {min(totals):.2f})")
        if not same_prompt:
            lines.append(f"Problema: {_short(s.question, width)}")
        picks = [("mejor pagada", s.completions[0])]
        if len(s.completions) > 1:
            picks.append(("peor pagada", s.completions[-1]))
        for label, c in picks:
            paid = ", ".join(f"{k}={v:.2f}" for k, v in c.rewards.items())
            lines.append(f"  [{label}: {paid}]\n  {_short(c.text, width)}")
        lines.append("")
    return "\n".join(lines)


def before_after_es(pair: BeforeAfter | None, width: int = 800) -> str:
    if pair is None:
        return "Aún no están las dos evaluaciones (eval/base.jsonl y eval/trained.jsonl) de este run."
    head = f"Problema {pair.id} del holdout (respuesta de oro: {pair.gold})"
    lines = [head + (f":\n{_short(pair.question, width)}" if pair.question else ".")]
    for label, rec in (("Modelo base", pair.base), ("Modelo entrenado", pair.trained)):
        verdict = "acierta" if rec["correct"] else "falla"
        lines.append(f"\n── {label}: {verdict} (extraído: {rec.get('extracted')}, formato "
                     f"{'correcto' if rec.get('format_ok') else 'incorrecto'}, {rec.get('length')} tokens)\n"
                     f"{_short(rec.get('completion') or '', width)}")
    return "\n".join(lines)
