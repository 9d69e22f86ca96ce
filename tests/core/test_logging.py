"""Structured log events: names, levels and trace ids, and silence unless asked for."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline import Backoff, PermanentError, Pipeline, PipelineConfig, RunReport
from pipeline.sim.vloop import run_virtual

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Task:
    """A payload that carries its own trace id, as the approval example's tasks do."""

    name: str
    trace_id: str


def run_eventful() -> RunReport:
    """One run, on the virtual clock, with a retry, two dead letters and a drain timeout.

    Payloads in admission order (``seq``): ``Task("flaky")`` fails once then succeeds;
    ``Task("bad")`` fails permanently; ``2`` fails every attempt; ``3`` outlasts the drain.
    """
    flaky_calls = 0

    async def handler(payload):
        nonlocal flaky_calls
        if payload == Task("flaky", "trace-flaky"):
            flaky_calls += 1
            if flaky_calls == 1:
                raise RuntimeError("transient")
        elif payload == Task("bad", "trace-bad"):
            raise PermanentError("bad")
        elif payload == 2:
            raise RuntimeError("always")
        elif payload == 3:
            await asyncio.sleep(1_000.0)
        return payload

    config = PipelineConfig(
        concurrency=4, max_attempts=2, backoff=Backoff.constant(1.0), drain_timeout_s=10.0
    )
    source = [Task("flaky", "trace-flaky"), Task("bad", "trace-bad"), 2, 3]
    return run_virtual(Pipeline(handler, config).run(source))


def test_a_run_logs_each_event_with_its_trace_id(caplog):
    caplog.set_level(logging.DEBUG, logger="pipeline")
    report = run_eventful()
    assert report.completed == 1 and len(report.dead_letters) == 2 and report.unfinished == [3]

    records = [r for r in caplog.records if r.name == "pipeline"]

    def logged(message):
        return [r for r in records if r.getMessage() == message]

    enqueued = logged("pipeline.enqueued")
    assert {r.levelno for r in enqueued} == {logging.DEBUG}
    # A payload's own trace_id attribute when it has one, else its admission number.
    assert [r.trace_id for r in enqueued] == ["trace-flaky", "trace-bad", "seq-2", "seq-3"]

    retried = logged("pipeline.retry_scheduled")
    assert {r.levelno for r in retried} == {logging.INFO}
    assert sorted(r.trace_id for r in retried) == ["seq-2", "trace-flaky"]
    assert all(r.attempt == 1 and r.delay_s == 1.0 for r in retried)

    dead = logged("pipeline.dead_lettered")
    assert {r.levelno for r in dead} == {logging.WARNING}
    assert {r.trace_id: r.reason for r in dead} == {
        "trace-bad": "not_retryable",
        "seq-2": "max_attempts",
    }

    (timeout,) = logged("pipeline.drain_timeout")
    assert timeout.levelno == logging.WARNING
    assert timeout.left == 1 and timeout.drain_timeout_s == 10.0
    # Every record names its event in a field too, for structured handlers.
    assert all(r.event == r.getMessage() for r in records)


def test_the_package_adds_only_a_null_handler():
    handlers = logging.getLogger("pipeline").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_logging_is_silent_by_default():
    # A fresh interpreter with logging unconfigured: without the package's NullHandler,
    # the drain-timeout warning would reach stderr through logging.lastResort. (pytest's
    # own log handlers make this untestable in-process.)
    code = (
        "from tests.core.test_logging import run_eventful\n"
        "report = run_eventful()\n"
        "assert len(report.dead_letters) == 2 and report.unfinished == [3]\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == ""


def test_dead_letters_are_logged_when_only_warnings_are_enabled(caplog):
    caplog.set_level(logging.WARNING, logger="pipeline")
    run_eventful()
    names = [record.getMessage() for record in caplog.records]
    assert names.count("pipeline.dead_lettered") == 2
    assert "pipeline.retry_scheduled" not in names
