"""A capacity check: one configuration judged against the SLOs, as a CI gate.

``python -m pipeline plan --check concurrency=8,maxsize=100`` plans over a
search of that one configuration: it *meets* (exit status 0) when every SLO
is shown to hold, *fails* (1) when one is shown not to, and is *undecided* (3)
when the replication budget ran out first -- a run too short, or a
configuration too close to a limit, to tell. Each verdict is the plan's, at
its confidence (see :func:`~.plan.plan`), so a check run on every commit
fails a sound configuration at most ``1 - confidence`` of the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..diagnostics.stability import grows_when_unstable
from .judgement import Judgement
from .records import judgement_dict, point_text

if TYPE_CHECKING:
    from .candidate import Candidate
    from .result import Plan
    from .slo import SLO

__all__ = ["EXIT_STATUS", "CheckVerdict", "verdict_of"]

EXIT_STATUS = {"meets": 0, "fails": 1, "undecided": 3}
"""The command line's exit status for each verdict."""


@dataclass(frozen=True)
class CheckVerdict:
    """The check's outcome.

    Attributes:
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
        configuration: the configuration judged (its config fields).
        judgements: one per SLO, in the order given, always: a configuration
            queueing theory rejects without runs fails each SLO on a wait or
            latency (it cannot keep up), and its other SLOs are not judged
            (``undecided``, the note says why).
        replications: runs behind the verdict.
        note: why it fails without runs (queueing theory: it cannot keep up), else None.
    """

    verdict: str
    configuration: dict[str, Any]
    judgements: tuple[Judgement, ...]
    replications: int
    note: str | None = None

    @property
    def exit_status(self) -> int:
        """0 meets, 1 fails, 3 undecided."""
        return EXIT_STATUS[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        """``verdict``, ``configuration``, ``note``, ``judgements`` (``slo``, ``verdict``,
        ``mean``, ``bound``, ``low``, ``high``, ``replications``, ``note``), as
        ``plan --check --json`` prints them beside the plan's keys."""
        return {
            "verdict": self.verdict,
            "configuration": dict(self.configuration),
            "note": self.note,
            "judgements": [judgement_dict(j) for j in self.judgements],
        }

    def text(self) -> str:
        """One line: ``check: meets (exit 0) after 3 replications: concurrency=8, ...``."""
        return (
            f"check: {self.verdict} (exit {self.exit_status}) after {self.replications} "
            f"replications: {point_text(self.configuration)}"
        )


def verdict_of(plan: Plan) -> CheckVerdict:
    """The verdict of a plan over one configuration (``plan --check``).

    Raises:
        ValueError: the plan searched more than one configuration.
    """
    if plan.total_candidates != 1:
        raise ValueError(
            f"a check judges one configuration; this plan searched {plan.total_candidates}"
        )
    (candidate,) = plan.examined
    verdict = "fails" if candidate.verdict == "unstable" else candidate.verdict
    configuration = plan.config_of(candidate)
    judgements = candidate.judgements
    if candidate.verdict == "unstable":
        judgements = unrun_judgements(candidate, plan.slos)
    return CheckVerdict(verdict, configuration, judgements, candidate.replications, candidate.note)


def unrun_judgements(candidate: Candidate, slos: tuple[SLO, ...]) -> tuple[Judgement, ...]:
    """One judgement per SLO for a configuration queueing theory rejected without runs:
    each wait or latency SLO fails (it cannot keep up: the candidate's note says why);
    the others are not judged (``undecided``), since nothing was run."""
    nan = math.nan
    reason = candidate.note or "queueing theory rejects it"
    return tuple(
        Judgement(slo, 0, nan, nan, nan, "fails", basis="theory", note=reason)
        if grows_when_unstable(slo)
        else Judgement(
            slo,
            0,
            nan,
            nan,
            nan,
            "undecided",
            basis="theory",
            note="not run: queueing theory already fails the configuration on its waits",
        )
        for slo in slos
    )
