"""The documentation site in a real headless Chromium: pages open, images render, links hold.

The index, a notebook page and an API page are opened from ``file://`` (the
site works without a server); each must log no error, decode every image
(``naturalWidth > 0``), request nothing beyond the site's own files, and
every internal link on it must lead to a page that opens.

Uses the browser tests' Chromium (Debian's ``/usr/bin/chromium`` through
Playwright): skipped with an install hint when it is missing, a failure under
``CI=true``.
"""

from __future__ import annotations

import urllib.parse

import pytest

from tests.notebooks.test_browser import browser  # noqa: F401 -- the shared fixture: one Chromium

pytestmark = pytest.mark.browser

PAGES = ["index.html", "notebooks/01-backpressure.html", "api/pipeline.sim.html"]


def visit(browser, url: str) -> dict:  # noqa: F811
    page = browser.new_page()
    seen: dict = {"errors": [], "outside": []}
    page.on(
        "console",
        lambda message: seen["errors"].append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on(
        "request",
        lambda request: (
            seen["outside"].append(request.url)
            if not request.url.startswith(("file://", "data:"))
            else None
        ),
    )
    try:
        response = page.goto(url, wait_until="load")
        seen["ok"] = response is None or response.ok  # file:// gives no response object
        seen["title"] = page.title()
        seen["images"] = page.evaluate(
            "() => Array.from(document.images).map(i => [i.src, i.complete, i.naturalWidth])"
        )
        seen["links"] = page.evaluate(
            "() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"
        )
    finally:
        page.close()
    return seen


@pytest.mark.parametrize("name", PAGES)
def test_a_page_opens_renders_its_images_and_its_links_lead_somewhere(browser, site, name):  # noqa: F811
    seen = visit(browser, (site / name).as_uri())
    assert seen["ok"] and seen["errors"] == [], seen["errors"]
    assert seen["outside"] == [], seen["outside"]
    assert "pipeline-lab" in seen["title"]
    broken = [src for src, complete, width in seen["images"] if not (complete and width > 0)]
    assert broken == []
    if name.startswith("notebooks/"):
        assert seen["images"], "a notebook page without its figures"
    internal = sorted(
        {
            urllib.parse.urldefrag(link).url
            for link in seen["links"]
            if link.startswith("file://") and link.endswith(".html")
        }
    )
    assert internal
    for link in internal:
        target = visit(browser, link)
        assert target["ok"] and target["errors"] == [], (link, target["errors"])
