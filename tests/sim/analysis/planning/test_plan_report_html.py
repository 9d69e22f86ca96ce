"""``report.html``: what ``plan --out`` shares, self-contained and safe to open.

The page must hold the question, the answer, the binding SLO and the cheaper
configuration that fails, cost and headroom when the plan has them, the
sensitivity, and the method; embed its figures; fetch nothing; and show any
string a user gave (a stage name, a file name) as text, never as markup.
``plan --sensitivity`` is checked here too: its errors, its JSON key (absent
without the flag) and its files.
"""

from __future__ import annotations

import base64
import copy
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, parse_distribution
from pipeline.sim.analysis.planning.plan import plan
from pipeline.viz.report.page import render_report, write_report
from tests.cli.test_cli_plan import MM, WAIT_LIMIT

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Tags(HTMLParser):
    """Every start tag and its attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def assert_self_contained(page: str) -> None:
    found = tags(page)
    names = {tag for tag, _ in found}
    assert not names & {"script", "link", "iframe", "object", "embed", "base", "form"}
    for tag, attrs in found:
        assert not any(key.startswith("on") for key in attrs), (tag, attrs)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
            data = base64.b64decode(attrs["src"].partition(",")[2])
            assert data.startswith(PNG_MAGIC)
    assert "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page


@pytest.fixture(scope="module")
def small_plan():
    base = Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(queue_maxsize=None),
        n_items=2000,
        seed=1,
    )
    return plan(
        base, {"concurrency": range(3, 9)}, ["wait_mean_s<=0.3"], progress=False, processes=1
    )


def test_the_page_answers_the_question(small_plan, tmp_path):
    sensitivity = small_plan.sensitivity(inputs=["arrival_rate", "item_size"])
    path = write_report(small_plan, tmp_path, sensitivity=sensitivity, source="svc.toml")
    page = Path(path).read_text(encoding="utf-8")
    assert_self_contained(page)
    assert len([t for t, _ in tags(page) if t == "img"]) == 2  # frontier and tornado
    assert (tmp_path / "sensitivity.png").read_bytes().startswith(PNG_MAGIC)
    for text in (
        "The question",
        "svc.toml",
        "Poisson(rate=2.0)",
        "wait_mean_s&lt;=0.3",
        "Chosen:",
        "concurrency=4",
        "The binding SLO is",
        "concurrency=3",  # one step cheaper
        "fails",
        "most fragile to",
        "Method and assumptions",
        "Bonferroni",
    ):
        assert text in page, text
    assert "Cost" not in page and "Headroom" not in page  # not in this plan's JSON


def test_cost_and_headroom_are_shown_when_the_plan_has_them(small_plan):
    payload = copy.deepcopy(small_plan.to_dict())
    payload["chosen"]["cost_per_hour"] = 2.0
    for row in payload["candidates"]:
        row["cost_per_hour"] = 0.5 * row["concurrency"]
    payload["headroom"] = {"arrival_rate_factor": 1.23, "low": 1.2, "high": 1.26}
    page = render_report(payload, scenario=small_plan.base)
    assert "<h2>Cost</h2>" in page and "2.00 per hour" in page
    # 2 per hour at 2 items/s = 7,200 items an hour: 277.78 per million items.
    assert "277.78 per million items" in page
    assert "<h2>Headroom</h2>" in page and "23% more traffic" in page
    assert "<th>cost_per_hour</th>" in page
    # A cost broken into parts (workers, waiting) shows each part.
    payload["chosen"]["cost_per_hour"] = {"workers": 2.0, "waiting": 0.5, "total": 2.5}
    page = render_report(payload, scenario=small_plan.base)
    assert "workers 2.00" in page and "347.22 per million items" in page
    assert_self_contained(page)


def test_every_user_string_is_escaped(small_plan):
    payload = copy.deepcopy(small_plan.to_dict())
    payload["slos"] = [HOSTILE]
    payload["binding"]["slo"] = HOSTILE
    payload["binding"]["cheaper"][0]["failed"] = [HOSTILE]
    payload["search"] = {HOSTILE: [HOSTILE]}
    payload["candidates"][0]["verdict"] = HOSTILE
    payload["headroom"] = {HOSTILE: HOSTILE, "arrival_rate_factor": 1.1}
    payload["chosen"]["cost_per_hour"] = {HOSTILE: 1.0}
    sensitivity = {
        "change": 0.2,
        "replications": 3,
        "confidence": 0.95,
        "fragile": HOSTILE,
        "rows": [{"input": HOSTILE, "slo": HOSTILE, "verdict_low": HOSTILE}],
        "skipped": [{"input": HOSTILE, "reason": HOSTILE}],
    }
    page = render_report(payload, sensitivity=sensitivity, source=HOSTILE)
    assert_self_contained(page)
    assert "&lt;script&gt;" in page


def test_a_hostile_stage_name_stays_text(tmp_path):
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
    sensitivity = p.sensitivity(inputs=[f"{HOSTILE}.service_mean"])
    p.to_html(tmp_path / "report.html", sensitivity=sensitivity)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


# -- the command line --------------------------------------------------------------------


PLAN = [*MM, "--search", "concurrency=3..8", "--slo", f"wait_mean_s<={WAIT_LIMIT}", "--seed", "3"]


@pytest.mark.parametrize("pct", ["0", "100", "-5", "abc", "nan", "inf", "1e400"])
def test_a_bad_sensitivity_is_one_line_before_any_run(pct, tmp_path, monkeypatch, capsys, run_main):
    status, out, err = run_main(
        "plan", *[*PLAN, "--out", "out", "--sensitivity", pct], cwd=tmp_path
    )
    assert status == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("pipeline: error: --sensitivity: expected a percentage > 0 and < 100")
    assert repr(pct) in line
    assert not (tmp_path / "out").exists()


def test_out_writes_the_report_beside_what_it_wrote_before(tmp_path, monkeypatch, capsys, run_main):
    status, _, err = run_main("plan", *[*PLAN, "--out", "out"], cwd=tmp_path)
    assert status == 0, err
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "candidates.csv",
        "frontier.png",
        "plan.json",
        "report.html",
        "runs.csv",
    ]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "Not computed" in page  # no --sensitivity
    # The frontier embedded is the frontier written.
    (frontier,) = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert base64.b64decode(frontier) == (out / "frontier.png").read_bytes()
    assert "sensitivity" not in json.loads((out / "plan.json").read_text())


def test_sensitivity_adds_a_json_key_a_table_and_a_chart(tmp_path, monkeypatch, capsys, run_main):
    status, out, err = run_main("plan", *[*PLAN, "--json"], cwd=tmp_path)
    assert status == 0, err
    plain = json.loads(out)
    status, out, err = run_main(
        "plan", *[*PLAN, "--json", "--out", "out", "--sensitivity", "10"], cwd=tmp_path
    )
    assert status == 0, err
    payload = json.loads(out)
    sensitivity = payload.pop("sensitivity")
    assert payload == plain  # every other key as without the flag
    assert sensitivity["change"] == pytest.approx(0.1)
    assert {r["input"] for r in sensitivity["rows"]} == {
        "arrival_rate",
        "service_mean",
        "service_spread",
        "item_size",
    }
    assert sensitivity["skipped"] == [{"input": "failure_rate", "reason": "no failures to scale"}]
    assert (tmp_path / "out" / "sensitivity.png").read_bytes().startswith(PNG_MAGIC)
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "±10%" in page and "most fragile to" in page
    status, out, _ = run_main("plan", *[*PLAN, "--sensitivity"], cwd=tmp_path)
    assert status == 0
    assert "each input ±20%" in out and "most fragile to:" in out


def test_sensitivity_of_a_plan_that_chose_nothing_is_null(tmp_path, monkeypatch, capsys, run_main):
    status, out, err = run_main(
        "plan",
        *[
            *MM,
            "--search",
            "concurrency=3..4",
            "--slo",
            "wait_mean_s<=0",
            "--json",
            "--sensitivity",
        ],
        cwd=tmp_path,
    )
    assert status == 1, err  # infeasible
    payload = json.loads(out)
    assert payload["status"] == "infeasible" and payload["sensitivity"] is None
    assert "sensitivity skipped: the plan chose no configuration (status infeasible)" in err


# -- a scenario set --------------------------------------------------------------------


@pytest.fixture(scope="module")
def set_plan():
    """A normal and a peak hour (4 and 8 items/s, M/M/c): c = 11 meets at the peak, c = 10
    fails there (Erlang C: mean waits 0.078 s and 0.20 s against 0.13 s)."""
    members = {
        name: Scenario(
            arrivals=Poisson(rate=rate),
            service=Exponential(mean=1.0),
            config=PipelineConfig(queue_maxsize=None),
            n_items=5000,
            seed=seed,
        )
        for seed, (name, rate) in enumerate([("normal", 4.0), ("peak", 8.0)], start=1)
    }
    return plan(
        members["normal"],
        {"concurrency": range(9, 14)},
        ["wait_mean_s<=0.13", "latency_p95_s<=5"],
        scenarios=members,
        shares={"normal": 0.9, "peak": 0.1},
        cost={"worker_hour": 1.0, "wait_hour": 2.0},
        progress=False,
        processes=1,
    )


def test_a_set_has_a_section_per_scenario_with_its_table_and_figure(set_plan, tmp_path):
    assert set_plan.status == "chosen" and set_plan.chosen["concurrency"] == 11
    assert set_plan.binding_scenario == "peak"
    sensitivity = set_plan.sensitivity(inputs=["arrival_rate"])
    path = write_report(set_plan, tmp_path, sensitivity=sensitivity)
    page = Path(path).read_text(encoding="utf-8")
    assert_self_contained(page)
    # The frontier, the tornado chart, and one frontier per scenario.
    alts = [attrs["alt"] for tag, attrs in tags(page) if tag == "img"]
    assert alts.count("frontier in scenario normal") == 1
    assert alts.count("frontier in scenario peak") == 1 and len(alts) == 4
    assert "<h2>Scenarios</h2>" in page
    assert "The binding scenario is <code>peak</code>" in page
    assert "in scenario <code>peak</code>" in page  # in "What binds"
    normal = page[page.index("Scenario <code>normal</code>") : page.index("Scenario <code>peak")]
    peak = page[page.index("Scenario <code>peak</code> (binding)") :]
    peak = peak[: peak.index("</table>")]
    assert "Poisson(rate=8.0)" in peak and "Poisson(rate=4.0)" in normal
    # Each scenario's table: the choice and the one step cheaper, per SLO.
    assert "one step cheaper: concurrency=10" in peak
    assert peak.count('class="fails"') >= 1  # c = 10 fails the wait SLO at the peak
    assert normal.count('class="fails"') == 0  # and meets it in the normal hours
    assert (
        "Averaged over the hours: <code>normal</code> 90%, <code>peak</code> 10% (as given)" in page
    )
    payload = set_plan.to_dict()
    step = payload["scenarios"]["peak"]["cheaper"][0]
    assert step["change"] == {"concurrency": 10} and step["verdict"] == "fails"
    assert payload["scenarios"]["normal"]["cheaper"][0]["verdict"] == "meets"
    assert f"{payload['cost_breakdown']['per_million_items']:,.2f} per million items" in page


def test_a_scenario_frontier_draws_that_scenarios_values(set_plan):
    import matplotlib

    matplotlib.use("Agg")
    figure = set_plan.figure(scenario="normal")
    assert "in scenario 'normal'" in figure.get_suptitle()
    with pytest.raises(ValueError, match="scenario must be one of the plan's scenarios"):
        set_plan.figure(scenario="incident")


def test_a_hostile_scenario_name_stays_text(set_plan):
    payload = copy.deepcopy(set_plan.to_dict())
    payload["scenarios"] = {HOSTILE: payload["scenarios"]["peak"]}
    payload["binding_scenario"] = HOSTILE
    payload["prices"]["scenario_shares"] = {HOSTILE: 1.0}
    page = render_report(payload, figures={f"scenario:{HOSTILE}": b""})
    assert "&lt;script&gt;" in page and HOSTILE not in page


# -- a page a reader can trust at a glance: prose and formatted tables, never a raw value --


class _Text(HTMLParser):
    """The page's visible text (the style sheet left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._style = False

    def handle_starttag(self, tag, attrs):
        self._style = self._style or tag == "style"

    def handle_endtag(self, tag):
        self._style = self._style and tag != "style"

    def handle_data(self, data):
        if not self._style:
            self.parts.append(data)


