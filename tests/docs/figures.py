"""The figures a page's prose quotes, checked against that page's own run.

An output block is compared with its run as a whole (``page_runs.py``); the
prose around it quotes some of its numbers again, in words or rounded ("72 runs",
"999 s ± 34 s"). Each checker here finds the figure in the prose (so a page that
drops or rewords it fails until the checker follows) and holds it to the run:
exactly for what the seeds fix (plan bounds, run counts, intervals), loosely for
what the machine decides (times, stated as "about" and checked to their order).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

from pipeline import Backoff, CoDel, EventKind, Pipeline, PipelineConfig
from pipeline.sim import run_virtual
from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.slo import SLO
from pipeline.sim.analysis.retry_loop import chebyshev_bound, timeout_probability
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.running.summary import BATCH_MEANS_MIN_ITEMS, BATCHES
from pipeline.sim.stats.intervals import SKEW_ROBUST_MIN_VALUES, mean_bounds, mean_ci
from pipeline.sim.stats.quantiles import quantile_ci
from pipeline.sim.stats.runlength import DEFAULT_RELATIVE_PRECISION
from tests.docs.conftest import REPO
from tests.docs.snippets import shows


@dataclass
class PageRun:
    """What running one page gave: its text, the output of each block, its namespace.

    Attributes:
        page: the Markdown file.
        text: its text.
        folder: the folder it ran in (the files its blocks wrote are there).
        outputs: each block's printed output (stdout and stderr), by its opening line.
        commands: each shell command run, with its printed output, in order.
        namespace: the page's Python namespace after its last block.
    """

    page: Path
    text: str
    folder: Path
    outputs: dict[int, str] = field(default_factory=dict)
    namespace: dict = field(default_factory=dict)
    commands: list[tuple[str, str]] = field(default_factory=list)

    def output(self, contains: str) -> str:
        """The output of the one block whose output contains ``contains``."""
        found = [out for out in self.outputs.values() if contains in out]
        assert len(found) == 1, f"{self.page.name}: {len(found)} outputs contain {contains!r}"
        return found[0]


def json_in(output: str) -> dict:
    """The first line of ``output`` that is a JSON object, parsed (stderr may surround it)."""
    line = next(line for line in output.splitlines() if line.startswith("{"))
    return json.loads(line)


def printed_by(run: PageRun, *parts: str) -> str:
    """What the one command holding every one of ``parts`` printed."""
    found = [out for command, out in run.commands if all(part in command for part in parts)]
    assert len(found) == 1, f"{run.page.name}: {len(found)} commands hold {parts}"
    return found[0]


def says(run: PageRun, phrase: str) -> str:
    """``phrase`` as the page says it (whitespace aside); fails if the page does not."""
    pattern = r"\s+".join(re.escape(part) for part in phrase.split())
    assert re.search(pattern, run.text), f"{run.page.name} no longer says {phrase!r}"
    return phrase


def agrees(run: PageRun, phrase: str, actual: str) -> None:
    """The page says ``phrase``, and ``actual`` (from the run) reads the same, rounded."""
    says(run, phrase)
    assert shows(phrase, actual), f"{run.page.name} says {phrase!r}; the run gives {actual!r}"


def about(value: float, low: float, high: float, what: str) -> None:
    """A machine-dependent figure the prose gives as "about": within its stated order."""
    assert low <= value <= high, f"{what} is {value}, outside the prose's [{low}, {high}]"


RESULTS = REPO / "bench" / "RESULTS.md"
"""The benchmarks' record: each figure with the command that measured it (``make bench``)."""


def recorded(section: str, label: str, column: int) -> float:
    """A figure of ``bench/RESULTS.md``: in the section whose heading starts with
    ``section``, the table row whose first cell starts with ``label``, its ``column``-th
    cell's first number (bold and units aside)."""
    rows = [line.split("|")[1:-1] for line in in_section(section) if line.startswith("|")]
    found = [row for row in rows if row[0].strip().startswith(label)]
    assert len(found) == 1, f"bench/RESULTS.md, {section!r}: {len(found)} rows {label!r}"
    return float(re.search(r"-?\d[\d,]*(?:\.\d+)?", found[0][column])[0].replace(",", ""))


def in_section(section: str) -> list[str]:
    """The lines of the section of ``bench/RESULTS.md`` whose heading starts with ``section``."""
    text = RESULTS.read_text(encoding="utf-8")
    start = re.search(rf"^#+ {re.escape(section)}", text, re.M)
    assert start, f"bench/RESULTS.md has no section {section!r}"
    body = text[start.end() :]
    return (body[: m.start()] if (m := re.search(r"^#+ ", body, re.M)) else body).splitlines()


def in_results(section: str, sentence: str) -> str:
    """``sentence`` (a regular expression) as the section of ``bench/RESULTS.md`` says it."""
    text = RESULTS.read_text(encoding="utf-8")
    start = re.search(rf"^#+ {re.escape(section)}", text, re.M)
    assert start, f"bench/RESULTS.md has no section {section!r}"
    found = re.search(sentence, text[start.end() :])
    assert found, f"bench/RESULTS.md, {section!r}, no longer says {sentence!r}"
    return found[1]


def quoted(page: str, pattern: str) -> re.Match[str]:
    """Where the page ``page`` (a path from the repository's root) says ``pattern``.

    ``pattern`` is a regular expression whose spaces match any whitespace (a
    sentence may wrap); its groups are the figures a test of their source holds
    to what it measured (a coverage test, with its fixed seeds, to the counts the
    guide quotes). Fails, naming the page, if the page no longer says it.
    """
    text = (REPO / page).read_text(encoding="utf-8")
    found = re.search(pattern.replace(" ", r"\s+"), text)
    assert found, f"{page} no longer says {pattern!r}"
    return found


