"""The partner API behaves as configured, and the client reads it right (real HTTP on loopback)."""

from __future__ import annotations

import asyncio
import math

import aiohttp
import pytest

from pipeline import PermanentError, RateLimited
from pipeline.examples.ingest.chain import IngestConfig, ingest
from pipeline.examples.ingest.client import (
    MalformedPage,
    PartnerClient,
    TransientHTTPError,
    parse_retry_after,
)
from pipeline.examples.ingest.server import HOST, PartnerConfig, PartnerServer, decode_cursor
from pipeline.examples.ingest.sink import SqliteSink
from pipeline.sim import TraceRecorder
from pipeline.sim.stats.intervals import proportion_ci

FAST = dict(latency_p50_s=0.0, latency_p95_s=0.0, error_rate=0.0, poison_rate=0.0)


@pytest.mark.asyncio
async def test_the_cursor_walks_every_record_once_on_loopback():
    async with PartnerServer(PartnerConfig(records=95, page_size=20, **FAST)) as server:
        assert server.url.startswith(f"http://{HOST}:")
        ids, cursor, pages = [], None, 0
        async with PartnerClient(server.url, page_size=20) as client:
            while True:
                page = await client.fetch_page(cursor)
                pages += 1
                ids += [r["id"] for r in page.records]
                cursor = page.next_cursor
                if cursor is None:
                    break
                assert decode_cursor(cursor) == len(ids)
    assert ids == list(range(95)) and pages == 5 and page.total == 95


@pytest.mark.asyncio
async def test_a_bad_cursor_or_limit_is_a_permanent_400():
    async with PartnerServer(PartnerConfig(records=10, **FAST)) as server:
        async with PartnerClient(server.url) as client:
            with pytest.raises(PermanentError, match="HTTP 400"):
                await client.fetch_page("not-a-cursor!")
        async with PartnerClient(server.url, page_size=10_000) as client:
            with pytest.raises(PermanentError, match="HTTP 400"):
                await client.fetch_page(None)


@pytest.mark.asyncio
async def test_503s_come_at_the_configured_rate():
    n, rate = 400, 0.25
    config = PartnerConfig(records=10, page_size=10, **{**FAST, "error_rate": rate}, seed=3)
    async with PartnerServer(config) as server, PartnerClient(server.url, page_size=10) as client:
        failed = 0
        for _ in range(n):
            try:
                await client.fetch_page(None)
            except TransientHTTPError as error:
                assert "HTTP 503" in str(error) and error.retry_after_s is None
                failed += 1
    interval = proportion_ci(failed, n, level=0.999)
    assert interval.low <= rate <= interval.high


@pytest.mark.asyncio
async def test_past_the_rate_limit_the_partner_answers_429_with_retry_after():
    config = PartnerConfig(records=10, page_size=10, rate_limit_per_s=5, **FAST)
    async with PartnerServer(config) as server, PartnerClient(server.url, page_size=10) as client:
        for _ in range(5):
            await client.fetch_page(None)
        with pytest.raises(RateLimited) as refused:
            await client.fetch_page(None)
        # HTTP's delay-seconds are whole seconds: the wait until the window has room, rounded up.
        assert refused.value.retry_after_s == 1.0
        async with aiohttp.ClientSession() as session, session.get(f"{server.url}/stats") as r:
            stats = await r.json()
    assert stats["answered"] == {"200": 5, "429": 1}


