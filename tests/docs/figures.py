"""The figures a page's prose quotes, checked against that page's own run.

An output block is compared with its run as a whole (``test_snippets.py``); the
prose around it quotes some of its numbers again, in words or rounded ("72 runs",
"999 s ± 34 s"). Each checker here finds the figure in the prose (so a page that
drops or rewords it fails until the checker follows) and holds it to the run:
exactly for what the seeds fix (plan bounds, run counts, intervals), loosely for
what the machine decides (times, stated as "about" and checked to their order).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.snippets import shows


@dataclass
class PageRun:
    """What running one page gave: its text, the output of each block, its namespace.

    Attributes:
        page: the Markdown file.
        text: its text.
        folder: the folder it ran in (the files its blocks wrote are there).
        outputs: each block's printed output (stdout and stderr), by its opening line.
        namespace: the page's Python namespace after its last block.
    """

    page: Path
    text: str
    folder: Path
    outputs: dict[int, str] = field(default_factory=dict)
    namespace: dict = field(default_factory=dict)

    def output(self, contains: str) -> str:
        """The output of the one block whose output contains ``contains``."""
        found = [out for out in self.outputs.values() if contains in out]
        assert len(found) == 1, f"{self.page.name}: {len(found)} outputs contain {contains!r}"
        return found[0]


def json_in(output: str) -> dict:
    """The first line of ``output`` that is a JSON object, parsed (stderr may surround it)."""
    line = next(line for line in output.splitlines() if line.startswith("{"))
    return json.loads(line)


def says(run: PageRun, phrase: str) -> str:
    """``phrase`` as the page says it (whitespace aside); fails if the page does not."""
    pattern = r"\s+".join(re.escape(part) for part in phrase.split())
    assert re.search(pattern, run.text), f"{run.page.name} no longer says {phrase!r}"
    return phrase


def agrees(run: PageRun, phrase: str, actual: str) -> None:
    """The page says ``phrase``, and ``actual`` (from the run) reads the same, rounded."""
    says(run, phrase)
    assert shows(phrase, actual), f"{run.page.name} says {phrase!r}; the run gives {actual!r}"


def about(value: float, low: float, high: float, what: str) -> None:
    """A machine-dependent figure the prose gives as "about": within its stated order."""
    assert low <= value <= high, f"{what} is {value}, outside the prose's [{low}, {high}]"


CHECKERS: dict[str, Callable[[PageRun], None]] = {}


def checker(name: str) -> Callable[[Callable[[PageRun], None]], Callable[[PageRun], None]]:
    """Register the checker of the page whose file is ``name``."""

    def register(function: Callable[[PageRun], None]) -> Callable[[PageRun], None]:
        CHECKERS[name] = function
        return function

    return register


def check(run: PageRun) -> None:
    """Hold the page's prose to its run (pages without quoted figures have no checker)."""
    checker_of_page = CHECKERS.get(run.page.name)
    if checker_of_page is not None:
        checker_of_page(run)


@checker("README.md")
def readme(run: PageRun) -> None:
    ns = run.namespace
    agrees(run, "# 0.815 s: one run", f"# {ns['result'].summary['wait_mean_s']} s: one run")
    interval = ns["runs"].interval("wait_mean_s")
    agrees(run, "# 0.746 +- 0.033 s", f"# {interval.mean} +- {interval.half_width} s")
    erlang_c = ns["theory"].mmc(3.2, 1.0, 4).wait_mean_s
    agrees(run, "Erlang C says 0.7455 s", f"Erlang C says {erlang_c} s")
    assert ns["result"].summary["engine"] == "kernel"


@checker("statistics.md")
def statistics(run: PageRun) -> None:
    ns = run.namespace
    wait, ci = (ns["result"].summary[key] for key in ("wait_mean_s", "wait_mean_ci95_s"))
    agrees(run, "# 0.815 +- 0.080 s", f"# {wait} +- {ci} s")
    agrees(
        run,
        "(`0.8146 s ± 0.07952 s (95%, batch means)`)",
        f"(`{wait} s ± {ci} s (95%, batch means)`)",
    )
    more = ns["more"]
    agrees(
        run,
        "gives a wait `-0.586 ± 0.027 s` over its default 10 replications (unpaired ± 0.031;",
        f"gives a wait `{more.difference} ± {more.half_width} s` over its default"
        f" {len(more.values_a)} replications (unpaired ± {more.unpaired_half_width};",
    )
    theory = ns["theory"]
    erlang_c = theory.mmc(3.2, 1.0, 5).wait_mean_s - theory.mmc(3.2, 1.0, 4).wait_mean_s
    agrees(run, "Erlang C: -0.585 s)", f"Erlang C: {erlang_c} s)")


@checker("simulating.md")
def simulating(run: PageRun) -> None:
    backlog = json_in(run.output('"items_backlog"'))
    drained, half_width = backlog["backlog_drained_s"], backlog["ci95"]["backlog_drained_s"]
    agrees(run, "(999 s ± 34 s, 95%)", f"({drained} s ± {half_width} s, 95%)")
    assert 16 * 60 <= drained <= 18 * 60, "the prose says about 17 minutes"
    agrees(run, "(255 s above)", f"({backlog['backlog_cleared_s']} s above)")
    # "about 4,880 items waited upstream", to the nearest ten
    agrees(
        run, "about 4,880 items", f"about {round(backlog['upstream_backlog_max'], -1):,.0f} items"
    )
    metrics = json_in(run.output('pipeline="checkout"'))
    agrees(
        run, "`queue_depth_max` (26 here)", f"`queue_depth_max` ({metrics['queue_depth_max']} here)"
    )
