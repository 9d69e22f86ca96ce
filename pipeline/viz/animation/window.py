"""Which instants an animation shows: a window of a run, at most so many frames.

:class:`Window` checks the arguments of :class:`~.frames.Timeline` (one line
naming the bad one) and picks the frames' times inside ``[start_s, end_s]``:
the run's event times (a frame per change), or a fixed step (``every_s``),
always starting with the state holding at ``start_s``. How many of them are
kept, and whether the last frame is the run's end, is the timeline's to say.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["Window"]


class Window:
    """A checked window of a run (see the module).

    Args:
        start_s, end_s, max_frames, every_s: as :class:`~.frames.Timeline` takes them.
        run_end_s: the run's end, seconds.

    Attributes:
        start_s: the window's start, seconds.
        end_s: its end, seconds (the run's end when not given).
        max_frames: the most frames, an int.
        every_s: the step between frames, seconds, or None (a frame per event).

    Raises:
        TypeError: ``max_frames`` is not an int, or a bound is not a number.
        ValueError: a bound is not finite and >= 0, ``end_s`` is not after
            ``start_s``, ``start_s`` is after the run's end, ``max_frames`` < 1, or
            ``every_s`` is not None or a finite number of seconds > 0.
    """

    def __init__(
        self,
        start_s: Any,
        end_s: Any,
        max_frames: Any,
        every_s: Any,
        run_end_s: float,
    ) -> None:
        if isinstance(max_frames, bool) or not isinstance(max_frames, numbers.Integral):
            raise TypeError(f"max_frames must be an int >= 1, got {max_frames!r}")
        if max_frames < 1:
            raise ValueError(f"max_frames must be an int >= 1, got {max_frames!r}")
        self.max_frames = int(max_frames)
        self.every_s = _step(every_s)
        start = _bound("start_s", start_s)
        end = run_end_s if end_s is None else _bound("end_s", end_s)
        if start > run_end_s:
            raise ValueError(
                f"start_s must be at most the run's end ({run_end_s:g} s), got {start_s!r}"
            )
        if not end > start and not (end_s is None and end == start):
            raise ValueError(f"end_s must be after start_s ({start:g} s), got {end_s!r}")
        self.start_s, self.end_s, self._run_end_s = start, end, run_end_s

    def events(self, times_s: np.ndarray) -> np.ndarray:
        """The distinct ``times_s`` inside the window, after the window's start."""
        events = np.unique(times_s)
        return self._from_start(events[(events >= self.start_s) & (events <= self.end_s)])

    def steps(self) -> np.ndarray:
        """``start_s``, ``start_s + every_s``, ... up to the window's end, and the run's
        end after them when the window runs to it; never many more than ``max_frames``,
        however long the window."""
        step = self.every_s
        assert step is not None
        shown = min(math.floor((self.end_s - self.start_s) / step), self.max_frames) + 1
        times = self.start_s + step * np.arange(shown)
        if self.end_s >= self._run_end_s and times[-1] < self._run_end_s:
            times = np.append(times, self._run_end_s)  # the run's outcome, as without a step
        return times

    def _from_start(self, times: np.ndarray) -> np.ndarray:
        if not len(times) or times[0] > self.start_s:
            times = np.concatenate([[self.start_s], times])  # the state holding at start_s
        return times


def _step(every_s: Any) -> float | None:
    if every_s is None:
        return None
    if (
        isinstance(every_s, bool)
        or not isinstance(every_s, numbers.Real)
        or not (math.isfinite(every_s) and every_s > 0)
    ):
        raise ValueError(
            "every_s must be None (a frame per event) or a finite number of seconds > 0, "
            f"got {every_s!r}"
        )
    return float(every_s)


def _bound(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds >= 0, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return value
