"""More of L7.2's answer checks, its rules and command line, and the rehearsal's paths without a vLLM engine.

The L7.2 checks (``labs.l72.answers``) are called as the notebook's check cells call them, on the wrong answers a
student really writes: no function at all, one that raises on the first process it is asked about, a "no" without
a reason, a reason that does not name what came too early, an ``importar_unsloth`` that never imports unsloth or
lets the course's loader do it, arguments by position or twice. Each failure must say, in Spanish, what is wrong.

The rehearsal's pieces (``labs.rehearsal.parts``, ``report``, ``cli``) are called on a profile without vLLM, on a
trainer without a colocated engine, and on the records a part leaves behind; nothing here trains or loads a model.
"""

from __future__ import annotations

import json
import os
import types
from argparse import Namespace

import pytest
import torch  # noqa: F401 - the course's loader and the lab import it: paid once here, not inside one test

from labs.core.profiles import get_profile
from labs.l72 import answers, rules
from labs.l72.standby import ORDER_SENSITIVE_MODULES, STANDBY_ENV

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _verdict(modulos, entorno) -> bool:
    """The right yes/no of question 1, written as a student would (never the course's guard)."""
    if "unsloth" in modulos:
        return entorno.get(STANDBY_ENV) == "1"
    return not any(m in modulos for m in ORDER_SENSITIVE_MODULES)


# --- 1. standby_posible ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [None, "standby_posible", True])
def test_a_missing_standby_posible_is_asked_for_by_name(answer):
    """A cell left empty (None), a name in quotes, or a bool instead of a function: the check asks for the function."""
    assert answers.standby_errors(answer) == ["Define la función standby_posible(modulos, entorno)."]


def test_a_standby_posible_that_raises_names_the_process_and_the_error():
    """``entorno[...]`` on a process without the variable raises KeyError: the check says where and what."""

    def standby_posible(modulos, entorno):
        standby = entorno[STANDBY_ENV] == "1"
        if "unsloth" in modulos:
            return standby, "unsloth se importó sin Standby"
        early = [m for m in ORDER_SENSITIVE_MODULES if m in modulos]
        return not early, ", ".join(early) + " antes que unsloth"

    (problem,) = answers.standby_errors(standby_posible)
    assert problem.startswith("En un proceso con importado: ")
    assert f"{STANDBY_ENV} sin definir" in problem
    assert "la función lanzó KeyError" in problem and STANDBY_ENV in problem.split("lanzó", 1)[1]


@pytest.mark.parametrize("reason", ["", "   ", None, ["trl"]])
def test_a_no_without_a_written_reason_is_refused(reason):
    """The right verdict but no sentence why (empty, blank, None, or the list of modules): the check asks for a text."""

    def standby_posible(modulos, entorno):
        ok = _verdict(modulos, entorno)
        return ok, ("adelante" if ok else reason)

    (problem,) = answers.standby_errors(standby_posible)
    assert "importado: trl;" in problem  # the first process where Standby can no longer start
    assert problem.endswith("no se puede, pero la función no explica por qué (un texto).")


def test_a_reason_that_does_not_name_the_early_import_is_refused():
    """"Too late for Standby" is true but does not say that trl came first: the reason must name it."""

    def standby_posible(modulos, entorno):
        ok = _verdict(modulos, entorno)
        return ok, "adelante" if ok else "ya es tarde para Standby"

    (problem,) = answers.standby_errors(standby_posible)
    assert "importado: trl;" in problem
    assert problem.endswith("el motivo debe nombrar lo que se importó antes de tiempo.")


def test_a_reason_that_names_each_early_import_passes_the_same_verdicts():
    """The same verdicts with a reason that names what came early and what happened to Standby: no problem (the
    tests above fail because of their reasons, not their verdicts)."""

    def standby_posible(modulos, entorno):
        ok = _verdict(modulos, entorno)
        if ok:
            return True, "adelante"
        early = [m for m in ORDER_SENSITIVE_MODULES if m in modulos]
        if "unsloth" in modulos:
            return False, "unsloth se importó sin Standby"
        return False, ", ".join(early) + " se importaron antes que unsloth"

    assert answers.standby_errors(standby_posible) == []


# --- 2. importar_unsloth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [None, "importar_unsloth", 1])
def test_a_missing_importar_unsloth_is_asked_for_by_name(answer):
    assert answers.import_errors(answer) == ["Define la función importar_unsloth()."]


def test_an_importar_unsloth_that_only_sets_the_variable_is_told_it_imports_nothing():
    """The variable is set, but unsloth is never imported (nor anything returned)."""

    def importar_unsloth():
        os.environ[STANDBY_ENV] = "1"

    assert answers.import_errors(importar_unsloth) == [
        "En un proceso sin la variable de Standby, la función no importa unsloth."]


