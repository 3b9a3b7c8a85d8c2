"""JupyterLab from the CPU stack's environment, driven by a real browser (Playwright with Debian's Chromium).

``Lab`` starts ``jupyter lab`` on a free port over a folder of student notebooks, with the ``ci`` profile and an
empty runs folder in its environment (the kernels inherit them), and the notebook windowing off so that every cell
is in the page. ``Lab.open(name)`` gives a ``NotebookPage``: Run All, click a cell and type into it, run it with
Ctrl+Enter, wait for the kernel, save, screenshot. What the cells printed is read back from the saved notebook
(JupyterLab writes what the page shows).

Playwright's own browser download cannot reach its CDN on the course's machines: the browser is the system's
Chromium (``CHROMIUM``, or ``chromium``/``chromium-browser`` on the PATH; ``apt-get install -y chromium``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

TOKEN = "curso-grpo-navegador"
# JupyterLab's settings for the test: every cell rendered (windowing off), the page's app exposed for waiting
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # no "official Jupyter news?" toast over the cells
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


def chromium() -> str:
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    raise RuntimeError("No Chromium found: apt-get install -y chromium (or set CHROMIUM to its path).")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running ``jupyter lab`` over ``root`` (a copy of notebooks/), its log in ``root/../jupyterlab.log``."""

    def __init__(self, root: Path, runs: Path, locale: str = "en"):
        self.root, self.port = root, _free_port()
        settings = root.parent / "lab-settings"
        for name, values in SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        if locale != "en":
            path = settings / "@jupyterlab/translation-extension/plugin.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"locale": locale}))
        env = dict(os.environ, COURSE_PROFILE="ci", COURSE_RUNS=str(runs), WANDB_MODE="offline", HF_HUB_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false", JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTER_RUNTIME_DIR=str(root.parent / "runtime"))
        self.log = open(root.parent / "jupyterlab.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
             f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
             "--ServerApp.disable_check_xsrf=True", "--allow-root"],
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"jupyter lab did not start: see {self.log.name}")

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{name}?token={TOKEN}&reset"

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# The page's JupyterLab (exposed by --LabApp.expose_app_in_browser): the open notebook panel and its state.
_PANEL = "window.jupyterapp.shell.currentWidget"
_BUSY = f"""() => {{
  const p = {_PANEL};
  if (!p || !p.sessionContext || !p.sessionContext.session || !p.sessionContext.session.kernel) return true;
  const k = p.sessionContext.session.kernel.status;
  const running = [...p.content.node.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));
  return k !== 'idle' || running;
}}"""


class NotebookPage:
    """One notebook open in the page."""

    def __init__(self, page, lab: Lab, name: str):
        self.page, self.lab, self.name = page, lab, name
        page.goto(lab.url(name))
        # the app object exists only once JupyterLab has started in the page: a wait that reads the shell before then
        # raises in the page (the first notebook of a fresh server did) instead of waiting
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=180_000)
        page.wait_for_function(f"() => {_PANEL} && {_PANEL}.content && {_PANEL}.content.widgets.length > 0 "
                               f"&& {_PANEL}.context.path.endsWith({json.dumps(name)})", timeout=120_000)
        page.wait_for_function(
            f"() => {_PANEL}.sessionContext.session && {_PANEL}.sessionContext.session.kernel "
            f"&& {_PANEL}.sessionContext.session.kernel.status === 'idle'", timeout=180_000)

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def wait_idle(self, timeout_s: float):
        """Until the kernel is idle and no cell shows ``[*]`` (a few idle polls in a row: cells queue)."""
        deadline, calm = time.time() + timeout_s, 0
        while time.time() < deadline:
            calm = calm + 1 if not self.page.evaluate(_BUSY) else 0
            if calm >= 3:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: still running after {timeout_s:.0f} s")

    def run_all(self, timeout_s: float) -> float:
        """The menu's Run > Run All Cells (its command); seconds until every cell ran."""
        started = time.perf_counter()
        self.page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        time.sleep(1.0)
        self.wait_idle(timeout_s)
        return time.perf_counter() - started

    def type_into(self, index: int, text: str):
        """Click the cell, select its text and type ``text`` over it (inserted as typed text, without the editor's
        auto-indent and bracket closing, as a paste does); a Markdown cell opens its editor first."""
        cell = self.cell(index)
        cell.scroll_into_view_if_needed()
        if "jp-MarkdownCell" in (cell.get_attribute("class") or ""):
            cell.dblclick()
        editor = cell.locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.insert_text(text)
        source = f"i => {_PANEL}.content.widgets[i].model.sharedModel.getSource()"
        deadline = time.time() + 10
        while self.page.evaluate(source, index) != text:  # the editor hands its text to the model asynchronously
            if time.time() > deadline:
                raise AssertionError(f"{self.name}, cell {index}: the editor holds another text than was typed:\n"
                                     f"{self.page.evaluate(source, index)[:300]}")
            time.sleep(0.2)

    def run_cell(self, index: int, timeout_s: float):
        """Click the cell and press Ctrl+Enter (run it, stay on it); wait until it ran."""
        cell = self.cell(index)
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputArea-prompt").click()
        self.page.keyboard.press("Control+Enter")
        time.sleep(0.5)
        self.wait_idle(timeout_s)

    def save(self):
        """Save from the page (the File menu's command) and read the notebook JupyterLab wrote."""
        self.page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        self.page.wait_for_function(f"() => !{_PANEL}.context.model.dirty", timeout=60_000)
        import nbformat  # reads() joins the saved file's line lists back into strings

        return nbformat.reads((self.lab.root / self.name).read_text(encoding="utf-8"), as_version=4)

    def screenshot(self, index: int | None, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if index is None:
            self.page.screenshot(path=str(path))
        else:
            self.cell(index).screenshot(path=str(path))

    def close(self):
        """Shut the kernel down (a student's Kernel > Shut Down Kernel) and close the tab."""
        self.page.evaluate(f"{_PANEL}.sessionContext.shutdown()")
        self.page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
