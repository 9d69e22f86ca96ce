"""Axes: the values a sweep's grid or a plan's search tries for one setting.

An axis is spelled ``NAME=VALUES`` (``concurrency=1..64``,
``maxsize=100,1000,unbounded``), or ``STAGE.NAME=VALUES`` for one stage of a
chain (``write.concurrency=10,20,40``, ``fetch.maxsize=5,unbounded``).
:func:`parse_axis` checks each value as the option's own flag does
(:data:`~pipeline.cli.values.OPTIONS`), or as the stage tables do
(:mod:`pipeline.cli.stages`); :func:`gather_axes` reads a scenario file's
table of axes (a sweep's ``[grid]``, a plan's ``search``) and the flags
(``--grid``, ``--search``) the same way for both commands;
:func:`check_axes` holds them against the scenario (a stage axis needs a
chain with that stage, and a chain's per-stage settings need their stage);
:func:`axis_change` turns one value into the ``Scenario.replace`` keyword it
sets (:func:`axis_field`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .stages import STAGE_SETTINGS, stage_value_parser
from .values import CONFIG_FIELDS, OPTIONS, quoted

if TYPE_CHECKING:
    from ..sim.workloads.scenario import Scenario

__all__ = [
    "AXIS_FIELDS",
    "Axes",
    "axis_change",
    "axis_field",
    "axis_flag",
    "axis_setting",
    "axis_text",
    "axis_value_label",
    "check_axes",
    "gather_axes",
    "parse_axis",
    "replace_fields",
]

# Options a grid or a search may vary -> the Scenario.replace field each sets.
AXIS_FIELDS: dict[str, str] = {
    **CONFIG_FIELDS,
    "failure_rate": "failures",
    "item_size": "item_size_bytes",
    "backlog": "initial_backlog",
    "arrivals": "arrivals",
    "service": "service",
}
# A stage's settings -> the Scenario.replace field each sets, after "STAGE.".
_STAGE_FIELDS: dict[str, str] = {
    **{name: CONFIG_FIELDS.get(name, name) for name in STAGE_SETTINGS},
    "failure_rate": "failures",
}
# Axes of the whole run, the same for every stage of a chain.
_WHOLE_RUN = ("arrivals", "item_size", "backlog")
_SPEC_SETTINGS = ("arrivals", "service", "backoff")
_MAX_AXIS_VALUES = 10_000


def _spelled(setting: str) -> str:
    return setting.replace("_", "-")


def axis_setting(name: str) -> str:
    """The setting an axis varies: ``write.maxsize`` -> ``maxsize``, ``concurrency`` -> itself."""
    return name.rpartition(".")[2]


def _normalised(text: str) -> str:
    """An axis name as given, with ``-`` for ``_`` in its setting (never in a stage's name)."""
    stage, dot, setting = text.strip().rpartition(".")
    return f"{stage}{dot}{setting.strip().replace('-', '_')}"


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``NAME=V1,V2,...`` or ``NAME=LOW..HIGH`` (integers, both ends included) -> (name, values).

    ``NAME`` is an option name (``maxsize`` or ``max-attempts``, as the flags
    spell them) from :data:`AXIS_FIELDS`, or ``STAGE.NAME`` with ``NAME`` one
    of a stage's settings (:data:`~pipeline.cli.stages.STAGE_SETTINGS`,
    ``fan-out`` included); each value is parsed and checked as that flag's (or
    stage key's) value is (``maxsize=100,unbounded``). Specs that contain
    commas (``service=...``) are separated by ``;`` instead. Whether the stage
    exists is for :func:`check_axes` to say, once the scenario is known.

    Raises:
        ValueError: an unknown name, a bad value or range, or no values.
    """
    given, sep, values_text = text.partition("=")
    name = _normalised(given)
    stage, dot, setting = name.rpartition(".")
    if not sep or not setting or (dot and not stage.strip()):
        raise ValueError(
            "expected NAME=VALUES or STAGE.NAME=VALUES (e.g. concurrency=1..64), "
            f"got {quoted(text)}"
        )
    if dot:
        if setting not in _STAGE_FIELDS:
            allowed = ", ".join(_spelled(n) for n in _STAGE_FIELDS)
            raise ValueError(f"cannot vary {name!r}; a stage's settings: {allowed}")
        parse = stage_value_parser(setting)
    else:
        if name not in AXIS_FIELDS:
            allowed = ", ".join(_spelled(n) for n in AXIS_FIELDS)
            raise ValueError(
                f"cannot vary {name!r}; allowed: {allowed}, or STAGE.NAME for a stage of a chain"
            )
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
    separator = ";" if setting in _SPEC_SETTINGS else ","
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


def axis_flag(text: str) -> tuple[str, list[Any]]:
    """:func:`parse_axis` as an argparse ``type`` (``--grid``, ``--search``)."""
    try:
        return parse_axis(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def axis_field(name: str) -> str:
    """The ``Scenario.replace`` keyword an axis sets: ``maxsize`` -> ``queue_maxsize``,
    ``write.maxsize`` -> ``write.queue_maxsize``, ``write.failure_rate`` -> ``write.failures``."""
    stage, dot, setting = name.rpartition(".")
    return f"{stage}.{_STAGE_FIELDS[setting]}" if dot else AXIS_FIELDS[name]


def axis_change(name: str, value: Any) -> dict[str, Any]:
    """The ``Scenario.replace`` keyword for one axis value (``failure_rate`` -> ``failures``)."""
    if axis_setting(name) == "failure_rate":
        from ..sim.workloads.failures import IndependentFailures, NoFailures

        value = IndependentFailures(value) if value > 0 else NoFailures()
    return {axis_field(name): value}


def axis_value_label(name: str, value: Any) -> Any:
    """A value as the CSV, JSON and plots show it: plain numbers and words, specs as text."""
    if value is None:
        return None
    if axis_setting(name) in _SPEC_SETTINGS:
        return repr(value)
    return value


def axis_text(name: str, value: Any) -> Any:
    """A value (or its label) with None spelled as the flags do: ``unbounded`` or ``none``."""
    if value is None:
        return "unbounded" if axis_setting(name) == "maxsize" else "none"
    return value


# -- a command's axes: the scenario file's table and the flags ---------------------------------


class Axes(dict[str, list[Any]]):
    """Axis name (``concurrency``, ``write.maxsize``) -> values, in the order given.

    ``origins`` says where each axis was given, for messages: ``--grid
    write.maxsize`` or ``chain.toml: [grid] write.maxsize``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[str, str] = {}


