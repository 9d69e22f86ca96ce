"""``Chain``: stages joined by bounded queues, with backpressure through the chain.

Each :class:`~pipeline.chain.stage.Stage` runs as its own :class:`~pipeline.Pipeline`
(workers, bounded input queue, retries, dead letters, rate limit). A worker
that finished an item hands its outputs to the next stage's queue and, when
that queue is full, waits there holding its slot (blocking after service; see
:mod:`pipeline.chain.handoff`). So a slow stage fills its queue, then stalls the
stage before it, and so on up to the source, which is read no faster than the
slowest stage works. What the chain holds stays bounded by the sum of the
stages' bounds (:meth:`Stage.items_bound`).

Life of a run::

    source --> [stage 0: queue -> workers] --hand-off--> [stage 1: queue -> workers] --> ...
                  retries, dead letters        waits for room      retries, dead letters

Stopping is end to end. Intake stops at the head (the source's end,
:meth:`Chain.stop`, or a stage that failed); the head drains, then each stage
in turn is told that nothing more will come and drains, all within one
``drain_timeout_s`` counted from the moment intake stopped. A stage drains
only once the stage before it has closed, so its hand-offs still find it
open. Whatever is left when time runs out is handed back: unfinished in its
stage, or stranded between two stages.

The report (:class:`~pipeline.chain.report.ChainReport`) accounts for every item
per stage, per joint and end to end, fan-out children and failed batches
included.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import Any

from .._validate import real, show
from ..engine import Pipeline
from ..errors import PipelineClosed, SourceError
from ..events import EventKind, Listener
from ..records import DeadLetter, RunReport, ShedLog, describe_error
from ..state import State, close_once
from .handoff import BatchFormer, HandOff
from .report import ChainReport, ChainStatistics, StageReport, StageStatistics
from .stage import Stage

__all__ = ["Chain"]


class _FromHead:
    def __repr__(self) -> str:
        return "<the first stage's drain_timeout_s>"


FROM_HEAD: Any = _FromHead()
"""Default of ``Chain(drain_timeout_s=...)``: the first stage's ``config.drain_timeout_s``."""


class _StagePipeline(Pipeline):
    """One stage's pipeline: hands finished items on, and tells the chain when it stops.

    Two small additions to :class:`~pipeline.Pipeline`, both outside the
    engine's hot path: finished items go to a :class:`~pipeline.chain.handoff.HandOff`
    (the engine's results sink), and :meth:`stop` notes when intake stopped and
    reports a stop nobody asked for (the stage failed) to the chain.
    """

    def __init__(self, stage: Stage, config: Any, on_own_stop: Any) -> None:
        super().__init__(
            stage.call(), config, on_event=stage.on_event, rng=stage.rng, name=stage.name
        )
        self.intake_closed_s: float | None = None
        self.stop_expected = on_own_stop is None
        self._on_own_stop = on_own_stop

    def start(self) -> None:
        """Start the workers with no source of its own: the stage before puts into it."""
        self._start()

    async def close(self) -> RunReport:
        """Close the stage's pipeline once (however many callers ask); returns its report."""
        return await self._shutdown()

    def hand_off_to(self, sink: HandOff) -> None:
        """Send every finished item to ``sink`` (before the run starts)."""
        self._stream = sink  # the engine awaits it in the worker: see pipeline.chain.handoff

    def _note_expired(self, item: Any) -> None:
        if self._stream is not None:
            self._stream.expire(item.payload)  # its HandOff: counted settled, handed nothing

    def stop(self) -> None:
        if self.state is State.OPEN:
            self.intake_closed_s = self._now()
            if not self.stop_expected:
                self.stop_expected = True
                self._on_own_stop()
        super().stop()

    async def drain_by(self, deadline_s: float | None) -> RunReport:
        """Drain, giving up at loop time ``deadline_s`` (None: wait as long as it takes)."""
        self.stop_expected = True
        if deadline_s is not None:
            # The engine's drain reads its timeout from the config when it starts.
            remaining = max(0.0, deadline_s - self._now())
            self.config = dataclasses.replace(self.config, drain_timeout_s=remaining)
        return await self.drain()


