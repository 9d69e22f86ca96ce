"""No module of ``pipeline`` reaches into another object's underscore attributes.

Every module is read as source, and every attribute access ``X._name`` is checked:
``X`` must be the object itself (``self``, ``cls``, or ``super()``), whose private
names are its own. Everything else, another object of the package, a module's private
name (``module._x``: the owner renames it freely) or a third-party object's internals,
is a reach-in: the owner offers what others read in public (``statistics()``, a
listener added with ``Pipeline.add_listener``, a public method).

Two kinds of names are not private although they start with an underscore, and are
allowed anywhere: names the standard library documents as public API
(:data:`PUBLIC_UNDERSCORE`: a named tuple's ``_fields`` and ``_replace``, ``os._exit``)
and IPython's display protocol (``_repr_mimebundle_`` and its kin, ``_repr_*_``).
Three modules implement a protocol of another library that has no public spelling,
and may use exactly the names listed for them in :data:`FOREIGN_PROTOCOLS`, each
with its reason; a name listed but no longer used fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "pipeline"

PUBLIC_UNDERSCORE = frozenset(
    {"_fields", "_replace", "_asdict", "_make", "_field_defaults", "_exit"}
)
"""Documented public API of the standard library (``collections.namedtuple``, ``os``)."""

DISPLAY_PROTOCOL = re.compile(r"^_repr_[a-z_]+_$")
"""IPython's rich display protocol (``_repr_html_``, ``_repr_mimebundle_``): public by design."""


HANDLE_FIELDS = frozenset(
    {"_args", "_callback", "_cancelled", "_context", "_loop", "_repr", "_scheduled",
     "_source_traceback", "_when"}
)  # fmt: skip
"""asyncio.Handle and TimerHandle's fields, which BaseEventLoop reads and writes."""

LOOP_REASON = (
    "the virtual clock is an asyncio event loop (a BaseEventLoop whose _run_once jumps the "
    "clock): it makes, runs and cancels asyncio's handles as BaseEventLoop does, through "
    "the handles' fields, which asyncio spells only with an underscore"
)

FOREIGN_PROTOCOLS: dict[str, tuple[frozenset[str], str]] = {
    "pipeline/sim/vloop.py": (
        HANDLE_FIELDS
        | {
            "_run",  # a handle's run, as BaseEventLoop._run_once calls it
            # asyncio's thresholds for rebuilding a heap of cancelled timers
            "_MIN_SCHEDULED_TIMER_HANDLES",
            "_MIN_CANCELLED_TIMER_HANDLES_FRACTION",
            "_log_destroy_pending",  # a task cancelled at the close must not log its loss
        },
        LOOP_REASON,
    ),
    "pipeline/sim/wakers.py": (
        HANDLE_FIELDS
        | {
            "_timer_cancelled_count",  # a cancelled timer counts in its loop, as asyncio's
            "_format_callback_source",  # a failing callback reported in asyncio's words
        },
        LOOP_REASON,
    ),
    "pipeline/viz/figures/textcache.py": (
        frozenset({"_find_fonts_by_props", "_layout", "_render_glyph", "_set_transform"}),
        "the cached text renderer lays out and renders glyphs as matplotlib's RendererAgg "
        "does (FT2Font's layout and glyph calls, the font manager's fallback list), which "
        "matplotlib offers to its own renderers only",
    ),
}


def reach_ins(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Each ``X._name`` in ``path`` whose ``X`` is not the object itself: ``file:line: code``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if name in PUBLIC_UNDERSCORE or DISPLAY_PROTOCOL.match(name):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if (
            isinstance(owner, ast.Call)
            and isinstance(owner.func, ast.Name)
            and owner.func.id == "super"
        ):
            continue
        relative = path.relative_to(root.parent)
        yield f"{relative}:{node.lineno}: {ast.unparse(node)}"


def test_the_scan_sees_a_reach_in(tmp_path):
    module = tmp_path / "pkg" / "probe.py"
    module.parent.mkdir()
    module.write_text(
        "class A:\n"
        "    def f(self, other):\n"
        "        self._mine = 1\n"
        "        super()._also_mine()\n"
        "        t._replace(a=1)\n"
        "        return other._theirs + helpers._private\n"
    )
    assert list(reach_ins(module, module.parent)) == [
        "pkg/probe.py:6: other._theirs",
        "pkg/probe.py:6: helpers._private",
    ]


def allowed(hit: str) -> bool:
    """Whether ``hit`` is a name its module's foreign protocol lists."""
    where, _, code = hit.split(":", 2)
    names, _ = FOREIGN_PROTOCOLS.get(where, (frozenset(), ""))
    return code.rsplit(".", 1)[-1] in names


def test_no_module_reaches_into_another_object():
    modules = sorted(ROOT.rglob("*.py"))
    assert len(modules) > 100  # the walk sees the package
    found = [hit for path in modules for hit in reach_ins(path)]
    assert [hit for hit in found if not allowed(hit)] == []
    # Each listed name is still needed: the lists only shrink.
    for where, (names, reason) in FOREIGN_PROTOCOLS.items():
        assert reason
        used = {hit.rsplit(".", 1)[-1] for hit in found if hit.startswith(f"{where}:")}
        assert used == names, (where, sorted(names - used))
