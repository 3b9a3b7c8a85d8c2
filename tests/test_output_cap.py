"""The cap on a notebook cell's output (tests/wrong_answers.MAX_OUTPUT_LINES) that the untouched-notebook runs
apply: it fails on what L7.2's run cell printed on a CPU before issue 40 (both GPU memory plans of a 32 GB card,
40 lines of them) and passes what ``print_vram_plans`` prints there now."""

from __future__ import annotations

from labs import vram
from labs.core.profiles import get_profile
from labs.l72.steps import print_vram_plans
from wrong_answers import LONG_OUTPUTS, MAX_OUTPUT_LINES, long_output, output_lines


def _stream(text: str) -> list[dict]:
    return [{"output_type": "stream", "name": "stdout", "text": text}]


def test_the_old_cpu_plans_are_too_long_and_a_named_reference_is_not(capsys):
    ci = get_profile("ci")
    # what L7.2's print_vram_plans printed on the ci profile before issue 40 (labs/l72/steps.py then)
    old = "\n\n".join(p.render_es() for p in (vram.plan(ci, "trl", None, lora=True), vram.plan(ci, "unsloth")))
    assert output_lines(_stream(old)) > 2 * MAX_OUTPUT_LINES
    print_vram_plans(ci)
    assert long_output("ruta_l72 = demo.full_run(perfil)", _stream(capsys.readouterr().out)) is None
    assert long_output("ruta_l72 = demo.full_run(perfil)", _stream(old))
    assert long_output("print(format_report(checks))", _stream(old)) is None  # named: the doctor's table
    assert all(why for why in LONG_OUTPUTS.values())
    short = _stream("\n".join(f"línea {i}" for i in range(MAX_OUTPUT_LINES)) + "\n")
    assert long_output("print('x')", short) is None
    table = [{"output_type": "execute_result", "data": {"text/plain": "\n".join(["fila"] * 20)}}]
    assert long_output("display(tabla)", table)  # a displayed table's rows count too
    html = [{"output_type": "display_data", "data": {"text/plain": "\n".join(["fila"] * 20),
                                                     "text/html": "<table>" + "<tr><td>1</td></tr>" * 3 + "</table>"}}]
    assert output_lines(html) == 3  # JupyterLab shows the HTML: three rows, not pandas' wrapped plain text
    image = [{"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure>\n" * 20}}]
    assert long_output("display(figura)", image) is None


def test_l6_section_6_prints_a_summary_and_folds_the_models_text():
    """Issue 52: L6 §6 printed 19 lines, the model's English completions among them (and passed the cap only because
    its call shared a name with the doctor's table). Now the verdict prints; the table is folded, one line closed."""
    from labs.core.folded import Folded
    from labs.l6.trainer_check import format_report, format_summary

    rows = [{"group": g, "position": p, "completion": "The answer is forty two because the sum of", "reward": 3.0,
             "trl_advantage": 0.5, "labs_advantage": 0.5, "diff": 1e-8} for g in range(2) for p in range(4)]
    report = {"rows": rows, "max_diff": 1e-8, "tolerance": 1e-6, "trl_version": "1.16.0", "num_generations": 4,
              "scale_rewards": "group", "columns": ["prompt", "completion", "advantage"], "max_diff_population": 0.2,
              "max_diff_no_eps": 1e-5, "seconds": 50.0}
    summary = format_summary(report)
    assert "The answer" not in summary and len(summary.splitlines()) <= 6
    assert "The answer" in format_report(report) and summary in format_report(report)
    folded = Folded("La tabla fila a fila", format_report(report))
    shown = [{"output_type": "display_data", "data": {"text/plain": repr(folded), "text/html": folded._repr_html_()}}]
    assert output_lines(_stream(summary + "\n")) + output_lines(shown) <= MAX_OUTPUT_LINES
    assert "<details>" in folded._repr_html_() and "The answer" in folded._repr_html_()
    assert long_output("informe = run_trainer_check(perfil)\nprint(format_report(informe))", _stream(format_report(report)))
