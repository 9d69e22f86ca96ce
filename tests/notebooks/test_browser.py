"""End-to-end: every notebook runs in a real JupyterLab driven by headless Chromium.

What a user does, the test does: open the notebook in JupyterLab, wait until the
status bar really says the kernel is ``Idle``, click Run -> Run All Cells, wait
until every code cell has an execution count, then look at what rendered. A
notebook fails when a cell errors, a cell never finishes, a widget cannot be
displayed, or ipywidgets' frontend did not load. In every notebook with a
focused widget (class ``pipeline-widget``), the test then moves one slider (or
clicks a live widget's Start) and checks that its figure and summary change and
that no widget error shows. The explorer test moves the explorer's sliders with
the keyboard and through a readout and checks that the summary and the figure
redraw. The animation test opens a notebook that calls ``animate()``, presses its
Play button and checks that the frame, its image and its counters keep changing
(a screenshot in ``artifacts/browser/animation.png``).

Run it alone (a JupyterLab server and Chromium are started and stopped for you)::

    .venv/bin/pytest -m browser tests/notebooks/test_browser.py

Needs Debian's Chromium at ``/usr/bin/chromium`` (``apt-get install -y chromium``;
``python -m tests.services_setup``, which ``make test`` runs, installs it when
``CI=true``). Without it the tests are skipped, or fail under ``CI=true``.
``playwright install`` is never needed: Playwright drives the system Chromium.

Environment variables:

``PIPELINE_LAB_NOTEBOOKS``
    Folder of notebooks to test instead of the repository's ``notebooks/``
    (``*.ipynb`` in it, plus ``solutions/*.ipynb``). Used to develop the test
    against stand-in notebooks and to prove it fails on broken ones.
``PIPELINE_LAB_BROWSER_TIMEOUT``
    Seconds one notebook may take from Run All to the last cell (default 180).

Outputs: a screenshot of each whole notebook in ``artifacts/browser/<stem>.png``
(solutions in ``artifacts/browser/solutions/``) and of the explorer in
``artifacts/browser/explorer.png``, copied to ``docs/explorer.png`` when the
repository's own notebooks were tested. Notebooks run in a temporary copy, so
the repository's files never receive outputs.

Cells tagged ``raises-exception`` may raise (JupyterLab and nbval honour the
same tag); any other error output fails the notebook.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.jupyter_server import REPO, JupyterLab, start_lab
from tests.measures import marks

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = "apt-get update && apt-get install -y --no-install-recommends chromium"
VIEWPORT = {"width": 1280, "height": 900}
# Chromium cannot paint a page taller than its maximum texture size.
MAX_SCREENSHOT_HEIGHT = 15_000
EXPLORER = ".pipeline-explorer"
#: The calls that show the explorer and the plan explorer: their tests run a notebook up to it.
EXPLORE_CALL = "explore("
PLAN_EXPLORE_CALL = "explore_plan("
# Set to copy the explorer's screenshot over the README's docs/explorer.png (otherwise a
# test run leaves the repository as it found it).
UPDATE_IMAGES = "PIPELINE_UPDATE_DOCS_IMAGES"
ARTIFACTS = REPO / "artifacts" / "browser"


def notebooks_dir() -> Path:
    return Path(os.environ.get("PIPELINE_LAB_NOTEBOOKS") or REPO / "notebooks").resolve()


def notebook_timeout_s() -> float:
    return float(os.environ.get("PIPELINE_LAB_BROWSER_TIMEOUT") or 180)


def _discover(pattern: str) -> list[str]:
    root = notebooks_dir()
    if not root.is_dir():
        return []
    return sorted(p.relative_to(root).as_posix() for p in root.glob(pattern))


MAIN_NOTEBOOKS = _discover("*.ipynb")
SOLUTION_NOTEBOOKS = _discover("solutions/*.ipynb")


def _params(names: list[str], what: str) -> list:
    if names:
        return [pytest.param(n, marks=marks(notebooks_dir() / n), id=n) for n in names]
    return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {what} in {notebooks_dir()}"))]


# --------------------------------------------------------------------------- fixtures


def require_chromium() -> str:
    """Path of the system Chromium; skip the test without it, or fail it under CI=true.

    Called from the test bodies (not a fixture) so that under CI a missing
    Chromium is a test failure, not a setup error.
    """
    import playwright.sync_api  # noqa: F401  (the test extra: missing is a failure, not a skip)

    problem = None
    if not os.path.exists(CHROMIUM):
        problem = f"{CHROMIUM} is missing: install it with `{INSTALL_HINT}`"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests need Chromium under CI=true; {problem}", pytrace=False)
        pytest.skip(problem)
    return CHROMIUM


def browser_and_lab(request: pytest.FixtureRequest) -> tuple:
    """The shared browser and JupyterLab server, started on first use."""
    require_chromium()
    return request.getfixturevalue("browser"), request.getfixturevalue("lab")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A private JupyterLab server on a temporary copy of the notebooks."""
    server = start_lab(notebooks_dir(), tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=require_chromium(), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield instance
        finally:
            instance.close()


# ------------------------------------------------------------------ reading the page

# One look at the open notebook. The notebook model (window.jupyterapp, exposed by
# the server flag --LabApp.expose_app_in_browser) tells error outputs apart from
# warnings on stderr; the DOM is what the user sees (prompts, status bar, widgets).
SNAPSHOT_JS = r"""
() => {
  const statusTexts = Array.from(document.querySelectorAll('.jp-StatusBar-Item'))
    .map(e => e.innerText.trim());
  const kernelText = statusTexts.find(t => /\|\s*[A-Za-z][A-Za-z ]*$/.test(t)) || '';
  const kernelStatus = (kernelText.match(/\|\s*([A-Za-z][A-Za-z ]*)$/) || [])[1] || '';
  const app = window.jupyterapp;
  const panel = app && app.shell && app.shell.currentWidget;
  const notebook = panel && panel.content && panel.content.model ? panel.content : null;
  const snap = {
    kernelText, kernelStatus, hasModel: !!notebook, kernelConnection: null,
    kernelModelStatus: null, cells: [], errors: [], stderrTracebacks: [],
    widgetViews: 0,
    renderedWidgets: document.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length,
    widgetErrors: document.querySelectorAll('.jp-Notebook').length ?
      (document.querySelector('.jp-NotebookPanel').innerText.match(
        /Error displaying widget[^\n]*|Javascript Error:[^\n]*/g) || []) : [],
    dialog: (document.querySelector('.jp-Dialog .jp-Dialog-header') || {}).innerText || null,
  };
  const stderrTracebacks = (node, index) => {
    for (const out of node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
      if (out.innerText.includes('Traceback (most recent call last)')) {
        snap.stderrTracebacks.push({cell: index, text: out.innerText.slice(-600)});
      }
    }
  };
  if (notebook) {
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    snap.kernelConnection = kernel ? kernel.connectionStatus : null;
    snap.kernelModelStatus = kernel ? kernel.status : null;
    notebook.widgets.forEach((cell, i) => {
      const index = i + 1;
      const model = cell.model;
      if (model.type !== 'code') return;
      const source = model.sharedModel.getSource();
      const tags = model.getMetadata('tags') || [];
      const prompt = ((cell.node.querySelector('.jp-InputPrompt') || {}).innerText || '').trim();
      snap.cells.push({
        index, prompt, count: model.executionCount,
        running: model.executionState === 'running' || prompt.startsWith('[*]'),
        empty: source.trim() === '', firstLine: source.split('\n')[0].slice(0, 120),
        outputs: (cell.node.querySelector('.jp-OutputArea') || {innerHTML: ''}).innerHTML.length,
      });
      for (let i = 0; i < model.outputs.length; i++) {
        const out = model.outputs.get(i);
        if (out.type === 'error') {
          const json = out.toJSON();
          snap.errors.push({cell: index, ename: json.ename,
                            evalue: String(json.evalue).slice(0, 300),
                            expected: tags.includes('raises-exception')});
        }
        if (out.data && out.data['application/vnd.jupyter.widget-view+json']) snap.widgetViews++;
      }
      // An error output also renders as a traceback on stderr: report it once.
      const hasError = snap.errors.some(e => e.cell === index);
      if (!hasError && !tags.includes('raises-exception')) stderrTracebacks(cell.node, index);
    });
  } else {
    document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((node, i) => {
      const index = i + 1;
      if (!node.classList.contains('jp-CodeCell')) return;
      const prompt = ((node.querySelector('.jp-InputPrompt') || {}).innerText || '').trim();
      const source = (node.querySelector('.cm-content') || {}).innerText || '';
      const m = prompt.match(/^\[(\d+)\]/);
      snap.cells.push({index, prompt, count: m ? Number(m[1]) : null,
                       running: prompt.startsWith('[*]'), empty: source.trim() === '',
                       firstLine: source.split('\n')[0].slice(0, 120),
                       outputs: (node.querySelector('.jp-OutputArea') || {innerHTML: ''})
                         .innerHTML.length});
      stderrTracebacks(node, index);
    });
  }
  return snap;
}
"""


@dataclass
class Snapshot:
    raw: dict

    @property
    def kernel_idle(self) -> bool:
        # The toolbar circle says idle before any kernel is connected; the status
        # bar's "<kernel> | Idle" and the model's connection status do not.
        idle = self.raw["kernelStatus"] == "Idle"
        if self.raw["hasModel"]:
            idle = idle and self.raw["kernelConnection"] == "connected"
            idle = idle and self.raw["kernelModelStatus"] == "idle"
        return idle

    @property
    def code_cells(self) -> list[dict]:
        return [c for c in self.raw["cells"] if not c["empty"]]

    @property
    def running(self) -> list[dict]:
        return [c for c in self.code_cells if c["running"]]

    @property
    def unexecuted(self) -> list[dict]:
        return [c for c in self.code_cells if not c["count"]]

    @property
    def started(self) -> bool:
        return any(c["running"] or c["count"] for c in self.code_cells)

    @property
    def finished(self) -> bool:
        return self.kernel_idle and not self.running and not self.unexecuted

    @property
    def unexpected_errors(self) -> list[dict]:
        return [e for e in self.raw["errors"] if not e["expected"]]

    def problems(self) -> list[str]:
        found = [f"cell #{e['cell']}: {e['ename']}: {e['evalue']}" for e in self.unexpected_errors]
        found += [
            f"cell #{t['cell']}: traceback on stderr: ...{t['text'][-300:]}"
            for t in self.raw["stderrTracebacks"]
        ]
        found += [f"widget: {text}" for text in self.raw["widgetErrors"]]
        return found

    def describe_cell(self, cell: dict) -> str:
        return f"cell #{cell['index']} (prompt {cell['prompt']!r}): {cell['firstLine']!r}"


def snapshot(page) -> Snapshot:
    return Snapshot(page.evaluate(SNAPSHOT_JS))


# ---------------------------------------------------------------- driving JupyterLab


def _poll(page, predicate, timeout_s: float, interval_s: float = 0.25) -> Snapshot:
    """Snapshot until ``predicate(snap)`` twice in a row or timeout; return the last."""
    deadline = time.monotonic() + timeout_s
    hits = 0
    while True:
        snap = snapshot(page)
        hits = hits + 1 if predicate(snap) else 0
        if hits >= 2 or time.monotonic() > deadline:
            return snap
        if snap.raw["dialog"]:
            _accept_dialog(page, snap.raw["dialog"])
        page.wait_for_timeout(interval_s * 1000)


def _accept_dialog(page, title: str) -> None:
    # A notebook without kernel metadata asks which kernel to start: take the default.
    if "kernel" in title.lower():
        page.locator(".jp-Dialog .jp-mod-accept").first.click()


def wait_for_kernel(page, name: str, timeout_s: float = 60) -> None:
    snap = _poll(page, lambda s: s.kernel_idle and bool(s.raw["cells"]), timeout_s)
    if not (snap.kernel_idle and snap.raw["cells"]):
        pytest.fail(
            f"{name}: kernel not idle after {timeout_s:.0f} s (status bar: "
            f"{snap.raw['kernelText']!r}, connection: {snap.raw['kernelConnection']!r})",
            pytrace=False,
        )


def run_all_cells(page, name: str) -> None:
    """Run -> Run All Cells through the menu bar, retried once if it was dropped."""
    for _attempt in range(2):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        snap = _poll(page, lambda s: s.started or not s.code_cells, 10)
        if snap.started or not snap.code_cells:
            return
    pytest.fail(f"{name}: Run All Cells did not start any cell", pytrace=False)


def wait_until_finished(
    page, name: str, timeout_s: float, stall_s: float = 15, through: int | None = None
) -> Snapshot:
    """Wait until every code cell has run (up to cell ``through``, 1-based, if given); fail
    naming the first error or stuck cell.

    Once an error shows, waiting stops as soon as the kernel is idle (an error
    aborts the cells queued behind it: they never get a count) or nothing has
    progressed for ``stall_s`` seconds (a failure can leave cells at ``[*]``).
    (The status bar alone cannot tell a lost request from a running cell: while a
    top-level ``await`` runs, widget messages make it flip to ``Idle``.)
    """

    def look() -> Snapshot:
        snap = snapshot(page)
        if through is None:
            return snap
        return Snapshot(
            {**snap.raw, "cells": [c for c in snap.raw["cells"] if c["index"] <= through]}
        )

    deadline = time.monotonic() + timeout_s
    progress, progress_at = None, time.monotonic()
    while True:
        snap = look()
        state = [(c["count"], c["running"], c["outputs"]) for c in snap.code_cells]
        if state != progress:
            progress, progress_at = state, time.monotonic()
        stalled = time.monotonic() - progress_at > stall_s
        if snap.finished or time.monotonic() > deadline:
            break
        if snap.problems() and ((snap.kernel_idle and not snap.running) or stalled):
            break
        page.wait_for_timeout(500)
    looked_again = False
    if snap.finished and not snap.problems():
        # Outputs can still arrive just after the last count: look once more.
        page.wait_for_timeout(300)
        snap = look()
        looked_again = True
    message = []
    if snap.problems():
        message += ["errors after Run All:", *snap.problems()]
    # By the second look the kernel may be busy again with a widget's own work (the plan
    # explorer plans once it is shown): every cell having run is what counts then.
    complete = snap.finished or (looked_again and not snap.running and not snap.unexecuted)
    if not complete:
        stuck = snap.running or snap.unexecuted
        where = snap.describe_cell(stuck[0]) if stuck else "no cell"
        if time.monotonic() > deadline:
            why = f"not finished within {timeout_s:.0f} s"
        elif not snap.running:
            why = "cells after the error did not run"
        else:
            why = f"stuck: no progress for {stall_s:.0f} s"
        message.append(
            f"{why}; first stuck: {where}; "
            f"kernel status bar: {snap.raw['kernelText']!r}; "
            f"{len(snap.running)} running, {len(snap.unexecuted)} without execution count"
        )
    if message:
        pytest.fail(f"{name}: " + "\n  ".join(message), pytrace=False)
    return snap


def wait_for_widgets(page, name: str, timeout_s: float = 20) -> Snapshot:
    """Widget views render after their output arrives: wait for them, then check."""

    def rendered(s: Snapshot) -> bool:
        return not s.raw["widgetViews"] or s.raw["renderedWidgets"] > 0 or bool(s.problems())

    snap = _poll(page, rendered, timeout_s)
    if snap.problems():
        pytest.fail(f"{name}: " + "\n  ".join(snap.problems()), pytrace=False)
    if snap.raw["widgetViews"] and not snap.raw["renderedWidgets"]:
        pytest.fail(
            f"{name}: {snap.raw['widgetViews']} widget outputs but none rendered "
            "(is ipywidgets' labextension loaded?)",
            pytrace=False,
        )
    return snap


def screenshot_notebook(page, path: Path) -> None:
    """Screenshot the whole notebook: grow the viewport to the notebook's height."""
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = page.evaluate(
        """() => {
          const outer = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
                     || document.querySelector('.jp-NotebookPanel-notebook');
          const cells = document.querySelectorAll('.jp-NotebookPanel .jp-Cell');
          if (!outer || !cells.length) return 0;
          outer.scrollTop = 0;
          const last = cells[cells.length - 1].getBoundingClientRect().bottom;
          return Math.max(0, last - outer.getBoundingClientRect().bottom);
        }"""
    )
    height = min(VIEWPORT["height"] + int(extra) + 40, MAX_SCREENSHOT_HEIGHT)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    page.wait_for_timeout(300)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)


