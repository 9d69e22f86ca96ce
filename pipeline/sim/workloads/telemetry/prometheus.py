"""Read Prometheus data (a saved ``query_range`` answer, or a server) into an ``Observed``.

Which series, by default the metrics contract's names (labels ``pipeline``
and, in a chain, ``stage``; ``pipeline=``/``stage=`` choose one when the data
holds several):

- **arrivals**: ``pipeline_items_offered_total``, a counter; its increase in
  each step becomes ``counts`` per ``interval_s`` (the step);
- **service**: the histogram ``pipeline_attempt_duration_seconds``: each
  ``_bucket{le}``'s increase over the window, ``+Inf`` included, and ``_sum``'s;
- **failures**: ``pipeline_attempts_total{result}``: attempts of every
  result, failed ones those with ``result="failed"`` or ``"timeout"``;
- **backlog**: ``pipeline_queue_depth``'s last value; **workers**:
  ``pipeline_workers``'s last value (each summed over the series that match:
  several instances of one pipeline add up).

For a service not built on this engine, ``arrivals_series`` (a request
counter), ``duration_series`` (a histogram's base name, or its ``_bucket``
series) and ``errors_series`` (an error counter; attempts are then the
histogram's count) name the series, each with label matchers if needed
(``http_requests_total{job="api",code=~"5.."}``). Without an error counter,
a request counter labelled by status (``code``, ``status``, ``status_code``,
...) gives the failures itself: requests of a 5xx code or an error status,
of all; a counter with neither says in a note that no failure was counted.

Every number is held to what a scenario runs (``observed``'s ``MAX_``
limits): at most 10**9 arrivals in the window, 10**6 workers, 10**9 items
waiting; an arrivals counter that does not increase is refused, naming it.

A series given in several answers (a range saved as windows, to stay within
11,000 points each) is joined in time order; points at one time must agree.

Counters are cumulative: an increase is the difference of consecutive
points, and a drop is a counter reset (the process restarted), after which
the new value is the increase, as PromQL's ``increase`` treats it (without
its extrapolation). A gap of several steps spreads its increase evenly over
them. Several series of one counter (instances) are added step by step.

Sources: a path to a saved answer (``curl .../api/v1/query_range?...`` or a
JSON list of several answers), or a server's URL (``http://127.0.0.1:9090``)
with a window: ``start_s``/``end_s`` (UNIX seconds; default the last hour)
and ``step_s`` (default 15 s, coarsened to keep within 11,000 points).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections import defaultdict

import numpy as np

from .observed import (
    MAX_ARRIVALS,
    MAX_BACKLOG,
    MAX_COUNT,
    MAX_INTERVALS,
    MAX_SECONDS,
    MAX_WORKERS,
    Observed,
    ServiceHistogram,
    check_number,
)
from .query_range import (
    MAX_POINTS,
    RangeSeries,
    Selector,
    counter_increases,
    fetch_range,
    join_series,
    parse_answers,
    read_answers,
)

__all__ = ["DEFAULT_STEP_S", "read"]

DEFAULT_STEP_S = 15.0
"""A server's query step when none is given, seconds (Prometheus's usual scrape interval)."""
_WINDOW_S = 3600.0  # a server's window when no start is given: the last hour

_ARRIVALS = "pipeline_items_offered_total"
_DURATION = "pipeline_attempt_duration_seconds"
_ATTEMPTS = "pipeline_attempts_total"
_BACKLOG = "pipeline_queue_depth"
_WORKERS = "pipeline_workers"
_FAILED_RESULTS = ("failed", "timeout")
# A request counter's status label, by the names instrumentation libraries give it.
_STATUS_LABELS = ("code", "status", "status_code", "http_status_code",
                  "http_response_status_code", "response_code", "outcome", "result")  # fmt: skip
_SERVER_ERROR = re.compile(r"5\d\d|5xx")
_ERROR_WORDS = frozenset(("error", "failed", "failure", "fail", "timeout", "server_error"))
_ARRIVED = "arrivals in the window"
_SCENARIO = "the most a scenario runs"
_EXACT = "whole numbers a float holds exactly"


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _window(
    start_s: float | None, end_s: float | None, step_s: float | None
) -> tuple[float, float, float, list[str]]:
    notes = []
    end = time.time() if end_s is None else float(end_s)
    start = end - _WINDOW_S if start_s is None else float(start_s)
    for name, value in (("start", start), ("end", end)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be UNIX seconds >= 0, got {value!r}")
    if not end > start:
        raise ValueError(f"end must be after start, got start={start!r}, end={end!r}")
    if step_s is None:
        step = DEFAULT_STEP_S * max(1, math.ceil((end - start) / DEFAULT_STEP_S / MAX_POINTS))
        if step != DEFAULT_STEP_S:
            notes.append(f"step {step:g} s (15 s would exceed {MAX_POINTS:,} points per series)")
    else:
        step = float(step_s)
        if not (math.isfinite(step) and step >= 0.001):
            raise ValueError(f"step must be a duration >= 0.001 s, got {step_s!r}")
        if (end - start) / step > MAX_POINTS:
            raise ValueError(
                f"step {step:g} s gives {math.ceil((end - start) / step):,} points per series over "
                f"{end - start:g} s; Prometheus returns at most {MAX_POINTS:,}: use a step of at "
                f"least {math.ceil((end - start) / MAX_POINTS):g} s"
            )
    return start, end, step, notes


class _Reader:
    def __init__(self, source: str, series: list[RangeSeries], step_s: float | None) -> None:
        self.source = source
        self.step_s = step_s
        self.notes: list[str] = []
        # A range saved as several windows, or answers that overlap ({__name__=~"pipeline_.+"}
        # and one of its series): each series is joined into one, each point read once.
        self.series, repeated = join_series(series, source)
        if repeated:
            self.notes.append(
                f"{repeated} series given again in another answer (windows of one range, or "
                "answers that overlap): joined in time order, each point read once"
            )

    def matching(self, selector: Selector) -> list[RangeSeries]:
        return [s for s in self.series if s.values.size and selector.matches(s.labels)]

    def grid(self, found: list[RangeSeries]) -> tuple[float, float]:
        """The first time and the step of the points of ``found`` (one query_range grid)."""
        times = np.unique(np.concatenate([s.times_s for s in found]))
        t0 = float(times[0])
        if self.step_s is not None:
            step = self.step_s
        elif times.size > 1:
            step = float(np.min(np.diff(times)))
        else:
            raise ValueError(
                f"{self.source}: {found[0].name} has one point; a rate needs two or more"
            )
        steps = (times[-1] - t0) / step
        if steps > MAX_INTERVALS:
            raise ValueError(
                f"{self.source}: {found[0].name}'s points span {times[-1] - t0:.6g} s in steps of "
                f"{step:g} s, {steps:,.0f} steps; allowed: at most {MAX_INTERVALS:,} (answers of "
                "several ranges, far apart?)"
            )
        off = (times - t0) / step
        bad = np.flatnonzero(np.abs(off - np.round(off)) > 1e-3)
        if bad.size:
            raise ValueError(
                f"{self.source}: {found[0].name}: the points are not on one step of {step:g} s "
                f"(a point at {times[bad[0]]!r}); save query_range answers of one step"
            )
        return t0, step

    def counts(self, selector: Selector) -> tuple[np.ndarray, float, float]:
        """A counter's increase per step, added over its series; and the step and first time."""
        found = self.require(selector, "arrivals (a request counter)")
        t0, step = self.grid(found)
        last = max(round((s.times_s[-1] - t0) / step) for s in found)
        counts = np.zeros(max(last, 1))
        gaps = resets = 0
        for s in found:
            index = np.round((s.times_s - t0) / step).astype(np.int64)
            up = self.increases(s, MAX_ARRIVALS, _ARRIVED, _SCENARIO)
            resets += int(np.sum(np.diff(s.values) < 0))
            for i in range(1, index.size):
                width = int(index[i] - index[i - 1])
                gaps += width > 1
                with np.errstate(over="ignore", invalid="ignore"):  # inf: refused below
                    counts[index[i - 1] : index[i]] += up[i] / width
        if gaps:
            self.notes.append(f"{gaps} gap(s) in {selector}: each increase spread over its steps")
        if resets:
            self.notes.append(f"{resets} counter reset(s) in {selector} counted as restarts from 0")
        check_number(
            float(counts.sum()), MAX_ARRIVALS, f"{self.source}: {selector} increased by",
            _ARRIVED, _SCENARIO,
        )  # fmt: skip
        if not counts.sum() > 0:
            raise ValueError(
                f"{self.source}: {selector} does not increase in the window ({counts.size} steps "
                f"of {step:g} s from UNIX time {t0:.3f}): no arrivals to fit a rate to; allowed: a "
                "counter that counts at least one"
            )
        self.notes.append(
            f"arrivals: the increase of {selector} per {step:g} s step ({len(found)} series, "
            f"{counts.size} steps from UNIX time {t0:.3f})"
        )
        return counts, step, t0

    def require(self, selector: Selector, what: str) -> list[RangeSeries]:
        found = self.matching(selector)
        if not found:
            names = sorted({s.name for s in self.series})
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ValueError(
                f"{self.source}: no series {selector} for the {what}; the data holds "
                f"{shown or 'no series'}"
            )
        return found

    def increases(self, series: RangeSeries, at_most: float, what: str, why: str) -> np.ndarray:
        """A counter's increases, their running sum at most ``at_most`` ``what`` (``why``)."""
        up = counter_increases(series, self.source)
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.cumsum(up)
        over = np.flatnonzero(~np.isfinite(total) | (total > at_most))
        if over.size:
            j = int(over[0])
            check_number(
                float(total[j]), at_most,
                f"{self.source}: {series.where}.values[{j}]: {series.shown} (at "
                f"{series.values[j]:.6g}) has increased by", what, why,
            )  # fmt: skip
        return up

    def total(self, found: list[RangeSeries], at_most: float, what: str, why: str) -> float:
        """The increase over the window, added over ``found``'s series."""
        value = float(sum(self.increases(s, at_most, what, why).sum() for s in found))
        where = f"{self.source}: {found[0].name} (added over {len(found)} series) increased by"
        return check_number(value, at_most, where, what, why) if found else 0.0

    def histogram(self, base: Selector) -> ServiceHistogram:
        buckets = self.require(base.renamed(f"{base.name}_bucket"), "service times (a histogram)")
        by_bound: dict[float, float] = defaultdict(float)
        groups: dict[tuple, dict[float, RangeSeries]] = defaultdict(dict)
        for s in buckets:
            text = s.labels.get("le")
            try:
                bound = float(text) if text is not None else math.nan
            except ValueError:
                bound = math.nan
            if not (bound > 0):
                raise ValueError(
                    f"{self.source}: {s.where}.metric.le: expected a bucket bound > 0 "
                    f'(seconds) or "+Inf", got {text!r}'
                )
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            groups[key][bound] = s
            by_bound[bound] += self.total([s], MAX_COUNT, "observations", _EXACT)
        for members in groups.values():
            self._check_cumulative(members)
        bounds = np.array(sorted(by_bound))
        if not math.isinf(bounds[-1]):
            raise ValueError(
                f'{self.source}: {base.name}_bucket has no le="+Inf" bucket '
                "(every histogram has one)"
            )
        cumulative = np.array([by_bound[b] for b in bounds])
        check_number(
            float(cumulative[-1]), MAX_COUNT,
            f'{self.source}: {base.name}_bucket{{le="+Inf"}} increased by', "observations", _EXACT,
        )  # fmt: skip
        drop = np.flatnonzero(np.diff(cumulative) < -1e-9)
        if drop.size:
            j = int(drop[0])
            raise ValueError(
                f'{self.source}: {base.name}_bucket: the increase at le="{bounds[j + 1]:g}" '
                f'({cumulative[j + 1]:g}) is below that at le="{bounds[j]:g}" ({cumulative[j]:g}); '
                "buckets are cumulative"
            )
        sums = self.matching(base.with_labels({}).renamed(f"{base.name}_sum"))
        total = (
            self.total(
                sums,
                MAX_SECONDS * max(float(cumulative[-1]), 1.0),
                "seconds",
                f"{MAX_SECONDS:g} s per observation at most",
            )
            if sums
            else math.nan
        )
        self.notes.append(
            f"service: the increase of each {base.renamed(base.name + '_bucket')} bucket "
            "over the window "
            f"({len(bounds)} bounds, {len(groups)} series each)"
            + ("" if sums else f"; no {base.name}_sum, so no observed mean")
        )
        return ServiceHistogram(bounds, np.maximum.accumulate(cumulative), total)

    def _check_cumulative(self, members: dict[float, RangeSeries]) -> None:
        bounds = sorted(members)
        for low, high in itertools.pairwise(bounds):
            a, b = members[low], members[high]
            common, ia, ib = np.intersect1d(a.times_s, b.times_s, return_indices=True)
            bad = np.flatnonzero(b.values[ib] < a.values[ia])
            if bad.size:
                j = int(ib[bad[0]])
                raise ValueError(
                    f'{self.source}: {b.where}.values[{j}]: bucket le="{high:g}" holds '
                    f'{b.values[j]:g}, less than le="{low:g}" ({a.values[ia[bad[0]]]:g}) at '
                    f"UNIX time {float(common[bad[0]])!r}; buckets are cumulative"
                )

    def last_value(
        self, selector: Selector, name: str, what: str, at_most: float, why: str
    ) -> int | None:
        """A gauge's last value (``name``), added over its series, from 0 to ``at_most``."""
        found = self.matching(selector)
        if not found:
            return None
        value = 0.0
        for s in found:
            where = f"{self.source}: {s.where}.values[{s.values.size - 1}]: {s.shown} is"
            value += check_number(float(s.values[-1]), at_most, where, what, why)
        where = f"{self.source}: {selector} (added over {len(found)} series) is"
        check_number(value, at_most, where, what, why)
        self.notes.append(f"{name}: the last value of {selector} ({len(found)} series)")
        return round(value)


