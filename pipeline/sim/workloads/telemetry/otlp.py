"""An OTLP/JSON span export as an :class:`~.observed.Observed`: one attempt per span.

The format is the OpenTelemetry Collector's file exporter's (and the Python
SDK's OTLP JSON file exporter's): one ``ExportTraceServiceRequest`` per line,
``{"resourceSpans": [{"resource": {...}, "scopeSpans": [{"spans": [...]}]}]}``,
in OTLP's JSON encoding: lowerCamelCase keys, trace and span ids in hex, enums
(``kind``, ``status.code``) as integers, 64-bit integers (the
``...UnixNano`` times, ``intValue``) as decimal strings or numbers, fields at
their default value left out. A single pretty-printed request (an OTLP/HTTP
body, opentelemetry-proto's examples) is read too, and gzip. Spans are not in
time order in such a file; each is placed by its own times.

Two kinds of span are read:

- **messaging process spans** (the default): spans with
  ``messaging.operation.type = "process"``, as :mod:`pipeline.tracing` makes
  one per attempt, grouped by ``messaging.destination.name`` (the pipeline or
  stage; ``destination=`` picks one when the file has several). Each span is
  an attempt; it failed when its status is ERROR or it has ``error.type``. An
  item is its first attempt: ``pipeline.attempt == 1`` where the span says,
  otherwise a span that links to no other selected span (a retry links to its
  item's first attempt). The item arrived at the first attempt's start minus
  ``pipeline.wait_seconds`` (its time in the queue) when the span carries it.
  Attempts cut short by the end of a run (``error.type = "unfinished"``) are
  left out: their durations are not service times.
- **server spans** (``span_name=``): spans of kind SERVER with that name, a
  service's one span per request whatever it is built on; each is a request
  that arrived at its start, failed when its status is ERROR.

``service=`` keeps only the spans of resources whose ``service.name`` is that.
The file is streamed, one line at a time; what is kept is 32 bytes per
selected span.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from array import array
from typing import Any

import numpy as np

from .jsonlines import json_objects
from .observed import MAX_SECONDS, Observed, check_number

__all__ = ["MAX_LINE_CHARS", "WAIT_ATTRIBUTE", "read"]

MAX_LINE_CHARS = 1 << 24
"""The longest line read, bytes (16 Mi: one export request of many thousand spans)."""

WAIT_ATTRIBUTE = "pipeline.wait_seconds"
"""The span attribute holding an item's time in the queue before its first attempt, seconds."""

_WHAT = 'an OTLP/JSON ExportTraceServiceRequest ({"resourceSpans": [...]})'
_HEX16 = re.compile(r"[0-9a-fA-F]{16}")
_SERVER = 2
_ERROR = 2
_MAX_NAMES = 20  # names remembered for a "no such name" message
_MAX_DESTINATIONS = 1000
_UNFINISHED = "unfinished"
_PROCESS_KEYS = ("messaging.operation.type", "messaging.operation")  # current, before 1.26
_KEYS = frozenset(
    {*_PROCESS_KEYS, "messaging.destination.name", "error.type", "pipeline.attempt", WAIT_ATTRIBUTE}
)


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: {key} must be an array, got {value!r:.60}")
    return value


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object, got {value!r:.60}")
    return value


def _uint(value: object, where: str, *, limit: int = 1 << 63) -> int:
    """A protobuf 64-bit integer (a decimal string or a number) in [0, limit)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise ValueError(f"{where} must be a whole number (a decimal string), got {value!r:.60}")
    if not 0 <= number < limit:
        raise ValueError(f"{where} must be >= 0 and < {limit}, got {number}")
    return number


def _any_value(value: object, where: str) -> Any:
    """An ``AnyValue``'s scalar (arrays, maps and bytes come back as None: never needed here)."""
    value = _object(value, where)
    if "stringValue" in value:
        text = value["stringValue"]
        if not isinstance(text, str):
            raise ValueError(f"{where}.stringValue must be a string, got {text!r:.60}")
        return text
    if "intValue" in value:
        raw = value["intValue"]
        if isinstance(raw, str) and re.fullmatch(r"-?\d{1,20}", raw):
            return int(raw)
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise ValueError(f"{where}.intValue must be an integer, got {raw!r:.60}")
    if "doubleValue" in value:
        raw = value["doubleValue"]
        if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
            return float(raw.replace("Infinity", "inf"))
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        raise ValueError(f"{where}.doubleValue must be a number, got {raw!r:.60}")
    if "boolValue" in value:
        raw = value["boolValue"]
        if not isinstance(raw, bool):
            raise ValueError(f"{where}.boolValue must be true or false, got {raw!r:.60}")
        return raw
    return None