def visible_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return " ".join(parser.parts)


def assert_no_raw_values(page: str) -> None:
    """No Python list, dict, None or 16-digit float shows through."""
    text = visible_text(page)
    for raw in ("[[", "{'", "['", "[1", "None", "nan"):
        assert raw not in text, (raw, text[max(0, text.find(raw) - 80) : text.find(raw) + 80])
    # Numbers to four significant figures: never a float's 16 digits.
    assert re.search(r"\.0*[1-9]\d{5,}", text) is None, re.search(r".{40}\.0*[1-9]\d{5,}", text)


@pytest.fixture(scope="module")
def headroom_plan():
    base = Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(drain_timeout_s=None),
        n_items=2000,
        seed=1,
    )
    return plan(
        base,
        {"concurrency": range(1, 9)},
        ["wait_mean_s<=0.3"],
        headroom=True,
        progress=False,
        processes=1,
    )


def test_headroom_reads_as_prose_and_a_table(headroom_plan):
    payload = headroom_plan.to_dict()
    assert payload["headroom"]["points"]  # the raw lists are there to leak
    page = render_report(payload, scenario=headroom_plan.base)
    assert_no_raw_values(page)
    # The two searches' sentences, each a paragraph of its own (not run together).
    assert "<p>You can take" in page and "<p>Service can get" in page
    section = page[page.index("<h2>Headroom</h2>") : page.index("<h2>Sensitivity</h2>")]
    assert "<th>arrival rate</th><th>mean service time</th>" in section
    assert "shown to meet every SLO up to" in section and "× 1.25" in section


