"""``ServiceTrace``: given service times, one per item, for replaying a recorded run exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._validate import FLOAT_MAX, real

__all__ = ["ServiceTrace"]


@dataclass(frozen=True)
class ServiceTrace:
    """Given service times, one per item: every attempt of item *i* takes ``times_s[i]``.

    Used to replay a recorded trace exactly.
    """

    times_s: tuple[float, ...]

    def __post_init__(self) -> None:
        times = tuple(
            # Plain floats in range (nearly every trace) skip the general check.
            value
            if type(value) is float and 0 <= value <= FLOAT_MAX
            else real(f"service time of item {index}", value, "seconds", at_least=0)
            for index, value in enumerate(self.times_s)
        )
        object.__setattr__(self, "times_s", times)

    def __repr__(self) -> str:
        return f"ServiceTrace(<{len(self.times_s)} service times>)"

    @property
    def mean(self) -> float:
        """Mean service time, seconds."""
        return float(np.mean(self.times_s)) if self.times_s else 0.0
