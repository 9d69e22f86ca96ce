"""A partner API to ingest from: paginated records over real HTTP, on loopback only.

The ingestion example needs a real downstream with the manners of a real
partner: it pages with an opaque cursor, takes a while to answer (a
log-normal latency, configurable), refuses bursts with ``429 Too Many
Requests`` and a ``Retry-After``, and now and then fails with a transient
``503``. It can also misbehave on purpose (a malformed page, dying after a
number of requests) so that tests can check what the client does then.

Two ways to run it, both bound to ``127.0.0.1`` on a free port the OS picks
(there is no option for another address):

- :class:`PartnerServer`, in this process's event loop (quick, for tests of
  the server itself);
- :class:`PartnerProcess`, a child process (``python -m
  pipeline.examples.ingest.server``), so that the server's CPU does not
  compete with the client for this interpreter's GIL. It stops on
  :meth:`PartnerProcess.stop`, on leaving its ``with`` block (error or not),
  and on its own when the parent goes away (its stdin closes).

``GET /records?limit=L&cursor=C`` answers ``{"records": [...],
"next_cursor": "..." | null, "total": N}``; each record is ``{"id", "name",
"amount_cents", "updated_at"}``. A response carries ``Server-Timing:
app;dur=MS``, the milliseconds the server spent on purpose. ``GET /stats``
counts the answers by status.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import collections
import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["HOST", "PartnerConfig", "PartnerProcess", "PartnerServer", "make_app"]

HOST = "127.0.0.1"
"""The only address the partner API binds: loopback, never a public interface."""

MAX_RECORDS = 10_000_000
MAX_PAGE_SIZE = 10_000
_Z95 = 1.6448536269514722  # the standard normal's 95th percentile


def _number(
    name: str,
    value: object,
    allowed: str,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number ({allowed}), got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    if math.isnan(value) or below or value > high or value == math.inf:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return value


def _count(name: str, value: object, allowed: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer ({allowed}), got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class PartnerConfig:
    """How the partner API behaves. Every field is checked at construction.

    Args:
        records: records the account holds (0 to 10,000,000).
        page_size: most records per page the server returns (1 to 10,000); a
            request may ask for fewer with ``limit``.
        latency_p50_s, latency_p95_s: the server's time to answer, seconds: a
            log-normal with this median and 95th percentile (equal values: a
            constant). It is spent waiting (``asyncio.sleep``), not computing.
        error_rate: fraction of requests answered ``503`` (transient), in [0, 1).
        rate_limit_per_s: most requests answered in any sliding second; more
            get ``429`` with ``Retry-After``. None: no limit.
        retry_after_s: the ``Retry-After`` a ``429`` carries, seconds; None
            (default) sends the time until the window has room, rounded up to
            whole seconds as HTTP's delay-seconds are. A fractional value is
            sent as written (a lenient client reads it; tests use it to stay fast).
        poison_rate: fraction of records whose ``amount_cents`` is not a
            number (a sink must refuse them: they can never be written).
        malformed_pages: page numbers (from 0) whose body is not JSON.
        die_after_requests: the server process exits at once after answering
            this many requests (a partner that dies mid-run); None: never.
        seed: seeds latency, errors and poison, so a run can be repeated.
    """

    records: int = 1000
    page_size: int = 20
    latency_p50_s: float = 0.020
    latency_p95_s: float = 0.040
    error_rate: float = 0.02
    rate_limit_per_s: float | None = None
    retry_after_s: float | None = None
    poison_rate: float = 0.01
    malformed_pages: tuple[int, ...] = field(default=())
    die_after_requests: int | None = None
    seed: int = 1

    def __post_init__(self) -> None:
        _count("records", self.records, f">= 0 and <= {MAX_RECORDS:,}", low=0, high=MAX_RECORDS)
        _count(
            "page_size",
            self.page_size,
            f">= 1 and <= {MAX_PAGE_SIZE:,} records",
            low=1,
            high=MAX_PAGE_SIZE,
        )
        _number("latency_p50_s", self.latency_p50_s, "a finite number of seconds >= 0", low=0)
        _number(
            "latency_p95_s",
            self.latency_p95_s,
            f"a finite number of seconds >= latency_p50_s ({self.latency_p50_s!r})",
            low=self.latency_p50_s,
        )
        if self.latency_p95_s > 0 and self.latency_p50_s == 0:
            raise ValueError(
                "latency_p50_s must be > 0 when latency_p95_s is (a log-normal's median is "
                f"positive), got latency_p50_s=0 and latency_p95_s={self.latency_p95_s!r}"
            )
        _number("error_rate", self.error_rate, "a fraction in [0, 1)", low=0, high=1)
        if self.error_rate >= 1:
            raise ValueError(f"error_rate must be a fraction in [0, 1), got {self.error_rate!r}")
        if self.rate_limit_per_s is not None:
            _number(
                "rate_limit_per_s",
                self.rate_limit_per_s,
                "a finite number of requests per second > 0, or None",
                low=0,
                low_open=True,
            )
        if self.retry_after_s is not None:
            _number(
                "retry_after_s",
                self.retry_after_s,
                "a finite number of seconds >= 0, or None",
                low=0,
            )
        _number("poison_rate", self.poison_rate, "a fraction in [0, 1]", low=0, high=1)
        pages = tuple(self.malformed_pages)
        for page in pages:
            _count("malformed_pages", page, "page numbers >= 0", low=0, high=MAX_RECORDS)
        object.__setattr__(self, "malformed_pages", pages)
        if self.die_after_requests is not None:
            _count(
                "die_after_requests",
                self.die_after_requests,
                ">= 1 requests, or None",
                low=1,
                high=2**62,
            )
        _count("seed", self.seed, ">= 0", low=0, high=2**63)

    @property
    def pages(self) -> int:
        """Pages a full listing takes at ``page_size``."""
        return max(1, math.ceil(self.records / self.page_size))

    @property
    def latency_mean_s(self) -> float:
        """The mean of the latency distribution, seconds."""
        mu, sigma = self.lognormal()
        return 0.0 if mu is None else math.exp(mu + sigma * sigma / 2)

    def lognormal(self) -> tuple[float | None, float]:
        """The latency's log-normal ``(mu, sigma)`` from p50 and p95; ``(None, 0.0)``: none."""
        if self.latency_p50_s == 0:
            return None, 0.0
        mu = math.log(self.latency_p50_s)
        return mu, (math.log(self.latency_p95_s) - mu) / _Z95

    def scaled(self, latency_factor: float) -> PartnerConfig:
        """The same partner, answering ``latency_factor`` times as fast or slow."""
        factor = _number(
            "latency_factor", latency_factor, "a finite number > 0", low=0, low_open=True
        )
        fields = asdict(self)
        fields.update(
            latency_p50_s=self.latency_p50_s * factor, latency_p95_s=self.latency_p95_s * factor
        )
        return PartnerConfig(**fields)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PartnerConfig:
        fields = json.loads(text)
        fields["malformed_pages"] = tuple(fields.get("malformed_pages", ()))
        return cls(**fields)


