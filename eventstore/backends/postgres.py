"""The PostgreSQL backend (psycopg 3): ``postgresql://user@host:port/db`` or
``postgresql+psycopg://...``.

The schema (migrations/versions, the baseline's PostgreSQL branch) holds the guarantees; this
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
  statement (:data:`_INSERT_ONE_FULL`); otherwise the append waits, outside the lock, for
  the flush (:data:`_FLUSH`; concurrent writers share one). A follower flushes before it
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
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Generator, Iterable, Iterator
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import TextLoader

from eventstore.log.chain import chain_rows, genesis_hash, session_hash

from ..errors import (
    AppendOnlyViolation,
    DatabaseError,
    InvalidEvent,
    QueryError,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from ..schema import outdated
from . import base
from .base import (
    Backend,
    Follower,
    ImportLock,
    ImportTransaction,
    Refusal,
)
from .capabilities import (
    MULTIPLE_STATEMENTS,
    AuditReads,
    LogViews,
    QueryConnection,
    Roles,
    SearchIndex,
    SessionIndex,
    SqlSandbox,
)

__all__ = ["PostgresBackend", "apply_roles", "conninfo", "LOCK_POSITIONS", "MIGRATION_LOCK", "roles_sql"]

#: The position lock that the insert guard takes (revision 0250): a table lock in a mode that
#: only roles with UPDATE on the (empty) table may take, i.e. the writers, released at commit.
LOCK_POSITIONS = "LOCK TABLE events_position_lock IN EXCLUSIVE MODE"
#: ``pg_advisory_xact_lock`` key (the bytes ``esmigrat`` as an integer) that makes concurrent
#: first opens migrate once.
MIGRATION_LOCK = 7310306919626989940

# The searchable text and vector of an event of ``events AS e`` (revision 0280's functions, as
# the index's guard and the events_search_text view compute them).
_SEARCH_TEXT = "es_event_text(e.type, e.payload)"
_SEARCH_VECTOR = "es_event_vector(e.type, e.payload)"
# The searchable events (those of the events_search_text view) past the index's bound, as
# ``events AS e``.
_PAST_BOUND = ("events_search_text AS x JOIN events AS e ON e.position = x.position "
               "WHERE x.position > %(through)s")

#: The catch-up's insert of the searchable events at positions in ``(%s, %s]``: the guard
#: trigger fills in each row's vector from its event (revisions 0250, 0280), so none is computed here.
_CATCH_UP = ("INSERT INTO events_search (position, session_id, type, tsv) "
             "SELECT position, session_id, type, ''::tsvector FROM events_search_text "
             "WHERE position > %s AND position <= %s "
             "ORDER BY position ON CONFLICT (position) DO NOTHING")

#: The channel the schema's statement trigger NOTIFYs after every INSERT into events.
CHANNEL = "eventstore_events"

#: The ``durability`` values (see docs/concurrency.md, "Durability"). Every append commits
#: asynchronously (``synchronous_commit = off`` on the write connection), so that the WAL
#: flush is not inside the position lock. "normal" (the default) and "full" are the same here:
#: an append returns once the WAL is flushed past its commit, as the server's
#: ``synchronous_commit`` says (``on`` where the server is set to ``off``): inside the commit
#: when the position lock was free (:data:`_INSERT_ONE_FULL`), else after it, outside the lock
#: (:data:`_FLUSH`); a server crash loses no acknowledged append. LOSSY, opt-in, returns right
#: after the commit: a server crash may lose the appends acknowledged in its last moments
#: (about 3 x ``wal_writer_delay``, 600 ms by default), never corrupts, gaps or reorders what
#: is kept (recovery replays a prefix of the WAL).
LOSSY = "may-lose-recent"
DURABILITY = ("normal", "full", LOSSY)
# A one-statement transaction that writes a WAL record (an empty logical-decoding message,
# prefix "eventstore") and commits synchronously: its commit waits until the WAL is flushed
# (and replicated, per the level) up to its own record, so past every commit before it.
# Concurrent waiters share one flush (group commit).
_FLUSH = "SELECT pg_logical_emit_message(true, 'eventstore', '') FROM set_config('synchronous_commit', %s, true)"

#: How long a follower tries to connect again to a server that went away (seconds), and
#: how long it waits between tries.
RECONNECT_SECONDS = 60.0
RECONNECT_PAUSE = 0.5

#: ``statement_timeout`` of ``eventstore sql`` queries (seconds).
QUERY_TIMEOUT = 30.0

#: The triggers that make events and sessions append-only, by table (verify checks them).
GUARDS = {
    "events": ("events_guard_insert", "events_guard_check", "events_guard_update", "events_guard_delete",
               "events_guard_truncate"),
    "sessions": ("sessions_guard_update", "sessions_guard_delete", "sessions_guard_truncate"),
    # (an importing row may hide only a session being created, and change only by its importer)
    "importing": ("importing_guard_insert", "importing_guard_update", "importing_guard_delete",
                  "importing_guard_truncate"),
    # (derived from the log: a row is what the log says of its position; revision 0250)
    "events_search": ("events_search_guard_insert", "events_search_guard_update", "events_search_guard_delete",
                      "events_search_guard_truncate"),
    "events_search_state": ("events_search_state_guard_insert", "events_search_state_guard_update",
                            "events_search_state_guard_delete", "events_search_state_guard_truncate"),
    "events_position_lock": ("events_position_lock_guard_insert", "events_position_lock_guard_truncate"),
}

_EVENT_COLUMNS = "position, session_id, seq, type, ts, payload"
_INSERT_ONE = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
               "VALUES (%s, %s, %s, %s, %s, %s) RETURNING position")
# A batch: one statement text for every size (the server prepares it once).
_INSERT_MANY = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                "SELECT %s, %s + u.i - 1, u.type, u.ts, u.payload, u.hash "
                "FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[]) "
                "WITH ORDINALITY AS u(type, ts, payload, hash, i) ORDER BY u.i RETURNING position")
# A durable append (durability other than LOSSY), one event at the cached head: the INSERT
# first tries the position lock.
# When the lock is free, the transaction commits at the durable level, so the commit flushes
# inside the lock within the INSERT's one round trip, as any application's durable INSERT
# does; RETURNING says so. When another append holds it, the commit stays asynchronous and
# the flush follows outside the lock (:data:`_FLUSH`), shared with the appends waiting then.
# (The guard trigger takes the lock again, a no-op for its holder, and reads the heads after.)
_INSERT_ONE_FULL = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                    "SELECT %s, %s, %s, %s, %s, %s FROM (SELECT set_config('synchronous_commit', "
                    "CASE WHEN es_try_position_lock() THEN %s ELSE 'off' END, true)) AS d "
                    "RETURNING position, current_setting('synchronous_commit') <> 'off'")
_IDLE = psycopg.pq.TransactionStatus.IDLE  # (after a statement: it committed on its own)
_LOCK_HEAD = "SELECT next_seq, last_hash FROM es_lock_head(%s)"
_NEXT_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = %s"


def conninfo(url: str) -> str:
    """The libpq URL for ``url`` (``postgresql+psycopg://`` becomes ``postgresql://``)."""
    scheme, rest = url.split("://", 1)
    return "postgresql://" + rest if scheme.lower() in ("postgresql+psycopg", "postgres") else url


# password= and sslpassword= (the client key's): their values are secrets
_PASSWORD_PARAM = re.compile(r"[?&][a-z]*password=", re.IGNORECASE)
_PASSWORD_VALUES = re.compile(r"[?&][a-z]*password=([^&]*)", re.IGNORECASE)
_URL_DELIMITERS = re.compile(r"[/?@#&=:%\s]+")
_HIDDEN = "***"
PERCENT_HINT = ("a password that holds / ? @ # % or a space must be percent-encoded in the URL: "
                "/ as %2F, ? as %3F, @ as %40, # as %23, % as %25, a space as %20")


def _userinfo(url: str) -> tuple[str, str | None, str | None, str]:
    """``(scheme, user, password, rest)`` of ``url``, where ``rest`` is what follows the
    ``user[:password]@``. A password may hold ``/ ? @ #`` and spaces, so it ends at the last
    ``@`` (before any ``password=`` parameter, whose value may hold ``@`` too) with a ``:``
    before it; an odd URL may then lose more than its password, never show part of it."""
    scheme, rest = conninfo(url).split("://", 1)
    cut = _PASSWORD_PARAM.search(rest)
    at = rest.rfind("@", 0, cut.start() if cut else len(rest))
    if at < 0:
        return scheme, None, None, rest
    user, colon, password = rest[:at].partition(":")
    return scheme, user, password if colon else None, rest[at + 1:]


def _secrets(url: str) -> list[str]:
    """What of ``url`` a message must not show, longest first: the password as this module
    reads it, as libpq reads it (the two differ when it holds an unencoded delimiter), any
    ``password=`` value, each percent-decoded too, and each of their pieces between URL
    delimiters of 3 characters or more (libpq may quote such a piece of a URL it cannot parse)."""
    found = [_userinfo(url)[2] or ""] + _PASSWORD_VALUES.findall(conninfo(url).split("://", 1)[1])
    try:
        read = conninfo_to_dict(conninfo(url))
        found += [read.get("password") or "", read.get("sslpassword") or ""]
    except (psycopg.Error, UnicodeError):
        pass
    found += [unquote(s) for s in found]
    pieces = [p for s in found for p in _URL_DELIMITERS.split(s) if len(p) >= 3]
    return sorted({s for s in found + pieces if s}, key=len, reverse=True)


def _hide(text: str, secrets: list[str], quoted: bool = False) -> str:
    """``text`` with each of ``secrets`` of 3 characters or more replaced by ``***``; with
    ``quoted``, every quoted token too (libpq quotes the piece of a URL it could not parse,
    or the host it could not resolve: for a URL it misread, that may be any piece of the
    password, even one character)."""
    for s in secrets:
        if len(s) >= 3:
            text = text.replace(s, _HIDDEN)
    return _QUOTED.sub(lambda m: m[1] + _HIDDEN + m[1], text) if quoted else text


_QUOTED = re.compile(r"([\"'])(.*?)\1")


def _display(url: str) -> str:
    """``url`` without its password (for messages): the one of ``user:password@`` (up to the
    last ``@``, see :func:`_userinfo`) and any ``password=`` parameter. The rest stays as
    written, even in a URL libpq will refuse, but for any piece of a password in it."""
    scheme, user, _, rest = _userinfo(url)
    hosts, _, query = rest.partition("?")
    kept = [p for p in query.split("&") if p and not _PASSWORD_PARAM.match("&" + p)]
    shown = f"{scheme}://" + (f"{user}@" if user is not None else "") + hosts + ("?" + "&".join(kept) if kept else "")
    # (a byte that is not UTF-8 arrives as a lone surrogate, which no terminal can print)
    return _hide(shown, _secrets(url)).encode("utf-8", "backslashreplace").decode("utf-8")


def _connect(url: str, display: str, autocommit: bool = True) -> psycopg.Connection:
    try:
        return psycopg.connect(conninfo(url), autocommit=autocommit, application_name="eventstore")
    except psycopg.Error as e:
        raise DatabaseError(f"{display}: cannot connect: {_connect_failure(url, e)}") from None
    except UnicodeEncodeError:  # (bytes of the command line that are not UTF-8)
        raise DatabaseError(f"{display}: cannot connect: the URL is not UTF-8 text") from None


def _connect_failure(url: str, e: psycopg.Error) -> str:
    """libpq's reason, without the password or any piece of it (libpq quotes pieces of a
    URL it cannot parse), and with :data:`PERCENT_HINT` when the URL has a password and
    libpq could not parse it (ProgrammingError) or read another password from it."""
    secrets = _secrets(url)
    misread = bool(secrets) and isinstance(e, psycopg.ProgrammingError)
    if secrets and not misread:
        password = _userinfo(url)[2]
        try:
            misread = password is not None and conninfo_to_dict(conninfo(url)).get("password") != unquote(password)
        except psycopg.Error:
            misread = True
    text = _hide(str(e).strip().replace(conninfo(url), _display(url)), secrets, quoted=misread)
    text = text.splitlines()[0] if text else type(e).__name__
    return f"{text} ({PERCENT_HINT})" if misread else text


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _constraint(e: psycopg.Error) -> str | None:
    return e.diag.constraint_name


# Refusals that PostgreSQL reports as constraint violations, by constraint name.
_CONSTRAINT_CODES = {
    base.SESSIONS_PKEY: base.SESSION_EXISTS,
    base.EVENT_ID_INDEX: base.EVENT_ID_TAKEN,
    "events_payload_object": base.PAYLOAD_NOT_CANONICAL,
}


def _refusal(e: psycopg.Error) -> Refusal:
    """The database's refusal of a row, as a :class:`Refusal` with the contract's code.
    Raises ``e`` itself when it refuses the role, not the row (no privilege)."""
    if isinstance(e, pg_errors.InsufficientPrivilege):
        raise e
    code = e.sqlstate
    if not (code or "").startswith("ES"):
        code = _CONSTRAINT_CODES.get(_constraint(e)) if isinstance(e, pg_errors.IntegrityError) else None
    return Refusal(code, e.diag.message_primary or _first_line(e))


_inherited: list = []  # connections of a parent process: kept, never used or closed (see module doc)


class PostgresBackend(Backend, SearchIndex, AuditReads, SessionIndex, LogViews, SqlSandbox, Roles):
    """One PostgreSQL database (see the module's docstring)."""

    name = "postgresql"

    def __init__(self, url: str, busy_timeout: float, readonly: bool, durability: str = "normal"):
        if durability not in DURABILITY:
            raise DatabaseError(f"durability must be one of {', '.join(DURABILITY)}, not {durability!r}")
        self.url = url
        self.durability = durability
        self.lossy = durability == LOSSY  # (see DURABILITY)
        self.display = _display(url)
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

    # --- open, migrate, close ------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, busy_timeout: float = 5.0, durability: str = "normal", write_queue: bool = True,
             readonly: bool = False) -> PostgresBackend:
        """Connect and migrate (see :meth:`Backend.open`). ``durability`` is one of
        :data:`DURABILITY`; ``write_queue`` is SQLite's and ignored here."""
        self = cls(url, busy_timeout, readonly, durability)
        try:
            revision = self._revision()
            if revision != head_revision():
                if readonly and revision is not None and revision < head_revision():
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
            conn = _connect(self.url, self.display)
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

        from .sqlite_engine import migrations_path  # (where the scripts are; no SQLite in it)

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
                cfg.set_main_option("script_location", migrations_path())
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except psycopg.Error as e:
            raise DatabaseError(f"{self.display}: cannot migrate: {_first_line(e)}") from None
        except Exception as e:
            orig = getattr(e, "orig", None)
            if isinstance(orig, psycopg.Error):
                raise DatabaseError(f"{self.display}: cannot migrate: {_first_line(orig)}") from None
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

    # --- roles (the Roles capability; the functions below do the work) -----------------------

    def check_role_names(self, writer: str, auditor: str) -> None:
        check_role_names(self, writer, auditor)

    def roles_sql(self, writer: str, auditor: str) -> str:
        return roles_sql(writer, auditor, self.database_name(), self.schema_name())

    def apply_roles(self, text: str) -> list[str]:
        return apply_roles(self, text)

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
        if isinstance(e, pg_errors.UniqueViolation) and _constraint(e) == base.SESSIONS_PKEY and session_id:
            return SessionExists(session_id)
        if code.startswith("ES") or isinstance(e, pg_errors.IntegrityError):
            r = _refusal(e)
            return AppendOnlyViolation(f"{r.code or code}: {r.message}" if r.code else r.message)
        if isinstance(e, pg_errors.DiskFull):  # SQLSTATE 53100
            what = f"session {session_id!r}: " if session_id is not None else ""
            return DatabaseError(f"{self.display}: {what}{_first_line(e)}: nothing was written (free space on "
                                 f"the server)")
        if isinstance(e, pg_errors.ReadOnlySqlTransaction):
            return DatabaseError(f"{self.display}: opened read-only: {_first_line(e)}")
        if isinstance(e, pg_errors.LockNotAvailable):
            return DatabaseError(f"{self.display}: database is locked (waited {self.busy_timeout:g} s)")
        if isinstance(e, pg_errors.InsufficientPrivilege):
            conn = self._r or self._w
            role = f"role {conn.info.user!r}" if conn is not None and not conn.closed else "this role"
            return DatabaseError(f"{self.display}: {_first_line(e)} ({role} may not: grant it eventstore_writer "
                                 f"to append or eventstore_auditor to read; `eventstore roles`, run as the tables' "
                                 f"owner, creates both)")
        if isinstance(e, pg_errors.DataError):
            return InvalidEvent(_first_line(e))
        return DatabaseError(f"{self.display}: {_first_line(e)}")

    def _durable(self, conn: psycopg.Connection, session_id: str) -> None:
        """Unless ``durability`` is :data:`LOSSY`: wait until the write just committed on ``conn`` is
        flushed (see :data:`DURABILITY`). Raises :class:`DatabaseError` when the server
        cannot confirm it (the write is committed; whether it survives a crash is unknown)."""
        if self.lossy:
            return
        try:
            conn.execute(_FLUSH, (self._sync_level,))
        except psycopg.Error as e:
            raise DatabaseError(f"{self.display}: session {session_id!r}: committed, but the server did not confirm "
                                f"the flush to disk: {_first_line(e)}") from None

    def _read(self, sql: str, params: tuple = ()) -> list:
        """Rows of one read on the read connection. A read that finds the connection lost
        (the server restarted since the last one) runs once more on a new connection:
        reads change nothing, so running one again is safe (writes are never retried)."""
        with self._rlock:
            for retry in (False, True):
                conn = self._conn("r")
                try:
                    return conn.execute(sql, params).fetchall()
                except psycopg.Error as e:
                    if retry or not conn.closed:
                        raise self._error(e) from None
        raise AssertionError("unreachable")

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
               expected_seq: int | None) -> tuple[int, int, str]:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        with self._wlock:
            conn = self._conn("w")
            head = self._heads.get(session_id)
            if head is not None and (expected_seq is None or expected_seq == head[0]):
                # The cached head: one INSERT, its own transaction.
                rows = chain_rows(head[1], head[0], types, tss, payloads)
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
                    self._heads[session_id] = (head[0] + len(types), rows[-1])
                    if not flushed:
                        self._durable(conn, session_id)
                    return head[0], position, rows[-1]
            self._heads.pop(session_id, None)
            try:
                with conn.transaction():
                    row = conn.execute(_LOCK_HEAD, (session_id,)).fetchone()
                    if row is None or row[0] is None:
                        raise SessionNotFound(session_id)
                    seq, prev = row[0], row[1] or genesis_hash(session_id)
                    if expected_seq is not None and expected_seq != seq:
                        raise SeqConflict(session_id, expected_seq, seq)
                    rows = chain_rows(prev, seq, types, tss, payloads)
                    position = self._insert(conn, session_id, seq, rows)[0]
            except psycopg.Error as e:
                if e.sqlstate == base.SEQ_NOT_NEXT and len(types) > 1:
                    # The head is locked: no other writer came between. The guard refused a
                    # later row of this batch because an earlier one was silently dropped.
                    raise base.not_stored(session_id, seq, len(types)) from None
                raise self._error(e, session_id) from None
            self._heads[session_id] = (seq + len(types), rows[-1])
            self._durable(conn, session_id)
            return seq, position, rows[-1]

    @property
    def _full_level(self) -> str | None:
        """The durable ``synchronous_commit`` level, None with :data:`LOSSY` durability."""
        return None if self.lossy else self._sync_level

    @staticmethod
    def _insert(conn: psycopg.Connection, session_id: str, seq: int, rows: list,
                level: str | None = None) -> tuple[int, bool]:
        """Insert the chained ``rows`` (``[type, ts, payload, hash, ...]``) at ``seq``...
        Returns the first position, and whether the commit already flushed (only with a
        durable ``level``, one row, in autocommit: see :data:`_INSERT_ONE_FULL`)."""
        n = len(rows) // 4
        try:
            if n == 1 and level is not None:
                cur = conn.execute(_INSERT_ONE_FULL, (session_id, seq, *rows, level))
            elif n == 1:
                cur = conn.execute(_INSERT_ONE, (session_id, seq, *rows))
            else:
                cur = conn.execute(_INSERT_MANY, (session_id, seq, rows[0::4], rows[1::4], rows[2::4], rows[3::4]))
        except UnicodeEncodeError as e:
            raise InvalidEvent(f"session {session_id!r}: text PostgreSQL cannot hold: {e.reason}") from None
        if cur.rowcount != n:  # a BEFORE INSERT trigger returning NULL drops rows without an error
            committed = conn.info.transaction_status == _IDLE  # (autocommit: what it stored stays)
            raise base.not_stored(session_id, seq, n, max(cur.rowcount, 0) if committed else 0)
        row = cur.fetchone()
        return row[0], len(row) > 1 and row[1]

    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        row = self._one("SELECT seq, position, type, ts, payload FROM events WHERE session_id = %s AND event_id = %s",
                        (session_id, event_id))
        return tuple(row) if row else None

    # --- reads --------------------------------------------------------------------------------

    def next_seq(self, session_id: str) -> int:
        return self._one(_NEXT_SEQ, (session_id,))[0]

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
        return [tuple(r) for r in self._read(_STORE_ROWS, (after_position, list(dead_owners), limit))]

    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        return self._one(_LAST_POSITION, (list(dead_owners),))[0]

    def imports(self) -> list[tuple[str, int, str, float]]:
        return [tuple(r) for r in self._read(_IMPORTS)]

    def import_lock(self, session_id: str) -> ImportLock | None:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        conn = _connect(self.url, self.display)
        try:
            deadline = time.monotonic() + 1.0
            while not conn.execute(f"SELECT pg_try_advisory_lock({IMPORT_LOCK_CLASS}, hashtext(%s))",
                                   (session_id,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    conn.close()
                    return None
                time.sleep(0.01)
            return _PgImportLock(conn)
        except psycopg.Error as e:
            conn.close()
            raise self._error(e, session_id) from None

    def import_owner_alive(self, owner: str) -> bool:
        pid = owner.partition(":")[2].partition("#")[0]
        if not pid.isdigit():  # not written by an importer (pg:PID#...): no live owner
            return False
        return bool(self._one(_OWNER_ALIVE, (int(pid), owner))[0])

    def follower(self, poll_interval: float) -> Follower:
        return PgFollower(self, poll_interval)

    # --- the projection -----------------------------------------------------------------------

    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        if upto_seq is None:
            rows = self._read("SELECT message FROM messages WHERE session_id = %s ORDER BY seq", (session_id,))
        else:
            # the last compaction up to that seq cuts, not the session's last (the view's)
            upto = upto_seq
            rows = self._read(_MESSAGES_UPTO, (session_id, upto, session_id, upto))
        return "[" + ",".join([r[0] for r in rows]) + "]"

    def messages_size(self, session_id: str, upto_seq: int | None = None) -> int:
        if upto_seq is None:
            rows = self._read("SELECT coalesce(sum(octet_length(message::text)), 0) FROM messages "
                              "WHERE session_id = %s", (session_id,))
        else:
            rows = self._read(f"SELECT coalesce(sum(octet_length(message::text)), 0) FROM ({_MESSAGES_UPTO}) AS m",
                              (session_id, upto_seq, session_id, upto_seq))
        return int(rows[0][0])

    # --- the viewer's index -------------------------------------------------------------------

    def session_rows(self) -> list[tuple[str, float]]:
        return [tuple(r) for r in self._read("SELECT id, created_at FROM sessions WHERE id NOT IN "
                                             "(SELECT session_id FROM importing) ORDER BY created_at, id")]

    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        return [tuple(r) for r in self._read(_COUNTS_SQL, (upto_position,))]

    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        return [tuple(r) for r in self._read(_STATE_SQL, (after_position, upto_position, limit))]

    # --- export and import --------------------------------------------------------------------

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        if max_bytes is None:
            return [tuple(r) for r in self._read(
                "SELECT type, seq, ts, payload FROM events WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (session_id, after_seq, limit))]
        # The client takes a whole result: the server cuts the page where the running sum of
        # payload bytes reaches max_bytes (octet_length of a TOASTed value reads no data).
        return [tuple(r) for r in self._read(_EXPORT_BOUNDED, (session_id, after_seq, limit, max_bytes))]

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
                    result = body(_PgImport(conn, session_id))
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            self._durable(conn, session_id)
            return result

    # --- search and usage (revisions 0100, 0200) --------------------------------------------
    # The vectors live in events_search, derived from the log and caught up by whoever
    # searches (as on SQLite): appends pay nothing. A search reads the table up to
    # events_search_state.indexed_through and computes the vectors of the message events
    # past it on the fly (a role or a store that may not write the table still finds them).

    def _may_index(self) -> bool:
        """Whether this store may write the search index (not read-only; the role has
        INSERT on events_search and UPDATE on its state), asked once."""
        if self.readonly:
            return False
        if self._index_writable is None:
            self._index_writable = bool(self._one(
                "SELECT has_table_privilege('events_search', 'INSERT') "
                "AND has_table_privilege('events_search_state', 'UPDATE')")[0])
        return self._index_writable

    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index the searchable events stored since the last catch-up, in transactions of
        :data:`CATCH_UP_BATCH` positions, each holding the row lock of ``events_search_state``
        (concurrent searchers wait for each other's batch, then find it done; the insert
        also skips rows already there). Raises :class:`DatabaseError` when the store may
        not write the index (read-only, or a role without the grants: search scans then)."""
        if not self._may_index():
            raise DatabaseError(f"{self.display}: this store may not write the search index "
                                f"({'opened read-only' if self.readonly else 'no INSERT on events_search'})")
        done, total = 0, None
        with self._rlock:
            conn = self._conn("r")
            while True:
                try:
                    with conn.transaction():
                        # (a row lock: a role that may not UPDATE the state cannot take it)
                        start = conn.execute("SELECT indexed_through FROM events_search_state FOR UPDATE"
                                             ).fetchone()[0]
                        last = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]
                        n, end = 0, start
                        if last > start:
                            end = min(last, start + CATCH_UP_BATCH)
                            n = conn.execute(_CATCH_UP, (start, end)).rowcount
                            conn.execute("UPDATE events_search_state SET indexed_through = %s", (end,))
                except psycopg.Error as e:
                    raise self._error(e) from None
                done += n
                if total is None:
                    total = last
                if progress is not None and end < total:
                    progress(end, total)
                if end >= last:
                    return done

    def _search_read(self, query: str, raw: bool, sql: str, params: dict) -> list:
        """Rows of ``sql`` with the query as ``%(q)s`` (a ``to_tsquery`` text) and ``params``."""
        tsquery = query if raw else _tsquery(query)
        with self._rlock:
            conn = self._conn("r")
            try:
                # Never prepared: a prepared statement may get a generic plan, blind to how
                # common the words are (a bitmap scan of every match of a common word,
                # 1 s, where walking back from the newest position takes 2 ms).
                return conn.execute(sql, {**params, "q": tsquery}, prepare=False).fetchall()
            except pg_errors.SyntaxError as e:  # a malformed raw query
                raise QueryError(f"search {tsquery!r}: {_first_line(e)}") from None
            except psycopg.Error as e:
                raise self._error(e) from None

    def _indexed_through(self) -> int:
        return self._one("SELECT indexed_through FROM events_search_state")[0]

    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        if limit < 1:
            return []
        where_s, params = _search_filters("s", session_id, type_)
        where_e, _ = _search_filters("e", session_id, type_)
        # The newest matches (indexed, and past the index), ranked; the text (for the
        # snippet) of the best only. The tsquery and the index's bound are constants the
        # planner sees (it then knows how short the unindexed tail is); both parts are cut
        # at the bound read first, so a catch-up that commits in between changes nothing.
        rows = self._search_read(query, raw, f"""
            WITH window_ AS (
              SELECT position, tsv FROM (
                (SELECT s.position, s.tsv FROM events_search AS s
                  WHERE s.tsv @@ to_tsquery('simple', %(q)s) AND s.position <= %(through)s {where_s}
                  ORDER BY s.position DESC LIMIT %(window)s)
                UNION ALL
                (SELECT e.position, {_SEARCH_VECTOR} FROM {_PAST_BOUND}
                    AND {_SEARCH_VECTOR} @@ to_tsquery('simple', %(q)s) {where_e}
                  ORDER BY e.position DESC LIMIT %(window)s)) AS m
              ORDER BY position DESC LIMIT %(window)s),
            best AS (
              SELECT w.position, -ts_rank(w.tsv, to_tsquery('simple', %(q)s)) AS score
                FROM window_ AS w ORDER BY score, w.position DESC LIMIT %(limit)s)
            SELECT e.session_id, e.seq, e.type, e.ts, {_SEARCH_TEXT}, b.score
              FROM best AS b JOIN events AS e ON e.position = b.position
             ORDER BY b.score, b.position DESC""",
                                 {**params, "window": rank_window, "limit": limit, "through": self._indexed_through()})
        return [(sid, seq, t, ts, text, float(score)) for sid, seq, t, ts, text, score in rows]

    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None) -> int:
        where_s, params = _search_filters("s", session_id, type_)
        where_e, _ = _search_filters("e", session_id, type_)
        return self._search_read(query, raw, f"""
            SELECT (SELECT count(*) FROM events_search AS s
                     WHERE s.tsv @@ to_tsquery('simple', %(q)s) AND s.position <= %(through)s {where_s})
                 + (SELECT count(*) FROM {_PAST_BOUND}
                       AND {_SEARCH_VECTOR} @@ to_tsquery('simple', %(q)s) {where_e})""",
                                 {**params, "through": self._indexed_through()})[0][0]

    def summary_titles(self, session_id: str | None = None) -> list[tuple[str, str]]:
        summaries = """(SELECT ts, position, es_json(payload) -> 'source' ->> 'leafUuid' AS leaf,
                                 es_json(payload) -> 'source' ->> 'summary' AS title
                            FROM events
                           WHERE type = 'claude/summary'
                             AND json_typeof(es_json(payload) -> 'source' -> 'summary') = 'string'
                             AND json_typeof(es_json(payload) -> 'source' -> 'leafUuid') = 'string'
                             AND session_id NOT IN (SELECT session_id FROM importing)) AS sm"""
        # (a line's uuid is the key of its first event; keys with ':', '#' or '@' are its others')
        if session_id is None:  # each summary's line, by the index on event_id alone
            return [tuple(r) for r in self._read(f"""
                SELECT t.session_id, sm.title FROM {summaries}
                  JOIN events AS t ON t.event_id = sm.leaf AND t.event_id !~ '[:#@]'
                 WHERE t.session_id NOT IN (SELECT session_id FROM importing)
                 ORDER BY sm.ts, sm.position, t.session_id""")]
        # One session: a probe of (session_id, event_id) per summary, never a pass over its events.
        rows = self._read(f"""
            SELECT sm.title FROM {summaries}
             WHERE EXISTS (SELECT 1 FROM events AS t
                            WHERE t.session_id = %s AND t.event_id = sm.leaf
                              AND t.event_id !~ '[:#@]')
               AND %s NOT IN (SELECT session_id FROM importing)
             ORDER BY sm.ts, sm.position""", (session_id, session_id))
        return [(session_id, r[0]) for r in rows]

    def info_rows(self) -> list[tuple[str, str]]:
        return [tuple(r) for r in self._read(
            "SELECT session_id, payload FROM events WHERE type = 'session/info' "
            "AND session_id NOT IN (SELECT session_id FROM importing) ORDER BY session_id, seq")]

    def usage_totals(self) -> list[tuple[str, int, int, int, int, int]]:
        rows = self._read("""SELECT session_id, count(*), sum(input_tokens), sum(output_tokens),
                                    sum(cache_read_tokens), sum(cache_creation_tokens)
                             FROM usage GROUP BY session_id""")
        return [(r[0], *(int(v or 0) for v in r[1:])) for r in rows]

    # --- audit ------------------------------------------------------------------------------------

    @classmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = QUERY_TIMEOUT,
                         max_memory: int | None = None) -> QueryConnection:
        return PgQueryConnection(url, busy_timeout, timeout, max_memory)

    def guard_problems(self) -> list[str]:
        rows = self._read(
            "SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
            "WHERE c.relname = ANY(%s) "
            "AND c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal", (list(GUARDS),))
        found = {(r[0], r[1]): r[2] for r in rows}
        problems = []
        for table, names in GUARDS.items():
            for name in names:
                state = found.get((table, name))
                if state is None:
                    problems.append(f"trigger {name} on {table} is missing")
                elif state not in ("O", "A"):  # fires in origin sessions (O), or in every session (A)
                    how = "disabled" if state == "D" else "enabled only for replication sessions"
                    problems.append(f"trigger {name} on {table} is {how} "
                                    f"(ALTER TABLE {table} ENABLE TRIGGER {name})")
        return problems

    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        try:
            with self._rlock:
                have = self._catalog(self._conn("r"), None)
                roles = _granted_roles(self._conn("r"))
                regrants = self._conn("r").execute(_REGRANTS, (list(roles or ()),)).fetchall() if roles else []
        except psycopg.Error as e:
            return [("storage", f"{self.display}: the catalog cannot be read: {_first_line(e)}")]
        out += [("schema", f"{who} holds {privilege} on the {what}, which `eventstore roles` revokes (REVOKE "
                           f"{privilege} ON {what.upper()} ... FROM {who.removeprefix('role ')})")
                for what, who, privilege in regrants]
        try:
            want = _expected_catalog(self.url, self.display, roles)
        except _NoScratch as e:
            out.append(("note", f"{self.display}: schema not compared: this role may not create the scratch schema "
                                f"it is compared with ({e}); run verify as the database's owner for it"))
        except (psycopg.Error, DatabaseError) as e:
            msg = _first_line(e) if isinstance(e, psycopg.Error) else str(e)
            out.append(("schema", f"cannot build a scratch schema to compare with: {msg}"))
        else:
            skip = {f"{name} on {table}" for table, names in GUARDS.items() for name in names}
            # the owner and grants of an extra object are part of its own finding
            skip |= {key for key, (kind, _ddl) in have.items() if kind in ("owner", "grants") and key not in want
                     and key.split(" ", 2)[-1].removeprefix("function ") not in want}
            out += [("schema", m) for m in base.schema_differences(have, want, skip=skip)]
        out += self._amcheck(full)
        out += self._search_index_findings(full)
        return out

    def _search_index_findings(self, full: bool) -> list[tuple[str, str]]:
        """Whether the derived search index matches the log (revision 0200): its bound is
        not past the last event, every searchable event (``events_search_text``) up to the
        bound has its row, and every row is such an event's (session and type alike); with ``full``, each row's vector
        is the one its event's payload gives. The writer role may write the index (its
        searches catch it up), so an index out of step makes ``search`` miss or invent
        hits without any event being touched."""
        with self._rlock:
            conn = self._conn("r")
            try:
                through, last, missing, foreign = conn.execute("""
                    SELECT st.indexed_through, (SELECT coalesce(max(position), 0) FROM events),
                      (SELECT count(*) FROM events_search_text AS e WHERE e.position <= st.indexed_through
                          AND NOT EXISTS (SELECT 1 FROM events_search AS s WHERE s.position = e.position)),
                      (SELECT count(*) FROM events_search AS s LEFT JOIN events_search_text AS e
                                                                ON e.position = s.position
                        WHERE e.position IS NULL OR e.session_id <> s.session_id OR e.type <> s.type)
                    FROM events_search_state AS st""").fetchone()
                wrong = conn.execute("SELECT count(*) FROM events_search AS s JOIN events AS e USING (position) "
                                     f"WHERE s.tsv <> {_SEARCH_VECTOR}").fetchone()[0] if full else 0
            except psycopg.Error as e:
                return [("storage", f"{self.display}: the search index cannot be read: {_first_line(e)}")]
        out = []
        if through > last:
            out.append(f"its bound (position {through}) is past the last event (position {last})")
        if missing:
            out.append(f"{missing} searchable event(s) up to its bound have no row")
        if foreign:
            out.append(f"{foreign} row(s) belong to no searchable event (position, session or type)")
        if wrong:
            out.append(f"{wrong} row(s) hold another vector than their event's payload gives")
        return [("storage", f"the search index does not match the log: {m}: search may miss or invent hits "
                            f"(events_search, events_search_state: derived, written by whoever searches)")
                for m in out]

    def _amcheck(self, full: bool) -> list[tuple[str, str]]:
        """amcheck's B-tree checks of the indexes of events and sessions, where the extension
        is installed (CREATE EXTENSION amcheck); none otherwise."""
        with self._rlock:
            conn = self._conn("r")
            try:
                if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").fetchone() is None:
                    return []
                indexes = conn.execute(
                    "SELECT i.indexrelid::regclass::text FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid "
                    "JOIN pg_class AS ic ON ic.oid = i.indexrelid JOIN pg_am AS am ON am.oid = ic.relam "
                    "WHERE c.relname IN ('events', 'sessions') AND am.amname = 'btree' "
                    "AND c.relnamespace = current_schema()::regnamespace").fetchall()
            except psycopg.Error as e:
                return [("storage", f"{self.display}: amcheck: {_first_line(e)}")]
            out = []
            for (index,) in indexes:
                try:
                    conn.execute("SELECT bt_index_check(%s::regclass, %s)", (index, full))
                except psycopg.Error as e:
                    out.append(("storage", f"amcheck bt_index_check({index}): {_first_line(e)}"))
            return out

    @staticmethod
    def _catalog(conn: psycopg.Connection, schema: str | None) -> dict[str, tuple[str, str]]:
        """``{name: (kind, normalised definition)}`` of everything of ``schema`` (None: the
        current one) that decides what is stored and read (see ``_CATALOG``: definitions,
        owners, grants), with the schema's name taken out of the definitions; for the
        current schema also what the whole database holds that no migration creates (event
        triggers, publications of the schema's tables)."""
        with conn.cursor() as cur:
            ns = schema or cur.execute("SELECT current_schema()").fetchone()[0]
            owner = cur.execute("SELECT relowner FROM pg_class WHERE relname = 'events' AND relnamespace = "
                                "(SELECT oid FROM pg_namespace WHERE nspname = %s)", (ns,)).fetchone()
            params = {"ns": ns, "owner": owner[0] if owner else 0}
            rows = cur.execute(_CATALOG, params).fetchall()
            if schema is None:
                rows += cur.execute(_DATABASE_CATALOG, params).fetchall()
        prefix = pg_sql.Identifier(ns).as_string(None) + "."
        out = {}
        for kind, name, ddl in rows:
            ddl = _NORMALIZE.sub(" ", (ddl or "").replace(prefix, "").replace(ns + ".", "")).strip()
            if "alembic_version" in name:
                continue
            out[name if kind in ("table", "view", "materialized view", "sequence", "foreign table", "function",
                                 "trigger") or " on " in kind else f"{kind} {name}"] = (kind, ddl)
        return out

    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        return self._read("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY ctid")

    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        conn = _connect(self.url, self.display, autocommit=False)
        try:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            out = {"position": conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0],
                   "sessions": [tuple(r) for r in conn.execute(_CHECKPOINT_HEADS).fetchall()], "at": {}}
            if at:
                for sid, hash_, pos in conn.execute(
                        "SELECT e.session_id, e.hash, e.position FROM events AS e JOIN unnest(%s::text[], "
                        "%s::bigint[]) AS a(sid, seq) ON e.session_id = a.sid AND e.seq = a.seq",
                        (list(at), list(at.values()))).fetchall():
                    out["at"][sid] = (hash_, pos)
            out["counted"] = conn.execute("SELECT count(*) FROM events WHERE position <= %s", (position,)).fetchone()[0]
            return out
        except psycopg.Error as e:
            raise self._error(e) from None
        finally:
            conn.close()

    def orphan_session_ids(self) -> list[str]:
        return [r[0] for r in self._read(
            "SELECT DISTINCT e.session_id FROM events AS e "
            "WHERE NOT EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = e.session_id) ORDER BY 1")]

    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any]]:
        # A connection of its own (kept for the next session): one REPEATABLE READ READ ONLY
        # snapshot per session, streamed through a server-side cursor while other calls go on.
        with self._vlock:
            if self._v is None or self._v.closed or self._v_pid != os.getpid():
                self._v = _connect(self.url, self.display, autocommit=False)
                self._v_pid = os.getpid()
            conn = self._v
            try:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                with conn.cursor(name="verify_rows") as cur:
                    cur.itersize = 2000
                    cur.execute("SELECT seq, position, type, ts, payload, hash FROM events WHERE session_id = %s "
                                "ORDER BY seq", (session_id,))
                    for row in cur:
                        yield tuple(row)
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            finally:
                if not conn.closed:
                    conn.rollback()


_NORMALIZE = re.compile(r"\s+")
_CHECKPOINT_HEADS = """
SELECT s.id, s.created_at, s.meta, coalesce(h.seq + 1, 0), h.hash
FROM sessions AS s
LEFT JOIN LATERAL (SELECT seq, hash FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) AS h ON true"""
# Every object of schema %(ns)s that decides what is stored and read, with its definition as
# PostgreSQL prints it: tables (persistence, row-level security, options, inheritance,
# columns with defaults and collations, constraints), sequences, indexes, triggers (and
# whether they fire), rules, policies, views, functions (their settings and SECURITY
# DEFINER are in pg_get_functiondef), operators; the owner and the grants of each. The
# owner of the schema's ``events`` (%(owner)s) is written "the owner", so that a database
# and its scratch copy, migrated by different roles, compare equal.
_ROLE = "CASE {0} WHEN 0 THEN 'PUBLIC' WHEN %(owner)s THEN 'the owner' ELSE pg_get_userbyid({0}) END"
_GRANTS = (f"(SELECT string_agg(g, ', ' ORDER BY g) FROM (SELECT {_ROLE.format('a.grantee')} || ' ' || "
           "a.privilege_type || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END AS g "
           "FROM aclexplode({0}) AS a) AS x)")
_REL_GRANTS = _GRANTS.format("""coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                                 c.relowner))""")
_FUNCTION_GRANTS = _GRANTS.format("""coalesce(p.proacl, acldefault('f'::"char", p.proowner))""")
_CATALOG = f"""
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(ns)s),
rel AS (SELECT c.* FROM pg_class AS c
        WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f'))
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                      WHEN 'f' THEN 'foreign table' ELSE 'table' END, c.relname,
       CASE c.relpersistence WHEN 'u' THEN 'UNLOGGED (not crash-safe); ' ELSE '' END
       || CASE WHEN c.relrowsecurity THEN 'row level security enabled; ' ELSE '' END
       || CASE WHEN c.relforcerowsecurity THEN 'row level security forced; ' ELSE '' END
       || CASE WHEN c.relkind IN ('r', 'p') AND c.relreplident <> 'd'
               THEN 'replica identity ' || c.relreplident::text || '; ' ELSE '' END
       || coalesce('with (' || array_to_string(c.reloptions, ', ') || '); ', '')
       || coalesce((SELECT 'inherits ' || string_agg(i.inhparent::regclass::text, ', ' ORDER BY i.inhseqno) || '; '
                    FROM pg_inherits AS i WHERE i.inhrelid = c.oid), '')
       || coalesce((SELECT 'inherited by ' || string_agg(i.inhrelid::regclass::text, ', ' ORDER BY 1) || '; '
                    FROM pg_inherits AS i WHERE i.inhparent = c.oid), '')
       || CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid)
            WHEN c.relkind = 'S' THEN (SELECT format('%%s start %%s increment %%s min %%s max %%s cache %%s%%s',
                                                      s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin,
                                                      s.seqmax, s.seqcache, CASE WHEN s.seqcycle THEN ' cycle' END)
                                        FROM pg_sequence AS s WHERE s.seqrelid = c.oid)
            ELSE (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                    || CASE WHEN a.attcollation <> 0 AND a.attcollation <> ty.typcollation
                                            THEN ' collate ' || a.attcollation::regcollation::text ELSE '' END
                                    || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                    || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
                                    || CASE a.attidentity::text WHEN '' THEN ''
                                            ELSE ' identity ' || a.attidentity::text END
                                    || CASE a.attgenerated WHEN 's' THEN ' stored' ELSE '' END, ', ' ORDER BY a.attnum)
                  FROM pg_attribute AS a LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                  JOIN pg_type AS ty ON ty.oid = a.atttypid
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
                 || coalesce((SELECT '; ' || string_agg(co.conname || ' ' || pg_get_constraintdef(co.oid), '; '
                                                        ORDER BY co.conname)
                              FROM pg_constraint AS co WHERE co.conrelid = c.oid), '') END
FROM rel AS c
UNION ALL
SELECT 'owner', 'of ' || c.relname, {_ROLE.format('c.relowner')} FROM rel AS c
UNION ALL
SELECT 'grants', 'on ' || c.relname,
       coalesce({_REL_GRANTS}, 'none')
       || coalesce((SELECT '; column ' || string_agg(a.attname || ': ' || {_GRANTS.format('a.attacl')}, '; '
                                                     ORDER BY a.attnum)
                    FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL), '')
FROM rel AS c
UNION ALL
SELECT 'index on ' || t.relname, ic.relname,
       pg_get_indexdef(ic.oid) || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
FROM pg_index AS i JOIN pg_class AS ic ON ic.oid = i.indexrelid JOIN pg_class AS t ON t.oid = i.indrelid
WHERE ic.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'trigger', tg.tgname || ' on ' || t.relname,
       pg_get_triggerdef(tg.oid) || CASE tg.tgenabled WHEN 'O' THEN '' WHEN 'D' THEN ' (disabled)'
                                      WHEN 'R' THEN ' (replica only)' ELSE ' (always)' END
FROM pg_trigger AS tg JOIN pg_class AS t ON t.oid = tg.tgrelid
WHERE t.relnamespace = (SELECT oid FROM ns) AND NOT tg.tgisinternal
UNION ALL
SELECT 'rule on ' || t.relname, r.rulename,
       pg_get_ruledef(r.oid) || CASE r.ev_enabled WHEN 'O' THEN '' WHEN 'D' THEN ' (disabled)'
                                 WHEN 'R' THEN ' (replica only)' ELSE ' (always)' END
FROM pg_rewrite AS r JOIN pg_class AS t ON t.oid = r.ev_class
WHERE t.relnamespace = (SELECT oid FROM ns) AND r.rulename <> '_RETURN'
UNION ALL
SELECT 'policy on ' || t.relname, p.polname,
       format('%%s for %%s to %%s using (%%s) with check (%%s)',
              CASE WHEN p.polpermissive THEN 'permissive' ELSE 'restrictive' END, p.polcmd,
              (SELECT string_agg({_ROLE.format('r')}, ', ' ORDER BY 1) FROM unnest(p.polroles) AS r),
              pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
FROM pg_policy AS p JOIN pg_class AS t ON t.oid = p.polrelid
WHERE t.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) ELSE 'aggregate or window function' END
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'owner', 'of function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       {_ROLE.format('p.proowner')}
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'grants', 'on function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       coalesce({_FUNCTION_GRANTS}, 'none')
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'operator', o.oid::regoperator::text, o.oprcode::regprocedure::text
FROM pg_operator AS o WHERE o.oprnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'grants', 'on schema',
       coalesce((SELECT string_agg(g, ', ' ORDER BY g) FROM (
                   SELECT pg_get_userbyid(a.grantee) || ' ' || a.privilege_type AS g
                   FROM pg_namespace AS n, aclexplode(n.nspacl) AS a
                   WHERE n.oid = (SELECT oid FROM ns) AND a.grantee NOT IN (0, %(owner)s, n.nspowner)
                     AND NOT pg_has_role(a.grantee, n.nspowner, 'MEMBER')) AS x), 'none')
UNION ALL
SELECT 'default privileges', 'of ' || pg_get_userbyid(d.defaclrole) || ' for ' || d.defaclobjtype::text,
       {_GRANTS.format('d.defaclacl')}
FROM pg_default_acl AS d WHERE d.defaclnamespace = (SELECT oid FROM ns)"""
# What no migration creates anywhere in the database and changes what is stored or read:
# event triggers (they run on DDL), publications of the schema's tables (replication of
# the log elsewhere, and what UPDATE and DELETE need on a published table).
_DATABASE_CATALOG = """
SELECT 'event trigger', e.evtname, e.evtevent || ' runs ' || e.evtfoid::regprocedure::text
       || CASE e.evtenabled WHEN 'D' THEN ' (disabled)' ELSE '' END
FROM pg_event_trigger AS e
UNION ALL
SELECT 'publication', p.pubname,
       CASE WHEN p.puballtables THEN 'FOR ALL TABLES' ELSE
         'FOR TABLE ' || coalesce((SELECT string_agg(t.tablename, ', ' ORDER BY t.tablename)
                                   FROM pg_publication_tables AS t WHERE t.pubname = p.pubname
                                   AND t.schemaname = %(ns)s), '(none of this schema)') END
FROM pg_publication AS p
WHERE p.puballtables OR EXISTS (SELECT 1 FROM pg_publication_tables AS t WHERE t.pubname = p.pubname
                                                                     AND t.schemaname = %(ns)s)"""

_expected: dict[str, dict[str, tuple[str, str]]] = {}  # per URL


class _NoScratch(Exception):
    """The role may not create the scratch schema (no CREATE on the database)."""


# What `eventstore roles` revoked on the database and the schema, granted again: CREATE or
# TEMPORARY on the database, CREATE on the schema, held by the writer or the auditor (%s), a
# role of theirs (a login), or PUBLIC where the tables' owner owns (or acts as) the database's
# or schema's owner
# (roles revokes PUBLIC's then). The schema comparison cannot see these: a scratch schema
# has no database ACL, and PUBLIC's grants are no object's.
_REGRANTS = """
WITH owner AS (SELECT relowner AS o FROM pg_class
                WHERE relname = 'events' AND relnamespace = current_schema()::regnamespace),
acl AS (
  SELECT 'database' AS what, a.grantee, a.privilege_type, d.datdba AS holder
    FROM pg_database AS d, aclexplode(d.datacl) AS a
   WHERE d.datname = current_database() AND a.privilege_type IN ('CREATE', 'TEMPORARY')
  UNION ALL
  SELECT 'schema', a.grantee, a.privilege_type, n.nspowner FROM pg_namespace AS n, aclexplode(n.nspacl) AS a
   WHERE n.oid = current_schema()::regnamespace AND a.privilege_type = 'CREATE')
SELECT DISTINCT acl.what,
       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE 'role ' || quote_literal(pg_get_userbyid(acl.grantee)) END,
       acl.privilege_type
  FROM acl, owner
 WHERE (acl.grantee = 0 AND pg_has_role(owner.o, acl.holder, 'USAGE'))
    OR (acl.grantee <> 0 AND acl.grantee <> acl.holder AND EXISTS (
         SELECT 1 FROM pg_roles AS r WHERE r.rolname = ANY(%s) AND pg_has_role(acl.grantee, r.oid, 'MEMBER')))
 ORDER BY 1, 2, 3"""


def _granted_roles(conn: psycopg.Connection) -> tuple[str, str] | None:
    """The writer and auditor of :func:`roles_sql` as the grants on ``events`` show them
    (the one role other than the owner that may INSERT, the one that may only SELECT), or
    None when the grants are not those of one such pair."""
    rows = conn.execute(
        "SELECT pg_get_userbyid(a.grantee), bool_or(a.privilege_type = 'INSERT') FROM pg_class AS c, "
        "aclexplode(c.relacl) AS a WHERE c.relname = 'events' AND c.relnamespace = current_schema()::regnamespace "
        "AND a.grantee NOT IN (0, c.relowner) GROUP BY 1").fetchall()
    writers, auditors = [r[0] for r in rows if r[1]], [r[0] for r in rows if not r[1]]
    return (writers[0], auditors[0]) if len(writers) == len(auditors) == 1 else None


def _apply_roles_to_scratch(conn, statements: list[str]) -> None:
    """:func:`roles_statements` on the scratch schema, one at a time; a statement this role
    may not run (CREATE ROLE without CREATEROLE, for roles that exist already since the
    database's grants name them) is left out."""
    for statement in statements:
        conn.exec_driver_sql("SAVEPOINT es_roles")
        try:
            conn.connection.driver_connection.execute(statement)  # (as written: no placeholders)
        except pg_errors.InsufficientPrivilege:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT es_roles")
        else:
            conn.exec_driver_sql("RELEASE SAVEPOINT es_roles")


def _expected_catalog(url: str, display: str, roles: tuple[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """The catalog (as :meth:`PostgresBackend._catalog`) of a scratch schema migrated to the
    head revision with the package's Alembic history, and given ``roles`` (writer, auditor)
    by :func:`roles_sql` as ``eventstore roles`` does, in one transaction that is rolled
    back: nothing is left in the database (built once per process, URL and roles)."""
    key = f"{url}\0{roles}"
    if key in _expected:
        return _expected[key]
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from .sqlite_engine import migrations_path  # (where the scripts are; no SQLite in it)

    scratch = f"eventstore_scratch_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    engine = create_engine("postgresql+psycopg://", poolclass=NullPool,
                           creator=lambda: psycopg.connect(conninfo(url), application_name="eventstore verify"))
    try:
        with engine.connect() as conn:
            tx = conn.begin()
            try:
                conn.exec_driver_sql(f'CREATE SCHEMA "{scratch}"')
                conn.exec_driver_sql(f'SET LOCAL search_path TO "{scratch}"')
                cfg = Config()
                cfg.set_main_option("script_location", migrations_path())
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                if roles is not None:
                    _apply_roles_to_scratch(conn, roles_statements(*roles, schema=scratch))
                _expected[key] = PostgresBackend._catalog(conn.connection.driver_connection, scratch)
            finally:
                tx.rollback()
    except Exception as e:
        orig = e if isinstance(e, psycopg.Error) else getattr(e, "orig", None)
        if isinstance(orig, pg_errors.InsufficientPrivilege):
            raise _NoScratch(_first_line(orig)) from None
        if isinstance(orig, psycopg.Error):
            raise DatabaseError(f"{display}: {_first_line(orig)}") from None
        raise
    finally:
        engine.dispose()
    return _expected[key]


# Unfinished imports (the importing table, revision 0220): hidden sessions, and the barrier
# before the first position of each whose owner is not known dead (see Backend.events_after).
_BARRIER = ("coalesce((SELECT min(first_position) FROM importing WHERE owner <> ALL(%s::text[])), "
            "9223372036854775807)")
_STORE_ROWS = (f"SELECT {_EVENT_COLUMNS} FROM events WHERE position > %s AND position < {_BARRIER} "
               "AND session_id NOT IN (SELECT session_id FROM importing) ORDER BY position LIMIT %s")
_LAST_POSITION = f"SELECT least((SELECT coalesce(max(position), 0) FROM events), {_BARRIER} - 1)"
_IMPORTS = "SELECT session_id, first_position, owner, started_at FROM importing ORDER BY first_position"
#: The advisory lock class (first key) of import locks; the second is hashtext(session id).
IMPORT_LOCK_CLASS = 1702063169
# (the lock of the owner's own session: another lock of that class held by a process that
# got the dead owner's pid makes no import look alive)
_OWNER_ALIVE = (f"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = %s "
                f"AND classid = {IMPORT_LOCK_CLASS}::oid AND objsubid = 2 AND granted "
                "AND objid IN (SELECT hashtext(i.session_id)::oid FROM importing AS i WHERE i.owner = %s))")

# The viewer's index (see Backend.session_counts and Backend.state_rows). The payload is
# text: es_field gives a value's JSON text as stored, es_json parses it (both in the baseline).
# What the model saw at a seq: the last compaction up to it cuts (see migration 0270).
_EXPORT_BOUNDED = """
SELECT type, seq, ts, payload FROM (
  SELECT type, seq, ts, payload,
         sum(octet_length(payload)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - octet_length(payload) AS before
  FROM (SELECT type, seq, ts, payload FROM events WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s) AS page
) AS w WHERE before < %s ORDER BY seq"""


_MESSAGES_UPTO = """
SELECT message FROM messages_uncut
WHERE session_id = %s AND seq <= %s
  AND seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = %s AND c.type = 'compaction/boundary'
                        AND c.seq <= %s ORDER BY c.seq DESC LIMIT 1), -1)
ORDER BY seq"""


_COUNTS_SQL = """
SELECT a.session_id, a.n, a.last_position, f.ts, l.ts
FROM (SELECT session_id, count(*) AS n, max(seq) AS last_seq, max(position) AS last_position
      FROM events WHERE position <= %s AND session_id NOT IN (SELECT session_id FROM importing)
      GROUP BY session_id) AS a
JOIN events AS f ON f.session_id = a.session_id AND f.seq = 0
JOIN events AS l ON l.session_id = a.session_id AND l.seq = a.last_seq"""

_STATE_SQL = """
SELECT position, session_id, type,
       CASE WHEN type IN ('assistant/message', 'assistant/part') THEN es_field(payload, 'tool_calls')
            WHEN type = 'tool/result' THEN es_json(payload) ->> 'tool_call_id' END
FROM events
WHERE position > %s AND position <= %s
  AND type IN ('turn/start', 'turn/end', 'user/message', 'assistant/message', 'tool/result', 'assistant/part')
  AND session_id NOT IN (SELECT session_id FROM importing)
ORDER BY position LIMIT %s"""


class PgFollower(Follower):
    """A follower on a connection of its own that LISTENs on :data:`CHANNEL` (polls every
    ``poll_interval`` seconds where LISTEN fails). When the server goes away (a restart), it
    connects again, for up to :data:`RECONNECT_SECONDS`, and goes on where it was once the
    last event it handed out is still stored; a crash that lost it (commits are asynchronous
    with ``durability="may-lose-recent"``) raises :class:`DatabaseError` instead, since new events
    may then take the positions this follower has passed."""

    def __init__(self, backend: PostgresBackend, poll_interval: float):
        self._backend = backend
        self._poll = poll_interval
        self._last: tuple | None = None  # the last EventRow handed out
        self._watch_flush = False  # (see _flush)
        self._open()

    def _open(self) -> None:
        self._conn = _connect(self._backend.url, self._backend.display)
        self._sync_level = None  # unless durability is LOSSY: the level _FLUSH commits with
        if not self._backend.lossy:
            try:
                level = self._conn.execute("SELECT current_setting('synchronous_commit')").fetchone()[0]
            except psycopg.Error as e:  # (a server going away between the connect and this)
                self._conn.close()
                raise self._backend._error(e) from None
            self._sync_level = "on" if level == "off" else level
        try:
            self._conn.execute(f"LISTEN {CHANNEL}")
            self._listening = True
        except psycopg.Error:
            self._listening = False

    def _reconnect(self) -> None:
        """Connect again after the connection was lost. Raises :class:`DatabaseError` when
        the server is not back within :data:`RECONNECT_SECONDS`, or lost the last event
        handed out (a WAL replay keeps a prefix of the commits: when that event is there,
        every event before it is too)."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                self._open()
                break
            except (DatabaseError, psycopg.Error):
                if time.monotonic() > deadline:
                    raise
                time.sleep(RECONNECT_PAUSE)
        if self._last is not None:
            try:
                row = self._conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE position = %s",
                                         (self._last[0],)).fetchone()
            except psycopg.Error as e:
                raise self._backend._error(e) from None
            if row is None or tuple(row) != self._last:
                position, sid, seq = self._last[:3]
                raise DatabaseError(f"{self._backend.display}: the server restarted without the event at position "
                                    f"{position} (session {sid!r} seq {seq}), which was read before: it lost the last "
                                    f"commits (durability {LOSSY!r}); follow again from an earlier "
                                    f"position")

    def _rows(self, sql: str, params: tuple, events: bool = False) -> list:
        for retry in (False, True):
            try:
                rows = [tuple(r) for r in self._conn.execute(sql, params).fetchall()]
                if rows and self._sync_level is not None:
                    # Appends are visible from their (asynchronous) commit on, a flush before
                    # they are durable: hand out only events a crash cannot take back.
                    self._flush()
                if rows and events:
                    self._last = rows[-1]
                return rows
            except psycopg.Error as e:
                if retry or not self._conn.closed:
                    raise self._backend._error(e) from None
            self._reconnect()
        raise AssertionError("unreachable")

    def _flush(self) -> None:
        """Return once the WAL is flushed past every commit this follower has read: with
        :data:`_FLUSH`, or, for a role that may not call ``pg_logical_emit_message`` (a
        superuser's ``eventstore roles`` withholds it from the auditor), by watching the
        server's flushed WAL position pass its insert position of now."""
        if not self._watch_flush:
            try:
                self._conn.execute(_FLUSH, (self._sync_level,))
                return
            except pg_errors.InsufficientPrivilege:
                self._watch_flush = True
        target = self._conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        pause = 0.001
        while not self._conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (target,)).fetchone()[0]:
            time.sleep(pause)  # (the WAL writer flushes within wal_writer_delay, writers sooner)
            pause = min(pause * 2, 0.05)

    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        return self._rows(_STORE_ROWS, (after_position, list(dead_owners), limit), events=True)

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self._rows(_IMPORTS, ())

    def session_events_after(self, session_id: str, after_seq: int,
                             limit: int) -> list[tuple[int, str, int, str, float, str]]:
        return self._rows(f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq > %s "
                          "ORDER BY seq LIMIT %s", (session_id, after_seq, limit), events=True)

    def wait_for_commit(self, timeout: float | None) -> bool:
        # LISTEN ran before the first read: a NOTIFY of a commit after a read began is either
        # in the connection's backlog or still to come, and notifies() returns the backlog first.
        if not self._listening:
            if timeout is not None and timeout < self._poll:
                time.sleep(timeout)
                return False
            time.sleep(self._poll)
            return True
        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error as e:
            if not self._conn.closed:
                raise self._backend._error(e) from None
            self._reconnect()  # (commits made while it was away: the caller reads them now)
            return True
        return False

    def close(self) -> None:
        if not self._conn.closed:
            self._conn.close()


class _PgImportLock(ImportLock):
    """An import lock: a session advisory lock held by a connection of its own; the owner
    names the server process holding it (``pg:PID#TAG``), which pg_locks shows while it
    lives."""

    def __init__(self, conn: psycopg.Connection):
        self._conn = conn
        self.owner = f"pg:{conn.info.backend_pid}#{uuid.uuid4().hex[:12]}"

    def release(self, unlink: bool) -> None:
        if not self._conn.closed:
            self._conn.close()  # ends the session: the lock goes with it


class _PgImport(ImportTransaction):
    """An import's work inside its transaction (see :meth:`PostgresBackend.import_transaction`)."""

    def __init__(self, conn: psycopg.Connection, session_id: str):
        self._conn = conn
        self._sid = session_id

    def session_meta(self) -> str | None:
        row = self._conn.execute("SELECT meta FROM sessions WHERE id = %s", (self._sid,)).fetchone()
        return row[0] if row else None

    def importing(self) -> tuple[int, str] | None:
        row = self._conn.execute("SELECT first_position, owner FROM importing WHERE session_id = %s",
                                 (self._sid,)).fetchone()
        return tuple(row) if row else None

    def begin_import(self, first_position: int, owner: str, started_at: float) -> None:
        self._conn.execute("INSERT INTO importing (session_id, first_position, owner, started_at) "
                           "VALUES (%s, %s, %s, %s)", (self._sid, first_position, owner, started_at))

    def take_over(self, owner: str) -> None:
        self._conn.execute("UPDATE importing SET owner = %s WHERE session_id = %s", (owner, self._sid))

    def end_import(self) -> None:
        self._conn.execute("DELETE FROM importing WHERE session_id = %s", (self._sid,))

    def create_session(self, created_at: float, meta_json: str) -> Refusal | None:
        try:
            with self._conn.transaction():  # a savepoint: a refusal leaves the transaction usable
                self._conn.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (%s, %s, %s, %s)",
                                   (self._sid, created_at, meta_json,
                                    session_hash(self._sid, created_at, meta_json)))
        except psycopg.Error as e:
            return _refusal(e)
        return None

    def next_seq(self) -> int:
        return self._conn.execute(_NEXT_SEQ, (self._sid,)).fetchone()[0]

    def next_position(self) -> int:
        return self._conn.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()[0]

    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        return [tuple(r) for r in self._conn.execute(
            "SELECT seq, type, ts, payload, hash FROM events WHERE session_id = %s AND seq BETWEEN %s AND %s "
            "ORDER BY seq", (self._sid, first_seq, last_seq)).fetchall()]

    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        if not rows:
            return None
        try:
            with self._conn.transaction():
                if self._copy(rows, position0) != len(rows):  # a BEFORE INSERT trigger returning NULL drops
                    raise _Dropped                            # rows silently: roll back, find the first below
            return None
        except (psycopg.Error, _Dropped):
            pass
        # COPY is all or nothing: find the first row the database refuses or drops, one
        # INSERT at a time, and keep the rows before it.
        for i, (seq, type_, ts, payload, hash_) in enumerate(rows):
            try:
                with self._conn.transaction():
                    cur = self._conn.execute(
                        "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        (position0 + seq, self._sid, seq, type_, ts, _text(payload), _text(hash_)))
                if cur.rowcount != 1:  # a BEFORE INSERT trigger returning NULL dropped it
                    return i, Refusal(None, "the database reported the insert done but stored nothing (a trigger "
                                            "ignores it: run eventstore verify); nothing was imported")
            except psycopg.Error as e:
                return i, _refusal(e)
            except (UnicodeError, ValueError) as e:
                return i, Refusal(None, f"text PostgreSQL cannot hold: {e}")
        return None

    def _copy(self, rows: list[tuple], position0: int) -> int:
        """COPY ``rows`` in; the number of rows the server stored."""
        sid = _copy_field(self._sid.encode())
        cur = self._conn.cursor()
        with cur.copy(
                "COPY events (position, session_id, seq, type, ts, payload, hash) FROM STDIN") as copy:
            out: list[bytes] = []
            size = 0
            for seq, type_, ts, payload, hash_ in rows:
                line = b"%d\t%s\t%d\t%s\t%s\t%s\t%s\n" % (
                    position0 + seq, sid, seq, _copy_field(type_.encode()), repr(float(ts)).encode(),
                    _copy_field(payload if isinstance(payload, bytes) else payload.encode()),
                    hash_ if isinstance(hash_, bytes) else hash_.encode())
                out.append(line)
                size += len(line)
                if size > 1 << 20:
                    copy.write(b"".join(out))
                    out.clear()
                    size = 0
            if out:
                copy.write(b"".join(out))
        return cur.rowcount

    def event_id_seq(self, event_id: str) -> int | None:
        row = self._conn.execute("SELECT seq FROM events WHERE session_id = %s AND event_id = %s",
                                 (self._sid, event_id)).fetchone()
        return row[0] if row else None


class _Dropped(Exception):
    """COPY stored fewer rows than it was given (rolled back)."""


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _copy_field(data: bytes) -> bytes:
    """``data`` escaped for COPY's text format (backslash, tab, newline, carriage return)."""
    if b"\\" in data:
        data = data.replace(b"\\", b"\\\\")
    if b"\t" in data or b"\n" in data or b"\r" in data:
        data = data.replace(b"\t", b"\\t").replace(b"\n", b"\\n").replace(b"\r", b"\\r")
    return data


_PLAIN = (str, int, float, bytes, bool, type(None))
_SQL_COMMENTS = re.compile(r"--[^\n]*|/\*.*?(\*/|$)", re.S)
#: Rows fetched per round trip of ``sql``'s server-side cursor (its client memory is one batch).
SQL_BATCH = 200
# The role ``sql`` runs as, when the login role may do more: the auditor of roles_sql (a role
# other than the owner that may SELECT events but not INSERT), else PostgreSQL's own
# pg_read_all_data (for a superuser). PostgreSQL then refuses every write, COPY to or from
# the server, and server programs: no statement is judged by its text.
_READ_ROLE = """
SELECT rolname FROM (
SELECT r.rolname FROM pg_class AS c, aclexplode(c.relacl) AS a JOIN pg_roles AS r ON r.oid = a.grantee
WHERE c.relname = 'events' AND c.relnamespace = current_schema()::regnamespace AND a.grantee <> c.relowner
GROUP BY r.rolname, r.rolsuper
HAVING NOT r.rolsuper AND bool_and(a.privilege_type = 'SELECT') AND r.rolname <> session_user
   AND pg_has_role(session_user, r.rolname, 'MEMBER')
UNION ALL
SELECT 'pg_read_all_data' FROM pg_roles WHERE rolname = session_user AND rolsuper
   AND to_regrole('pg_read_all_data') IS NOT NULL) AS r
ORDER BY rolname = 'pg_read_all_data', rolname <> 'eventstore_auditor', rolname LIMIT 1"""


class _NumberLoader(Loader):
    """numeric as an int when it is whole, else a float (NaN as float NaN)."""

    def load(self, data) -> int | float:
        text = bytes(data).decode("ascii")
        try:
            return int(text)
        except ValueError:
            return float(text)


class PgQueryConnection(QueryConnection):
    """``eventstore sql`` on PostgreSQL: every query runs alone (one statement) in a READ
    ONLY transaction as a role that may only read (the auditor of ``eventstore roles`` when
    the login role is a member of it, ``pg_read_all_data`` for a superuser; see
    ``_READ_ROLE``), so that PostgreSQL itself refuses whatever writes or acts outside the
    tables; its rows stream through a server-side cursor (:data:`SQL_BATCH` rows at a
    time); the time limit (:data:`QUERY_TIMEOUT`) holds for the whole query, fetching
    included; it is rolled back afterwards, so that not even a ``SET`` outlives it.

    A login role with more powers can undo ``SET ROLE`` inside its own query
    (``set_config('role', ...)``): give ``sql`` the auditor's own login for least privilege."""

    def __init__(self, url: str, busy_timeout: float, timeout: float | None = QUERY_TIMEOUT,
                 max_memory: int | None = None):
        self._display = _display(url)
        self.timeout = timeout or None
        self._open_rows: Generator[tuple, None, None] | None = None
        self._conn = _connect(url, self._display, autocommit=True)
        self._conn.execute(f"SET lock_timeout = {int(busy_timeout * 1000)}")
        if max_memory is not None:  # work_mem bounds each sort and hash (they spill to disk past it)
            current = self._conn.execute("SELECT setting::bigint * 1024 FROM pg_settings "
                                         "WHERE name = 'work_mem'").fetchone()[0]
            if max_memory < current:
                self._conn.execute(f"SET work_mem = '{max(64, int(max_memory) // 1024)}kB'")
        try:
            role = self._conn.execute(_READ_ROLE).fetchone()
        except psycopg.Error:  # (no events table here: the login role as it is)
            role = None
        if role is not None:
            self._conn.execute(pg_sql.SQL("SET ROLE {}").format(pg_sql.Identifier(role[0])))
        self._user = repr(self._conn.info.user) if role is None else f"{role[0]!r}, as which sql runs,"
        # Values as the CLI writes them: json/jsonb as their text, numeric as int or float.
        for name in ("json", "jsonb"):
            self._conn.adapters.register_loader(name, TextLoader)
        self._conn.adapters.register_loader("numeric", _NumberLoader)

    def query(self, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
        conn = self._conn
        if self._open_rows is not None:  # the rows of the previous query, not read to the end: ended
            self._open_rows.close()
            self._open_rows = None
        params = tuple(params)
        text = _SQL_COMMENTS.sub("", sql).strip(" \t\r\n\f;")
        if not text:
            raise QueryError("the query is empty" if not sql.strip()
                             else "the query holds no statement (only comments or ';')")
        deadline = time.monotonic() + self.timeout if self.timeout else None
        # the time limit for the whole command: statement_timeout stops the server's work,
        # a cancel at the deadline stops a fetch in flight, and no fetch starts after it
        timer = threading.Timer(self.timeout, self._cancel) if self.timeout else None
        t0 = time.monotonic()
        try:
            conn.execute("BEGIN READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {int((self.timeout or 0) * 1000)}")
            if timer is not None:
                timer.daemon = True
                timer.start()
            conn.execute("SAVEPOINT eventstore_sql")
            cur: psycopg.Cursor | psycopg.ServerCursor = conn.cursor(name="eventstore_sql")
            try:
                cur.execute(sql, params or None)
            except (pg_errors.SyntaxError, pg_errors.FeatureNotSupported) as e:
                if e.diag.source_function == "exec_parse_message":
                    raise
                # not a query a cursor holds (SHOW, EXPLAIN, a data-modifying WITH...): run it
                # as it is, under the same transaction and role (its result is buffered)
                conn.execute("ROLLBACK TO SAVEPOINT eventstore_sql")
                cur = conn.cursor()
                cur.execute(sql, params or None, prepare=True)
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS:
                raise QueryError("refused: COMMIT, ROLLBACK and the like (eventstore sql runs each query in "
                                 "a read-only transaction of its own)")
            columns = [d.name for d in cur.description or ()]
        except psycopg.Error as e:
            self._rollback(timer)
            raise QueryError(*_query_error(e, self.timeout, self._user, time.monotonic() - t0)) from None
        except KeyboardInterrupt:
            self._rollback(timer)
            raise QueryError("interrupted (Ctrl-C)") from None
        except BaseException:
            self._rollback(timer)
            raise

        def rows() -> Iterator[tuple]:
            try:
                if cur.description is not None:
                    while True:
                        if deadline is not None and time.monotonic() >= deadline:
                            raise QueryError(f"the query was stopped after {self.timeout:g} s (its time limit, "
                                             f"fetching the rows included)", "time")
                        batch = cur.fetchmany(SQL_BATCH)
                        if not batch:
                            break
                        for row in batch:  # dates, intervals, uuids, arrays...: as PostgreSQL writes them
                            yield row if all(isinstance(v, _PLAIN) for v in row) else tuple(
                                v if isinstance(v, _PLAIN) else str(v) for v in row)
            except psycopg.Error as e:
                raise QueryError(*_query_error(e, self.timeout, self._user, time.monotonic() - t0)) from None
            finally:
                self._rollback(timer)

        self._open_rows = rows()
        return columns, self._open_rows

    def _cancel(self) -> None:
        try:
            self._conn.cancel()
        except psycopg.Error:
            pass

    def _rollback(self, timer: threading.Timer | None = None) -> None:
        if timer is not None:
            timer.cancel()
        try:
            self._conn.execute("ROLLBACK")
        except psycopg.Error:
            pass

    def close(self) -> None:
        if self._open_rows is not None:
            self._open_rows.close()
        self._conn.close()


def _query_error(e: psycopg.Error, timeout: float | None = QUERY_TIMEOUT,
                 user: str | None = None, elapsed: float | None = None) -> tuple[str, str | None]:
    """The message of :class:`QueryError` for ``e`` (a query of role ``user`` that ran
    ``elapsed`` seconds), and which limit stopped the query."""
    if isinstance(e, pg_errors.ReadOnlySqlTransaction):
        # (the server names the statement's own command: SELECT for a data-modifying WITH)
        return f"refused: the query writes, and eventstore sql only reads ({e.diag.message_primary})", None
    if isinstance(e, pg_errors.InsufficientPrivilege):
        return (f"refused: {e.diag.message_primary or _first_line(e)} (role {user or 'this role'} may not; "
                f"eventstore_auditor, which `eventstore roles` creates, may read every table)"), None
    if isinstance(e, pg_errors.ActiveSqlTransaction):
        return f"refused: {e.diag.message_primary or _first_line(e)} (eventstore sql only reads)", None
    if isinstance(e, pg_errors.QueryCanceled):
        # statement_timeout and a cancel request share the SQLSTATE: the time says which
        if timeout and (elapsed is None or elapsed >= timeout * 0.95):
            return f"the query was stopped after {timeout:g} s (its time limit)", "time"
        when = f" after {elapsed:.1f} s" if elapsed is not None else ""
        before = f", before its time limit of {timeout:g} s" if timeout else ""
        return (f"the query was cancelled{when}{before} by a cancel request (pg_cancel_backend, an "
                f"administrator or the server): {e.diag.message_primary or _first_line(e)}"), None
    if isinstance(e, pg_errors.OutOfMemory | pg_errors.DiskFull):
        return f"the query was stopped: {_first_line(e)} (its memory limit)", "memory"
    if isinstance(e, pg_errors.SyntaxError) and e.diag.source_function == "exec_parse_message":
        # The server's Parse message refuses more than one statement (the parser's own
        # syntax errors come from scanner_yyerror / base_yyerror): as SQLite says it.
        return MULTIPLE_STATEMENTS, None
    return e.diag.message_primary or _first_line(e), None


def head_revision() -> str:
    """The Alembic revision this package's schema is at (the head of migrations/versions)."""
    from ..schema import SCHEMA_REVISION

    return SCHEMA_REVISION


# --- least privilege --------------------------------------------------------------------------

#: Functions of pg_catalog with effects beyond the tables that every role may call (PUBLIC
#: holds EXECUTE): writing WAL (``pg_logical_emit_message``), taking locks any other role's
#: work may wait for (advisory locks), signalling backends, large objects. Only their owner,
#: a superuser, can revoke them from PUBLIC (see :func:`roles_sql`).
SIDE_EFFECT_FUNCTIONS = ("proname LIKE 'pg\\_%advisory\\_%' OR proname LIKE 'lo\\_%' "
                         "OR proname IN ('pg_logical_emit_message', 'pg_terminate_backend', 'pg_cancel_backend', "
                         "'pg_notify', 'loread', 'lowrite')")
#: What the store itself calls of those (its owner and writer keep them): the durable flush
#: (docs/concurrency.md, "Durability"), the import lock, the migration lock and the insert
#: trigger's wake-up of followers.
STORE_FUNCTIONS = ("pg_logical_emit_message(boolean, text, text)", "pg_try_advisory_lock(integer, integer)",
                   "pg_advisory_xact_lock(bigint)", "pg_notify(text, text)")


def roles_statements(writer: str = "eventstore_writer", auditor: str = "eventstore_auditor",
                     database: str | None = None, schema: str = "public") -> list[str]:
    """The SQL statements that create (or update) the two roles of a least-privilege set-up,
    to run as the tables' owner (with CREATEROLE) or a superuser:

    * ``writer`` may INSERT and SELECT the tables and SELECT the views: enough for
      ``eventstore`` (appends, import, export, follow); it does not own anything, so it
      cannot ALTER, DROP, TRUNCATE or disable triggers, and the triggers refuse its UPDATE
      and DELETE. It may also take the position lock (UPDATE on the empty
      ``events_position_lock``, revision 0250), INSERT into the derived search index
      ``events_search`` and UPDATE ``events_search_state`` (its searches catch the index up;
      the guards take each row from the log), and write ``importing`` as an import does
      (the guards let only the import lock's holder change or end a row);
    * ``auditor`` may only SELECT: enough for ``eventstore sql``, ``verify`` and ``search``.

    Neither keeps CREATE on the schema or the database, nor TEMPORARY on the database:
    PUBLIC's TEMPORARY is revoked when the role running this owns the database (or is a
    superuser), which every role of the database then loses but the owner. Run by a
    superuser, it also revokes from PUBLIC the :data:`SIDE_EFFECT_FUNCTIONS` of this database
    and grants back to the tables' owner and the writer the :data:`STORE_FUNCTIONS`;
    otherwise it says so in a NOTICE. README.md ("Least privilege") lists every grant.

    Both are NOLOGIN groups: grant them to login roles (``GRANT eventstore_writer TO
    agent1``), or give them a password and LOGIN yourself.
    """
    ident = pg_sql.Identifier
    w, a, s = (ident(writer).as_string(None), ident(auditor).as_string(None), ident(schema).as_string(None))
    db = ident(database).as_string(None) if database else None
    q = next(t for t in (f"$es{n}$" if n else "$$" for n in itertools.count()) if t not in w + a)  # (a body quote)
    lines = [
        f"DO {q} BEGIN CREATE ROLE {w} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END {q};",
        f"DO {q} BEGIN CREATE ROLE {a} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END {q};",
    ]
    if db:
        lines += [
            f"GRANT CONNECT ON DATABASE {db} TO {w}, {a};",
            f"REVOKE CREATE, TEMPORARY ON DATABASE {db} FROM {w}, {a};",
            # PUBLIC's TEMPORARY (every role's, by default): only the database's owner may revoke it
            f"DO {q} BEGIN IF pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), "
            f"'USAGE') THEN REVOKE TEMPORARY ON DATABASE {db} FROM PUBLIC; ELSE RAISE NOTICE 'TEMPORARY on "
            f"database % is left to PUBLIC: only its owner or a superuser may revoke it', current_database(); "
            f"END IF; END {q};",
        ]
    lit = pg_sql.Literal(schema).as_string(None)
    owner = f"(SELECT quote_ident(tableowner) FROM pg_tables WHERE schemaname = {lit} AND tablename = 'events')"
    lines += [
        f"GRANT USAGE ON SCHEMA {s} TO {w}, {a};",
        f"REVOKE CREATE ON SCHEMA {s} FROM {w}, {a};",
        f"DO {q} BEGIN IF has_schema_privilege('public', {pg_sql.Literal(schema).as_string(None)}, 'CREATE') AND "
        f"pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = {pg_sql.Literal(schema).as_string(None)}), "
        f"'USAGE') THEN REVOKE CREATE ON SCHEMA {s} FROM PUBLIC; END IF; END {q};",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {w}, {a};",
        f"GRANT SELECT, INSERT ON {s}.events, {s}.sessions TO {w};",
        f"GRANT UPDATE ON {s}.events_position_lock TO {w};",
        # the search index is derived (revision 0200): the writer's searches catch it up
        f"GRANT SELECT, INSERT ON {s}.events_search TO {w};",
        f"GRANT SELECT, UPDATE ON {s}.events_search_state TO {w};",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.importing TO {w};",
        f"GRANT SELECT ON {s}.alembic_version, {s}.messages, {s}.messages_uncut, {s}.tool_calls, {s}.turns, "
        f"{s}.session_summary, {s}.usage, {s}.events_search_text TO {w};",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {a};",
        # Functions with effects beyond the tables: PUBLIC's EXECUTE, which only a superuser may
        # revoke (in this database: pg_proc is per database).
        f"""DO {q}
DECLARE f regprocedure;
BEGIN
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RAISE NOTICE USING MESSAGE = 'PUBLIC keeps EXECUTE on pg_logical_emit_message, the advisory lock '
                 || 'functions, pg_terminate_backend, pg_cancel_backend, pg_notify and lo_*: only a superuser '
                 || 'may revoke it';
    RETURN;
  END IF;
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace
                                                   AND ({SIDE_EFFECT_FUNCTIONS}) LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc AS p JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass
             AND d.objid = p.oid AND d.deptype = 'e' JOIN pg_extension AS x ON x.oid = d.refobjid
            WHERE x.extname = 'dblink' LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
  EXECUTE format('GRANT EXECUTE ON FUNCTION {", ".join(STORE_FUNCTIONS)} TO %s, '
                 || '{w.replace("%", "%%").replace("'", "''")}', {owner});
END {q};""",
    ]
    return lines


def roles_sql(writer: str = "eventstore_writer", auditor: str = "eventstore_auditor",
              database: str | None = None, schema: str = "public") -> str:
    """:func:`roles_statements` as one plain text (a statement may span lines), as
    ``eventstore roles`` prints and runs it."""
    return "\n".join(roles_statements(writer, auditor, database, schema)) + "\n"


ROLES_SQL = roles_sql()


def check_role_names(backend: PostgresBackend, writer: str, auditor: str) -> None:
    """Refuse role names that :func:`roles_sql` would harm or could not limit: the same name
    for both, a name that starts or ends with a space (a look-alike), a role that owns the
    tables or runs this (its grants would be revoked), a superuser or a member of the
    tables' owner (no grant limits it). Raises :class:`DatabaseError`."""
    if writer == auditor:
        raise DatabaseError(f"the writer and auditor roles must differ (both are {writer!r})")
    for name in (writer, auditor):
        if not name.strip() or name != name.strip():
            raise DatabaseError(f"role name {name!r}: no role name starts or ends with a space here (a look-alike "
                                f"of another role)")
    with backend._rlock:
        conn = backend._conn("r")
        try:
            owner, me = conn.execute("SELECT tableowner, current_user FROM pg_tables WHERE tablename = 'events' "
                                     "AND schemaname = current_schema()").fetchone()
            # existing roles that are superusers, or members of the tables' owner
            powers = dict(conn.execute(
                "SELECT rolname, rolsuper FROM pg_roles WHERE rolname IN (%s, %s) "
                "AND (rolsuper OR pg_has_role(oid, (SELECT oid FROM pg_roles WHERE rolname = %s), 'MEMBER'))",
                (writer, auditor, owner)).fetchall())
            # an auditor that is (through any chain) a member of the writer keeps its INSERT
            writes = conn.execute(
                "SELECT 1 FROM pg_roles AS a JOIN pg_roles AS w ON w.rolname = %s WHERE a.rolname = %s "
                "AND pg_has_role(a.oid, w.oid, 'MEMBER')", (writer, auditor)).fetchone() is not None
        except psycopg.Error as e:
            raise backend._error(e) from None
    if writes:
        raise DatabaseError(f"role {auditor!r} is a member of the writer role {writer!r}: as auditor it would keep the "
                            f"writer's INSERT; name a role that is not one of the writer's (by default "
                            f"eventstore_auditor)")
    for name in (writer, auditor):
        if name in (owner, me):
            why = (f"{'owns the tables' if name == owner else 'is the role running this'}: the set-up would revoke "
                   f"its privileges")
        elif name in powers:
            why = ("is a superuser, whom no privilege limits" if powers[name] else
                   "is a member of the tables' owner: it keeps the owner's powers (ALTER, DROP, switching triggers "
                   "off) whatever is granted")
        else:
            continue
        raise DatabaseError(f"role {name!r} {why}; name a new role for --writer and --auditor (by default "
                            f"eventstore_writer and eventstore_auditor)")


def apply_roles(backend: PostgresBackend, text: str) -> list[str]:
    """Run :func:`roles_sql`'s ``text`` on ``backend``'s database, in one transaction, and
    return the notices it raised: what it had to leave to PUBLIC (only a superuser or the
    database's owner may revoke it). Raises :class:`DatabaseError` (not allowed to create
    roles or grant: run it as the database's owner with CREATEROLE, or as a superuser)."""
    notices: list[str] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "NOTICE" and diag.message_primary:
            notices.append(diag.message_primary)

    with backend._wlock:
        conn = backend._conn("w")
        conn.add_notice_handler(notice)
        try:
            with conn.transaction():
                conn.execute(text)
        except pg_errors.InsufficientPrivilege as e:
            raise DatabaseError(f"{backend.display}: cannot set up the roles: {_first_line(e)}: run it once as a "
                                "role with CREATEROLE that owns the tables, or as a superuser") from None
        except psycopg.Error as e:
            raise DatabaseError(f"{backend.display}: cannot set up the roles: {_first_line(e)}") from None
        finally:
            conn.remove_notice_handler(notice)
    return notices


# --- search -----------------------------------------------------------------------------------

#: Positions indexed per transaction of :meth:`PostgresBackend.search_catch_up`.
CATCH_UP_BATCH = 10_000
# What separates words in the indexed text (es_search_vector): whitespace and ASCII
# punctuation, "_" included.
_SEARCH_SPLIT = re.compile(r"[\s!-/:-@\[-`{-~]+")


def _tsquery(query: str) -> str:
    """A user's words as a ``to_tsquery`` text: every word must occur; a word ending in
    ``*`` matches as a prefix (``:*``); punctuation separates words as in the index, and no
    character of the query is taken as an operator. Raises :class:`QueryError` for a query
    with no word."""
    from .search_terms import query_words

    parts = []
    for word, prefix in query_words(query):
        tokens = [t for t in _SEARCH_SPLIT.split(word) if t]
        for k, t in enumerate(tokens):
            parts.append("'" + t.replace("\\", "\\\\").replace("'", "''") + "'"
                         + (":*" if prefix and k == len(tokens) - 1 else ""))
    if not parts:
        raise QueryError("the search query has no word to look for")
    return " & ".join(parts)


def _search_filters(alias: str, session_id: str | None, type_: str | None) -> tuple[str, dict]:
    where, params = "", {}
    if session_id is not None:
        where += f" AND {alias}.session_id = %(session)s"
        params["session"] = session_id
    if type_ is not None:
        where += f" AND {alias}.type = %(type)s"
        params["type"] = type_
    return where, params
