"""Prometheus's ``/api/v1/query_range`` answers: read, checked, and asked for over HTTP.

An answer is ``{"status": "success", "data": {"resultType": "matrix",
"result": [{"metric": {labels}, "values": [[unix_s, "text"], ...]}, ...]}}``;
a file may hold one answer or a JSON list of them (several queries saved
together). :func:`parse_answers` checks every field it uses and returns the
series; a problem is a ``ValueError`` of one line naming the source, the
field (``[1].data.result[3].values[12]``), the value and what was expected.

:class:`Selector` is the part of PromQL a series is named with here,
``name{label="value", label=~"regex", label!="v", label!~"re"}``: matched
against saved series, or sent to a server as the query. :func:`fetch_range`
asks a server with the standard library (``urllib``), bounded in size and time.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

from .jsonlines import utf8_text

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_POINTS",
    "RangeSeries",
    "Selector",
    "counter_increases",
    "fetch_range",
    "join_series",
    "parse_answers",
    "read_answers",
]

MAX_ANSWER_BYTES = 256 * 2**20
"""The largest answer read, from a file or a server, bytes (256 MiB)."""
MAX_POINTS = 11_000
"""Points per series a server returns at most (Prometheus refuses more)."""


@dataclass(frozen=True)
class RangeSeries:
    """One series of a matrix: its labels (``__name__`` included) and its points."""

    labels: dict[str, str]
    times_s: np.ndarray
    values: np.ndarray
    where: str

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    @property
    def shown(self) -> str:
        """The series as PromQL names it: ``name{label="value", ...}``."""
        return str(_shown(self))


def _field(path: str, value: Any, kind: type | tuple[type, ...], expected: str, source: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        shown = (
            json.dumps(value)[:60] if not isinstance(value, dict | list) else type(value).__name__
        )
        raise ValueError(f"{source}: {path}: expected {expected}, got {shown}")
    return value


def _number(text: Any, path: str, source: str) -> float:
    if not isinstance(text, str):
        raise ValueError(
            f'{source}: {path}: expected a number as text ("1.5", "NaN"), '
            f"got {json.dumps(text)[:40]}"
        )
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"{source}: {path}: expected a number as text, got {text[:40]!r}"
        ) from None


def _series(item: Any, path: str, source: str) -> RangeSeries:
    _field(path, item, dict, 'an object with "metric" and "values"', source)
    if "histograms" in item and "values" not in item:
        raise ValueError(
            f"{source}: {path}: a native histogram; only classic histograms "
            "(_bucket series with le labels) are read"
        )
    labels = _field(f"{path}.metric", item.get("metric"), dict, "an object of labels", source)
    for key, value in labels.items():
        _field(f"{path}.metric.{key}", value, str, "a label value (text)", source)
    points = _field(f"{path}.values", item.get("values"), list, "a list of [time, value]", source)
    times = np.empty(len(points))
    values = np.empty(len(points))
    for j, point in enumerate(points):
        where = f"{path}.values[{j}]"
        if not isinstance(point, list) or len(point) != 2:
            raise ValueError(
                f'{source}: {where}: expected [unix_seconds, "value"], got {json.dumps(point)[:60]}'
            )
        t = _field(where, point[0], int | float, "a time in UNIX seconds", source)
        if not math.isfinite(t):
            raise ValueError(
                f"{source}: {where}: expected a finite time in UNIX seconds, got {t!r}"
            )
        times[j] = t
        values[j] = _number(point[1], where, source)
    if np.any(np.diff(times) <= 0):
        j = int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1
        raise ValueError(
            f"{source}: {path}.values[{j}]: times must increase, "
            f"got {times[j - 1]!r} then {times[j]!r}"
        )
    return RangeSeries(dict(labels), times, values, path)


def parse_answers(data: Any, source: str) -> list[RangeSeries]:
    """Every series of one ``query_range`` answer, or of a list of them.

    Raises:
        ValueError: anything but successful matrix answers (one line, naming the field).
    """
    answers = data if isinstance(data, list) else [data]
    if not answers:
        raise ValueError(f"{source}: an empty list; expected query_range answers")
    out: list[RangeSeries] = []
    for i, answer in enumerate(answers):
        at = f"[{i}]." if isinstance(data, list) else ""
        _field(
            at.rstrip(".") or "top level", answer, dict, "a query_range answer (an object)", source
        )
        status = answer.get("status")
        if status == "error":
            raise ValueError(
                f"{source}: {at}status: the query failed: {answer.get('errorType', '?')}: "
                f"{str(answer.get('error', ''))[:200]}"
            )
        if status != "success":
            raise ValueError(
                f'{source}: {at}status: expected "success", got {json.dumps(status)[:40]}'
            )
        body = _field(f"{at}data", answer.get("data"), dict, "an object", source)
        kind = body.get("resultType")
        if kind != "matrix":
            raise ValueError(
                f'{source}: {at}data.resultType: expected "matrix" (a query_range answer), got '
                f"{json.dumps(kind)[:40]}"
                + (
                    " (an instant query's answer: save /api/v1/query_range instead)"
                    if kind == "vector"
                    else ""
                )
            )
        result = _field(f"{at}data.result", body.get("result"), list, "a list of series", source)
        out += [_series(item, f"{at}data.result[{j}]", source) for j, item in enumerate(result)]
    return out


def read_answers(path: str, source: str) -> list[RangeSeries]:
    """:func:`parse_answers` of a saved file (at most :data:`MAX_ANSWER_BYTES`, UTF-8 JSON)."""
    with open(path, "rb") as f:
        raw = f.read(MAX_ANSWER_BYTES + 1)
    return parse_answers(_json(raw, source), source)


def _json(raw: bytes, source: str) -> Any:
    if len(raw) > MAX_ANSWER_BYTES:
        raise ValueError(
            f"{source}: more than {MAX_ANSWER_BYTES:,} bytes; "
            "query a shorter window or a coarser step"
        )
    try:
        return json.loads(utf8_text(raw, source, "a query_range answer (JSON)"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ValueError(f"{source}: nested too deeply to be a query_range answer") from None


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


@dataclass(frozen=True)
class Selector:
    """A metric name with label matchers: ``name{label="v", label=~"re", ...}``."""

    name: str
    matchers: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, what: str) -> Selector:
        """Read ``text``; ``what`` names it in the message (``--errors-series``)."""
        text = text.strip()
        head, brace, rest = text.partition("{")
        if not _NAME.fullmatch(head.strip()):
            raise ValueError(
                f'{what} must be a metric name, optionally with {{label="value"}}, '
                f"got {text[:60]!r}"
            )
        matchers: list[tuple[str, str, str]] = []
        if brace:
            if not rest.endswith("}"):
                raise ValueError(f"{what}: missing closing '}}' in {text[:60]!r}")
            body, at = rest[:-1], 0
            while at < len(body.strip()):
                found = _MATCHER.match(body, at)
                if found is None:
                    raise ValueError(
                        f"{what}: cannot read the label matcher at {body[at : at + 30]!r}; "
                        'expected label="value" (or !=, =~, !~)'
                    )
                label, op, value = found.group(1), found.group(2), found.group(3)
                value = value.encode().decode("unicode_escape") if "\\" in value else value
                if op in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise ValueError(
                            f'{what}: {label}{op}"{value}" is not a regular expression ({exc})'
                        ) from None
                matchers.append((label, op, value))
                at = found.end()
        return cls(head.strip(), tuple(matchers))

    def with_labels(self, labels: dict[str, str]) -> Selector:
        """This selector, also requiring ``label="value"`` for each of ``labels``."""
        return Selector(self.name, self.matchers + tuple((k, "=", v) for k, v in labels.items()))

    def renamed(self, name: str) -> Selector:
        return Selector(name, self.matchers)

    def matches(self, labels: dict[str, str]) -> bool:
        if labels.get("__name__") != self.name:
            return False
        for label, op, value in self.matchers:
            have = labels.get(label, "")
            if (op == "=" and have != value) or (op == "!=" and have == value):
                return False
            if op in ("=~", "!~") and (re.fullmatch(value, have) is not None) != (op == "=~"):
                return False
        return True

    def promql(self) -> str:
        parts = [f"{label}{op}{json.dumps(value)}" for label, op, value in self.matchers]
        return f"{self.name}{{{','.join(parts)}}}" if parts else self.name

    def __str__(self) -> str:
        return self.promql()


def join_series(series: list[RangeSeries], source: str) -> tuple[list[RangeSeries], int]:
    """One series per label set: the points of every answer holding it, in time order.

    A range past Prometheus's 11,000 points is saved as several windows; an
    answer may also hold a series another holds already (``{__name__=~"..."}``
    and one of its series). Points at the same time in two answers are read
    once when they agree.

    Returns:
        The joined series, and how many were given more than once.

    Raises:
        ValueError: two answers disagree at one time (one line naming both places).
    """
    groups: dict[frozenset, list[RangeSeries]] = {}
    for s in series:
        groups.setdefault(frozenset(s.labels.items()), []).append(s)
    out: list[RangeSeries] = []
    for parts in groups.values():
        if len(parts) == 1:
            out.append(parts[0])
            continue
        times = np.concatenate([p.times_s for p in parts])
        values = np.concatenate([p.values for p in parts])
        origin = np.concatenate([np.full(p.times_s.size, k) for k, p in enumerate(parts)])
        index = np.concatenate([np.arange(p.times_s.size) for p in parts])
        order = np.argsort(times, kind="stable")
        times, values, origin, index = times[order], values[order], origin[order], index[order]
        same = np.diff(times) == 0
        agree = (values[1:] == values[:-1]) | (np.isnan(values[1:]) & np.isnan(values[:-1]))
        bad = np.flatnonzero(same & ~agree)
        if bad.size:
            j = int(bad[0])
            first, second = parts[origin[j]], parts[origin[j + 1]]
            raise ValueError(
                f"{source}: {_shown(first)} has two values at UNIX time {float(times[j])!r}: "
                f"{float(values[j])!r} ({first.where}.values[{index[j]}]) and "
                f"{float(values[j + 1])!r} ({second.where}.values[{index[j + 1]}]); windows "
                "of one series must agree where they overlap"
            )
        keep = np.concatenate([[True], ~same])
        where = (
            f"{parts[0].where} joined with {', '.join(p.where for p in parts[1:])} (in time order)"
        )
        out.append(RangeSeries(parts[0].labels, times[keep], values[keep], where))
    return out, len(series) - len(out)


def _shown(series: RangeSeries) -> Selector:
    return Selector(
        series.name, tuple((k, "=", v) for k, v in series.labels.items() if k != "__name__")
    )


def counter_increases(series: RangeSeries, source: str) -> np.ndarray:
    """Per-step increases of a cumulative counter: a drop is a reset (the new value counts).

    The first point has no increase of its own (0). NaN or negative values are errors.
    """
    v = series.values
    bad = np.flatnonzero(~np.isfinite(v) | (v < 0))
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"{source}: {series.where}.values[{j}]: {_shown(series)} "
            f"is {float(v[j])!r}; a counter must be a finite number >= 0"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # beyond floating point: the caller says
        steps = np.diff(v)
    return np.concatenate([[0.0], np.where(steps >= 0, steps, v[1:])])


def fetch_range(
    url: str, query: str, *, start_s: float, end_s: float, step_s: float, timeout_s: float = 30.0
) -> Any:
    """The JSON of ``GET URL/api/v1/query_range`` for ``query`` (a server's error answer too).

    Raises:
        ValueError: the server cannot be reached or answers with something
            that is not JSON (one line naming the URL and the reason).
    """
    params = urllib.parse.urlencode(
        {"query": query, "start": repr(start_s), "end": repr(end_s), "step": repr(step_s)}
    )
    address = f"{url.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(address, timeout=timeout_s) as answer:
            raw = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:  # Prometheus answers a bad query with 400 and JSON
        raw = exc.read(MAX_ANSWER_BYTES + 1)
        if not raw.lstrip().startswith(b"{"):
            raise ValueError(
                f"prometheus {url}: HTTP {exc.code} {exc.reason} for query {query!r}"
            ) from None
    except urllib.error.URLError as exc:
        reason = getattr(exc.reason, "strerror", None) or exc.reason
        raise ValueError(f"prometheus {url}: cannot connect ({reason})") from None
    except (OSError, ValueError) as exc:  # a timeout, a reset connection, a malformed URL
        raise ValueError(f"prometheus {url}: cannot query ({exc})") from None
    return _json(raw, f"prometheus {url} (query {query!r})")
