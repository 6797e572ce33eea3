"""The PostgreSQL backend's core contract: ``postgresql://user@host:port/db`` or
``postgresql+psycopg://...``.

The schema (migrations/postgres/versions, from the baseline on) holds the guarantees; this
module only talks to it:

* **Positions.** The insert guard trigger takes the position lock (:data:`LOCK_POSITIONS`,
  a table lock only writers may take, held to the commit) before it reads the heads, and
  fills in ``position`` (the largest
  stored one + 1) when the INSERT leaves it out; the rows after it that continue it (the
  rest of a batch) pass on two transaction-local settings, and a statement trigger proves
  the statement's positions and seqs once (revision 0240). Every transaction that inserts
  events holds the lock until it commits, so positions are dense and grow in commit order
  whoever inserts (docs/concurrency.md says why this and not a sequence or a counter row).
* **Appends.** A session's head (next seq, last hash) is cached per store; an append with a
  cached head is one INSERT statement in autocommit (its own transaction: one round trip).
  When the trigger refuses the seq (ES002: another process appended), or there is no cached
  head, the append runs in a transaction that first calls ``es_lock_head(session)`` (takes
  the lock, then reads the head) and then inserts: it cannot be refused again.
* **Durability.** The write connection commits asynchronously (``synchronous_commit =
  off``), so the WAL flush is not inside the position lock. By default (any ``durability``
  but :data:`LOSSY`) a single append that finds the lock free commits durably in its one
  statement (:data:`INSERT_ONE_FULL`); otherwise the append waits, outside the lock, for
  the flush (:data:`FLUSH`; concurrent writers share one). A follower flushes before it
  hands out what it read.
* **Errors** are translated by SQLSTATE (the ``ESnnn`` codes of the triggers, see
  :mod:`eventstore.backends.base`) and constraint name, never by message text.
* **Follow** waits on ``LISTEN eventstore_events`` (a statement trigger NOTIFYs on every
  insert); where LISTEN is not available it polls.
* **Import** inserts with ``COPY``; ``sql`` runs each query in a READ ONLY transaction with
  a ``statement_timeout``, rolled back afterwards.

Connections: one for writes and one for reads (each guarded by a lock, so the backend is
thread-safe), made again in a forked child (the parent's are left alone: closing them would
end the parent's sessions).

The capabilities are mixins of their own modules (:mod:`.search`, :mod:`.audit`,
:mod:`.index`, :mod:`.views`, :mod:`.sandbox`, :mod:`.roles`, :mod:`.redact`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from eventstore.errors import (
    AppendOnlyViolation,
    DatabaseError,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from eventstore.log.chain import chain_rows, genesis_hash, session_hash
from eventstore.schema import outdated

from .. import base
from ..base import Backend, Follower, ImportLock, ImportTransaction
from .audit import PgAudit
from .connection import conninfo, display_url, first_line, open_connection, wait_flushed
from .follower import PgFollower
from .importer import PgImport, PgImportLock
from .index import PgIndex
from .redact import PgRedactor
from .roles import PgRoles
from .sandbox import PgSandbox
from .search import PgSearch
from .statements import (
    DURABILITY,
    EXPORT_BOUNDED,
    FLUSH,
    IDLE_SQL,
    IMPORT_LOCK_CLASS,
    IMPORTS,
    INSERT_MANY,
    INSERT_ONE,
    INSERT_ONE_FULL,
    LAST_POSITION,
    LOCK_HEAD,
    LOCK_POSITIONS,
    LOSSY,
    MESSAGES_UPTO,
    MIGRATION_LOCK,
    NEXT_SEQ,
    OWNER_ALIVE,
    RECONNECT_PAUSE,
    RECONNECT_SECONDS,
    STORE_ROWS,
    refusal_of,
    violated_constraint,
)
from .views import PgViews

_inherited: list = []  # connections of a parent process: kept, never used or closed (see module doc)


class PostgresBackend(PgSearch, PgAudit, PgIndex, PgViews, PgSandbox, PgRoles, PgRedactor, Backend):
    """One PostgreSQL database (see the module's docstring)."""

    name = "postgresql"

    def __init__(self, url: str, busy_timeout: float, readonly: bool, durability: str = "normal"):
        if durability not in DURABILITY:
            raise DatabaseError(f"durability must be one of {', '.join(DURABILITY)}, not {durability!r}")
        self.url = url
        self.durability = durability
        self.lossy = durability == LOSSY  # (see DURABILITY)
        self.display = display_url(url)
        self.busy_timeout = busy_timeout
        self.readonly = readonly
        self._wlock = threading.RLock()
        self._rlock = threading.RLock()
        self._heads: dict[str, tuple[int, str]] = {}  # session -> (next seq, last hash)
        self._pid = os.getpid()
        self._w: psycopg.Connection | None = None
        self._r: psycopg.Connection | None = None
        self._v: psycopg.Connection | None = None  # verify_rows
        self._v_pid = self._pid
        self._vlock = threading.RLock()
        self._closed = False
        self._index_writable: bool | None = None  # (see _may_index)
        self._sync_level = "on"  # the write connection's durable synchronous_commit (see _conn)
        self._watch_flush = False  # the role may not call pg_logical_emit_message (see _durable)

    # --- open, migrate, close ------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, busy_timeout: float = 5.0, durability: str = "normal", write_queue: bool = True,
             readonly: bool = False, upgrade: bool = True) -> PostgresBackend:
        """Connect and migrate (see :meth:`Backend.open`). ``durability`` is one of
        :data:`DURABILITY`; ``write_queue`` is SQLite's and ignored here."""
        self = cls(url, busy_timeout, readonly, durability)
        try:
            revision = self._revision()
            if revision != head_revision():
                if (readonly or not upgrade) and revision is not None and revision < head_revision():
                    raise outdated(self.display, revision, " as the database's owner")
                if readonly:
                    raise DatabaseError(f"{self.display}: not an eventstore database at the current schema "
                                        f"(revision {revision or 'none'}); open it once without read-only to "
                                        f"migrate it")
                self._migrate()
        except BaseException:
            self.close()
            raise
        return self

    def _conn(self, which: str) -> psycopg.Connection:
        """The write (``"w"``) or read (``"r"``) connection, made on first use (again in a
        forked child)."""
        if self._closed:
            raise DatabaseError(f"{self.display}: the store is closed")
        if self._pid != os.getpid():
            _inherited.extend(c for c in (self._w, self._r) if c is not None)
            self._w = self._r = None
            self._pid = os.getpid()
            self._heads.clear()
        conn = self._w if which == "w" else self._r
        if conn is None or conn.closed:
            conn = open_connection(self.url, self.display)
            ms = int(self.busy_timeout * 1000)
            conn.execute(f"SET lock_timeout = {ms}")
            if which == "w":
                level = conn.execute("SELECT current_setting('synchronous_commit'), "
                                     "set_config('synchronous_commit', 'off', false)").fetchone()[0]
                self._sync_level = "on" if level == "off" else level
            if self.readonly:
                conn.execute("SET default_transaction_read_only = on")
            if which == "w":
                self._w = conn
            else:
                self._r = conn
        return conn

    def _revision(self) -> str | None:
        """The database's Alembic revision (None for a database without eventstore tables)."""
        with self._rlock:
            conn = self._conn("r")
            try:
                row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            except pg_errors.UndefinedTable:
                return None
            except psycopg.Error as e:
                raise self._error(e) from None
        return row[0] if row else None

    def _migrate(self) -> None:
        """Upgrade to the head revision with Alembic, under :data:`MIGRATION_LOCK` so that
        several processes opening a new database at once migrate it exactly once (the
        others wait, then find it at the head). DDL is transactional: a failed migration
        leaves nothing. Sets :attr:`upgraded_from`."""
        from alembic import command
        from alembic.config import Config
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        from eventstore.schema import migrations_path

        engine = create_engine("postgresql+psycopg://", poolclass=NullPool,
                               creator=lambda: psycopg.connect(conninfo(self.url), application_name="eventstore"))
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
                versioned = conn.exec_driver_sql("SELECT to_regclass('alembic_version')").scalar() is not None
                found = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() if versioned else None
                if found != head_revision():  # (another process may have migrated while this one waited)
                    self.upgraded_from = found
                cfg = Config()
                cfg.set_main_option("script_location", migrations_path("postgresql"))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except psycopg.Error as e:
            raise DatabaseError(f"{self.display}: cannot migrate: {first_line(e)}") from None
        except Exception as e:
            orig = getattr(e, "orig", None)
            if isinstance(orig, psycopg.Error):
                raise DatabaseError(f"{self.display}: cannot migrate: {first_line(orig)}") from None
            raise
        finally:
            engine.dispose()

    def close(self) -> None:
        """Close both connections (a forked child leaves its parent's alone)."""
        self._closed = True
        if self._v is not None and self._v_pid != os.getpid():
            _inherited.append(self._v)
            self._v = None
        if self._pid != os.getpid():
            _inherited.extend(c for c in (self._w, self._r, self._v) if c is not None)
        else:
            for c in (self._w, self._r, self._v):
                if c is not None:
                    c.close()
        self._w = self._r = self._v = None

    def database_name(self) -> str:
        """The name of the connected database."""
        return self._one("SELECT current_database()")[0]

    def schema_name(self) -> str:
        """The schema the store's tables are in (the first of the connection's search_path)."""
        return self._one("SELECT current_schema()")[0]

    # --- helpers ------------------------------------------------------------------------------

    def _error(self, e: psycopg.Error, session_id: str | None = None) -> Exception:
        """The store's error for a database error (by SQLSTATE and constraint name)."""
        code = e.sqlstate or ""
        if code == base.UNKNOWN_SESSION and session_id is not None:
            return SessionNotFound(session_id)
        if session_id is not None and isinstance(e, pg_errors.DataError | pg_errors.IntegrityError):
            try:
                row = self._one("SELECT (SELECT max(position) FROM events), "
                                "(SELECT max(seq) + 1 FROM events WHERE session_id = %s)", (session_id,))
            except (psycopg.Error, DatabaseError):  # the question is only asked: the first error stands
                row = None
            full = base.counter_full(self.display, session_id, *row) if row is not None else None
            if full is not None:
                return full
        if isinstance(e, pg_errors.UniqueViolation) and violated_constraint(e) == base.SESSIONS_PKEY and session_id:
            return SessionExists(session_id)
        if code.startswith("ES") or isinstance(e, pg_errors.IntegrityError):
            r = refusal_of(e)
            return AppendOnlyViolation(f"{r.code or code}: {r.message}" if r.code else r.message)
        if isinstance(e, pg_errors.DiskFull):  # SQLSTATE 53100
            what = f"session {session_id!r}: " if session_id is not None else ""
            return DatabaseError(f"{self.display}: {what}{first_line(e)}: nothing was written (free space on "
                                 f"the server)")
        if isinstance(e, pg_errors.ReadOnlySqlTransaction):
            return DatabaseError(f"{self.display}: opened read-only: {first_line(e)}")
        if isinstance(e, pg_errors.LockNotAvailable):
            return DatabaseError(f"{self.display}: database is locked (waited {self.busy_timeout:g} s)")
        if isinstance(e, pg_errors.InsufficientPrivilege):
            conn = self._r or self._w
            role = f"role {conn.info.user!r}" if conn is not None and not conn.closed else "this role"
            return DatabaseError(f"{self.display}: {first_line(e)} ({role} may not: grant it eventstore_writer "
                                 f"to append or eventstore_auditor to read; `eventstore roles`, run as the tables' "
                                 f"owner, creates both)")
        if isinstance(e, pg_errors.DataError):
            return InvalidEvent(first_line(e))
        return DatabaseError(f"{self.display}: {first_line(e)}")

    def _durable(self, conn: psycopg.Connection, session_id: str) -> None:
        """Unless ``durability`` is :data:`LOSSY`: wait until the write just committed on ``conn`` is
        flushed (see :data:`DURABILITY`). Raises :class:`DatabaseError` when the server
        cannot confirm it (the write is committed; whether it survives a crash is unknown)."""
        if self.lossy:
            return
        try:
            if not self._watch_flush:
                try:
                    conn.execute(FLUSH, (self._sync_level,))
                    return
                except pg_errors.InsufficientPrivilege:  # the redactor of a superuser's `eventstore roles`
                    self._watch_flush = True
            wait_flushed(conn)
        except psycopg.Error as e:
            raise DatabaseError(f"{self.display}: session {session_id!r}: committed, but the server did not confirm "
                                f"the flush to disk: {first_line(e)}") from None

    def _read(self, sql: str, params: tuple = ()) -> list:
        """Rows of one read on the read connection. A read that finds the connection lost
        (the server restarted since the last one) runs again on a new connection, for up to
        :data:`RECONNECT_SECONDS` while the server comes back, as the followers do: reads
        change nothing, so running one again is safe (writes are never retried)."""
        with self._rlock:
            deadline = None  # set once the connection was lost
            while True:
                try:
                    conn = self._conn("r")
                except DatabaseError:
                    if deadline is None or time.monotonic() > deadline:
                        raise
                    time.sleep(RECONNECT_PAUSE)
                    continue
                try:
                    return conn.execute(sql, params).fetchall()
                except psycopg.Error as e:
                    if not conn.closed or (deadline is not None and time.monotonic() > deadline):
                        raise self._error(e) from None
                    deadline = deadline or time.monotonic() + RECONNECT_SECONDS

    def _one(self, sql: str, params: tuple = ()):
        rows = self._read(sql, params)
        return rows[0] if rows else None

    # --- sessions -----------------------------------------------------------------------------

    def create_session(self, session_id: str, created_at: float, meta_json: str) -> None:
        with self._wlock:
            conn = self._conn("w")
            try:
                cur = conn.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (%s, %s, %s, %s)",
                                   (session_id, created_at, meta_json,
                                    session_hash(session_id, created_at, meta_json)))
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            except UnicodeEncodeError as e:
                raise InvalidEvent(f"session id or meta is not valid text: {e.reason}") from None
            if cur.rowcount != 1:
                raise DatabaseError(f"session {session_id!r}: the database reported the insert done but the "
                                    f"session was not stored (a trigger ignores it: run eventstore verify)")
            self._heads[session_id] = (0, genesis_hash(session_id))  # a new session's head is known
            self._durable(conn, session_id)

    def session_meta(self, session_id: str) -> str | None:
        row = self._one("SELECT meta FROM sessions WHERE id = %s AND id NOT IN (SELECT session_id FROM importing)",
                        (session_id,))
        return row[0] if row else None

    def sessions(self) -> list[tuple[str, float, int, float | None]]:
        return [tuple(r) for r in self._read(
            "SELECT s.id, s.created_at, coalesce(h.seq + 1, 0), h.ts FROM sessions AS s "
            "LEFT JOIN LATERAL (SELECT e.seq, e.ts FROM events AS e WHERE e.session_id = s.id "
            "ORDER BY e.seq DESC LIMIT 1) AS h ON true WHERE s.id NOT IN (SELECT session_id FROM importing) "
            "ORDER BY s.created_at, s.id")]

    # --- appends ------------------------------------------------------------------------------

    def append(self, session_id: str, types: list[str], tss: list[float], payloads: list[str],
               expected_seq: int | None, *, salts: list[bytes] | None = None,
               commits: list[str] | None = None) -> tuple[int, int, str]:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        with self._wlock:
            conn = self._conn("w")
            head = self._heads.get(session_id)
            if head is not None and (expected_seq is None or expected_seq == head[0]):
                # The cached head: one INSERT, its own transaction.
                rows = chain_rows(head[1], head[0], types, tss, payloads, commits=commits, salts=salts)
                try:
                    position, flushed = self._insert(conn, session_id, head[0], rows, self._full_level)
                except DatabaseError:
                    self._heads.pop(session_id, None)
                    raise
                except psycopg.Error as e:
                    if e.sqlstate != base.SEQ_NOT_NEXT:
                        self._heads.pop(session_id, None)
                        raise self._error(e, session_id) from None
                    # another process appended since: read the head under the lock, below
                else:
                    self._heads[session_id] = (head[0] + len(types), rows[-2])
                    if not flushed:
                        self._durable(conn, session_id)
                    return head[0], position, rows[-2]
            self._heads.pop(session_id, None)
            try:
                with conn.transaction():
                    row = conn.execute(LOCK_HEAD, (session_id,)).fetchone()
                    if row is None or row[0] is None:
                        raise SessionNotFound(session_id)
                    seq, prev = row[0], row[1] or genesis_hash(session_id)
                    if expected_seq is not None and expected_seq != seq:
                        raise SeqConflict(session_id, expected_seq, seq)
                    rows = chain_rows(prev, seq, types, tss, payloads, commits=commits, salts=salts)
                    position = self._insert(conn, session_id, seq, rows)[0]
            except psycopg.Error as e:
                if e.sqlstate == base.SEQ_NOT_NEXT and len(types) > 1:
                    # The head is locked: no other writer came between. The guard refused a
                    # later row of this batch because an earlier one was silently dropped.
                    raise base.not_stored(session_id, seq, len(types)) from None
                raise self._error(e, session_id) from None
            self._heads[session_id] = (seq + len(types), rows[-2])
            self._durable(conn, session_id)
            return seq, position, rows[-2]

    @property
    def _full_level(self) -> str | None:
        """The durable ``synchronous_commit`` level, None with :data:`LOSSY` durability."""
        return None if self.lossy else self._sync_level

    @staticmethod
    def _insert(conn: psycopg.Connection, session_id: str, seq: int, rows: list,
                level: str | None = None) -> tuple[int, bool]:
        """Insert the chained ``rows`` (``[type, ts, payload, hash, salt, ...]``) at ``seq``...
        Returns the first position, and whether the commit already flushed (only with a
        durable ``level``, one row, in autocommit: see :data:`INSERT_ONE_FULL`)."""
        n = len(rows) // 5
        try:
            if n == 1 and level is not None:
                cur = conn.execute(INSERT_ONE_FULL, (session_id, seq, *rows, level))
            elif n == 1:
                cur = conn.execute(INSERT_ONE, (session_id, seq, *rows))
            else:
                cur = conn.execute(INSERT_MANY, (session_id, seq, rows[0::5], rows[1::5], rows[2::5], rows[3::5],
                                                 rows[4::5]))
        except UnicodeEncodeError as e:
            raise InvalidEvent(f"session {session_id!r}: text PostgreSQL cannot hold: {e.reason}") from None
        if cur.rowcount != n:  # a BEFORE INSERT trigger returning NULL drops rows without an error
            committed = conn.info.transaction_status == IDLE_SQL  # (autocommit: what it stored stays)
            raise base.not_stored(session_id, seq, n, max(cur.rowcount, 0) if committed else 0)
        row = cur.fetchone()
        return row[0], len(row) > 1 and row[1]

    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        row = self._one("SELECT seq, position, type, ts, payload FROM events WHERE session_id = %s AND event_id = %s",
                        (session_id, event_id))
        return tuple(row) if row else None

    # --- reads --------------------------------------------------------------------------------

    def next_seq(self, session_id: str) -> int:
        return self._one(NEXT_SEQ, (session_id,))[0]

    def session_events(self, session_id: str, after_seq: int = -1, types: list[str] | None = None,
                       limit: int = base.PAGE, last: bool = False) -> list[tuple[int, int, str, float, str]]:
        where = "session_id = %s AND seq > %s" + (" AND type = ANY(%s)" if types else "")
        params: tuple = (session_id, after_seq, list(types)) if types else (session_id, after_seq)
        if last:
            sql = (f"SELECT * FROM (SELECT seq, position, type, ts, payload FROM events WHERE {where} "
                   f"ORDER BY seq DESC LIMIT %s) AS t ORDER BY seq")
        else:
            sql = f"SELECT seq, position, type, ts, payload FROM events WHERE {where} ORDER BY seq LIMIT %s"
        return [tuple(r) for r in self._read(sql, (*params, limit))]

    def session_payloads(self, session_id: str, types: list[str], limit: int | None = None,
                         last: bool = False, from_seq: int = 0) -> tuple[int, list[tuple[int, str, str]]]:
        # the head comes as a last row (its seq is past every event's; no row has a NULL type)
        found = [tuple(r) for r in self._read(
            "(SELECT seq, type, payload FROM events WHERE session_id = %(s)s AND type = ANY(%(t)s) "
            f"AND seq >= %(f)s ORDER BY seq {'DESC' if last else ''} LIMIT %(n)s) "  # LIMIT NULL: all
            "UNION ALL SELECT coalesce(max(seq) + 1, 0), NULL, NULL FROM events WHERE session_id = %(s)s ORDER BY 1",
            {"s": session_id, "t": list(types), "n": limit, "f": from_seq})]
        return found.pop()[0], found

    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        return [tuple(r) for r in self._read(STORE_ROWS, (after_position, list(dead_owners), limit))]

    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        return self._one(LAST_POSITION, (list(dead_owners),))[0]

    def imports(self) -> list[tuple[str, int, str, float]]:
        return [tuple(r) for r in self._read(IMPORTS)]

    def import_lock(self, session_id: str) -> ImportLock | None:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        conn = open_connection(self.url, self.display)
        try:
            deadline = time.monotonic() + 1.0
            while not conn.execute(f"SELECT pg_try_advisory_lock({IMPORT_LOCK_CLASS}, hashtext(%s))",
                                   (session_id,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    conn.close()
                    return None
                time.sleep(0.01)
            return PgImportLock(conn)
        except psycopg.Error as e:
            conn.close()
            raise self._error(e, session_id) from None

    def import_owner_alive(self, owner: str) -> bool:
        pid = owner.partition(":")[2].partition("#")[0]
        if not pid.isdigit():  # not written by an importer (pg:PID#...): no live owner
            return False
        return bool(self._one(OWNER_ALIVE, (int(pid), owner))[0])

    def follower(self, poll_interval: float) -> Follower:
        return PgFollower(self, poll_interval)

    # --- the projection -----------------------------------------------------------------------

    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        # The rows of messages_uncut after the last compaction up to that seq (the session's
        # last without one: the rows of the messages view). The cut is looked up once here;
        # the messages view's own cut is a subquery for each row, a fifth of the read.
        upto = base.MAX_COUNTER if upto_seq is None else upto_seq
        rows = self._read(MESSAGES_UPTO, (session_id, upto, session_id, upto))
        return "[" + ",".join([r[0] for r in rows]) + "]"

    def messages_size(self, session_id: str, upto_seq: int | None = None) -> int:
        if upto_seq is None:
            rows = self._read("SELECT coalesce(sum(octet_length(message::text)), 0) FROM messages "
                              "WHERE session_id = %s", (session_id,))
        else:
            rows = self._read(f"SELECT coalesce(sum(octet_length(message::text)), 0) FROM ({MESSAGES_UPTO}) AS m",
                              (session_id, upto_seq, session_id, upto_seq))
        return int(rows[0][0])

    # --- export and import --------------------------------------------------------------------

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        if max_bytes is None:
            return [tuple(r) for r in self._read(
                "SELECT type, seq, ts, payload FROM events WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (session_id, after_seq, limit))]
        # The client takes a whole result: the server cuts the page where the running sum of
        # payload bytes reaches max_bytes (octet_length of a TOASTed value reads no data).
        return [tuple(r) for r in self._read(EXPORT_BOUNDED, (session_id, after_seq, limit, max_bytes))]

    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], Any]) -> Any:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        with self._wlock:
            conn = self._conn("w")
            self._heads.pop(session_id, None)
            try:
                with conn.transaction():
                    # The position lock first: next_position stays true until the commit.
                    conn.execute(LOCK_POSITIONS)
                    result = body(PgImport(conn, session_id))
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            self._durable(conn, session_id)
            return result


def head_revision() -> str:
    """The Alembic revision this package's schema is at (the head of migrations/postgres/versions)."""
    from eventstore.schema import SCHEMA_REVISION

    return SCHEMA_REVISION
