"""``report.html`` opened in a real headless Chromium: every figure renders, nothing leaks.

The page ``plan --out DIR --sensitivity`` writes is opened from ``file://``;
every ``<img>`` must have decoded (``naturalWidth > 0``), the console must hold
no error (a Content-Security-Policy violation is one), no request may leave the
file (no network, no other file), and a report of a chain whose stage is named
like markup must open no dialog and run no script.

Uses the browser tests' Chromium (``tests/notebooks/test_browser.py``: Debian's
``/usr/bin/chromium`` through Playwright): skipped with an install hint when
it is missing, a failure under ``CI=true``. Run it alone::

    .venv/bin/pytest -m browser tests/sim/analysis/planning/test_report_browser.py
"""

from __future__ import annotations

import pytest

from pipeline.sim import Exponential, Poisson, Scenario, StageSpec
from pipeline.sim.analysis.planning.plan import plan
from tests.cli.test_cli_plan import MM, WAIT_LIMIT
from tests.notebooks.test_browser import browser  # noqa: F401 -- the shared fixture: one Chromium

pytestmark = pytest.mark.browser

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def open_report(browser, path) -> dict:  # noqa: F811
    """Open ``path`` in a fresh page; what it loaded, logged and requested."""
    page = browser.new_page()
    seen: dict = {"errors": [], "requests": [], "dialogs": []}
    page.on(
        "console",
        lambda message: seen["errors"].append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.on("request", lambda request: seen["requests"].append(request.url))
    try:
        url = path.resolve().as_uri()
        page.goto(url, wait_until="load")
        seen["images"] = page.evaluate(
            "() => Array.from(document.images).map(i => [i.complete, i.naturalWidth])"
        )
        seen["scripts"] = page.evaluate("() => document.scripts.length")
        seen["title"] = page.title()
        seen["text"] = page.inner_text("body")
        seen["url"] = url
    finally:
        page.close()
    return seen


def assert_clean(seen: dict, images: int) -> None:
    assert seen["errors"] == []
    assert seen["dialogs"] == []
    assert seen["scripts"] == 0
    outside = [u for u in seen["requests"] if u != seen["url"] and not u.startswith("data:")]
    assert outside == [], outside
    assert len(seen["images"]) == images
    assert all(complete and width > 0 for complete, width in seen["images"]), seen["images"]


def test_the_report_renders_every_figure_and_fetches_nothing(
    browser,  # noqa: F811
    tmp_path,
    run_main,
):
    status, _, err = run_main(
        "plan",
        *MM, "--search", "concurrency=3..8", "--slo", f"wait_mean_s<={WAIT_LIMIT}",
        "--seed", "3", "--out", "out", "--sensitivity", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, err
    seen = open_report(browser, tmp_path / "out" / "report.html")
    assert_clean(seen, images=2)  # the frontier and the tornado chart
    assert seen["title"] == "Capacity plan"
    assert "The answer" in seen["text"] and "most fragile to" in seen["text"]


def test_a_stage_named_like_markup_stays_text_in_the_browser(browser, tmp_path):  # noqa: F811
    chain = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(name=HOSTILE, service=Exponential(mean=0.5)),
            StageSpec(name="write", service=Exponential(mean=0.5)),
        ],
        n_items=300,
        seed=2,
    )
    p = plan(
        chain,
        {f"{HOSTILE}.concurrency": [1, 2], "write.concurrency": [1, 2]},
        ["latency_p95_s<=100"],
        progress=False,
        processes=1,
    )
    p.to_html(tmp_path / "report.html", sensitivity=p.sensitivity(inputs=["arrival_rate"]))
    seen = open_report(browser, tmp_path / "report.html")
    assert_clean(seen, images=2)
    assert HOSTILE in seen["text"]  # shown as the text it is


def test_a_scenario_set_report_renders_every_scenarios_figure(
    browser,  # noqa: F811
    tmp_path,
    run_main,
):
    for name, rate, seed in (("normal", 4, 1), ("peak", 8, 2)):
        (tmp_path / f"{name}.toml").write_text(
            f'arrivals = "poisson:rate={rate}"\nservice = "exponential:mean=1"\n'
            f'maxsize = "unbounded"\nitems = 3000\nseed = {seed}\n'
        )
    status, _, err = run_main(
        "plan",
        "--scenario", "normal=normal.toml@0.9", "--scenario", "peak=peak.toml@0.1",
        "--search", "concurrency=9..13", "--slo", "wait_mean_s<=0.13",
        "--cost", "worker_hour=1,wait_hour=2", "--processes", "1",
        "--out", "out", "--sensitivity", "20", "--headroom", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, err
    seen = open_report(browser, tmp_path / "out" / "report.html")
    # The frontier, the tornado chart, and each scenario's frontier.
    assert_clean(seen, images=4)
    text = seen["text"]
    assert "Scenarios" in text and "The binding scenario is peak" in text
    assert "Scenario normal" in text and "Scenario peak (binding)" in text
    assert "one step cheaper: concurrency=10" in text
    assert seen["title"] == "Capacity plan: normal=normal.toml, peak=peak.toml"
    assert "in scenario peak (the binding one" in text


def test_the_report_fits_1280_pixels_and_shows_no_raw_value(
    browser,  # noqa: F811
    tmp_path,
    run_main,
):
    # Unstable configurations (a note each), two SLOs, a priced cost and the headroom:
    # the widest candidates table and the headroom's every field.
    status, _, err = run_main(
        "plan",
        "--arrivals", "poisson:rate=4", "--service", "exponential:mean=1", "--items", "2000",
        "--seed", "1", "--drain-timeout", "none", "--processes", "1",
        "--search", "concurrency=1..10", "--search", "maxsize=10,100",
        "--slo", "wait_mean_s<=0.5", "--slo", "latency_p95_s<=4",
        "--cost", "worker_hour=1.2,wait_hour=12", "--headroom", "--out", "out", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, err
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto((tmp_path / "out" / "report.html").resolve().as_uri(), wait_until="load")
        scroll, client = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        # Each row of the candidates table, in pixels (a note squeezed into a column one
        # word wide made rows about 170 px tall).
        heights = page.evaluate(
            """() => {
                const h2 = Array.from(document.querySelectorAll('h2'))
                    .find(h => h.textContent === 'Every configuration examined');
                return Array.from(h2.nextElementSibling.querySelectorAll('tr'))
                    .map(r => r.getBoundingClientRect().height);
            }"""
        )
        text = page.inner_text("body")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    finally:
        page.close()
    assert scroll <= client == 1280
    assert heights and max(heights) < 60, heights
    assert "Headroom" in text and "shown to meet every SLO up to" in text
    for raw in ("[[", "{'", "['", "None"):
        assert raw not in text, raw
