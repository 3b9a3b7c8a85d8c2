"""Headroom: criterion 3 and the length check when the base model leaves no room, and the rehearsal's advice."""

from __future__ import annotations

import pytest
from rundirs import NO_GAIN_HOLDOUT, history, make_run, paired_verdicts

from labs.core import ceiling
from labs.core import diagnostics as dg
from labs.core import stats
from labs.core.runfolder import RunFolder
from labs.grading import CUMPLE, NO_CUMPLE, NO_SE_PUEDE, grade_run
from labs.grading.headroom import BASE_PROFILE, INSTRUCT_PROFILE, describe_headroom_es, headroom, recommend_profile
from labs.training import curves

# (both right, both wrong, gained, lost): base accuracy = (both right + lost) / n
NEAR_CEILING_FLAT = (465, 17, 8, 10)  # n = 500, base 95.0 %, trained 94.6 %
NEAR_CEILING_GAIN = (473, 5, 20, 2)  # n = 500, base 95.0 %, +3.6 points, p < 0.001
MID_RANGE_FLAT = NO_GAIN_HOLDOUT  # n = 500, base 65.6 %, +0.4 points


def summary(counts) -> dict:
    return stats.paired_comparison(*paired_verdicts(*counts))


def flat_at(base_right: int, n: int) -> tuple[int, int, int, int]:
    """A flat result (2 gained, 2 lost) on n problems with base_right correct for the base model."""
    return base_right - 2, n - base_right - 2, 2, 2


# ---------------------------------------------------------------------------------------- the arithmetic


def test_the_rule_needs_the_base_to_miss_7_5_percent_at_its_floor():
    assert ceiling.wrong_share_needed(dg.MIN_DISCORDANT_SHARE, dg.MIN_GAIN) == pytest.approx(0.075)
    assert ceiling.highest_base_with_room(dg.MIN_DISCORDANT_SHARE, dg.MIN_GAIN) == pytest.approx(0.925)
    # More changed answers need more wrong answers to turn into right ones: 16 % changes -> 10.5 %.
    assert ceiling.wrong_share_needed(0.16, 0.05) == pytest.approx(0.105)
    assert ceiling.max_gain(0.95) == pytest.approx(0.05) and ceiling.max_gain(1.0) == 0.0


@pytest.mark.parametrize("base_right, n, verdict", [(370, 400, False), (371, 400, None), (475, 500, None), (328, 500, False)])
def test_flat_result_is_no_cumple_only_with_room(base_right, n, verdict):
    finding = dg.holdout_gain(summary(flat_at(base_right, n)))
    assert finding.holds is verdict
    if verdict is None:
        assert "Falta margen" in finding.message and "7.5 %" in finding.message
        assert f"+{ceiling.max_gain(base_right / n) * 100:.1f} puntos" in finding.message


def test_near_ceiling_flat_is_cannot_tell_with_the_arithmetic():
    finding = dg.holdout_gain(summary(NEAR_CEILING_FLAT))
    assert finding.holds is None and not finding.warning
    e = finding.evidence
    assert e["base_accuracy"] == pytest.approx(0.95) and e["max_gain"] == pytest.approx(0.05)
    assert e["n"] >= e["n_needed"]  # the old rule would have said "no cumple"
    assert "solo fallaba 25 de 500 problemas" in finding.message
    assert "(10 + 5) / 2 = 7.5 %" in finding.message


def test_near_ceiling_gain_still_counts():
    finding = dg.holdout_gain(summary(NEAR_CEILING_GAIN))
    assert finding.holds is True and "mejoró de forma medible" in finding.message


def test_mid_range_flat_is_still_no_cumple():
    finding = dg.holdout_gain(summary(MID_RANGE_FLAT))
    assert finding.holds is False and "80 % de potencia" in finding.message


def test_e2_run_near_the_ceiling_is_not_called_format_hacking():
    rows = history(200, correctness=None, fmt=(0.1, 0.5))
    assert dg.detect_format_hacking(rows, summary(MID_RANGE_FLAT)).holds is True
    near = dg.detect_format_hacking(rows, summary(NEAR_CEILING_FLAT))
    assert near.holds is None and "Falta margen" in near.message


# ------------------------------------------------------------------------------------- criterion 3


