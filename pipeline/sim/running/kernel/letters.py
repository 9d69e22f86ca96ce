"""A replayed stage's dead letters, out of its event log (see :mod:`.replay`): every failed
attempt's error, as the engine recorded it."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.records import AttemptError, DeadLetter, describe_error

from ...workloads.downstream import DownstreamFull
from ...workloads.failures import AttemptFailures
from . import replay as R

if TYPE_CHECKING:
    from .driver import StageInput

__all__ = ["dead_letters", "failure_parts"]


def failure_parts(failures: AttemptFailures | None) -> list:
    """The bound models a stage's attempts meet, in order (a combination's parts)."""
    if failures is None or type(failures) is AttemptFailures:
        return []
    parts = getattr(failures, "parts", None)
    return list(parts) if parts is not None else [failures]


def dead_letters(
    spec: StageInput, kinds: np.ndarray, times: np.ndarray, ids: np.ndarray, part: np.ndarray
) -> list[DeadLetter]:
    """The stage's dead letters, in order, with every failed attempt's error (from its log).

    Every attempt of a dead letter failed: a retry scheduled, or the dead-lettering
    itself, logged with the part of the failure model that failed it (or the
    cut's: a storm dead-letters most items, so those errors are described once).
    The garbage collector waits meanwhile: a storm's letters are millions of new
    objects, none of them garbage, and its passes over them took 3/4 of the time.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _written(spec, kinds, times, ids, part)
    finally:
        if collecting:
            gc.enable()


def _written(
    spec: StageInput, kinds: np.ndarray, times: np.ndarray, ids: np.ndarray, part: np.ndarray
) -> list[DeadLetter]:
    """:func:`dead_letters`, the garbage collector aside."""
    parts, cut, retry = failure_parts(spec.failures), _cut_errors(spec), spec.config.retry
    described = {k: (type(error).__name__, describe_error(error)) for k, error in cut.items()}
    dead = ids[kinds == R.DEAD_LETTERED]
    history: dict[int, list] = {item: [] for item in dead.tolist()}
    last: dict[int, Any] = {}  # each one's last error
    failed = np.flatnonzero((kinds == R.RETRY_SCHEDULED) | (kinds == R.DEAD_LETTERED))
    lettered = np.zeros(int(ids.take(failed).max(initial=-1)) + 1, bool)  # by id (np.isin sorts)
    lettered[dead] = True
    failed = failed[lettered.take(ids.take(failed))]
    for item, at_s, k in zip(ids.take(failed).tolist(), times.take(failed).tolist(),
                             part.take(failed).tolist(), strict=True):  # fmt: skip
        errors = history[item]
        attempt = len(errors) + 1
        if k < 0:  # the attempt was cut, or found the downstream full
            errors.append(AttemptError(attempt, *described[k], at_s))
            last[item] = cut[k]
            continue
        model = parts[k]
        independent = model.model_kind == "independent"
        failure = model.failure(item, attempt) if independent else model.check(item, attempt, 0)
        errors.append(AttemptError.from_exception(attempt, failure.error, at_s))
        last[item] = failure.error
    retryable = {id(error): retry.is_retryable(error) for error in cut.values()}
    letters = []
    for item, errors in history.items():
        error = last[item]
        again = retryable[id(error)] if id(error) in retryable else retry.is_retryable(error)
        reason = "max_attempts" if again else "not_retryable"
        if again and len(errors) < spec.config.max_attempts:
            reason = "retry_budget"  # it wanted a retry: the budget denied it
        letters.append(DeadLetter(payload=item, attempts=len(errors), errors=tuple(errors),
                                  reason=reason))  # fmt: skip
    return letters


def _cut_errors(spec: StageInput) -> dict[int, Exception]:
    """The errors of a cut attempt and of a full downstream, by their parts in the log: what
    ``asyncio.timeout`` and ``DownstreamRun.call`` raise."""
    if spec.cuts is None:
        return {}
    errors: dict[int, Exception] = {R.PART_TIMEOUT: TimeoutError()}
    if spec.cuts.downstream is not None:
        from ..downstream import full_message

        errors[R.PART_FULL] = DownstreamFull(full_message(spec.cuts.downstream.queue_maxsize))
    return errors
