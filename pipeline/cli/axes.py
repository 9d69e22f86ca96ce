"""Axes: the values a sweep's grid or a plan's search tries for one setting.

One grammar for the command line and Python's ``sweep()``/``plan()``
(``Scenario.replace``'s keywords). An axis is spelled ``NAME=VALUES``
(``concurrency=1..64``, ``maxsize=100,1000,unbounded``), ``STAGE.NAME=VALUES``
for one stage of a chain (``write.concurrency=10,20,40``,
``fetch.maxsize=5,unbounded``), or ``classes.CLASS.FIELD=VALUES`` for one item
class (``classes.standard.share=1,4``; fields ``share``, ``priority``,
``service``, ``patience``), or ``autoscale.KEY=VALUES`` for one setting of the
autoscaler (``autoscale.target=1,2,5``; the keys of ``--autoscale``). The
``autoscale`` axis itself puts whole pools side by side: its values are what
``--autoscale`` takes, ``none`` (a fixed pool of ``concurrency`` workers) or
``KEY=VALUE,...``, separated by ``;`` as every axis whose values hold commas is
(``autoscale=none;max_workers=30,target=2``). ``NAME``
is the flag's spelling or the Python field's (``maxsize`` or ``queue_maxsize``,
``max-attempts`` or ``max_attempts``). :func:`parse_axis` checks each value as
the option's own flag does (:data:`~pipeline.cli.values.OPTIONS`), or as the
stage and class tables do (:mod:`pipeline.cli.stages`, :mod:`pipeline.cli.classes`);
:func:`gather_axes` reads a scenario file's table of axes (a sweep's
``[grid]``, a plan's ``search``) and the flags (``--grid``, ``--search``) the
same way for both commands; :func:`check_axes` holds them against the
scenario (a stage axis needs a chain with that stage, a class axis that
class, an ``autoscale.KEY`` axis an autoscaler to change, the scenario's or
each of the ``autoscale`` axis's (so not ``none``), every value one the pool
takes, and a chain's per-stage settings need their stage), and says
which axes that scenario has when a name is none of them; :func:`axis_change`
turns one value into the ``Scenario.replace`` keyword it sets
(:func:`axis_field`).
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .classes import CLASS_KEYS
from .stages import STAGE_SETTINGS, stage_value_parser
from .values import AUTOSCALE_KEYS, CONFIG_FIELDS, OPTIONS, autoscale_text, quoted

if TYPE_CHECKING:
    from ..sim.workloads.scenario import Scenario

__all__ = [
    "AXIS_FIELDS",
    "Axes",
    "UnknownAxis",
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
# The Python field's spelling of an option -> the option (queue_maxsize -> maxsize): one grammar.
_ALIASES: dict[str, str] = {
    field: option
    for option, field in {**AXIS_FIELDS, **_STAGE_FIELDS}.items()
    if field != option and field != "failures"
}
# An item class's fields a grid or a search may vary (classes.CLASS.FIELD).
CLASS_FIELDS = CLASS_KEYS[1:]
# Axes of the whole run, the same for every stage of a chain.
_WHOLE_RUN = ("arrivals", "item_size", "backlog")
# Settings whose values hold commas, so an axis separates them with ";" instead
# (``autoscale=none;max_workers=30,target=2``: a fixed pool and an autoscaled one).
_SPEC_SETTINGS = ("arrivals", "service", "backoff", "patience", "autoscale")
_MAX_AXIS_VALUES = 10_000
_MAX_CHECKED = 100_000  # a plan's candidates and a sweep's grid points: at most this many
_AUTOSCALE_VALUES = (
    " (an autoscale axis's values are none, a fixed pool, or --autoscale's KEY=VALUE,..., "
    "separated by ';': autoscale=none;max_workers=30,target=2)"
)


class UnknownAxis(ValueError):
    """Raised when an axis names no setting; ``name`` is the name (as normalised).

    Which axes exist depends on the scenario (its stages and classes), so the
    commands let :func:`check_axes` say it, once the scenario is read.
    """

    def __init__(self, name: str) -> None:
        super().__init__(
            f"cannot vary {name!r}; allowed: {_listed(AXIS_FIELDS)}, "
            "STAGE.NAME for a stage of a chain, classes.CLASS.FIELD for an item class, "
            "or autoscale.KEY for the autoscaler"
        )
        self.name = name


class _Unparsed(list):
    """The (no) values of an axis named by no setting, which :func:`check_axes` refuses."""


def _spelled(setting: str) -> str:
    return setting.replace("_", "-")


def axis_setting(name: str) -> str:
    """The setting an axis varies: ``write.maxsize`` -> ``maxsize``, ``concurrency`` -> itself."""
    return name.rpartition(".")[2]


def _class_axis(name: str) -> tuple[str, str] | None:
    """``(class, field)`` of a ``classes.CLASS.FIELD`` axis, or None for any other name."""
    klass, dot, field = name.removeprefix("classes.").rpartition(".")
    if name.startswith("classes.") and dot and klass.strip() and field in CLASS_FIELDS:
        return klass, field
    return None


def _autoscale_axis(name: str) -> str | None:
    """The autoscaler's key of an ``autoscale.KEY`` axis (``target``), or None for any other."""
    key = name.removeprefix("autoscale.")
    return key if name.startswith("autoscale.") and key in AUTOSCALE_KEYS else None


