"""pipeline.metrics: a real-time run's metrics over a real HTTP socket on 127.0.0.1.

The names, types and label sets are checked against DESIGN.md's contract
(written out here, not read from the package's table); the counters are
checked against the run report after randomized runs with failures, attempt
timeouts, retries, dead letters and shedding, for a pipeline and for a chain.
The real Prometheus server's test is in tests/core/test_metrics_prometheus.py.
"""

from __future__ import annotations

import asyncio
import errno
import random
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import pipeline.metrics
from pipeline import Backoff, Chain, Pipeline, PipelineConfig, Stage
from pipeline.events import EventKind

# DESIGN.md, "Contract additions (third wave)": family -> (type, labels beyond pipeline and stage).
CONTRACT = {
    "pipeline_items_offered": ("counter", set()),
    "pipeline_items": ("counter", {"outcome"}),
    "pipeline_attempts": ("counter", {"result"}),
    "pipeline_retries": ("counter", set()),
    "pipeline_producer_blocked_seconds": ("counter", set()),
    "pipeline_retries_denied": ("counter", set()),
    "pipeline_breaker_calls_refused": ("counter", set()),
    "pipeline_breaker_state": ("gauge", {"state"}),
    "pipeline_queue_depth": ("gauge", set()),
    "pipeline_queue_capacity": ("gauge", set()),
    "pipeline_workers": ("gauge", set()),
    "pipeline_workers_busy": ("gauge", set()),
    "pipeline_oldest_item_age_seconds": ("gauge", set()),
    # fourth wave: the overload controls
    "pipeline_concurrency_limit": ("gauge", set()),
    "pipeline_codel_shed": ("counter", set()),
    # fourth wave: the autoscaler (pipeline_workers_desired has samples only with one)
    "pipeline_workers_starting": ("gauge", set()),
    "pipeline_workers_desired": ("gauge", set()),
    "pipeline_scale_events": ("counter", set()),
    "pipeline_worker_seconds": ("counter", set()),
    "pipeline_wait_seconds": ("histogram", set()),
    "pipeline_attempt_duration_seconds": ("histogram", set()),
    "pipeline_latency_seconds": ("histogram", set()),
}
OUTCOMES = {"completed", "dead_lettered", "shed", "unfinished", "expired"}
RESULTS = {"ok", "failed", "timeout"}
FAST = Backoff(kind="constant", base_s=0.001)


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample at ``url``: (sample name, its labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def faulty(rng: random.Random, fail: float, slow: float):
    """A handler that fails with probability ``fail`` and overruns a 20 ms timeout with ``slow``."""
    draws = {}

    async def handle(x: int) -> int:
        draw = draws.setdefault(x, [])
        u = rng.random()
        draw.append(u)
        if u < slow:
            await asyncio.sleep(0.2)  # the attempt timeout (20 ms) cancels it
        await asyncio.sleep(0)
        if u > 1 - fail:
            raise ValueError("boom")
        return x

    return handle


def expect_counters(samples, report, cut: int = 0, **labels: str) -> None:
    """The scraped counters (items by outcome, attempts by result) are the report's.

    ``cut``: attempts the close cancelled (running when the drain timed out), which ended
    in no result.
    """
    stats = report.statistics
    assert value(samples, "pipeline_items_offered_total", **labels) == report.offered
    items = {
        "completed": report.completed,
        "dead_lettered": len(report.dead_letters),
        "shed": stats.shed,
        "unfinished": len(report.unfinished),
        "expired": len(report.expired),
    }
    for outcome, count in items.items():
        assert value(samples, "pipeline_items_total", outcome=outcome, **labels) == count, outcome
    attempts = [
        value(samples, "pipeline_attempts_total", result=r, **labels) for r in sorted(RESULTS)
    ]
    assert sum(attempts) == report.attempts - cut
    assert value(samples, "pipeline_attempts_total", result="ok", **labels) == report.completed
    assert value(samples, "pipeline_retries_total", **labels) == stats.retried
    blocked = value(samples, "pipeline_producer_blocked_seconds_total", **labels)
    assert blocked == pytest.approx(stats.producer_blocked_s, abs=1e-9)


def expect_pipeline(samples, report, **labels: str) -> None:
    """The scraped counters are the report's, and the histograms saw every attempt."""
    expect_counters(samples, report, **labels)
    assert value(samples, "pipeline_latency_seconds_count", **labels) == report.completed
    assert value(samples, "pipeline_attempt_duration_seconds_count", **labels) == report.attempts
    assert value(samples, "pipeline_queue_depth", **labels) == 0
    assert value(samples, "pipeline_workers_busy", **labels) == 0
    assert value(samples, "pipeline_oldest_item_age_seconds", **labels) == 0


def test_names_types_and_label_sets_are_the_contract():
    async def run():
        pipe = Pipeline(lambda x: x, PipelineConfig(concurrency=2), name="contract")
        with pipeline.metrics.serve(pipe) as server:
            await pipe.run(range(5))
            with urllib.request.urlopen(server.url, timeout=10) as response:
                return response.read().decode()

    text = asyncio.run(run())
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert {name: family.type for name, family in families.items()} == {
        name: kind for name, (kind, _) in CONTRACT.items()
    }
    for name, (kind, extra) in CONTRACT.items():
        for sample in families[name].samples:
            labels = set(sample.labels) - {"le"} if kind == "histogram" else set(sample.labels)
            assert labels == {"pipeline", *extra}, sample
            assert sample.labels["pipeline"] == "contract"
    assert {s.labels["outcome"] for s in families["pipeline_items"].samples} == OUTCOMES
    assert {s.labels["result"] for s in families["pipeline_attempts"].samples} == RESULTS
    assert "# HELP pipeline_wait_seconds Seconds" in text  # base units, said in the help


@pytest.mark.parametrize("seed", range(6))
def test_counters_equal_the_report_after_a_randomized_faulty_run(seed):
    rng = random.Random(seed)
    config = PipelineConfig(
        concurrency=rng.randint(1, 4),
        queue_maxsize=rng.randint(1, 8),
        on_full=rng.choice(["block", "reject"]),
        max_attempts=rng.randint(1, 3),
        backoff=FAST,
        attempt_timeout_s=0.02,
    )
    handler = faulty(random.Random(seed + 100), fail=rng.uniform(0, 0.4), slow=0.05)

    async def run():
        pipe = Pipeline(handler, config, name=f"run{seed}", rng=random.Random(seed))
        server = pipeline.metrics.serve(pipe)
        try:
            report = await pipe.run(range(rng.randint(20, 60)))
            return report, await asyncio.to_thread(scrape, server.url)
        finally:
            server.close()

    report, samples = asyncio.run(run())
    expect_pipeline(samples, report, pipeline=f"run{seed}")
    assert report.offered == report.completed + len(report.dead_letters) + report.statistics.shed
    # Every attempt that overran the timeout counted as one, and no timeout passed as a failure.
    timeouts = sum(
        1 for letter in report.dead_letters for e in letter.errors if e.type == "TimeoutError"
    )
    assert value(samples, "pipeline_attempts_total", pipeline=f"run{seed}", result="timeout") >= (
        timeouts
    )


def test_expired_items_are_counted_and_the_wait_of_those_never_started_is_not():
    async def run():
        release = asyncio.Event()

        async def hold(x: int) -> int:
            await release.wait()
            return x

        # Two items queue behind a held one and expire after 20 ms, with the worker busy.
        config = PipelineConfig(concurrency=1, queue_maxsize=None, max_wait_s=0.02)
        pipe = Pipeline(hold, config, name="deadlines")
        with pipeline.metrics.serve(pipe) as server:
            task = asyncio.create_task(pipe.run(range(3)))
            while pipe.statistics().expired < 2:
                await asyncio.sleep(0.005)
            during = await asyncio.to_thread(scrape, server.url)
            release.set()
            report = await task
            after = await asyncio.to_thread(scrape, server.url)
        return report, during, after

    report, during, after = asyncio.run(run())
    assert list(report.expired) == [1, 2] and report.completed == 1
    assert value(during, "pipeline_items_total", pipeline="deadlines", outcome="expired") == 2
    assert value(during, "pipeline_queue_depth", pipeline="deadlines") == 0
    expect_pipeline(after, report, pipeline="deadlines")
    assert value(after, "pipeline_wait_seconds_count", pipeline="deadlines") == 1


def test_a_chain_labels_each_stage_and_each_stage_equals_its_report():
    rng = random.Random(7)

    async def split(x: int) -> list[int]:
        await asyncio.sleep(0)
        return [x, x + 1000]

    stages = [
        Stage("split", split, PipelineConfig(concurrency=2, queue_maxsize=4), fan_out=True),
        Stage(
            "check",
            faulty(rng, fail=0.3, slow=0.05),
            PipelineConfig(concurrency=3, queue_maxsize=2, backoff=FAST, attempt_timeout_s=0.02),
        ),
    ]
    chain = Chain(stages, name="ingest")

    async def run():
        server = pipeline.metrics.serve(chain)
        try:
            before = await asyncio.to_thread(scrape, server.url)
            report = await chain.run(range(30))
            return before, report, await asyncio.to_thread(scrape, server.url)
        finally:
            server.close()

    before, report, samples = asyncio.run(run())
    # Before the run every stage's series exist, at zero.
    assert value(before, "pipeline_items_offered_total", pipeline="ingest", stage="check") == 0
    assert value(before, "pipeline_workers", pipeline="ingest", stage="check") == 3
    for name, stage_report in report.stages.items():
        expect_pipeline(samples, stage_report, pipeline="ingest", stage=name)
    assert value(samples, "pipeline_items_offered_total", pipeline="ingest", stage="check") == 60


async def run_served(target, n: int, attach: str):
    """Run ``target`` on ``range(n)``, served from ``attach`` ("before" or "after") the run."""
    server = pipeline.metrics.serve(target) if attach == "before" else None
    report = await target.run(range(n))
    server = server or pipeline.metrics.serve(target)
    with server:
        return report, await asyncio.to_thread(scrape, server.url)


@pytest.mark.parametrize("attach", ["before", "after"])
def test_every_outcome_counter_equals_the_report_after_a_drain_timeout(attach):
    # Items 0-1 fail once (0 by a timeout of its own) and complete; 2 is dead-lettered;
    # 3-7 complete (each long enough for the 1 ms retries to come back first); the two
    # workers then hold 8 and 9 past the drain timeout, and 10-13 are still queued: 6
    # unfinished, whether the server was attached before the run or only after it.
    seen: dict[int, int] = {}

    async def handle(x: int) -> int:
        if x < 3 and seen.setdefault(x, 0) < (9 if x == 2 else 1):
            seen[x] += 1
            raise TimeoutError("upstream") if x == 0 else ValueError("boom")
        await asyncio.sleep(60 if x >= 8 else 0.01)
        return x

    config = PipelineConfig(
        concurrency=2, queue_maxsize=None, max_attempts=2, backoff=FAST, drain_timeout_s=0.2
    )

    report, samples = asyncio.run(run_served(Pipeline(handle, config, name="cut"), 14, attach))
    assert report.unfinished == [8, 9, 10, 11, 12, 13] and len(report.dead_letters) == 1
    assert report.completed == 7
    expect_counters(samples, report, cut=2, pipeline="cut")
    assert value(samples, "pipeline_attempts_total", pipeline="cut", result="timeout") == 1
    assert value(samples, "pipeline_attempts_total", pipeline="cut", result="failed") == 3


@pytest.mark.parametrize("attach", ["before", "after"])
def test_every_stage_counter_equals_its_report_after_a_drain_timeout(attach):
    async def slow(x: int) -> int:
        if x >= 2:
            await asyncio.sleep(60)
        return x

    chain = Chain(
        [
            Stage("read", lambda x: x, PipelineConfig(concurrency=1)),
            Stage("hold", slow, PipelineConfig(concurrency=2, queue_maxsize=None)),
        ],
        drain_timeout_s=0.2,
        name="held",
    )

    report, samples = asyncio.run(run_served(chain, 8, attach))
    assert len(report.stages["hold"].unfinished) == 6
    expect_counters(samples, report.stages["read"], pipeline="held", stage="read")
    expect_counters(samples, report.stages["hold"], cut=2, pipeline="held", stage="hold")


def test_gauges_while_an_item_is_held():
    async def run():
        release = asyncio.Event()

        async def hold(x: int) -> int:
            await release.wait()
            return x

        pipe = Pipeline(hold, PipelineConfig(concurrency=1, queue_maxsize=None), name="held")
        with pipeline.metrics.serve(pipe) as server:
            task = asyncio.create_task(pipe.run(range(3)))
            while pipe.statistics().workers_busy == 0:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.01)
            samples = await asyncio.to_thread(scrape, server.url)
            release.set()
            await task
        return samples

    samples = asyncio.run(run())
    assert value(samples, "pipeline_workers_busy", pipeline="held") == 1
    assert value(samples, "pipeline_queue_depth", pipeline="held") == 2
    assert value(samples, "pipeline_queue_capacity", pipeline="held") == float("inf")
    assert value(samples, "pipeline_oldest_item_age_seconds", pipeline="held") > 0
    assert value(samples, "pipeline_wait_seconds_count", pipeline="held") == 1


