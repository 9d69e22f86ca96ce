"""Flag values: each option's parser (text -> value), its limits, and the table of options.

Every scenario option is one entry of :data:`OPTIONS`, keyed by its name:
the TOML key of a scenario file and, spelled with dashes, its flag
(:func:`flag_name`). Its parser turns the text given into the value, or
raises a ``ValueError`` saying what is allowed and what was given, so the
flag, the file and a sweep's axis all check a value the same way.

Flags (units in brackets): ``--arrivals SPEC`` (``poisson:rate=R``,
``constant:rate=R``, ``onoff:rate_on=R,rate_off=R,mean_on_s=S,mean_off_s=S``,
``counts:file=FILE.csv,column=NAME,interval_s=S``: Poisson arrivals at the
rate of counts measured per interval, constant within an interval and
repeating), ``--service SPEC`` (``exponential:mean=S``, ``constant:value=S``,
``lognormal:mean=S,cv=C`` or any two of ``mean``, ``cv``, ``p50``, ``p90``,
``p95``, ``p99`` such as ``lognormal:p50=S,p99=S`` or ``lognormal:mean=S,p99=S``,
``gamma:mean=S,cv=C``, ``uniform:low=S,high=S``,
``empirical:file=FILE.csv,column=NAME``: resample measured durations),
``--concurrency N``, ``--maxsize N|unbounded``, ``--on-full block|reject``,
``--max-attempts N``, ``--failure-rate p`` (each attempt fails independently
with probability p), ``--backoff SPEC`` (``exponential:base=S,factor=F,cap=S,jitter=0|1``,
``constant:delay=S,jitter=0|1`` or ``none``), ``--attempt-timeout S|none``,
``--drain-timeout S|none``, ``--items N`` or ``--duration S``, ``--backlog N``
(items already waiting at time 0, ahead of the arrivals), ``--seed N``,
``--warmup S``, ``--item-size BYTES``, ``--replications R``, ``--trace FILE.csv``
(columns ``arrival_s``, ``service_s``, optional ``fails``; replaces
``--arrivals``/``--service``), ``--engine auto|asyncio|kernel`` (default
``auto``: the exact kernel where it applies, else the asyncio engine; the
summary's ``engine`` key says which ran), ``--out DIR``.

Integer flags have upper bounds, far above any real pipeline, so that a typo
fails at once instead of hanging or running out of memory: ``--concurrency``
<= 100,000, ``--maxsize`` <= 10**9, ``--max-attempts`` <= 1,000,
``--replications`` <= 10,000, ``--items`` and ``--backlog`` <= 10**9 (together too)
and ``--item-size`` <= 2**32
(4 GiB; the last two are :class:`~pipeline.sim.Scenario`'s own bounds).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from .._spelling import MISSING, python_spelling
from ..autoscale import Autoscaler
from ..retry import Backoff

__all__ = [
    "AUTOSCALE_KEYS",
    "CONFIG_FIELDS",
    "ENGINE_NAMES",
    "MAX_ATTEMPTS",
    "MAX_CONCURRENCY",
    "MAX_MAXSIZE",
    "MAX_PROCESSES",
    "MAX_REPLICATIONS",
    "OPTIONS",
    "anchor_file_key",
    "autoscale_text",
    "flag_name",
    "parse_autoscale",
    "parse_backoff",
    "parse_int",
    "parse_pairs",
    "parse_processes",
    "quoted",
]


def quoted(text: str) -> str:
    """``text`` for an error message, cut short if someone pasted a novel."""
    return repr(text) if len(text) <= 40 else f"{text[:30]!r}... ({len(text)} characters)"


def parse_int(text: str, *, at_least: int, at_most: int | None = None, what: str) -> int:
    """``text`` as an integer in ``[at_least, at_most]``; ``what`` says what it counts.

    Raises:
        ValueError: not an integer, or out of range; the message names both bounds.
    """
    allowed = f">= {at_least}" + ("" if at_most is None else f" and <= {at_most:_}")
    try:
        value = int(text.strip())
    except ValueError:  # also an integer of thousands of digits (int() refuses those)
        raise ValueError(f"expected an integer {allowed} ({what}), got {quoted(text)}") from None
    if value < at_least or (at_most is not None and value > at_most):
        raise ValueError(f"expected an integer {allowed} ({what}), got {quoted(text.strip())}")
    return value


# Upper bounds of the integer flags: far above any real pipeline, low enough that a typo
# (an extra zero or ten) fails at once instead of hanging or exhausting memory.
MAX_CONCURRENCY = 100_000
"""``--concurrency``: one asyncio task per worker."""
MAX_MAXSIZE = 10**9
"""``--maxsize``: queue slots (use ``unbounded`` for no bound)."""
MAX_ATTEMPTS = 1000
"""``--max-attempts``: attempts per item before it is dead-lettered."""
MAX_REPLICATIONS = 10_000
"""``--replications``: independent runs, each one full simulation."""
MAX_PROCESSES = 1024
"""``--processes`` of ``sweep`` and ``plan``: local worker processes.

