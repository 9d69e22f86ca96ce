"""The registry of the prose's numbers that no page check finds by itself.

``tests/docs/prose_numbers.py`` says what counts as held; this module lists, for
the numbers a test holds without a ``says``/``agrees``/``quoted`` phrase of its
own, the phrase and the test (:data:`REGISTRY`), and the numbers that are not
figures at all (:data:`NOT_FIGURES`): names, dates, versions, references.
A figure of a result belongs in neither list: it gets a check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Held:
    """A phrase of a page whose numbers are held by a test, or are not figures.

    Attributes:
        page: the page, from the repository's root (``docs/guide/twin.md``); ``*`` for
            every page (a name's pattern: a notebook's number, a version).
        phrase: the words as the page says them (whitespace aside), every number in
            them held; it must occur on the page.
        by: what holds them: ``tests/<file>.py::<test>`` (a test or a checker that holds
            the figure to its source), or, in :data:`NOT_FIGURES`, why they are not figures.
        in_code: the phrase is a whole inline code span (`` `...` ``), matched against
            each span of the prose's own (never from one span's end to the next's start).
    """

    page: str
    phrase: str
    by: str
    in_code: bool = False


#: The pages, from the repository's root, that the entries below name more than once.
README, WORKSHOP = "README.md", "docs/workshop.md"
GUIDE = "docs/guide/"
PLANNING, STATISTICS = GUIDE + "planning.md", GUIDE + "statistics.md"
SIMULATING, TWIN, CHAINS = GUIDE + "simulating.md", GUIDE + "twin.md", GUIDE + "chains.md"
SEMANTICS, METRICS = GUIDE + "semantics.md", GUIDE + "metrics.md"
REGISTRY: tuple[Held, ...] = (
    # the workshop's resource table: each notebook's run is measured against its row
    Held(
        WORKSHOP,
        r"\| \d\db? \| [\d.]+ MiB \| [\d.]+ s \| [\d.]+ MiB \| [\d.]+ s \|",
        "tests/notebooks/after_the_run.py::quoted_resources",
    ),
    # the designs of the coverage tests, whose counts the same tests quote
    Held(
        STATISTICS,
        r"over 600, 400 and 100 runs of 10,000, 20,000 and 100,000 items",
        "tests/sim/running/test_summary_intervals.py::test_batch_means_half_widths_cover_the_true_means",
    ),
    Held(
        STATISTICS,
        r"On M/M/10 at 80% \(Erlang C exact\) the plain t half-width over 20 batches",
        "tests/sim/running/test_summary_intervals.py::test_shorter_runs_and_more_batches_under_cover",
    ),
    Held(
        STATISTICS,
        r"9,000 runs of 2,000 items cut into independent looks, a 99% upper bound",
        "tests/sim/analysis/planning/test_skewed_bounds.py::test_per_look_bound_holds_its_level_on_short_skewed_runs",
    ),
    Held(
        STATISTICS,
        r"the looks at 3 to 30 replications chose",
        "tests/sim/analysis/planning/test_skewed_bounds.py::test_wrong_choice_rate_near_a_boundary_on_short_runs",
    ),
    Held(
        STATISTICS,
        r"over 3 replications of 2,000-item M/M/10 runs at 80% \(2,000 looks\)",
        "tests/sim/running/test_replication_intervals.py::test_three_replications_are_not_wildly_wider_than_student_t",
    ),
    Held(
        STATISTICS,
        r"what 600 looks of a 95% interval allow \(a test runs these 600 seeds of"
        r" `simulate\(..., replications=3\)` against Erlang C\)\. On 2,000-item runs at 80%",
        "tests/sim/running/test_replication_intervals.py::test_replication_interval_covers_the_true_mean_wait_on_short_skewed_runs",
    ),
    Held(
        STATISTICS,
        r"paired differences of c = 10 and c = 11",
        "tests/sim/running/test_replication_intervals.py::test_paired_difference_covers_the_true_difference",
    ),
    Held(
        STATISTICS,
        r"For short runs, run at least 6 replications",
        "tests/sim/running/test_replication_intervals.py::test_replication_interval_covers_the_true_mean_wait_on_short_skewed_runs",
    ),
    Held(
        STATISTICS,
        r"from 3 values: with 2 its upper end is astronomically far, so two replications get"
        r" Student t, whose 97\.5% upper bound, the top of a 95% interval",
        "tests/sim/analysis/planning/test_skewed_bounds.py::test_per_look_bound_holds_its_level_on_short_skewed_runs",
    ),
    Held(
        STATISTICS,
        r"use 3 or more\)",
        "tests/sim/analysis/planning/test_skewed_bounds.py::test_per_look_bound_holds_its_level_on_short_skewed_runs",
    ),
)
"""Phrases whose numbers a named test holds to their source."""

NOT_FIGURES: tuple[Held, ...] = (
    # names: notebooks, versions, commits, standards, ports, HTTP statuses, models
    Held("*", r"(?<![\d.])0\d(?:b|-\w+)?\b", "a notebook's number: its name"),
    Held("*", r"[Nn]otebooks? \d\d\b", "a notebook's number: its name"),
    Held("*", r"\*\*1[0-3] ", "a notebook's number: its name"),
    Held("*", r"`1[0-3]-[a-z-]+`", "a notebook's file name"),
    Held("*", r"Python 3\.\d+(?:\+| to 3\.\d+|, 3\.\d+ and 3\.\d+)|CPython 3\.\d+", "a version"),
    Held("*", r"`[0-9a-f]{7}`", "a commit"),
    Held("*", r"RFC \d+", "a standard's number"),
    Held("*", r"\(v\d+\.\d+\.\d+\)", "a version"),
    Held("*", r"--port=8899|HOST:8786", "a port: an example's address"),
    Held("*", r"`(?:429|503)`|\b(?:429|503)s\b|5xx|code=~\"5\.\.\"", "an HTTP status: a name"),
    Held("*", r"M/M/\d+", "a model's name (Kendall's notation)"),
    Held(
        "*",
        r"exit(?:s with)? status \**[0-3]\**|exit 0\)|\*\*[013]\*\* (?:meets|fails|undecided)",
        "an exit status: a code of the command line's contract, which tests/cli hold",
    ),
    Held(
        "*",
        r"`[^`(]*(?:<=|>=|=|\.\.|--)[^`(]*`",
        "an example's input (a flag, a setting, an SLO), typed in code",
        in_code=True,
    ),
    Held(
        "*",
        r"`[^`\n]*(?:confidence|level|rho|n0|sync_s|payload\[)[^`\n]*`|`0 ± 0`",
        "a formula's or a syntax example's constant",
        in_code=True,
    ),
    # zero and one as a definition's bounds, origins and flags: not a measure
    Held(GUIDE + "engine.md", r"timeout of 0 fires", "zero: a boundary case"),
    Held(
        GUIDE + "engine.md",
        r"an `Autoscaler` of up to 100,000 workers",
        "tests/sim/running/kernel/test_kernel_autoscale_equality.py::"
        "test_an_autoscaled_chain_stage_an_endless_window_and_a_huge_pool_stay_with_the_engine",
    ),
    Held(METRICS, r"`port=`; 0", "zero: the port number that asks the OS for one"),
    Held(METRICS, r"`half_open`: 1 for the breaker's state now", "a gauge's flag value"),
    Held(METRICS, r"all 0 without a breaker", "a gauge's flag value"),
    Held(SEMANTICS, r"`0` is an error", "zero: a boundary case"),
    Held(SEMANTICS, r"a number > 0 \(0,", "zero: a boundary case"),
    Held(
        SEMANTICS,
        r"sliding 60 s window|the last 60 s|`burst_s=10` holds 10 s",
        "the minute of a per-minute limit, and the example's own setting",
    ),
    Held(
        SIMULATING,
        r"interval of 0 that means|>= 0 are one-line|A share of 0 gives",
        "zero: a boundary case",
    ),
    Held(SIMULATING, r"waiting at time 0|arrived at 0|a burst at time 0", "zero: the run's start"),
    Held(PLANNING, r"each a finite number >= 0|summing to 1|a share of 0", "a share's bounds"),
    Held(STATISTICS, r"no depth or time below 0, no fraction above 1", "a metric's range"),
    Held(
        GUIDE + "overload.md",
        r"stays inside \[-1, 1\]",
        "the range of a difference of two fractions",
    ),
    Held(STATISTICS, r"shed fraction 0 for sure", "zero: a boundary case"),
    Held(STATISTICS, r"Near utilisation 1", "one: the boundary of stability"),
    Held(STATISTICS, r"the 95% half-widths", "the level the keys' names say (`ci95`)"),
    Held(
        PLANNING,
        r"each cell annotated `mean ± 95% half-width`",
        "the level the columns' names say (`_ci95`)",
    ),
    Held(README, r"What does the plan's 95% promise", "a question's example level"),
    # the workshop's agenda and advice: the instructor's choices
    Held(WORKSHOP, r"\| \d:\d\d-\d:\d\d \|[^\n]*", "the agenda: a schedule, chosen"),
    Held(WORKSHOP, r"\| \d+ min \|", "the homework's suggested time, chosen"),
    Held(WORKSHOP, r"JupyterLab\s+4", "a version"),
    Held(
        WORKSHOP,
        r"sweep at script\.py:6 would start 2 worker processes|pass processes=1",
        "an example error message: its script's line and the count it asked for",
    ),
    Held(WORKSHOP, r"CPython 3\.11, 2 cores", "the measuring machine"),
    Held(
        WORKSHOP,
        r"A guarantee of 0\.5 CPU and a limit of 2 per user",
        "advice: the room's CPU settings, chosen",
    ),
    Held(WORKSHOP, r"6 / 8`", "an example line of the grading's output"),
    Held(WORKSHOP, r"05b, 06 and 12 use two processes", "notebooks' numbers: their names"),
    Held(
        WORKSHOP,
        r"06 and 10 stop at their first data cell and score 0",
        "a notebook's name, and zero",
    ),
)
"""Phrases whose numbers name something rather than quote a figure, each with why."""

GIVENS: tuple[Held, ...] = (
    Held(
        PLANNING,
        r"keep p95 latency under 500 ms and queue memory under 200 MB, at 50 requests/s with 2%"
        r" transient failures, when the handler's dashboard says median 50 ms, p99 1\.2 s",
        "the plan's command",
    ),
    Held(
        PLANNING,
        r"Workers cost 1\.20 an hour; a request waiting an hour costs us 12",
        "the cost plan's command",
    ),
    Held(
        PLANNING,
        r"20% more traffic, a 20% slower handler or a 20% wider spread",
        "the sensitivity's command",
    ),
    Held(PLANNING, r"`--sensitivity 10` for ±10%", "the sensitivity's command"),
    Held(
        SIMULATING,
        r"the queue holds 5,000 items now, and traffic keeps coming at 15 a second\. With 20"
        r" workers",
        "the backlog's command",
    ),
    Held(SIMULATING, r"drain it within 300 s on average", "the backlog plan's command"),
)
"""A worked example's givens: phrases each of whose numbers the page's own code (which
the page's run runs) writes, as it is or as a share or a unit apart (2% as 0.02, 500
ms as 0.5, 200 MB as 200e6)."""