def percent_of(shown: str, missed: int, runs: int) -> None:
    """A coverage ``shown`` in prose (``96.8``) is ``1 - missed / runs`` as far as it is written."""
    actual = 100 * (1 - missed / runs)
    assert shows(shown, f"{actual}"), f"the prose says {shown}%; {missed}/{runs} is {actual}%"


CHECKERS: dict[str, Callable[[PageRun], None]] = {}


def checker(name: str) -> Callable[[Callable[[PageRun], None]], Callable[[PageRun], None]]:
    """Register the checker of the page whose file is ``name``."""

    def register(function: Callable[[PageRun], None]) -> Callable[[PageRun], None]:
        CHECKERS[name] = function
        return function

    return register


def check(run: PageRun) -> None:
    """Hold the page's prose to its run (pages without quoted figures have no checker)."""
    checker_of_page = CHECKERS.get(run.page.name)
    if checker_of_page is not None:
        checker_of_page(run)


@checker("README.md")
def readme(run: PageRun) -> None:
    ns = run.namespace
    agrees(run, "# 0.815 s: one run", f"# {ns['result'].summary['wait_mean_s']} s: one run")
    interval = ns["runs"].interval("wait_mean_s")
    agrees(run, "# 0.746 +- 0.033 s", f"# {interval.mean} +- {interval.half_width} s")
    erlang_c = ns["theory"].mmc(3.2, 1.0, 4).wait_mean_s
    agrees(run, "Erlang C says 0.7455 s", f"Erlang C says {erlang_c} s")
    assert ns["result"].summary["engine"] == "kernel"
    benchmarks(run)


def benchmarks(run: PageRun) -> None:
    """The README's benchmark figures, each as ``bench/RESULTS.md`` records it, rounded."""
    targets = "Issue 23's targets"
    startup = recorded(targets, "whole-process `simulate`", 3)
    agrees(
        run, "process takes 0.27x SimPy's CPU time", f"process takes {startup}x SimPy's CPU time"
    )
    events = recorded(targets, "event path >= 10x SimPy", 3)
    agrees(
        run,
        "kernel's compiled event path is 20x faster",
        f"kernel's compiled event path is {events}x faster",
    )
    tandem = recorded(targets, "tandem chain >= 10x the engine", 3)
    fan_out = recorded(targets, "fan-out chain with failures", 3)
    says(run, "chains run 13-15x faster than the engine")
    assert (round(tandem), round(fan_out)) == (13, 15), (tandem, fan_out)
    ciw = recorded(targets, "tandem faster than Ciw", 3)
    agrees(run, "(and 25x faster than Ciw)", f"(and {ciw}x faster than Ciw)")
    plan = recorded(targets, "the planning guide's plan, whole process", 3)
    agrees(run, "takes 1.6 s of CPU in one", f"takes {plan} s of CPU in one")
    replays = recorded("One replay in the kernel", "the same plan, whole process", 4)
    agrees(run, "process (1.36x that since", f"process ({replays}x that since")
    memory = recorded(targets, "10 million items within 1 GB", 3)
    agrees(run, "10 million items fit in 0.91 GB", f"10 million items fit in {memory} GB")
    explorer = recorded(targets, "explorer change -> figure", 3)
    agrees(run, "figure in 76 ms of CPU", f"figure in {explorer} ms of CPU")
    engine = in_results("The asyncio engine path", r"SimPy's [\d.]+ s: \*\*([\d.]+)x\*\*")
    agrees(run, "clock costs 1.39x SimPy's CPU", f"clock costs {engine}x SimPy's CPU")
    bare = in_results("Engine overhead in real time", r"Pipeline/bare = \*\*([\d.]+)\*\*")
    agrees(run, "keeps 0.69x the throughput", f"keeps {bare}x the throughput")
    # the benchmarks' design, as bench/RESULTS.md records the runs behind those figures
    load = in_results("The simulator against SimPy: M/M/4", r"^, rho ([\d.]+),")
    items = in_results("The simulator against SimPy: M/M/4", r"^, rho [\d.]+, ([\d,]+) items")
    agrees(
        run,
        "on M/M/4 at 80% load with 100,000 items",
        f"on M/M/4 at {100 * float(load)}% load with {items} items",
    )
    failing = in_results("The kernel's event path", r"p = ([\d.]+) independent failures")
    agrees(run, "with 10% of attempts failing", f"with {100 * float(failing)}% of attempts failing")
    runs = in_results("The kernel's event path", r"processes=1\)`, (\d+) runs of 100,000 items")
    agrees(run, "plan of 72 runs of 100,000 items", f"plan of {runs} runs of 100,000 items")
    section = "Issue 23's targets"
    plain, served = (recorded(section, "no-op", column) for column in (1, 2))
    agrees(run, "adds about 0.5 µs of CPU", f"adds about {served - plain} µs of CPU")
    noop_ratio = recorded(section, "no-op", 3)
    says(run, "a tenth of a no-op item's")
    about(noop_ratio - 1, 0.05, 0.15, "the exporter's share of a no-op item")
    work_ratio = recorded(section, "a little work", 3)
    agrees(run, "and 5% beside 9 µs", f"and {(work_ratio - 1) * 100}% beside 9 µs")
    # the [fast] extra's "10x+": the event path without numba against the compiled one
    replay = "One replay in the kernel"
    plain = float(
        in_results(replay, r"without numba: event path, .*? row \| [\d.]+ s \| ([\d.]+) s")
    )
    compiled = float(
        in_results(
            replay,
            r"event path, SimPy / auto, .*? \| [\d.]+x \([\d.]+ s\) \| [\d.]+x \(([\d.]+) s\) \|",
        )
    )
    says(run, "its event path (failures, retries: 10x+ faster; plans)")
    assert plain / compiled >= 10, f"without numba {plain} s, compiled {compiled} s"