def _flag_spelling(name: str) -> str:
    stage, dot, setting = name.rpartition(".")
    return f"{stage}{dot}{_spelled(setting)}"


def _table_axis(where: str, key: Any, value: Any) -> tuple[str, list[Any]]:
    """One entry of a file's table of axes, parsed as the flag would be; ``where`` names it."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | list) or value == []:
        raise ValueError(
            f'{where}: expected a list of values or a string like "2..8", got {value!r}'
        )
    texts = []
    for element in value if isinstance(value, list) else [value]:
        if isinstance(element, bool) or not isinstance(element, str | int | float):
            raise ValueError(
                f"{where}: values must be strings or numbers, got "
                f"{type(element).__name__} {element!r}"
            )
        texts.append(str(element))
    name, values = "", []
    for text in texts:
        try:
            name, parsed = parse_axis(f"{key}={text}")
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        values.extend(parsed)
    return name, values


def _entries(table: dict[str, Any]) -> list[tuple[str, Any]]:
    """The table's entries; a stage's sub-table (TOML reads ``write.concurrency = ...``
    as ``write = {concurrency = ...}``) becomes ``write.concurrency`` entries."""
    entries = []
    for key, value in table.items():
        if isinstance(value, dict):
            entries += [(f"{key}.{setting}", inner) for setting, inner in value.items()]
        else:
            entries.append((key, value))
    return entries


def gather_axes(
    table: Any,
    flags: Iterable[tuple[str, list[Any]]],
    *,
    path: str | None,
    table_name: str,
    flag: str,
    what: str,
    missing: str,
) -> Axes:
    """A command's axes: the scenario file's table ``table_name``, axes replaced by ``flags``.

    The one reader of a sweep's ``[grid]`` and a plan's ``search``. Each
    table entry (``concurrency``, ``write.concurrency``: TOML's dotted key and
    the quoted ``"write.concurrency"`` alike) is a string (``"2..8"``,
    ``"10,100,unbounded"``), a number, or a list of them, parsed as the
    flag's value is; ``flags`` are the
    ``(name, values)`` pairs :func:`axis_flag` parsed, in the order given. A
    flag replaces the file's axis of the same name, where the file had it.

    Args:
        table: the file's table (None when absent), as TOML gave it.
        flags: axes from ``flag``, already parsed.
        path: the scenario file, for messages.
        table_name: ``grid`` or ``search``, for messages.
        flag: ``--grid`` or ``--search``, for messages.
        what: how a message names one axis (``grid axis``, ``search axis``).
        missing: the message when neither the file nor the flags give an axis.

    Raises:
        ValueError: a table that is not a table, an entry or value that is
            not allowed, an axis given twice (two flags, or two spellings in
            the file), a value given twice on one axis, or no axis at all.
    """
    axes = Axes()
    if table is not None:
        if not isinstance(table, dict):
            raise ValueError(
                f"{path}: {table_name} must be a table ([{table_name}]), got {table!r}"
            )
        for key, value in _entries(table):
            where = f"{path}: [{table_name}] {key}"
            name, values = _table_axis(where, key, value)
            if name in axes:
                raise ValueError(f"{where}: {axes.origins[name]} names the same axis")
            axes[name], axes.origins[name] = values, where
    flagged: set[str] = set()
    for name, values in flags:
        if name in flagged:
            raise ValueError(f"{flag} {_flag_spelling(name)} given twice; give each axis once")
        flagged.add(name)
        axes[name], axes.origins[name] = values, f"{flag} {_flag_spelling(name)}"
    if not axes:
        raise ValueError(missing)
    for name, values in axes.items():
        seen: set[str] = set()
        for value in values:
            if repr(value) in seen:
                raise ValueError(f"{what} {name}: value {axis_text(name, value)} given twice")
            seen.add(repr(value))
    return axes


def check_axes(axes: Axes, scenario: Scenario) -> None:
    """Each axis against the scenario: a ``STAGE.NAME`` axis needs a chain with that stage,
    and on a chain a per-stage setting needs its stage's name.

    Raises:
        ValueError: the first axis that does not fit, named where it was given.
    """
    stages = None if scenario.stages is None else [stage.name for stage in scenario.stages]
    for name in axes:
        origin = axes.origins.get(name, name)
        stage, dot, setting = name.rpartition(".")
        if dot and stages is None:
            raise ValueError(
                f"{origin}: names stage {stage!r}, but the scenario has no stages "
                f"([[stages]] tables make a chain); vary {_spelled(setting)} instead"
            )
        if dot and stage not in stages:
            raise ValueError(f"{origin}: no stage named {stage!r}; stages: {', '.join(stages)}")
        if not dot and stages is not None and name not in _WHOLE_RUN:
            qualified = " or ".join(f"{s}.{_spelled(setting)}" for s in stages)
            raise ValueError(
                f"{origin}: each stage of the chain has its own {_spelled(setting)}; "
                f"name the stage: {qualified} (stages: {', '.join(stages)})"
            )


def replace_fields(axes: Axes) -> dict[str, list[Any]]:
    """The axes as ``sweep()``/``plan()`` take them: ``Scenario.replace`` keyword -> values."""
    return {
        axis_field(name): [axis_change(name, value)[axis_field(name)] for value in values]
        for name, values in axes.items()
    }
