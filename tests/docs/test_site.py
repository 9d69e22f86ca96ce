"""``make docs``: the site builds offline with every warning an error, and holds together.

One build (the ``site`` fixture) is read as files: every internal link and
image resolves (and every ``#anchor`` names an element of its page), nothing
is loaded from the network, the notebooks ran (their figures are there), the
API reference documents the public names, and a widget shows its note.
"""

from __future__ import annotations

import importlib
import re
import types
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.docs.conftest import REPO
from tests.docs.site_builds import SPHINX

# One build of the whole site (about 100 s): not in make test-fast.
pytestmark = pytest.mark.slow


class Page(HTMLParser):
    """The links, images, scripts and element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.loads: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        if tag == "a" and found.get("href"):
            self.links.append(found["href"])
        if tag == "img" and found.get("src"):
            self.images.append(found["src"])
        if tag in {"script", "img"} and found.get("src"):
            self.loads.append(found["src"])
        if tag == "link" and found.get("href") and found.get("rel") != "canonical":
            self.loads.append(found["href"])


def read(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text())
    return page


def pages(site: Path) -> dict[Path, Page]:
    return {path: read(path) for path in sorted(site.rglob("*.html"))}


def external(url: str) -> bool:
    return urllib.parse.urlsplit(url).scheme not in {"", "file"}


def test_make_docs_runs_the_command_these_tests_build_with():
    recipe = re.search(r"^docs:.*\n\t(.+)$", (REPO / "Makefile").read_text(), re.M)
    assert recipe is not None
    assert recipe.group(1).split() == ["$(BIN)/python", *SPHINX, "docs/_build/html"]


def test_the_build_prints_no_warning(site_build):
    # -W makes the build's own warnings errors; the notebooks' kernels log to the same
    # terminal, and ipykernel warned at each start that it ran over TCP unencrypted
    # (pipeline.kernelcurve gives the kernels keys instead).
    _, log = site_build
    warned = [
        line for line in log.splitlines() if "WARNING" in line or "without encryption" in line
    ]
    assert warned == []


def test_every_internal_link_and_image_resolves(site):
    everything = pages(site)
    assert (site / "index.html") in everything
    broken = []
    for path, page in everything.items():
        for url in page.links + page.images:
            if external(url) or url.startswith(("mailto:", "data:")):
                continue
            parts = urllib.parse.urlsplit(url)
            target = (
                (path.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else path
            )
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {url}")
            elif parts.fragment and target.suffix == ".html":
                ids = everything[target].ids if target in everything else read(target).ids
                if urllib.parse.unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: {url} (no such anchor)")
    assert broken == []


def test_nothing_is_loaded_from_the_network(site):
    loads = {
        f"{path.relative_to(site)}: {url}"
        for path, page in pages(site).items()
        for url in page.loads
        if external(url)
    }
    assert loads == set()


@pytest.mark.parametrize(
    "name",
    [
        "01-backpressure",
        "03-retries-and-dead-letters",
        "05-capacity-planning",
        "08-where-is-the-bottleneck",
    ],
)
def test_the_notebooks_ran_and_show_their_figures(site, name):
    page = read(site / "notebooks" / f"{name}.html")
    figures = [src for src in page.images if src.endswith((".png", ".svg"))]
    assert figures, f"{name} shows no figure"
    # a cell that raised fails the build (nb_execution_raise_on_error); none printed one
    assert "Traceback" not in (site / "notebooks" / f"{name}.html").read_text()


def test_no_notebook_page_shows_a_blank_exercise_s_failed_check(site):
    for path in sorted((site / "notebooks").glob("[0-9]*.html")):
        text = path.read_text()
        for failure in ("Test case failed", "AssertionError", "❌"):
            assert failure not in text, f"{path.name}: {failure}"


def test_every_page_of_a_section_lists_its_section_in_the_sidebar(site):
    """The guide, the notebooks and the reference are sections: each page's sidebar
    lists the pages beside it (it was an empty "Section Navigation" on every page)."""
    for section, page, sibling in (
        ("guide", "guide/planning.html", "chains.html"),
        ("notebooks", "notebooks/01-backpressure.html", "02-workers-and-littles-law.html"),
        ("reference", "workshop.html", "api/index.html"),
    ):
        text = (site / page).read_text()
        nav = text[text.index('class="bd-docs-nav') :]
        nav = nav[: nav.index("</nav>")]
        assert sibling in nav, f"{section}: {page}'s sidebar does not list {sibling}"


def test_a_widget_shows_its_note_instead_of_nothing(site):
    text = (site / "notebooks" / "01-backpressure.html").read_text()
    assert "pipeline-widget-note" in text


def test_the_api_reference_documents_the_public_names(site):
    import pipeline
    import pipeline.sim

    for module, names in [("pipeline", pipeline.__all__), ("pipeline.sim", pipeline.sim.__all__)]:
        ids = read(site / "api" / f"{module}.html").ids
        namespace = importlib.import_module(module)
        missing = [
            name
            for name in names
            # a module among the names (pipeline.sim.theory) has a page of its own
            if f"{module}.{name}" not in ids
            and not (
                isinstance(getattr(namespace, name), types.ModuleType)
                and f"module-{module}.{name}" in read(site / "api" / f"{module}.{name}.html").ids
            )
        ]
        assert missing == [], f"{module}: {missing}"


def test_the_solutions_stay_out_and_their_links_say_where_they_are(site):
    assert not (site / "notebooks" / "solutions").exists()
    text = (site / "notebooks" / "01-backpressure.html").read_text()
    assert "solutions.html" in text