@contextlib.contextmanager
def open_notebook(browser, lab: JupyterLab, name: str) -> Iterator:
    """Open ``name`` in a fresh workspace; on exit close the tab and shut its kernel down."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    workspace = f"auto-{secrets.token_hex(4)}"
    path = f"/lab/workspaces/{workspace}/tree/{urllib.parse.quote(name)}"
    try:
        page.goto(lab.url(path, reset=""), wait_until="domcontentloaded")
        page.wait_for_selector(".jp-NotebookPanel", timeout=60_000)
        # More room for the notebook in screenshots.
        page.evaluate("() => window.jupyterapp && window.jupyterapp.shell.collapseLeft()")
        yield page
    finally:
        context.close()
        with contextlib.suppress(OSError):
            lab.shutdown_kernels()


# Make the cell after the first code cell whose source holds the text the active one, and
# return its place (1-based, as the snapshot counts cells); None when no cell but the last
# holds the text. JupyterLab's "Run All Above Selected Cell" then runs up to the text's.
ACTIVATE_AFTER_JS = """(text) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  const at = notebook.widgets.findIndex(
    cell => cell.model.type === 'code' && cell.model.sharedModel.getSource().includes(text));
  if (at < 0 || at + 1 >= notebook.widgets.length) return null;
  notebook.activeCellIndex = at + 1;
  return at + 2;
}"""


def run_notebook(page, name: str, through: str | None = None) -> Snapshot:
    """Run All on the open notebook and check it; return the final snapshot.

    With ``through``, only the cells up to the first code cell whose source holds that
    text run (all of them when none does): a test of one widget does not run what
    follows it again (``test_notebook_runs_in_jupyterlab`` runs every cell).
    """
    wait_for_kernel(page, name)
    last = page.evaluate(ACTIVATE_AFTER_JS, through) if through is not None else None
    if last is None:
        run_all_cells(page, name)
    else:
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-above')")
    wait_until_finished(page, name, notebook_timeout_s(), through=last)
    return wait_for_widgets(page, name)


# ------------------------------------------------------------------------ the tests

# Notebook -> displays the explorer (True/False), or None when it failed to run.
_RESULTS: dict[str, bool | None] = {}


def _check_widgets_frontend(page) -> None:
    names = page.evaluate(
        """() => JSON.parse(document.getElementById('jupyter-config-data').textContent)
                   .federated_extensions.map(e => e.name)"""
    )
    assert "@jupyter-widgets/jupyterlab-manager" in names, (
        f"ipywidgets' labextension not loaded by JupyterLab; federated extensions: {names}"
    )
    assert "jupyterlab-myst" in names, (
        f"jupyterlab-myst not loaded by JupyterLab (the notebooks' inline expressions need it): "
        f"`pip install -e '.[test]'`; federated extensions: {names}"
    )


# Markdown cells with MyST inline expressions ({eval}`...`) and what jupyterlab-myst
# made of them: it evaluates them in the kernel when Run All reaches the cell and keeps
# each result in the cell's ``user_expressions`` metadata.
INLINE_EXPRESSIONS_JS = r"""
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const found = [];
  panel.content.widgets.forEach((cell, i) => {
    const model = cell.model;
    if (model.type !== 'markdown') return;
    const wanted = (model.sharedModel.getSource().match(/\{eval\}`[^`]*`/g) || []).length;
    if (!wanted) return;
    const results = model.getMetadata('user_expressions') || [];
    found.push({cell: i + 1, wanted, got: results.length,
                failed: results.filter(r => r.result.status !== 'ok')
                  .map(r => `${r.expression}: ${r.result.ename}: ${r.result.evalue}`)});
  });
  return found;
}
"""


def _check_inline_expressions(page, name: str, timeout_s: float = 20) -> int:
    """Every inline expression of the notebook evaluated without error; returns how many."""
    deadline = time.monotonic() + timeout_s
    while True:
        cells = page.evaluate(INLINE_EXPRESSIONS_JS)
        missing = [c for c in cells if c["got"] < c["wanted"]]
        if not missing or time.monotonic() > deadline:
            break
        page.wait_for_timeout(250)
    problems = [f"cell #{c['cell']}: {f}" for c in cells for f in c["failed"]]
    problems += [
        f"cell #{c['cell']}: {c['got']} of {c['wanted']} inline expressions evaluated"
        for c in missing
    ]
    if problems:
        pytest.fail(
            f"{name}: inline expressions after Run All:\n  " + "\n  ".join(problems), pytrace=False
        )
    return sum(c["wanted"] for c in cells)


def _run_and_screenshot(browser, lab: JupyterLab, name: str, shot: Path) -> None:
    with open_notebook(browser, lab, name) as page:
        _check_widgets_frontend(page)
        started = time.monotonic()
        _RESULTS[name] = None  # failed, unless overwritten below
        try:
            run_notebook(page, name)
        finally:
            # A screenshot of the failure is the quickest way to see what went wrong.
            with contextlib.suppress(Exception):
                screenshot_notebook(page, shot)
        expressions = _check_inline_expressions(page, name)
        _RESULTS[name] = page.locator(EXPLORER).count() > 0
        moved = _drive_focused_widgets(page, name)
        print(
            f"{name}: ran in {time.monotonic() - started:.1f} s"
            + (f", {expressions} inline expressions" if expressions else "")
            + (f", {moved} widget(s) redrew" if moved else "")
            + f", screenshot {shot}"
        )


# ------------------------------------------------------- the notebooks' focused widgets

WIDGET = ".pipeline-widget"

WIDGET_STATE_JS = """(index) => {
  const root = document.querySelectorAll('.pipeline-widget')[index];
  const summary = root && root.querySelector('.pipeline-widget-summary');
  const img = root && root.querySelector('.pipeline-widget-figure img');
  return {summary: summary ? summary.innerText : null, img: img ? img.src : null,
          ready: !!(img && img.complete && img.naturalWidth > 0)};
}"""


def _wait_for_widget_redraw(page, index: int, before: dict, name: str, action: str) -> None:
    """Wait until widget ``index``'s summary and figure both differ from ``before``."""
    try:
        page.wait_for_function(
            """([index, before]) => {
              const root = document.querySelectorAll('.pipeline-widget')[index];
              const summary = root && root.querySelector('.pipeline-widget-summary');
              const img = root && root.querySelector('.pipeline-widget-figure img');
              return summary && img && img.complete && img.naturalWidth > 0
                && summary.innerText !== before.summary && img.src !== before.img;
            }""",
            arg=[index, before],
            timeout=60_000,
        )
    except Exception:
        after = page.evaluate(WIDGET_STATE_JS, index)
        pytest.fail(
            f"{name}: widget {index} did not redraw after {action}: summary changed: "
            f"{after['summary'] != before['summary']} ({after['summary']!r}); figure changed: "
            f"{after['img'] != before['img']}",
            pytrace=False,
        )


def _drive_focused_widgets(page, name: str) -> int:
    """Move one slider of each focused widget (or Start a live one); check that it redraws.

    Returns how many widgets were driven. Fails the notebook when a widget's
    figure or summary does not change, or when "Error displaying widget" shows.
    """
    roots = page.locator(WIDGET)
    for index in range(roots.count()):
        root = roots.nth(index)
        root.scroll_into_view_if_needed()
        page.wait_for_function(
            "(i) => { const s = " + WIDGET_STATE_JS + "; return s(i).ready; }",
            arg=index,
            timeout=30_000,
        )
        before = page.evaluate(WIDGET_STATE_JS, index)
        start = root.locator("button", has_text="Start")
        if start.count():
            start.first.click()
            action = "clicking Start"
        else:
            handle = root.locator(".widget-slider .noUi-handle").first
            at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
            handle.focus()
            key = "ArrowLeft" if at_max else "ArrowRight"
            page.keyboard.press(key)
            action = f"{key} on its first slider"
        _wait_for_widget_redraw(page, index, before, name, action)
    problems = snapshot(page).problems()
    if problems:
        pytest.fail(f"{name}: after moving its widgets: " + "\n  ".join(problems), pytrace=False)
    return roots.count()


@pytest.mark.parametrize("name", _params(MAIN_NOTEBOOKS, "notebooks"))
def test_notebook_runs_in_jupyterlab(request, name):
    browser, lab = browser_and_lab(request)
    _run_and_screenshot(browser, lab, name, ARTIFACTS / f"{Path(name).stem}.png")


@pytest.mark.parametrize("name", _params(SOLUTION_NOTEBOOKS, "solution notebooks"))
def test_solution_notebook_runs_in_jupyterlab(request, name):
    browser, lab = browser_and_lab(request)
    _run_and_screenshot(browser, lab, name, ARTIFACTS / "solutions" / f"{Path(name).stem}.png")


def _explorer_candidates() -> list[str]:
    """Notebooks most likely to show the explorer first; none that already failed.

    A notebook that failed in ``test_notebook_runs_in_jupyterlab`` is reported
    there; running it again here would only cost another timeout.
    """
    seen = [n for n in MAIN_NOTEBOOKS if _RESULTS.get(n)]
    if seen:
        return seen[:1]

    def rank(name: str) -> tuple[int, str]:
        text = (notebooks_dir() / name).read_text(errors="replace")
        if "pipeline-explorer" in text:
            return (0, name)
        if "explorer" in text.lower():
            return (1, name)
        return (2 if name not in _RESULTS else 3, name)

    return sorted((n for n in MAIN_NOTEBOOKS if _RESULTS.get(n, True) is not None), key=rank)


def _slider(explorer, description: str):
    slider = explorer.locator(".widget-slider").filter(
        has=explorer.page.locator(".widget-label", has_text=description)
    )
    assert slider.count() >= 1, f"explorer has no slider whose description includes {description!r}"
    return slider.first


def _explorer_state(page) -> dict:
    return page.evaluate(
        """() => {
          const summary = document.querySelector('.pipeline-explorer .pipeline-explorer-summary');
          const img = document.querySelector('.pipeline-explorer .pipeline-explorer-figure img');
          return {summary: summary ? summary.innerText : null, img: img ? img.src : null};
        }"""
    )


def _wait_for_redraw(page, before: dict, action: str) -> dict:
    """Wait until both the summary text and the figure's image differ from ``before``."""
    try:
        page.wait_for_function(
            """(before) => {
              const summary = document.querySelector(
                '.pipeline-explorer .pipeline-explorer-summary');
              const img = document.querySelector(
                '.pipeline-explorer .pipeline-explorer-figure img');
              return summary && img && img.complete && img.naturalWidth > 0
                && summary.innerText !== before.summary && img.src !== before.img;
            }""",
            arg=before,
            timeout=30_000,
        )
    except Exception:
        after = _explorer_state(page)
        pytest.fail(
            f"explorer did not redraw after {action}: summary changed: "
            f"{after['summary'] != before['summary']} ({after['summary']!r}); "
            f"figure changed: {after['img'] != before['img']}",
            pytrace=False,
        )
    return _explorer_state(page)


@pytest.mark.skipif(not MAIN_NOTEBOOKS, reason=f"no notebooks in {notebooks_dir()}")
def test_explorer_responds_to_sliders(request):
    browser, lab = browser_and_lab(request)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in _explorer_candidates():
        with open_notebook(browser, lab, name) as page:
            run_notebook(page, name, through=EXPLORE_CALL)
            explorer = page.locator(EXPLORER)
            if explorer.count() == 0:
                continue
            explorer = explorer.first
            explorer.scroll_into_view_if_needed()
            for description in ("concurrency", "max_attempts", "maxsize"):
                _slider(explorer, description)
            summary = explorer.locator(".pipeline-explorer-summary")
            assert summary.count() == 1, "explorer has no .pipeline-explorer-summary HTML widget"
            page.wait_for_function(
                """() => { const img = document.querySelector(
                    '.pipeline-explorer .pipeline-explorer-figure img');
                  return img && img.complete && img.naturalWidth > 0; }""",
                timeout=30_000,
            )
            state = _explorer_state(page)
            assert state["img"].startswith("data:image/png"), "explorer figure is not a PNG"
            _assert_sliders_readable(page)

            # 1. Keyboard: focus the concurrency handle and press an arrow key.
            handle = _slider(explorer, "concurrency").locator(".noUi-handle").first
            at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
            handle.focus()
            key = "ArrowLeft" if at_max else "ArrowRight"
            page.keyboard.press(key)
            state = _wait_for_redraw(page, state, f"{key} on the concurrency slider")

            # 2. Typing into a readout: click, select all, type, Enter.
            slider = _slider(explorer, "maxsize")
            knob = slider.locator(".noUi-handle").first
            now = float(knob.get_attribute("aria-valuenow"))
            low = float(knob.get_attribute("aria-valuemin"))
            high = float(knob.get_attribute("aria-valuemax"))
            target = int(now + 2 if now + 2 <= high else low)
            readout = slider.locator(".widget-readout")
            readout.click()
            page.keyboard.press("ControlOrMeta+a")
            page.keyboard.type(str(target))
            page.keyboard.press("Enter")
            state = _wait_for_redraw(page, state, f"typing {target} into the maxsize readout")
            assert float(knob.get_attribute("aria-valuenow")) == target, (
                f"maxsize slider did not take the typed value {target}"
            )

            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            shot = ARTIFACTS / "explorer.png"
            explorer.screenshot(path=str(shot))
            if os.environ.get(UPDATE_IMAGES) and notebooks_dir() == (REPO / "notebooks").resolve():
                shutil.copyfile(shot, REPO / "docs" / "explorer.png")
            print(f"explorer in {name}: redraws on keyboard and readout input; {shot}")
            return
    failed = [n for n in MAIN_NOTEBOOKS if n in _RESULTS and _RESULTS[n] is None]
    pytest.fail(
        f"none of the {len(MAIN_NOTEBOOKS)} notebooks in {notebooks_dir()} displays an "
        f"element with class {EXPLORER[1:]!r} (the ipywidgets explorer)"
        + (f"; not retried because they failed to run: {failed}" if failed else ""),
        pytrace=False,
    )


def _assert_sliders_readable(page) -> None:
    """Every explorer slider shows its whole label and readout, and a track to drag, in the
    notebook's width beside JupyterLab's file browser (a long label once squashed a track
    to a few pixels; readouts were cut to "3.2(")."""
    sliders = page.evaluate(
        """() => [...document.querySelectorAll('.pipeline-explorer .widget-slider')].map(s => {
          const label = s.querySelector('.widget-label');
          const readout = s.querySelector('.widget-readout');
          const track = s.querySelector('.noUi-target') || s.querySelector('.slider-container');
          return {
            name: label ? label.textContent : '?',
            label: label ? label.scrollWidth - label.clientWidth : 0,
            readout: readout ? readout.scrollWidth - readout.clientWidth : 0,
            track: track ? track.getBoundingClientRect().width : 0,
          };
        })"""
    )
    assert len(sliders) >= 9, sliders
    cut = [s for s in sliders if s["label"] > 1 or s["readout"] > 1 or s["track"] < 100]
    assert not cut, f"explorer sliders cut or squashed at {VIEWPORT['width']} px: {cut}"


PLAN_EXPLORER = ".pipeline-plan-explorer"
PLANNING_NOTEBOOK = "05-capacity-planning.ipynb"


def _plan_explorer_state(page) -> dict:
    return page.evaluate(
        """() => {
          const root = document.querySelector('.pipeline-plan-explorer');
          const summary = root && root.querySelector('.pipeline-plan-explorer-summary');
          const img = root && root.querySelector('.pipeline-plan-explorer-figure img');
          return {summary: summary ? summary.innerText : null, img: img ? img.src : null,
                  loaded: !!(img && img.complete && img.naturalWidth > 0)};
        }"""
    )


@pytest.mark.skipif(
    PLANNING_NOTEBOOK not in MAIN_NOTEBOOKS, reason=f"no {PLANNING_NOTEBOOK} in {notebooks_dir()}"
)
def test_plan_explorer_replans_when_an_slo_slider_moves(request):
    browser, lab = browser_and_lab(request)
    with open_notebook(browser, lab, PLANNING_NOTEBOOK) as page:
        run_notebook(page, PLANNING_NOTEBOOK, through=PLAN_EXPLORE_CALL)
        panel = page.locator(PLAN_EXPLORER)
        assert panel.count() == 1, f"{PLANNING_NOTEBOOK} shows no {PLAN_EXPLORER[1:]!r} panel"
        panel.scroll_into_view_if_needed()
        page.wait_for_function(
            """() => { const img = document.querySelector(
                '.pipeline-plan-explorer .pipeline-plan-explorer-figure img');
              return img && img.complete && img.naturalWidth > 0; }""",
            timeout=30_000,
        )
        before = _plan_explorer_state(page)
        assert before["img"].startswith("data:image/png") and "chosen" in before["summary"]
        latency = panel.locator(".widget-slider").filter(
            has=page.locator(".widget-label", has_text="p95 latency")
        )
        assert latency.count() == 1, "the panel has no slider for the p95 latency limit"
        latency.locator(".noUi-handle").first.focus()
        page.keyboard.press("ArrowLeft")
        try:
            page.wait_for_function(
                """(before) => {
                  const root = document.querySelector('.pipeline-plan-explorer');
                  const summary = root.querySelector('.pipeline-plan-explorer-summary');
                  const img = root.querySelector('.pipeline-plan-explorer-figure img');
                  return img && img.complete && img.naturalWidth > 0 && img.src !== before.img
                    && summary.innerText !== before.summary
                    && summary.innerText.includes('before:');
                }""",
                arg=before,
                timeout=60_000,
            )
        except Exception:
            after = _plan_explorer_state(page)
            pytest.fail(
                f"the plan explorer did not replan after ArrowLeft on the latency slider: "
                f"summary {after['summary']!r}; figure changed: {after['img'] != before['img']}",
                pytrace=False,
            )
        wait_for_widgets(page, PLANNING_NOTEBOOK)  # fails on "Error displaying widget"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        panel.screenshot(path=str(ARTIFACTS / "plan-explorer.png"))


# ------------------------------------------------------------------ the run's animation

ANIMATION = ".pipeline-animation"

ANIMATION_STATE_JS = """() => {
  const root = document.querySelector('.pipeline-animation');
  const img = root && root.querySelector('img.pipeline-animation-frame');
  const handle = root && root.querySelector('.widget-slider .noUi-handle');
  const counters = root && root.querySelector('.pipeline-animation-counters');
  return {img: img ? img.src : null, ready: !!(img && img.complete && img.naturalWidth > 0),
          frame: handle ? Number(handle.getAttribute('aria-valuenow')) : null,
          counters: counters ? counters.innerText : null};
}"""


def _animation_candidates() -> list[str]:
    """Notebooks that call ``animate(``, the ones that ran cleanly before first."""
    names = [n for n in MAIN_NOTEBOOKS if "animate(" in (notebooks_dir() / n).read_text()]
    return sorted(names, key=lambda n: (_RESULTS.get(n, True) is None, n))


def _wait_for_frame_change(page, before: dict, what: str) -> dict:
    """Wait until the shown frame, its image and its counters all differ from ``before``."""
    try:
        page.wait_for_function(
            "(before) => { const s = (" + ANIMATION_STATE_JS + ")(); return s.ready"
            " && s.frame > before.frame && s.img !== before.img"
            " && s.counters !== before.counters; }",
            arg=before,
            timeout=60_000,
        )
    except Exception:
        after = page.evaluate(ANIMATION_STATE_JS)
        pytest.fail(
            f"the animation did not move {what}: frame {before['frame']} -> {after['frame']}, "
            f"image changed: {after['img'] != before['img']}, counters changed: "
            f"{after['counters'] != before['counters']}",
            pytrace=False,
        )
    return page.evaluate(ANIMATION_STATE_JS)


@pytest.mark.skipif(
    not _animation_candidates(), reason=f"no notebook calls animate() in {notebooks_dir()}"
)
def test_the_animation_plays_when_play_is_pressed(request):
    browser, lab = browser_and_lab(request)
    name = _animation_candidates()[0]
    with open_notebook(browser, lab, name) as page:
        run_notebook(page, name)
        _check_inline_expressions(page, name)  # the prose that reads the animation, too
        root = page.locator(ANIMATION).first
        root.scroll_into_view_if_needed()
        page.wait_for_function("() => (" + ANIMATION_STATE_JS + ")().ready", timeout=30_000)
        before = page.evaluate(ANIMATION_STATE_JS)
        assert before["frame"] == 0, f"{name}: the animation starts at frame {before['frame']}"
        play = root.locator(".widget-play button").first
        play.click()
        # Playing: the slider follows Play in the browser (jslink) and the kernel draws
        # each frame; two changes in a row, so one stray redraw does not pass.
        first = _wait_for_frame_change(page, before, "after pressing Play")
        second = _wait_for_frame_change(page, first, "while playing")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        root.screenshot(path=str(ARTIFACTS / "animation.png"))
        problems = snapshot(page).problems()
        if problems:
            pytest.fail(f"{name}: while playing: " + "\n  ".join(problems), pytrace=False)
        print(
            f"{name}: Play moved the animation from frame {before['frame']} to "
            f"{second['frame']}, screenshot {ARTIFACTS / 'animation.png'}"
        )
