"""``LoggedAttempts``: an event log's attempt log, paired only when a column is read.

The kernel's event path hands one over so that a caller of the summary alone never
sorts the log; every column must still be exactly what :func:`attempt_log` gives,
and the result must pickle (replications travel between processes).
"""

import pickle
from dataclasses import fields

import numpy as np

from pipeline.sim import simulate
from pipeline.sim.running.recorder import AttemptLog, LoggedAttempts, Recorder, attempt_log
from tests.sim.running.test_long_run_memory import SCENARIOS

SCENARIO = SCENARIOS["events: failures, dead letters, retries"]


def _same(a, b) -> None:
    # Every field, so that a field added to AttemptLog is read through the pairing too.
    for name in [column.name for column in fields(AttemptLog)]:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), name)


def _log() -> Recorder:
    """The asyncio engine's event log of a run with retries and dead letters."""
    from pipeline.sim.running.single import run_engine
    from pipeline.sim.vloop import run_virtual

    return run_virtual(run_engine(SCENARIO, 0))[2]


def test_pairs_on_first_read_as_attempt_log_does():
    recorder = _log()
    lazy = LoggedAttempts(*recorder.arrays())
    assert "_paired" not in vars(lazy)  # nothing paired yet
    _same(lazy, attempt_log(recorder))
    assert "_events" not in vars(lazy)  # the log is let go once paired


def test_pickles_before_and_after_pairing():
    recorder = _log()
    want = attempt_log(recorder)
    lazy = LoggedAttempts(*recorder.arrays())
    _same(pickle.loads(pickle.dumps(lazy)), want)
    _same(lazy, want)
    _same(pickle.loads(pickle.dumps(lazy)), want)  # paired by now


def test_the_kernels_event_path_gives_the_engines_attempts():
    kernel = simulate(SCENARIO, engine="kernel").columns.attempt_log
    assert isinstance(kernel, LoggedAttempts)
    _same(kernel, simulate(SCENARIO, engine="asyncio").columns.attempt_log)
