"""The partner API's client: one page per call, every answer turned into an outcome.

:meth:`PartnerClient.fetch_page` makes exactly one request (the pipeline owns
retries, so they are counted, backed off and bounded by ``max_attempts``) and
turns each answer into what the pipeline understands:

- ``200`` with a well-formed page: a :class:`Page`;
- ``429``, or a ``5xx`` with ``Retry-After``: :class:`~pipeline.RateLimited` /
  :class:`TransientHTTPError` carrying ``retry_after_s``, which the engine
  honours (the next attempt waits at least that long); a ``Retry-After``
  longer than ``max_retry_after_s`` is a :class:`~pipeline.PermanentError`:
  the partner asks for more patience than this run has;
- another ``5xx``, a dropped connection or a timeout: :class:`TransientHTTPError`,
  retried after the backoff;
- a body that is not a page (not JSON, wrong shape): :class:`MalformedPage`,
  retried (a truncated body can be transient), then dead-lettered;
- another ``4xx``: :class:`~pipeline.PermanentError` (asking again will not help).

Every request is bounded in time (``timeout_s``, connect included).
"""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass
from typing import Any

from ...errors import PermanentError, RateLimited, RetryLater

__all__ = ["MalformedPage", "Page", "PartnerClient", "TransientHTTPError", "parse_retry_after"]


class TransientHTTPError(RetryLater):
    """Raised for a 5xx, a dropped connection or a timeout: worth another attempt."""


class MalformedPage(Exception):
    """Raised when a 200 answer is not a page: not JSON, or not the documented shape."""


@dataclass(frozen=True)
class Page:
    """One page of the listing.

    Attributes:
        records: the records, as the partner sent them.
        next_cursor: the cursor of the next page, or None after the last.
        total: records the account holds, as the partner says.
        server_s: seconds the partner says it spent (``Server-Timing``), or NaN.
    """

    records: tuple[dict[str, Any], ...]
    next_cursor: str | None
    total: int
    server_s: float


def parse_retry_after(value: str | None, *, now_s: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for, or None when it says nothing usable.

    HTTP allows delay-seconds (``"120"``) or an HTTP-date; a decimal number
    (``"0.25"``) is read too, as several APIs send one. Negative, NaN, infinite
    or unparseable values are None; a date in the past is 0.

    Args:
        value: the header's value.
        now_s: the current Unix time, for a date (default: the wall clock).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        now = time.time() if now_s is None else now_s
        return max(0.0, when.timestamp() - now)
    if not 0.0 <= seconds < math.inf:
        return None
    return seconds


def _server_s(header: str | None) -> float:
    # "app;dur=12.3" -> 0.0123 s
    if header:
        for part in header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "dur":
                try:
                    return float(value) / 1e3
                except ValueError:
                    break
    return math.nan


def _page(body: Any) -> tuple[tuple[dict[str, Any], ...], str | None, int]:
    """The page in a decoded body, or MalformedPage saying what is wrong."""
    if not isinstance(body, dict):
        raise MalformedPage(f"a page must be a JSON object, got {type(body).__name__}")
    records, cursor, total = body.get("records"), body.get("next_cursor"), body.get("total")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise MalformedPage("a page's 'records' must be a list of objects")
    if cursor is not None and (not isinstance(cursor, str) or not cursor):
        raise MalformedPage(f"a page's 'next_cursor' must be a string or null, got {cursor!r}")
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise MalformedPage(f"a page's 'total' must be an integer >= 0, got {total!r}")
    if cursor is not None and not records:
        raise MalformedPage("an empty page must be the last one (next_cursor null)")
    return tuple(records), cursor, total


class PartnerClient:
    """A connection pool to the partner API at ``base_url``.

    Args:
        base_url: ``http://127.0.0.1:PORT``.
        page_size: records to ask for per page.
        timeout_s: most seconds one request may take, connecting included.
        max_retry_after_s: the longest ``Retry-After`` worth waiting for;
            a longer one gives up on the page (PermanentError).

    Use as ``async with PartnerClient(url) as client:``; the pool closes on exit.
    """

    def __init__(
        self,
        base_url: str,
        *,
        page_size: int = 20,
        timeout_s: float = 5.0,
        max_retry_after_s: float = 30.0,
    ) -> None:
        self.base_url = base_url
        self.page_size = page_size
        self.timeout_s = timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.requests = 0
        self._session: Any = None

    async def __aenter__(self) -> PartnerClient:
        import aiohttp

        self._session = aiohttp.ClientSession(
            self.base_url, timeout=aiohttp.ClientTimeout(total=self.timeout_s)
        )
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._session.close()

    async def fetch_page(self, cursor: str | None) -> Page:
        """Ask once for the page at ``cursor`` (None: the first page).

        Raises:
            RateLimited: 429; ``retry_after_s`` is the partner's ``Retry-After``.
            TransientHTTPError: a 5xx, a dropped connection or a timeout.
            MalformedPage: a 200 whose body is not a page.
            PermanentError: another 4xx, or a ``Retry-After`` past ``max_retry_after_s``.
        """
        import aiohttp

        params = {"limit": str(self.page_size)}
        if cursor is not None:
            params["cursor"] = cursor
        self.requests += 1
        try:
            async with self._session.get("/records", params=params) as response:
                status = response.status
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                server_s = _server_s(response.headers.get("Server-Timing"))
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransientHTTPError(f"{type(error).__name__}: {error}") from error
        if retry_after is not None and retry_after > self.max_retry_after_s:
            raise PermanentError(
                f"HTTP {status} with Retry-After {retry_after:g} s, more than "
                f"max_retry_after_s={self.max_retry_after_s:g}"
            )
        if status == 429:
            raise RateLimited("HTTP 429 Too Many Requests", retry_after_s=retry_after)
        if status >= 500:
            raise TransientHTTPError(f"HTTP {status}", retry_after_s=retry_after)
        if status != 200:
            raise PermanentError(f"HTTP {status}: {text[:200]}")
        import json

        try:
            body = json.loads(text)
        except ValueError as error:
            raise MalformedPage(f"the page is not JSON: {error}") from None
        records, next_cursor, total = _page(body)
        return Page(records, next_cursor, total, server_s)
