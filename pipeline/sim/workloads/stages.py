"""``StageSpec``: one simulated stage of a multi-stage scenario.

A scenario with ``stages=[...]`` runs the real :class:`~pipeline.Chain` on the
virtual clock: each stage's handler sleeps for its service time and fails as
its failure model says; the engine does the rest (bounded queues, hand-off
with blocking after service, retries, dead letters, the end-to-end drain).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..._validate import show
from ...config import PipelineConfig
from .distributions import Distribution
from .failures import FailureModel, NoFailures
from .traces.service import ServiceTrace

__all__ = ["MAX_FAN_OUT", "StageSpec"]

MAX_FAN_OUT = 10_000
"""The most children one simulated item may yield at a stage."""


@dataclass(frozen=True, kw_only=True)
class StageSpec:
    """A simulated stage: its name, service times, configuration and failures.

    Args:
        name: unique within the scenario; the key of ``result.stages``.
        service: how long each attempt at this stage takes, seconds (a
            distribution, or a :class:`~pipeline.sim.ServiceTrace` with one
            time per item reaching the stage, by item id, for exact replay).
        config: the stage's :class:`~pipeline.PipelineConfig`. The chain drains
            within the first stage's ``drain_timeout_s``.
        fan_out: children each completed item yields for the next stage (>= 1;
            1 passes the item itself on). Child *j* of item *i* gets the id
            ``i * fan_out + j`` at the next stage.
        failures: how attempts at this stage fail (default: never).

    Raises:
        ValueError, TypeError: a bad value (named in the message).
    """

    name: str
    service: object
    config: PipelineConfig = field(default_factory=PipelineConfig)
    fan_out: int = 1
    failures: FailureModel = field(default_factory=NoFailures)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"stage name must be a non-empty string, got {show(self.name)}")
        if not isinstance(self.service, Distribution | ServiceTrace):
            raise TypeError(
                f"stage {self.name!r}: service must be a distribution or a ServiceTrace, "
                f"got {show(self.service)}"
            )
        if not isinstance(self.config, PipelineConfig):
            raise TypeError(
                f"stage {self.name!r}: config must be a PipelineConfig, got {show(self.config)}"
            )
        if (
            isinstance(self.fan_out, bool)
            or not isinstance(self.fan_out, int)
            or not 1 <= self.fan_out <= MAX_FAN_OUT
        ):
            raise ValueError(
                f"stage {self.name!r}: fan_out must be an integer >= 1 and <= {MAX_FAN_OUT:,} "
                f"children per item, got {show(self.fan_out)}"
            )
        if not isinstance(self.failures, FailureModel):
            raise TypeError(
                f"stage {self.name!r}: failures must be a failure model, got {show(self.failures)}"
            )
