"""A Locust user class sending requests as a Poisson process, for a real load test.

Each user sends ``GET /work`` at exponential gaps, paced from its own clock
(the next request is due a gap after the last one was due, not after its
response), at ``LIVE_RATE_PER_USER`` requests per second (an environment
variable); its first request comes a gap after it starts, so the users do not
all send at once. Many such users together make a Poisson stream at their
total rate while responses stay shorter than the gaps: an open arrival
process, as the twin's, rather than Locust's usual closed loop of think times.

User number k draws its gaps from ``random.Random(k)``: two runs at different
rates send the same stream, scaled in time (common random numbers, so a
what-if run differs from its baseline by the rate, not by the luck of the draw).
"""

from __future__ import annotations

import itertools
import os
import random
import time

import gevent
from locust import HttpUser, task

RATE_PER_USER = float(os.environ.get("LIVE_RATE_PER_USER", "1.0"))
_numbers = itertools.count()


class PoissonUser(HttpUser):
    """One user's share of a Poisson stream of requests."""

    def on_start(self) -> None:
        self._rng = random.Random(next(_numbers))
        self._due = time.monotonic() + self._rng.expovariate(RATE_PER_USER)
        gevent.sleep(max(0.0, self._due - time.monotonic()))

    def wait_time(self) -> float:
        self._due += self._rng.expovariate(RATE_PER_USER)
        return max(0.0, self._due - time.monotonic())

    @task
    def work(self) -> None:
        self.client.get("/work")  # a 503 is a failure, as Locust counts any status >= 400