@checker("statistics.md")
def statistics(run: PageRun) -> None:
    ns = run.namespace
    wait, ci = (ns["result"].summary[key] for key in ("wait_mean_s", "wait_mean_ci95_s"))
    agrees(run, "# 0.815 +- 0.080 s", f"# {wait} +- {ci} s")
    agrees(
        run,
        "(`0.8146 s ± 0.07952 s (95%, batch means)`)",
        f"(`{wait} s ± {ci} s (95%, batch means)`)",
    )
    more = ns["more"]
    agrees(
        run,
        "gives a wait `-0.586 ± 0.027 s` over its default 10 replications (unpaired ± 0.031;",
        f"gives a wait `{more.difference} ± {more.half_width} s` over its default"
        f" {len(more.values_a)} replications (unpaired ± {more.unpaired_half_width};",
    )
    theory = ns["theory"]
    erlang_c = theory.mmc(3.2, 1.0, 5).wait_mean_s - theory.mmc(3.2, 1.0, 4).wait_mean_s
    agrees(run, "Erlang C: -0.585 s)", f"Erlang C: {erlang_c} s)")
    statistics_definitions(run)


def statistics_definitions(run: PageRun) -> None:
    """The statistics guide's figures that follow from the code's rules and constants alone
    (the measured ones are held by the coverage tests that measure them)."""
    agrees(
        run,
        f"by batch means ({BATCHES} batches of the items in arrival order",
        f"by batch means ({BATCHES} batches of the items in arrival order",
    )
    agrees(run, "`null`, below 10,000 items)", f"`null`, below {BATCH_MEANS_MIN_ITEMS} items)")
    agrees(
        run,
        "a run under 10,000 items gets none",
        f"a run under {BATCH_MEANS_MIN_ITEMS} items gets none",
    )
    # the fewest values whose order-statistic interval for the median is finite
    finite = next(n for n in range(2, 50) if math.isfinite(quantile_ci([1.0] * n, 0.5).high))
    agrees(run, "(at least 6 replications", f"(at least {finite} replications")
    agrees(
        run,
        "judges the half-width against 10% of the mean",
        f"judges the half-width against {100 * DEFAULT_RELATIVE_PRECISION}% of the mean",
    )
    agrees(
        run,
        "is `robust_mean_ci`: from 6 replications",
        f"is `robust_mean_ci`: from {SKEW_ROBUST_MIN_VALUES} replications",
    )
    # below that, Student t from the fewest values with a spread
    agrees(
        run,
        "with 2 to 5, Student t.",
        f"with 2 to {SKEW_ROBUST_MIN_VALUES - 1}, Student t.",
    )
    # batch means' two-sided 95% interval, each side bounded at (1 + level) / 2
    agrees(
        run,
        "are bounded on each side at 97.5% by the same skew-robust bounds",
        f"are bounded on each side at {100 * (1 + 0.95) / 2}% by the same skew-robust bounds",
    )
    # what the skew bounds would make of three values, which is why t keeps them
    means = [2.27, 1.01, 4.04]
    low, high = mean_bounds(means, 0.975)
    mean = sum(means) / 3
    agrees(
        run,
        "(48,556 s where t gave 3.78 s on run means of 2.27, 1.01 and 4.04 s)",
        f"({max(high - mean, mean - low)} s where t gave {mean_ci(means).half_width} s on"
        " run means of 2.27, 1.01 and 4.04 s)",
    )
    # c = 10 on the near-boundary case, and the fewest workers meeting it
    wait = mmc(8.0, 1.0, 10).wait_mean_s
    best = next(c for c in range(9, 30) if mmc(8.0, 1.0, c).wait_mean_s <= 0.195)
    agrees(
        run,
        "`wait_mean_s<=0.195` (c = 10 truly 4.9% over, c* = 11)",
        f"`wait_mean_s<=0.195` (c = 10 truly {100 * (wait / 0.195 - 1)}% over, c* = {best})",
    )
    # the rule of three, and the items it takes to meet shed_fraction<=0.01 with none shed
    says(run, "`1 - (1 - level)**(1/N)`, about 3/N at 95%")
    agrees(run, "about 3/N at 95%", f"about {-math.log(0.05)}/N at 95%")
    agrees(
        run,
        "meets only once about 300 items were offered (at a 95% look; 460 at a plan's 99%",
        f"meets only once about {round(-math.log(0.05) / 0.01, -1)} items were offered (at a"
        f" 95% look; {round(-math.log(0.01) / 0.01, -1)} at a plan's 99%",
    )
    # the report's line and note for three runs that shed nothing of 38,468 items
    shed = judge(
        SLO.parse("shed_fraction<=0.01"),
        [0.0, 0.0, 0.0],
        confidence=0.99,
        counts=[(0, 12_822), (0, 12_823), (0, 12_823)],
    )
    agrees(run, "`0 ≤ 0.0001197 (binomial)`", f"`0 ≤ {shed.bound} (binomial)`")
    says(run, f'("{shed.note}")')
    drain = PipelineConfig().drain_timeout_s
    agrees(run, "`drain_timeout_s` (30 s by default)", f"`drain_timeout_s` ({drain} s by default)")


