"""Failure models for simulated handlers.

A model is a frozen, validated value object with a ``repr`` that rebuilds it
(``IndependentFailures(p=0.1)``). Before a run the simulator binds it to that
run's failure stream -- ``model.bind(rng, n_items)`` -- and then calls the
bound object once per attempt, after drawing the attempt's service time::

    failure = bound.check(item_id, attempt, in_flight)

``None`` means the attempt succeeds after its service time. A :class:`Failure`
means it fails: if ``failure.hang_s`` is ``None`` the handler raises
``failure.error`` after its normal service time; otherwise the attempt hangs
for ``hang_s`` seconds instead (so a configured ``attempt_timeout_s`` can cut
it) and raises ``failure.error`` if it was not cut.

``check`` is on the hot path (100,000+ calls per run): random models pre-draw
uniforms in blocks of :data:`BLOCK` (:mod:`.uniforms`) and keep them as a Python
list, so a call costs a list index and a comparison, not a numpy call.

Models: :class:`NoFailures` and :class:`CombinedFailures` (also spelled
``a | b``; the first failure wins) with the base classes in :mod:`.model`;
by chance, :class:`IndependentFailures`, :class:`PermanentFailures` and
:class:`Hangs` (:mod:`.chance`); under load, :class:`Overload` and
:class:`TokenQuota` (:mod:`.load`); and :class:`ScriptedFailures`
(:mod:`.scripted`). Every name is importable from this package.
"""

from __future__ import annotations

from .chance import Hangs, IndependentFailures, PermanentFailures
from .load import Overload, TokenQuota
from .model import (
    AttemptFailures,
    CombinedFailures,
    Failure,
    FailureModel,
    NoFailures,
    SimulatedFailure,
    SimulatedHang,
)
from .scripted import ScriptedFailures
from .uniforms import BLOCK

__all__ = [
    "BLOCK",
    "AttemptFailures",
    "CombinedFailures",
    "Failure",
    "FailureModel",
    "Hangs",
    "IndependentFailures",
    "NoFailures",
    "Overload",
    "PermanentFailures",
    "ScriptedFailures",
    "SimulatedFailure",
    "SimulatedHang",
    "TokenQuota",
]