def test_a_raising_listener_loses_no_count():
    # The user's listener raises at every event; the exporter's, attached beside it, still
    # sees them all, and the engine counts the errors and loses no item.
    def broken(kind, now_s, item):
        raise RuntimeError("listener bug")

    async def run():
        pipe = Pipeline(
            faulty(random.Random(3), fail=0.3, slow=0.0),
            PipelineConfig(concurrency=2, backoff=FAST),
            on_event=broken,
            name="noisy",
        )
        with pipeline.metrics.serve(pipe) as server:
            report = await pipe.run(range(40))
            return report, await asyncio.to_thread(scrape, server.url)

    report, samples = asyncio.run(run())
    expect_pipeline(samples, report, pipeline="noisy")
    assert report.statistics.listener_errors > 0
    assert report.completed + len(report.dead_letters) == 40


def test_an_exporter_listener_that_raises_is_isolated_too():
    # A second listener attached after the exporter's fails: the exporter keeps counting.
    async def run():
        pipe = Pipeline(lambda x: x, PipelineConfig(concurrency=2), name="iso")
        server = pipeline.metrics.serve(pipe)
        pipe.add_listener(lambda kind, now_s, item: 1 / 0)
        try:
            report = await pipe.run(range(25))
            return report, await asyncio.to_thread(scrape, server.url)
        finally:
            server.close()

    report, samples = asyncio.run(run())
    expect_pipeline(samples, report, pipeline="iso")
    assert report.statistics.listener_errors > 0