@checker("simulating.md")
def simulating(run: PageRun) -> None:
    backlog = json_in(run.output('"items_backlog"'))
    drained, half_width = backlog["backlog_drained_s"], backlog["ci95"]["backlog_drained_s"]
    agrees(run, "(999 s ± 34 s, 95%)", f"({drained} s ± {half_width} s, 95%)")
    assert 16 * 60 <= drained <= 18 * 60, "the prose says about 17 minutes"
    agrees(run, "(255 s above)", f"({backlog['backlog_cleared_s']} s above)")
    # (N - c) / (c mu - lambda) for N = 5000, c = 20, mu = 1, lambda = 15: the drain's mean
    agrees(run, "capacity (996 s above)", f"capacity ({(5000 - 20) / (20 * 1.0 - 15)} s above)")
    # "about 4,880 items waited upstream", to the nearest ten
    agrees(
        run, "about 4,880 items", f"about {round(backlog['upstream_backlog_max'], -1):,.0f} items"
    )
    # (N - c) / (c mu - lambda) = 300 s, for N = 5000, mu = 1, lambda = 15
    workers = (5000 + 15 * 300) / (300 + 1)
    agrees(run, "The formula above says 31.6 workers", f"The formula above says {workers} workers")
    chosen = re.search(r"chosen concurrency=(\d+)", printed_by(run, "backlog_drained_s<=300"))[1]
    says(run, f"the plan, which must be sure, chooses {chosen}:")
    # the largest p99 / mean of a log-normal, exp(z99^2 / 2), and what it makes of 80 ms
    z99 = NormalDist().inv_cdf(0.99)
    ratio = math.exp(z99**2 / 2)
    agrees(
        run,
        'p99 is at most 14.97 times its mean, so "mean 80 ms, p99 1.2 s" keeps the mean'
        " (it sets the load) and gets p99 = 1.197 s",
        f'p99 is at most {ratio} times its mean, so "mean 80 ms, p99 1.2 s" keeps the mean'
        f" (it sets the load) and gets p99 = {0.08 * ratio} s",
    )
    fitted = run.namespace["LogNormal"].from_quantiles(p50=0.05, p99=1.2)
    agrees(
        run,
        "# LogNormal(mean=0.1271..., cv=2.3375...)",
        f"# {fitted!r}",
    )
    metrics = json_in(run.output('pipeline="checkout"'))
    agrees(
        run, "`queue_depth_max` (26 here)", f"`queue_depth_max` ({metrics['queue_depth_max']} here)"
    )


def _spelled(n: int) -> str:
    words = "zero one two three four five six seven eight nine ten eleven twelve thirteen"
    return words.split()[n]


@checker("planning.md")
def planning(run: PageRun) -> None:
    first = json_in(printed_by(run, "lognormal:p50=0.05,p99=1.2", "--json"))
    runs, chosen = first["runs"], first["chosen"]["concurrency"]
    agrees(
        run,
        "The answer took 72 runs of 100,000 items",
        f"The answer took {runs} runs of 100,000 items",
    )
    agrees(
        run,
        "`budget: 72 of 2,000 runs used`",
        "`budget: {runs_used} of {runs_allowed:,} runs used`".format(**first["budget"]),
    )
    says(run, f"leaves almost no room for queueing: {_spelled(chosen)} workers")
    says(run, f"{_spelled(chosen).capitalize()} workers hold p95 under 0.5 s")
    # the offered load queueing theory judged the candidates by: "6.486" in the first note
    load = float(re.search(r"offered load ([\d.]+)", first["candidates"][0]["note"])[1])
    agrees(run, "workers for 6.5 busy on average", f"workers for {load} busy on average")
    service = run.namespace["base"].service
    sigma = math.sqrt(math.log1p(service.cv**2))
    p95 = service.mean * math.exp(-(sigma**2) / 2 + NormalDist().inv_cdf(0.95) * sigma)
    agrees(
        run,
        "a p95 of 0.47 s (the log-normal through those two percentiles has a mean of 127 ms"
        " and a cv of 2.3)",
        f"a p95 of {p95} s (the log-normal through those two percentiles has a mean of"
        f" {service.mean * 1000} ms and a cv of {service.cv})",
    )
    # the call gives the command's plan exactly, candidate by candidate: print(p) and the
    # command (and the command with --sensitivity) print the same table
    tables = [
        "\n".join(
            line.rstrip()
            for line in re.search(r"\ncandidates \(.*\n(?:  .*\n)+", out)[0].split("\n")
        )
        for out in run.outputs.values()
        if "examined 24 of 128 configurations" in out
    ]
    assert len(tables) == 3 and len(set(tables)) == 1, "the call and the command differ"
    # two scenarios, seven looks each: the Bonferroni share per look
    looks = 7 * 2
    agrees(
        run,
        "(99.64% per look above: 7 looks times 2 scenarios)",
        f"({100 * (1 - 0.05 / looks)}% per look above: 7 looks times 2 scenarios)",
    )
    shared = printed_by(run, "normal=normal.toml@0.9")
    chosen_shared = int(re.search(r"chosen concurrency=(\d+)", shared)[1])
    says(run, f"every scenario: {_spelled(chosen_shared)} workers here, the fewest the peak allows")
    equal = printed_by(run, "normal=normal.toml --scenario", "--cost")
    chosen_equal = int(re.search(r"chosen concurrency=(\d+)", equal)[1])
    says(run, f"and chooses {_spelled(chosen_equal)} workers, each at 1.20 an hour")
    planning_check(run)


def planning_check(run: PageRun) -> None:
    """The check's terminal line, as the prose gives it, from the same check's JSON."""
    printed = printed_by(run, "--check concurrency=10,maxsize=100 --json")
    start = re.search(r"^\{", printed, re.M)
    checked, _ = json.JSONDecoder().raw_decode(printed[start.start() :])
    shown = checked["configuration"]["concurrency"]
    agrees(
        run,
        "(`Check: meets (exit 0) after 3 replications: concurrency=10, ...`)",
        f"(`Check: {checked['verdict']} (exit 0) after {checked['runs']} replications:"
        f" concurrency={shown}, ...`)",
    )


