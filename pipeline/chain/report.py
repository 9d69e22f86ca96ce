"""What a :class:`~pipeline.chain.chain.Chain` hands back: per-stage and end-to-end accounts.

Each stage's account is a :class:`StageReport`: a :class:`~pipeline.RunReport`
counted in items (a batching stage's batches are counted payload by payload)
plus the stage's joint with the next one. Three balances always hold:

- **per stage**: ``offered == completed + len(dead_letters) + len(unfinished)
  + len(shed) + len(expired)`` (the single-stage balance);
- **per joint**: a stage's ``outputs == handed_on + len(stranded)``, and the
  next stage's ``offered == handed_on`` (an output the next stage shed was
  still handed on: it is counted there);
- **end to end**: ``offered + children_added == completed + dead_lettered +
  unfinished + shed + expired``, where ``completed`` counts the items the last stage
  completed, ``unfinished`` includes every stranded output, and
  ``children_added`` is what fan-out before the last stage added (children
  minus the parents they replaced).

The chain counts **items**, at every stage and end to end: an item is
completed when the last stage completes it. What the last stage's items
produce (its fan-out children, which no stage takes) is that stage's
``outputs``, never the chain's ``completed``; the simulator's
``items_completed``, ``throughput_per_s`` and ``items`` count the same items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ..records import RunReport
from ..statistics import Statistics

__all__ = ["ChainReport", "ChainStatistics", "StageReport", "StageStatistics"]


@dataclass(frozen=True)
class StageReport(RunReport):
    """One stage's account, in items, and its joint with the next stage.

    Every :class:`~pipeline.RunReport` field means what it means for a single
    pipeline; for a batching stage they count payloads (``attempts`` counts
    handler calls, and ``statistics`` is the stage pipeline's own snapshot, in
    batches).

    Attributes:
        name: the stage's name.
        outputs: items its completed items produced (fan-out children; one
            per completed item otherwise).
        handed_on: outputs the next stage took (admitted or shed there); 0 at the tail.
        stranded: outputs that finished here but never entered the next stage
            (the close cut the hand-off short, or the next stage had stopped),
            oldest first: unfinished, end to end.
        hand_off_blocked_s: seconds this stage's workers waited for room in the
            next stage (blocking after service), summed over workers.
        batches: batches sent to the handler (batching stages; 0 otherwise).
    """

    name: str = ""
    outputs: int = 0
    handed_on: int = 0
    stranded: list[Any] = field(default_factory=list)
    hand_off_blocked_s: float = 0.0
    batches: int = 0


@dataclass(frozen=True)
class ChainReport:
    """The account of one chain run, per stage and end to end.

    Attributes:
        stages: each stage's :class:`StageReport`, in chain order, by name.
        offered: items taken from the source(s).
        completed: items the last stage completed (its fan-out children are
            ``stages[last].outputs``, not counted here).
        drain_timed_out: the chain's drain hit its ``drain_timeout_s``.
        started_s, finished_s: loop time of the start and the end of the run, seconds.
    """

    stages: dict[str, StageReport]
    offered: int
    completed: int
    drain_timed_out: bool
    started_s: float
    finished_s: float

    @property
    def duration_s(self) -> float:
        """Loop seconds from the start to the end of the last stage's close."""
        return self.finished_s - self.started_s

    @property
    def dead_lettered(self) -> int:
        """Items dead-lettered, over every stage."""
        return sum(len(stage.dead_letters) for stage in self.stages.values())

    @property
    def shed(self) -> int:
        """Items shed at admission, over every stage."""
        return sum(len(stage.shed) for stage in self.stages.values())

    @property
    def expired(self) -> int:
        """Items whose deadline came before their next attempt started, over every stage."""
        return sum(len(stage.expired) for stage in self.stages.values())

    @property
    def unfinished(self) -> int:
        """Items left when the run ended: unfinished in a stage, or stranded between two."""
        return sum(len(stage.unfinished) + len(stage.stranded) for stage in self.stages.values())

    @property
    def children_added(self) -> int:
        """Items fan-out added to the chain: outputs minus the completed items they came
        from, at every stage but the last (whose outputs leave the chain)."""
        stages = list(self.stages.values())[:-1]
        return sum(stage.outputs - stage.completed for stage in stages)

    @property
    def balanced(self) -> bool:
        """True when every stage, every joint and the whole chain balance."""
        reports = list(self.stages.values())
        if not all(report.balanced for report in reports):
            return False
        for upstream, downstream in pairwise(reports):
            if upstream.outputs != upstream.handed_on + len(upstream.stranded):
                return False
            if downstream.offered != upstream.handed_on:
                return False
        if reports[0].offered != self.offered or reports[-1].completed != self.completed:
            return False
        left = self.completed + self.dead_lettered + self.unfinished + self.shed + self.expired
        return self.offered + self.children_added == left

    def dead_letters(self) -> list[tuple[str, Any]]:
        """Every dead letter as ``(stage name, DeadLetter)``, stage by stage."""
        return [
            (name, letter) for name, stage in self.stages.items() for letter in stage.dead_letters
        ]


@dataclass(frozen=True)
class StageStatistics:
    """A snapshot of one stage, in items.

    Attributes:
        name: the stage's name.
        pipeline: the stage pipeline's own :class:`~pipeline.Statistics`
            (in batches for a batching stage).
        items_inside: items admitted and not yet completed, dead-lettered or
            expired (queued, waiting for a retry, in an attempt), plus a batching
            stage's batch being formed.
        items_handing_off: outputs of finished items waiting for room in the
            next stage.
        hand_off_blocked_s: seconds workers have waited for room downstream
            (completed waits).
    """

    name: str
    pipeline: Statistics
    items_inside: int
    items_handing_off: int
    hand_off_blocked_s: float

    @property
    def items_held(self) -> int:
        """Items this stage holds in memory now: inside plus handing off."""
        return self.items_inside + self.items_handing_off


@dataclass(frozen=True)
class ChainStatistics:
    """A snapshot of a chain: each stage's :class:`StageStatistics`, in order, by name."""

    stages: dict[str, StageStatistics]

    @property
    def items_held(self) -> int:
        """Items the chain holds in memory now, over every stage."""
        return sum(stage.items_held for stage in self.stages.values())
