"""pipeline-lab: bounded asyncio work pipelines, in real time and in virtual time.

The core (this package's top level) is standard library only and reads time
only through ``loop.time()``: ``pip install pipeline-lab`` installs nothing
else. :mod:`pipeline.sim` runs it on a virtual clock (``[sim]`` extra);
:mod:`pipeline.viz` plots and explores the results (``[viz]``). ``Scenario``,
``ItemClass``, ``simulate`` and ``sweep`` are importable from here too, on first use; without
``[sim]`` that use is one ImportError naming the extra.

Example:
    >>> import asyncio
    >>> from pipeline import Pipeline, PipelineConfig
    >>> async def double(x):
    ...     return 2 * x
    >>> report = asyncio.run(Pipeline(double, PipelineConfig(concurrency=2)).run(range(10)))
    >>> report.completed
    10
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ._extras import installed as _sim_installed_check
from .autoscale import Autoscaler
from .config import PipelineConfig, RateLimit
from .engine import Pipeline, State
from .errors import (
    DeadlockError,
    PermanentError,
    PipelineClosed,
    PipelineError,
    QueueFull,
    RateLimited,
    RetryLater,
    SourceError,
)
from .events import EventKind
from .overload import AIMD, CircuitBreaker, CoDel, Gradient2, RetryBudget
from .records import DeadLetter, RunReport
from .retry import Backoff, RetryPolicy
from .statistics import Statistics

# The names _LAZY loads on first use, written out for editors and type checkers, which
# follow these imports to each name's definition (tests/test_lazy_imports.py keeps the two
# lists the same names from the same modules).
if TYPE_CHECKING:
    from .chain.chain import Chain
    from .chain.stage import Stage
    from .deadletters.export import export_csv, export_jsonl, load_jsonl, replay
    from .sim import ItemClass as ItemClass
    from .sim import Scenario as Scenario
    from .sim import simulate as simulate
    from .sim import sweep as sweep
del TYPE_CHECKING  # a switch for the block above, not a name of this package

logging.getLogger("pipeline").addHandler(logging.NullHandler())

# Scenario, ItemClass, simulate and sweep (see _LAZY) are importable from here as well, and are
# at home in pipeline.sim: they stay out of __all__, so that ``from pipeline import *``
# needs the standard library only.
__all__ = [
    "AIMD",
    "Autoscaler",
    "Backoff",
    "Chain",
    "CircuitBreaker",
    "CoDel",
    "DeadLetter",
    "DeadlockError",
    "EventKind",
    "Gradient2",
    "PermanentError",
    "Pipeline",
    "PipelineClosed",
    "PipelineConfig",
    "PipelineError",
    "QueueFull",
    "RateLimit",
    "RateLimited",
    "RetryBudget",
    "RetryLater",
    "RetryPolicy",
    "RunReport",
    "SourceError",
    "Stage",
    "State",
    "Statistics",
    "export_csv",
    "export_jsonl",
    "load_jsonl",
    "replay",
]


# Public names imported on first use: name -> module that defines it. The
# simulation layer needs the [sim] extra; dead-letter export and replay need neither
# the command line nor a running pipeline; a single-stage run needs no chain.
_LAZY = {
    "Chain": ".chain.chain",
    "Stage": ".chain.stage",
    "export_csv": ".deadletters.export",
    "export_jsonl": ".deadletters.export",
    "load_jsonl": ".deadletters.export",
    "replay": ".deadletters.export",
    "ItemClass": ".sim",
    "Scenario": ".sim",
    "simulate": ".sim",
    "sweep": ".sim",
}


def __getattr__(name: str) -> object:
    # The core stays importable with the standard library alone, and quick to import.
    if name not in _LAZY:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name], __name__), name)


def __dir__() -> list[str]:
    # Only names that resolve here: help() and completion call getattr on each name listed,
    # and without [sim] the simulation's names are an ImportError. __all__ is the core alone, so
    # ``from pipeline import *`` works with the standard library only.
    names = set(globals()) | set(__all__) | set(_LAZY)
    if not _sim_installed_check("sim"):
        names -= {name for name, module in _LAZY.items() if module == ".sim"}
    return sorted(names)