@checker("twin.md")
def twin(run: PageRun) -> None:
    # the levels of calibrate's tests, as the prose gives them and the command prints them
    printed = "".join(out for _, out in run.commands)
    says(run, "when one passes a KS test at 5% with Lilliefors' critical")
    assert "(5% critical)" in printed, "calibrate no longer prints the KS test's level"
    says(run, "Poisson dispersion test is consistent with one rate at 5%")
    says(run, "Pearson's chi-square over the buckets passes at 5%")
    assert re.search(r"consistent with one rate \(dispersion .*?>= 0\.05\)", printed)
    assert re.search(r"chi-square [\d.]+ on \d+ df, p=[\d.]+ >= 0\.05", printed)
    what_if = json_in(printed_by(run, "--what-if api_latency=0.5 --json"))
    assert what_if["accounting"]["balanced"] and set(what_if["comparison"]) == {
        "throughput_per_s",
        "latency_p95_s",
        "queue_depth_max",
    }
    planned = json_in(printed_by(run, "plan orders.toml"))
    says(run, f"and the plan chooses `concurrency` {planned['chosen']['concurrency']}.")
    # the command line's golden test holds what calibrate --json prints on that file
    golden = json.loads((REPO / "tests/cli/golden/calibrate_prometheus.json").read_text())
    fitted = golden["json"]
    agrees(
        run,
        "`arrival_rate_per_s` (5.0325), `service_mean_s` (0.1961), `service_p95_s` (0.5421)"
        " and `failure_rate` (0.0490)",
        f"`arrival_rate_per_s` ({fitted['arrival_rate_per_s']}), `service_mean_s`"
        f" ({fitted['service_mean_s']}), `service_p95_s` ({fitted['service_p95_s']})"
        f" and `failure_rate` ({fitted['failure_rate']})",
    )
    rate = {
        tool: float(
            re.search(
                r"Poisson at (?:the mean rate )?([\d.]+)/s", printed_by(run, f"--format {tool}")
            )[1]
        )
        for tool in ("k6", "otlp")
    }
    agrees(
        run,
        "k6 and Locust give 20.9/s, the 20/s items times their 1.05 attempts",
        f"k6 and Locust give {rate['k6']}/s, the {rate['otlp']}/s items times their"
        f" {rate['k6'] / rate['otlp']} attempts",
    )
    # calibrate's intervals are at the level its printout names
    says(run, "each with its 95% `..._interval`")
    assert "(311 of 6347; 95% Wilson interval" in printed, "calibrate's level is not 95%"
    agrees(
        run,
        "give the items' own 20/s.",
        f"give the items' own {rate['otlp']}/s.",
    )
    queued = printed_by(run, "queued_stats_history.csv")
    fitted_mean = float(re.search(r"log-normal \(mean ([\d.]+) s", queued)[1])
    recorded_mean = float(re.search(r"gives back mean [\d.]+ s \(recorded ([\d.]+)\)", queued)[1])
    agrees(
        run,
        "The service mean comes back at 40.7 ms where the response times' own is 47.5 ms.",
        f"The service mean comes back at {fitted_mean * 1000} ms where the response times'"
        f" own is {recorded_mean * 1000} ms.",
    )


@checker("chains.md")
def chains(run: PageRun) -> None:
    advice = re.search(r"concurrency (\d+) -> (\d+)", run.output("[CRITICAL] BOTTLENECK"))
    says(run, f"(`concurrency {advice[1]} -> {advice[2]}`, enough for about 80% busy")


@checker("overload.md")
def overload(run: PageRun) -> None:
    # the retry budget's arithmetic, from the budget the page builds, and its run's attempts
    budget = run.namespace["budget"]
    first = 1000
    allowed = budget.ratio * first + budget.min_retries_per_s * budget.window_s
    attempts = int(run.output("retry_budget").split()[0])
    agrees(
        run,
        "attempts allow 0.1 x 1000 + 0.05 x 100 = 105 retries",
        f"attempts allow {budget.ratio} x {first} + {budget.min_retries_per_s} x"
        f" {budget.window_s} = {attempts - first} retries",
    )
    assert attempts - first == allowed, (attempts, allowed)
    # the same run without the budget: every attempt fails, so each item makes all of them
    ns_config = PipelineConfig(
        concurrency=first,
        max_attempts=4,
        drain_timeout_s=None,
        backoff=Backoff(kind="constant", base_s=0.25, jitter=False),
    )
    unbudgeted = run_virtual(Pipeline(run.namespace["down"], ns_config).run(range(first)))
    assert unbudgeted.completed == 0, "the downstream no longer fails every attempt"
    agrees(
        run,
        "at 100% failure, `max_attempts=4` multiplies the load on a struggling downstream by"
        " exactly 4.",
        f"at {100 * (1 - unbudgeted.completed / first)}% failure, `max_attempts="
        f"{ns_config.max_attempts}` multiplies the load on a struggling downstream by exactly"
        f" {unbudgeted.attempts // first}.",
    )
    agrees(
        run,
        "Without the budget the same run makes 4000 attempts; with it, 1000 first",
        f"Without the budget the same run makes {unbudgeted.attempts} attempts; with it,"
        f" {first} first",
    )
    overload_breaker(run)
    overload_codel(run)
    overload_codel_over_time(run)
    overload_downstream(run)
    overload_mitigations(run)
    overload_chain(run)


def overload_breaker(run: PageRun) -> None:
    """The breaker's times: it opens when the fourth failed call ends, turns half-open
    ``open_s`` later, and the fifth item's call starts then."""
    calls, breaker = run.namespace["calls"], run.namespace["breaker"]
    opened = calls[breaker.min_calls - 1] + 1.0  # each call takes 1 s
    agrees(
        run,
        "Four failures open it at 4; the fifth item waits on its worker until the breaker turns"
        " half-open at 14,",
        f"Four failures open it at {opened}; the fifth item waits on its worker until the"
        f" breaker turns half-open at {opened + breaker.open_s},",
    )
    assert calls[breaker.min_calls] == opened + breaker.open_s, calls