def test_an_importar_unsloth_that_lets_the_course_loader_import_unsloth_is_named():
    """A student reuses the course's loader (``labs.l72.gpu``) and ignores that it fails without a GPU: unsloth was
    imported by the course's code, not by the answer, and the check names that module."""

    def importar_unsloth():
        os.environ[STANDBY_ENV] = "1"
        from labs.l72 import gpu

        try:
            gpu.load_unsloth_model(get_profile("ci"), show=lambda line: None)
        except Exception:  # noqa: BLE001 - the student's own "fallback"
            pass
        from unsloth import FastLanguageModel

        return FastLanguageModel

    (problem,) = answers.import_errors(importar_unsloth)
    assert "`l72.gpu`" in problem and "escríbelo tú" in problem


def test_an_importar_unsloth_written_by_the_student_passes():
    """The same function without the course's loader passes (the test above fails because of the loader)."""

    def importar_unsloth():
        os.environ[STANDBY_ENV] = "1"
        from unsloth import FastLanguageModel

        return FastLanguageModel

    assert answers.import_errors(importar_unsloth) == []


# --- 3. and 4. cargar_modelo, anadir_lora, and the rules on their arguments ------------------------------------


@pytest.mark.parametrize("call", ["from_pretrained", "get_peft_model"])
def test_a_missing_call_function_is_asked_for(call):
    assert answers.call_errors(None, call) == ["Define la función pedida (def ...) en la celda de respuesta."]


def test_a_cargar_modelo_that_raises_names_the_profile_and_the_error():
    """``perfil.model_name`` does not exist (the field is ``unsloth_model``): AttributeError, on the first profile."""

    def cargar_modelo(FastLanguageModel, perfil):
        return FastLanguageModel.from_pretrained(model_name=perfil.model_name, fast_inference=True)

    (problem,) = answers.call_errors(cargar_modelo, "from_pretrained")
    first = answers.check_profiles()[0].name
    assert problem.startswith(f"Con el perfil {first}, la función lanzó AttributeError")
    assert "model_name" in problem


def test_get_peft_model_with_every_setting_by_position_asks_for_names():
    """Eight arguments without names: more than the parameters Unsloth takes by position; the rule asks for names."""

    def anadir_lora(FastLanguageModel, modelo, perfil):
        return FastLanguageModel.get_peft_model(modelo, perfil.lora_r, TARGETS, perfil.lora_alpha, 0, "none",
                                                "unsloth", perfil.seed)

    problems = answers.call_errors(anadir_lora, "get_peft_model")
    first = answers.check_profiles()[0].name
    assert problems == [f"Con el perfil {first}: get_peft_model recibe 8 argumentos sin nombre: pasa los ajustes "
                        "por su nombre."]


def test_from_pretrained_with_the_model_by_position_and_by_name_says_twice():
    """The model id by position and again as ``model_name=``: Python would refuse it; the rule says which, twice."""

    def cargar_modelo(FastLanguageModel, perfil):
        return FastLanguageModel.from_pretrained(
            perfil.unsloth_model, model_name=perfil.unsloth_model,
            max_seq_length=perfil.max_prompt_tokens + perfil.max_completion_length,
            load_in_4bit=perfil.load_in_4bit, fast_inference=True, max_lora_rank=perfil.lora_r)

    (problem,) = answers.call_errors(cargar_modelo, "from_pretrained")
    assert problem.endswith("from_pretrained recibe model_name dos veces (por posición y por nombre).")


def test_rules_errors_stop_at_the_binding_problem():
    """``rules.errors`` reports only the binding problem: the other rules are not judged on a call Python refuses."""
    profile = get_profile("ci")
    too_many = rules.errors("from_pretrained", tuple(range(9)), {}, profile)
    assert too_many == ["from_pretrained recibe 9 argumentos sin nombre: pasa los ajustes por su nombre."]
    twice = rules.errors("get_peft_model", ("modelo", 8), {"r": 8, "lora_alpha": 3}, profile, model="modelo")
    assert twice == ["get_peft_model recibe r dos veces (por posición y por nombre)."]
    # without the duplicate the same call is judged by the rules (the wrong alpha is found)
    judged = rules.errors("get_peft_model", ("modelo", 8), {"lora_alpha": 3}, profile, model="modelo")
    assert any(p.startswith("lora_alpha=3") for p in judged)


# --- python -m labs l72 on a finished run ----------------------------------------------------------------------


