"""A real Prometheus server on a loopback port, for the tests and ``data/make_ingest_metrics.py``.

Debian's ``prometheus`` (``python -m tests.services_setup`` installs it under
``CI=true``), started in a scratch folder with its own database and a scrape
config, on a free ``127.0.0.1`` port, and stopped afterwards:

- :func:`running_prometheus` scrapes targets (``host:port``) every
  ``scrape_interval_s``, or none (a server over backfilled blocks);
- :func:`query` and :func:`query_range` ask its HTTP API;
- :func:`scraping` waits until it has tried every target (it picks targets up
  seconds after it starts), :func:`scraped_after` for a scrape taken after a moment.

Standard library only, and nothing from the package, so a script outside the
test suite imports it without pulling the tests' fixtures in.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "free_port",
    "query",
    "query_range",
    "require_prometheus",
    "running_prometheus",
    "scraped_after",
    "scraping",
    "stop",
]

_SCRAPE = """\
global:
  scrape_interval: {interval_ms}ms
  scrape_timeout: {timeout_ms}ms
scrape_configs:
  - job_name: pipeline
    static_configs:
      - targets: [{targets}]
"""
_NO_SCRAPE = "global:\n  scrape_interval: 1m\nscrape_configs: []\n"


def require_prometheus(what: str) -> str:
    """``prometheus``'s path; else skip ``what`` with a hint (fail it under ``CI=true``)."""
    import os

    import pytest

    from tests.services_setup import SERVICES, prometheus_bin

    found = prometheus_bin()
    if found is None:
        problem = "prometheus and promtool are not on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} needs Prometheus under CI=true; {problem}", pytrace=False)
        pytest.skip(f"{problem}; to run {what}: {SERVICES['prometheus'].hint}")
    return found


def free_port() -> int:
    """A loopback port free now (another process may take it before it is used)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_prometheus(
    binary: str,
    folder: Path,
    targets: Sequence[str] = (),
    *,
    scrape_interval_s: float = 0.1,
    data: Path | None = None,
) -> Iterator[str]:
    """A Prometheus scraping ``targets`` (``host:port``); yields its base URL; stops it after.

    Args:
        binary: the ``prometheus`` program.
        folder: a scratch folder for the config, the log and (by default) the database.
        targets: exporters to scrape; none for a server over backfilled blocks.
        scrape_interval_s: seconds between scrapes (the timeout is 90% of it).
        data: the database folder (default ``folder / "data"``).

    Raises:
        RuntimeError: the server exited, or did not become ready within a minute
            on any of five free ports.
    """
    interval_ms = max(1, round(scrape_interval_s * 1000))
    config = folder / "prometheus.yml"
    config.write_text(
        _SCRAPE.format(
            interval_ms=interval_ms,
            timeout_ms=max(1, interval_ms * 9 // 10),
            targets=", ".join(f'"{t}"' for t in targets),
        )
        if targets
        else _NO_SCRAPE
    )
    log_path = folder / "prometheus.log"
    database = folder / "data" if data is None else data
    for _ in range(5):  # a free port can be taken between the probe and the start
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={database}",
                 "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            if _ready(process, base):
                yield base
                return
        finally:
            stop(process)
    tail = " ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
    raise RuntimeError(f"prometheus did not start: {tail}")


def _ready(process: subprocess.Popen[bytes], base: str) -> bool:
    deadline = time.monotonic() + 60  # a minute on a loaded machine
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def stop(process: subprocess.Popen) -> None:
    """Terminate ``process``, killing it after 30 s if it will not go; wait for it either way."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _get(base: str, path: str, params: dict[str, Any]) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"prometheus refused {url}: {body}")
    return body


def query(
    base: str, promql: str, *, at_s: float | None = None
) -> dict[frozenset, tuple[float, float]]:
    """An instant query: each series' labels (without job, instance, __name__) -> (time, value)."""
    params = {"query": promql} | ({} if at_s is None else {"time": f"{at_s:.3f}"})
    body = _get(base, "/api/v1/query", params)
    return {
        frozenset(
            (k, v) for k, v in row["metric"].items() if k not in {"job", "instance", "__name__"}
        ): (float(row["value"][0]), float(row["value"][1]))
        for row in body["data"]["result"]
    }


def query_range(base: str, promql: str, *, start_s: float, end_s: float, step_s: float) -> bytes:
    """``/api/v1/query_range``'s answer, as the bytes the server sent (a file to save)."""
    params = {"query": promql, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": step_s}
    url = f"{base}/api/v1/query_range?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=60) as response:
        raw = response.read()
    if json.loads(raw).get("status") != "success":
        raise RuntimeError(f"prometheus refused {url}: {raw[:300]!r}")
    return raw


def scraping(base: str) -> None:
    """Wait until Prometheus has tried every target once (it picks new targets up in seconds).

    An exporter started after this is scraped from its first interval on.
    """
    for _ in range(600):
        targets = _get(base, "/api/v1/targets", {})["data"]["activeTargets"]
        if targets and all(not t["lastScrape"].startswith("0001-") for t in targets):
            return
        time.sleep(0.1)
    raise RuntimeError("prometheus tried no scrape of its targets within a minute")


def scraped_after(
    base: str, moment_s: float, *, series: str = "pipeline_items_offered_total"
) -> None:
    """Wait until Prometheus holds a scrape of ``series`` taken after ``moment_s`` (UNIX time).

    The newest sample of the last two minutes counts, so an exporter that has
    closed since (its series now stale) still shows its last scrape.
    """
    newest = f"max_over_time(timestamp({series})[2m:50ms])"
    for _ in range(600):
        rows = query(base, newest)
        if rows and min(t for _, t in rows.values()) > moment_s:
            return
        time.sleep(0.1)
    raise RuntimeError(f"prometheus took no scrape of {series} after the moment within a minute")
