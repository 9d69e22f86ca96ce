"""The overload controls' sections of a scenario file: ``[concurrency_limit]`` and ``[codel]``.

::

    [concurrency_limit]
    kind = "aimd"            # or "gradient2"
    min_limit = 2            # then the fields of AIMD(...) or Gradient2(...)
    backoff_ratio = 0.9

    [codel]
    target_s = 0.005
    interval_s = 0.1
    lifo = true

Each section becomes the ``PipelineConfig`` field of its name. A bad key or
value is one ``ValueError`` naming the file, the section, the key, the value
and what is allowed (the command line prints it and exits with status 2
before any run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .._validate import show
from ..overload import AIMD, CoDel, Gradient2

__all__ = ["CONTROL_TABLES", "parse_controls"]

CONTROL_TABLES = ("concurrency_limit", "codel")
"""The scenario file's sections read here."""

_KINDS: dict[str, type] = {"aimd": AIMD, "gradient2": Gradient2}


def _build(cls: type, table: Mapping[str, Any], where: str) -> Any:
    fields = [field.name for field in dataclasses.fields(cls)]
    for key in table:
        if key not in fields:
            raise ValueError(
                f"{where}: unknown key {key!r} for {cls.__name__}; allowed: {', '.join(fields)}"
            )
    try:
        return cls(**table)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def parse_controls(tables: Mapping[str, Any], path: str | None) -> dict[str, Any]:
    """The ``PipelineConfig`` fields that the file's control sections give.

    Args:
        tables: the file's sections, as TOML read them (others are ignored).
        path: the file, for messages.

    Raises:
        ValueError: a section that is not a table, an unknown ``kind`` or key, a bad value.
    """
    controls: dict[str, Any] = {}
    for name in CONTROL_TABLES:
        if name not in tables:
            continue
        table = tables[name]
        where = f"{path}: [{name}]"
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table (a [{name}] section), got {show(table)}")
        if name == "codel":
            controls[name] = _build(CoDel, table, where)
            continue
        rest = dict(table)
        kind = rest.pop("kind", None)
        if kind not in _KINDS:
            raise ValueError(
                f"{where}: kind must be one of {', '.join(map(repr, _KINDS))}, got {show(kind)}"
            )
        controls[name] = _build(_KINDS[kind], rest, f"{where} (kind {kind!r})")
    return controls