# -- the records and the cursor ------------------------------------------------------------


def record(index: int, config: PartnerConfig) -> dict[str, Any]:
    """Record number ``index`` of the account: the same on every request and every run."""
    draw = random.Random(config.seed * 1_000_003 + index)
    poisoned = draw.random() < config.poison_rate
    return {
        "id": index,
        "name": f"record-{index:07d}",
        "amount_cents": "n/a" if poisoned else draw.randrange(1, 10_000_000),
        "updated_at": f"2026-11-{1 + index % 28:02d}T{index % 24:02d}:00:00Z",
    }


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset={offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The offset a cursor stands for; ValueError when it is not one of ours."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError(f"not a cursor: {cursor[:40]!r}") from None
    name, _, value = text.partition("=")
    if name != "offset" or not value.isdigit():
        raise ValueError(f"not a cursor: {cursor[:40]!r}")
    return int(value)


# -- the application -----------------------------------------------------------------------


class _Partner:
    """The server's state: random streams, the rate-limit window, counters."""

    def __init__(self, config: PartnerConfig) -> None:
        self.config = config
        self.draw = random.Random(config.seed)  # the server's one random stream
        self._window: collections.deque[float] = collections.deque()
        self.answered: collections.Counter[int] = collections.Counter()
        self.requests = 0

    def latency_s(self) -> float:
        mu, sigma = self.config.lognormal()
        return 0.0 if mu is None else self.draw.lognormvariate(mu, sigma)

    def refuse_for_s(self) -> float | None:
        """Seconds until the sliding second has room, or None if this request fits."""
        limit = self.config.rate_limit_per_s
        if limit is None:
            return None
        now = time.monotonic()
        while self._window and self._window[0] <= now - 1.0:
            self._window.popleft()
        if len(self._window) < limit:
            self._window.append(now)
            return None
        return max(0.0, self._window[0] + 1.0 - now)


def make_app(config: PartnerConfig) -> Any:
    """The aiohttp application serving ``config``'s partner API."""
    from aiohttp import web

    partner = _Partner(config)

    def answer(
        status: int,
        body: Any,
        *,
        headers: dict[str, str] | None = None,
        text: str | None = None,
        spent_s: float = 0.0,
    ) -> web.Response:
        partner.answered[status] += 1
        headers = dict(headers or {})
        headers["Server-Timing"] = f"app;dur={spent_s * 1e3:.3f}"
        if text is not None:
            return web.Response(
                status=status, text=text, headers=headers, content_type="application/json"
            )
        return web.json_response(body, status=status, headers=headers)

    async def records(request: web.Request) -> web.Response:
        partner.requests += 1
        refuse = partner.refuse_for_s()
        if refuse is not None:
            wait = config.retry_after_s
            wait_text = f"{math.ceil(refuse)}" if wait is None else f"{wait:g}"
            return answer(429, {"error": "rate limited"}, headers={"Retry-After": wait_text})
        try:
            limit = int(request.query.get("limit", config.page_size))
            offset = decode_cursor(request.query["cursor"]) if "cursor" in request.query else 0
        except ValueError as error:
            return answer(400, {"error": str(error)})
        if not 1 <= limit <= config.page_size or offset > config.records:
            return answer(
                400, {"error": f"limit must be 1..{config.page_size}, cursor within the listing"}
            )
        spent = partner.latency_s()
        if spent:
            await asyncio.sleep(spent)
        if partner.draw.random() < config.error_rate:
            return answer(503, {"error": "temporarily unavailable"}, spent_s=spent)
        end = min(config.records, offset + limit)
        if offset // config.page_size in config.malformed_pages:
            return answer(200, None, text='{"records": [{"id": 1, "na', spent_s=spent)
        body = {
            "records": [record(index, config) for index in range(offset, end)],
            "next_cursor": encode_cursor(end) if end < config.records else None,
            "total": config.records,
        }
        return answer(200, body, spent_s=spent)

    async def stats(_request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": partner.requests,
                "answered": {str(k): v for k, v in partner.answered.items()},
            }
        )

    @web.middleware
    async def die_when_told(request: web.Request, handler: Any) -> Any:
        response = await handler(request)
        if config.die_after_requests is not None and partner.requests >= config.die_after_requests:
            # A partner that dies mid-run: no graceful close, connections just drop.
            os._exit(3)
        return response

    app = web.Application(middlewares=[die_when_told])
    app.router.add_get("/records", records)
    app.router.add_get("/stats", stats)
    return app


