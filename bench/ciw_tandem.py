"""The benchmarks' 3-stage tandem, as a pipeline chain and as the same network in Ciw.

Poisson arrivals at 3 per second through fetch (2 workers, mean 0.5 s,
unbounded queue), transform (4 workers, mean 1.0 s, room for 10 waiting) and
write (2 workers, mean 0.5 s, room for 5), exponential service everywhere,
each stage 75% busy before blocking. A worker that finishes while the next
stage's room is full keeps the item, and its slot, until room frees: blocking
after service, Ciw's type I blocking. The head's queue is unbounded so that
no arrival waits or is lost at the door in either model (Ciw would lose an
arrival that finds a bounded first node full; a pipeline's producer waits).

``bench/bench_chain.py`` times both; ``tests/sim/running/test_chain_crosscheck.py``
checks that they give the same mean sojourn (arrival to leaving the last stage).
"""

from __future__ import annotations

import numpy as np

RATE = 3.0  # arrivals per second
STAGES = (  # name, workers, mean service s, room for waiting items (None: unbounded)
    ("fetch", 2, 0.5, None),
    ("transform", 4, 1.0, 10),
    ("write", 2, 0.5, 5),
)


def scenario(items: int, seed: int):
    """The tandem as a :class:`~pipeline.sim.Scenario` (``items`` arrivals, drained to the end)."""
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, StageSpec

    return Scenario(
        arrivals=Poisson(rate=RATE),
        stages=[
            StageSpec(
                name=name,
                service=Exponential(mean=mean),
                config=PipelineConfig(concurrency=workers, queue_maxsize=room),
            )
            for name, workers, mean, room in STAGES
        ],
        n_items=items,
        seed=seed,
    )


def ciw_sojourns(items: int, seed: int) -> np.ndarray:
    """Ciw's run of the tandem: each of ``items`` customers' time from arrival to leaving.

    Exactly ``items`` customers arrive (Poisson gaps drawn with ``seed``, then
    none), and the run lasts until every one has left the last node.
    """
    import ciw

    gaps = np.random.default_rng(seed).exponential(1 / RATE, items).tolist()
    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Sequential([*gaps, 1e12]), None, None],
        service_distributions=[ciw.dists.Exponential(rate=1 / mean) for _, _, mean, _ in STAGES],
        routing=[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],
        number_of_servers=[workers for _, workers, _, _ in STAGES],
        queue_capacities=[float("inf") if room is None else room for *_, room in STAGES],
    )
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    sim.simulate_until_max_customers(items, method="Finish")
    records = sim.get_all_records()
    arrived = {r.id_number: r.arrival_date for r in records if r.node == 1}
    left = [r.exit_date - arrived[r.id_number] for r in records if r.node == len(STAGES)]
    if len(left) != items:
        raise RuntimeError(f"Ciw finished {len(left)} customers of {items}")
    return np.array(left)
