"""What a failure model is: a frozen value bound to one run's stream, checked per attempt.

:class:`FailureModel` is the base every model derives from (combinable with
``|``), :class:`AttemptFailures` what binding it gives, and :class:`Failure`
how one attempt fails. :class:`NoFailures` (the default) and
:class:`CombinedFailures` (several models at once, ``a | b``) live here with
them; the other models are in :mod:`.chance`, :mod:`.load` and :mod:`.scripted`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._validate import integer, real
from ..distributions import generator

__all__ = [
    "AttemptFailures",
    "CombinedFailures",
    "Failure",
    "FailureModel",
    "NoFailures",
    "SimulatedFailure",
    "SimulatedHang",
]


class SimulatedFailure(RuntimeError):
    """Raised by a simulated handler for an injected, retryable attempt failure."""


class SimulatedHang(SimulatedFailure):
    """Raised by a simulated handler after an injected hang that no timeout cut."""


@dataclass(frozen=True)
class Failure:
    """How one attempt fails.

    Attributes:
        error: the exception instance the attempt raises (a fresh one per attempt).
        hang_s: ``None`` to fail after the normal service time; otherwise the
            attempt hangs this many seconds first (> 0).
    """

    error: BaseException
    hang_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.error, BaseException):
            raise TypeError(f"error must be an exception instance, got {self.error!r}")
        if self.hang_s is not None:
            object.__setattr__(self, "hang_s", real("hang_s", self.hang_s, "seconds", above=0))


class AttemptFailures:
    """A failure model bound to one run's random stream (see :meth:`FailureModel.bind`).

    Attributes:
        model_kind: which built-in model this is, for the kernel's array replay
            (``"independent"``, ``"permanent"``, ``"scripted"``), or None for
            any other (the replay then leaves the run to the closures' path).
    """

    __slots__ = ()
    model_kind: str | None = None

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        """Decide attempt ``attempt`` (1-based) of item ``item_id`` (from 0).

        Args:
            item_id: the item's arrival index, from 0.
            attempt: the attempt number, from 1.
            in_flight: attempts in flight at the downstream, this one included.

        Returns:
            ``None`` if the attempt succeeds, else a :class:`Failure`.
        """
        return None

    def cancel(self, item_id: int, attempt: int) -> None:
        """Forget the last :meth:`check`, which returned ``None``: the attempt did not run.

        :class:`CombinedFailures` calls it when another model failed the
        attempt, so a stateful model (:class:`TokenQuota`) charges only the
        attempts that really start. Stateless models ignore it.
        """


class FailureModel:
    """Base class of failure models: frozen, validated, combinable with ``|``."""

    __slots__ = ()

    def bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        """Bind to one run: ``rng`` is the run's failure stream, ``n_items`` the expected items.

        ``n_items`` only sizes up-front draws; items beyond it are still handled.

        Raises:
            TypeError: ``rng`` is not a ``numpy.random.Generator``.
            ValueError: ``n_items`` is negative.
        """
        return self._bind(generator(rng), integer("n_items", n_items, "items in the run"))

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        raise NotImplementedError

    def __or__(self, other: object) -> CombinedFailures:
        if not isinstance(other, FailureModel):
            return NotImplemented
        return CombinedFailures(self, other)


@dataclass(frozen=True)
class NoFailures(FailureModel):
    """Every attempt succeeds."""

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return AttemptFailures()


class _BoundCombined(AttemptFailures):
    __slots__ = ("_parts",)

    def __init__(self, parts: tuple[AttemptFailures, ...]) -> None:
        self._parts = parts

    @property
    def parts(self) -> tuple[AttemptFailures, ...]:
        """The bound models, in order (the kernel's replay evaluates each per attempt)."""
        return self._parts

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        results = [part.check(item_id, attempt, in_flight) for part in self._parts]
        for failure in results:
            if failure is not None:
                for part, other in zip(self._parts, results, strict=True):
                    if other is None:
                        part.cancel(item_id, attempt)
                return failure
        return None


class CombinedFailures(FailureModel):
    """Several models at once; the first one (in order) that fails an attempt wins.

    Every model sees every attempt, each on its own child stream
    (``rng.spawn``), so adding a model does not change the draws of the others
    (common random numbers across what-if runs). When one fails an attempt,
    the models that let it through are told it never ran
    (:meth:`AttemptFailures.cancel`). ``a | b | c`` flattens to
    ``CombinedFailures(a, b, c)``.
    """

    __slots__ = ("models",)

    def __init__(self, *models: FailureModel) -> None:
        flat: list[FailureModel] = []
        for i, model in enumerate(models):
            if not isinstance(model, FailureModel):
                raise TypeError(
                    f"models[{i}] must be a FailureModel (e.g. IndependentFailures(p=0.1)), "
                    f"got {model!r}"
                )
            flat.extend(model.models if isinstance(model, CombinedFailures) else (model,))
        object.__setattr__(self, "models", tuple(flat))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __repr__(self) -> str:
        return f"CombinedFailures({', '.join(map(repr, self.models))})"

    def __reduce__(self) -> tuple[type[CombinedFailures], tuple[FailureModel, ...]]:
        # rebuild through __init__: the frozen __setattr__ blocks pickle's default
        # (sweep(processes=...) pickles scenarios)
        return (CombinedFailures, self.models)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CombinedFailures):
            return NotImplemented
        return self.models == other.models

    def __hash__(self) -> int:
        return hash(self.models)

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        children = rng.spawn(len(self.models))
        return _BoundCombined(
            tuple(m.bind(r, n_items) for m, r in zip(self.models, children, strict=True))
        )
