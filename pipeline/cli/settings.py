"""Settings: a scenario file and the flags given -> parsed settings -> a Scenario.

A scenario file (TOML) holds the same settings as the flags; its keys are the
flag names without the dashes (``-`` or ``_`` inside a name), and flags given
on the command line override it. Paths in the file are relative to the file,
the ``file=`` of an ``arrivals`` or ``service`` spec too::

    # scenario.toml
    arrivals = "poisson:rate=3.2"
    service = "exponential:mean=1.0"
    concurrency = 4
    maxsize = 100            # or "unbounded"
    on_full = "block"
    max_attempts = 3
    failure_rate = 0.01
    backoff = "exponential:base=0.1,factor=2,cap=30,jitter=1"
    drain_timeout = 30       # or "none"
    items = 100000           # or: duration = 3600
    backlog = 5000           # items already waiting at time 0 (default 0)
    seed = 1
    replications = 5

A command may read further keys itself (a sweep's ``[grid]``, a plan's
``search``, :mod:`pipeline.cli.axes`; ``[[stages]]``, :mod:`pipeline.cli.stages`;
``[[classes]]``, :mod:`pipeline.cli.classes`; every command, ``[retry_budget]``
and ``[breaker]``, :mod:`pipeline.cli.overload`, ``[concurrency_limit]`` and ``[codel]``,
:mod:`pipeline.cli.controls`, and ``[downstream]`` and ``[[faults]]``,
:mod:`pipeline.cli.downstream`):
:func:`read_settings` keeps them, unparsed, in ``settings.tables``.

A scenario file is read defensively: at most :data:`MAX_SCENARIO_BYTES`
(``/dev/zero`` is not read to its end), UTF-8, and nesting too deep for the
TOML parser's recursion is a one-line error naming the file, as is anything
else wrong with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..config import PipelineConfig
from .classes import parse_classes
from .controls import CONTROL_TABLES, parse_controls
from .downstream import parse_downstream, parse_faults
from .overload import OVERLOAD_TABLES, parse_overload
from .stages import PER_STAGE, parse_stages
from .values import CONFIG_FIELDS, OPTIONS, anchor_file_key, flag_name

if TYPE_CHECKING:
    from ..sim.workloads.scenario import Scenario

__all__ = [
    "MAX_SCENARIO_BYTES",
    "SCENARIO_TABLES",
    "add_scenario_flags",
    "build_scenario",
    "check_warmup",
    "read_settings",
    "warmup_origin",
]


def add_scenario_flags(
    parser: argparse.ArgumentParser, reworded: Mapping[str, tuple[str | None, str]] | None = None
) -> None:
    """The scenario file argument and one flag per :data:`~pipeline.cli.values.OPTIONS` entry.

    Shared by every command that builds a scenario (``simulate``, ``plan``, ``sweep``).
    ``reworded`` maps an option's name to the ``(metavar, help)`` a command shows for it
    instead (a metavar of None keeps the shared one), where the flag means more there.
    """
    reworded = reworded or {}
    parser.add_argument("scenario", nargs="?", help="scenario.toml (keys mirror the flags)")
    for name, (_, metavar, text) in OPTIONS.items():
        own_metavar, text = reworded.get(name, (metavar, text))
        metavar = metavar if own_metavar is None else own_metavar
        parser.add_argument(flag_name(name), dest=name, metavar=metavar, help=text)


SCENARIO_TABLES = ("stages", "classes", "downstream", "faults")
"""The tables of a scenario file :func:`build_scenario` reads (every command that builds one)."""

MAX_SCENARIO_BYTES = 10 * 2**20
"""The largest scenario file read, bytes (10 MiB; real ones are under a kilobyte)."""

# Options that are paths, taken relative to the scenario file.
_FILE_PATHS = ("trace", "out")
# Options whose spec may name a file (``empirical:file=...``, ``counts:file=...``).
_SPECS_WITH_FILES = ("arrivals", "service")
_TABLE_OPTIONS = ("autoscale",)  # options a scenario file may also write as a table


def _read_toml(path: str, tables: Collection[str] = ()) -> tuple[dict[str, str], dict[str, Any]]:
    """A scenario file's settings as flag texts, and its ``tables`` keys as TOML gave them.

    ``tables`` names the keys a command reads itself (e.g. a sweep's grid);
    every other key must be one of :data:`~pipeline.cli.values.OPTIONS`.
    """
    import tomllib

    with open(path, "rb") as f:
        # Bounded: a scenario file is a few lines, and /dev/zero must not fill the memory.
        data_bytes = f.read(MAX_SCENARIO_BYTES + 1)
    if len(data_bytes) > MAX_SCENARIO_BYTES:
        raise ValueError(
            f"{path}: more than {MAX_SCENARIO_BYTES:,} bytes; a scenario file holds settings "
            "(keep long data in the CSV files it names)"
        )
    try:
        data = tomllib.loads(data_bytes.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise ValueError(
            f"{path}: nested too deeply to read (arrays or inline tables inside one another "
            "hundreds of levels deep); a scenario file needs two or three"
        ) from None
    except MemoryError:
        raise ValueError(f"{path}: too large to parse in the memory available") from None
    base = os.path.dirname(os.path.abspath(path))
    raw: dict[str, str] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in tables:
            extra[name] = value
            continue
        if name not in OPTIONS:
            allowed = ", ".join(sorted([*OPTIONS, *tables]))
            raise ValueError(f"{path}: unknown key {key!r}; allowed: {allowed}")
        if name in _TABLE_OPTIONS and isinstance(value, dict):
            value = _one_line(path, key, value)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(
                f"{path}: {key} must be a string or a number, got {type(value).__name__} {value!r}"
            )
        text = str(value)
        if name in _FILE_PATHS:
            text = os.path.join(base, text)
        elif name in _SPECS_WITH_FILES:
            text = anchor_file_key(text, base)
        raw[name] = text
    return raw, extra


def _one_line(path: str, key: str, table: dict[str, Any]) -> str:
    """A table of numbers and words (``[autoscale]``) as its option's ``k=v,...`` text; a
    pair of numbers ``k = [a, b]`` becomes ``k_pods=a,k_fraction=b`` (``max_scale_up``)."""
    pairs = []
    for name, value in table.items():
        if isinstance(value, list) and len(value) == 2 and name == "max_scale_up":
            pairs += [f"{name}_pods={value[0]}", f"{name}_fraction={value[1]}"]
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(
                f"{path}: [{key}] {name} must be a string or a number, "
                f"got {type(value).__name__} {value!r}"
            )
        if isinstance(value, str) and ("," in value or "=" in value):
            raise ValueError(f"{path}: [{key}] {name}: unexpected ',' or '=' in {value!r}")
        pairs.append(f"{name}={value}")
    return ",".join(pairs) if pairs else "none"


class _Settings(dict[str, Any]):
    """Parsed values by option name, and where each came from (``origins``), for messages."""

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[str, str] = {}
        self.tables: dict[str, Any] = {}
        self.path: str | None = None


def _source(settings: dict[str, Any], name: str) -> str:
    """Where a setting came from: ``--items`` (a flag) or ``'items' in scenario.toml``."""
    return getattr(settings, "origins", {}).get(name, flag_name(name))


def warmup_origin(settings: dict[str, Any]) -> str:
    """Where the warm-up came from, for messages: ``--warmup`` or ``'warmup' in FILE``."""
    return _source(settings, "warmup")


def check_warmup(scenario: Scenario, settings: dict[str, Any]) -> None:
    """Refuse, before any run, a warm-up that the arrivals end before (``warmup >= duration``):
    no item would arrive after it, so nothing would be measured.

    A run of ``items`` ends when it ends: :mod:`pipeline.cli.simulate` and
    :mod:`pipeline.cli.sweep` check those after the runs, before writing anything.

    Raises:
        ValueError: naming where the warm-up and the duration came from.
    """
    warm, duration = scenario.warmup_s, scenario.duration_s
    if warm > 0 and duration is not None and warm >= duration:
        raise ValueError(
            f"{warmup_origin(settings)} {warm:g} s is not shorter than the arrivals' "
            f"{duration:g} s ({_source(settings, 'duration')}): no item would arrive after the "
            "warm-up to be measured; give a shorter warm-up or a longer run"
        )


def read_settings(args: argparse.Namespace, tables: Collection[str] = ()) -> _Settings:
    """Parsed settings: the scenario file's values, overridden by the flags given.

    The file's keys named in ``tables`` are kept, unparsed, in ``settings.tables``.
    """
    sources: list[tuple[str, dict[str, str]]] = []
    file_tables: dict[str, Any] = {}
    if args.scenario is not None:
        # Every command reads the overload controls' sections (cli.overload, cli.controls).
        raw, file_tables = _read_toml(args.scenario, (*tables, *OVERLOAD_TABLES, *CONTROL_TABLES))
        sources.append((args.scenario, raw))
    flags = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    if sources and ("items" in flags or "duration" in flags):
        # --items and --duration are one choice: a flag for either replaces the file's.
        for name in ("items", "duration"):
            sources[0][1].pop(name, None)
    sources.append(("", flags))
    settings = _Settings()
    for origin, raw in sources:
        for name, text in raw.items():
            label = f"{origin}: {name}" if origin else flag_name(name)
            try:
                settings[name] = OPTIONS[name][0](text)
            except ValueError as exc:
                raise ValueError(f"{label}: {exc}") from None
            settings.origins[name] = f"{name!r} in {origin}" if origin else flag_name(name)
    settings.tables = file_tables
    settings.path = args.scenario
    return settings


def build_scenario(settings: dict[str, Any]) -> Scenario:
    """The Scenario the settings describe: a trace, a chain of ``[[stages]]``, or one stage.

    Raises:
        ValueError: settings that cannot go together, or a missing one, named as given.
    """
    from ..sim.workloads.failures import IndependentFailures, NoFailures

    file_tables = getattr(settings, "tables", {})
    if "stages" in file_tables:
        _refuse_one_pipeline_settings(settings)
    config = PipelineConfig(
        **{field: settings[name] for name, field in CONFIG_FIELDS.items() if name in settings},
        **parse_overload(file_tables, getattr(settings, "path", None)),
    )
    controls = parse_controls(getattr(settings, "tables", {}), settings.path)
    if controls:
        try:
            config = dataclasses.replace(config, **controls)
        except (TypeError, ValueError) as exc:
            section = next((f" [{name}]:" for name in controls if name in str(exc)), "")
            raise ValueError(f"{settings.path}:{section} {exc}") from None
    if "items" in settings and "duration" in settings:
        raise ValueError(
            f"give --items N or --duration S, not both (got {_source(settings, 'items')} "
            f"and {_source(settings, 'duration')})"
        )
    length: dict[str, Any] = {}
    if "items" in settings:
        length["n_items"] = settings["items"]
    elif "duration" in settings:
        length["duration_s"] = settings["duration"]
    rate = settings.get("failure_rate", 0.0)
    failures = IndependentFailures(rate) if rate > 0 else NoFailures()
    extra = {
        field: settings[name]
        for name, field in (
            ("seed", "seed"),
            ("warmup", "warmup_s"),
            ("item_size", "item_size_bytes"),
            ("backlog", "initial_backlog"),
        )
        if name in settings
    }
    class_tables = file_tables.get("classes")
    if class_tables is not None:
        extra["classes"] = parse_classes(class_tables, settings.path)
    if file_tables.get("downstream") is not None:
        extra["downstream"] = parse_downstream(file_tables["downstream"], settings.path)
    if file_tables.get("faults") is not None:
        extra["faults"] = parse_faults(file_tables["faults"], settings.path)
    try:
        return _scenario(settings, config, length, failures, extra)
    except ValueError as exc:
        # The Scenario names its field; the user gave a flag or a file's key.
        field, _, rest = str(exc).partition(" ")
        if field.strip("(") == "initial_backlog" and "backlog" in settings:
            raise ValueError(f"{_source(settings, 'backlog')} {rest}") from None
        if "classes" in extra and "class" in str(exc):
            raise ValueError(f"{settings.path}: [[classes]]: {exc}") from None
        if ("downstream" in extra or "faults" in extra) and str(exc).startswith(
            ("faults[", "downstream is set")
        ):
            raise ValueError(f"{settings.path}: {exc}") from None
        raise


def _refuse_one_pipeline_settings(settings: Any) -> None:
    """Refuse, in one line, what sets a single pipeline's behaviour in a file with ``[[stages]]``.

    The overload controls' tables and the autoscaler configure the one pipeline of a
    single-stage scenario; a chain's stages each run a pipeline of their own, set in its
    ``[[stages]]`` table, so they would silently do nothing there. (From Python, each
    ``StageSpec``'s ``config`` may carry them.)
    """
    given = [f"[{name}]" for name in (*OVERLOAD_TABLES, *CONTROL_TABLES) if name in settings.tables]
    if "autoscale" in settings:
        flag = _source(settings, "autoscale").startswith("--")  # else the file's table
        given.append(flag_name("autoscale") if flag else "[autoscale]")
    if given:
        raise ValueError(
            f"{settings.path}: {', '.join(given)} with [[stages]]: these set a single "
            "pipeline, and a chain's stages each have their own; drop them (or the stages)"
        )


def _scenario(
    settings: dict[str, Any],
    config: PipelineConfig,
    length: dict[str, Any],
    failures: Any,
    extra: dict[str, Any],
) -> Scenario:
    from ..sim.workloads.scenario import Scenario

    rate = settings.get("failure_rate", 0.0)
    stage_tables = getattr(settings, "tables", {}).get("stages")
    if stage_tables is not None:
        return _chain_scenario(settings, stage_tables, length, extra)
    if "trace" in settings:
        given = [_source(settings, n) for n in ("arrivals", "service") if n in settings]
        if given:
            raise ValueError(
                f"{_source(settings, 'trace')} replays the arrival and service times recorded "
                f"in {settings['trace']}; drop {' and '.join(given)}"
            )
        if settings.get("backlog"):
            raise ValueError(
                f"{_source(settings, 'backlog')} {settings['backlog']} with "
                f"{_source(settings, 'trace')}: the trace gives service times to its recorded "
                "arrivals only, none to a backlog; drop one of them"
            )
        from ..sim.workloads.traces.replay import load_trace

        workload = load_trace(settings["trace"])
        if length.get("n_items", 0) > len(workload):
            raise ValueError(
                f"{_source(settings, 'items')} {length['n_items']} is more than the "
                f"{len(workload)} rows of {settings['trace']}"
            )
        failures = workload.failures | failures if rate > 0 else workload.failures
        return workload.scenario(config, failures=failures, **length, **extra)
    # With a downstream, the service is client-side time before each call, and optional.
    needed = ("arrivals",) if "downstream" in extra else ("arrivals", "service")
    missing = [flag_name(n) for n in needed if n not in settings]
    if missing:
        raise ValueError(f"missing {' and '.join(missing)} (or give --trace FILE.csv)")
    if not length:
        raise ValueError("give --items N or --duration S (how much traffic to simulate)")
    return Scenario(
        arrivals=settings["arrivals"],
        service=settings.get("service"),
        config=config,
        failures=failures,
        **length,
        **extra,
    )


def _chain_scenario(
    settings: dict[str, Any], tables: Any, length: dict[str, Any], extra: dict[str, Any]
) -> Scenario:
    """A chain from the scenario file's ``[[stages]]`` tables (see :mod:`pipeline.cli.stages`)."""
    from ..sim.workloads.scenario import Scenario

    path = settings.path
    misplaced = [_source(settings, name) for name in PER_STAGE if name in settings]
    if misplaced:
        raise ValueError(
            f"{', '.join(misplaced)}: with [[stages]] in {path}, each stage has its own "
            "service and settings; set them in its [[stages]] table"
        )
    if "arrivals" not in settings:
        raise ValueError(f"missing --arrivals (the chain's source: items arriving at {path})")
    if not length:
        raise ValueError("give --items N or --duration S (how much traffic to simulate)")
    return Scenario(
        arrivals=settings["arrivals"], stages=parse_stages(tables, path), **length, **extra
    )
