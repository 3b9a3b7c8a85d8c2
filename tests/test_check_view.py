"""grader.check's result in Spanish (labs.core.check_view), on otter's own test files and results.

The test file is the one otter assign wrote into the student notebook for L7.1's reward question, run by otter's
``ExceptionTestFile`` against a wrong answer whose message quotes a completion with tags (issue 42: otter's HTML
dropped them, repeated the hint under each failed case and showed the test's source line).
"""

from __future__ import annotations

import json

from otter.test_files import ExceptionTestFile

from labs import assign
from labs.core.check_view import FAILED, PASSED, SpanishResult, case_message, checks_in_spanish

NOTEBOOK = assign.STUDENT_DIR / "L7_1_grpo_trl_vllm.ipynb"


def _run(question: str, env: dict, tmp_path) -> SpanishResult:
    return _run_in(NOTEBOOK.name, question, env, tmp_path)


def _reward(pays):
    def correctness_reward(completions, answer, **kwargs):
        return [pays(c[0]["content"], gold) for c, gold in zip(completions, answer)]
    return correctness_reward


def test_a_failed_check_shows_its_message_once_escaped_without_otters_frame(tmp_path):
    wrong = _reward(lambda text, gold: 0.0)  # never pays
    shown = _run("recompensa-correccion", {"correctness_reward": wrong}, tmp_path)
    page, text = shown._repr_html_(), repr(shown)
    assert FAILED in page and FAILED in text
    assert "&lt;answer&gt;" in page and "<answer>" not in page.replace("&lt;answer&gt;", "")  # the tags show
    assert "<answer>" in text
    hint = shown.test_case_results[0].test_case.failure_message
    assert text.count(hint) == 1 and page.count("Pista:") == 1
    for english in ("Test case failed", "Error at line", "results:", "assert ", "AssertionError"):
        assert english not in page and english not in text, english


def test_a_passed_check_says_correcto(tmp_path):
    import re

    def lesson(text):  # the lesson's rule: the integer in the answer tag, without thousands commas
        m = re.search(r"<answer>\s*(-?\d[\d,]*)\s*</answer>", text)
        return m.group(1).replace(",", "") if m else None

    right = _reward(lambda text, gold: 2.0 if lesson(text) == gold else 0.0)
    shown = _run("recompensa-correccion", {"correctness_reward": right}, tmp_path)
    assert shown.passed_all and repr(shown) == f"recompensa-correccion: ✅ {PASSED}."
    assert PASSED in shown._repr_html_() and FAILED not in shown._repr_html_()


def test_another_exception_keeps_its_type_and_a_missing_grader_stays_none():
    otter_message = "❌ Test case failed\nError at line 3 in test q:\n      x = f()\nKeyError: 'kl'"
    assert case_message(otter_message) == "KeyError: 'kl'"
    assert case_message(otter_message.replace("KeyError: 'kl'", "AssertionError: Con G=4, mal.")) == "Con G=4, mal."
    assert checks_in_spanish(None) is None


def _run_in(notebook: str, question: str, env: dict, tmp_path) -> SpanishResult:
    code = json.loads((assign.STUDENT_DIR / notebook).read_text())["metadata"]["otter"]["tests"][question]
    path = tmp_path / f"{question}.py"
    path.write_text(code)
    result = ExceptionTestFile.from_file(str(path))
    result.run(env)
    return SpanishResult(result)


def test_an_untouched_reward_stub_is_told_once_in_spanish(tmp_path):
    """Issue 52: E4's check on the untouched stub said one error three times (with its context, as a raw ValueError,
    wrapped by the hack table's check), ending in TRL's English "'NoneType' object is not iterable"."""
    def mi_recompensa(completions, **kwargs):  # otter's stub: a body of `...`
        ...

    shown = _run_in("E4_tu_recompensa.ipynb", "mi-recompensa", {"mi_recompensa": mi_recompensa}, tmp_path)
    said, _ = shown.lines()
    assert len(said) == 1 and "devolvió None: aún no está escrita" in said[0], said
    for english in ("not iterable", "NoneType", "ValueError", "TRL falla"):
        assert english not in repr(shown), english


def test_a_stub_comparison_is_told_none_once_without_the_raw_attribute_error(tmp_path):
    """Issue 52: E1-E3's comparison checks showed "AttributeError: NoneType' object has no attribute 'loc" (quotes cut
    by otter) after "devuelve None"; and the stub was told "te falta el return", which it never had."""
    import pandas  # noqa: F401  (the checks import it themselves; the answer's module has it)

    def comparar_e1(metricas):
        ...

    shown = _run_in("E1_tamano_de_grupo.ipynb", "comparar-e1", {"comparar_e1": comparar_e1}, tmp_path)
    said, _ = shown.lines()
    assert said == ["comparar_e1 devuelve None: la función aún no está escrita (su celda de respuesta), o le falta "
                    "devolver el resultado."], said
    assert "AttributeError" not in repr(shown)


def test_only_a_raw_exception_is_said_in_spanish_with_its_type():
    from labs.core.check_view import said_once

    assert said_once(["KeyError: 'kl'"]) == ["al comprobarla, tu respuesta lanzó KeyError: 'kl'"]
    assert said_once(["Con G=4: falta la columna x.", "KeyError: 'x'"]) == ["Con G=4: falta la columna x."]
    assert said_once(["Con 4: la suma no cuadra por poco.", "Con 7: la suma no cuadra por poco."]) == [
        "Con 4: la suma no cuadra por poco."]
