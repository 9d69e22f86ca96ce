"""A scenario file's ``[[classes]]`` tables: item classes for ``simulate``, ``sweep`` and ``plan``.

Each ``[[classes]]`` table is one :class:`~pipeline.sim.ItemClass`::

    arrivals = "poisson:rate=1.8"
    service = "exponential:mean=1.0"
    concurrency = 2
    maxsize = "unbounded"
    items = 20000

    [[classes]]
    name = "high"                         # required, unique
    share = 1                             # relative weight (default 1)
    priority = 0                          # lower first (default 0)

    [[classes]]
    name = "low"
    share = 2
    priority = 1
    service = "exponential:mean=1.0"      # optional: the scenario's otherwise
    patience = "exponential:mean=2.0"     # optional: seconds before it abandons

``service`` and ``patience`` are spelled as ``--service`` is (a ``file=`` in
them is relative to the scenario file); ``patience = "none"`` is a patient
class, as leaving it out is. With ``[[stages]]`` too, a class may not have a
``service`` (each stage has its own). Anything wrong is one line naming the file, the
class (number and name) and the key; the command exits with status 2 before
any run.
"""

from __future__ import annotations

from typing import Any

from .tables import read_tables
from .values import OPTIONS, anchor_file_key

__all__ = ["CLASS_KEYS", "parse_classes"]

CLASS_KEYS = ("name", "share", "priority", "service", "patience")
"""Every key a ``[[classes]]`` table may hold."""


def _one_class(table: Any, label: str, base: str) -> Any:
    from ..sim.workloads.classes import ItemClass

    if not isinstance(table, dict):
        raise ValueError(f"{label} must be a table ([[classes]]), got {type(table).__name__}")
    values: dict[str, Any] = {}
    for key, raw in table.items():
        name = key.replace("-", "_")
        if name not in CLASS_KEYS:
            raise ValueError(f"{label}: unknown key {key!r}; allowed: {', '.join(CLASS_KEYS)}")
        if name in ("name", "service", "patience"):
            if not isinstance(raw, str):
                raise ValueError(
                    f"{label}: {key} must be a string, got {type(raw).__name__} {raw!r}"
                )
            if name == "name":
                values[name] = raw
                continue
            if name == "patience" and raw.strip().lower() == "none":
                values[name] = None
                continue
            try:
                values[name] = OPTIONS["service"][0](anchor_file_key(raw, base))
            except ValueError as exc:
                raise ValueError(f"{label}: {key}: {exc}") from None
            continue
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValueError(f"{label}: {key} must be a number, got {type(raw).__name__} {raw!r}")
        values[name] = raw
    if "name" not in values:
        raise ValueError(f"{label}: missing 'name' (each class needs a unique name)")
    try:
        return ItemClass(**values)
    except (ValueError, TypeError) as exc:
        # The label names the class already; the ItemClass's own "class 'x': " would repeat it.
        text = str(exc).removeprefix(f"class {values['name']!r}: ")
        raise ValueError(f"{label}: {text}") from None


def parse_classes(tables: Any, path: str) -> list[Any]:
    """The ``classes`` value of scenario file ``path`` -> ItemClasses, in the file's order.

    Raises:
        ValueError: not a list of tables, an empty list, an unknown key, a bad
            or missing value, a name twice; the message names the file, the
            class (number and name) and the key.
    """
    found: list[Any] = []

    def one(table: Any, label: str, base: str) -> Any:
        item_class = _one_class(table, label, base)
        if any(other.name == item_class.name for other in found):
            raise ValueError(f"{label}: name {item_class.name!r} is given to an earlier class")
        found.append(item_class)
        return item_class

    return read_tables(tables, path, kind="class", one=one)
