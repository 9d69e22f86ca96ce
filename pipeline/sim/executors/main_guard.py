"""Is this call running at the top level of a script that worker processes re-run?

A process pool started with ``spawn`` or ``forkserver`` (the only start
methods this package uses: ``fork`` copies the parent's threads in whatever
state they are) re-runs the parent's ``__main__`` script in every worker, as
``__mp_main__``, so that functions defined there can be unpickled. A script
that calls ``sweep(processes=2)`` at its top level, without an
``if __name__ == "__main__":`` guard, therefore calls it again in each worker,
before that worker can take a task: the workers die and the parent sees
``BrokenProcessPool``, after each worker has redone all the script's work up
to that call (which can take long enough to look like a hang).

:func:`unguarded_call_site` finds that case in the parent, *before* any
process starts, by reading the script: the outermost frame of the call stack
that runs the script's top-level code, and whether its line sits under a
``__name__ == "__main__"`` test. It answers only when it is sure: a script
it cannot read or parse gives None (the workers' own check,
:func:`~pipeline.sim.executors.pool.bootstrapping`, is the safety net).
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
from types import FrameType

__all__: list[str] = []


def _main_is_rerun(main: object) -> bool:
    """Whether a spawned worker re-runs ``main``, as ``multiprocessing.spawn.prepare`` decides.

    A module run with ``-m`` is re-run by name unless it is a package's
    ``__main__``; a script is re-run from its path, except IPython's launcher.
    Without either (``python -c``, the REPL, a Jupyter kernel's cells), nothing is re-run.
    """
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    if spec_name is not None:
        return not (spec_name == "__main__" or spec_name.endswith(".__main__"))
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return False
    return os.path.splitext(os.path.basename(path))[0] != "ipython"


def _top_level_frame(main: object) -> FrameType | None:
    """The frame running ``main``'s top-level code, if it is on this thread's stack."""
    namespace = getattr(main, "__dict__", None)
    here = inspect.currentframe()
    frame: FrameType | None = None if here is None else here.f_back
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is namespace:
            return frame
        frame = frame.f_back
    return None


def _is_main_test(test: ast.expr, operator: type[ast.cmpop]) -> bool:
    """``__name__ == "__main__"`` (either way round; ``!=`` with ``ast.NotEq``)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and operator is ast.Eq:
        return any(_is_main_test(value, operator) for value in test.values)
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], operator)
    ):
        return False
    sides = (test.left, test.comparators[0])
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    texts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(texts) == 1


def _within(body: list[ast.stmt], line: int) -> bool:
    return bool(body) and body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)


def _guarded(tree: ast.Module, line: int) -> bool:
    """Whether ``line`` is in a branch that only runs when ``__name__ == "__main__"``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        if _is_main_test(node.test, ast.Eq) and _within(node.body, line):
            return True
        if _is_main_test(node.test, ast.NotEq) and _within(node.orelse, line):
            return True
    return False


def unguarded_call_site() -> tuple[str, int] | None:
    """(script path, line) if this call runs at the top level of a script that workers
    re-run, outside an ``if __name__ == "__main__":`` block; None otherwise or when unsure.

    A call from a function the script's top level calls counts too: the
    top-level line that (indirectly) made it is the one looked at.
    """
    main = sys.modules.get("__main__")
    if main is None or not _main_is_rerun(main):
        return None
    frame = _top_level_frame(main)
    if frame is None:
        return None  # called from another thread, or after the script's top level returned
    filename, line = frame.f_code.co_filename, frame.f_lineno
    try:
        with open(filename, "rb") as f:
            tree = ast.parse(f.read(), filename=filename)
    except (OSError, SyntaxError, ValueError):
        return None  # source not readable as Python (frozen, zipped, compiled): do not guess
    if line is None or _guarded(tree, line):
        return None
    return filename, line
