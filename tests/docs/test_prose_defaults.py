"""The defaults and limits the guide's prose quotes, each held to the code that sets it.

A page that says "262,144 by default" or "critical from 110%" quotes a constant of the
code, not a result of a run: a changed default must fail here until the page follows.
Each check finds the sentence in the page (:func:`~tests.docs.figures.quoted`), so a
page that drops or rewords it fails too, and compares its figure with the constant.
"""

from __future__ import annotations

import inspect
import re
import tracemalloc

from pipeline import AIMD, CircuitBreaker, CoDel, Gradient2, PipelineConfig, RetryBudget
from pipeline._validate import MAX_CONCURRENCY as MAX_CONCURRENCY_OF_A_POOL
from pipeline.autoscale import Autoscaler
from pipeline.cli.plan_settings import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_REPLICATIONS,
    DEFAULT_MIN_REPLICATIONS,
)
from pipeline.cli.settings import MAX_SCENARIO_BYTES
from pipeline.cli.sweep import DEFAULT_REPLICATIONS as SWEEP_REPLICATIONS
from pipeline.cli.values import MAX_PROCESSES
from pipeline.examples.ingest import __main__ as ingest_command
from pipeline.examples.ingest.chain import ingest
from pipeline.examples.ingest.meter import QuantileSketch
from pipeline.examples.ingest.server import PartnerConfig
from pipeline.examples.ingest.twin import MAX_CONCURRENCY, run_loop
from pipeline.sim import LogNormal, compare_controls
from pipeline.sim.analysis.diagnostics.bottleneck import BUSY_WARN, QUEUE_PER_WORKER, StageLoad
from pipeline.sim.analysis.diagnostics.diagnose import diagnose
from pipeline.sim.analysis.diagnostics.findings import LOAD_CRITICAL
from pipeline.sim.analysis.planning.headroom import MAX_POINTS as HEADROOM_FACTORS
from pipeline.sim.analysis.planning.headroom import RELATIVE_WIDTH
from pipeline.sim.analysis.planning.sensitivity import sensitivity
from pipeline.sim.calibration.histogram import QUANTILE_POINTS
from pipeline.sim.running.kernel.driver import LOAD_AFTER_ITEMS
from pipeline.sim.running.openmetrics import MAX_STEPS
from pipeline.sim.running.recovery import RECOVERY_TOLERANCE, RECOVERY_WINDOW_S
from pipeline.sim.stats.proportions import proportion_ci
from pipeline.sim.workloads.csvcolumn import MAX_LINE_CHARS
from pipeline.sim.workloads.scenario import MAX_N_ITEMS
from pipeline.sim.workloads.telemetry.prometheus import DEFAULT_STEP_S
from pipeline.sim.workloads.telemetry.query_range import MAX_POINTS
from pipeline.sim.workloads.traces.runtrace import TraceRecorder
from pipeline.tracing import DEFAULT_MAX_LINKS
from tests import tiers
from tests.cli.test_cli_calibrate_twin import AGREEMENT, WHAT_IF_FACTOR
from tests.docs.conftest import REPO
from tests.docs.figures import in_section, quoted
from tests.docs.snippets import shows
from tests.notebooks.after_the_run import CPU_FACTOR, MEMORY_FACTOR
from tests.sim.running.kernel.test_kernel_equality import TOLERANCE_S
from tests.sim.workloads.telemetry import test_locust_live as locust_live
from tests.sim.workloads.telemetry.live_service import WORKERS as LIVE_WORKERS

MIB = 2**20


def default(function, name: str):
    """The default of ``function``'s parameter ``name``."""
    return inspect.signature(function).parameters[name].default


def test_chains_guide_gives_the_bottleneck_finding_s_thresholds():
    said = quoted(
        "docs/guide/chains.md",
        r"\(critical from (\d+)%, a warning from (\d+)%, info below\)",
    )
    assert (int(said[1]), int(said[2])) == (round(100 * LOAD_CRITICAL), round(100 * BUSY_WARN))
    said = quoted("docs/guide/chains.md", r"enough for about (\d+)% busy")
    assert int(said[1]) == round(100 * default(StageLoad.workers_for, "utilisation"))
    said = quoted("docs/guide/chains.md", r"\(`queue_maxsize = (\d+) x concurrency`\)")
    assert int(said[1]) == QUEUE_PER_WORKER


