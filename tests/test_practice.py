"""The E1-E3 comparison exercise's pieces: the metrics table, the practice table built from the variants, and the
check against the course's analysis (it must fail on wrong answers, not only pass on right ones)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from labs import exercises as ex
from labs.core.profiles import get_profile


@pytest.fixture
def e1(tmp_path):
    perfil = get_profile("rtx5090")
    return ex.practice_runs(ex.planned_variants("E1", perfil, tmp_path), perfil)


def course_e1(metricas: pd.DataFrame, ddof: int = 1) -> pd.DataFrame:
    g = metricas.groupby("variante")
    return pd.DataFrame({"grupos_sin_varianza": g["frac_reward_zero_std"].mean(),
                         "grad_norm_media": g["grad_norm"].mean(), "grad_norm_std": g["grad_norm"].std(ddof=ddof)})


def test_the_metrics_frame_has_one_row_per_variant_and_step(e1):
    frame = ex.metrics_frame(e1)
    assert list(frame.columns[:2]) == ["variante", "step"]
    assert len(frame) == sum(len(r.metrics) for r in e1)
    assert sorted(frame["variante"].unique()) == sorted(r.label for r in e1)
    assert ex.metrics_frame([]).columns.tolist() == ["variante", "step"]


def test_the_practice_table_follows_the_variant_definitions(e1, tmp_path):
    small, large = (ex.course_rows("E1", [r])[0] for r in e1)
    assert large["G"] > small["G"] and large["zero_std_share"] < small["zero_std_share"]
    perfil = get_profile("rtx5090")
    e3 = ex.practice_runs(ex.planned_variants("E3", perfil, tmp_path), perfil)
    assert [("kl" in r.metrics[0]) for r in e3] == [(r.record["profile"]["beta"] > 0) for r in e3]
    e2 = ex.practice_runs(ex.planned_variants("E2", perfil, tmp_path), perfil)
    assert ["rewards/correctness_reward/mean" in r.metrics[0] for r in e2] == [True, False]


def test_the_check_passes_the_right_table_and_names_what_is_wrong(e1):
    rows = ex.course_rows("E1", e1)
    frame = ex.metrics_frame(e1)
    assert ex.check_comparison("E1", course_e1(frame), rows) == []
    wrong = ex.check_comparison("E1", course_e1(frame, ddof=0), rows)
    assert wrong and all("grad_norm_std" in line for line in wrong)
    assert ex.check_comparison("E1", None, rows) == ["comparar_e1 devuelve None: te falta el return (o aún no la escribiste)."]
    assert "DataFrame" in ex.check_comparison("E1", [1, 2], rows)[0]
    assert "faltan las columnas" in ex.check_comparison("E1", course_e1(frame).drop(columns="grad_norm_std"), rows)[0]
    one = course_e1(frame).iloc[:1]
    assert "Falta la variante" in ex.check_comparison("E1", one, rows)[0]


def test_missing_values_match_only_missing_values(tmp_path):
    perfil = get_profile("rtx5090")
    runs = ex.practice_runs(ex.planned_variants("E3", perfil, tmp_path), perfil)
    rows = ex.course_rows("E3", runs)
    assert rows[0]["beta"] == 0.0 and rows[0]["kl_logged_mean"] is None
    table = pd.DataFrame({"kl_media": [0.0, math.nan, math.nan], "longitud_al_principio": [r["length_first"] for r in rows],
                          "longitud_al_final": [r["length_last"] for r in rows]}, index=[r["label"] for r in rows])
    problems = ex.check_comparison("E3", table, rows)
    assert any(rows[0]["label"] in p and "kl_media" in p for p in problems)  # 0.0 is not "not logged"
    assert any(rows[1]["label"] in p for p in problems)  # NaN where the course has a number