Each one imports numpy and pandas (tens of MB before it runs anything), so
1,024 of them already need tens of GB on one host, more threads than
mainstream servers have; more belongs on a cluster (``--scheduler``).
"""


def parse_processes(text: str) -> int:
    """``--processes N``: local worker processes, 1 to :data:`MAX_PROCESSES`.

    Raises:
        ValueError: not an integer in that range.
    """
    return parse_int(text, at_least=1, at_most=MAX_PROCESSES, what="worker processes")


def _items(text: str) -> int:
    from ..sim.workloads.scenario import MAX_N_ITEMS  # the Scenario's own bound

    return parse_int(text, at_least=0, at_most=MAX_N_ITEMS, what="items")


def _backlog(text: str) -> int:
    from ..sim.workloads.scenario import MAX_N_ITEMS  # the Scenario's own bound

    return parse_int(text, at_least=0, at_most=MAX_N_ITEMS, what="items waiting at time 0")


def _item_size(text: str) -> int:
    from ..sim.workloads.scenario import MAX_ITEM_SIZE_BYTES  # the Scenario's own bound

    return parse_int(text, at_least=0, at_most=MAX_ITEM_SIZE_BYTES, what="bytes")


def _float(text: str, *, low: float, high: float = math.inf, open_low: bool, what: str) -> float:
    allowed = f"> {low:g}" if open_low else f">= {low:g}"
    if high < math.inf:
        allowed += f" and <= {high:g}"
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"expected a number {allowed} ({what}), got {text!r}") from None
    if not math.isfinite(value) or value < low or (open_low and value == low) or value > high:
        raise ValueError(f"expected a number {allowed} ({what}), got {text!r}")
    return value


def _or_none(parse: Callable[[str], Any], word: str) -> Callable[[str], Any]:
    def parser(text: str) -> Any:
        if text.strip().lower() == word:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            allowed, sep, got = str(exc).rpartition(", got ")
            raise ValueError(f"{allowed} or {word!r}{sep}{got}" if sep else str(exc)) from None

    return parser


def parse_backoff(spec: str) -> Any:
    """Parse a backoff spec into a :class:`~pipeline.Backoff`.

    Spellings: ``exponential:base=S,factor=F,cap=S,jitter=0|1`` (any key may
    be left out; defaults 0.1 s, 2, 30 s, 0), ``constant:delay=S,jitter=0|1``,
    ``none`` (retry at once). S in seconds.

    Raises:
        ValueError: unknown name or key, a bad number, or a value Backoff rejects.
    """
    from ..sim.workloads.distributions import build, split_spec

    kind = "backoff"
    allowed = {
        "exponential": ("base", "factor", "cap", "jitter"),
        "constant": ("delay", "jitter"),
        "none": (),
    }
    name, p = split_spec(spec, kind, allowed)
    jitter = p.pop("jitter", 0.0)
    if jitter not in (0.0, 1.0):
        raise ValueError(f"jitter must be 0 or 1 in backoff spec {spec!r}, got {jitter:g}")
    if name == "none":
        return Backoff.none()
    if name == "constant":
        if "delay" not in p:
            raise ValueError(f"missing delay for constant in backoff spec {spec!r}")
        return build(spec, kind, lambda: Backoff.constant(p["delay"], jitter=bool(jitter)))
    renamed = {"base_s": p.get("base"), "factor": p.get("factor"), "cap_s": p.get("cap")}
    values = {k: v for k, v in renamed.items() if v is not None}
    return build(spec, kind, lambda: Backoff(kind="exponential", jitter=bool(jitter), **values))


def parse_pairs(text: str, option: str, keys: dict[str, Callable[[str], Any]]) -> dict[str, Any]:
    """``key=value,...`` (a table written on one line) -> each value through its key's parser.

    Raises:
        ValueError: an unknown or repeated key, a pair without ``=``, or a value its parser
            refuses; the message names the option and the key.
    """
    values: dict[str, Any] = {}
    for pair in text.split(","):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not key:
            raise ValueError(f"expected key=value pairs separated by commas, got {quoted(pair)}")
        name = key.replace("-", "_")
        if name not in keys:
            raise ValueError(f"unknown {option} key {quoted(key)}; allowed: {', '.join(keys)}")
        if name in values:
            raise ValueError(f"{option} key {quoted(key)} given twice")
        try:
            values[name] = keys[name](value)
        except ValueError as exc:
            raise ValueError(f"{option} {name}: {exc}") from None
    return values


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {quoted(text)}") from None


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer, got {quoted(text)}") from None


AUTOSCALE_KEYS: dict[str, Callable[[str], Any]] = {
    "min_workers": _whole,
    "max_workers": _whole,
    "metric": str,
    "target": _number,
    "sync_s": _number,
    "tolerance": _number,
    "scale_up_stabilization_s": _number,
    "scale_down_stabilization_s": _number,
    "max_scale_up_pods": _whole,
    "max_scale_up_fraction": _number,
    "cold_start_s": _number,
}
"""``--autoscale``'s keys: :class:`~pipeline.Autoscaler`'s parameters, with ``max_scale_up``
as its two parts."""


def parse_autoscale(text: str) -> Any:
    """``--autoscale max_workers=30,target=5,...`` (or ``none``) -> an Autoscaler, or None.

    Raises:
        ValueError: a key or value the Autoscaler refuses (one line naming it).
    """
    if text.strip().lower() == "none":
        return None
    values = parse_pairs(text, "autoscale", AUTOSCALE_KEYS)
    pods = values.pop("max_scale_up_pods", 4)
    fraction = values.pop("max_scale_up_fraction", 1.0)
    try:
        return Autoscaler(max_scale_up=(pods, fraction), **values)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def autoscale_text(scaler: Any) -> str:
    """An autoscaler as ``--autoscale`` spells it, :func:`parse_autoscale`'s inverse: ``none``
    for None (a fixed pool), else the parameters that differ from the defaults
    (``max_workers=30,target=2.0``; ``max_scale_up`` as its two keys), or
    ``min_workers=1`` for the defaults' (the flag takes no empty spelling)."""
    if scaler is None:
        return "none"
    default = Autoscaler()
    pairs = []
    for key in AUTOSCALE_KEYS:
        part = {"max_scale_up_pods": 0, "max_scale_up_fraction": 1}.get(key)
        field = "max_scale_up" if part is not None else key
        value, usual = getattr(scaler, field), getattr(default, field)
        if part is not None:
            value, usual = value[part], usual[part]
        if value != usual:
            pairs.append(f"{key}={value}")
    return ",".join(pairs) or f"min_workers={scaler.min_workers}"


