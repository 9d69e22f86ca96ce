"""Optional parts and the extras that install them: one check, one wording.

``pip install pipeline-lab`` installs the engine alone (standard library
only). Each other part needs an extra, and importing it without that extra
is one :class:`ImportError` that says which: ``import pipeline.sim`` without
numpy raises ``MissingExtra: pipeline.sim needs numpy: pip install
'pipeline-lab[sim]'``.

:data:`EXTRAS` is the one table of which top-level modules each extra
brings; ``pyproject.toml``'s ``[project.optional-dependencies]`` installs
them (a test checks that the two agree). Presence is checked with
:func:`importlib.util.find_spec`, which imports nothing, so a part's check
costs microseconds and the part then imports what it needs as usual.
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["EXTRAS", "MissingExtra", "installed", "missing", "require"]

# Extra -> the top-level modules a part under it imports (module names, not distribution
# names: dask[distributed] is imported as ``distributed``). An extra that builds on another
# lists that one's modules too, so a part's one check names everything it lacks.
_SIM = ("numpy", "pandas", "tqdm")
EXTRAS: dict[str, tuple[str, ...]] = {
    "sim": _SIM,
    "viz": (*_SIM, "matplotlib", "ipywidgets"),
    "twin": (*_SIM, "aiohttp", "aiosqlite"),
    "cluster": (*_SIM, "distributed"),
    "postgres": ("asyncpg",),
    "metrics": ("numpy", "prometheus_client", "opentelemetry"),
    "grade": ("otter",),
}
# [fast] (numba) is not listed: no part needs it. The kernel's chain path compiles its
# replay when numba is installed and runs the same source as plain Python when it is not.


class MissingExtra(ModuleNotFoundError):
    """A part of pipeline-lab was used without the extra that installs it.

    An :class:`ImportError` (a :class:`ModuleNotFoundError`), so ``except
    ImportError`` keeps working; the message names the extra: ``pip install
    'pipeline-lab[sim]'``. ``name`` is the part that could not be imported
    (``"pipeline.sim"``: so ``python -m pipeline.examples.ingest`` prints one
    line, not a traceback), ``extra`` the extra and ``modules`` those missing.
    """

    def __init__(self, message: str, *, part: str, extra: str, modules: list[str]) -> None:
        super().__init__(message, name=part)
        self.extra = extra
        self.modules = modules


def missing(extra: str, *modules: str) -> list[str]:
    """The modules of ``extra`` (or just ``modules``, a subset of them) not installed here."""
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {sorted(EXTRAS)}, got {extra!r}")
    wanted = modules or EXTRAS[extra]
    unknown = [m for m in wanted if m not in EXTRAS[extra]]
    if unknown:
        raise ValueError(f"modules must come from the {extra!r} extra, got {unknown}")
    return [m for m in wanted if not _present(m)]


def installed(extra: str, *modules: str) -> bool:
    """Whether every module of ``extra`` (or just ``modules``) is installed."""
    return not missing(extra, *modules)


def require(part: str, extra: str, *modules: str) -> None:
    """Raise one :class:`MissingExtra` naming ``extra`` if ``part`` cannot import its modules.

    Args:
        part: what needs them, as the reader knows it (``"pipeline.sim"``,
            ``"sweep --out"``); the message starts with it.
        extra: the key in :data:`EXTRAS` (and in ``pyproject.toml``).
        modules: only these modules of the extra (default: all of them).
    """
    absent = missing(extra, *modules)
    if absent:
        names = absent[0] if len(absent) == 1 else f"{', '.join(absent[:-1])} and {absent[-1]}"
        raise MissingExtra(
            f"{part} needs {names}: pip install 'pipeline-lab[{extra}]'",
            part=part,
            extra=extra,
            modules=absent,
        )


def _present(module: str) -> bool:
    # find_spec would raise for a module in sys.modules without a spec (``__main__`` style)
    # and reports a module blocked with ``sys.modules[name] = None`` as absent, as import does.
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
