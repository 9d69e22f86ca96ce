"""k6's ``--out json`` file as an :class:`~.observed.Observed`: one request per point.

k6 writes one JSON object per line: ``{"type": "Metric", ...}`` declares a
metric, ``{"type": "Point", "metric": NAME, "data": {"time": ..., "value":
..., "tags": {...}}}`` is one sample. Each HTTP request makes a point of
``http_reqs`` (value 1), ``http_req_duration`` (milliseconds) and, since k6
0.31, ``http_req_failed`` (0 or 1), all with the same time and tags.

What the numbers mean, from k6's HTTP tracer: a request's points carry the
moment its response was fully received (``time``, RFC 3339 with a zone, up
to nanoseconds), and ``http_req_duration`` is sending + waiting + receiving,
so *time minus duration* is the moment k6 started writing the request, after
it had a connection (DNS, connecting and TLS, ``http_req_blocked``/
``_connecting``/``_tls_handshaking``, are not in it). That moment is the
request's arrival at the service, to within the network's one-way delay; the
duration is what the service took as seen by the client, network included.

Points are not in time order in the file (k6 flushes each virtual user's
samples in batches), so arrivals are sorted. The file may be gzip-compressed
(``--out json=file.gz``). It is streamed: memory grows with the requests kept
(16 bytes each), not with the file.
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

__all__ = ["MAX_LINE_CHARS", "read"]

MAX_LINE_CHARS = 1 << 20
"""The longest line read, bytes (1 Mi; k6's lines are a few hundred)."""

_WHAT = 'a k6 --out json line ({"type": "Metric"|"Point", "metric": ..., "data": {...}})'
_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))"
)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_MAX_NAMES = 20  # names remembered for a "no such name" message


def _time_ns(text: object, where: str) -> int:
    """An RFC 3339 time stamp as integer nanoseconds since the Unix epoch (exact)."""
    match = _TIME.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{where}: data.time must be an RFC 3339 time with a zone "
            f"(2026-05-09T14:34:45.625742514+02:00), got {text!r:.60}"
        )
    year, month, day, hour, minute, second, frac, sign, zh, zm = match.groups()
    try:
        day_number = dt.date(int(year), int(month), int(day)).toordinal() - _EPOCH_DAY
    except ValueError:
        raise ValueError(f"{where}: data.time has no such date: {text!r}") from None
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59 or (zh and int(zh) > 23):
        raise ValueError(f"{where}: data.time has no such time of day: {text!r}")
    seconds = day_number * 86400 + int(hour) * 3600 + int(minute) * 60 + int(second)
    if sign:
        offset = int(zh) * 3600 + int(zm) * 60
        seconds -= offset if sign == "+" else -offset
    nanos = seconds * 1_000_000_000 + (int(frac.ljust(9, "0")) if frac else 0)
    if not 0 <= nanos < 1 << 63:
        raise ValueError(f"{where}: data.time must be between 1970 and 2262, got {text!r}")
    return nanos


def _value(data: dict[str, Any], where: str, metric: str) -> float:
    value = data.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: data.value of {metric} must be a number, got {value!r:.60}")
    return float(value)


