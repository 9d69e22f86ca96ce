"""The recorder's columns: what its listener appends is what ``arrays()`` gives."""

from __future__ import annotations

from array import array

import numpy as np

from pipeline.events import EventKind
from pipeline.items import WorkItem
from pipeline.sim.running.recorder import Recorder


def _log(recorder: Recorder, kind: EventKind, now_s: float, item: object) -> None:
    recorder.listeners()[kind](kind, now_s, item)


def test_arrays_follow_events_logged_after_a_first_read():
    recorder = Recorder()
    _log(recorder, EventKind.ADMITTED, 1.5, WorkItem(7, 0, 1.5))
    kinds, times, ids = recorder.arrays()
    assert kinds.tolist() == [EventKind.ADMITTED] and times.tolist() == [1.5]
    assert ids.tolist() == [7] and (times.dtype, ids.dtype) == (np.float64, np.int64)
    del kinds  # a view of the bytearray: it must not pin it against the next append
    _log(recorder, EventKind.INTAKE_CLOSED, 2.0, None)
    _log(recorder, EventKind.SHED, 2.5, 9)
    kinds, times, ids = recorder.arrays()
    assert kinds.tolist() == [EventKind.ADMITTED, EventKind.INTAKE_CLOSED, EventKind.SHED]
    assert times.tolist() == [1.5, 2.0, 2.5] and ids.tolist() == [7, -1, 9]
    assert recorder.arrays()[1] is times  # read again with nothing new: not converted again


def test_an_empty_log_gives_empty_typed_columns():
    kinds, times, ids = Recorder().arrays()
    assert (len(kinds), len(times), len(ids)) == (0, 0, 0)
    assert (kinds.dtype, times.dtype, ids.dtype) == (np.int8, np.float64, np.int64)


def test_columns_handed_over_as_arrays_are_read_as_they_are():
    # The kernel's event path hands its log over as numpy arrays or array.array.
    for make in (np.asarray, lambda values: array("d", values)):
        recorder = Recorder()
        recorder.kinds = np.array([EventKind.STARTED, EventKind.COMPLETED], np.int8)
        recorder.times = make([0.25, 1.0])
        recorder.ids = np.array([3, 3], np.int64)
        kinds, times, ids = recorder.arrays()
        assert kinds.tolist() == [EventKind.STARTED, EventKind.COMPLETED]
        assert times.tolist() == [0.25, 1.0] and ids.tolist() == [3, 3]
