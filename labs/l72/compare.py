"""L7.1 against L7.2, side by side from their run folders (memory, seconds per step, reward, accuracy).

For the notebook ``notebooks/L7_2_unsloth_standby.ipynb``: find (or run, in a child process) the L7.1
reference, read one record per run folder, and show them as a table, Spanish sentences (including where
the two runs' training settings differ: :func:`describe_settings_es`) and a figure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.resources import RESOURCES_JSON, read_resources
from labs.core.runfolder import RUN_JSON, RunFolder, read_json
from labs.l71 import recipe_identity
from labs.l72.trainer import NOT_COMPARED

# The settings two runs must share for a side-by-side comparison to mean anything (the model may differ:
# L7.2 loads the Unsloth copy of the same weights on the GPU).
COMPARABLE_FIELDS = ("data_source", "train_size", "eval_size", "max_prompt_tokens", "data_seed", "num_generations",
                     "max_completion_length", "per_device_train_batch_size", "gradient_accumulation_steps",
                     "learning_rate", "beta", "loss_type", "temperature", "max_steps", "seed", "format_pass",
                     "eval_max_new_tokens", "use_vllm")


def _finished_runs(lab: str, profile: Profile, root) -> list[tuple[float, Path, dict]]:
    """(mtime of run.json, folder, record) of every finished run of ``lab`` with ``profile``'s name, newest last."""
    root = Path(root) if root is not None else runs_dir()
    found = []
    for child in root.iterdir() if root.is_dir() else ():
        folder = RunFolder(child)
        try:
            record = read_json(folder.path(RUN_JSON))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue
        if (record.get("lab") == lab and (record.get("profile") or {}).get("name") == profile.name
                and folder.is_finished()):
            found.append((folder.path(RUN_JSON).stat().st_mtime, child, record))
    return sorted(found, key=lambda f: (f[0], str(f[1])))


def find_lab_run(lab: str, profile: Profile | str, root: str | os.PathLike | None = None) -> Path | None:
    """The newest finished run of ``lab`` under the runs folder made with the recipe it should have, or None.

    L7.1's run is matched by the student's recipe (``labs.l71.recipe_identity``: the saved knobs, else the
    profile's, and the saved reward functions' sources, else the course's), the one ``python -m labs l71`` trains;
    the other :data:`COMPARABLE_FIELDS` must be the profile's. Another lab's run, by the profile's values of
    :data:`COMPARABLE_FIELDS` (an L7.1 run with ``--set max_steps=2`` is not a reference for L7.2).
    """
    from labs.l71 import recipe_identity
    from labs.l71.settings import LESSON_KNOBS

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    recipe = recipe_identity.saved(profile) if lab == "L7.1" else None
    wanted = {k: getattr(profile, k) for k in COMPARABLE_FIELDS if recipe is None or k not in LESSON_KNOBS}
    for _, child, record in reversed(_finished_runs(lab, profile, root)):
        saved = record.get("profile") or {}
        if not all(saved.get(k) == v for k, v in wanted.items()):
            continue
        if recipe is None or (recipe_identity.of_record(record) or {}).get("id") == recipe["id"]:
            return child
    return None


