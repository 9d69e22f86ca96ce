"""Where records land: SQLite (the embedded default) or Postgres, by idempotent upserts.

Writing a record twice leaves one row (``INSERT ... ON CONFLICT (id) DO
UPDATE``), so a run stopped half way and run again, or a retried write whose
first try did land, never duplicates anything.

Each sink says how many writes it can really do at once, :attr:`writers`,
because that, not the number of pipeline workers, is the database's
concurrency: SQLite has a single writer (one connection, a lock around each
write and its commit: concurrent writers would only queue on SQLite's own
lock); Postgres has its connection pool. A digital twin models the write
stage with that many servers.

A record that can never be written (a field of the wrong type) raises
:class:`~pipeline.PermanentError`, so the pipeline dead-letters it at once;
a database error is an ordinary exception, retried.

The table is checked when the sink opens: an existing ``records`` table that
lacks a column, or that the upsert cannot write (another primary key, a
required column of its own), is a :class:`SinkError` before any record is
read, not a run that dead-letters every record.

A write, once sent, is seen through: cancelling :meth:`~SqliteSink.upsert`
(the drain's timeout, a cancelled run) waits for the write that is already
in the database's hands (aiosqlite commits on its own thread, a Postgres
server commits what it was sent) and returns its outcome, so a record is
reported written exactly when its row landed. The wait is one write's
duration at most.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..._extras import MissingExtra, require
from ...errors import PermanentError

__all__ = ["PostgresSink", "SinkError", "SqliteSink", "open_sink", "validate"]

_PROBE = (-(2**63), "", 0, "")  # a row the schema check writes and rolls back

_COLUMNS = ("id", "name", "amount_cents", "updated_at")
_SQLITE_TABLE = """CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, amount_cents INTEGER NOT NULL,
    updated_at TEXT NOT NULL)"""
_SQLITE_UPSERT = """INSERT INTO records (id, name, amount_cents, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET name = excluded.name, amount_cents = excluded.amount_cents,
    updated_at = excluded.updated_at"""
_PG_TABLE = """CREATE TABLE IF NOT EXISTS records (
    id BIGINT PRIMARY KEY, name TEXT NOT NULL, amount_cents BIGINT NOT NULL,
    updated_at TEXT NOT NULL)"""
_PG_UPSERT = """INSERT INTO records (id, name, amount_cents, updated_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, amount_cents = EXCLUDED.amount_cents,
    updated_at = EXCLUDED.updated_at"""


class SinkError(Exception):
    """Raised when a sink cannot be opened: a bad path, a bad DSN, a missing driver.

    The message is one line that names what is wrong.
    """


def _missing_columns(found: list[str], target: str) -> None:
    missing = [name for name in _COLUMNS if name not in found]
    if missing:
        raise SinkError(
            f"database {target!r}: table records lacks column(s) {', '.join(missing)} "
            f"(it has {', '.join(found) or 'none'}; expected {', '.join(_COLUMNS)})"
        )


async def _seen_through(write: Any) -> Any:
    """Await the coroutine ``write`` to its end, even when cancelled meanwhile.

    The write runs as its own task; a cancel of the caller waits for it (a
    cancel that comes again waits again) and then returns its outcome. The
    caller's task stays cancelled (``cancelling()`` is not reset), so the
    worker that called stops after this write, as the drain asked.
    """
    task = asyncio.ensure_future(write)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                return task.result()  # the write's own outcome, landed or failed
            continue


def validate(record: Any) -> tuple[int, str, int, str]:
    """The row for ``record``, or PermanentError when it can never be written."""
    if not isinstance(record, dict):
        raise PermanentError(f"a record must be an object, got {type(record).__name__}")
    missing = [name for name in _COLUMNS if name not in record]
    if missing:
        raise PermanentError(f"record {record.get('id')!r} lacks {', '.join(missing)}")
    row = tuple(record[name] for name in _COLUMNS)
    ident, name, amount, updated = row
    for field, value, kind in (
        ("id", ident, int),
        ("amount_cents", amount, int),
        ("name", name, str),
        ("updated_at", updated, str),
    ):
        if isinstance(value, bool) or not isinstance(value, kind):
            raise PermanentError(
                f"record {ident!r}: {field} must be {kind.__name__}, got {value!r}"
            )
    if not -(2**63) <= ident < 2**63 or not -(2**63) <= amount < 2**63:
        raise PermanentError(f"record {ident!r}: id and amount_cents must fit 64 bits")
    return row


class SqliteSink:
    """Records in an SQLite file, written by one connection: a single writer.

    Args:
        path: the database file; created with its table if missing. Its folder
            must exist and be writable.

    Use ``async with SqliteSink(path) as sink:``. Raises :class:`SinkError` on
    entry when the file cannot be opened or written.
    """

    writers = 1
    """Writes the database does at once: SQLite has one writer."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db: Any = None
        self._writer = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<SqliteSink {str(self.path)!r} writers=1>"

    async def __aenter__(self) -> SqliteSink:
        try:
            require("the SQLite sink", "twin", "aiosqlite")
        except MissingExtra as error:
            raise SinkError(str(error)) from None
        import aiosqlite

        folder = self.path.parent
        if not folder.is_dir():
            # A path under a regular file is refused even to root (ENOTDIR): say which it is.
            problem = "is a file, not a folder" if folder.exists() else "does not exist"
            raise SinkError(f"cannot open database {str(self.path)!r}: folder {problem}")
        if not os.access(folder, os.W_OK):
            raise SinkError(f"cannot open database {str(self.path)!r}: folder is not writable")
        try:
            self._db = await aiosqlite.connect(self.path)
            # An existing table is checked before anything is changed (not even the
            # journal mode): a file the sink refuses is left as it was.
            async with self._db.execute("PRAGMA table_info(records)") as rows:
                found = [str(row[1]) for row in await rows.fetchall()]
            if found:
                _missing_columns(found, str(self.path))
                # What the columns do not say (the conflict target, required columns
                # of its own): one real upsert, rolled back.
                await self._db.execute("SAVEPOINT schema_check")
                try:
                    await self._db.execute(_SQLITE_UPSERT, _PROBE)
                finally:
                    await self._db.execute("ROLLBACK TO schema_check")
                    await self._db.execute("RELEASE schema_check")
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute(_SQLITE_TABLE)
            await self._db.commit()
        except sqlite3.Error as error:
            await self._close()
            message = " ".join(str(error).split())
            raise SinkError(f"cannot write records to {str(self.path)!r}: {message}") from None
        except SinkError:
            await self._close()
            raise
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def upsert(self, record: Any) -> None:
        """Write ``record`` (insert, or update the row with its id), committed.

        Raises:
            PermanentError: the record can never be written (see :func:`validate`).
            sqlite3.Error: the database failed; worth a retry.
        """
        row = validate(record)
        # One connection is shared by every worker: without the lock, one worker's
        # commit would commit another's half-done write. Waiting for the lock can be
        # cancelled (nothing is sent yet); the write and its commit, once sent, cannot.
        async with self._writer:
            await _seen_through(self._write(row))

    async def _write(self, row: tuple[int, str, int, str]) -> None:
        await self._db.execute(_SQLITE_UPSERT, row)
        await self._db.commit()

    async def count(self) -> tuple[int, int]:
        """(rows, distinct ids): equal when nothing is duplicated."""
        async with self._db.execute("SELECT count(*), count(DISTINCT id) FROM records") as rows:
            total, distinct = await rows.fetchone()
        return int(total), int(distinct)

    async def ids(self) -> set[int]:
        async with self._db.execute("SELECT id FROM records") as rows:
            return {int(row[0]) for row in await rows.fetchall()}


class PostgresSink:
    """Records in Postgres, written through an asyncpg pool of ``pool_size`` connections.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        pool_size: connections, hence writes at once (1 to 1,000).
        connect_timeout_s: most seconds to wait for the server.

    Raises :class:`SinkError` on entry for a bad DSN, an unreachable server or
    a missing asyncpg (``pip install 'pipeline-lab[postgres]'``).
    """

    def __init__(self, dsn: str, *, pool_size: int = 10, connect_timeout_s: float = 5.0) -> None:
        if (
            isinstance(pool_size, bool)
            or not isinstance(pool_size, int)
            or not (1 <= pool_size <= 1000)
        ):
            raise ValueError(f"pool_size must be an integer >= 1 and <= 1000, got {pool_size!r}")
        if not isinstance(dsn, str) or not dsn.startswith(("postgresql://", "postgres://")):
            raise SinkError(
                f"bad DSN {_hide_password(dsn)!r}: expected postgresql://user@host:port/database"
            )
        self.dsn = dsn
        self.writers = pool_size
        self.connect_timeout_s = connect_timeout_s
        self._pool: Any = None

    def __repr__(self) -> str:
        return f"<PostgresSink {_hide_password(self.dsn)!r} writers={self.writers}>"

    async def __aenter__(self) -> PostgresSink:
        try:
            require("the Postgres sink", "postgres")
        except MissingExtra as error:  # a SinkError: the command line's one line, exit 2
            raise SinkError(str(error)) from None
        import asyncpg

        try:
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self.writers, timeout=self.connect_timeout_s
            )
            async with self._pool.acquire() as connection:
                await connection.execute(_PG_TABLE)
                found = await connection.fetch(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'records' AND table_schema = current_schema()"
                )
                _missing_columns([str(row[0]) for row in found], _hide_password(self.dsn))
                transaction = connection.transaction()
                await transaction.start()
                try:
                    await connection.execute(_PG_UPSERT, *_PROBE)
                except asyncpg.PostgresError as error:
                    message = " ".join(str(error).split()) or type(error).__name__
                    raise SinkError(
                        f"cannot write records to {_hide_password(self.dsn)!r}: {message}"
                    ) from None
                finally:
                    await transaction.rollback()
        except SinkError:
            await self._close()
            raise
        except (OSError, TimeoutError, ValueError, asyncpg.PostgresError) as error:
            await self._close()
            message = " ".join(str(error).split()) or type(error).__name__
            raise SinkError(
                f"cannot connect to Postgres at {_hide_password(self.dsn)!r}: {message}"
            ) from None
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def upsert(self, record: Any) -> None:
        """Write ``record`` (insert, or update its row); as :meth:`SqliteSink.upsert`."""
        row = validate(record)
        async with self._pool.acquire() as connection:  # cancellable: nothing sent yet
            await _seen_through(connection.execute(_PG_UPSERT, *row))

    async def count(self) -> tuple[int, int]:
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow("SELECT count(*), count(DISTINCT id) FROM records")
        return int(row[0]), int(row[1])

    async def ids(self) -> set[int]:
        async with self._pool.acquire() as connection:
            return {int(row[0]) for row in await connection.fetch("SELECT id FROM records")}

    async def clear(self) -> None:
        """Empty the table (tests use a scratch database)."""
        async with self._pool.acquire() as connection:
            await connection.execute("TRUNCATE records")


def _hide_password(dsn: object) -> str:
    text = str(dsn)
    scheme, sep, rest = text.partition("://")
    if sep and "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in credentials else text
    return text


def open_sink(target: str | os.PathLike[str], *, pool_size: int = 10) -> SqliteSink | PostgresSink:
    """A Postgres sink for a ``postgresql://`` DSN, else an SQLite sink at that path."""
    if isinstance(target, str) and "://" in target:
        return PostgresSink(target, pool_size=pool_size)
    return SqliteSink(target)
