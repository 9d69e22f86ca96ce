"""``Scenario``: one what-if question, frozen: workload, pipeline config, length, seed.

A scenario names everything a run depends on, so one seed reproduces a run
exactly. The seed is split into independent streams for arrivals, service
times, failures and backoff jitter (common random numbers): two scenarios that
differ only in ``config`` see the same traffic, item for item.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._validate import integer, real, show
from ...config import PipelineConfig
from .arrivals import ArrivalProcess
from .classes import ItemClass, check_classes, replace_classes, weights
from .distributions import Distribution
from .downstream import Downstream
from .failures import FailureModel, NoFailures
from .faults import CapacityDrop, Fault, LoadSpike, check_faults
from .spikes import SPIKABLE
from .stages import StageSpec
from .traces.service import ServiceTrace

__all__ = ["MAX_ITEM_SIZE_BYTES", "MAX_N_ITEMS", "Scenario", "Streams"]

MAX_N_ITEMS = 10**9
"""Largest ``n_items``: a run keeps a few arrays of one float per item (8 GB each at 10**9)."""

MAX_ITEM_SIZE_BYTES = 2**32
"""Largest ``item_size_bytes`` (4 GiB): at most ``MAX_N_ITEMS`` such items still fit the
int64 memory columns (``memory_bytes``, ``memory_peak_bytes``) without overflow."""


@dataclass(frozen=True)
class Streams:
    """Independent random streams derived from one seed (and a replication number)."""

    arrivals: np.random.Generator
    service: np.random.Generator
    retry_service: np.random.Generator
    failures: np.random.Generator
    jitter: random.Random

    @classmethod
    def from_seed(cls, seed: int, replication: int = 0) -> Streams:
        sequence = np.random.SeedSequence([seed, replication])
        arrivals, service, retry, failures, jitter = sequence.spawn(5)
        return cls(
            arrivals=np.random.default_rng(arrivals),
            service=np.random.default_rng(service),
            retry_service=np.random.default_rng(retry),
            failures=np.random.default_rng(failures),
            jitter=random.Random(int(jitter.generate_state(1)[0])),
        )


def _integer_in(value: object, most: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= most


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A simulated workload run through a pipeline configuration.

    Args:
        arrivals: when items arrive at the source (an arrival process).
        service: how long each attempt takes, seconds (a distribution, or a
            :class:`ServiceTrace` for exact replay).
        config: the pipeline's :class:`~pipeline.PipelineConfig`.
        stages: instead of ``service`` and ``config``, the stages of a chain
            (:class:`~pipeline.sim.StageSpec`, at least one, names unique):
            ``simulate`` then runs the real :class:`~pipeline.Chain`, each stage
            with its own service, config, fan-out and failures.
        n_items: how many items arrive (0 to :data:`MAX_N_ITEMS`, 10**9); or
        duration_s: arrivals during this many seconds of virtual time (finite).
        seed: the run's seed (>= 0).
        failures: how attempts fail (default: never).
        item_size_bytes: memory one item holds in the process, for the memory
            model (0 to :data:`MAX_ITEM_SIZE_BYTES`, 4 GiB).
        warmup_s: seconds at the start excluded from the summary's statistics (finite).
        initial_backlog: items already waiting at time 0 (an integer, 0 to
            :data:`MAX_N_ITEMS` together with ``n_items``; default 0), e.g. a
            queue's depth read from a dashboard. They are items ``0 .. N - 1``,
            arrived at 0.0, ahead of every arrival of ``arrivals`` (FIFO, even one
            at 0), and admitted as the queue has room: with ``on_full="block"``
            the rest wait upstream (counted as upstream backlog and
            producer-blocked time, as a burst at time 0 would be); with
            ``on_full="reject"`` a bounded queue must hold them all
            (``queue_maxsize + concurrency``), else it is a ValueError, since items
            that would be shed at once were never waiting. ``n_items`` and
            ``duration_s`` count the arrivals after them: ``n_items=0`` only
            drains the backlog. They count in every summary key (``items_offered``
            is N + the arrivals) and in ``items`` (a ``backlog`` column marks
            them); the summary adds ``items_backlog``, ``backlog_cleared_s``
            (when the last of them left) and ``backlog_drained_s`` (when nothing
            waited to start any more; see :mod:`pipeline.sim.running.backlog`).
            Per-item scripts (a :class:`ServiceTrace`'s times,
            :class:`~pipeline.sim.ScriptedFailures`) are indexed by item id, the
            backlog's first; the arrival times are those without a backlog (their
            own stream), while service and failure draws follow item ids. In a
            chain the backlog waits at the first stage. The draining start is a
            transient, not steady state: ``warmup_s`` does not remove it from the
            backlog keys, the summary's batch-means half-widths are NaN unless
            ``warmup_s`` cuts off the whole drain, and
            :func:`~pipeline.sim.detect_warmup` never keeps the backlog's items.
        classes: None (one class of items), or the classes the items belong to
            (:class:`~pipeline.sim.ItemClass`, at least one, names unique): each
            item's class is drawn with the classes' shares, from a stream of its
            own; a class's ``priority`` orders the queue (lower first,
            non-preemptive), its ``service`` replaces ``service`` for its items
            (``service`` may be None when every class has one) and its
            ``patience`` gives each item a deadline after which it abandons,
            unstarted (outcome ``expired``). The engine runs them through its own
            ``PipelineConfig(priority=..., max_wait_s=...)``, so ``config`` must
            leave both None. The summary adds ``classes`` (per class:
            ``items``, ``completed``, ``expired``, ``expired_fraction``, wait and
            latency mean and percentiles) and ``items`` a ``class`` column. In a
            chain, a class's priority orders every stage's queue (a fan-out's
            children inherit their item's class) and its patience applies at the
            first stage (the wait for the chain to begin the item's work); a
            class may not have its own service there (each stage has its own),
            and no stage's config may set ``priority`` or ``max_wait_s``. See
            :mod:`pipeline.sim.workloads.classes`.
        downstream: None, or the system the handler calls
            (:class:`~pipeline.sim.Downstream`): each attempt then spends
            ``service`` (client-side time before the call; None, the default with
            a downstream, for none) and then the downstream's queue wait and
            service; ``config.attempt_timeout_s`` cuts the attempt but not the work
            it sent (see :mod:`pipeline.sim.workloads.downstream`). One stage, no
            item classes, and failures only from the downstream (its full queue).
        faults: :class:`~pipeline.sim.CapacityDrop` (needs a downstream: its
            servers' speed) and :class:`~pipeline.sim.LoadSpike` (needs Poisson
            or time-varying Poisson arrivals: their rate) faults, in any number;
            overlapping faults of one kind multiply (see
            :mod:`pipeline.sim.workloads.faults`).

    Raises:
        ValueError: a bad value (named in the message).
        TypeError: a part of the wrong type.

    Example:
        >>> from pipeline.sim import Poisson, Exponential
        >>> Scenario(arrivals=Poisson(rate=3.2), service=Exponential(mean=1.0),
        ...          config=PipelineConfig(concurrency=4), n_items=10_000, seed=1)
        >>> # 5,000 items waiting now, traffic for an hour: when is the queue back to normal?
        >>> Scenario(arrivals=Poisson(rate=15.0), service=Exponential(mean=1.0),
        ...          config=PipelineConfig(concurrency=20), duration_s=3600.0,
        ...          initial_backlog=5000)
    """

    arrivals: ArrivalProcess
    service: Distribution | ServiceTrace | None = None
    config: PipelineConfig = field(default_factory=PipelineConfig)
    stages: tuple[StageSpec, ...] | None = None
    n_items: int | None = None
    duration_s: float | None = None
    seed: int = 0
    failures: FailureModel = field(default_factory=NoFailures)
    item_size_bytes: int = 1024
    warmup_s: float = 0.0
    initial_backlog: int = 0
    classes: tuple[ItemClass, ...] | None = None
    downstream: Downstream | None = None
    faults: tuple[Fault, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.arrivals, ArrivalProcess):
            raise TypeError(f"arrivals must be an arrival process, got {self.arrivals!r}")
        if self.classes is not None:
            object.__setattr__(self, "classes", check_classes(self.classes))
        if self.stages is not None:
            self._check_stages()
        elif self.service is None and self.classes is not None:
            missing = [c.name for c in self.classes if c.service is None]
            if missing:
                raise ValueError(
                    f"service is None, so every class needs its own service; class "
                    f"{missing[0]!r} has none (give Scenario(service=...) or "
                    "ItemClass(service=...))"
                )
        elif self.service is None and self.downstream is not None:
            pass  # the downstream's service is the call; no client-side time
        elif not isinstance(self.service, Distribution | ServiceTrace):
            raise TypeError(
                f"service must be a distribution or a ServiceTrace, got {self.service!r}"
            )
        if not isinstance(self.config, PipelineConfig):
            raise TypeError(f"config must be a PipelineConfig, got {self.config!r}")
        if not isinstance(self.failures, FailureModel):
            raise TypeError(f"failures must be a failure model, got {self.failures!r}")
        if (self.n_items is None) == (self.duration_s is None):
            raise ValueError(
                "give exactly one of n_items or duration_s, "
                f"got n_items={self.n_items!r}, duration_s={self.duration_s!r}"
            )
        if self.n_items is not None and not _integer_in(self.n_items, MAX_N_ITEMS):
            raise ValueError(
                f"n_items must be an integer >= 0 and <= {MAX_N_ITEMS:_}, got {show(self.n_items)}"
            )
        if self.duration_s is not None:
            real("duration_s", self.duration_s, "seconds", at_least=0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {show(self.seed)}")
        if not _integer_in(self.item_size_bytes, MAX_ITEM_SIZE_BYTES):
            raise ValueError(
                f"item_size_bytes must be an integer >= 0 and <= {MAX_ITEM_SIZE_BYTES:_} "
                f"(4 GiB), got {show(self.item_size_bytes)}"
            )
        real("warmup_s", self.warmup_s, "seconds", at_least=0)
        self._check_overload()
        self._check_backlog()
        if self.classes is not None:
            self._check_classes_fit()
        if self.stages is not None and self.n_items is not None:
            reaching = self.n_items + self.initial_backlog
            for stage in self.stages[:-1]:
                reaching *= stage.fan_out
            if reaching > MAX_N_ITEMS:
                with_backlog = f" + initial_backlog ({self.initial_backlog:_})"
                raise ValueError(
                    f"n_items ({self.n_items:_}){with_backlog if self.initial_backlog else ''} "
                    f"times the stages' fan_out makes {reaching:_} items at the last stage; "
                    f"allowed: at most {MAX_N_ITEMS:_}"
                )

    def _check_overload(self) -> None:
        """The downstream and the faults: their types, and what they can apply to."""
        object.__setattr__(self, "faults", check_faults(self.faults))
        downstream = self.downstream
        if downstream is not None:
            if not isinstance(downstream, Downstream):
                raise TypeError(f"downstream must be a Downstream or None, got {show(downstream)}")
            for name, value in (("stages", self.stages), ("classes", self.classes)):
                if value is not None:
                    raise ValueError(
                        f"downstream is set, and {name} too; allowed: a downstream behind "
                        f"one stage of items of one class ({name}=None)"
                    )
            if not isinstance(self.failures, NoFailures):
                raise ValueError(
                    f"downstream is set, and failures={self.failures!r}; allowed: "
                    "NoFailures (attempts fail by the downstream's full queue and the "
                    "client's attempt_timeout_s)"
                )
        for index, fault in enumerate(self.faults):
            if isinstance(fault, CapacityDrop) and downstream is None:
                raise ValueError(
                    f"faults[{index}] is {fault!r}, which slows a downstream's servers; "
                    "allowed with Scenario(downstream=Downstream(...)) only"
                )
            if isinstance(fault, LoadSpike) and (
                not isinstance(self.arrivals, SPIKABLE) or self.stages is not None
            ):
                raise ValueError(
                    f"faults[{index}] is {fault!r}, which multiplies a Poisson rate; "
                    f"allowed with Poisson or TimeVarying arrivals and one stage, "
                    f"got arrivals={self.arrivals!r}"
                    + (" and stages" if self.stages is not None else "")
                )

    def _check_classes_fit(self) -> None:
        configs = [("config", self.config)]
        if self.stages is not None:
            for item_class in self.classes:
                if item_class.service is not None:
                    raise ValueError(
                        f"class {item_class.name!r}: service applies to one stage; with stages, "
                        "each StageSpec has its own service (leave ItemClass(service=None))"
                    )
            configs = [(f"stage {spec.name!r}: config", spec.config) for spec in self.stages]
        for where, config in configs:
            for name in ("priority", "max_wait_s"):
                if getattr(config, name) is not None:
                    raise ValueError(
                        f"{where}.{name} is set, and classes set each item's "
                        f"{'priority' if name == 'priority' else 'deadline (its patience)'}; "
                        f"give ItemClass(priority=..., patience=...) and leave {name}=None"
                    )

    def _check_backlog(self) -> None:
        backlog = integer("initial_backlog", self.initial_backlog, "items waiting at time 0")
        # A numpy integer is taken as the int it holds (hashing, JSON and repr then agree).
        object.__setattr__(self, "initial_backlog", backlog)
        if backlog > MAX_N_ITEMS:
            raise ValueError(
                f"initial_backlog must be <= {MAX_N_ITEMS:_} (items waiting at time 0), "
                f"got {show(backlog)}"
            )
        if self.n_items is not None and backlog + self.n_items > MAX_N_ITEMS:
            raise ValueError(
                f"initial_backlog ({backlog:_}) plus n_items ({self.n_items:_}) must be at most "
                f"{MAX_N_ITEMS:_} items, got {backlog + self.n_items:_}"
            )
        if not backlog:
            return
        first = self.stages[0].config if self.stages is not None else self.config
        if first.on_full == "reject" and first.queue_maxsize is not None:
            room = first.queue_maxsize + first.concurrency
            if backlog > room:
                raise ValueError(
                    f"initial_backlog ({backlog:_}) cannot be waiting in a queue that sheds "
                    f"(on_full='reject') and holds at most queue_maxsize + concurrency = "
                    f"{room:_} items; use on_full='block' (the rest wait upstream), a larger "
                    "queue_maxsize, or queue_maxsize=None"
                )

    def _check_stages(self) -> None:
        stages = self.stages
        if self.service is not None:
            raise ValueError(
                "give either service (one stage) or stages (a chain), not both; a chain's "
                "service times belong to each StageSpec"
            )
        if isinstance(stages, str | bytes) or not isinstance(stages, list | tuple):
            raise TypeError(f"stages must be a list of StageSpec, got {show(stages)}")
        if not stages:
            raise ValueError("stages must hold at least one StageSpec, got none")
        names: set[str] = set()
        for index, stage in enumerate(stages):
            if not isinstance(stage, StageSpec):
                raise TypeError(f"stages[{index}] must be a StageSpec, got {show(stage)}")
            if stage.name in names:
                raise ValueError(f"stage names must be unique, got {stage.name!r} twice")
            names.add(stage.name)
        if not isinstance(self.failures, NoFailures):
            raise ValueError(
                f"failures={self.failures!r} applies to one stage; with stages, give each "
                "StageSpec its own failures"
            )
        default = PipelineConfig()
        if self.config != default:
            # A chain runs each stage with its StageSpec's config: this one would be ignored.
            changed = ", ".join(
                f"{f.name}={show(getattr(self.config, f.name))}"
                for f in dataclasses.fields(PipelineConfig)
                if getattr(self.config, f.name) != getattr(default, f.name)
            )
            raise ValueError(
                f"config ({changed}) applies to one stage; with stages, give each "
                "StageSpec its own config"
            )
        object.__setattr__(self, "stages", tuple(stages))

    def replace(self, **changes: Any) -> Scenario:
        """A copy with some fields changed; config fields may be named directly.

        For a chain, a stage's fields are named ``"stage.field"``: a
        :class:`~pipeline.sim.StageSpec` field (``service``, ``config``,
        ``fan_out``, ``failures``) or a :class:`~pipeline.PipelineConfig` field of
        that stage (``"write.concurrency"``), so ``sweep()`` and ``plan()`` can
        vary one stage.

        A field applies to the value given in the same call, else to this
        scenario's: ``replace(config=c, concurrency=8)`` is ``c`` with 8 workers,
        ``replace(stages=s, **{"write.concurrency": 8})`` is ``s`` with its
        ``write`` stage at 8 workers, and ``"write.config"`` with
        ``"write.concurrency"`` is that config with 8 workers. So a sweep over
        ``{"stages": [a, b], "write.concurrency": [...]}`` varies both.

        With an autoscaler, ``"autoscale.NAME"`` changes one of its parameters
        (:meth:`~pipeline.Autoscaler.replace`: ``target``, ``max_workers``,
        ``cold_start_s``, ...): ``replace(**{"autoscale.target": 2.0})``.

        With item classes, ``"classes.NAME.FIELD"`` changes one
        :class:`~pipeline.sim.ItemClass` field (``share``, ``priority``,
        ``service``, ``patience``) of the class named NAME:
        ``replace(**{"classes.premium.share": 0.3})``, so a sweep can vary it.

        Raises:
            ValueError: an unknown field or stage; a field with nothing to apply
                to: a config field without its stage, or ``config=``, on a chain
                (which stage's would it be?), or a ``"stage.field"`` on a
                scenario without stages (the stages given, if any, are the ones
                looked in).

        Example:
            >>> scenario.replace(concurrency=8, seed=2)   # concurrency goes to config
            >>> chain.replace(**{"write.concurrency": 40, "fetch.queue_maxsize": 5})
        """
        config_fields = {f.name for f in dataclasses.fields(PipelineConfig)}
        by_class = {
            k: changes.pop(k)
            for k in list(changes)
            if isinstance(k, str) and k.startswith("classes.")
        }
        if by_class:
            changes["classes"] = replace_classes(changes.get("classes", self.classes), by_class)
        by_scaler = {
            k.removeprefix("autoscale."): changes.pop(k)
            for k in list(changes)
            if isinstance(k, str) and k.startswith("autoscale.")
        }
        staged = {k: changes.pop(k) for k in list(changes) if isinstance(k, str) and "." in k}
        config_changes = {k: changes.pop(k) for k in list(changes) if k in config_fields}
        if by_scaler:
            config_changes["autoscale"] = self._replace_scaler(changes, config_changes, by_scaler)
        unknown = set(changes) - {f.name for f in dataclasses.fields(Scenario)}
        if unknown:
            raise ValueError(
                f"unknown scenario or config field(s) {sorted(unknown)}; allowed: "
                f"{sorted({f.name for f in dataclasses.fields(Scenario)} | config_fields)}"
                + (" or 'stage.field' for a chain's stage" if self.stages else "")
            )
        # The stages and config the fields apply to: given in this call, else this scenario's.
        stages = changes.get("stages", self.stages)
        if config_changes and stages is not None:
            names = [getattr(stage, "name", "?") for stage in stages]
            first = next(iter(config_changes))
            raise ValueError(
                f"{first!r} is a stage's setting in a chain; name the stage, e.g. "
                f"'{names[-1]}.{first}' (stages: {', '.join(names)})"
            )
        if config_changes:
            config = changes.get("config", self.config)
            if not isinstance(config, PipelineConfig):
                raise TypeError(f"config must be a PipelineConfig, got {show(config)}")
            changes["config"] = dataclasses.replace(config, **config_changes)
        if staged:
            changes["stages"] = self._replace_stages(stages, staged, config_fields)
        return dataclasses.replace(self, **changes)

    def _replace_scaler(
        self, changes: dict[str, Any], config_changes: dict[str, Any], by_scaler: dict[str, Any]
    ) -> Any:
        """The autoscaler (given in this call, else the config's) with ``autoscale.NAME``
        changes applied."""
        config = changes.get("config", self.config)
        scaler = config_changes.get("autoscale", getattr(config, "autoscale", None))
        if scaler is None:
            raise ValueError(
                f"'autoscale.{next(iter(by_scaler))}' changes the autoscaler, but this scenario "
                "does not autoscale: give it one (PipelineConfig(autoscale=Autoscaler(...)), "
                "an [autoscale] table or --autoscale)"
            )
        return scaler.replace(**by_scaler)

    @staticmethod
    def _replace_stages(
        base: Any, staged: dict[str, Any], config_fields: set[str]
    ) -> tuple[StageSpec, ...]:
        """The stages ``base`` with ``{"stage.field": value}`` changes applied."""
        if base is None:
            raise ValueError(
                f"{next(iter(staged))!r} names a stage, but this scenario has no stages "
                "(give stages=[StageSpec(...), ...] for a chain)"
            )
        if isinstance(base, str | bytes) or not isinstance(base, list | tuple):
            raise TypeError(f"stages must be a list of StageSpec, got {show(base)}")
        for index, stage in enumerate(base):
            if not isinstance(stage, StageSpec):
                raise TypeError(f"stages[{index}] must be a StageSpec, got {show(stage)}")
        by_name = {stage.name: stage for stage in base}
        stage_fields = {f.name for f in dataclasses.fields(StageSpec)} - {"name"}
        spec_changes: dict[str, dict[str, Any]] = {}
        config_changes: dict[str, dict[str, Any]] = {}
        for key, value in staged.items():
            name, _, field_name = key.rpartition(".")
            if name not in by_name:
                raise ValueError(f"{key!r}: no stage named {name!r}; stages: {', '.join(by_name)}")
            if field_name in config_fields:
                config_changes.setdefault(name, {})[field_name] = value
            elif field_name in stage_fields:
                spec_changes.setdefault(name, {})[field_name] = value
            else:
                raise ValueError(
                    f"{key!r}: unknown stage field {field_name!r}; allowed: "
                    f"{sorted(stage_fields | config_fields)}"
                )
        stages = []
        for stage in base:
            fields = dict(spec_changes.get(stage.name, {}))
            if stage.name in config_changes:
                config = fields.get("config", stage.config)
                if not isinstance(config, PipelineConfig):
                    raise TypeError(
                        f"'{stage.name}.config' must be a PipelineConfig, got {show(config)}"
                    )
                fields["config"] = dataclasses.replace(config, **config_changes[stage.name])
            stages.append(dataclasses.replace(stage, **fields) if fields else stage)
        return tuple(stages)

    @property
    def offered_load(self) -> float:
        """Arrival rate x mean service time: the average number of busy workers needed.

        For a chain, that of its busiest stage (fan-out multiplies the rate downstream).
        """
        if self.stages is None:
            if self.downstream is not None:
                # An attempt holds a worker for its client time and the downstream's service.
                client = 0.0 if self.service is None else self.service.mean
                return self.arrivals.rate * (client + self.downstream.service.mean)
            if self.classes is not None:
                # The classes' mixture: each share x its own (or the scenario's) mean.
                means = [
                    (c.service if c.service is not None else self.service).mean
                    for c in self.classes
                ]
                return self.arrivals.rate * float(np.dot(weights(self.classes), means))
            return self.arrivals.rate * self.service.mean
        rate, busiest = self.arrivals.rate, 0.0
        for stage in self.stages:
            busiest = max(busiest, rate * stage.service.mean)
            rate *= stage.fan_out
        return busiest