def overload_codel(run: PageRun) -> None:
    """CoDel's first shed: takes every 30 ms from time 0, the first above the target, and
    the first take a full interval after it; the run shed the oldest item then."""
    codel, service_s, items = CoDel(), 0.03, 10
    says(run, "await asyncio.sleep(0.03)")
    says(run, "codel=CoDel())")
    says(run, ".run(range(10)))")
    takes = [k * service_s for k in range(items)]
    first_above = next(t for t in takes if t > codel.target_s)
    shed_at = next(t for t in takes if t >= first_above + codel.interval_s - 1e-12)
    served = run.namespace["served"]
    oldest = min(set(range(items)) - set(served))
    agrees(
        run,
        "One worker, 30 ms per item, ten items waiting at time 0: the queue stands from the"
        " second take on, so the newest items are served first, and at 150 ms (a full interval"
        " after the first take above the 5 ms target) CoDel sheds the oldest, item 1.",
        f"One worker, {service_s * 1000} ms per item, ten items waiting at time {takes[0]}: the"
        " queue stands from the second take on, so the newest items are served first, and at"
        f" {shed_at * 1000} ms (a full interval after the first take above the"
        f" {codel.target_s * 1000} ms target) CoDel sheds the oldest, item {oldest}.",
    )
    # the run's own shed, timed: the page's handler again, with a listener
    shed = []

    def listen(kind, now_s, item):
        if kind in {EventKind.SHED, EventKind.QUEUE_SHED}:
            shed.append((now_s, item))

    config = PipelineConfig(concurrency=1, queue_maxsize=None, codel=codel)
    served.clear()
    run_virtual(Pipeline(run.namespace["work"], config, on_event=listen).run(range(items)))
    assert len(shed) == 1 and shed[0][1].payload == oldest, shed
    assert math.isclose(shed[0][0], shed_at, abs_tol=1e-9), shed


def overload_codel_over_time(run: PageRun) -> None:
    """The printed time series: the row of CoDel's first shed, and the queue's drop to it
    from the row before (one take and one shed)."""
    rows = [line.split() for line in run.output("codel_shed").splitlines()[1:]]
    table = [(int(row[0]), float(row[1]), int(row[2]), int(row[3])) for row in rows]
    shed = next(k for k, row in enumerate(table) if row[3] > 0)
    (index, time_s, depth, _), (before, _, depth_before, _) = table[shed], table[shed - 1]
    assert index == before + 1 and depth_before - depth == 2, table
    agrees(
        run,
        "At 0.15 s the queue loses two items at once: one a worker took, one CoDel shed.",
        f"At {time_s} s the queue loses two items at once: one a worker took, one CoDel shed.",
    )


def overload_mitigations(run: PageRun) -> None:
    """The comparison's scenario as its block sets it, the storm it is stuck in without a
    control, and the calm run's exact zeros where a control never acts."""
    calm, stuck, table = run.namespace["calm"], run.namespace["stuck"], run.namespace["table"]
    servers = calm.downstream.concurrency
    busy = calm.arrivals.rate * calm.downstream.service.mean / servers
    (cut,) = stuck.faults
    recovered = table[(table.metric == "recovered") & (table.control == "none")]["mean"]
    assert recovered.tolist() == [0.0], recovered  # stuck in every replication
    agrees(
        run,
        "Here 40 client workers call 4 servers that are 70% busy, with a 1 s timeout and 4"
        " attempts; an 80% capacity cut for 5 s leaves the system stuck",
        f"Here {calm.config.concurrency} client workers call {servers} servers that are"
        f" {100 * busy}% busy, with a {calm.config.attempt_timeout_s} s timeout and"
        f" {calm.config.max_attempts} attempts; an {100 * (1 - cut.factor)}% capacity cut for"
        f" {cut.for_s} s leaves the system stuck",
    )
    cost = run.namespace["cost"]
    idle = cost[cost.control.isin(["budget", "breaker", "aimd", "codel"])]["difference"]
    agrees(
        run,
        "the same runs as without them: a difference of exactly 0.",
        f"the same runs as without them: a difference of exactly {idle.abs().max()}.",
    )
    assert (idle == 0.0).all(), idle