def read(
    path: str | os.PathLike[str], *, name: str | None = None, url: str | None = None
) -> Observed:
    """Read a k6 ``--out json`` file: arrivals, service times and failures, request by request.

    Args:
        path: the file k6 wrote (plain or gzip).
        name: keep only requests with this ``name`` tag (k6 tags each request
            with its URL as ``name`` unless the script names it).
        url: keep only requests with this ``url`` tag.

    Returns:
        An :class:`~.observed.Observed` with ``arrivals_s`` (seconds from the
        first request's start, sorted), ``service_s`` (``http_req_duration``
        in seconds, in arrival order: response times, ``response_times``),
        ``max_attempts`` 1 (each request is one attempt) and, when the file
        has ``http_req_failed`` points, ``attempts`` and ``failed``.

    Raises:
        ValueError: one line naming the file, the line and the field: not a
            k6 JSON file, a malformed point (time, value, tags), no
            ``http_req_duration`` point (an empty file, only declarations, or
            none with that tag: the message lists the names seen).
        OSError: the file cannot be opened or read.
    """
    source = os.fspath(path)
    ends = array("q")
    durations = array("d")
    failed_values = array("b")
    names: set[str] = set()
    declared = 0
    points = 0
    for line, obj in json_objects(source, what=_WHAT, max_line_chars=MAX_LINE_CHARS):
        where = f"{source} line {line}"
        kind = obj.get("type")
        if kind == "Metric":
            declared += 1
            continue
        if kind != "Point":
            raise ValueError(
                f"{where}: type must be 'Metric' or 'Point', got {kind!r:.60}; expected {_WHAT}"
            )
        points += 1
        metric = obj.get("metric")
        if metric != "http_req_duration" and metric != "http_req_failed":
            continue
        data = obj.get("data")
        if not isinstance(data, dict):
            raise ValueError(f"{where}: data must be an object, got {data!r:.60}")
        tags = data.get("tags")
        if tags is None:
            tags = {}
        elif not isinstance(tags, dict):
            raise ValueError(f"{where}: data.tags must be an object or null, got {tags!r:.60}")
        if metric == "http_req_duration" and len(names) < _MAX_NAMES:
            tag = tags.get("name")
            if isinstance(tag, str):
                names.add(tag)
        if (name is not None and tags.get("name") != name) or (
            url is not None and tags.get("url") != url
        ):
            continue
        value = _value(data, where, metric)
        if metric == "http_req_failed":
            if value not in (0.0, 1.0):
                raise ValueError(
                    f"{where}: data.value of http_req_failed must be 0 or 1, got {value!r}"
                )
            failed_values.append(int(value))
            continue
        end_ns = _time_ns(data.get("time"), where)
        # k6 writes durations as float milliseconds of integer nanoseconds.
        duration_ns = round(value * 1e6)
        if duration_ns > end_ns:
            raise ValueError(
                f"{where}: data.value of http_req_duration ({value!r} ms) would "
                "start the request before 1970"
            )
        check_number(
            value, MAX_SECONDS * 1e3, f"{where}: data.value of http_req_duration is",
            "milliseconds", "a service time at most",
        )  # fmt: skip
        ends.append(end_ns)
        durations.append(value)
    return _observed(source, ends, durations, failed_values, name, url, names, declared, points)


def _observed(
    source: str,
    ends: array,
    durations: array,
    failed_values: array,
    name: str | None,
    url: str | None,
    names: set[str],
    declared: int,
    points: int,
) -> Observed:
    if not ends:
        if name is not None or url is not None:
            wanted = " and ".join(
                f"{key} tag {value!r}" for key, value in (("name", name), ("url", url)) if value
            )
            seen = ", ".join(repr(n) for n in sorted(names)) or "none"
            raise ValueError(
                f"{source}: no http_req_duration point with the {wanted}; names seen: {seen}"
            )
        if declared or points:
            raise ValueError(
                f"{source}: no http_req_duration point ({declared} metric "
                f"declarations, {points} other points); expected k6 --out json of "
                "a run that made HTTP requests"
            )
        raise ValueError(f"{source}: empty; expected k6 --out json lines")
    duration_ms = np.frombuffer(durations, dtype=np.float64)
    start_ns = np.frombuffer(ends, dtype=np.int64) - np.round(duration_ms * 1e6).astype(np.int64)
    order = np.argsort(start_ns, kind="stable")
    start_ns = start_ns[order]
    origin_ns = int(start_ns[0])
    origin = dt.datetime.fromtimestamp(origin_ns // 1_000_000_000, dt.UTC)
    notes = [
        "arrivals are each request's start: its point's time (the response's end) minus "
        "http_req_duration, so after any wait for a connection; seconds from "
        f"{origin.isoformat().replace('+00:00', 'Z')}",
        "service times are http_req_duration (sending + waiting + receiving) converted from "
        "milliseconds to seconds: the service's time plus the network's, as the client saw it",
    ]
    attempts = failed = None
    if failed_values:
        attempts = len(failed_values)
        failed = int(np.frombuffer(failed_values, dtype=np.int8).sum())
        if attempts != len(ends):
            notes.append(
                f"{attempts} http_req_failed points for {len(ends)} http_req_duration "
                "points: the failure share is of the former"
            )
    else:
        notes.append(
            "no http_req_failed points (k6 before 0.31, or a response callback of "
            "null): failures unknown"
        )
    return Observed(
        source=f"k6 {source}",
        arrivals_s=(start_ns - origin_ns) / 1e9,
        service_s=duration_ms[order] / 1e3,
        attempts=attempts,
        failed=failed,
        # Each request k6 made is one attempt (a retry in the script is another request),
        # and its duration is the response time, any wait inside the service included.
        max_attempts=1,
        response_times=True,
        notes=tuple(notes),
    )