def test_loopback_by_default_and_close_twice_frees_the_port():
    pipe = Pipeline(lambda x: x, name="lo")
    server = pipeline.metrics.serve(pipe)
    assert server.host == "127.0.0.1"
    assert server.url == f"http://127.0.0.1:{server.port}/metrics"
    assert server._httpd.socket.getsockname()[0] == "127.0.0.1"
    assert value(scrape(server.url), "pipeline_items_offered_total", pipeline="lo") == 0
    server.close()
    server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=5)
    # The port is free again: a new server takes it.
    pipeline.metrics.serve(pipe, port=server.port).close()


def test_a_port_in_use_is_one_line_naming_host_and_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        pipe = Pipeline(lambda x: x, name="busy")
        with pytest.raises(
            OSError, match=rf"^metrics server cannot listen on 127\.0\.0\.1:{port}: "
        ) as caught:
            pipeline.metrics.serve(pipe, port=port)
        assert pipe._attached == ()  # nothing left attached by the failed serve
    assert caught.value.errno == errno.EADDRINUSE
    assert "\n" not in str(caught.value)


def test_several_pipelines_in_one_process():
    async def run():
        a = Pipeline(lambda x: x, name="a")
        b = Pipeline(lambda x: -x, name="b")
        c = Pipeline(lambda x: x, name="c")
        both = pipeline.metrics.serve([a, b])
        alone = pipeline.metrics.serve(c)
        try:
            ra, rb, rc = await asyncio.gather(a.run(range(5)), b.run(range(7)), c.run(range(2)))
            return ra, rb, rc, scrape(both.url), scrape(alone.url)
        finally:
            both.close()
            alone.close()

    ra, rb, rc, both, alone = asyncio.run(run())
    expect_pipeline(both, ra, pipeline="a")
    expect_pipeline(both, rb, pipeline="b")
    expect_pipeline(alone, rc, pipeline="c")
    assert not any(dict(labels).get("pipeline") == "c" for _, labels in both)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": -1}, "port must be an integer from 0 to 65535, got -1"),
        ({"port": 70000}, "port must be an integer from 0 to 65535, got 70000"),
        ({"port": True}, "port must be an integer from 0 to 65535, got True"),
        ({"port": "80"}, "port must be an integer from 0 to 65535, got '80'"),
        ({"host": ""}, "host must be a non-empty address string, got ''"),
    ],
)
def test_bad_arguments_are_one_line(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        pipeline.metrics.serve(Pipeline(lambda x: x), **kwargs)


def test_bad_targets():
    with pytest.raises(TypeError, match="target must be a Pipeline, a Chain or a list of them"):
        pipeline.metrics.serve("pipe")
    with pytest.raises(TypeError, match="target must be a Pipeline, a Chain or a list of them"):
        pipeline.metrics.serve([])
    same = [Pipeline(lambda x: x, name="x"), Pipeline(lambda x: x, name="x")]
    with pytest.raises(ValueError, match=r"targets must have unique names .*\['x'\]"):
        pipeline.metrics.serve(same)


def test_without_the_extra_it_is_one_missing_extra_naming_metrics():
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "try:\n"
        "    import pipeline.metrics\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "MissingExtra pipeline.metrics needs prometheus_client: pip install 'pipeline-lab[metrics]'"
    )


