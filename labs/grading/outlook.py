"""Before any long run: what each 5090 profile can show for criteria 2 and 3, and which one to train.

Input is the rehearsal's record (``python -m labs rehearse`` writes ``runs/rehearsal-<gpu>/rehearsal.json``):
its ``base_holdout`` measured the rehearsed model on ~200 GSM8K test problems with the profile's own
evaluation settings (accuracy, accuracy of the last number, mean answer length).

- Criterion 3 (holdout gain): ``labs.grading.headroom`` (the rule's own headroom condition).
- Criterion 2 (reward and mean length rising): a flat length is excused only when the first steps already
  fill ``labs.core.ceiling.LENGTH_FULL_SHARE`` of ``max_completion_length``. An instruct model whose answers
  use far less than that has room, so a flat length is "no cumple"; and a model that already reasons step
  by step has little reason to lengthen its answers under GRPO. The base profile starts from GSM8K's short
  worked solutions (its format pass), where R1-Zero saw the length grow (arXiv 2501.12948, Fig. 3).

``recommend(record)`` combines both into the profile for the graded main run (L7.1, the sweeps, E4). L7.2
stays on the instruct profile ``rtx5090`` either way: it teaches Unsloth's mechanics with Standby, and the
graded main run is L7.1's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from labs.core import ceiling
from labs.core.paths import runs_dir
from labs.core.profiles import PROFILES, get_profile
from labs.grading import headroom as hr

REHEARSAL_JSON = "rehearsal.json"  # the name labs.rehearsal.cli writes
L72_PROFILE = hr.INSTRUCT_PROFILE


@dataclass
class Recommendation:
    profile: str | None  # None: nothing measured to recommend from (or a CPU rehearsal)
    why_es: str
    outlook_es: list[str] = field(default_factory=list)  # one line per criterion, the measured profile's
    measured_profile: str | None = None


def newest_rehearsal(root: Path | str | None = None) -> Path | None:
    """The most recent ``rehearsal-*/rehearsal.json`` under the run area, None when there is none."""
    root = Path(root if root is not None else runs_dir())
    found = sorted(root.glob(f"rehearsal-*/{REHEARSAL_JSON}"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def read_rehearsal(path: Path | str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"No puedo leer el ensayo {path} ({exc}). Vuelve a ejecutar python -m labs rehearse.") from None


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def length_outlook(mean_length: float | None, profile_name: str) -> tuple[bool | None, str]:
    """(a flat length would be "no cumple", Spanish sentence) for criterion 2, from the measured answer length."""
    cap = get_profile(profile_name).max_completion_length
    room = ceiling.length_room(mean_length, cap)
    if room is None:
        return None, "Criterio 2 (longitud): el ensayo no midió la longitud de las respuestas."
    share = room["share_of_max"]
    text = (f"Criterio 2 (longitud): sus respuestas miden unos {mean_length:.0f} tokens, el {_pct(share)} de los "
            f"{cap} de max_completion_length.")
    if not room["has_room"]:
        return False, text + (f" Llenan ya más del {_pct(ceiling.LENGTH_FULL_SHARE)}: una longitud plana quedaría en "
                              "«no se puede determinar», no en «no cumple».")
    text += (f" Tienen margen (menos del {_pct(ceiling.LENGTH_FULL_SHARE)}), así que una longitud plana es «no cumple»: "
             "la longitud media tiene que subir.")
    if PROFILES[profile_name].format_pass:
        text += " Un modelo base que solo aprendió el formato parte de respuestas cortas: es donde R1-Zero vio crecer la longitud."
    else:
        text += (" Un modelo instruct que ya razona paso a paso tiene poco motivo para alargar sus respuestas: lo más "
                 "probable es que la longitud quede plana y el criterio 2, en «no cumple».")
    return True, text


# A format reward that starts at this share of its maximum has no room left to rise: E2's hacking signature (the
# format reward rises while correctness does not, labs.core.diagnostics.detect_format_hacking) cannot appear.
FORMAT_CEILING_SHARE = 0.9


def level4_outlook(format_start: float | None, profile_name: str) -> dict:
    """Whether level 4's comparison can show on ``profile_name``, from the format reward the rehearsal measured at
    its first step (``format_start``; its maximum is ``REWARD_VALUES["format_reward"]``).

    Level 4 needs a finished run where the format-hacking detector fires (E2's, correctness dropped): the format
    reward must *rise* while correctness does not. After a format pass the format reward may start at its
    ceiling, and then it cannot rise. Returns ``{"possible": bool | None, "start", "max", "share", "text_es"}``.
    """
    from rewards import REWARD_VALUES

    top = REWARD_VALUES["format_reward"]
    if not isinstance(format_start, (int, float)):
        return {"possible": None, "start": None, "max": top, "share": None, "text_es": (
            "Nivel 4 (la comparación de E2): el ensayo no midió la recompensa de formato del primer paso.")}
    share = format_start / top
    text = (f"Nivel 4 (la comparación de E2): en el primer paso de {profile_name} la recompensa de formato vale "
            f"{format_start:.2f} de {top:g} ({_pct(share)}).")
    possible = share < FORMAT_CEILING_SHARE
    if possible:
        text += (" Tiene margen para subir, así que la firma del hacking de E2 (el formato sube y la corrección no) "
                 "puede aparecer y servir de comparación.")
    else:
        text += (f" Ya pasa del {_pct(FORMAT_CEILING_SHARE)} de su máximo (el pase de formato la dejó en el techo): no "
                 "puede subir, así que la firma del hacking de E2 difícilmente aparecerá en este perfil y el nivel 4 "
                 "quedaría en «posible nivel 4» sin otra comparación en la que el formato sí suba.")
    return {"possible": possible, "start": round(float(format_start), 4), "max": top, "share": round(share, 4),
            "text_es": text}


def recommend(record: dict) -> Recommendation:
    """The profile for the graded main run, why, and the criteria 2-3 outlook of the rehearsed profile."""
    name = str(record.get("profile") or "")
    if name not in PROFILES:
        return Recommendation(None, f"El ensayo no dice con qué perfil se hizo ('{name}'). Vuelve a ejecutar python -m labs rehearse.")
    if PROFILES[name].use_cpu:
        return Recommendation(None, (
            f"El ensayo se hizo en el perfil de CPU '{name}': sin GPU los labs usan el perfil cpu y no hay nada que "
            "elegir. La recomendación entre rtx5090 y rtx5090-base sale de un ensayo en la GPU."), measured_profile=name)
    holdout = record.get("base_holdout") or {}
    if not isinstance(holdout.get("accuracy"), (int, float)):
        return Recommendation(None, (
            "El ensayo no llegó a medir la precisión del modelo base (terminó antes o falló): no puedo recomendar un "
            "perfil con datos. Arregla lo que dice el informe y vuelve a ensayar."), measured_profile=name)
    full = get_profile(name)
    crit3 = "Criterio 3 (holdout): " + hr.describe_headroom_es(holdout["accuracy"], full.eval_size,
                                                              measured_on=holdout.get("n"))
    flat_fails, crit2 = length_outlook(holdout.get("mean_length"), name)
    outlook = [crit2, crit3] + ([record["level4_outlook"]["text_es"]] if record.get("level4_outlook") else [])
    if full.format_pass:  # the base profile was rehearsed: its own numbers decide nothing against it
        return Recommendation(name, f"Ensayaste {name}, el perfil del modelo base: sigue con él para el run principal.",
                              outlook, name)
    by_crit3, why3 = hr.recommend_profile(holdout["accuracy"], holdout.get("accuracy_last_number"))
    if by_crit3 == hr.BASE_PROFILE:
        return Recommendation(hr.BASE_PROFILE, why3, outlook, name)
    if flat_fails:
        return Recommendation(hr.BASE_PROFILE, (
            f"Con {name} el criterio 3 tiene margen, pero el criterio 2 está en riesgo: las respuestas del modelo "
            f"instruct no llenan el límite, así que una longitud plana es «no cumple», y es lo más probable. Para el "
            f"run principal (L7.1, los ejercicios y E4) entrena {hr.BASE_PROFILE}: Qwen3-4B-Base con el pase de "
            f"formato, donde precisión y longitud pueden subir."), outlook, name)
    return Recommendation(name, why3, outlook, name)


def accept_command(rec: Recommendation) -> str:
    return f"python -m labs profile --choose {rec.profile}" if rec.profile else ""


def render_es(rec: Recommendation) -> str:
    """The rehearsal's closing lines: the outlook, the recommendation, and the command that saves it."""
    lines = ["Qué puede mostrar cada perfil (medido en el ensayo):"]
    if rec.measured_profile:
        lines += [f"  [{rec.measured_profile}] {line}" for line in rec.outlook_es]
    lines.append(f"Recomendación: {rec.profile or 'ninguna'}. {rec.why_es}")
    if rec.profile:
        lines.append(f"L7.2 sigue en {L72_PROFILE} pase lo que pase: enseña Unsloth con Standby sobre el modelo de la "
                     "lección; el run que se califica es el del L7.1.")
        lines.append(f"Para guardarlo: python -m labs profile --accept (equivale a {accept_command(rec)}); "
                     "para otro: python -m labs profile --choose <perfil>. COURSE_PROFILE y --profile siguen mandando.")
    return "\n".join(lines)


def print_recommendation(record: dict, echo=print) -> Recommendation:
    """The hook at the end of ``python -m labs rehearse``: print the recommendation; never fails the rehearsal."""
    try:
        rec = recommend(record)
    except Exception as exc:  # a recommendation problem must not hide the rehearsal's own result
        echo(f"[ensayo] No pude calcular la recomendación de perfil: {exc}")
        return Recommendation(None, str(exc))
    echo("\n" + render_es(rec))
    return rec
