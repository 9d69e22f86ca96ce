"""Compile the kernel's replay and FCFS recursion once, before ``make test``'s runs, to be loaded.

numba keeps the compiled replay on disk (:func:`pipeline.sim.running.kernel.driver.compiled`,
``cache=True``). On a fresh clone, or after ``replay.py`` changed, every process that first
runs it compiles it itself, about 15 s of CPU each, and ``make test`` starts up to eight
such processes at once (the suite's and the browser step's workers, the notebooks' kernels).
One short run of each kind on the compiled path here writes the cache that they then read.
Without numba there is nothing to compile, and this says so.

Usage: ``python -m tests.warm_kernel``.
"""

from __future__ import annotations

import sys

from pipeline import PipelineConfig
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    simulate,
)
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel.paths import kernel_path

WARM_UP = (
    # a pipeline where nothing fails (the FCFS recursion)
    Scenario(arrivals=Poisson(rate=3.0), service=Exponential(mean=1.0), n_items=200, seed=1,
             config=PipelineConfig(concurrency=4)),
    # a pipeline whose attempts fail and retry, with its series (the replay and the merge)
    Scenario(arrivals=Poisson(rate=3.0), service=Exponential(mean=1.0), n_items=200, seed=1,
             config=PipelineConfig(concurrency=4), failures=IndependentFailures(0.2)),
    # a chain with fan-out (each stage's series from the merge)
    Scenario(arrivals=Poisson(rate=3.0), n_items=100, seed=1, stages=[
        StageSpec(name="a", service=Exponential(mean=0.2), config=PipelineConfig(concurrency=2),
                  fan_out=2),
        StageSpec(name="b", service=Exponential(mean=0.1), config=PipelineConfig(concurrency=2))]),
)  # fmt: skip
"""One scenario of each kind of compiled call the replay makes."""


def main() -> int:
    """Run :data:`WARM_UP` on the compiled replay; 0 (also without numba)."""
    if driver.compiled() is None:
        print("numba is not installed (or disabled): the kernel has nothing to compile")
        return 0
    with kernel_path("compiled"):
        for scenario in WARM_UP:
            simulate(scenario, engine="kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