def _attributes(obj: dict[str, Any], where: str, keys: frozenset[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for i, kv in enumerate(_list(obj, "attributes", where)):
        # Messages are formatted only on error: a span has many attributes, few of them read.
        if not isinstance(kv, dict):
            raise ValueError(f"{where}.attributes[{i}] must be an object, got {kv!r:.60}")
        key = kv.get("key")
        if not isinstance(key, str):
            raise ValueError(f"{where}.attributes[{i}].key must be a string, got {key!r:.60}")
        if key in keys:
            found[key] = _any_value(kv.get("value"), f"{where}.attributes[{i}] ({key}).value")
    return found


def _span_id(value: object, where: str) -> int:
    if not (isinstance(value, str) and _HEX16.fullmatch(value)):
        raise ValueError(f"{where} must be 16 hex digits, got {value!r:.60}")
    return int(value, 16)


class _Spans:
    """The selected spans of one destination (or one span name), column by column."""

    def __init__(self) -> None:
        self.start_ns = array("q")
        self.end_ns = array("q")
        self.failed = array("b")
        self.first = array("b")  # 1 first attempt, 0 retry, -1 unknown (decided by links)
        self.attempt = array("q")  # pipeline.attempt, 0: not given
        self.wait_ns = array("q")  # -1: not given
        self.span_id = array("Q")
        self.link = array("Q")  # the last link's span id (a retry's first attempt), 0: none
        self.unfinished = 0

    def __len__(self) -> int:
        return len(self.start_ns)


def read(
    path: str | os.PathLike[str],
    *,
    destination: str | None = None,
    span_name: str | None = None,
    service: str | None = None,
) -> Observed:
    """Read an OTLP/JSON span export: arrivals, attempt durations and failures.

    Args:
        path: the file (one export request per line, plain or gzip).
        destination: read the messaging process spans of this
            ``messaging.destination.name`` (a pipeline's name, a chain's
            stage); needed when the file has spans of several.
        span_name: read instead the SERVER spans of this name (a service not
            built on this engine: ``"GET /orders"``).
        service: keep only spans whose resource's ``service.name`` is this.

    Returns:
        An :class:`~.observed.Observed` with ``arrivals_s`` (seconds from the
        first arrival, sorted), ``service_s`` (each attempt's duration,
        seconds, in start order), ``attempts``, ``failed`` and
        ``max_attempts`` (1 for server spans, whose durations are response
        times: ``response_times``).

    Raises:
        ValueError: one line naming the file, the line and the field: not
            OTLP/JSON (or compressed with zstd), a malformed span, a span that
            ends before it starts, or no span to read (the message lists the
            destinations, span names or services seen).
        OSError: the file cannot be opened or read.
    """
    if destination is not None and span_name is not None:
        raise ValueError("give destination (messaging spans) or span_name (server spans), not both")
    source = os.fspath(path)
    groups: dict[str | None, _Spans] = {}
    seen: dict[str, set[str]] = {"server": set(), "service": set(), "destination": set()}
    spans_read = 0
    for line, request in json_objects(
        source, what=_WHAT, max_line_chars=MAX_LINE_CHARS, whole_document=True
    ):
        if "resourceSpans" not in request:
            raise ValueError(
                f"{source} line {line}: no resourceSpans; expected {_WHAT} (metrics or logs "
                "are not spans)"
            )
        batches = _list(request, "resourceSpans", f"{source} line {line}")
        for r, resource_spans in enumerate(batches):
            where_r = f"{source} line {line}: resourceSpans[{r}]"
            resource_spans = _object(resource_spans, where_r)
            resource = _object(resource_spans.get("resource") or {}, f"{where_r}.resource")
            name_of_service = _attributes(
                resource, f"{where_r}.resource", frozenset({"service.name"})
            ).get("service.name")
            if isinstance(name_of_service, str) and len(seen["service"]) < _MAX_NAMES:
                seen["service"].add(name_of_service)
            keep_resource = service is None or name_of_service == service
            for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", where_r)):
                where_s = f"{where_r}.scopeSpans[{s}]"
                for k, span in enumerate(_list(_object(scope_spans, where_s), "spans", where_s)):
                    spans_read += 1
                    _one_span(
                        _object(span, f"{where_s}.spans[{k}]"),
                        f"{where_s}.spans[{k}]",
                        groups,
                        seen,
                        keep_resource=keep_resource,
                        span_name=span_name,
                    )
    return _observed(source, groups, seen, spans_read, destination, span_name, service)


def _one_span(
    span: dict[str, Any],
    where: str,
    groups: dict[str | None, _Spans],
    seen: dict[str, set[str]],
    *,
    keep_resource: bool,
    span_name: str | None,
) -> None:
    """Check one span; keep it in its destination's group when it is a span being read."""
    name = span.get("name")
    if not isinstance(name, str):
        raise ValueError(f"{where}.name must be a string, got {name!r:.60}")
    kind = span.get("kind", 0)
    if isinstance(kind, bool) or not isinstance(kind, int) or not 0 <= kind <= 5:
        raise ValueError(
            f"{where}.kind must be an integer 0-5 (OTLP/JSON writes enums as "
            f"numbers), got {kind!r:.60}"
        )
    if kind == _SERVER and len(seen["server"]) < _MAX_NAMES:
        seen["server"].add(name)
    if not keep_resource:
        return
    if span_name is not None:
        if kind != _SERVER or name != span_name:
            return
        key: str | None = None
        attributes: dict[str, Any] = {}
    else:
        attributes = _attributes(span, where, _KEYS)
        operation = next((attributes[k] for k in _PROCESS_KEYS if k in attributes), None)
        if operation != "process":
            return
        key = attributes.get("messaging.destination.name")
        if not isinstance(key, str):
            raise ValueError(
                f"{where}: a process span needs messaging.destination.name, got {key!r:.60}"
            )
        seen["destination"].add(key)
    start, end = _span_times(span, where)
    code = _status_code(span, where)
    group = _group(groups, key, where)
    error_type = attributes.get("error.type")
    if error_type == _UNFINISHED:
        group.unfinished += 1
        return
    group.start_ns.append(start)
    group.end_ns.append(end)
    group.failed.append(code == _ERROR or error_type is not None)
    if span_name is not None:
        group.first.append(1)
        group.attempt.append(1)
        group.wait_ns.append(-1)
        group.span_id.append(0)
        group.link.append(0)
        return
    _keep_attempt(group, span, where, attributes, start)


def _span_times(span: dict[str, Any], where: str) -> tuple[int, int]:
    """The span's start and end, nanoseconds since 1970: started, and not ending before."""
    start = _uint(span.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
    end = _uint(span.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano")
    if start == 0:
        raise ValueError(f"{where}.startTimeUnixNano is missing or 0")
    if end < start:
        raise ValueError(
            f"{where}: ends ({end}) before it starts ({start}), endTimeUnixNano < startTimeUnixNano"
        )
    check_number(
        (end - start) / 1e9, MAX_SECONDS, f"{where}: endTimeUnixNano - startTimeUnixNano is",
        "seconds", "a service time at most",
    )  # fmt: skip
    return start, end


def _status_code(span: dict[str, Any], where: str) -> int:
    """The span's status code: 0 unset, 1 ok, 2 error."""
    status = _object(span.get("status") or {}, f"{where}.status")
    code = status.get("code", 0)
    if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 2:
        raise ValueError(
            f"{where}.status.code must be 0, 1 or 2 (unset, ok, error), got {code!r:.60}"
        )
    return code


def _group(groups: dict[str | None, _Spans], key: str | None, where: str) -> _Spans:
    """The spans of destination ``key`` (None: the server spans), a new group the first time."""
    group = groups.get(key)
    if group is None:
        if len(groups) >= _MAX_DESTINATIONS:
            raise ValueError(
                f"{where}: more than {_MAX_DESTINATIONS} messaging destinations; "
                "is this one service's export?"
            )
        group = groups[key] = _Spans()
    return group


def _keep_attempt(
    group: _Spans, span: dict[str, Any], where: str, attributes: dict[str, Any], start: int
) -> None:
    """An engine attempt's number, its wait in the queue, its span id and its retry's link."""
    attempt = attributes.get("pipeline.attempt")
    group.first.append(-1 if not isinstance(attempt, int) else int(attempt == 1))
    group.attempt.append(attempt if isinstance(attempt, int) and attempt >= 1 else 0)
    wait = attributes.get(WAIT_ATTRIBUTE)
    if wait is None:
        group.wait_ns.append(-1)
    elif (
        isinstance(wait, float | int)
        and not isinstance(wait, bool)
        and math.isfinite(wait)
        and (0 <= wait * 1e9 <= start)
    ):
        group.wait_ns.append(round(wait * 1e9))
    else:
        raise ValueError(
            f"{where}: {WAIT_ATTRIBUTE} must be seconds >= 0 (before the span's "
            f"start, after 1970), got {wait!r:.60}"
        )
    group.span_id.append(_span_id(span.get("spanId"), f"{where}.spanId"))
    links = _list(span, "links", where)
    # The last link: pipeline.tracing puts a retry's link to its first attempt after the
    # links to its message's creation context.
    last = f"{where}.links[{len(links) - 1}]"
    group.link.append(
        _span_id(_object(links[-1], last).get("spanId"), f"{last}.spanId") if links else 0
    )


def _listing(names: set[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names)) or "none"


def _observed(
    source: str,
    groups: dict[str | None, _Spans],
    seen: dict[str, set[str]],
    spans_read: int,
    destination: str | None,
    span_name: str | None,
    service: str | None,
) -> Observed:
    if spans_read == 0:
        raise ValueError(f"{source}: no spans; expected {_WHAT} lines with spans")
    if service is not None and service not in seen["service"]:
        raise ValueError(
            f"{source}: no resource with service.name {service!r}; services seen: "
            f"{_listing(seen['service'])}"
        )
    if span_name is not None:
        if None not in groups:
            raise ValueError(
                f"{source}: no SERVER span named {span_name!r}; SERVER span names "
                f"seen: {_listing(seen['server'])}"
            )
        group, label = groups[None], f"SERVER spans {span_name!r}"
    elif not groups:
        raise ValueError(
            f"{source}: no span with messaging.operation.type = 'process' (the spans of "
            "pipeline.tracing); for a service's request spans give span_name= (SERVER span "
            f"names seen: {_listing(seen['server'])})"
        )
    elif destination is None:
        if len(groups) > 1:
            raise ValueError(
                f"{source}: spans of several messaging destinations; choose one "
                f"with destination=: {_listing(seen['destination'])}"
            )
        ((label, group),) = groups.items()
        label = f"destination {label!r}"
    elif destination not in groups:
        raise ValueError(
            f"{source}: no process span with messaging.destination.name "
            f"{destination!r}; destinations seen: {_listing(seen['destination'])}"
        )
    else:
        group, label = groups[destination], f"destination {destination!r}"
    if not len(group):
        raise ValueError(
            f"{source}: the {label} has only attempts cut short by the end of "
            "a run (error.type = 'unfinished')"
        )
    return _from_group(source, group, label, span_name is not None)


def _from_group(source: str, group: _Spans, label: str, server: bool) -> Observed:
    start = np.frombuffer(group.start_ns, dtype=np.int64)
    end = np.frombuffer(group.end_ns, dtype=np.int64)
    failed = np.frombuffer(group.failed, dtype=np.int8).astype(bool)
    first = np.frombuffer(group.first, dtype=np.int8)
    wait = np.frombuffer(group.wait_ns, dtype=np.int64)
    notes = []
    unknown = first < 0
    links = np.frombuffer(group.link, dtype=np.uint64)
    ids = np.frombuffer(group.span_id, dtype=np.uint64)
    if unknown.any():
        # Without pipeline.attempt, a retry is a span linking to another selected span.
        retry = (links != 0) & np.isin(links, ids)
        first = np.where(unknown, ~retry, first.astype(bool))
    else:
        first = first.astype(bool)
    most, gaps_ns, numbers = (1, None, None) if server else _retries(group, first, ids, links)
    arrival = start[first]
    given = wait[first] >= 0
    if server:
        notes.append(
            f"{label}: each span is a request, arriving at its start, one attempt; its "
            "duration is the response time (any wait inside the service included)"
        )
    elif given.all():
        arrival = arrival - wait[first]
        notes.append(
            f"{label}: arrivals are first attempts' starts minus {WAIT_ATTRIBUTE}: admissions "
            "to the queue, later than the items' arrivals while a full queue blocks the producer"
        )
    else:
        arrival = np.where(given, arrival - np.where(given, wait[first], 0), arrival)
        notes.append(
            f"{label}: {int((~given).sum())} of {given.size} first attempts carry no "
            f"{WAIT_ATTRIBUTE}; their arrivals are their starts, which equal arrivals only "
            "while nothing waits in the queue"
        )
    if not server:
        notes.append(f"{label}: up to {most} attempt(s) per item (the most any item made)")
    if group.unfinished:
        notes.append(
            f"{group.unfinished} attempts cut short by the end of a run "
            "(error.type = 'unfinished') left out"
        )
    if not arrival.size:
        raise ValueError(
            f"{source}: the {label} has retries but no first attempt; the export "
            "misses the start of the run"
        )
    arrival = np.sort(arrival, kind="stable")
    origin_ns = int(arrival[0])
    origin = dt.datetime.fromtimestamp(origin_ns // 1_000_000_000, dt.UTC)
    notes.append(f"times are seconds from {origin.isoformat().replace('+00:00', 'Z')}")
    order = np.argsort(start, kind="stable")
    return Observed(
        source=f"OTLP {source}",
        arrivals_s=(arrival - origin_ns) / 1e9,
        service_s=(end - start)[order] / 1e9,
        attempts=int(start.size),
        failed=int(failed.sum()),
        max_attempts=most,
        retry_gaps_s=None if gaps_ns is None else gaps_ns / 1e9,
        retry_numbers=numbers,
        response_times=server,
        notes=tuple(notes),
    )


def _retries(
    group: _Spans, first: np.ndarray, ids: np.ndarray, links: np.ndarray
) -> tuple[int, np.ndarray | None, np.ndarray | None]:
    """The most attempts one item made, and each retry's gap (ns) and number (1, 2, ...).

    An item is its first attempt's span and the retries linking to it; a gap runs from
    one attempt's end to the item's next attempt's start (the backoff, and any wait in
    the queue after it).
    """
    most = int(np.frombuffer(group.attempt, dtype=np.int64).max(initial=1))
    retry = ~first & np.isin(links, ids[first])
    if not retry.any():
        return most, None, None
    item = np.where(first, ids, links)
    kept = first | retry
    start = np.frombuffer(group.start_ns, dtype=np.int64)[kept]
    end = np.frombuffer(group.end_ns, dtype=np.int64)[kept]
    item = item[kept]
    order = np.lexsort((start, item))
    item, start, end = item[order], start[order], end[order]
    new = np.ones(item.size, dtype=bool)
    new[1:] = item[1:] != item[:-1]
    position = np.arange(item.size) - np.maximum.accumulate(np.where(new, np.arange(item.size), 0))
    follows = ~new
    gaps = np.maximum(start[1:] - end[:-1], 0)[follows[1:]]
    return max(most, int(position.max()) + 1), gaps, position[follows]
