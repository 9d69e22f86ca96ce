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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .records import judgement_dict

if TYPE_CHECKING:
    from .judgement import Judgement
    from .result import Plan

__all__ = ["EXIT_STATUS", "CheckVerdict", "verdict_of"]

EXIT_STATUS = {"meets": 0, "fails": 1, "undecided": 3}
"""The command line's exit status for each verdict."""


@dataclass(frozen=True)
class CheckVerdict:
    """The check's outcome.

    Attributes:
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
        configuration: the configuration judged (its config fields).
        judgements: one per SLO, in the order given.
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
        """``verdict``, ``configuration`` and ``judgements`` (``slo``, ``verdict``, ``mean``,
        ``bound``, ``low``, ``high``, ``replications``, ``note``), as ``plan --check --json``
        prints them beside the plan's keys."""
        return {
            "verdict": self.verdict,
            "configuration": dict(self.configuration),
            "note": self.note,
            "judgements": [judgement_dict(j) for j in self.judgements],
        }

    def text(self) -> str:
        """One line: ``check: meets (exit 0): concurrency=8, ...``."""
        point = ", ".join(
            f"{k}={'unbounded' if v is None else v}" for k, v in self.configuration.items()
        )
        return (
            f"check: {self.verdict} (exit {self.exit_status}) after {self.replications} "
            f"replications: {point}"
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
    (candidate,) = plan._candidates
    verdict = "fails" if candidate.verdict == "unstable" else candidate.verdict
    configuration = plan._config(candidate)
    return CheckVerdict(
        verdict, configuration, candidate.judgements, candidate.replications, candidate.note
    )
