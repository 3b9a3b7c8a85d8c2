"""The profile is chosen once (python -m labs profile) and every lookup follows it; COURSE_PROFILE still wins.

The run folders are fabricated as tests/rundirs.py writes them (finished, with a holdout); no model is loaded.
A CUDA GPU is not available here, so "a GPU is visible" is ``profiles.cuda_available`` patched to True: that
function is the only place the labs ask torch about the device.
"""

from __future__ import annotations

import json

import pytest
from rundirs import GOOD_HOLDOUT, e2_run, history, make_run, paired_verdicts

from labs.__main__ import main as labs_main
from labs.core import profile_choice, profiles
from labs.core.profiles import PROFILE_ENV, ProfileError, default_profile_name, get_profile

BASE = "rtx5090-base"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    return tmp_path


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(profiles, "cuda_available", lambda: True)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(profiles, "cuda_available", lambda: False)


def finished(root, name, profile=BASE, steps=20):
    return make_run(root, name, metrics=history(steps), max_steps=steps, profile=profile,
                    verdicts=paired_verdicts(*GOOD_HOLDOUT))


# ------------------------------------------------------------------------------------------ the choice itself


def test_the_cli_saves_the_choice_in_the_run_area(runs, gpu, capsys):
    assert labs_main(["profile", "--choose", BASE]) == 0
    saved = json.loads((runs / profile_choice.CHOICE_FILE).read_text(encoding="utf-8"))
    assert saved["profile"] == BASE and saved["source"] == "manual"
    out = capsys.readouterr().out
    assert f"usan el perfil {BASE}" in out and "COURSE_PROFILE y --profile siguen mandando" in out
    name, why = default_profile_name()
    assert name == BASE and "python -m labs profile" in why and str(runs) in why
    assert get_profile().name == BASE


def test_an_unknown_name_is_refused_and_nothing_is_saved(runs, capsys):
    assert labs_main(["profile", "--choose", "rtx4090"]) == 2
    err = capsys.readouterr().err
    assert "No existe el perfil 'rtx4090'" in err and BASE in err
    assert not (runs / profile_choice.CHOICE_FILE).exists()
    with pytest.raises(ProfileError):
        profile_choice.save_choice("rtx4090")


def test_course_profile_and_an_explicit_name_override_the_choice(runs, gpu, monkeypatch):
    profile_choice.save_choice(BASE)
    monkeypatch.setenv(PROFILE_ENV, "ci")
    assert get_profile().name == "ci" and default_profile_name() == ("ci", f"{PROFILE_ENV}=ci")
    monkeypatch.delenv(PROFILE_ENV)
    assert get_profile("rtx5090").name == "rtx5090" and get_profile().name == BASE


def test_without_a_gpu_a_saved_gpu_profile_falls_back_to_cpu_and_says_why(runs, no_gpu):
    profile_choice.save_choice(BASE)
    name, why = default_profile_name()
    assert name == "cpu" and get_profile().name == "cpu"
    assert BASE in why and "no se ve ninguna GPU CUDA" in why and "4B" in why


def test_a_saved_cpu_profile_applies_even_with_a_gpu(runs, gpu):
    profile_choice.save_choice("cpu")
    assert default_profile_name()[0] == "cpu"


def test_a_damaged_choice_is_reported_and_ignored(runs, gpu):
    (runs / profile_choice.CHOICE_FILE).write_text("{no es json", encoding="utf-8")
    name, why = default_profile_name()
    assert name == "rtx5090" and "no se puede leer" in why and "--choose" in why
    (runs / profile_choice.CHOICE_FILE).write_text(json.dumps({"profile": "rtx4090"}), encoding="utf-8")
    assert "rtx4090" in default_profile_name()[1]


def test_forget_goes_back_to_the_automatic_profile(runs, gpu, capsys):
    profile_choice.save_choice(BASE)
    assert labs_main(["profile", "--forget"]) == 0
    assert "Elección borrada" in capsys.readouterr().out
    assert default_profile_name()[0] == "rtx5090"


def test_every_lab_command_prints_its_profile_and_why(runs, gpu):
    from labs.route.announce import profile_line_es

    profile_choice.save_choice(BASE)
    assert profile_line_es(["E1"]).startswith(f"[perfil] {BASE} (lo elegiste")
    assert profile_line_es(["--profile", "ci"]) == "[perfil] ci (--profile ci)"
    assert profile_line_es(["--profile=cpu"]) == "[perfil] cpu (--profile cpu)"


# ------------------------------------------------------------------ the notebooks' lookups follow the choice


def test_l71_notebook_opens_the_saved_profiles_run(runs, gpu, monkeypatch):
    from labs.l71 import open_run

    # A finished run is only read: Lab() skips the doctor's machine check (which refuses a GPU profile on this
    # CPU machine), so the recorded 5090 run opens here as it would on a laptop.
    finished(runs, f"l71-{BASE}")
    finished(runs, "l71-rtx5090")  # the instruct run must not be the one read
    profile_choice.save_choice(BASE)
    lab = open_run()
    assert lab.profile.name == BASE and lab.read_only and lab.run.root == runs / f"l71-{BASE}"


