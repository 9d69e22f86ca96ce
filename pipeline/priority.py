"""Priority keys: what ``PipelineConfig(priority=KEY)`` may return, checked per item.

The queue orders items by ``(key, admission sequence)`` in a heap, so every two
keys must compare, consistently and without raising: one comparison that
raises half-way through a heap operation would leave the heap corrupt (an
entry duplicated, another lost). Rather than trust arbitrary objects, a key is
brought to a canonical form whose order is total:

- a real number (``int``, ``float``, ``bool``, numpy numbers, ``Decimal``,
  ``Fraction``) that is not NaN: integers stay exact, every other number
  becomes a float (two keys that differ beyond a float's precision then tie,
  and tie means FIFO);
- a string, or a bytes object;
- a ``datetime`` (aware and naive ones do not compare with each other);
- a tuple of those, such as ``(tier, deadline)``.

Every key of one run must have the same *shape* (the kinds above, position by
position) as the first key the run saw. A key that raises, is NaN, None, of
another kind, or shaped differently is refused: :class:`PriorityKeys` raises,
and the engine dead-letters that item with the error (see
:mod:`pipeline.attempts`).
"""

from __future__ import annotations

import datetime
import decimal
import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

from ._validate import show

__all__ = ["PriorityKeys"]

_ALLOWED = "a real number that is not NaN, a string, bytes, a datetime, or a tuple of those"


class PriorityKeys:
    """Computes and checks the priority key of each payload.

    Args:
        key: the ``priority`` callable of the configuration.
    """

    __slots__ = ("_key", "_shape")

    def __init__(self, key: Callable[[Any], Any]) -> None:
        self._key = key
        self._shape: Any = None  # the first good key's shape, which every later key must have

    def __repr__(self) -> str:
        return f"<PriorityKeys key={self._key!r} shape={self._shape!r}>"

    def of(self, payload: Any) -> Any:
        """The canonical key of ``payload``.

        Raises:
            Exception: whatever the callable raised.
            TypeError: the key is of a kind that cannot be ordered, or shaped
                unlike the keys before it.
            ValueError: the key is (or holds) NaN.
        """
        raw = self._key(payload)
        key, shape = _canonical(raw)
        if self._shape is None:
            self._shape = shape
        elif shape != self._shape:
            raise TypeError(
                f"priority key {show(raw)} does not compare with the keys before it "
                f"(shaped {_describe(self._shape)}, this one {_describe(shape)}); "
                f"every key must be {_ALLOWED}, all of one shape"
            )
        return key


def _canonical(value: Any) -> tuple[Any, Any]:
    """``(key, shape)`` for a raw key, or raise naming what is wrong with it."""
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # a numpy scalar (np.bool_ is no numbers.Integral): the Python one
    if isinstance(value, numbers.Integral):
        return operator.index(value), "number"
    if isinstance(value, numbers.Real | decimal.Decimal):
        try:
            as_float = float(value)
        except (TypeError, ValueError, OverflowError) as error:  # a signalling NaN, a bad __float__
            raise ValueError(f"priority key must be {_ALLOWED}, got {show(value)}") from error
        if math.isnan(as_float):
            raise ValueError(f"priority key must be {_ALLOWED}, got {show(value)}")
        return as_float, "number"
    if isinstance(value, str):
        return value, "str"
    if isinstance(value, bytes):
        return value, "bytes"
    if isinstance(value, datetime.datetime):
        return value, "aware datetime" if value.utcoffset() is not None else "naive datetime"
    if isinstance(value, tuple):
        parts = [_canonical(part) for part in value]
        return tuple(key for key, _ in parts), tuple(shape for _, shape in parts)
    raise TypeError(
        f"priority key must be {_ALLOWED}, got {show(value)} of type {type(value).__name__}"
    )


def _describe(shape: Any) -> str:
    if isinstance(shape, tuple):
        inner = ", ".join(_describe(part) for part in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"
    return shape
