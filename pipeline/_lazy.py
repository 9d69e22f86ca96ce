"""Names a package hands out on first use: the lazy half of a package's public surface.

A package lists its lazily loaded names in a table, ``name -> (module, attribute)``
(the module relative to the package, ``"vloop"`` or ``"..running.scrape"``; attribute
None for the module itself), writes
the same imports out under ``if TYPE_CHECKING:`` for editors and type checkers (as
anyio does), and takes its module-level ``__getattr__`` and ``__dir__`` from
:func:`lazy_names`. ``tests/test_lazy_imports.py`` keeps the table and the
imports the same names from the same modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

__all__ = ["lazy_names"]


def lazy_names(
    package: str,
    table: Mapping[str, tuple[str, str | None]],
    namespace: MutableMapping[str, object],
    public: list[str],
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``) for ``table``.

    A name is imported on first use and then kept in ``namespace`` (the package's
    ``globals()``), so the next lookup is an ordinary attribute: a submodule imported
    later under another name cannot replace it.

    Args:
        package: the package's ``__name__``.
        table: name -> (module relative to the package, a leading dot optional; attribute,
            or None for the module itself).
        namespace: the package's ``globals()``.
        public: the package's ``__all__``; ``dir()`` shows it with the package's globals.
    """

    def __getattr__(name: str) -> object:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = table[name]
        relative = module_name if module_name.startswith(".") else "." + module_name
        module = importlib.import_module(relative, package)
        value = module if attribute is None else getattr(module, attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