def overload_chain(run: PageRun) -> None:
    """The exact chain's scaled example, as the page builds it and as its run printed it;
    Metafor's chain and bound beside it; the simulated loop at Metafor's full size."""
    chain = run.namespace["chain"]  # the last one printed, k = 2; k = 1 is quoted
    assert (chain.capacity, chain.states) == (4, 4309), chain
    one = run.output("1 589 ").split("\n")[0].split()
    agrees(
        run,
        "scaled to a server that holds 4 requests",
        f"scaled to a server that holds {chain.capacity} requests",
    )
    says(run, "with a timeout of 0.12 s: Metafor's 3 s timeout against the 10.1 s its full")
    says(run, "server of 101 takes to drain.")
    agrees(
        run,
        "Of the 2.799 requests at the server, 1.921 are work for nobody, and the server"
        " completes 1.703 items a second of the 9.5 that arrive.",
        f"Of the {one[2]} requests at the server, {one[3]} are work for nobody, and the server"
        f" completes {one[4]} items a second of the {chain.lost_per_s + chain.goodput_per_s:.1f}"
        " that arrive.",
    )
    rows = [line.split() for line in run.output("15 0.").splitlines()]
    tails = {int(row[0]): (float(row[1]), float(row[2])) for row in rows}
    agrees(
        run,
        "The bound is 72 times the exact tail at 15 requests and 9 times at 20, and 1 from 25 on.",
        f"The bound is {tails[15][1] / tails[15][0]:.0f} times the exact tail at 15 requests and"
        f" {tails[20][1] / tails[20][0]:.0f} times at 20, and {tails[25][1]:.0f} from 25 on.",
    )
    summary = run.namespace["s"]
    metafor = run.namespace["metafor"]
    agrees(
        run,
        "services at 10 a second outlast Metafor's 3 s:",
        f"services at {1 / metafor.downstream.service.mean:.0f} a second outlast Metafor's"
        f" {metafor.config.attempt_timeout_s:.0f} s:",
    )
    # The page's formulas are the ones Metafor's chain is built with here.
    for n in range(1, 120):
        assert run.namespace["bound"](n) == chebyshev_bound(n, mu=10.0, timeout_s=3.0), n
        assert math.isclose(
            run.namespace["tail"](n), timeout_probability(n, mu=10.0, timeout_s=3.0), rel_tol=1e-9
        ), n
    # Metafor's chain reads the tail at n = 0 .. 99; its full queue is n = 99.
    full = {round(run.namespace[name](99)) for name in ("bound", "tail")}
    assert len(full) == 1, full
    agrees(
        run,
        "it sits at the full queue, where both are 1.",
        f"it sits at the full queue, where both are {full.pop()}.",
    )
    places, kinds = metafor.downstream.queue_maxsize + 1, 1 + metafor.config.max_attempts
    agrees(
        run,
        "each of the 101 requests has 5 states (orphaned, or live at one of 4 attempts), 5 to"
        " the power of 101 sequences.",
        f"each of the {places} requests has {kinds} states (orphaned, or live at one of"
        f" {kinds - 1} attempts), {kinds} to the power of {places} sequences.",
    )
    agrees(
        run,
        "From an empty start, 97.0 requests are at the server on average over the 1,200 s,"
        " and 0.24 items a second of the 9.5 are completed.",
        f"From an empty start, {summary['downstream_in_system_mean']:.1f} requests are at the"
        f" server on average over the {metafor.duration_s:,.0f} s, and"
        f" {summary['goodput_per_s']:.2f} items a second of the {metafor.arrivals.rate} are"
        " completed.",
    )
    assert metafor.downstream.queue_maxsize == 100 and metafor.config.max_attempts == 4


def overload_downstream(run: PageRun) -> None:
    """The downstream example's times: the server's 2 s, the second item's arrival plus
    the client's timeout; the cut's share and the recovery map's interval."""
    trace = run.namespace["trace"]
    service_s = trace.downstream.service.value
    second = float(trace.arrivals.arrival_times[1]) + trace.config.attempt_timeout_s
    agrees(
        run,
        "The first item is served in 2 s; the second waits behind it and times out at 3.5 s",
        f"The first item is served in {service_s} s; the second waits behind it and times out"
        f" at {second} s",
    )
    # the capacity drop's factor, as the page's run sets it, as a cut
    factor = float(
        re.search(r"CapacityDrop\(at_s=[\d.]+, for_s=seconds, factor=([\d.]+)\)", run.text)[1]
    )
    agrees(run, "An 80% cut for one second", f"An {100 * (1 - factor)}% cut for one second")


@checker("autoscaling.md")
def autoscaling(run: PageRun) -> None:
    autoscaling_syncs(run)
    autoscaling_storm(run)
    autoscaling_plan(run)
    autoscaling_pools(run)
    autoscaling_setup(run)


def autoscaling_setup(run: PageRun) -> None:
    """M/M/k/setup against the pool that never sleeps: what a second of set-up costs."""
    from pipeline.sim.analysis.setup_chain import setup_chain
    from pipeline.sim.analysis.theory import mmc

    always_s = mmc(5.0, 1.0, 8).latency_mean_s
    second_s = setup_chain(arrival_rate=5.0, mu=1.0, setup_rate=1.0, k=8).response_time_s
    agrees(
        run,
        "a second of cold start costs about 0.4 s of mean response",
        f"a second of cold start costs about {second_s - always_s:.1f} s of mean response",
    )


def autoscaling_syncs(run: PageRun) -> None:
    """The pool at each sync of the printed run: the size that keeps up, the last sync that
    asked for more, and the shrink the scale-down window holds until after it."""
    syncs = run.namespace["syncs"]
    scaler = run.namespace["scenario"].config.autoscale
    times, queue = syncs["time_s"].tolist(), syncs["queue_depth"].tolist()
    workers, desired = syncs["workers"].tolist(), syncs["workers_desired"].tolist()
    empty = queue.index(0, 1)  # the first sync after the start with the queue empty
    asked = max(k for k in range(1, empty) if desired[k] > workers[k])
    shrunk = next(k for k in range(empty, len(times)) if workers[k] < workers[empty])
    assert scaler.min_workers == 1 and workers[shrunk] >= scaler.min_workers, syncs
    agrees(
        run,
        "Once 30 workers keep up, the queue is empty and the metric asks for none; the"
        " scale-down window holds the pool for 300 s after the last sync that asked for more"
        " (60 s), and at 360 s it shrinks to `min_workers`, one worker (the 10 shown",
        f"Once {workers[empty]} workers keep up, the queue is empty and the metric asks for"
        f" {'none' if desired[empty] == 0 else desired[empty]}; the scale-down window holds"
        f" the pool for {scaler.scale_down_stabilization_s} s after the last sync that asked"
        f" for more ({times[asked]} s), and at {times[shrunk]} s it shrinks to `min_workers`,"
        f" one worker (the {workers[shrunk]} shown",
    )
    assert times[shrunk] == times[asked] + scaler.scale_down_stabilization_s, syncs