class Chain:
    """Stages run one after another, joined by bounded queues.

    Args:
        stages: the :class:`~pipeline.chain.stage.Stage` s, in order (at least one,
            names unique). The first cannot batch: its input is the source.
        drain_timeout_s: seconds, from the moment intake stops, within which
            every stage must drain (>= 0), or None to wait as long as it takes.
            Default: the first stage's ``config.drain_timeout_s``.
        name: used in task names and ``repr``.

    A chain of one plain stage behaves exactly as a :class:`~pipeline.Pipeline`
    with that handler and config.

    Raises:
        TypeError, ValueError: bad stages or a bad ``drain_timeout_s`` (named in
            the message).

    Example:
        >>> chain = Chain([
        ...     Stage("fetch", fetch_page, PipelineConfig(concurrency=2), fan_out=True),
        ...     Stage("write", insert_rows, PipelineConfig(concurrency=20), batch_size=100),
        ... ])
        >>> report = await chain.run(page_numbers)
        >>> report.stages["write"].completed, report.balanced
    """

    def __init__(
        self,
        stages: Sequence[Stage],
        *,
        drain_timeout_s: float | None = FROM_HEAD,
        name: str = "chain",
    ) -> None:
        if isinstance(stages, str | bytes | Mapping) or not isinstance(stages, Iterable):
            raise TypeError(f"stages must be a list of Stage, got {show(stages)}")
        stages = tuple(stages)
        if not stages:
            raise ValueError("stages must hold at least one Stage, got none")
        names: set[str] = set()
        for index, stage in enumerate(stages):
            if not isinstance(stage, Stage):
                raise TypeError(f"stages[{index}] must be a Stage, got {show(stage)}")
            if stage.name in names:
                raise ValueError(f"stage names must be unique, got {stage.name!r} twice")
            names.add(stage.name)
        if stages[0].batching:
            raise ValueError(
                f"the first stage ({stages[0].name!r}) cannot batch (batch_size="
                f"{stages[0].batch_size}): its input comes straight from the source; "
                "put a stage before it"
            )
        if drain_timeout_s is FROM_HEAD:
            drain_timeout_s = stages[0].config.drain_timeout_s
        elif drain_timeout_s is not None:
            real("drain_timeout_s", drain_timeout_s, "seconds, or None", at_least=0)
        self.stages = stages
        self.drain_timeout_s = drain_timeout_s
        self.name = name
        self.state = State.IDLE
        self.report: ChainReport | None = None
        self._pipes: list[_StagePipeline] = []
        self._sinks: list[HandOff | None] = []
        self._formers: list[BatchFormer | None] = []
        self._stop_requested = False
        self._failure: BaseException | None = None
        self._former_timed_out = False
        self._closing: asyncio.Task[ChainReport] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observers: list[tuple[Callable[[str], Listener], list[Callable[[], None]]]] = []
        self._lineages: dict[Any, Callable[[], Any]] = {}

    def __repr__(self) -> str:
        names = ", ".join(stage.name for stage in self.stages)
        return f"<Chain {self.name!r} state={self.state.value} stages=[{names}]>"

    # -- lifecycle -----------------------------------------------------------------

    def stop(self) -> None:
        """Stop intake at the head; the run then drains stage by stage.

        Calling it again is harmless; called before the run, it takes effect
        at the start (nothing is read).
        """
        if not self._pipes:
            self._stop_requested = True
            return
        self._pipes[0].stop()

    async def run(
        self,
        source: Iterable[Any] | AsyncIterable[Any],
        *more_sources: Iterable[Any] | AsyncIterable[Any],
    ) -> ChainReport:
        """Feed every item of ``source`` (and ``more_sources``) through the chain, then drain.

        Returns:
            The :class:`~pipeline.chain.report.ChainReport`, also kept as ``self.report``.

        Raises:
            TypeError: a source is neither iterable nor async iterable.
            PipelineClosed: this chain has already run.
            SourceError: a source raised; the chain was drained first and the
                chain's report is on the exception.
            BaseException: a stage's handler raised something that is not an
                ``Exception`` (as :meth:`Pipeline.drain`); the chain is closed
                first and ``self.report`` balances.

        Like :meth:`Pipeline.run`, it neither returns nor raises before every
        stage has closed, however many times it is cancelled meanwhile.
        """
        for index, each in enumerate((source, *more_sources)):
            if not isinstance(each, Iterable | AsyncIterable):
                raise TypeError(
                    f"source {index} must be an iterable or async iterable, got {each!r}"
                )
        if self.state is not State.IDLE:
            raise PipelineClosed(f"{self!r} has already run; make a new Chain")
        self._build()
        source_error: SourceError | None = None
        try:
            try:
                await self._pipes[0].run(source, *more_sources)
            except SourceError as error:
                source_error = error
            except asyncio.CancelledError:
                raise
            except BaseException as error:
                self._fail(error)
            await self._drain_downstream()
        except asyncio.CancelledError:
            await self._shutdown()
            raise
        report = await self._shutdown()
        if self._failure is not None:
            raise self._failure
        if source_error is not None:
            cause = source_error.__cause__ or source_error
            raise SourceError(
                f"source raised {type(cause).__name__}: {describe_error(cause)}", report
            ) from cause
        return report

    def _build(self) -> None:
        """Make each stage's pipeline, join them, start all but the head's intake."""
        self._loop = asyncio.get_running_loop()
        self.state = State.OPEN
        for index, stage in enumerate(self.stages):
            config = dataclasses.replace(stage.config, drain_timeout_s=self.drain_timeout_s)
            on_own_stop = None if index == 0 else self._stage_stopped
            self._pipes.append(_StagePipeline(stage, config, on_own_stop))
            for make, detaches in self._observers:
                detaches.append(self._pipes[index].add_listener(make(stage.name)))
            former = None
            if stage.batching:
                former = BatchFormer(
                    self._pipes[index], stage.batch_size, stage.batch_window_s, config.keep_shed
                )
                former.lineages.update(self._lineages)
            self._formers.append(former)
        for index, (stage, pipe) in enumerate(zip(self.stages, self._pipes, strict=True)):
            downstream: Any = None
            turns = False
            if index + 1 < len(self._pipes):
                former = self._formers[index + 1]
                downstream = self._pipes[index + 1] if former is None else former
                after = self._pipes[index + 1].config
                # A batch former waits for its flusher when a batch is sealed: a turn already.
                turns = former is None and (
                    after.on_full == "reject" or after.queue_maxsize is None
                )
            sink = None
            if downstream is not None or stage.fan_out or stage.batching:
                sink = HandOff(
                    self._loop.time,
                    downstream,
                    expands=stage.fan_out or stage.batching,
                    batching=stage.batching,
                    on_downstream_closed=self._stage_stopped,
                    turns=turns,
                )
                pipe.hand_off_to(sink)
            self._sinks.append(sink)
        for pipe, former in zip(self._pipes[1:], self._formers[1:], strict=True):
            pipe.start()
            if former is not None:
                former.start(pipe.name)
        if self._stop_requested:
            self._pipes[0].stop()

    def _stage_stopped(self) -> None:
        """A stage after the head stopped on its own (it failed): stop intake, drain the rest."""
        self.stop()

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self.stop()

    async def _drain_downstream(self) -> None:
        """Drain each stage after the head, in order, by the chain's one deadline."""
        head = self._pipes[0]
        self.state = State.DRAINING
        deadline: float | None = None
        if self.drain_timeout_s is not None:
            stopped = head.intake_closed_s
            deadline = (
                stopped if stopped is not None else self._loop.time()
            ) + self.drain_timeout_s
        for pipe, former in zip(self._pipes[1:], self._formers[1:], strict=True):
            if self._failure is not None:
                return  # the close cancels what is left
            if former is not None:
                remaining = None if deadline is None else max(0.0, deadline - self._loop.time())
                if not await former.drain(remaining):
                    self._former_timed_out = True
            try:
                await pipe.drain_by(deadline)
            except asyncio.CancelledError:
                raise
            except BaseException as error:
                self._fail(error)

    async def _shutdown(self) -> ChainReport:
        """Close every stage once, however many callers ask or cancel (as Pipeline does)."""
        if self._closing is None:
            self._closing = self._loop.create_task(self._close(), name=f"{self.name}-close")
        return await close_once(self._closing)

    async def _close(self) -> ChainReport:
        """Close the stages head first; what is still inside is unfinished or stranded."""
        self.state = State.DRAINING
        for pipe, former in zip(self._pipes, self._formers, strict=True):
            pipe.stop_expected = True
            if former is not None:
                await former.abort()
            await pipe.close()
        self.state = State.CLOSED
        stages = {stage.name: self._stage_report(index) for index, stage in enumerate(self.stages)}
        head, tail = self._pipes[0].report, stages[self.stages[-1].name]
        self.report = ChainReport(
            stages=stages,
            offered=head.offered,
            completed=tail.completed,
            drain_timed_out=self._former_timed_out
            or any(each.drain_timed_out for each in stages.values()),
            started_s=head.started_s,
            finished_s=self._loop.time(),
        )
        return self.report

    def _stage_report(self, index: int) -> StageReport:
        stage, report = self.stages[index], self._pipes[index].report
        sink, former = self._sinks[index], self._formers[index]
        fields = {
            field.name: getattr(report, field.name) for field in dataclasses.fields(RunReport)
        }
        if former is not None:
            fields.update(_per_item(report, former, sink))
        return StageReport(
            **fields,
            name=stage.name,
            outputs=report.completed if sink is None else sink.outputs,
            handed_on=0 if sink is None else sink.handed_on,
            stranded=[] if sink is None else list(sink.stranded),
            hand_off_blocked_s=0.0 if sink is None else sink.blocked_s,
            batches=0 if former is None else former.batches,
        )

    # -- observation ---------------------------------------------------------------

    def add_listener(
        self, make: Callable[[str], Listener | Mapping[EventKind, Listener]]
    ) -> Callable[[], None]:
        """Add ``make(stage_name)`` as a listener of each stage's pipeline, now or when built.

        A stage's pipeline is made when the run starts, so ``make`` is called then, once
        per stage, and its answer is added with :meth:`Pipeline.add_listener
        <pipeline.listeners.Listeners.add_listener>` (same semantics: beside each stage's
        ``on_event``, isolated). For exporters (:mod:`pipeline.metrics`,
        :mod:`pipeline.tracing`).

        Returns:
            The detach: removes the listeners from every stage (harmless twice).
        """
        detaches: list[Callable[[], None]] = []
        observer = (make, detaches)
        self._observers.append(observer)
        for stage, pipe in zip(self.stages, self._pipes, strict=False):
            detaches.append(pipe.add_listener(make(stage.name)))

        def detach() -> None:
            if observer in self._observers:
                self._observers.remove(observer)
            while detaches:
                detaches.pop()()

        return detach

    def add_lineage(self, key: Any, hook: Callable[[], Any]) -> Callable[[], None]:
        """Ask ``hook`` for the origin of every payload a batching stage takes, now or when built.

        For :mod:`pipeline.tracing` (see :class:`~pipeline.chain.handoff.BatchFormer`'s
        lineage). Returns the detach (harmless twice).
        """
        self._lineages[key] = hook
        for former in self._formers:
            if former is not None:
                former.lineages[key] = hook

        def detach() -> None:
            self._lineages.pop(key, None)
            for former in self._formers:
                if former is not None:
                    former.lineages.pop(key, None)

        return detach

    def statistics(self) -> ChainStatistics:
        """A snapshot of every stage now, counted in items.

        Raises:
            PipelineClosed: the chain has not started.
        """
        if not self._pipes:
            raise PipelineClosed(f"{self!r} has not started; call this while run() runs")
        stages = {}
        for stage, pipe, sink, former in zip(
            self.stages, self._pipes, self._sinks, self._formers, strict=True
        ):
            snapshot = pipe.statistics()
            if former is not None:
                inside = former.admitted - sink.settled_items + len(former)
            else:
                inside = (
                    snapshot.admitted
                    - snapshot.completed
                    - snapshot.dead_lettered
                    - snapshot.expired
                )
            stages[stage.name] = StageStatistics(
                name=stage.name,
                pipeline=snapshot,
                items_inside=inside,
                items_handing_off=0 if sink is None else sink.pending,
                hand_off_blocked_s=0.0 if sink is None else sink.blocked_s,
            )
        return ChainStatistics(stages=stages)

    def items_bound(self, max_children: Mapping[str, int] | None = None) -> int | None:
        """The most items the chain ever holds at once, or None if a queue is unbounded.

        The sum of :meth:`Stage.items_bound` over the stages.

        Args:
            max_children: for fan-out stages, by name, the most items one parent yields.
        """
        children = dict(max_children or {})
        total = 0
        for stage in self.stages:
            bound = stage.items_bound(children.get(stage.name, 1))
            if bound is None:
                return None
            total += bound
        return total


def _per_item(report: RunReport, former: BatchFormer, sink: HandOff) -> dict[str, Any]:
    """A batching stage's account, batch by batch turned payload by payload."""
    letters = [
        DeadLetter(
            payload=payload, attempts=letter.attempts, errors=letter.errors, reason=letter.reason
        )
        for letter in report.dead_letters
        for payload in letter.payload
    ]
    unfinished = [payload for batch in report.unfinished for payload in batch]
    unfinished += former.unsent()
    shed: ShedLog = former.shed
    # Expired batches, payload by payload: the kept batches give the payloads kept,
    # and the exact count is what the rest of the account leaves.
    expired = ShedLog(None, [payload for batch in report.expired for payload in batch])
    expired_items = (
        former.offered - len(shed) - sink.completed_items - len(letters) - len(unfinished)
    )
    expired.dropped = max(0, expired_items - len(expired))
    return {
        "offered": former.offered,
        "admitted": former.offered - len(shed),
        "completed": sink.completed_items,
        "dead_letters": letters,
        "unfinished": unfinished,
        "shed": shed,
        "abandoned": [payload for batch in report.abandoned for payload in batch],
        "expired": expired,
    }
