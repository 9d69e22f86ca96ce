"""A scenario file's arrays of tables (``[[stages]]``, ``[[classes]]``): the one way they are read.

Each kind has its own reader of one table; what they share is here: the value
must be a non-empty list, each table gets a label naming the file, its number
and its name for every error, and file paths inside a table are relative to
the scenario file's folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["read_tables"]


def read_tables(
    tables: Any, path: str, *, kind: str, one: Callable[[Any, str, str], Any]
) -> list[Any]:
    """The ``kind`` tables of scenario file ``path`` -> ``one(table, label, base)`` each, in order.

    ``kind`` is the singular of the key (``"stage"`` for ``[[stages]]``);
    ``one`` gets the table, its label (``"FILE: stage 2 ('write')"``) and the
    folder its relative paths start from, and raises ``ValueError`` with the
    label at the start.

    Raises:
        ValueError: not a list, or an empty one; the message names the file.
    """
    key = f"{kind}s" if kind != "class" else "classes"
    if not isinstance(tables, list):
        raise ValueError(
            f"{path}: {key} must be [[{key}]] tables (one per {kind}), "
            f"got {type(tables).__name__} {tables!r}"
        )
    if not tables:
        raise ValueError(f"{path}: {key} holds no {kind}; give at least one [[{key}]] table")
    base = os.path.dirname(os.path.abspath(path))
    found = []
    for number, table in enumerate(tables, start=1):
        name = table.get("name") if isinstance(table, dict) else None
        label = f"{path}: {kind} {number}" + (f" ({name!r})" if isinstance(name, str) else "")
        found.append(one(table, label, base))
    return found
