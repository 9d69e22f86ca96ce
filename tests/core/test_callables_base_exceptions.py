"""A user's callable that raises a ``BaseException`` which is not an ``Exception``.

The engine calls the user's code in several places besides the handler: the
source, the ``priority`` key and the ``max_wait_s`` function (at admission,
also at a chain's later stage, inside the hand-off of the stage before), the
rate limiter's wait, the ``on_event`` listener and the ``on_expired`` hook.
Whatever such a callable raises that is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``, one of your own) propagates from
``run()`` as itself, never wrapped in ``SourceError`` and never swallowed, and
the report still accounts for every payload taken exactly once.
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline import Chain, Pipeline, PipelineConfig, SourceError, Stage
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once

BAD = 3
ITEMS = range(10)


class Stop(BaseException):
    """A BaseException of the user's own: neither KeyboardInterrupt, SystemExit nor a cancel."""


async def handle(x: int) -> int:
    await asyncio.sleep(1.0)
    return x


def raising_on(bad: int, error: type[BaseException], value: object):
    """A plain function of the payload returning ``value``, raising ``error`` for ``bad``."""

    def function(payload: int) -> object:
        if payload == bad:
            raise error("from the user's callable")
        return value

    return function


def config_with(callable_kind: str, error: type[BaseException]) -> PipelineConfig:
    kwargs = {"priority": raising_on(BAD, error, 0)}
    if callable_kind == "max_wait_s":
        kwargs = {"max_wait_s": raising_on(BAD, error, 100.0)}
    return PipelineConfig(concurrency=2, queue_maxsize=4, drain_timeout_s=None, **kwargs)


def source_raising(error: type[BaseException]):
    for x in ITEMS:
        if x == BAD:
            raise error("from the source")
        yield x


ERRORS = [Stop, GeneratorExit, KeyboardInterrupt, SystemExit]
CALLABLES = ["priority", "max_wait_s", "source"]


def taken(report) -> list[int]:
    """The payloads the run took: all before the one the callable raised for."""
    return list(range(report.offered))


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("callable_kind", CALLABLES)
def test_a_pipeline_raises_it_as_itself_with_every_payload_taken_once(callable_kind, error):
    if callable_kind == "source":
        pipe, source = Pipeline(handle, PipelineConfig(concurrency=2)), source_raising(error)
    else:
        pipe, source = Pipeline(handle, config_with(callable_kind, error)), ITEMS

    with pytest.raises(error) as raised:
        run_virtual(pipe.run(source))
    assert not isinstance(raised.value, SourceError)
    report = pipe.report
    assert pipe.state.value == "closed" and report.offered == BAD
    assert_each_payload_once(report, taken(report))


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("callable_kind", ["priority", "max_wait_s"])
@pytest.mark.parametrize("stage", [0, 1])
def test_a_chain_raises_it_as_itself_from_either_stage(stage, callable_kind, error):
    # At stage 1 the key runs when stage 0's worker hands its output on: that worker must
    # not end silently (the chain used to return normally, one item stranded).
    plain = PipelineConfig(concurrency=2, queue_maxsize=4, drain_timeout_s=None)
    configs = [plain, plain]
    configs[stage] = config_with(callable_kind, error)
    chain = Chain([Stage("first", handle, configs[0]), Stage("second", handle, configs[1])])

    with pytest.raises(error):
        run_virtual(chain.run(ITEMS))
    report = chain.report
    assert chain.state.value == "closed" and report.balanced
    first, second = report.stages["first"], report.stages["second"]
    if stage == 0:
        assert first.offered == BAD
    assert_each_payload_once(first, taken(first))
    # Every output of the first stage entered the second or is stranded, once.
    assert first.handed_on + len(first.stranded) == first.completed
    assert second.offered == first.handed_on
    assert (BAD in first.stranded) == (stage == 1)


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("target", ["pipeline", "chain"])
def test_a_token_estimate_raising_it_stops_the_run_with_the_item_unfinished(target, error):
    from pipeline import RateLimit

    limit = RateLimit(tokens_per_minute=1e6, tokens_per_item=raising_on(BAD, error, 1.0))
    config = PipelineConfig(concurrency=2, rate_limit=limit, drain_timeout_s=None)
    if target == "pipeline":
        runner = Pipeline(handle, config)
    else:
        runner = Chain([Stage("first", handle, PipelineConfig(concurrency=2)),
                        Stage("second", handle, config)])  # fmt: skip
    with pytest.raises(error):
        run_virtual(runner.run(ITEMS))
    report = runner.report if target == "pipeline" else runner.report.stages["second"]
    assert runner.report.balanced and BAD in report.unfinished  # taken, never started
    assert_each_payload_once(report, taken(report))  # items arrive in order, in both