def autoscaling_storm(run: PageRun) -> None:
    """The retry storm's runs as the page's block set and printed them: the fixed pool's
    bound on requests in flight, the autoscaled pool's growth to the cut's end and past,
    the wait of that many requests at the servers, and each seed's outcome."""
    storm, scaler, runs = run.namespace["storm"], run.namespace["scaler"], run.namespace["runs"]
    fixed, servers = storm.config.concurrency, storm.downstream.concurrency
    service_s = storm.downstream.service.mean
    (cut,) = storm.faults
    assert all(runs["fixed", seed].summary["recovered"] for seed in (1, 2))
    agrees(
        run,
        "With 12 workers the cut's backlog waits in the pipeline's own queue, at most 12"
        " requests reach the 10 servers",
        f"With {fixed} workers the cut's backlog waits in the pipeline's own queue, at most"
        f" {fixed} requests reach the {servers} servers",
    )
    ts = run.namespace["runs"]["autoscaled", 1].timeseries
    at = ts[ts["time_s"] % 5 == 0].drop_duplicates("time_s", keep="last").set_index("time_s")
    grown = int(at.loc[40.0, "workers"])
    wait_s = grown * service_s / servers
    assert wait_s > storm.config.attempt_timeout_s, wait_s
    agrees(
        run,
        "still growing when the cut ends at 28 s (192 workers at 40 s). 192 requests in flight"
        " at 10 servers of 80 ms wait about 1.5 s",
        f"still growing when the cut ends at {cut.at_s + cut.for_s} s ({grown} workers at 40"
        f" s). {grown} requests in flight at {servers} servers of {1000 * service_s} ms wait"
        f" about {wait_s} s",
    )
    late = at[(at.index >= 20.0) & (at.index <= 60.0)]  # the rows the page prints
    retrying = late.index[late["retry_waiting"] > 0][0]
    after = late[late.index >= retrying]
    assert (after["workers"] == scaler.max_workers).all(), after
    assert (after["workers_desired"] > scaler.max_workers).all(), after
    assert after["queue_depth"].is_monotonic_increasing, after
    stuck, out = runs["autoscaled", 1].summary, runs["autoscaled", 2].summary
    assert not stuck["recovered"] and out["recovered"]
    agrees(
        run,
        "From 45 s on, the retries keep the queue growing, the metric asks for more than"
        " `max_workers`, and the pool stays at 200 with the downstream serving orphans: a"
        " goodput of 25 items/s where 100 arrive. In the other run the same autoscaler stopped"
        " at 108 workers",
        f"From {retrying} s on, the retries keep the queue growing, the metric asks for more"
        f" than `max_workers`, and the pool stays at {scaler.max_workers} with the downstream"
        f" serving orphans: a goodput of {stuck['goodput_per_s']} items/s where"
        f" {storm.arrivals.rate} arrive. In the other run the same autoscaler stopped at"
        f" {out['workers_max']} workers",
    )


def autoscaling_plan(run: PageRun) -> None:
    """The plan's candidates as the command printed them: the larger target the cheaper,
    and the cold start dearer in latency and cost at either target."""
    printed = printed_by(run, "plan autoscaled.toml", "autoscale.target=2,20")
    rows = [line.split() for line in printed.split("candidates", 1)[1].splitlines()]
    cells = {
        (float(row[0]), float(row[1])): (float(row[4]), float(row[-1]))
        for row in rows
        if row and re.fullmatch(r"[\d.]+", row[0])
    }
    (small, large), (warm, cold) = (sorted({key[k] for key in cells}) for k in (0, 1))
    assert cells[large, warm][1] < cells[small, warm][1], cells
    for target in (small, large):
        assert cells[target, cold][0] > cells[target, warm][0], cells
        assert cells[target, cold][1] > cells[target, warm][1], cells
    agrees(
        run,
        "a target of 20 items per worker keeps a smaller pool than 2",
        f"a target of {large} items per worker keeps a smaller pool than {small}",
    )
    agrees(
        run,
        "and a 10 s cold start costs both latency",
        f"and a {cold} s cold start costs both latency",
    )


def autoscaling_pools(run: PageRun) -> None:
    """The fixed pool beside the autoscaled ones, as the command printed them: the fixed
    pool of ten the cheapest and the fastest, the fixed pool of two rejected unrun."""
    printed = printed_by(run, "plan autoscaled.toml", "autoscale=none;")
    table = printed.split("candidates", 1)[1].splitlines()[2:]
    # columns: autoscale, concurrency, runs, verdict, latency (mean ± half-width), cost/hour
    cells = {}
    for line in table:
        pool, workers, _, verdict, latency, cost = re.split(r"\s{2,}", line.strip())
        cells["fixed" if pool == "none" else "scaled", int(workers)] = (verdict, latency, cost)
    few, many = sorted({workers for _, workers in cells})
    assert cells["fixed", few][0] == "unstable", cells
    fixed, scaled, scaled_many = cells["fixed", many], cells["scaled", few], cells["scaled", many]
    assert float(fixed[2]) < min(float(scaled[2]), float(scaled_many[2])), cells
    assert float(fixed[1].split()[0]) < float(scaled[1].split()[0]), cells
    says(run, f"each starting at {few} or {many} workers")
    agrees(run, '"concurrency": [2, 10]}` is', f'"concurrency": [{few}, {many}]}}` is')
    agrees(
        run,
        "the fixed pool of ten is cheaper (5 per hour against 6.612",
        f"the fixed pool of ten is cheaper ({fixed[2]} per hour against {scaled[2]}",
    )
    agrees(
        run,
        "faster (p95 7.037 s against 16.15 s)",
        f"faster (p95 {fixed[1].split()[0]} s against {scaled[1].split()[0]} s)",
    )
    agrees(
        run,
        "started at ten it costs 8.112 per hour",
        f"started at ten it costs {scaled_many[2]} per hour",
    )
