"""A scenario file's ``[[stages]]`` tables: a chain of stages for ``python -m pipeline simulate``.

Each ``[[stages]]`` table is one :class:`~pipeline.sim.StageSpec`, in chain
order. Its keys are the stage's settings, spelled as the flags are (``-`` or
``_`` inside a name) and parsed as the flags are::

    arrivals = "poisson:rate=2"     # pages per second, at the source
    items = 5000                    # pages
    seed = 1

    [[stages]]
    name = "fetch"                  # required, unique
    service = "lognormal:mean=0.5,cv=1"   # required: seconds per attempt
    concurrency = 2
    maxsize = 10                    # or "unbounded"
    fan_out = 100                   # each page becomes 100 records
    max_attempts = 3
    failure_rate = 0.01
    backoff = "exponential:base=0.1,factor=2,cap=30,jitter=1"

    [[stages]]
    name = "write"
    service = "exponential:mean=0.08"
    concurrency = 20
    maxsize = 80

A stage's name becomes part of file names (``--out`` writes
``items-NAME.csv``), so it may not hold ``/``, ``\\`` or control characters
and is at most 200 bytes in UTF-8.

Allowed keys: ``name``, ``service``, ``concurrency``, ``maxsize``,
``on_full``, ``max_attempts``, ``failure_rate``, ``backoff``,
``attempt_timeout``, ``drain_timeout`` (the chain drains within the first
stage's) and ``fan_out`` (children per item, 1 to 10,000; default 1). With
stages, the top level keeps what belongs to the whole run (``arrivals``,
``items`` or ``duration``, ``seed``, ``warmup``, ``item_size``,
``replications``, ``engine``, ``out``); a per-stage setting there (the file's
or a flag's) is an error that names the stage tables, as is ``--trace``.
"""

from __future__ import annotations

from typing import Any

from ..config import PipelineConfig
from .output import file_name_part
from .tables import read_tables
from .values import CONFIG_FIELDS, OPTIONS, anchor_file_key, parse_int

__all__ = ["STAGE_KEYS", "STAGE_SETTINGS", "parse_stages", "stage_value_parser"]

# Keys of a [[stages]] table parsed by the flag of the same name.
_STAGE_OPTIONS = (
    "service",
    "concurrency",
    "maxsize",
    "on_full",
    "max_attempts",
    "failure_rate",
    "backoff",
    "attempt_timeout",
    "drain_timeout",
)
STAGE_SETTINGS = (*_STAGE_OPTIONS, "fan_out")
"""A stage's settings: the keys of a ``[[stages]]`` table but its name, and what a
sweep's or a plan's ``STAGE.FIELD`` axis may vary."""
STAGE_KEYS = ("name", *STAGE_SETTINGS)
"""Every key a ``[[stages]]`` table may hold."""

# Top-level settings that belong to one stage once a file has stages.
PER_STAGE = (*_STAGE_OPTIONS, "trace")


def _fan_out(text: str) -> int:
    from ..sim.workloads.stages import MAX_FAN_OUT

    return parse_int(text, at_least=1, at_most=MAX_FAN_OUT, what="children per item")


def stage_value_parser(setting: str) -> Any:
    """The parser (text -> value) of one of :data:`STAGE_SETTINGS`: its flag's, or fan-out's."""
    return _fan_out if setting == "fan_out" else OPTIONS[setting][0]


def _one_stage(table: Any, label: str, base: str) -> Any:
    """One ``[[stages]]`` table -> a StageSpec; ``label`` says where it is, for errors."""
    from ..sim.workloads.failures import IndependentFailures, NoFailures
    from ..sim.workloads.stages import StageSpec

    if not isinstance(table, dict):
        raise ValueError(f"{label} must be a table ([[stages]]), got {type(table).__name__}")
    values: dict[str, Any] = {}
    for key, raw in table.items():
        name = key.replace("-", "_")
        if name not in STAGE_KEYS:
            raise ValueError(f"{label}: unknown key {key!r}; allowed: {', '.join(STAGE_KEYS)}")
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ValueError(
                f"{label}: {key} must be a string or a number, got {type(raw).__name__} {raw!r}"
            )
        text = str(raw)
        if name == "name":
            if not isinstance(raw, str) or not raw.strip():
                raise ValueError(f"{label}: name must be a non-empty string, got {raw!r}")
            try:  # checked here, before any run: --out names files after the stages
                values[name] = file_name_part(raw, "name")
            except ValueError as exc:
                raise ValueError(f"{label}: {exc}") from None
            continue
        if name == "service":
            text = anchor_file_key(text, base)
        try:
            values[name] = stage_value_parser(name)(text)
        except ValueError as exc:
            raise ValueError(f"{label}: {key}: {exc}") from None
    for required in ("name", "service"):
        if required not in values:
            raise ValueError(f"{label}: missing {required!r} (each stage needs a name and service)")
    rate = values.get("failure_rate", 0.0)
    try:
        return StageSpec(
            name=values["name"],
            service=values["service"],
            config=PipelineConfig(
                **{field: values[k] for k, field in CONFIG_FIELDS.items() if k in values}
            ),
            fan_out=values.get("fan_out", 1),
            failures=IndependentFailures(rate) if rate > 0 else NoFailures(),
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{label}: {exc}") from None


def parse_stages(tables: Any, path: str) -> list[Any]:
    """The ``stages`` value of scenario file ``path`` -> StageSpecs, in chain order.

    Raises:
        ValueError: not a list of tables, an empty list, an unknown key, a bad
            or missing value; the message names the file, the stage (number
            and name) and the key.
    """
    return read_tables(tables, path, kind="stage", one=_one_stage)
