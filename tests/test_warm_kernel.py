"""``python -m tests.warm_kernel``: one compile of the kernel's replay that later processes load.

``make test`` runs it before its parallel runs (``tests/test_lean_install.py`` checks the
recipe). Here, after the warm-up, a process that runs other scenarios on the compiled
replay (a rejecting queue, jittered backoff, a chain whose second stage fans out) and its
FCFS recursion (a pipeline where nothing fails) loads every compiled function from the
cache and compiles none. It is numba's own cache, the one every test process reads: under
``make test`` the warm-up here only loads what the recipe's warm-up compiled (a private
cache would compile the whole replay once more, about 50 s of CPU); on a cold cache it
compiles it, as the recipe's would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LATER = """
import json
from pipeline import Backoff, PipelineConfig
from pipeline.sim import Exponential, Gamma, IndependentFailures, Poisson, Scenario, StageSpec
from pipeline.sim import simulate
from pipeline.sim.running.kernel import driver, fcfs
from pipeline.sim.running.kernel.paths import kernel_path

config = PipelineConfig(concurrency=3, queue_maxsize=5, on_full="reject", max_attempts=4,
                        backoff=Backoff(kind="exponential", base_s=0.1, jitter=True))
with kernel_path("compiled"):
    simulate(Scenario(arrivals=Poisson(rate=5.0), service=Gamma(mean=1.0, cv=0.5), seed=4,
                      n_items=300, config=config, failures=IndependentFailures(0.3)))
    simulate(Scenario(arrivals=Poisson(rate=3.0), n_items=50, stages=[
        StageSpec(name="x", service=Exponential(mean=0.1), failures=IndependentFailures(0.2)),
        StageSpec(name="y", service=Exponential(mean=0.1), fan_out=3)]))
    simulate(Scenario(arrivals=Poisson(rate=2.0), service=Gamma(mean=1.0, cv=2.0), seed=5,
                      n_items=300, config=PipelineConfig(concurrency=3)))
module = driver.compiled()
print(json.dumps({f.__name__: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
                  for f in (module.play, module.series_rows, fcfs._compiled_starts())}))
"""


@pytest.mark.slow  # on a cold cache, one compile of the replay: about 50 s of CPU
def test_after_the_warm_up_a_process_loads_the_replay_instead_of_compiling_it():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    run = dict(cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True)
    subprocess.run([sys.executable, "-m", "tests.warm_kernel"], **run)
    later = json.loads(subprocess.run([sys.executable, "-c", LATER], **run).stdout)
    # [hits, misses]: each function loaded from the warm-up's cache, none compiled again
    assert later == {"play": [1, 0], "series_rows": [1, 0], "_heap_starts": [1, 0]}
