"""Checks for numeric arguments, shared by the core and the simulation layer.

One rule everywhere: a number is a real number (``int``, ``float``, numpy
numbers, ``Fraction``, ``Decimal``; ``bool`` is not), finite, and within the
bounds the parameter allows; anything else is a ``TypeError`` or a
``ValueError`` whose message names the parameter, the value given and what is
allowed. Integers (and fractions) too large for a float (``10**400``) are
finite but cannot be used in float arithmetic: they are out of range, a
``ValueError`` like any other bad value, never an ``OverflowError``.
"""

from __future__ import annotations

import decimal
import math
import numbers
import operator
import reprlib
import sys

__all__ = ["FLOAT_MAX", "MAX_CONCURRENCY", "integer", "real", "show"]

MAX_CONCURRENCY = 1_000_000
"""The most workers a pipeline has: each is a task, and a typo must not exhaust memory."""

FLOAT_MAX = sys.float_info.max
"""The largest finite float, about 1.8e+308: the upper bound on every number."""

_BIG = 10**30  # integers from here on are shown as 1e+30 (a number of 31 digits)

_REPR = reprlib.Repr()
_REPR.maxstring = 80
_REPR.maxother = 80


def _show_big(value: numbers.Real) -> str:
    """``1e+400 (a number of 401 digits)``: exact to four digits, whatever the size."""
    whole = abs(int(value))
    exponent = math.floor(math.log10(whole))
    # log10 is a float: near a power of ten it may be one off either way.
    if 10**exponent > whole:
        exponent -= 1
    elif 10 ** (exponent + 1) <= whole:
        exponent += 1
    lead = whole // 10 ** max(exponent - 3, 0)
    mantissa = lead / 10 ** min(exponent, 3)
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa:.4g}e+{exponent} (a number of {exponent + 1} digits)"


def show(value: object) -> str:
    """Render a user-given value for an error message, compactly and without raising.

    ``-1``, ``0.5``, ``nan``, ``'x'``; numpy scalars as plain numbers; integers
    from 10**30 on, and numbers too large for a float, as ``1e+400 (a number of
    401 digits)`` (``repr`` refuses ints of more than 4300 digits); long strings
    and containers cut short; an object whose ``repr`` raises by its type name.
    """
    try:
        if isinstance(value, bool):
            return repr(value)
        if isinstance(value, numbers.Real):
            if isinstance(value, numbers.Integral) and abs(value) >= _BIG:
                return _show_big(value)
            try:
                as_float = float(value)
            except OverflowError:
                return _show_big(value)
            if isinstance(value, numbers.Integral):
                return repr(int(value))
            return repr(as_float)
        return _REPR.repr(value)
    except Exception:  # a hostile __repr__ or __float__: say what it is, not what it says
        return f"<{type(value).__name__} object>"


def real(
    name: str,
    value: object,
    unit: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> float:
    """Return ``value`` as a finite float, or raise naming ``name``, the value and the bounds.

    Args:
        name: the parameter, as the user spelled it (``"drain_timeout_s"``).
        value: what was given.
        unit: what the number counts, for the message (``"seconds"``).
        above: exclusive lower bound, if any.
        at_least: inclusive lower bound, if any.
        at_most: inclusive upper bound, if any (:data:`FLOAT_MAX` always applies).

    Raises:
        TypeError: ``value`` is not a real number (a ``bool`` is not).
        ValueError: ``value`` is NaN, infinite, too large for a float, or out of bounds.
    """
    # Decimal is a real number that does not register as numbers.Real.
    if isinstance(value, bool) or not isinstance(value, numbers.Real | decimal.Decimal):
        raise TypeError(
            f"{name} must be a real number ({unit}), got {show(value)} "
            f"of type {type(value).__name__}"
        )
    infinite = isinstance(value, float)  # an infinite float; an int or fraction cannot be
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        # float() refuses a signalling NaN; an infinite Decimal is infinite, not "too large"
        infinite = not value.is_nan()
        x = math.copysign(math.inf, value) if infinite else math.nan
    else:
        try:
            x = float(value)  # a huge Decimal becomes inf: beyond the largest float, below
        except OverflowError:  # finite, but beyond the largest float
            x = math.inf if value > 0 else -math.inf
        except (TypeError, ValueError) as error:  # a Real whose __float__ misbehaves
            raise TypeError(f"{name} must be a real number ({unit}), got {show(value)}") from error
    if math.isnan(x) or (math.isinf(x) and infinite):
        allowed = _allowed(above, at_least, at_most)
        raise ValueError(
            f"{name} must be finite{' and ' + allowed if allowed else ''} ({unit}), "
            f"got {show(value)}"
        )
    if above is not None and not x > above:
        raise ValueError(f"{name} must be > {above:g} ({unit}), got {show(value)}")
    if at_least is not None and not x >= at_least:
        raise ValueError(f"{name} must be >= {at_least:g} ({unit}), got {show(value)}")
    if at_most is not None and not x <= at_most:
        raise ValueError(f"{name} must be <= {at_most:g} ({unit}), got {show(value)}")
    if math.isinf(x):  # an int or a fraction beyond the largest float
        allowed = _allowed(above, at_least, FLOAT_MAX)
        raise ValueError(f"{name} must be {allowed} ({unit}), got {show(value)}")
    return x


def _allowed(above: float | None, at_least: float | None, at_most: float | None) -> str:
    """``> 0``, ``>= 0 and <= 1``: the bounds in words, for a message."""
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if at_least is not None:
        parts.append(f">= {at_least:g}")
    if at_most is not None:
        parts.append(f"<= {at_most:.2g}" if at_most == FLOAT_MAX else f"<= {at_most:g}")
    return " and ".join(parts)


def integer(name: str, value: object, what: str, *, at_least: int = 0) -> int:
    """Return ``value`` as an int >= ``at_least``, or raise naming ``name``."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer ({what}), got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer ({what}), got {show(value)} of type {type(value).__name__}"
        ) from None
    if n < at_least:
        raise ValueError(f"{name} must be >= {at_least} ({what}), got {show(n)}")
    return n