def test_a_note_takes_a_row_of_its_own_across_the_table(headroom_plan):
    page = render_report(headroom_plan.to_dict(), scenario=headroom_plan.base)
    assert_no_raw_values(page)
    table = page[page.index("<h2>Every configuration examined</h2>") :]
    assert "<th>note</th>" not in table
    unstable = [c for c in headroom_plan.examined if c.verdict == "unstable"]
    assert unstable  # concurrency 1 and 2 cannot keep up with 2 items/s
    columns = table[: table.index("</thead>")].count("<th>")
    for candidate in unstable:
        note = html.escape(candidate.note, quote=True)
        assert f'<tr class="note"><td colspan="{columns}">{note}</td></tr>' in table
    # Every table sits in a box that scrolls sideways, so the page itself never does.
    assert page.count("<table>") == page.count('<div class="table"><table>') > 0


def test_a_fitted_model_reads_to_four_figures(small_plan):
    # A service fitted to two percentiles has a mean and cv of 16 digits each.
    fitted = small_plan.base.replace(service=parse_distribution("lognormal:p50=0.05,p99=1.2"))
    assert "0.1271230134081788" in repr(fitted.service)
    page = render_report(small_plan.to_dict(), scenario=fitted)
    assert "LogNormal(mean=0.1271, cv=2.338)" in page
    assert_no_raw_values(page)