def test_the_shared_names_import_without_prometheus_client():
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "import pipeline._metric_names as n\n"
        "print(len(n.METRICS))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(len(CONTRACT))


def test_close_detaches_from_a_pipeline_and_a_chain():
    pipe = Pipeline(lambda x: x, name="p")
    chain = Chain([Stage("one", lambda x: x), Stage("two", lambda x: x)], name="c")
    server = pipeline.metrics.serve([pipe, chain])
    assert len(pipe._attached) == 1 and len(chain._observers) == 1
    server.close()
    assert pipe._attached == () and pipe._on_event is None and chain._observers == []

    async def run():
        return await chain.run(range(3))

    assert asyncio.run(run()).stages["two"].completed == 3
    assert all(stage._attached == () for stage in chain._pipes)


def test_a_batching_stage_counts_batches_as_its_statistics_do():
    chain = Chain(
        [
            Stage("read", lambda x: x, PipelineConfig(concurrency=2)),
            Stage("write", lambda batch: list(batch), PipelineConfig(concurrency=1), batch_size=4),
        ],
        name="batched",
    )

    async def run():
        with pipeline.metrics.serve(chain) as server:
            report = await chain.run(range(10))
            return report, await asyncio.to_thread(scrape, server.url)

    report, samples = asyncio.run(run())
    write = report.stages["write"].statistics
    labels = {"pipeline": "batched", "stage": "write"}
    assert value(samples, "pipeline_items_total", outcome="completed", **labels) == write.completed
    assert value(samples, "pipeline_latency_seconds_count", **labels) == write.completed
    assert write.completed == report.stages["write"].batches == 3
    assert write.listener_errors == 0


