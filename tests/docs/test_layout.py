"""``docs/guide/layout.md`` names every folder of ``pipeline/``, and only paths that exist.

The layout is a tree in one code block: an entry is a path at the start of a line,
indented two spaces per level under the folder it belongs to; a line indented as far
as the descriptions are continues the description above it.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "docs" / "guide" / "layout.md"
#: A line indented this far or more continues a description; an entry is indented less.
DESCRIPTION_INDENT = 12


def layout_entries() -> list[str]:
    """The paths the layout's tree names, relative to the repository ("pipeline/sim/stats/")."""
    block = re.search(r"^```\n(.*?)^```", LAYOUT.read_text(encoding="utf-8"), re.M | re.S)
    assert block, f"{LAYOUT}: no code block holding the tree"
    entries: list[str] = []
    parents: list[tuple[int, str]] = []  # (indent, folder) of the entries above this one
    for line in block.group(1).splitlines():
        name = line.lstrip(" ").split(" ", 1)[0]
        indent = len(line) - len(line.lstrip(" "))
        if not name or indent >= DESCRIPTION_INDENT:
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (parents[-1][1] if parents else "") + name
        entries.append(path)
        if path.endswith("/"):
            parents.append((indent, path))
    return entries


def test_every_package_folder_is_in_the_layout():
    named = {entry for entry in layout_entries() if entry.endswith("/")}
    named |= {entry.rsplit("/", 1)[0] + "/" for entry in layout_entries()}  # examples/approval.py
    packages = {
        init.parent.relative_to(REPO).as_posix() + "/"
        for init in (REPO / "pipeline").rglob("__init__.py")
    }
    assert sorted(packages - named) == []


def test_every_path_in_the_layout_exists():
    entries = layout_entries()
    assert "pipeline/sim/running/kernel/" in entries  # the tree was read as a tree
    assert sorted(entry for entry in entries if not (REPO / entry).exists()) == []