def test_simulating_guide_gives_the_largest_files_read():
    said = quoted(
        "docs/guide/simulating.md",
        r"nested hundreds of levels deep or over (\d+) MiB; a CSV file that is not UTF-8 CSV or"
        r" has a line over (\d+) MiB\)",
    )
    assert (int(said[1]) * MIB, int(said[2]) * MIB) == (MAX_SCENARIO_BYTES, MAX_LINE_CHARS)


def test_twin_guide_gives_the_measurement_s_bounds():
    said = quoted(
        "docs/guide/twin.md",
        r"exact up to ([\d,]+) records, then within ([\d.]+)% of the value\)",
    )
    assert int(said[1].replace(",", "")) == default(QuantileSketch, "exact_up_to")
    assert float(said[2]) / 100 == default(QuantileSketch, "relative_accuracy")
    said = quoted("docs/guide/twin.md", r"live samples are thinned to at most ([\d,]+)")
    assert int(said[1].replace(",", "")) == default(ingest, "max_samples")


def test_twin_guide_gives_the_trace_recorder_s_bound_and_its_memory():
    said = quoted(
        "docs/guide/twin.md",
        r"the first `max_events` events \(([\d,]+) by default, about ([\d.]+) MiB\)",
    )
    events = default(TraceRecorder, "max_events")
    assert int(said[1].replace(",", "")) == events
    # what keeping that many events takes, measured: the recorder's arrays over-allocate
    # by up to a sixteenth and the page rounds to a tenth of a MiB, so within 10%
    listen = TraceRecorder().listener("stage")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(events):
            listen(0, float(n), None)
        kept = (tracemalloc.get_traced_memory()[0] - before) / MIB
    finally:
        tracemalloc.stop()
    shown = float(said[2])
    assert shown / 1.1 <= kept <= shown * 1.1, (kept, said[0])


def test_twin_guide_gives_the_what_if_s_defaults():
    said = quoted(
        "docs/guide/twin.md",
        r"The what-if is simulated \(`--replications`, (\d+)\) and run for real"
        r" \(`--repeats`, (\d+)\)",
    )
    replications = int(said[1])
    assert replications == default(run_loop, "replications") == ingest_command.REPLICATIONS
    assert int(said[2]) == ingest_command.REPEATS
    said = quoted("docs/guide/twin.md", r"doubles the write workers \(at most ([\d,]+)\)")
    assert int(said[1].replace(",", "")) == MAX_CONCURRENCY
    said = quoted("docs/guide/twin.md", r"widened by `--tolerance` \((\d+)% of the")
    assert int(said[1]) / 100 == default(run_loop, "tolerance") == ingest_command.TOLERANCE
    said = quoted("docs/guide/twin.md", r"widened by the (\d+)% tolerance\) on every run")
    assert int(said[1]) / 100 == default(run_loop, "tolerance")
    said = quoted("docs/guide/twin.md", r"`--step`, (\d+) s by default\)")
    assert shows(said[1], f"{DEFAULT_STEP_S}")


def test_planning_guide_gives_the_headroom_s_and_the_sensitivity_s_steps():
    said = quoted("docs/guide/planning.md", r"then narrows the bracket to (\d+)%, every factor")
    assert int(said[1]) / 100 == RELATIVE_WIDTH
    said = quoted("docs/guide/planning.md", r"Add `--sensitivity` \(±(\d+)%;")
    assert int(said[1]) / 100 == default(sensitivity, "change")
    said = quoted(
        "docs/guide/planning.md",
        r"so (\d+)% more traffic, a (\d+)% slower handler or a (\d+)% wider spread",
    )
    assert {int(share) / 100 for share in said.groups()} == {default(sensitivity, "change")}
    said = quoted("docs/guide/planning.md", r"the at most (\d+) factors of a search")
    assert int(said[1]) == HEADROOM_FACTORS


def test_the_drain_s_default_timeout_is_the_pages_one():
    drain = PipelineConfig().drain_timeout_s
    for page, pattern in (
        ("docs/workshop.md", r"hit `drain_timeout_s` \((\d+) s by default\)"),
        ("docs/guide/simulating.md", r"\(`--drain-timeout`, (\d+) s by default\)"),
    ):
        assert float(quoted(page, pattern)[1]) == drain, page


def test_workshop_guide_gives_the_resource_checks_tolerances():
    said = quoted(
        "docs/workshop.md",
        r"fails when a run is more than ([\d.]+)x off a figure here in memory, or ([\d.]+)x in"
        r" CPU time",
    )
    assert (float(said[1]), float(said[2])) == (MEMORY_FACTOR, CPU_FACTOR)


