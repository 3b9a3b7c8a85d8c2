"""Checked notebook outputs: the cells nbval compares, the sanitizer it compares them through, and a proof
that an altered number makes nbval fail with a diff.

``make test`` runs nbval with ``--nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg``: only cells
whose first line is ``# NBVAL_CHECK_OUTPUT`` are compared, after the sanitizer's substitutions.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

from notebook_cells import is_checked

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
L6 = ROOT / "sources" / "L6_de_policy_gradient_a_grpo.ipynb"

# Text that differs between runs or machines. Deliberately written apart from the sanitizer's own rules
# (and broader), so a checked output with volatile text the sanitizer misses is caught here, not in CI.
VOLATILE = {
    "absolute path": re.compile(r"(?<![\w<>])(?:~/|/(?!/)[A-Za-z_.][\w.-]*/)"),
    "timing": re.compile(r"\d\s?(?:s|ms|min|seg|segundos|minutos|horas)\b"),
    "speed": re.compile(r"\b(?:it/s|s/it|tokens/s)\b"),
    "memory": re.compile(r"\d\s?(?:[KMGT]i?B|bytes)\b"),
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "clock": re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b"),
    "address": re.compile(r"0x[0-9a-fA-F]{6,}"),
    "float noise": re.compile(r"\de-(?:1\d|[2-9]\d)\b"),
}


def sanitize(text: str) -> str:
    """The substitutions nbval applies (nbval's own parser, same order)."""
    for regex, replace in get_sanitize_patterns(SANITIZE.read_text()):
        text = re.sub(regex, replace, text)
    return text


def output_text(output: dict) -> str:
    if output["output_type"] == "stream":
        text = output["text"]
    else:
        text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


# ---------------------------------------------------------------- the sanitizer


@pytest.mark.parametrize(
    "volatile",
    [
        "guardado en /tmp/l6-trainer-check-x1y2/completions/completions_00001.parquet",
        "modelo en /home/alumno/.cache/grpo-course/smollm2, listo",
        "caché ~/.cache/grpo-course/modelos",
        "dos entrenamientos de 150 pasos en 3.2 s",
        "tiempo: 51,3 s; evaluación 1.5 min; 12 ms por paso; 2 segundos",
        "0.84 s/paso, 3.1 it/s",
        "pico de memoria 3.25 GiB (RSS 812 MB)",
        "empezado el 2026-12-01 a las 12:13:49",
        "2026-12-01T12:13:49.123+00:00",
        "<labs.core.runfolder.RunFolder object at 0x7f3a2b1c4d50>",
        "maxdiff: 1.23e-17 y -4.4e-16",
        "[INFO] Running in WANDB offline mode\nTRL:  GRPO requires at least 2 generations",
    ],
)
def test_sanitizer_masks_volatile_text(volatile):
    clean = sanitize(volatile)
    assert clean != volatile
    assert not [name for name, rx in VOLATILE.items() if rx.search(clean)], clean


@pytest.mark.parametrize(
    "lesson_numbers",
    [
        "ventajas               [+0.83, -0.50, -1.17, +0.83]",
        "cociente poblacional/muestral = 1.155   √(G/(G-1)) = 1.155  (G = 4)",
        "al revés, muestral/poblacional = 0.866",
        "control, sin el 1e-4: máxima |dif| 6.7e-05",
        "200,000 muestras, G=4, 150 pasos, 16 tokens, ε=0.2, TRL 1.16.0, SmolLM2-135M, Qwen3-4B",
        "runs/l71-ci/eval/summary.json, s/paso, 3:1",
    ],
)
def test_sanitizer_leaves_the_lessons_numbers_alone(lesson_numbers):
    assert sanitize(lesson_numbers) == lesson_numbers


def test_sanitize_file_is_what_make_test_passes():
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = makefile[makefile.index("\ntest:"):makefile.index("\nsetup:")]
    assert "--nbval-lax" in test_recipe and "--nbval-sanitize-with tests/nbval_sanitize.cfg" in test_recipe
    assert len(get_sanitize_patterns(SANITIZE.read_text())) >= 8


# ---------------------------------------------------------------- the checked cells


def test_l6_keeps_checked_outputs_for_its_deterministic_cells():
    nb = json.loads(L6.read_text())
    checked = [c for c in nb["cells"] if is_checked(c)]
    assert len(checked) >= 15
    assert all(c["outputs"] for c in checked)
    text = "\n".join(output_text(o) for c in checked for o in c["outputs"])
    # the lesson's table with both stds, its ratio, the real trainer step, the objective and the seeded toys
    for expected in ("poblacional (divide por G)", "muestral (divide por G-1)", "cociente poblacional/muestral = 1.155",
                     "muestral/poblacional = 0.866", "regla del entrenador (std muestral + 1e-4): coincide",
                     "loss_type='dapo'", "pérdida del primer paso", "importance_sampling_level",
                     "correlación recompensa-longitud"):
        assert expected in text, expected


@pytest.mark.parametrize("path", sorted((ROOT / "sources").glob("*.ipynb")), ids=lambda p: p.name)
def test_checked_outputs_hold_no_volatile_text_the_sanitizer_misses(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if not is_checked(cell):
            continue
        for output in cell["outputs"]:
            assert output["output_type"] in ("stream", "execute_result", "display_data"), (path.name, i)
            images = [k for k in output.get("data", {}) if k.startswith("image/")]
            assert not images, f"{path.name} celda {i}: una figura en una celda comprobada ({images})"
            assert output.get("name", "stdout") == "stdout", f"{path.name} celda {i}: stderr en una celda comprobada"
            clean = sanitize(output_text(output))
            found = {name: rx.search(clean).group(0) for name, rx in VOLATILE.items() if rx.search(clean)}
            assert not found, f"{path.name} celda {i}: {found}"


# ---------------------------------------------------------------- an altered number fails nbval


def _cheap_copy(tmp_path: Path, name: str, alter: bool) -> Path:
    """L6's import cell and its checked cell of hand-computed advantages (seconds to run), maybe altered."""
    nb = nbformat.read(L6, as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    steps = next(c for c in nb.cells if is_checked(c) and "advantage_steps(grupo" in c.source
                 and "format_steps" in c.source)
    if alter:
        text = steps.outputs[0]["text"]
        assert "media                  1.7500" in text
        steps.outputs[0]["text"] = text.replace("media                  1.7500", "media                  1.7600", 1)
    nb.cells = [first_code, steps]
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


@pytest.mark.notebook
def test_an_altered_checked_number_fails_nbval_with_a_diff(tmp_path):
    altered = _cheap_copy(tmp_path, "alterado.ipynb", alter=True)
    intact = _cheap_copy(tmp_path, "intacto.ipynb", alter=False)
    env = {**os.environ, "COURSE_PROFILE": "ci", "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    def nbval(path: Path) -> subprocess.CompletedProcess:
        # one run per copy: nbval names a notebook outside the rootdir by its folder, not by its file name
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--nbval-lax", "--nbval-current-env",
             "--nbval-sanitize-with", str(SANITIZE), str(path)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )

    bad, good = nbval(altered), nbval(intact)
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1 and "1 failed, 1 passed" in out and "Cell outputs differ" in out, out
    assert "1.7600" in out and "1.7500" in out  # the diff shows the stored and the computed value
    assert good.returncode == 0 and "2 passed" in good.stdout, good.stdout + good.stderr