@pytest.mark.asyncio
async def test_the_chain_honours_retry_after_and_loses_nothing_in_a_429_storm():
    # 3 requests per second, each 429 asks for 0.2 s: most pages are refused at least once.
    config = PartnerConfig(records=200, page_size=20, rate_limit_per_s=3, retry_after_s=0.2, **FAST)
    ingest_config = IngestConfig(page_size=20)
    recorder = TraceRecorder()
    async with PartnerServer(config) as server, SqliteSink(":memory:") as sink:
        async with PartnerClient(server.url, page_size=20) as client:
            run = await ingest(client, sink, ingest_config, recorder=recorder)
        rows = await sink.count()
    fetch = recorder.trace(
        configs={"fetch": ingest_config.fetch, "write": ingest_config.write}
    ).stages["fetch"]
    failed = fetch.attempt_outcome == "failed"
    assert failed.sum() >= 3, "the storm should refuse several pages"
    # After each refusal the next attempt of that page waited at least the 0.2 s asked for.
    for item, end in zip(fetch.attempt_item[failed], fetch.attempt_end_s[failed], strict=True):
        later = fetch.attempt_start_s[(fetch.attempt_item == item) & (fetch.attempt_start_s > end)]
        assert later.min() - end >= 0.2 - 1e-6
    assert run.ended == "done" and run.accounting()["balanced"]
    assert rows == (200, 200)


@pytest.mark.asyncio
async def test_a_malformed_page_is_retried_then_dead_lettered_and_the_rest_reported():
    config = PartnerConfig(records=100, page_size=20, malformed_pages=(2,), **FAST)
    async with PartnerServer(config) as server, SqliteSink(":memory:") as sink:
        async with PartnerClient(server.url, page_size=20) as client:
            run = await ingest(client, sink, IngestConfig(page_size=20))
        assert await sink.count() == (40, 40)
    fetch = run.report.stages["fetch"]
    assert len(fetch.dead_letters) == 1 and fetch.dead_letters[0].attempts == 6
    assert fetch.dead_letters[0].errors[-1].type == "MalformedPage"
    assert run.ended == "page 2 was dead-lettered"
    assert run.accounting() == {
        "written": 40,
        "dead_lettered": 0,
        "unfinished": 0,
        "stranded": 0,
        "not_fetched": 60,
        "total": 100,
        "balanced": 1,
    }


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 0.25 ", 0.25),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        (None, None),
        ("", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(value, seconds):
    now = 1445412480.0  # 07:28:00 GMT on that date
    parsed = parse_retry_after(value, now_s=now)
    assert parsed == seconds or (seconds is not None and math.isclose(parsed, seconds))


@pytest.mark.asyncio
async def test_malformed_bodies_are_named():
    from pipeline.examples.ingest.client import _page

    for body, message in [
        ([], "JSON object"),
        ({"records": 3}, "list of objects"),
        ({"records": [], "next_cursor": 5, "total": 0}, "next_cursor"),
        ({"records": [], "next_cursor": None, "total": -1}, "total"),
        ({"records": [], "next_cursor": "x", "total": 1}, "empty page"),
    ]:
        with pytest.raises(MalformedPage, match=message):
            _page(body)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"records": -1}, "records must be"),
        ({"page_size": 0}, "page_size must be"),
        ({"latency_p50_s": math.nan}, "latency_p50_s must be"),
        ({"latency_p95_s": 0.001}, "latency_p95_s must be"),
        ({"error_rate": 1.0}, "error_rate must be"),
        ({"rate_limit_per_s": 0}, "rate_limit_per_s"),
        ({"poison_rate": 2}, "poison_rate must be"),
        ({"die_after_requests": 0}, "die_after"),
    ],
)
def test_a_bad_partner_config_names_the_field(fields, message):
    with pytest.raises((ValueError, TypeError), match=message):
        PartnerConfig(**fields)


@pytest.mark.asyncio
async def test_a_dying_partner_cannot_run_in_process():
    with pytest.raises(ValueError, match="PartnerProcess"):
        PartnerServer(PartnerConfig(die_after_requests=3))
    await asyncio.sleep(0)


def test_the_partners_mean_latency_is_its_log_normal_mean():
    """Notebook 09's prose quotes it; only the documentation build evaluates that prose."""
    partner = PartnerConfig(latency_p50_s=0.05, latency_p95_s=0.2)
    mu, sigma = partner.lognormal()
    assert partner.latency_mean_s == pytest.approx(math.exp(mu + sigma * sigma / 2), rel=1e-12)
    assert partner.latency_mean_s > partner.latency_p50_s  # a right-skewed latency
    assert PartnerConfig(latency_p50_s=0.0, latency_p95_s=0.0).latency_mean_s == 0.0