def test_l71_notebook_without_a_gpu_reads_the_cpu_run_not_the_saved_one(runs, no_gpu):
    from labs.l71 import open_run

    finished(runs, f"l71-{BASE}")
    finished(runs, "l71-cpu", profile="cpu")
    profile_choice.save_choice(BASE)
    lab = open_run()
    assert lab.profile.name == "cpu" and lab.run.root == runs / "l71-cpu"


@pytest.mark.parametrize("exercise", ["e1", "e2", "e3"])
def test_exercise_notebooks_find_and_read_the_saved_profiles_runs(runs, gpu, exercise):
    import labs.exercises as ex
    from test_exercises import perfil_con_beta, perfil_con_grupo, recompensas_sin_correccion

    profile_choice.save_choice(BASE)
    perfil = get_profile()  # what the E1-E3 notebooks call
    student = {"e1": perfil_con_grupo, "e2": recompensas_sin_correccion, "e3": perfil_con_beta}[exercise]
    variants = getattr(ex, f"{exercise}_variants")(perfil, student)  # built by the student's (right) function
    assert variants and all(BASE in v.name for v in variants), [v.name for v in variants]
    for v in variants:
        finished(runs, v.name)
    data = ex.load_runs(variants)
    assert [d.root for d in data] == [runs / v.name for v in variants]
    assert all(d.metrics and d.summary and d.record["profile"]["name"] == BASE for d in data)
    assert ex.reference_variant(perfil).name == f"ref-{BASE}"


def test_c2b_finds_the_saved_profiles_main_run(runs, gpu):
    from labs.grading.selfcheck import choose_run, find_or_make_run

    profile_choice.save_choice(BASE)
    finished(runs, f"l71-{BASE}", steps=30)
    e2_run(runs, f"e2-{BASE}-solo-formato")  # newer, but without a correctness reward: a comparison
    found, why = choose_run()
    assert found == runs / f"l71-{BASE}" and f"l71-{BASE}" in why
    assert find_or_make_run(echo=lambda *_: None) == runs / f"l71-{BASE}"


def test_l72_runs_on_the_instruct_profile_when_the_saved_one_is_the_base(runs, gpu, monkeypatch):
    from labs.route import l72_profile
    from labs.route.announce import profile_line_es

    profile_choice.save_choice(BASE)
    profile, why = l72_profile()
    assert profile.name == "rtx5090" and BASE in why and "L7.1" in why
    assert profile_line_es([], "l72").startswith("[perfil] rtx5090 (L7.2 usa siempre rtx5090")
    assert l72_profile("ci")[0].name == "ci"
    monkeypatch.setenv(PROFILE_ENV, BASE)  # the student's explicit word is kept
    assert l72_profile()[0].name == BASE


def test_the_rehearsal_rehearses_the_saved_profile_or_the_one_it_will_recommend(runs):
    """Issue 33, item 5: the rehearsal ran rtx5090 whatever was saved, so rtx5090-base's LoRA format pass, its
    merge and its r=32 training first ran inside the multi-hour job."""
    from labs.rehearsal import budget

    assert budget.default_profile(None, {}, cuda_visible=True).name == BASE  # nothing saved: what it will recommend
    profile_choice.save_choice("rtx5090")
    assert budget.default_profile(None, {}, cuda_visible=True).name == "rtx5090"
    profile_choice.save_choice(BASE)
    rehearsed = budget.rehearsal_profile(budget.default_profile(None, {}, cuda_visible=True))
    base = get_profile(BASE)
    assert rehearsed.name == BASE and rehearsed.format_pass and rehearsed.model == base.model
    assert (rehearsed.lora_r, rehearsed.learning_rate) == (base.lora_r, base.learning_rate)
    assert budget.default_profile(None, {}, cuda_visible=False).name == "ci"  # a saved GPU profile needs the GPU


def test_l72s_comparison_on_the_base_route_reads_the_main_l71_run(runs, gpu):
    """Issue 33, item 5: on the base route L7.2 compares with the route's own L7.1 run (the graded one), not with
    an rtx5090 L7.1 run the route never makes; and the grader still grades L7.1's."""
    from labs.grading import grade_submission
    from labs.l72 import demo

    profile_choice.save_choice(BASE)
    base = get_profile(BASE)
    l71 = make_run(runs, f"l71-{BASE}", metrics=history(base.max_steps), profile=BASE, beta=base.beta,
                   verdicts=paired_verdicts(*GOOD_HOLDOUT))
    make_run(runs, "l72-rtx5090", metrics=history(500), profile="rtx5090", lab="L7.2",
             verdicts=paired_verdicts(*GOOD_HOLDOUT))
    said = []
    assert demo.l71_reference(show=said.append) == l71
    assert BASE in said[0] and "L7.2 corre con rtx5090" in said[0]
    assert grade_submission(runs).run_dir == l71
    (l71 / "status.json").unlink()  # no finished L7.1 run: the command for the student's own profile
    assert demo.l71_reference(show=said.append) is None and "python -m labs l71." in said[-1]


def test_l72s_command_on_the_base_route_names_no_profile(runs, gpu):
    """Issue 33, item 4: on the base route ``python -m labs l72`` picks rtx5090 itself; the printed command does
    not name a profile the student did not choose."""
    from labs.l71.notebook import terminal_command as l71_command
    from labs.l72 import demo

    profile_choice.save_choice(BASE)
    assert demo.terminal_command(get_profile("rtx5090")) == "python -m labs l72"
    assert l71_command(get_profile(BASE)) == "python -m labs l71"