def test_python_m_labs_l72_on_a_finished_ci_run_prints_its_folder_and_backend(tmp_path, monkeypatch, capsys):
    """A finished run is only read: the command's last line is the JSON with its folder and the back-end used."""
    from labs.core.runfolder import RUN_JSON, STATE_FINISHED, RunFolder, write_json
    from labs.l72 import cli

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    run = RunFolder(tmp_path / "l72-hecho")
    write_json(run.path(RUN_JSON), {"backend_used": "transformers-peft"})
    run.write_status(STATE_FINISHED, 2, 2)
    (run.root / "grading").mkdir()
    (run.root / "grading" / "informe.md").write_text("informe\n", encoding="utf-8")

    assert cli.main(["--profile", "ci", "--run-name", "l72-hecho"]) == 0
    out = capsys.readouterr().out
    assert "ya terminó" in out
    last = json.loads(out.strip().splitlines()[-1])
    assert last == {"run_dir": str(run.root), "backend_used": "transformers-peft"}


# --- the rehearsal without a vLLM engine -----------------------------------------------------------------------


def test_fraction_without_vllm_says_no_engine_and_reserves_nothing():
    from labs.rehearsal.parts import _fraction

    profile = get_profile("ci").replace(use_vllm=False)
    fraction = _fraction(profile, types.SimpleNamespace())
    assert fraction["rule"] == "no-vllm" and fraction["in_force"] is None
    assert fraction["requested"] == profile.vllm_gpu_memory_utilization


@pytest.mark.parametrize("use_vllm", [False, True])
def test_engine_check_without_an_engine_is_not_checked_and_says_why(use_vllm):
    """No vLLM in the profile, or a trainer without a colocated engine: not checked, and why (in Spanish)."""
    from labs.rehearsal.parts import engine_check

    result = engine_check(types.SimpleNamespace(), get_profile("ci").replace(use_vllm=use_vllm))
    assert result["ok"] is None and "no usa vLLM" in result["why_es"]


def test_without_an_engine_there_is_no_probe_no_score_and_the_weight_check_decides():
    from labs.rehearsal.parts import _follows_trainer, _scores, engine_probe

    trainer = types.SimpleNamespace()
    assert engine_probe(trainer, [{"prompt": [{"role": "user", "content": "2+2"}]}]) is None
    assert _scores(trainer, []) is None
    weights = {"ok": None, "why_es": "el perfil no usa vLLM"}
    assert _follows_trainer(trainer, [], None, weights) is weights


def test_page_shows_the_driver_and_the_gpu_peak():
    from labs.rehearsal import report

    record = {"profile": "rtx5090", "created": "hoy", "status": "ok", "elapsed_seconds": 30.0,
              "device": {"name": "RTX 5090", "driver": "580.65", "packages": {"torch": "2.9.0", "vllm": None}},
              "parts": {"l71": {"lab": "L7.1", "steps": 3, "step_seconds": [9.0, 4.0, 5.0],
                                "memory": {"gpu": {"device_used_peak_gib": 27.25}, "sampled_rss_peak_gib": 6.0},
                                "vllm_fraction": {"in_force": 0.3}}},
              "not_checked": []}
    page = report.render_es(record)
    assert "Entorno: controlador 580.65, torch 2.9.0." in page
    assert "| L7.1 | 3 | 4,0 | 27,2 GiB de GPU (pico, toda la tarjeta) | 0,300 |" in page


def test_measured_from_a_part_without_steps_is_nothing():
    from labs.rehearsal.cli import measured_from

    assert measured_from({}) is None and measured_from({"lab": "L7.2", "step_seconds": []}) is None
    part = {"step_seconds": [3.0, 2.0], "completions_per_step": 8, "max_completion_length": 256}
    measured = measured_from(part)
    assert measured is not None and measured.step_seconds == [3.0, 2.0] and measured.mean_completion_tokens == 256


def test_a_part_whose_process_fails_is_not_ok_even_with_an_ok_record(tmp_path, capsys):
    """A child that exits non-zero (here: an unknown profile) beside a record that says ok (left by a process that
    died after writing it): the part counts as failed, and the child's output is kept for the message."""
    from labs.rehearsal.cli import _child

    (tmp_path / "part-l71.json").write_text(json.dumps({"ok": True, "lab": "L7.1"}), encoding="utf-8")
    args = Namespace(profile_name="no-existe", set=[])
    record, tail = _child("l71", args, tmp_path)
    assert record == {"ok": False, "lab": "L7.1"}
    assert "No existe el perfil 'no-existe'" in tail
    assert "No existe el perfil" in capsys.readouterr().out  # echoed as the child printed it

