"""Axes: the values a sweep's grid or a plan's search tries for one option.

An axis is spelled ``NAME=VALUES`` (``concurrency=1..64``,
``maxsize=100,1000,unbounded``); :func:`parse_axis` checks each value as the
option's own flag does (:data:`~pipeline.cli.values.OPTIONS`), and
:func:`axis_change` turns one value into the ``Scenario.replace`` keyword it
sets (:data:`AXIS_FIELDS`).
"""

from __future__ import annotations

from typing import Any

from .values import CONFIG_FIELDS, OPTIONS, quoted

__all__ = ["AXIS_FIELDS", "axis_change", "parse_axis"]

# Options a grid or a search may vary -> the Scenario.replace field each sets.
AXIS_FIELDS: dict[str, str] = {
    **CONFIG_FIELDS,
    "failure_rate": "failures",
    "item_size": "item_size_bytes",
    "arrivals": "arrivals",
    "service": "service",
}
_MAX_AXIS_VALUES = 10_000


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``NAME=V1,V2,...`` or ``NAME=LOW..HIGH`` (integers, both ends included) -> (name, values).

    ``NAME`` is an option name (``maxsize`` or ``max-attempts``, as the flags
    spell them) from :data:`AXIS_FIELDS`; each value is parsed and checked as
    that flag's value is (``maxsize=100,unbounded``). Specs that contain commas
    (``service=...``) are separated by ``;`` instead.

    Raises:
        ValueError: an unknown name, a bad value or range, or no values.
    """
    name, sep, values_text = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise ValueError(f"expected NAME=VALUES (e.g. concurrency=1..64), got {quoted(text)}")
    if name not in AXIS_FIELDS:
        allowed = ", ".join(n.replace("_", "-") for n in AXIS_FIELDS)
        raise ValueError(f"cannot vary {name!r}; allowed: {allowed}")
    parse = OPTIONS[name][0]
    low, dots, high = values_text.partition("..")
    if dots:
        try:
            first, last = parse(low), parse(high)
        except ValueError as exc:
            raise ValueError(f"{name}={values_text.strip()}: {exc}") from None
        if not (isinstance(first, int) and isinstance(last, int)) or last < first:
            raise ValueError(
                f"{name}: a range LOW..HIGH needs integers LOW <= HIGH, got {quoted(text)}"
            )
        if last - first >= _MAX_AXIS_VALUES:
            raise ValueError(f"{name}: {values_text} holds more than {_MAX_AXIS_VALUES:,} values")
        return name, list(range(first, last + 1))
    separator = ";" if name in ("arrivals", "service", "backoff") else ","
    parts = [part for part in values_text.split(separator) if part.strip()]
    if not parts:
        raise ValueError(f"{name}: no values given in {quoted(text)}")
    values = []
    for part in parts:
        try:
            values.append(parse(part))
        except ValueError as exc:
            raise ValueError(f"{name}={part.strip()}: {exc}") from None
    return name, values


def axis_change(name: str, value: Any) -> dict[str, Any]:
    """The ``Scenario.replace`` keyword for one axis value (``failure_rate`` -> ``failures``)."""
    if name == "failure_rate":
        from ..sim.workloads.failures import IndependentFailures, NoFailures

        value = IndependentFailures(value) if value > 0 else NoFailures()
    return {AXIS_FIELDS[name]: value}
