"""Sphinx configuration of the pipeline-lab documentation site (``make docs``).

The site is built offline into ``docs/_build/html``: the user guide (Markdown
pages here), the notebooks executed with their figures (through myst-nb, from
``notebooks/``, linked in as ``docs/notebooks``), an API reference generated
from the docstrings, the workshop guide and the benchmarks. Every warning is
an error (``make docs`` passes ``-W``), so a broken link or reference fails
the build.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from sources import gather  # noqa: E402 - needs the path above

from pipeline.kernelcurve import encrypt_by_default  # noqa: E402 - as below
from pipeline.kernelpoll import install  # noqa: E402 - this checkout's, by the path above

install()  # a kernel's reply is read even when its socket's wake-up was lost
# Each notebook's kernel gets CurveZMQ keys for its channels: ipykernel would otherwise
# warn, at each of the build's kernel starts (one a notebook), that it runs over TCP unencrypted.
encrypt_by_default()

# The notebooks and data/ are copied beside these pages (docs/notebooks, docs/data,
# both ignored by git) so that their relative links, and the notebooks' own
# ../data/ reads when they run, mean the same here as in the repository.
gather(ROOT, HERE)
# The notebooks' kernels import this checkout's package, whatever is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

project = "pipeline-lab"
author = "the pipeline-lab authors"
copyright = "2026, the pipeline-lab authors"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
# Only Markdown pages and notebooks are sources; README files under data/ are pages too.
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

html_theme = "pydata_sphinx_theme"
html_title = "pipeline-lab"
# A light page by default: the theme's script reads the mode from here when the
# browser has none saved (on file:// it never has), instead of logging an error.
html_context = {"default_mode": "light"}
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": True,
}

myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# Execute every notebook once per change (cached in _build/.jupyter_cache); a cell
# that raises fails the build, as it fails the notebook tests.
# "inline": the notebooks' Markdown cells show values with {eval}, which needs the
# kernel alive while the page is read (a cached run cannot answer them).
nb_execution_mode = "inline"
# The prose's {eval} expressions are formatted values (f"{wait:.2f}"), as jupyterlab-myst
# shows them; myst-nb accepts only bare names unless told otherwise.
nb_eval_name_regex = r"^.+$"
nb_execution_timeout = 600  # seconds a cell may run; the longest take about a minute loaded
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# No widget JavaScript from a CDN: the site works offline. A widget shows its note
# instead (pipeline.viz.widgets.shown gives every widget one, as text/html).
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "application/vnd.jupyter.widget-state+json", None),
]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False


# viewcode gives each source file one module name for its "[docs]" links back to the API,
# the first namespace that documented anything from that file: a function documented
# under another namespace (format_findings, in pipeline.sim.analysis, beside diagnose in
# pipeline.sim) was linked to its right page with a wrong anchor (#pipeline.sim.
# format_findings). The source pages' back-links are pointed at the anchor their page has.
_BACKLINK = re.compile(r'href="([^"#]*?)(api/)([\w.]+)\.html#([\w.]+)"')


def _fix_backlinks(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if not pagename.startswith("_modules/") or "body" not in context:
        return
    objects = app.env.get_domain("py").objects

    def fix(match: re.Match[str]) -> str:
        up, api, page, anchor = match.groups()
        if anchor.startswith(f"{page}.") and anchor in objects:
            return match.group(0)  # already the page's own anchor
        parts = anchor.split(".")
        for start in range(1, len(parts)):
            entry = objects.get(f"{page}.{'.'.join(parts[start:])}")
            if entry is not None and entry.docname == f"api/{page}":
                return f'href="{up}{api}{page}.html#{entry.node_id}"'
        return match.group(0)

    context["body"] = _BACKLINK.sub(fix, context["body"])


def setup(app: Any) -> None:
    app.connect("html-page-context", _fix_backlinks)