def other_recipe_es(profile: Profile | str, root: str | os.PathLike | None = None) -> list[str]:
    """When no finished L7.1 run trained the student's recipe but one trained another: which, and every difference."""
    from labs.l71 import recipe_identity

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    runs = _finished_runs("L7.1", profile, root)
    if not runs:
        return []
    _, child, record = runs[-1]
    have = recipe_identity.of_record(record) or {}
    lines = recipe_identity.differences_es(have, recipe_identity.saved(profile), f"{child.name}", "tu receta guardada")
    return [f"El run terminado de L7.1 {child.name} entrenó otra receta que la que tienes guardada ("
            + "; ".join(lines) + "): no lo comparo. Para entrenar la tuya, en una terminal: python -m labs l71 "
            f"--profile {profile.name} --fresh."] if lines else []


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if isinstance(v, (int, float)))
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def lab_record(run_root: str | os.PathLike) -> dict:
    """One row of the comparison, read from a run folder only."""
    folder = RunFolder(run_root)
    run = read_json(folder.path(RUN_JSON))
    metrics = folder.metrics()
    rewards = [r["reward"] for r in metrics if isinstance(r.get("reward"), (int, float))]
    tail = rewards[-max(1, len(rewards) // 4):] if rewards else []
    try:
        summary = read_json(folder.path("eval/summary.json"))
    except (FileNotFoundError, json.JSONDecodeError):
        summary = {}
    res = read_resources(folder.root) or {}
    gpu = res.get("gpu") or {}
    on_gpu = not (run.get("profile") or {}).get("use_cpu", True)
    if on_gpu:
        memory, memory_kind = gpu.get("device_used_by_run_gib"), "GPU (pico de memoria ocupada)"
    else:
        memory, memory_kind = res.get("peak_rss_gib"), "RAM (pico de memoria residente)"
    fraction = run.get("vllm_memory_fraction") or {}
    return {
        "lab": run.get("lab"),
        "run": folder.root.name,
        "backend": run.get("backend_used") or ("trl + LoRA de PEFT" if (run.get("profile") or {}).get("use_lora")
                                               else "trl (todos los pesos)"),
        "model": run.get("base_label") or run.get("base_model"),
        "memory_gib": memory,
        "memory_kind": memory_kind,
        "memory_source": res.get("measured_by"),
        "vllm_fraction": fraction.get("in_force", (run.get("profile") or {}).get("vllm_gpu_memory_utilization")),
        "steps": len(metrics),
        "seconds_per_step": _median([r.get("step_time") for r in metrics]),
        "reward_final": sum(tail) / len(tail) if tail else None,
        "reward_steps": [r.get("step") for r in metrics if isinstance(r.get("reward"), (int, float))],
        "rewards": rewards,
        "base_accuracy": summary.get("base_accuracy"),
        "trained_accuracy": summary.get("trained_accuracy"),
        "n_eval": summary.get("n"),
        # what the trainer really used when the run recorded it (L7.2: trainer_args), else what it asked for
        "settings": run.get("trainer_args") or run.get("grpo_config") or {},
        "settings_source": "trainer_args" if run.get("trainer_args") else "grpo_config",
        "recipe": recipe_identity.of_record(run),  # the knobs and the reward functions' sources it trained
        # L7.2: what its engine changed from the L7.1 recipe, by the stated rule (labs.l72.recipe_rule)
        "engine_changes": (run.get("l72_recipe") or {}).get("changes") or {},
    }


_MISSING = object()


def settings_differences(ref: dict, other: dict) -> list[tuple[str, object, object]]:
    """``(key, ref value, other value)`` for every setting the two records do not share (``_MISSING``: not recorded)."""
    keys = sorted((set(ref["settings"]) | set(other["settings"])) - set(NOT_COMPARED))
    out = []
    for key in keys:
        a, b = ref["settings"].get(key, _MISSING), other["settings"].get(key, _MISSING)
        if a != b:
            out.append((key, a, b))
    return out


def reward_differences_es(ref: dict, other: dict) -> list[str]:
    """How the reward functions the two runs trained differ (names and the sources' SHA-256), in Spanish."""
    a, b = ref.get("recipe"), other.get("recipe")
    if not a or not b:
        return []
    return [line.removeprefix("recompensas: ") for line in recipe_identity.differences_es(
        {"rewards": a["rewards"]}, {"rewards": b["rewards"]}, ref["lab"], other["lab"])]


def describe_settings_es(records: list[dict]) -> list[str]:
    """Where the two runs' training settings differ, in Spanish (first record: the reference)."""
    from labs.l72 import recipe_rule

    ref, other = records[0], records[-1]
    diffs = settings_differences(ref, other)
    engine = other.get("engine_changes") or {}
    both = [(k, a, b) for k, a, b in diffs if a is not _MISSING and b is not _MISSING and k not in engine]
    lines = []
    if engine:
        lines.append(f"Lo que cambia el motor de {other['lab']} respecto a tu receta (su regla, apuntada en su run.json): "
                     + "; ".join(recipe_rule.changes_es({"changes": engine})) + ".")
    if both:
        lines.append(f"Ajustes de entrenamiento distintos entre {ref['lab']} y {other['lab']}: " + "; ".join(
            f"{k}: {a!r} frente a {b!r}" for k, a, b in both) + ". Las diferencias de las cifras de arriba pueden "
            "venir también de aquí, no solo del back-end.")
    missing_in_ref = [(k, b) for k, a, b in diffs if a is _MISSING]
    missing_in_other = [(k, a) for k, a, b in diffs if b is _MISSING and a is not _MISSING]
    for r, o, only in ((ref, other, missing_in_ref), (other, ref, missing_in_other)):
        if only:
            what = ("guarda solo la receta que pidió (grpo_config), no lo que usó el trainer" if
                    r["settings_source"] == "grpo_config" else "no los registró")
            lines.append(f"Sin registrar en {r['lab']} (su run.json {what}): " + ", ".join(
                f"{k} ({o['lab']} usó {v!r})" for k, v in only) + ".")
    rewards = reward_differences_es(ref, other)
    if rewards:
        lines.append(f"Funciones de recompensa distintas entre {ref['lab']} y {other['lab']}: " + "; ".join(rewards)
                     + ". La recompensa y la exactitud de arriba no se comparan con la misma vara.")
    compared = len(set(ref["settings"]) - set(NOT_COMPARED))
    if engine and not both and not rewards:
        lines.append(f"Fuera de esos cambios del motor, los mismos ajustes ({compared} comparados) y las mismas "
                     f"funciones de recompensa en {ref['lab']} y {other['lab']}.")
    elif not diffs:
        lines.append(f"Ajustes de entrenamiento: los mismos en {ref['lab']} y {other['lab']} ({compared} comparados).")
    return lines


def _rounded(value, digits: int):
    """``value`` rounded for reading (a table cell showed "s/paso 31.998386"); None and text as they are."""
    return round(value, digits) if isinstance(value, float) else value


def comparison_table(records: list[dict]):
    """The side-by-side table (a pandas DataFrame, Spanish headings), its numbers rounded for reading."""
    import pandas as pd

    def column(key: str, digits: int) -> list:
        return [_rounded(r[key], digits) for r in records]

    rows = {
        "Back-end": [r["backend"] for r in records],
        "Modelo": [r["model"] for r in records],
        "Memoria (GiB)": column("memory_gib", 2),
        "Qué memoria": [r["memory_kind"] if r["memory_gib"] is not None else "sin registrar" for r in records],
        "Fracción vLLM": column("vllm_fraction", 3),
        "Pasos": [r["steps"] for r in records],
        "s/paso (mediana)": column("seconds_per_step", 1),
        "Recompensa final": column("reward_final", 2),
        "Exactitud base": column("base_accuracy", 3),
        "Exactitud entrenado": column("trained_accuracy", 3),
        "Problemas": [r["n_eval"] for r in records],
    }
    return pd.DataFrame(rows, index=[r["lab"] for r in records])


def describe_comparison_es(records: list[dict]) -> list[str]:
    """The comparison in Spanish sentences, from the records' own numbers (first record: the reference)."""
    ref, other = records[0], records[-1]
    lines = []
    if ref["memory_gib"] is not None and other["memory_gib"] is not None:
        ratio = other["memory_gib"] / ref["memory_gib"] if ref["memory_gib"] else float("nan")
        lines.append(f"Memoria: {ref['lab']} {ref['memory_gib']:.2f} GiB, {other['lab']} {other['memory_gib']:.2f} GiB "
                     f"({ratio:.2f} veces; {other['memory_kind']}).")
    else:
        missing = [r["lab"] for r in (ref, other) if r["memory_gib"] is None]
        lines.append(f"Memoria: sin registrar para {', '.join(missing)} (su carpeta de run no tiene {RESOURCES_JSON}).")
    if ref["seconds_per_step"] and other["seconds_per_step"]:
        lines.append(f"Segundos por paso (mediana): {ref['lab']} {ref['seconds_per_step']:.1f}, {other['lab']} "
                     f"{other['seconds_per_step']:.1f} ({other['seconds_per_step'] / ref['seconds_per_step']:.2f} veces).")
    for r in (ref, other):
        if r["base_accuracy"] is not None and r["trained_accuracy"] is not None:
            lines.append(f"{r['lab']}: exactitud {r['base_accuracy']:.1%} antes y {r['trained_accuracy']:.1%} después "
                         f"({r['n_eval']} problemas); recompensa final {r['reward_final']:.3g}.")
    lines += describe_settings_es(records)
    if ref["n_eval"] is not None and ref["n_eval"] < 100:
        lines.append(f"Con {ref['n_eval']} problemas y {ref['steps']} pasos estas diferencias de exactitud son ruido: "
                     "el perfil sirve para comprobar que todo funciona, no para medir. Las cifras que importan salen "
                     "del perfil rtx5090.")
    return lines


def plot_comparison(records: list[dict], path: str | os.PathLike | None = None):
    """Four panels: memory, seconds per step, reward per step, accuracy base/trained."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7.5))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.9, hspace=0.4, wspace=0.25)
    (ax_mem, ax_time), (ax_reward, ax_acc) = fig.subplots(2, 2)
    labels = [r["lab"] for r in records]
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"][: len(records)]
    for ax, key, title in ((ax_mem, "memory_gib", "Memoria pico (GiB)"), (ax_time, "seconds_per_step",
                                                                            "Segundos por paso (mediana)")):
        values = [r[key] if r[key] is not None else 0.0 for r in records]
        bars = ax.bar(labels, values, color=colors)
        for bar, r in zip(bars, records):
            text = "sin registrar" if r[key] is None else f"{r[key]:.3g}"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=9)
        ax.set_title(title, fontsize=10)
    for r, color in zip(records, colors):
        if r["rewards"]:
            ax_reward.plot(r["reward_steps"], r["rewards"], marker="o", color=color, label=r["lab"])
    ax_reward.set_title("Recompensa total por paso", fontsize=10)
    ax_reward.set_xlabel("paso")
    ax_reward.legend(fontsize=8)
    width = 0.38
    for i, r in enumerate(records):
        base, trained = r["base_accuracy"] or 0.0, r["trained_accuracy"] or 0.0
        ax_acc.bar([i - width / 2], [base], width, color=colors[i], alpha=0.45, label=f"{r['lab']} base")
        ax_acc.bar([i + width / 2], [trained], width, color=colors[i], label=f"{r['lab']} entrenado")
    ax_acc.set_xticks(range(len(records)), labels)
    ax_acc.set_title("Exactitud en el holdout (base / entrenado)", fontsize=10)
    ax_acc.legend(fontsize=8)
    fig.suptitle("L7.1 (TRL + vLLM colocate) frente a L7.2 (" + ", ".join(r["backend"] for r in records[1:]) + ")")
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig
