"""From a real run to its twin: ingest from a real HTTP API into a real database.

A partner API (:mod:`.server`, aiohttp on 127.0.0.1) lists records by cursor,
slowly and not always politely (429 with ``Retry-After``, transient 503s).
The ingestion (:mod:`.chain`) is a :class:`~pipeline.Chain`: fetch pages, fan
out into records, upsert them into SQLite or Postgres (:mod:`.sink`). A
recording of a real run (:mod:`.record`) calibrates a virtual-time twin, which
predicts a what-if that is then run for real and compared (:mod:`.twin`).

``python -m pipeline.examples.ingest --records N [--what-if concurrency=40] --json``
runs the whole loop.
"""

from ..._extras import require

require("pipeline.examples.ingest", "twin")  # one ImportError naming the extra, not aiohttp's