def read(
    path_or_url: str,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
    step_s: float | None = None,
    pipeline: str | None = None,
    stage: str | None = None,
    arrivals_series: str | None = None,
    duration_series: str | None = None,
    errors_series: str | None = None,
) -> Observed:
    """What Prometheus data says about one service (see the module docstring).

    Args:
        path_or_url: a saved ``query_range`` answer (JSON), or a server's URL.
        start_s, end_s, step_s: a server's window and step (UNIX seconds,
            seconds); not for a file, which holds its own.
        pipeline, stage: keep the series with these labels.
        arrivals_series, duration_series, errors_series: series for a
            service not built on this engine (see the module docstring).

    Returns:
        An :class:`~pipeline.sim.workloads.telemetry.observed.Observed`.

    Raises:
        ValueError: a malformed answer, a missing series, impossible values
            (one line naming the file or URL and the field), a window that
            cannot be queried, or a server that cannot be reached.
        OSError: the file cannot be read.
    """
    labels = {k: v for k, v in (("pipeline", pipeline), ("stage", stage)) if v is not None}
    arrivals = (
        Selector.parse(arrivals_series, "arrivals_series")
        if arrivals_series
        else Selector(_ARRIVALS)
    ).with_labels(labels)
    duration = (
        _histogram_base(duration_series) if duration_series else Selector(_DURATION)
    ).with_labels(labels)
    errors = (
        Selector.parse(errors_series, "errors_series").with_labels(labels)
        if errors_series
        else None
    )
    attempts = Selector(_ATTEMPTS).with_labels(labels)
    gauges = {
        "backlog": Selector(_BACKLOG).with_labels(labels),
        "workers": Selector(_WORKERS).with_labels(labels),
    }
    parts = ("bucket", "sum")
    wanted = [arrivals, *(duration.renamed(f"{duration.name}_{part}") for part in parts),
              errors or attempts, *gauges.values()]  # fmt: skip
    notes: list[str] = []
    if _is_url(path_or_url):
        source = f"prometheus {path_or_url}"
        start, end, step, notes = _window(start_s, end_s, step_s)
        answers = [
            fetch_range(path_or_url, s.promql(), start_s=start, end_s=end, step_s=step)
            for s in wanted
        ]
        series = parse_answers(answers, source)
        notes.append(
            f"queried {path_or_url} from UNIX time {start:.3f} to {end:.3f} every {step:g} s"
        )
    else:
        given = [
            n for n, v in (("start", start_s), ("end", end_s), ("step", step_s)) if v is not None
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)}: a window and step are for a Prometheus server (give its "
                f"URL); the saved file {path_or_url} holds its own"
            )
        source = f"prometheus {path_or_url}"
        series, step = read_answers(path_or_url, source), None
    reader = _Reader(source, series, step)
    reader.notes += notes
    _one_target(reader, arrivals, labels, "arrivals (a request counter)")
    _one_target(
        reader, duration.renamed(f"{duration.name}_bucket"), labels, "service times (a histogram)"
    )
    counts, interval, _ = reader.counts(arrivals)
    histogram = reader.histogram(duration)
    total, failed = _failures(reader, errors, attempts, arrivals, duration, histogram)
    backlog = reader.last_value(
        gauges["backlog"], "backlog", "items waiting", MAX_BACKLOG,
        "a scenario's initial backlog at most",
    )  # fmt: skip
    workers = reader.last_value(
        gauges["workers"], "workers", "workers", MAX_WORKERS, "a pipeline's concurrency at most"
    )
    return Observed(
        source=source,
        interval_s=interval,
        counts=counts,
        histogram=histogram,
        attempts=total,
        failed=failed,
        backlog=backlog,
        workers=workers or None,
        # A service's request counter and error counter: each request is one attempt.
        max_attempts=1 if errors is not None else None,
        notes=tuple(reader.notes),
    )


