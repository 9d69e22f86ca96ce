"""``ItemClass``: a class of simulated items, with its share, priority, service and patience.

``Scenario(classes=[ItemClass(...), ...])`` splits the traffic: each item (the
initial backlog's too) belongs to one class, drawn independently with the
classes' shares from a stream of its own, so the same seed gives the same
classes on every engine and in every what-if that keeps the shares. A class
may have its own service-time distribution and a patience: how long its
items wait before they give up (reneging). The simulator hands both to the
real engine: the class's ``priority`` becomes the item's key
(``PipelineConfig(priority=...)``, lower first, first in first out among
equals, non-preemptive) and its drawn patience the item's deadline
(``PipelineConfig(max_wait_s=...)``, per item): an item not started within its
patience of admission expires (outcome ``expired``). With an unbounded queue,
or one that never fills, admission is arrival; with ``on_full="block"`` an
item held upstream starts losing patience only once it is admitted, the
engine's rule. In a chain, the priority orders every stage's queue (a
fan-out's children inherit their item's class) and the patience applies at
the first stage; a class has no service of its own there.

Random streams: the class of each item from ``(seed, replication)``'s sixth
child stream (the first five are :class:`~pipeline.sim.workloads.scenario.Streams`');
each class's service times, retry service times and patience from streams
keyed by its name, so changing one class leaves the others' draws alone.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._validate import real, show
from .distributions import Distribution

__all__ = [
    "MAX_CLASSES",
    "ClassDraws",
    "ItemClass",
    "check_classes",
    "class_codes",
    "draw_classes",
    "replace_classes",
    "weights",
]

MAX_CLASSES = 1000
"""The most classes one scenario may have (each keeps a summary and figure lines)."""

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
_NAME_RULE = (
    "1 to 64 letters, digits, '_' or '-', not starting with '-' "
    "(a class's name is a summary key, an SLO's 'classes.NAME.metric' and a file name)"
)
_TAG = 0x636C617373  # "class": keys the classes' streams apart from every other seed sequence
_RETRY_BLOCK = 4096


@dataclass(frozen=True, kw_only=True)
class ItemClass:
    """One class of items in a simulated scenario.

    Args:
        name: the class's name: the key of ``summary["classes"]``, the value of
            the items table's ``class`` column, ``classes.NAME.metric`` in an
            SLO; 1 to 64 letters, digits, ``_`` or ``-`` (not first), unique
            within the scenario.
        share: the class's relative weight among the classes (>= 0, finite;
            numpy numbers and ``Decimal`` accepted): the shares are divided by
            their sum, so ``1, 3`` and ``0.25, 0.75`` are the same split. A share
            of 0 gives the class no items (its summary then counts none); at
            least one class must have a share > 0.
        priority: the class's priority key, a finite real number: lower is
            served first (non-preemptive: a running attempt is never interrupted).
            Default 0; classes of equal priority are served first in, first out.
        service: how long each attempt of an item of this class takes, seconds
            (a distribution); None (default) uses the scenario's ``service``.
        patience: how long an item of this class waits, from admission, before
            it abandons (expires unstarted), seconds (a distribution; every
            draw must be > 0); None (default): its items never abandon.

    Raises:
        ValueError, TypeError: a bad value (the message names the parameter).

    Example:
        >>> ItemClass(name="premium", share=0.2, priority=0)
        >>> ItemClass(name="standard", share=0.8, priority=1, patience=Exponential(mean=30.0))
    """

    name: str
    share: float = 1.0
    priority: float = 0
    service: Distribution | None = None
    patience: Distribution | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise ValueError(f"class name must be {_NAME_RULE}, got {show(self.name)}")
        where = f"class {self.name!r}"
        share = real(f"{where}: share", self.share, "a relative weight", at_least=0)
        object.__setattr__(self, "share", share)
        priority = self.priority
        if getattr(priority, "ndim", None) == 0 and callable(getattr(priority, "item", None)):
            priority = priority.item()  # a numpy scalar: the Python number it holds
        if isinstance(priority, int) and not isinstance(priority, bool):
            # An integer key stays exact (two large ones a float would merge stay apart).
            if abs(priority) > 2**1023:
                real(f"{where}: priority", priority, "a key, lower first")
        else:
            priority = real(f"{where}: priority", priority, "a key, lower first")
        object.__setattr__(self, "priority", priority)
        for part in ("service", "patience"):
            value = getattr(self, part)
            if value is not None and not isinstance(value, Distribution):
                unit = "seconds per attempt" if part == "service" else "seconds of waiting"
                raise TypeError(
                    f"{where}: {part} must be a distribution ({unit}) or None, got {show(value)}"
                )
        if self.patience is not None and not self.patience.mean > 0:
            raise ValueError(
                f"{where}: patience must draw seconds > 0 (an item with no patience at all "
                f"could never start), got {self.patience!r} with mean {show(self.patience.mean)}"
            )


def check_classes(classes: object) -> tuple[ItemClass, ...]:
    """``classes`` as a tuple of :class:`ItemClass`, or a one-line error.

    Raises:
        TypeError: not a list of ItemClass.
        ValueError: none, more than :data:`MAX_CLASSES`, a name twice, or every share 0.
    """
    if isinstance(classes, str | bytes) or not isinstance(classes, Sequence):
        raise TypeError(f"classes must be a list of ItemClass, got {show(classes)}")
    if not classes:
        raise ValueError(
            "classes must hold at least one ItemClass, got none (None: one class of items)"
        )
    if len(classes) > MAX_CLASSES:
        raise ValueError(f"classes must hold at most {MAX_CLASSES} ItemClass, got {len(classes)}")
    names: set[str] = set()
    for index, item_class in enumerate(classes):
        if not isinstance(item_class, ItemClass):
            raise TypeError(f"classes[{index}] must be an ItemClass, got {show(item_class)}")
        if item_class.name in names:
            raise ValueError(f"class names must be unique, got {item_class.name!r} twice")
        names.add(item_class.name)
    if not any(item_class.share > 0 for item_class in classes):
        raise ValueError(
            "at least one class must have a share > 0, got shares "
            + ", ".join(f"{c.name}={show(c.share)}" for c in classes)
        )
    return tuple(classes)


def replace_classes(classes: object, changes: dict[str, object]) -> tuple[ItemClass, ...]:
    """``classes`` with ``{"classes.NAME.FIELD": value}`` changes applied, class by class.

    Raises:
        ValueError: no classes to change, an unknown class or field (named).
    """
    if classes is None:
        raise ValueError(
            f"{next(iter(changes))!r} names a class, but this scenario has no classes "
            "(give classes=[ItemClass(...), ...])"
        )
    found = check_classes(classes)
    by_name = {c.name: c for c in found}
    fields = ("share", "priority", "service", "patience")
    per_class: dict[str, dict[str, object]] = {}
    for key, value in changes.items():
        name, _, field_name = key.removeprefix("classes.").rpartition(".")
        if name not in by_name:
            raise ValueError(f"{key!r}: no class named {name!r}; classes: {', '.join(by_name)}")
        if field_name not in fields:
            raise ValueError(
                f"{key!r}: unknown class field {field_name!r}; allowed: {', '.join(fields)}"
            )
        per_class.setdefault(name, {})[field_name] = value
    return tuple(
        dataclasses.replace(c, **per_class[c.name]) if c.name in per_class else c for c in found
    )


def weights(classes: Sequence[ItemClass]) -> np.ndarray:
    """The classes' shares as probabilities summing to 1 (huge shares included)."""
    shares = np.array([c.share for c in classes], dtype=np.float64)
    shares /= shares.max()  # first: two shares near the largest float would sum to inf
    return shares / shares.sum()