def _normalised(text: str) -> str:
    """An axis name as given, with ``-`` for ``_`` in its setting (never in a stage's or
    class's name) and the option's spelling for a Python field's (``queue_maxsize``)."""
    stage, dot, setting = text.strip().rpartition(".")
    setting = setting.strip().replace("-", "_")
    return f"{stage}{dot}{_ALIASES.get(setting, setting)}"


def _number(text: str) -> int | float:
    """A class's share or priority: an integer or a finite number."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {quoted(text)}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {quoted(text)}")
    return value


def _patience(text: str) -> Any:
    """A class's patience: a distribution spelled as ``--service`` is, or ``none`` (patient)."""
    return None if text.strip().lower() == "none" else OPTIONS["service"][0](text)


def _class_value_parser(field: str) -> Any:
    if field in ("share", "priority"):
        return _number
    return _patience if field == "patience" else OPTIONS["service"][0]


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``NAME=V1,V2,...`` or ``NAME=LOW..HIGH`` (integers, both ends included) -> (name, values).

    ``NAME`` is an option name (``maxsize`` or ``max-attempts``, as the flags
    spell them, or ``queue_maxsize``, as the Python field is) from
    :data:`AXIS_FIELDS`, ``STAGE.NAME`` with ``NAME`` one of a stage's
    settings (:data:`~pipeline.cli.stages.STAGE_SETTINGS`, ``fan-out``
    included), or ``classes.CLASS.FIELD`` with ``FIELD`` one of
    :data:`CLASS_FIELDS`; each value is parsed and checked as that flag's (or
    stage or class key's) value is (``maxsize=100,unbounded``). Specs that
    contain commas (``service=...``) are separated by ``;`` instead. Whether
    the stage or class exists is for :func:`check_axes` to say, once the
    scenario is known.

    Raises:
        UnknownAxis: a name that is no axis of any scenario.
        ValueError: a bad value or range, or no values.
    """
    given, sep, values_text = text.partition("=")
    name = _normalised(given)
    stage, dot, setting = name.rpartition(".")
    if not sep or not setting or (dot and not stage.strip()):
        raise ValueError(
            "expected NAME=VALUES or STAGE.NAME=VALUES (e.g. concurrency=1..64), "
            f"got {quoted(text)}"
        )
    if _class_axis(name) is not None:
        parse = _class_value_parser(setting)
    elif _autoscale_axis(name) is not None:
        parse = AUTOSCALE_KEYS[setting]
    elif stage == "autoscale" and setting not in _STAGE_FIELDS:
        raise ValueError(
            f"unknown autoscaler key {quoted(setting)} in {quoted(name)}; allowed: "
            + ", ".join(f"autoscale.{key}" for key in AUTOSCALE_KEYS)
        )
    elif dot:
        if setting not in _STAGE_FIELDS:
            raise UnknownAxis(name)
        parse = stage_value_parser(setting)
    else:
        if name not in AXIS_FIELDS:
            raise UnknownAxis(name)
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
            hint = _AUTOSCALE_VALUES if name == "autoscale" else ""
            raise ValueError(f"{name}={part.strip()}: {exc}{hint}") from None
    return name, values


def axis_flag(text: str) -> tuple[str, list[Any]]:
    """:func:`parse_axis` as an argparse ``type`` (``--grid``, ``--search``).

    A name that is no axis is kept for :func:`check_axes`, which knows the
    scenario and so which axes it has.
    """
    try:
        return parse_axis(text)
    except UnknownAxis as unknown:
        return unknown.name, _Unparsed()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def axis_field(name: str) -> str:
    """The ``Scenario.replace`` keyword an axis sets: ``maxsize`` -> ``queue_maxsize``,
    ``write.maxsize`` -> ``write.queue_maxsize``, ``write.failure_rate`` -> ``write.failures``,
    ``classes.standard.share`` -> itself."""
    if _class_axis(name) is not None or _autoscale_axis(name) is not None:
        return name
    stage, dot, setting = name.rpartition(".")
    return f"{stage}.{_STAGE_FIELDS[setting]}" if dot else AXIS_FIELDS[name]


def axis_change(name: str, value: Any) -> dict[str, Any]:
    """The ``Scenario.replace`` keyword for one axis value (``failure_rate`` -> ``failures``)."""
    if axis_setting(name) == "failure_rate":
        from ..sim.workloads.failures import IndependentFailures, NoFailures

        value = IndependentFailures(value) if value > 0 else NoFailures()
    return {axis_field(name): value}


def axis_value_label(name: str, value: Any) -> Any:
    """A value as the CSV, JSON and plots show it: plain numbers and words, specs as text
    (their repr, as a plan's report and JSON show them: ``Autoscaler(target=2.0)``)."""
    if value is None:
        return None
    if axis_setting(name) in _SPEC_SETTINGS:
        return repr(value)
    return value


def axis_text(name: str, value: Any) -> Any:
    """A value (or its label) with None spelled as the flags do: ``unbounded`` or ``none``,
    and an autoscaler as ``--autoscale`` spells it (``max_workers=30,target=2.0``)."""
    if value is None:
        return "unbounded" if axis_setting(name) == "maxsize" else "none"
    return autoscale_text(value) if name == "autoscale" and not isinstance(value, str) else value


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
        except UnknownAxis as unknown:
            return unknown.name, _Unparsed()  # check_axes says which axes the scenario has
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        values.extend(parsed)
    return name, values


def _entries(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """The table's entries; a sub-table (TOML reads ``write.concurrency = ...`` as
    ``write = {concurrency = ...}``, and ``classes.standard.share`` two levels deep)
    becomes dotted entries (``write.concurrency``, ``classes.standard.share``)."""
    entries = []
    for key, value in table.items():
        if isinstance(value, dict):
            entries += _entries(value, f"{prefix}{key}.")
        else:
            entries.append((f"{prefix}{key}", value))
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


def scenario_axes(scenario: Scenario) -> str:
    """The axes ``scenario`` has, in a few words, for a message: its settings (per stage on a
    chain) and its item classes' fields."""
    if scenario.stages is None:
        text = _listed(AXIS_FIELDS)
    else:
        stages = ", ".join(stage.name for stage in scenario.stages)
        text = f"{_listed(_WHOLE_RUN)}, or STAGE.NAME (stages: {stages}; NAME: "
        text += f"{_listed(_STAGE_FIELDS)})"
    if scenario.stages is None and scenario.config.autoscale is not None:
        text += f", or autoscale.KEY (KEY: {', '.join(AUTOSCALE_KEYS)})"
    if scenario.classes:
        fields = [f for f in CLASS_FIELDS if not (scenario.stages and f == "service")]
        classes = ", ".join(c.name for c in scenario.classes)
        text += f", or classes.CLASS.FIELD (classes: {classes}; FIELD: {_listed(fields)})"
    return text


def _listed(settings: Iterable[str]) -> str:
    return ", ".join(_spelled(n) for n in settings)


def check_axes(axes: Axes, scenario: Scenario) -> None:
    """Each axis against the scenario: a ``STAGE.NAME`` axis needs a chain with that stage, a
    ``classes.CLASS.FIELD`` axis that class, and on a chain a per-stage setting needs its
    stage's name. A name that is no axis at all is refused with the axes this scenario has.

    Raises:
        ValueError: the first axis that does not fit, named where it was given.
    """
    stages = None if scenario.stages is None else [stage.name for stage in scenario.stages]
    for name, values in axes.items():
        if isinstance(values, _Unparsed):
            origin = axes.origins.get(name, name)
            raise ValueError(
                f"{origin}: cannot vary {name!r}; this scenario's axes: {scenario_axes(scenario)}"
            )
    for name in axes:
        origin = axes.origins.get(name, name)
        by_class = _class_axis(name)
        if by_class is not None:
            _check_class_axis(origin, *by_class, scenario)
            continue
        if name == "autoscale" or _autoscale_axis(name) is not None:
            _check_autoscale_axis(origin, name, axes, scenario)
            continue
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


def _check_autoscale_axis(origin: str, name: str, axes: Axes, scenario: Scenario) -> None:
    """The autoscaler's axes need a single pipeline. ``autoscale`` (whole autoscalers, or
    ``none`` for a fixed pool) is checked value by value against the scenario; an
    ``autoscale.KEY`` axis changes the autoscalers of the ``autoscale`` axis when there
    is one (so it may not hold ``none``: a fixed pool has no setting to vary), else the
    scenario's, which must autoscale. Every combination of these values and the
    ``concurrency`` axis's is one the pipeline takes (the pool starts inside
    ``min_workers..max_workers``)."""
    if scenario.stages is not None:
        raise ValueError(
            f"{origin}: varies a single pipeline's autoscaler; a chain's stages have none "
            "to vary here"
        )
    pools = axes.get("autoscale")
    if name != "autoscale" and pools is not None and None in pools:
        raise ValueError(
            f"{origin}: varies the autoscaler, but {axes.origins['autoscale']} holds none "
            "(a fixed pool, with no autoscaler to vary); spell each autoscaler whole in it "
            "instead (autoscale=none;target=2,max_workers=30;target=5,max_workers=30)"
        )
    if name != "autoscale" and pools is None and scenario.config.autoscale is None:
        raise ValueError(
            f"{origin}: the scenario does not autoscale; give it an [autoscale] table or "
            "--autoscale KEY=VALUE,... and vary one of its settings, or put whole "
            "autoscalers side by side with autoscale=none;KEY=VALUE,..."
        )
    together = [other for other in axes if other == "autoscale" or _autoscale_axis(other)]
    if name != together[-1]:
        return  # the combinations are checked once, with the last of these axes
    if "concurrency" in axes:
        together.append("concurrency")
    if math.prod(len(axes[other]) for other in together) > _MAX_CHECKED:
        return  # more configurations than a plan or a sweep runs: the command refuses them
    for values in itertools.product(*(axes[other] for other in together)):
        point = dict(zip(together, values, strict=True))
        try:
            scenario.replace(**point)
        except (TypeError, ValueError) as exc:
            where = ", ".join(
                f"{axes.origins.get(other, other)}={axis_text(other, value)}"
                for other, value in point.items()
            )
            raise ValueError(f"{where}: {exc}") from None


def _check_class_axis(origin: str, klass: str, field: str, scenario: Scenario) -> None:
    """A ``classes.CLASS.FIELD`` axis needs that class (and, in a chain, not its service)."""
    if not scenario.classes:
        raise ValueError(
            f"{origin}: names class {klass!r}, but the scenario has no item classes "
            f"([[classes]] tables make them); this scenario's axes: {scenario_axes(scenario)}"
        )
    names = [c.name for c in scenario.classes]
    if klass not in names:
        raise ValueError(f"{origin}: no class named {klass!r}; classes: {', '.join(names)}")
    if field == "service" and scenario.stages is not None:
        raise ValueError(
            f"{origin}: in a chain each stage has its own service, not each class; "
            "vary STAGE.service instead"
        )


def replace_fields(axes: Axes) -> dict[str, list[Any]]:
    """The axes as ``sweep()``/``plan()`` take them: ``Scenario.replace`` keyword -> values."""
    return {
        axis_field(name): [axis_change(name, value)[axis_field(name)] for value in values]
        for name, values in axes.items()
    }