def _arrivals(text: str) -> Any:
    from ..sim.workloads.arrivals import parse_arrivals

    return parse_arrivals(text)


def _service(text: str) -> Any:
    from ..sim.workloads.distributions import parse_distribution

    return parse_distribution(text)


def _on_full(text: str) -> str:
    value = text.strip().lower()
    if value not in ("block", "reject"):
        raise ValueError(f"expected 'block' or 'reject', got {text!r}")
    return value


ENGINE_NAMES = ("auto", "asyncio", "kernel")
"""What ``--engine`` takes: :data:`pipeline.sim.running.engine_choice.ENGINES`, written out
so that a misspelt flag answers before numpy loads (a test keeps the two equal)."""


def _engine(text: str) -> str:
    value = text.strip().lower()
    if value not in ENGINE_NAMES:
        raise ValueError(f"expected 'auto', 'asyncio' or 'kernel', got {quoted(text)}")
    return value


def _path(text: str) -> str:
    if not text.strip():
        raise ValueError("expected a path, got an empty string")
    return text


# name -> (parser, metavar, help). Names are the TOML keys; flags are --name-with-dashes.
OPTIONS: dict[str, tuple[Callable[[str], Any], str, str]] = {
    "arrivals": (
        _arrivals,
        "SPEC",
        "arrival process, e.g. poisson:rate=3.2 (per second) or "
        "counts:file=counts.csv,column=count,interval_s=60",
    ),
    "service": (
        _service,
        "SPEC",
        "service time per attempt (s), e.g. exponential:mean=1.0, lognormal:p50=0.05,p99=1.2 "
        "or empirical:file=durations.csv,column=duration_s",
    ),
    "concurrency": (
        lambda t: parse_int(t, at_least=1, at_most=MAX_CONCURRENCY, what="workers"),
        "N",
        "workers (default 4, at most 100000)",
    ),
    "maxsize": (
        _or_none(
            lambda t: parse_int(t, at_least=1, at_most=MAX_MAXSIZE, what="queue slots"), "unbounded"
        ),
        "N|unbounded",
        "queue bound in items (at most 10**9), or 'unbounded' (default 100)",
    ),
    "on_full": (_on_full, "block|reject", "when the queue is full (default block)"),
    "max_attempts": (
        lambda t: parse_int(t, at_least=1, at_most=MAX_ATTEMPTS, what="attempts per item"),
        "N",
        "attempts before an item is dead-lettered (default 3, at most 1000)",
    ),
    "failure_rate": (
        lambda t: _float(t, low=0, high=1, open_low=False, what="probability per attempt"),
        "p",
        "each attempt fails independently with probability p (default 0)",
    ),
    "backoff": (
        parse_backoff,
        "SPEC",
        "retry delay: exponential:base=0.1,factor=2,cap=30,jitter=1 | constant:delay=1 | none",
    ),
    "attempt_timeout": (
        _or_none(lambda t: _float(t, low=0, open_low=True, what="seconds"), "none"),
        "S|none",
        "seconds one attempt may take (default none)",
    ),
    "drain_timeout": (
        _or_none(lambda t: _float(t, low=0, open_low=False, what="seconds"), "none"),
        "S|none",
        "seconds the final drain may take (default 30)",
    ),
    "items": (
        _items,
        "N",
        "number of items to simulate (at most 10**9)",
    ),
    "duration": (
        lambda t: _float(t, low=0, open_low=True, what="seconds of virtual time"),
        "S",
        "simulate arrivals during S seconds instead of --items",
    ),
    "backlog": (
        _backlog,
        "N",
        "items already waiting at time 0, ahead of the arrivals (default 0); --items and "
        "--duration count the arrivals after them",
    ),
    "seed": (lambda t: parse_int(t, at_least=0, what="seed"), "N", "random seed (default 0)"),
    "warmup": (
        lambda t: _float(t, low=0, open_low=False, what="seconds"),
        "S",
        "seconds excluded from the statistics (default 0)",
    ),
    "item_size": (
        _item_size,
        "BYTES",
        "memory one item holds, for the memory model (default 1024, at most 4 GiB)",
    ),
    "replications": (
        lambda t: parse_int(t, at_least=1, at_most=MAX_REPLICATIONS, what="independent runs"),
        "R",
        "independent runs; R > 1 reports means and 95%% half-widths (default 1, at most 10000)",
    ),
    "engine": (
        _engine,
        "auto|asyncio|kernel",
        "auto (default): the exact kernel where it applies, else the asyncio engine",
    ),
    "autoscale": (
        parse_autoscale,
        "KEY=VALUE,...",
        "resize the pool by the Kubernetes HPA's rules, e.g. max_workers=30,target=5,"
        "sync_s=15,cold_start_s=30 (an [autoscale] table in a scenario file; default none)",
    ),
    "trace": (_path, "FILE.csv", "replay a trace: columns arrival_s, service_s[, fails]"),
    "out": (_path, "DIR", "write summary.json, items.csv, timeseries.csv, report.png"),
}