def _shown_defaults(page: str, name: str) -> dict[str, str]:
    """The ``key=value`` pairs of the signature ``name(...)`` the page shows in prose."""
    said = quoted(page, rf"\b{name}\(([^`()]+)\)")
    return dict(pair.strip().split("=", 1) for pair in said[1].split(","))


def test_overload_guide_gives_each_control_s_defaults():
    page = "docs/guide/overload.md"
    for control in (RetryBudget, CircuitBreaker, CoDel):
        for key, shown in _shown_defaults(page, control.__name__).items():
            assert shown == repr(default(control, key)), (control.__name__, key, shown)
    said = quoted(
        page,
        r"multiplies by `backoff_ratio` \(([\d.]+)\) on a failed, timed-out or refused attempt,"
        r" or one slower than `timeout_s` \(([\d.]+) s\); Gradient2 compares a long-term RTT"
        r" average with each attempt's RTT \(smoothing ([\d.]+), queue size (\d+), long window"
        r" (\d+), tolerance ([\d.]+)\)",
    )
    assert [float(value) for value in said.groups()] == [
        default(AIMD, "backoff_ratio"),
        default(AIMD, "timeout_s"),
        *(default(Gradient2, key) for key in ("smoothing", "queue_size", "long_window")),
        default(Gradient2, "rtt_tolerance"),
    ]
    said = quoted(page, r"`recovery_s`: (\d+) s windows after the last fault, each within (\d+)%")
    assert (float(said[1]), int(said[2]) / 100) == (RECOVERY_WINDOW_S, RECOVERY_TOLERANCE)
    # recovery_map's cells: the Wilson interval at proportion_ci's level
    said = quoted(page, r"gives each cell's stuck fraction with its (\d+)% Wilson interval")
    assert int(said[1]) / 100 == default(proportion_ci, "level")
    # compare_controls' paired intervals, at its own level
    said = quoted(page, r"with its paired interval \(`low`, `high`, (\d+)% by default\)")
    assert int(said[1]) / 100 == default(compare_controls, "level")


def test_autoscaling_guide_gives_the_autoscaler_s_defaults():
    page = "docs/guide/autoscaling.md"
    said = quoted(page, r"the pool grows by at most (\d+) workers or (\d+)% a sync")
    assert (int(said[1]), int(said[2]) / 100) == default(Autoscaler, "max_scale_up")
    said = quoted(page, r"`scale_down_stabilization_s` \((\d+) s by default\)")
    assert float(said[1]) == default(Autoscaler, "scale_down_stabilization_s")
    # the README's row for notebook 13, which runs the autoscaler's defaults
    said = quoted("README.md", r"the max\((\d+), (\d+)%\) scale-up policy.*?the (\d+) s scale-down")
    assert (int(said[1]), int(said[2]) / 100) == default(Autoscaler, "max_scale_up")
    assert float(said[3]) == default(Autoscaler, "scale_down_stabilization_s")


def test_engine_guide_gives_the_equality_test_s_tolerance():
    said = quoted("docs/guide/engine.md", r"times agree to (1e-\d+) s, counts exactly")
    assert float(said[1]) == TOLERANCE_S


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_guides_give_the_code_s_limits():
    """Each guide's limit of a count, as the code sets it."""
    for page, pattern, constant in (
        ("docs/guide/planning.md", r"`plan\(budget=N\)`; ([\d,]+) by default", DEFAULT_BUDGET),
        ("docs/guide/planning.md", r"is at most ([\d,]+) local worker processes", MAX_PROCESSES),
        ("docs/guide/planning.md", r"replications \((\d+), 6, 12", DEFAULT_MIN_REPLICATIONS),
        ("docs/guide/planning.md", r"12, \.\.\., (\d+) by default", DEFAULT_MAX_REPLICATIONS),
        ("docs/guide/planning.md", r"`--replications` defaults to (\d+)\.", SWEEP_REPLICATIONS),
        (
            "docs/guide/simulating.md",
            r"\(`1s`; `500ms`, `2m`...\), at most ([\d,]+) steps",
            MAX_STEPS,
        ),
        ("docs/guide/semantics.md", r"\(an integer, 1 to ([\d,]+)\)", MAX_CONCURRENCY_OF_A_POOL),
        ("docs/guide/engine.md", r"reach ([\d,]+) stage items, so a short run", LOAD_AFTER_ITEMS),
        ("docs/guide/twin.md", r"A range past Prometheus's ([\d,]+) points", MAX_POINTS),
        ("docs/guide/twin.md", r"`_sum / _count` \(([\d,]+) quantile points", QUANTILE_POINTS),
        ("docs/guide/twin.md", r"cursor pages of (\d+) records", PartnerConfig().page_size),
        (
            "docs/guide/metrics.md",
            r"at most (\d+) links, the SDK's default limit",
            DEFAULT_MAX_LINKS,
        ),
        (
            "docs/guide/semantics.md",
            r"the most recent `keep_shed` payloads \((\d+) by",
            PipelineConfig().keep_shed,
        ),
    ):
        assert _number(quoted(page, pattern)[1]) == constant, (page, pattern)


