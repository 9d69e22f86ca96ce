"""A small real HTTP service with a queue, for a real load test on loopback.

``python -m tests.sim.workloads.telemetry.live_service`` serves ``GET /work``
on 127.0.0.1 (a free port, printed on stdout) with :data:`WORKERS` workers: an
``asyncio.Semaphore`` around a log-normal sleep (mean :data:`MEAN` s, cv
:data:`CV`), answering 503 after its service with probability :data:`P_FAIL`.
A request that finds every worker busy waits for one, so a client's response
time is that wait plus the service, as in a real server.
"""

from __future__ import annotations

import asyncio
import math
import random

from aiohttp import web

WORKERS = 4
MEAN = 0.04  # seconds
CV = 0.8
P_FAIL = 0.02


async def serve(seed: int = 1) -> None:
    """Serve until cancelled; the port is printed first, on a line of its own."""
    sigma = math.sqrt(math.log1p(CV * CV))
    mu = math.log(MEAN) - sigma * sigma / 2
    workers = asyncio.Semaphore(WORKERS)
    rng = random.Random(seed)

    async def work(request: web.Request) -> web.Response:
        async with workers:
            await asyncio.sleep(rng.lognormvariate(mu, sigma))
            failed = rng.random() < P_FAIL
        return web.Response(status=503 if failed else 200, text="ok\n")

    app = web.Application()
    app.router.add_get("/work", work)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(serve())