def flag_name(name: str) -> str:
    """The flag of option ``name``: ``max_attempts`` -> ``--max-attempts``."""
    return "--" + name.replace("_", "-")


# Options that are PipelineConfig fields -> the field each sets.
CONFIG_FIELDS: dict[str, str] = {
    "concurrency": "concurrency",
    "maxsize": "queue_maxsize",
    "on_full": "on_full",
    "max_attempts": "max_attempts",
    "backoff": "backoff",
    "attempt_timeout": "attempt_timeout_s",
    "drain_timeout": "drain_timeout_s",
    "autoscale": "autoscale",
}

# Scenario and PipelineConfig fields -> the option that sets them, for messages.
_OPTION_OF_FIELD: dict[str, str] = {
    **{field: option for option, field in CONFIG_FIELDS.items()},
    "item_size_bytes": "item_size",
    "initial_backlog": "backlog",
    "n_items": "items",
    "duration_s": "duration",
    "warmup_s": "warmup",
    "engine": "engine",
    "replications": "replications",
}


def flag_spelling(field: str, value: Any = MISSING) -> str:
    """A setting as the command line spells it, for messages (:mod:`pipeline._spelling`).

    ``drain_timeout_s`` -> ``--drain-timeout``; with ``value`` None,
    ``--drain-timeout none`` (``--maxsize unbounded``), with 30.0, ``--drain-timeout 30``.
    A field no flag sets keeps Python's spelling.
    """
    option = _OPTION_OF_FIELD.get(field)
    if option is None:
        return python_spelling(field, value)
    if value is MISSING:
        return flag_name(option)
    if value is None:
        text = "unbounded" if option == "maxsize" else "none"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return f"{flag_name(option)} {text}"


def anchor_file_key(spec: str, base: str) -> str:
    """``spec`` with a relative ``file=PATH`` taken relative to ``base`` (the scenario's folder)."""
    name, colon, rest = spec.partition(":")
    parts = rest.split(",")
    for i, part in enumerate(parts):
        key, eq, value = part.partition("=")
        if eq and key.strip().lower() == "file" and value.strip():
            parts[i] = f"{key}={os.path.join(base, value.strip())}"
    return name + colon + ",".join(parts)