@pytest.mark.parametrize(
    "counts, verdict, text",
    [
        (NEAR_CEILING_FLAT, NO_SE_PUEDE, "Falta margen"),
        (NEAR_CEILING_GAIN, CUMPLE, "mejoró de forma medible"),
        (MID_RANGE_FLAT, NO_CUMPLE, "No hay mejora medible"),
    ],
)
def test_criterion_3_on_synthetic_evaluations(tmp_path, counts, verdict, text):
    c3 = grade_run(make_run(tmp_path, "run", verdicts=paired_verdicts(*counts))).criterion(3)
    assert c3.verdict == verdict
    assert any(text in line for line in c3.reasons + c3.evidence)
    assert "92.5 %" in c3.threshold


# ------------------------------------------------------------------------------------- length growth


def test_flat_length_at_the_limit_cannot_tell():
    rows = history(200, length=(900.0, 900.0))
    assert dg.length_rising(rows).holds is False  # without the limit: the old reading
    f = dg.length_rising(rows, 1024)
    assert f.holds is None
    room = f.evidence["length_room"]
    assert room["share_of_max"] == pytest.approx(f.evidence["first_mean"] / 1024) and not room["has_room"]
    assert "max_completion_length = 1024" in f.message and "rtx5090-base" in f.message


def test_flat_length_with_room_is_not_rising_and_a_rise_near_the_limit_counts():
    assert dg.length_rising(history(200, length=(250.0, 250.0)), 1024).holds is False
    assert dg.length_rising(history(200, length=(830.0, 1010.0)), 1024).holds is True
    assert dg.length_rising(history(200, length=(900.0, 900.0)), "n/d").holds is False  # a broken limit: no excuse


@pytest.mark.parametrize("length, verdict", [((900.0, 900.0), NO_SE_PUEDE), ((250.0, 250.0), NO_CUMPLE), ((180.0, 320.0), CUMPLE)])
def test_criterion_2_reads_the_limit_from_run_json(tmp_path, length, verdict):
    root = make_run(tmp_path, "run", metrics=history(200, length=length), verdicts=paired_verdicts(*MID_RANGE_FLAT))
    g = grade_run(root)
    assert g.criterion(2).verdict == verdict
    watched = {f.key: f for f in g.findings}
    assert watched["length_rising"].holds is {NO_SE_PUEDE: None, NO_CUMPLE: False, CUMPLE: True}[verdict]
    # The lab's own "what to watch" reads the same limit from the run folder.
    assert {f.key: f.holds for f in curves.what_to_watch(RunFolder(root))}["length_rising"] is watched["length_rising"].holds


# ------------------------------------------------------------------------- what the rehearsal says


@pytest.mark.parametrize("p0", [0.3, 0.656, 0.9, 0.925, 0.93, 0.95, 0.99])
def test_headroom_agrees_with_criterion_3_on_a_flat_result(p0):
    n = 500
    base_right = round(p0 * n)
    h = headroom(base_right / n, n)
    finding = dg.holdout_gain(summary(flat_at(base_right, n)))
    assert h["flat_gradable"] is (finding.holds is False)


def test_headroom_numbers():
    h = headroom(0.95, 500)
    assert h["max_gain"] == pytest.approx(0.05)
    assert h["detectable_gain"] == pytest.approx(stats.mcnemar_detectable_difference(500, 0.10))
    assert h["n_needed"] == stats.mcnemar_sample_size(0.10, 0.05) and not h["room"]


def test_describe_headroom_in_spanish():
    near = describe_headroom_es(0.95, 500, measured_on=200)
    assert "Mejora máxima posible: +5.0 puntos" in near and "medida en 200 problemas" in near
    assert "no podrá ser «no cumple»" in near
    assert "Ni corrigiendo todos los fallos" in describe_headroom_es(0.99, 500)
    assert "Hay margen: una mejora así da «cumple»" in describe_headroom_es(0.70, 500)
    assert "el holdout es pequeño" in describe_headroom_es(0.70, 48)


def test_recommend_profile_from_the_measured_accuracy():
    name, why = recommend_profile(0.80, 0.83)
    assert name == INSTRUCT_PROFILE and "83.0 %" in why
    name, why = recommend_profile(0.90, 0.96)  # format aside, the instruct model already solves 96 %
    assert name == BASE_PROFILE and "96.0 %" in why and "92.5 %" in why
    assert recommend_profile(0.95, None)[0] == BASE_PROFILE
    assert recommend_profile(0.925)[0] == INSTRUCT_PROFILE


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), "0.9", True])
def test_bad_accuracy_is_refused_in_spanish(bad):
    with pytest.raises(ValueError, match="proporción entre 0 y 1"):
        recommend_profile(bad)
    with pytest.raises(ValueError, match="proporción entre 0 y 1"):
        describe_headroom_es(bad, 500)
    with pytest.raises(ValueError, match="entero positivo"):
        headroom(0.5, 0)