class PartnerServer:
    """The partner API on this process's loop, at ``http://127.0.0.1:PORT``.

    Example:
        >>> async with PartnerServer(PartnerConfig(records=100)) as server:
        ...     server.url      # 'http://127.0.0.1:43817'
    """

    def __init__(self, config: PartnerConfig) -> None:
        if not isinstance(config, PartnerConfig):
            raise TypeError(f"config must be a PartnerConfig, got {config!r}")
        if config.die_after_requests is not None:
            raise ValueError("die_after_requests would end this very process: use PartnerProcess")
        self.config = config
        self.url = ""
        self._runner: Any = None

    async def __aenter__(self) -> PartnerServer:
        from aiohttp import web

        self._runner = web.AppRunner(make_app(self.config), access_log=None)
        await self._runner.setup()
        try:
            site = web.TCPSite(self._runner, HOST, 0)
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            raise
        port = self._runner.addresses[0][1]
        self.url = f"http://{HOST}:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._runner.cleanup()


class PartnerProcess:
    """The partner API in a child process; a context manager that always stops it.

    Args:
        config: how the partner behaves.
        start_timeout_s: seconds to wait for the child to say it listens.

    Raises:
        RuntimeError: the child did not start listening in time (its stderr is
            in the message); the child has been stopped.
    """

    def __init__(self, config: PartnerConfig, *, start_timeout_s: float = 20.0) -> None:
        if not isinstance(config, PartnerConfig):
            raise TypeError(f"config must be a PartnerConfig, got {config!r}")
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> PartnerProcess:
        """Start the child and wait until it listens."""
        import selectors

        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.examples.ingest.server",
                "--config",
                self.config.to_json(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.process.stdout, selectors.EVENT_READ)
                if not selector.select(self.start_timeout_s):
                    raise RuntimeError(
                        f"the partner API did not start within {self.start_timeout_s:g} s"
                    )
            line = self.process.stdout.readline().decode().strip()
            if not line.startswith("listening "):
                raise RuntimeError(f"the partner API failed to start: {self._errors()}")
            self.url = line.split(" ", 1)[1]
        except BaseException:
            self.stop()
            raise
        return self

    def _errors(self) -> str:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(2.0)
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the child: SIGTERM, then SIGKILL after ``timeout_s``. Harmless twice."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> PartnerProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"<PartnerProcess {self.url or '-'} pid={self.pid} {state}>"


# -- the child process ---------------------------------------------------------------------


async def _serve(config: PartnerConfig) -> None:
    from aiohttp import web

    runner = web.AppRunner(make_app(config), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, HOST, 0).start()
        port = runner.addresses[0][1]
        print(f"listening http://{HOST}:{port}", flush=True)
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, done.set)
        loop.add_signal_handler(signal.SIGINT, done.set)

        def parent_gone() -> None:
            # stdin closes when the parent exits, however it exits: stop with it.
            if not os.read(sys.stdin.fileno(), 4096):
                loop.remove_reader(sys.stdin.fileno())
                done.set()

        loop.add_reader(sys.stdin.fileno(), parent_gone)
        await done.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.examples.ingest.server")
    parser.add_argument("--config", default="{}", help="PartnerConfig fields as JSON")
    args = parser.parse_args(argv)
    try:
        config = PartnerConfig.from_json(args.config)
    except (TypeError, ValueError) as error:
        print(f"partner: error: {error}", file=sys.stderr)
        return 2
    asyncio.run(_serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
