"""The package's shape stays readable: short functions, simple branches, modest modules.

A function a reader must hold in their head at once is the unit these limits
bound: at most :data:`MAX_LINES` lines and a cyclomatic complexity (radon's
count of decision points) of at most :data:`MAX_COMPLEXITY`; and at most one
module of ``pipeline/`` may run past :data:`MAX_MODULE_LINES` lines. A change
that crosses a limit splits the code by concept rather than raising the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import radon.complexity as radon_complexity

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"
MAX_LINES = 150
MAX_COMPLEXITY = 30
MAX_MODULE_LINES = 600
MODULES_OVER = 1
"""How many modules may run past :data:`MAX_MODULE_LINES` lines."""
KERNEL = PACKAGE / "sim" / "running" / "kernel"
MAX_KERNEL_LINES = 2_570
"""Lines (as ``wc -l`` counts them) of the kernel, the one replay of the engine's
semantics: a control or feature it takes on may need more; raise this on purpose, and say
why, rather than let the replay grow unseen. 1,500 held the third wave's semantics; the
fourth wave's overload and autoscaling features took it to 2,501 (attempt timeouts with a
downstream and its faults, the retry budget and the circuit breaker, the autoscaler: their
steps in the replay, their arrays in ``cuts.py``, ``guard.py`` and ``pool.py``). The FCFS
recursion's compiled loop (and auto's weighing of it) took it to 2,555: a plan of
failure-free scenarios spent most of its CPU in the Python loop (``bench/RESULTS.md``: the
guide's plan with costs and headroom, 1.53x less CPU compiled). Names for the positions of
the replay's bundle of arrays (``D_SENT``..., read by number before), 2,570."""


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_function_is_longer_than_the_limit() -> None:
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{_name(path)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, f"functions over {MAX_LINES} lines:\n" + "\n".join(long)


def test_no_function_is_more_complex_than_the_limit() -> None:
    tangled = []
    for path in _modules():
        for block in radon_complexity.cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                tangled.append(f"{_name(path)}:{block.lineno} {block.fullname}: {block.complexity}")
    assert not tangled, f"cyclomatic complexity over {MAX_COMPLEXITY}:\n" + "\n".join(tangled)


def test_at_most_one_module_is_long() -> None:
    long = [
        f"{_name(path)}: {lines} lines"
        for path in _modules()
        if (lines := path.read_text(encoding="utf-8").count("\n")) > MAX_MODULE_LINES
    ]
    assert len(long) <= MODULES_OVER, (
        f"at most {MODULES_OVER} module(s) over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)
    )


def test_the_kernel_stays_within_its_lines() -> None:
    lines = {_name(path): path.read_bytes().count(b"\n") for path in sorted(KERNEL.glob("*.py"))}
    assert sum(lines.values()) <= MAX_KERNEL_LINES, lines


def test_the_limits_catch_what_they_name(tmp_path: Path) -> None:
    """The measures themselves: a long, branchy function is seen as both."""
    body = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MAX_COMPLEXITY + 1))
    source = f"def f(x):\n{body}\n    return -1\n"
    (function,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    assert function.end_lineno - function.lineno + 1 > 2 * MAX_COMPLEXITY
    (block,) = radon_complexity.cc_visit(source)
    assert block.complexity == MAX_COMPLEXITY + 2
