"""sweep() and simulate() on any concurrent.futures Executor: a Dask LocalCluster, threads.

The numbers must not depend on where the runs ran: a cluster of worker
processes and a thread pool give the frame (and the replications) that
``processes=1`` gives, every column but ``wall_time_s``. One LocalCluster
serves the whole module: starting one takes seconds.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate, sweep
from pipeline.sim.executors.cluster import scheduler_executor
from pipeline.sim.workloads.distributions import Distribution

BASE = Scenario(
    arrivals=Poisson(rate=3.2),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4),
    n_items=800,
    seed=5,
)
GRID = {"concurrency": [4, 6], "queue_maxsize": [5, None]}


@dataclass(frozen=True)
class BrokenService(Distribution):
    """A service model that fails when sampled (module level, so workers can unpickle it)."""

    mean: float = 1.0
    cv: float = 1.0

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise ValueError("the service model broke on purpose")


@pytest.fixture(scope="module")
def cluster():
    with scheduler_executor("local", workers=2) as executor:
        yield executor


@pytest.fixture(scope="module")
def local_frame():
    return sweep(BASE, GRID, replications=2, processes=1, progress=False)


def without_wall_time(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="wall_time_s")


def summaries(runs) -> list[dict]:
    # NaN (a half-width a short run withholds) equals itself only as the same object, and a
    # NaN back from another process is another object: compare it as None.
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.summary.items()
         if k != "wall_time_s"}
        for r in runs.results
    ]  # fmt: skip


def test_sweep_on_a_local_cluster_equals_one_process(cluster, local_frame):
    frame = sweep(BASE, GRID, replications=2, executor=cluster, progress=False)
    pd.testing.assert_frame_equal(without_wall_time(frame), without_wall_time(local_frame))
    assert frame.attrs["grid"] == ["concurrency", "queue_maxsize"]


def test_simulate_on_a_local_cluster_equals_one_process(cluster):
    local = simulate(BASE, replications=3, processes=1)
    remote = simulate(BASE, replications=3, executor=cluster)
    assert summaries(remote) == summaries(local)
    # the per-item records travel back too, not only the summaries
    pd.testing.assert_frame_equal(remote.results[2].items, local.results[2].items)


def test_a_thread_pool_gives_the_same_numbers(local_frame):
    with ThreadPoolExecutor(max_workers=2) as threads:
        frame = sweep(BASE, GRID, replications=2, executor=threads, progress=False)
        runs = simulate(BASE, replications=2, executor=threads)
    pd.testing.assert_frame_equal(without_wall_time(frame), without_wall_time(local_frame))
    assert summaries(runs) == summaries(simulate(BASE, replications=2, processes=1))


def test_a_task_error_on_the_cluster_keeps_its_message(cluster):
    broken = BASE.replace(service=BrokenService())
    with pytest.raises(ValueError, match="the service model broke on purpose"):
        sweep(broken, {"concurrency": [2, 3]}, replications=1, executor=cluster, progress=False)
    with pytest.raises(ValueError, match="the service model broke on purpose"):
        simulate(broken, replications=2, executor=cluster)


def test_the_executor_is_left_open(cluster):
    with ThreadPoolExecutor(max_workers=1) as threads:
        simulate(BASE.replace(n_items=50), replications=2, executor=threads)
        assert threads.submit(sum, [1, 2]).result() == 3
    # the module's cluster ran the tests before this one and still takes work
    assert cluster.submit(sum, [1, 2]).result() == 3


@pytest.mark.parametrize("executor", ["local", 4, object()])
def test_an_executor_of_the_wrong_type_is_a_type_error(executor):
    with pytest.raises(TypeError, match=r"executor must be a concurrent\.futures\.Executor"):
        simulate(BASE, replications=2, executor=executor)
    with pytest.raises(TypeError, match=r"executor must be a concurrent\.futures\.Executor"):
        sweep(BASE, GRID, executor=executor, progress=False)


def test_an_executor_needs_replications():
    with (
        ThreadPoolExecutor(max_workers=1) as threads,
        pytest.raises(ValueError, match="pass replications=R"),
    ):
        simulate(BASE, executor=threads)


@pytest.mark.slow  # starts a Dask local cluster: 4 s of CPU
def test_a_local_cluster_starts_while_the_dashboard_port_is_taken():
    # Another cluster (a notebook's, a colleague's) on Dask's default dashboard port must not
    # stop this one: under pytest its "port in use" warning is an error, as is anyone's -W error.
    import socket

    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 8787))
        taken.listen()
    except OSError:
        pass  # someone already holds it: the same situation
    try:
        with scheduler_executor("local", workers=1) as executor:
            assert executor.submit(sum, [1, 2]).result() == 3
    finally:
        taken.close()
