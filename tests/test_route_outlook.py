"""Before any training: the rehearsal's measurements -> criteria 2-3 outlook and the profile for the main run."""

from __future__ import annotations

import json

import pytest

from labs.__main__ import main as labs_main
from labs.core import profile_choice, profiles
from labs.core.profiles import PROFILE_ENV, get_profile
from labs.grading.outlook import length_outlook, recommend, render_es


def record(profile="rtx5090", accuracy=0.80, last=None, mean_length=300.0, n=200):
    holdout = {"n": n, "accuracy": accuracy, "mean_length": mean_length, "max_new_tokens": 1024}
    if last is not None:
        holdout["accuracy_last_number"] = last
    return {"profile": profile, "base_holdout": holdout}


def test_an_instruct_model_near_the_ceiling_gets_the_base_profile_for_criterion_3():
    rec = recommend(record(accuracy=0.95, last=0.96))
    assert rec.profile == "rtx5090-base" and "96.0 %" in rec.why_es
    assert any(line.startswith("Criterio 3") and "falta de margen" in line for line in rec.outlook_es)


def test_short_instruct_answers_put_criterion_2_at_risk_and_the_base_profile_is_recommended():
    cap = get_profile("rtx5090").max_completion_length
    rec = recommend(record(accuracy=0.70, mean_length=0.3 * cap))
    assert rec.profile == "rtx5090-base" and "criterio 2 está en riesgo" in rec.why_es
    crit2 = next(line for line in rec.outlook_es if line.startswith("Criterio 2"))
    assert "«no cumple»" in crit2 and "30 %" in crit2


def test_instruct_answers_that_fill_the_limit_keep_the_instruct_profile():
    cap = get_profile("rtx5090").max_completion_length
    rec = recommend(record(accuracy=0.70, mean_length=0.9 * cap))
    assert rec.profile == "rtx5090"
    flat_fails, text = length_outlook(0.9 * cap, "rtx5090")
    assert flat_fails is False and "«no se puede determinar»" in text


def test_a_cpu_or_unfinished_rehearsal_recommends_nothing():
    assert recommend(record(profile="ci")).profile is None
    assert recommend({"profile": "rtx5090", "base_holdout": None}).profile is None
    assert recommend({"profile": "rtx9999"}).profile is None


def test_the_rendered_advice_gives_the_command_and_keeps_l72_on_the_instruct_profile():
    text = render_es(recommend(record(accuracy=0.90, last=0.95)))
    assert "python -m labs profile --accept" in text and "--choose rtx5090-base" in text
    assert "L7.2 sigue en rtx5090" in text


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.setattr(profiles, "cuda_available", lambda: True)
    return tmp_path


def test_accept_saves_what_the_newest_rehearsal_recommended(runs, capsys):
    assert labs_main(["profile", "--accept"]) == 2
    assert "python -m labs rehearse" in capsys.readouterr().err
    folder = runs / "rehearsal-rtx-5090"
    folder.mkdir()
    (folder / "rehearsal.json").write_text(json.dumps(record(accuracy=0.90, last=0.95)), encoding="utf-8")
    assert labs_main(["profile", "--accept"]) == 0
    assert "Recomendación: rtx5090-base" in capsys.readouterr().out
    saved = profile_choice.read_choice()
    assert saved["profile"] == "rtx5090-base" and saved["source"].startswith("ensayo")
    assert get_profile().name == "rtx5090-base"


def test_the_rehearsal_hook_prints_the_recommendation_and_never_raises(capsys):
    from labs.grading.outlook import print_recommendation

    rec = print_recommendation(record(accuracy=0.90, last=0.95))
    assert rec.profile == "rtx5090-base" and "--accept" in capsys.readouterr().out
    assert print_recommendation({"profile": "rtx5090", "base_holdout": {"accuracy": 7}}).profile is None