def test_scrapes_racing_the_run_change_nothing():
    # A thread scrapes as fast as it can while the loop changes every collection it reads.
    async def run():
        pipe = Pipeline(
            faulty(random.Random(5), fail=0.3, slow=0.0),
            PipelineConfig(concurrency=4, queue_maxsize=5, backoff=FAST),
            name="race",
        )
        with pipeline.metrics.serve(pipe) as server:
            stop = threading.Event()
            seen: list[float] = []

            def hammer() -> None:
                while not stop.is_set():
                    seen.append(
                        value(scrape(server.url), "pipeline_items_offered_total", pipeline="race")
                    )

            thread = threading.Thread(target=hammer)
            thread.start()
            try:
                report = await pipe.run(range(300))
            finally:
                stop.set()
                await asyncio.to_thread(thread.join)
            return report, seen, await asyncio.to_thread(scrape, server.url)

    report, seen, samples = asyncio.run(run())
    expect_pipeline(samples, report, pipeline="race")
    assert seen == sorted(seen)  # a counter never goes back
    assert report.statistics.listener_errors == 0


def test_an_exporter_is_called_only_for_the_kinds_it_attached_for():
    """A mapping attaches one listener per kind: the engine calls nothing for the others."""
    everything, some = [], []

    async def flaky(x):
        await asyncio.sleep(0)
        if x % 3 == 0 and flaky.calls.setdefault(x, 0) == 0:
            flaky.calls[x] = 1
            raise ValueError("once")

    flaky.calls = {}

    def record(kind, now_s, item):
        some.append(kind)

    def broken(kind, now_s, item):
        raise RuntimeError("exporter bug")

    pipe = Pipeline(
        flaky,
        PipelineConfig(concurrency=2, queue_maxsize=1, backoff=FAST),
        on_event=lambda kind, now_s, item: everything.append(kind),
    )
    wanted = {EventKind.STARTED: record, EventKind.READMITTED: record}
    detach = pipe.add_listener(wanted)
    pipe.add_listener({EventKind.COMPLETED: broken})
    report = asyncio.run(pipe.run(range(9)))
    assert report.completed == 9
    assert set(everything) >= {EventKind.ADMITTED, EventKind.PRODUCER_BLOCKED}
    assert some == [kind for kind in everything if kind in wanted]
    assert some.count(EventKind.STARTED) == report.attempts == 12
    assert report.statistics.listener_errors == 9  # every COMPLETED, isolated
    detach()
    detach()
    assert len(pipe._attached) == 1 and pipe._on_started is pipe._user_listener