def test_simulating_guide_gives_the_percentile_fit_s_tolerance():
    said = quoted(
        "docs/guide/simulating.md", r"number is checked against the fit \((\d+)% tolerance\)"
    )
    assert int(said[1]) / 100 == default(LogNormal.from_quantiles, "rtol")


def test_overload_guide_s_aimd_steps_follow_its_backoff_ratio():
    said = quoted(
        "docs/guide/overload.md",
        r"\((\d+) x ([\d.]+) floored: ([\d, ]+), then the minimum, (\d+)\)",
    )
    ratio = default(AIMD, "backoff_ratio")
    assert float(said[2]) == ratio
    limit, floor, steps = int(said[1]), int(said[4]), []
    while int(limit * ratio) >= floor:
        limit = int(limit * ratio)
        steps.append(limit)
    assert [int(step) for step in said[3].split(",")] == steps, said[0]


def test_twin_guide_gives_the_calibrated_twin_tests_parameters():
    said = quoted(
        "docs/guide/twin.md",
        r"the twin predicts the recorded service's p95 at its rate and at (\d+)% more within"
        r" (\d+)%",
    )
    assert int(said[1]) == round(100 * (WHAT_IF_FACTOR - 1))
    assert int(said[2]) / 100 == AGREEMENT
    said = quoted(
        "docs/guide/twin.md",
        r"a small aiohttp service with (\d+) workers on loopback at (\d+)% busy, `calibrate"
        r" --concurrency (\d+)` reads its CSV, and the twin's p95 at (\d+)% busy",
    )
    assert int(said[1]) == int(said[3]) == LIVE_WORKERS
    assert int(said[2]) / 100 == locust_live.BASELINE_BUSY
    assert int(said[4]) / 100 == locust_live.WHAT_IF_BUSY


def test_simulating_guide_gives_the_largest_run():
    said = quoted("docs/guide/simulating.md", r"At most (10)\*\*(\d+) items in all")
    assert int(said[1]) ** int(said[2]) == MAX_N_ITEMS


def test_planning_guide_s_looks_double_from_the_fewest_replications():
    said = quoted("docs/guide/planning.md", r"replications \(([\d, ]+), \.\.\., (\d+) by default")
    looks = [DEFAULT_MIN_REPLICATIONS]
    while looks[-1] < DEFAULT_MAX_REPLICATIONS:
        looks.append(looks[-1] * 2)
    assert [int(n) for n in said[1].split(",")] == looks[:3] and int(said[2]) == looks[-1]


def test_statistics_guide_gives_the_run_length_precision():
    for pattern in (r"a single run too short for ±(\d+)% as", r"only to worse than ±(\d+)%\."):
        said = quoted("docs/guide/statistics.md", pattern)
        assert int(said[1]) / 100 == default(diagnose, "precision")


def test_the_readme_gives_the_fault_injection_s_examples(monkeypatch):
    monkeypatch.delenv("PIPELINE_FAULT_EXAMPLES", raising=False)
    said = quoted("README.md", r"the fault injection at ([\d,]+) examples")
    assert _number(said[1]) == int(tiers.environment()["PIPELINE_FAULT_EXAMPLES"])


def test_twin_guide_gives_the_ingest_memory_benchmark_s_range():
    said = quoted("docs/guide/twin.md", r"flat from ([\d,]+) to ([\d,]+) records with `--no-twin`")
    counts = [
        _number(row.split("|")[1])
        for row in in_section("The ingestion example's memory against the record count")
        if re.match(r"\| [\d,]+ \|", row)
    ]
    assert (_number(said[1]), _number(said[2])) == (min(counts), max(counts))


def test_workshop_guide_gives_notebook_09_s_partner():
    said = quoted("docs/workshop.md", r"runs against a partner answering in about (\d+) ms")
    source = (REPO / "notebooks" / "09-from-a-real-run-to-its-twin.ipynb").read_text(
        encoding="utf-8"
    )
    median = float(re.search(r"latency_p50_s=([\d.]+)", source)[1])
    assert int(said[1]) / 1000 == median