def _histogram_base(text: str) -> Selector:
    """A histogram's base name, given as itself or as its ``_bucket`` series (what a UI lists)."""
    selector = Selector.parse(text, "duration_series")
    if selector.name.endswith("_bucket") and len(selector.name) > len("_bucket"):
        return selector.renamed(selector.name.removesuffix("_bucket"))
    return selector


def _failures(
    reader: _Reader,
    errors: Selector | None,
    attempts: Selector,
    arrivals: Selector,
    duration: Selector,
    histogram: ServiceHistogram,
) -> tuple[int | None, int | None]:
    """``(attempts, failed)`` in the window, from the first source of them the data has.

    An error counter given (of the histogram's count); the engine's attempts
    by result; a request counter labelled by status (``code``, ``status``,
    ...: 5xx and error statuses failed); else none, said in a note.
    """
    if errors is not None:
        failed = round(reader.total(reader.matching(errors), MAX_COUNT, "errors", _EXACT))
        done = round(float(histogram.cumulative_counts[-1]))
        if failed > done:
            raise ValueError(
                f"{reader.source}: {errors} counts {failed} errors, more than the {done} requests "
                f"{duration.name}_count measured in the window"
            )
        reader.notes.append(f"failures: the increase of {errors} of the {duration.name} count")
        return done, failed
    found = reader.matching(attempts)
    if found:
        total = round(reader.total(found, MAX_COUNT, "attempts", _EXACT))
        failing = [s for s in found if s.labels.get("result") in _FAILED_RESULTS]
        failed = round(reader.total(failing, MAX_COUNT, "attempts", _EXACT))
        reader.notes.append(f"failures: {attempts} with result failed or timeout, of all results")
        return total, failed
    requests = reader.matching(arrivals)
    label = next((k for k in _STATUS_LABELS if any(k in s.labels for s in requests)), None)
    if label is None:
        reader.notes.append(
            f"failures: none counted, so none assumed: no {attempts} series, {arrivals} has no "
            f"status label ({', '.join(_STATUS_LABELS)}), and no errors series was given "
            "(--errors-series)"
        )
        return None, None
    failing = [s for s in requests if _failed_status(s.labels.get(label, ""))]
    total = round(reader.total(requests, MAX_COUNT, "requests", _EXACT))
    failed = round(reader.total(failing, MAX_COUNT, "requests", _EXACT))
    statuses = sorted({s.labels.get(label, "") for s in failing})
    shown = ", ".join(statuses[:8]) + (", ..." if len(statuses) > 8 else "")
    reader.notes.append(
        f"failures: {arrivals} by its {label} label: the requests of status 5xx or an error "
        f"({shown or 'none in the window'}), of all statuses"
    )
    return total, failed


def _failed_status(value: str) -> bool:
    """A 5xx code, or a status word that says the request failed."""
    text = value.strip().lower()
    return bool(_SERVER_ERROR.fullmatch(text)) or text in _ERROR_WORDS


def _one_target(reader: _Reader, selector: Selector, labels: dict[str, str], what: str) -> None:
    """Refuse data of several pipelines (or stages) unless one was chosen."""
    found = reader.require(selector, what)
    for label in ("pipeline", "stage"):
        values = sorted({s.labels[label] for s in found if label in s.labels})
        if label not in labels and len(values) > 1:
            raise ValueError(
                f"{reader.source}: {selector} holds {len(values)} {label}s "
                f"({', '.join(values[:6])}{', ...' if len(values) > 6 else ''}); choose one with "
                f"--{label} NAME"
            )