def _class_streams(seed: int, replication: int, name: str) -> list[np.random.SeedSequence]:
    """A class's service, retry-service and patience streams, keyed by its name."""
    entropy = [seed, replication, _TAG, *name.encode("ascii")]
    return np.random.SeedSequence(entropy).spawn(3)


class ClassDraws:
    """One replication's classes: each item's class and patience, and class service times.

    Attributes:
        classes: the scenario's classes.
        code: each item's class, as its index in ``classes`` (int16, by item id).
        patience_s: each item's patience, seconds (``inf`` for a patient class).
        priority: each item's priority key (a list, by item id).
    """

    def __init__(self, classes: Sequence[ItemClass], n: int, seed: int, replication: int) -> None:
        self.classes = tuple(classes)
        self.code = class_codes(self.classes, n, seed, replication)
        self.patience_s = np.full(n, math.inf)
        self._service: dict[int, tuple[Distribution, np.random.Generator, list[float]]] = {}
        self._first: dict[int, np.ndarray] = {}
        for k, item_class in enumerate(self.classes):
            members = np.flatnonzero(self.code == k)
            streams = _class_streams(seed, replication, item_class.name)
            service_seq, retry_seq, patience_seq = streams
            if item_class.service is not None:
                rng = np.random.default_rng(service_seq)
                first = item_class.service.sample(rng, len(members))
                self._first[k] = first
                self._service[k] = (item_class.service, np.random.default_rng(retry_seq), [])
            if item_class.patience is not None:
                rng = np.random.default_rng(patience_seq)
                drawn = item_class.patience.sample(rng, len(members))
                bad = ~(drawn > 0) | ~np.isfinite(drawn)
                if bad.any():
                    at = int(np.flatnonzero(bad)[0])
                    raise ValueError(
                        f"class {item_class.name!r}: patience {item_class.patience!r} drew "
                        f"{show(float(drawn[at]))} seconds for item {int(members[at])}; "
                        "patience must be > 0 and finite seconds"
                    )
                self.patience_s[members] = drawn
        keys = [c.priority for c in self.classes]
        self.priority = [keys[k] for k in self.code.tolist()]

    @property
    def prioritised(self) -> bool:
        """True when the classes' priorities differ (else the queue is plain FIFO)."""
        return len({c.priority for c in self.classes}) > 1

    @property
    def impatient(self) -> bool:
        """True when some class has a patience."""
        return any(c.patience is not None for c in self.classes)

    def first_attempt_s(self, scenario_first: np.ndarray | None) -> np.ndarray:
        """First service times: a class's own draws where it has a service, else the scenario's."""
        n = len(self.code)
        if scenario_first is None:
            first = np.empty(n)
        else:
            first = np.array(scenario_first, dtype=np.float64)
        for k, times in self._first.items():
            first[self.code == k] = times
        return first

    def retry_time(self, item_id: int) -> float | None:
        """A retry's service time for an item of a class with its own service; else None."""
        own = self._service.get(int(self.code[item_id]))
        if own is None:
            return None
        service, rng, pool = own
        if not pool:
            pool.extend(service.sample(rng, _RETRY_BLOCK).tolist()[::-1])
        return pool.pop()


def class_codes(classes: Sequence[ItemClass], n: int, seed: int, replication: int) -> np.ndarray:
    """Each of ``n`` items' class, as its index in ``classes`` (int16), drawn with the shares."""
    chooser = np.random.default_rng(np.random.SeedSequence([seed, replication]).spawn(6)[5])
    cumulative = np.cumsum(weights(classes))
    last = max(i for i, c in enumerate(classes) if c.share > 0)
    code = np.searchsorted(cumulative, chooser.random(n), side="right")
    # Rounding may leave the last sum a hair below 1: never past the last class with items.
    return np.minimum(code, last).astype(np.int16)


def draw_classes(scenario: object, replication: int, n: int) -> ClassDraws | None:
    """The classes of a scenario's ``n`` items in one replication, or None without classes."""
    classes = getattr(scenario, "classes", None)
    if classes is None:
        return None
    return ClassDraws(classes, n, scenario.seed, replication)  # type: ignore[attr-defined]
