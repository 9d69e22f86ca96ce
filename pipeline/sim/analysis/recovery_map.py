"""``recovery_map()``: which faults a system recovers from, and which leave it stuck.

A metastable system recovers from a short or shallow fault and stays stuck
after a slightly longer or deeper one (Huang et al., OSDI 2022: an 80% CPU cut
for 10 s stuck, for 9 s recovered). The map runs one scenario under a grid of
faults -- every ``factor`` x every ``duration`` of one fault kind, placed at
the fault's ``at_s`` -- ``replications`` times each (a :func:`~pipeline.sim.sweep`,
so in parallel, on any executor, on common random numbers: replication *r* of
every cell sees the same traffic), and judges each run by the recovery rule of
:mod:`pipeline.sim.running.recovery`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._validate import integer, real, show
from ..stats.proportions import proportion_ci
from ..workloads.faults import CapacityDrop, Fault, LoadSpike
from ..workloads.scenario import Scenario
from .sweep import sweep

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

__all__ = ["MAP_COLUMNS", "recovery_map"]

MAP_COLUMNS = (
    "factor",
    "duration_s",
    "replications",
    "judged",
    "stuck",
    "stuck_fraction",
    "stuck_low",
    "stuck_high",
    "recovery_s_mean",
)
"""The columns of :func:`recovery_map`'s frame, in order."""


def _values(name: str, values: object, unit: str, **bounds: float) -> list[float]:
    """``values`` as a non-empty list of checked floats (one message naming the bad one)."""
    if isinstance(values, str | bytes):
        raise TypeError(f"{name} must be a sequence of numbers ({unit}), got {show(values)}")
    try:
        listed = list(values)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
            f"{name} must be a sequence of numbers ({unit}), got {show(values)}"
        ) from None
    if not listed:
        raise ValueError(f"{name} must hold at least one value ({unit}), got none")
    return [real(f"{name}[{i}]", v, unit, **bounds) for i, v in enumerate(listed)]


def _judged(value: Any) -> bool | None:
    """A run's ``recovered`` as the frame holds it: True, False, or None (not judged)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


def recovery_map(
    scenario: Scenario,
    *,
    fault: Fault,
    factors: Sequence[float],
    durations: Sequence[float],
    replications: int = 20,
    seed: int | None = None,
    engine: str = "auto",
    processes: int | None = None,
    executor: Executor | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Stuck fraction, with a 95% Wilson interval, for every (factor, duration) of a fault.

    Args:
        scenario: the system (with a :class:`~pipeline.sim.Downstream` for a
            :class:`~pipeline.sim.CapacityDrop`), its own faults left empty.
        fault: the fault whose ``at_s`` (and kind) every cell uses; its own
            ``factor`` and ``for_s`` are replaced by each cell's.
        factors: the fault's factors to try (each > 0).
        durations: its lengths to try, seconds (each > 0).
        replications: runs per cell (>= 1).
        seed: the runs' seed (default: the scenario's).
        engine, processes, executor, progress: as for :func:`~pipeline.sim.sweep`
            (``engine``: ``"auto"``, ``"asyncio"`` or ``"kernel"``).

    Returns:
        One row per (factor, duration), factors outermost, with the columns
        :data:`MAP_COLUMNS`: ``replications``; ``judged``, the runs the rule
        could judge (``recovered`` not None: the traffic must outlast the fault
        by a whole 10 s window); ``stuck``, those not recovered; ``stuck_fraction``
        = stuck / judged with ``stuck_low`` and ``stuck_high`` its 95% Wilson
        interval (:func:`~pipeline.sim.stats.proportions.proportion_ci`; NaN when
        no run was judged); ``recovery_s_mean``, the mean ``recovery_s`` of the
        runs that recovered (NaN when none did).

    Raises:
        TypeError: ``scenario`` or ``fault`` of the wrong type, or a bad sequence.
        ValueError: a scenario with faults of its own, a bad factor, duration,
            ``replications``, ``seed`` or ``engine``, or what :func:`sweep` refuses.

    Example:
        >>> recovery_map(base, fault=CapacityDrop(at_s=60, for_s=10, factor=0.2),
        ...              factors=[0.2, 0.22], durations=[9, 10], replications=20)
    """
    import pandas as pd

    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {show(scenario)}")
    if type(fault) not in (CapacityDrop, LoadSpike):
        raise TypeError(f"fault must be a CapacityDrop or a LoadSpike, got {show(fault)}")
    if scenario.faults:
        raise ValueError(
            f"scenario has faults of its own ({list(scenario.faults)!r}); allowed: none "
            "(the map places one fault per cell)"
        )
    factor_values = _values("factors", factors, "fault multipliers", above=0)
    duration_values = _values("durations", durations, "seconds", above=0)
    replications = integer("replications", replications, "runs per cell", at_least=1)
    if seed is not None:
        scenario = scenario.replace(seed=integer("seed", seed, "the runs' seed"))
    cells = [
        (factor, length, dataclasses.replace(fault, factor=factor, for_s=length))
        for factor in factor_values
        for length in duration_values
    ]
    frame = sweep(
        scenario,
        {"faults": [(cell,) for _, _, cell in cells]},
        replications=replications,
        engine=engine,
        processes=processes,
        executor=executor,
        progress=progress,
    )
    rows = []
    for index, (factor, length, _) in enumerate(cells):
        runs = frame.iloc[index * replications : (index + 1) * replications]
        verdicts = [_judged(value) for value in runs["recovered"]]
        judged = [verdict for verdict in verdicts if verdict is not None]
        stuck = judged.count(False)
        times = [
            float(value)
            for value, verdict in zip(runs["recovery_s"], verdicts, strict=True)
            if verdict
        ]
        if judged:
            interval = proportion_ci(stuck, len(judged))
            fraction, low, high = interval.estimate, interval.low, interval.high
        else:
            fraction = low = high = math.nan
        rows.append(
            {
                "factor": factor,
                "duration_s": length,
                "replications": replications,
                "judged": len(judged),
                "stuck": stuck,
                "stuck_fraction": fraction,
                "stuck_low": low,
                "stuck_high": high,
                "recovery_s_mean": sum(times) / len(times) if times else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=list(MAP_COLUMNS))
