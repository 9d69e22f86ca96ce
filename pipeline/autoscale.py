"""``Autoscaler``: Kubernetes' Horizontal Pod Autoscaler rules, for a pipeline's worker pool.

A pipeline with ``PipelineConfig(autoscale=Autoscaler(...))`` resizes its own pool (see
:mod:`pipeline.pool`) at every ``sync_s`` of its loop's clock from the run's start until
the drain begins, on the real clock and the virtual one alike. At each sync,
:meth:`Recommender.decide` applies the HPA's rules (``pkg/controller/podautoscaler``:
``replica_calculator.go`` and ``horizontal.go``'s ``stabilizeRecommendationWithBehaviors``
and ``convertDesiredReplicasWithBehaviorRate``), where the HPA leaves a choice as this
project states it:

1. The metric's value: ``queue_per_worker`` is the queue depth (admitted items waiting to
   start) over the current worker count; ``oldest_age_s`` is the age of the oldest item
   inside, seconds. Within the tolerance (``|value / target - 1| <= tolerance``) the
   desired count is the current one; otherwise ``ceil(depth / target)`` (which is
   ``ceil(current x value / target)`` without its float overshoot) or
   ``ceil(current x age / target)``, in the float operations
   :meth:`Recommender.desired_count` spells out.
2. Stabilisation: the recommendation is the current count raised to the lowest desired
   count of the last ``scale_up_stabilization_s`` and lowered to the highest of the last
   ``scale_down_stabilization_s`` (this sync's included); this sync's desired count is
   then recorded.
3. Rate and bounds: at most ``current + max(pods, ceil(current x fraction))`` after
   ``max_scale_up = (pods, fraction)`` (by default 4 workers or 100%, whichever adds more),
   and within ``[min_workers, max_workers]``.

So 1 to 100 workers takes exactly six syncs (1, 5, 10, 20, 40, 80, 100), and a count
lowered at one sync waits ``scale_down_stabilization_s`` before it shrinks the pool.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from ._validate import MAX_CONCURRENCY, integer, real, show

__all__ = ["METRICS", "PARAMETERS", "Autoscaler", "Recommender"]

METRICS = ("queue_per_worker", "oldest_age_s")
"""What an autoscaler may scale on."""


@dataclass(frozen=True, kw_only=True)
class Autoscaler:
    """How a pipeline sizes its pool as it runs: the HPA's rules (see the module).

    Args:
        min_workers: the fewest workers (1 to ``max_workers``).
        max_workers: the most workers (up to 1,000,000).
        metric: ``"queue_per_worker"`` (queue depth per worker, items) or
            ``"oldest_age_s"`` (age of the oldest item inside, seconds).
        target: the metric's target value (> 0, items or seconds).
        sync_s: seconds between syncs (> 0); the first is ``sync_s`` after the start.
        tolerance: no change while ``|value / target - 1|`` is at most this (>= 0).
        scale_up_stabilization_s: seconds of past desired counts whose lowest caps a
            scale-up (>= 0; 0: scale up at once).
        scale_down_stabilization_s: seconds of past desired counts whose highest floors
            a scale-down (>= 0).
        max_scale_up: ``(pods, fraction)``: a sync adds at most ``max(pods, ceil(current
            x fraction))`` workers (pods >= 1, fraction >= 0).
        cold_start_s: seconds a new worker takes before its first item (>= 0); it
            counts as a worker from the sync that adds it.

    Raises:
        TypeError, ValueError: a value outside what is allowed (the message names it).
    """

    min_workers: int = 1
    max_workers: int = 100
    metric: Literal["queue_per_worker", "oldest_age_s"] = "queue_per_worker"
    target: float = 5.0
    sync_s: float = 15.0
    tolerance: float = 0.1
    scale_up_stabilization_s: float = 0.0
    scale_down_stabilization_s: float = 300.0
    max_scale_up: tuple[int, float] = (4, 1.0)
    cold_start_s: float = 0.0

    def __post_init__(self) -> None:
        fix = object.__setattr__  # frozen: store each number in its checked form
        fix(self, "min_workers", integer("min_workers", self.min_workers, "workers", at_least=1))
        fix(self, "max_workers", integer("max_workers", self.max_workers, "workers", at_least=1))
        if self.max_workers > MAX_CONCURRENCY:
            raise ValueError(
                f"max_workers must be at most {MAX_CONCURRENCY:,}, got {show(self.max_workers)}"
            )
        if self.min_workers > self.max_workers:
            raise ValueError(
                f"min_workers must be <= max_workers ({self.max_workers}), got {self.min_workers}"
            )
        if self.metric not in METRICS:
            raise ValueError(
                f"metric must be 'queue_per_worker' or 'oldest_age_s', got {show(self.metric)}"
            )
        unit = "items per worker" if self.metric == "queue_per_worker" else "seconds"
        fix(self, "target", real("target", self.target, unit, above=0))
        fix(self, "sync_s", real("sync_s", self.sync_s, "seconds", above=0))
        fix(self, "tolerance", real("tolerance", self.tolerance, "a fraction", at_least=0))
        for name in ("scale_up_stabilization_s", "scale_down_stabilization_s", "cold_start_s"):
            fix(self, name, real(name, getattr(self, name), "seconds", at_least=0))
        up = self.max_scale_up
        if not isinstance(up, tuple) or len(up) != 2:
            raise TypeError(
                "max_scale_up must be a (pods, fraction) pair, e.g. (4, 1.0) for 4 workers "
                f"or 100%, whichever adds more, got {show(up)}"
            )
        pods = integer("max_scale_up's pods", up[0], "workers", at_least=1)
        fraction = real("max_scale_up's fraction", up[1], "a fraction of the pool", at_least=0)
        fix(self, "max_scale_up", (pods, fraction))

    def replace(self, **changes: Any) -> Autoscaler:
        """A copy with some parameters changed, checked as at construction.

        ``max_scale_up_pods`` and ``max_scale_up_fraction`` change one part of
        ``max_scale_up`` (the command line's spelling), so a search can vary each.

        Raises:
            TypeError, ValueError: an unknown parameter (the message lists the allowed
                ones), or a value the autoscaler refuses.
        """
        unknown = [name for name in changes if name not in PARAMETERS]
        if unknown:
            raise ValueError(
                f"unknown autoscaler parameter {show(unknown[0])}; allowed: {', '.join(PARAMETERS)}"
            )
        pods, fraction = self.max_scale_up
        if "max_scale_up_pods" in changes or "max_scale_up_fraction" in changes:
            if "max_scale_up" in changes:
                raise ValueError(
                    "give max_scale_up or its parts (max_scale_up_pods, max_scale_up_fraction), "
                    "not both"
                )
            pods = changes.pop("max_scale_up_pods", pods)
            fraction = changes.pop("max_scale_up_fraction", fraction)
            changes["max_scale_up"] = (pods, fraction)
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        # Only what differs from the defaults, so a plan's or a sweep's table of
        # autoscalers shows what tells them apart; the text still rebuilds the autoscaler.
        changed = [
            f"{field.name}={getattr(self, field.name)!r}"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        ]
        return f"Autoscaler({', '.join(changed)})"

    def check_pool(self, concurrency: int) -> None:
        """Raise ValueError unless a pool starting at ``concurrency`` is within the bounds."""
        if not self.min_workers <= concurrency <= self.max_workers:
            raise ValueError(
                f"concurrency must be within the autoscaler's min_workers..max_workers "
                f"({self.min_workers}..{self.max_workers}), got {concurrency}"
            )


PARAMETERS = (
    *(f.name for f in dataclasses.fields(Autoscaler)),
    "max_scale_up_pods",
    "max_scale_up_fraction",
)
"""What :meth:`Autoscaler.replace` changes (a plan's ``autoscale.NAME`` axes): the
parameters, and ``max_scale_up``'s two parts."""


class Recommender:
    """One pool's autoscaling decisions: its past desired counts and the rules.

    Memory is bounded: a desired count is kept only as long as a stabilisation window
    can still see it (the longer window over ``sync_s`` entries).
    """

    def __init__(self, scaler: Autoscaler) -> None:
        self.scaler = scaler
        self._history: deque[tuple[float, int]] = deque()  # (sync time s, desired count)
        self.desired: int | None = None
        """The last sync's desired count (step 1, before stabilisation and bounds)."""

    def desired_count(self, current: int, depth: int, oldest_age_s: float) -> int:
        """Step 1: the count the metric asks for (the current one within the tolerance).

        In these float operations, in this order, so that another implementation (the
        kernel, a check) reproduces it bit for bit: ``value = depth / current`` (or the
        age), ``ratio = value / target``; no change when ``abs(ratio - 1.0) <=
        tolerance``; else ``ceil(depth / target)``, one division (``ceil(current *
        ratio)`` can land an ulp above an integer and add a worker), or for the age
        ``ceil(ratio * current)``, as the HPA computes a value target.
        """
        scaler = self.scaler
        if scaler.metric == "queue_per_worker":
            ratio = depth / current / scaler.target
            desired = depth / scaler.target
        else:
            ratio = oldest_age_s / scaler.target
            desired = ratio * current
        if abs(ratio - 1.0) <= scaler.tolerance:
            return current
        return math.ceil(desired)

    def decide(self, now_s: float, current: int, depth: int, oldest_age_s: float) -> int:
        """The pool's size after the sync at ``now_s`` (seconds of loop time).

        Args:
            now_s: the sync's time, seconds since the run's start (``k x sync_s`` at the
                k-th sync; non-decreasing from call to call).
            current: the pool's size now (cold-starting workers included).
            depth: admitted items waiting to start.
            oldest_age_s: seconds since the oldest item inside was admitted.
        """
        scaler = self.scaler
        desired = self.desired_count(current, depth, oldest_age_s)
        self.desired = desired
        history = self._history
        keep = max(scaler.scale_up_stabilization_s, scaler.scale_down_stabilization_s)
        while history and history[0][0] <= now_s - keep:
            history.popleft()  # no window sees it any more
        up = down = desired
        for time_s, count in history:
            if time_s > now_s - scaler.scale_up_stabilization_s:
                up = min(up, count)
            if time_s > now_s - scaler.scale_down_stabilization_s:
                down = max(down, count)
        history.append((now_s, desired))
        recommendation = min(max(current, up), down)
        pods, fraction = scaler.max_scale_up
        most = current + max(pods, math.ceil(current * fraction))
        return max(scaler.min_workers, min(recommendation, most, scaler.max_workers))
