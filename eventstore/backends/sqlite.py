"""The SQLite backend: one held ``sqlite3`` connection, the write queue, the checkpointer.

The hot paths (append, reads, import, export) run plain SQL on one held connection, inside
transactions that start with ``BEGIN IMMEDIATE``. Writers of all processes wait for each
other on a lock file beside the database (:mod:`.writelock`) instead of in SQLite's
sleep-and-retry busy handler, and the WAL is checkpointed on a thread of the store's own
(:mod:`.sqlite_checkpoint`). A store remembers the head of the sessions it appended to,
so a process that appends alone skips reading the head (:meth:`SQLiteBackend._cached_head`).
After ``os.fork()`` the child leaves the parent's connection alone and opens its own.
Refusals are recognised by SQLite's extended error name and the trigger's error code (the
RAISE message starts with ``ESnnn:``, see :mod:`.base`).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import sqlite3
import threading
import time
import weakref
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator
from operator import truediv
from typing import Any

import orjson

from eventstore.log.chain import chain_hash, chain_rows, genesis_hash, session_hash
from eventstore.log.codec import _js_float, dumps, encodable, event_line, meta_line

from ..errors import (
    AppendOnlyViolation,
    DatabaseError,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from . import base
from . import importlock as _importlock
from . import sqlite_engine as _engine
from .base import Backend, Follower, ImportLock, ImportTransaction, Refusal
from .capabilities import AuditReads, LogViews, SearchIndex, SessionIndex, SqlSandbox
from .sqlite_checkpoint import Checkpointer, checkpoint
from .sqlite_walcheck import check_wal
from .writelock import open_write_lock

__all__ = ["SQLiteBackend"]

# Appends read the session's head (next seq, next position, last hash) and insert with
# plain VALUES, inside one BEGIN IMMEDIATE transaction; the guard trigger re-checks seq and
# position. (An INSERT ... SELECT ... RETURNING that computed all three in SQL cost a third
# more instructions: temporary b-trees and a Python SQL-function call per append.)
_INSERT = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"
_HEAD = """SELECT coalesce(max(seq) + 1, 0), (SELECT coalesce(max(position), 0) + 1 FROM events),
                  (SELECT hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)
           FROM events WHERE session_id = ?1"""
_BY_EVENT_ID = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND event_id = ?"
_NEXT_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?"
# Unfinished imports (the importing table, revision 0220): their sessions are hidden, and
# readers of positions stop before the first position of each whose owner is not known dead
# (?2: a JSON array of dead owners). One statement: barrier and rows in one snapshot.
_HIDDEN = "session_id NOT IN (SELECT session_id FROM importing)"
_BARRIER = ("coalesce((SELECT min(first_position) FROM importing WHERE owner NOT IN "
            "(SELECT value FROM json_each(?2))), 9223372036854775807)")
_STORE_ROWS = ("SELECT position, session_id, seq, type, ts, payload FROM events "
               f"WHERE position > ?1 AND position < {_BARRIER} AND {_HIDDEN} ORDER BY position LIMIT ?3")
_LAST_POSITION = f"SELECT min((SELECT coalesce(max(position), 0) FROM events), {_BARRIER} - 1)"
_IMPORTS = "SELECT session_id, first_position, owner, started_at FROM importing ORDER BY first_position"
_SESSION_ROWS = ("SELECT position, session_id, seq, type, ts, payload FROM events "
                 "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")

#: The largest integer SQLite binds (64-bit): a cursor past it reads as at it.
MAX_CURSOR = 2**63 - 1

# append inserts up to 100 rows per statement, in groups of the sizes _GROUPS: a batch's
# hundreds, tens and units (123 events: 100, 20 and 3 rows), so a batch of a round size
# (6, 10, 50, 100) is one statement, one under 200 at most three, and 19
# statements of each kind are prepared whatever the batch sizes (well inside the
# connection's statement cache). SQLite's per-statement work (a statement journal for the
# guard trigger's ABORT, the program's setup) is then paid once per group instead of once
# per event. Position and seq are the first row's plus a constant; each row binds its
# type, ts, payload and hash. A batch of one type and one ts
# (append_many's usual: ts defaults to one time.time()) binds those two once per statement
# (_INSERT_SHARED), each row its payload and hash: half the parameters to convert and copy.
_GROUPS = (*range(1, 10), *range(10, 100, 10), 100)
_INSERT_ROWS = {
    n: "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
       + ",".join(f"(?1 + {k}, ?2, ?3 + {k}, ?{4 * k + 4}, ?{4 * k + 5}, ?{4 * k + 6}, ?{4 * k + 7})"
                  for k in range(n))
    for n in _GROUPS
}
_INSERT_SHARED = {
    n: "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
       + ",".join(f"(?1 + {k}, ?2, ?3 + {k}, ?4, ?5, ?{2 * k + 6}, ?{2 * k + 7})" for k in range(n))
    for n in _GROUPS
}


def _owners(dead_owners: Collection[str]) -> str:
    """``dead_owners`` as the JSON array text the barrier's ``json_each`` reads."""
    return orjson.dumps(list(dead_owners)).decode() if dead_owners else "[]"


def error_code(e: sqlite3.Error) -> str | None:
    """The eventstore error code (``ES001``...) of a refusal by one of the guard triggers,
    or None: the error is SQLite's ``SQLITE_CONSTRAINT_TRIGGER`` and its message starts with
    the code and a colon (the RAISE messages of the migrations)."""
    if getattr(e, "sqlite_errorname", None) == "SQLITE_CONSTRAINT_TRIGGER":
        message = e.args[0] if e.args else ""
        if message[:2] == "ES" and message[5:6] == ":":
            return message[:5]
    return None


class _StaleHead(Exception):
    """An append's first statement was refused: maybe because the cached head was stale
    (see :meth:`SQLiteBackend._at_head`)."""

    def __init__(self, error: sqlite3.IntegrityError):
        self.error = error


def _insert_rows(cur: sqlite3.Cursor, sid: str, seq0: int, pos0: int, rows: list,
                 shared: tuple[str, float] | None = None) -> None:
    """Insert ``rows`` at seqs ``seq0...`` and positions ``pos0...``: the flat ``[type, ts,
    payload_json, hash, ...]`` of :func:`eventstore.log.chain.chain_rows`, or with ``shared``
    (the ``(type, ts)`` of every row) its ``pairs`` form ``[payload_json, hash, ...]``.
    Raises :class:`_StaleHead` when the first statement is refused (nothing of the batch is
    stored then), sqlite3 errors for any later one."""
    width, statements, head = (4, _INSERT_ROWS, ()) if shared is None else (2, _INSERT_SHARED, shared)
    done = 0
    total = len(rows) // width
    while done < total:
        n = _GROUPS[bisect_right(_GROUPS, total - done) - 1]
        params = [pos0 + done, sid, seq0 + done, *head]
        params += rows[width * done:width * (done + n)]
        try:
            cur.execute(statements[n], params)
        except sqlite3.IntegrityError as e:
            if done == 0:
                raise _StaleHead(e) from None
            raise
        if cur.rowcount != n:  # a trigger's RAISE(IGNORE) drops rows without an error
            raise base.not_stored(sid, seq0 + done, n)
        done += n


def _checkpoint_connection(database: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection for a store's checkpointer (opened on its thread)."""
    return _engine.connect(database, busy_timeout)


# Backends alive in this process, and connections inherited from a parent process that
# must stay open (unused) in a forked child: see SQLiteBackend._reopen_after_fork.
_live: weakref.WeakSet[SQLiteBackend] = weakref.WeakSet()
_inherited: list = []

# Database files that a thread of the parent was writing to (in a transaction) when this
# process was forked from it. SQLite keeps its file locks per process, in memory shared by
# all connections to a file; the child inherits that memory with the parent's write lock
# counted as held, though the child holds no lock: no connection of the child can ever
# write to the file (it would wait for its busy timeout, every time). Writes to them are
# refused at once instead.
_forked_mid_write: set[str] = set()


def _forked_mid_write_error(path: str) -> DatabaseError:
    return DatabaseError(
        f"{path}: this process was forked while another thread of its parent was writing to this "
        "database; SQLite's locks in this process still count that write, so no connection of this "
        "process can write to the file. Fork before starting threads that write, or write from a "
        "process started without fork (multiprocessing's 'spawn' or 'forkserver')")


def _after_fork_in_child() -> None:
    for backend in list(_live):
        if backend._conn is not None and backend._file is not None:
            try:
                if backend._conn.in_transaction:  # only reads the inherited handle's state
                    _forked_mid_write.add(backend._file)
            except Exception:  # pragma: no cover - a closed handle
                pass
        backend._lock = threading.RLock()  # another thread may have held it at the fork
        if backend._conn is not None:
            backend._forked = True
        if backend._wlock is not None:
            backend._wlock.forget()
            backend._wlock = None
        if backend._checkpointer is not None:
            backend._checkpointer.forget()
            backend._checkpointer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class SQLiteBackend(Backend, SearchIndex, AuditReads, SessionIndex, LogViews, SqlSandbox):
    """An SQLite database file (or ``:memory:``), through one held connection.

    Shared by threads (calls are serialized by a lock); several processes may open the same
    file at once (see docs/concurrency.md).
    """

    name = "sqlite"

    def __init__(self, path: str | None, conn: sqlite3.Connection, busy_timeout: float, durability: str,
                 write_queue: bool, readonly: bool):
        self._file = path
        self.display = path or ":memory:"
        self.busy_timeout = busy_timeout
        self.durability = durability
        self.readonly = readonly
        self._lock = threading.RLock()
        self._forked = False
        self._conn: sqlite3.Connection | None = None
        self._marks: _engine.WalMarks | None = None  # moves the mark on at each WAL generation
        self._wlock = None
        self._checkpointer: Checkpointer | None = None
        # The head of each session this store appended to: {session id: (next seq, last
        # hash)}, and the next position; see _cached_head.
        self._heads: dict[str, tuple[int, str]] = {}
        self._next_position: int | None = None
        self._stale_backoff = 0  # appends that read the head after the cache was found stale
        self._stale_skip = 0
        self._memory_imports: dict[str, str] = {}  # in-memory database: session -> owner of its import lock
        self._write_queue = write_queue and not readonly and path is not None
        self._connect(conn)
        _live.add(self)

    # --- open, connections, close ----------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, busy_timeout: float = _engine.DEFAULT_BUSY_TIMEOUT, durability: str = "normal",
             write_queue: bool = True, readonly: bool = False) -> SQLiteBackend:
        if durability not in _engine.DURABILITY:
            raise DatabaseError(f"durability must be one of {sorted(_engine.DURABILITY)}, not {durability!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or not 0 <= busy_timeout < 1e6:
            raise DatabaseError(f"busy_timeout must be a number of seconds >= 0, not {busy_timeout!r}")
        path = _engine.database_path(url)
        if path is not None:
            parent = os.path.dirname(path) or "."
            if not os.path.isdir(parent):
                raise DatabaseError(f"cannot open database {path}: folder {parent} does not exist")
            if os.path.isdir(path):
                raise DatabaseError(f"cannot open database {path}: it is a folder, not a database file")
            _engine.refuse_hard_links(path)
            confirmed = check_wal(path)  # before any connection: a foreign -wal is never read or checkpointed
        if readonly and (path is None or not os.path.isfile(path)):
            raise _engine.no_database(path)
        if not readonly and path is not None and path in _forked_mid_write:
            raise _forked_mid_write_error(path)
        name = url if path is not None else ":memory:"  # as the user gave it
        conn = None
        upgraded_from = None
        try:
            if readonly:
                conn = cls._new_connection(path, busy_timeout, durability, readonly)
                _engine.check_revision(conn, name)
            else:
                if path is not None and os.path.isfile(path) and os.path.getsize(path) > 0:
                    # Every refusal first, on a connection that can neither write nor
                    # checkpoint: closing a read-write one would checkpoint the -wal into
                    # the very file it refuses.
                    conn = _engine.open_read_only(path, busy_timeout, isolation_level=None)
                    _engine.check_writable(conn, name)
                    if not confirmed:
                        _engine.check_unconfirmed_wal(conn, path)
                    conn.close()
                conn = cls._new_connection(path, busy_timeout, durability, readonly)
                done = _engine.upgrade(conn, name, busy_timeout)
                upgraded_from = done.found if done.migrated else None
        except BaseException as e:
            if conn is not None:
                conn.close()
            err = e if isinstance(e, sqlite3.Error) else getattr(e, "orig", None)  # wrapped by SQLAlchemy
            if isinstance(err, sqlite3.Error):
                if (err.sqlite_errorname or "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):  # another migrator
                    raise DatabaseError(f"cannot open {name}: database is busy: another process held it "
                                        f"longer than the busy timeout ({busy_timeout:g} s)") from None
                raise DatabaseError(f"cannot open {name}: {err}") from None
            raise
        self = cls(path, conn, busy_timeout, durability, write_queue, readonly)
        self.upgraded_from = upgraded_from
        return self

    @staticmethod
    def _new_connection(path: str | None, busy_timeout: float, durability: str,
                        readonly: bool) -> sqlite3.Connection:
        if readonly:
            conn = _engine.open_read_only(path, busy_timeout, isolation_level=None)
            _engine.configure_connection(conn, busy_timeout, durability)
            return conn
        return _engine.connect(path, busy_timeout, durability)

    def _connect(self, conn: sqlite3.Connection | None = None) -> None:
        if conn is None:
            try:
                conn = self._new_connection(self._file, self.busy_timeout, self.durability, self.readonly)
            except sqlite3.Error as e:  # pragma: no cover - reported with the file name
                raise DatabaseError(f"cannot open {self.display}: {e}") from None
        self._conn = conn
        self._cur = conn.cursor()
        if self._marks is None and self._file is not None and not self.readonly:
            self._marks = _engine.WalMarks(self._file)
        self._unchecked_frames = 0  # WAL frames (estimated) this store wrote since its last checkpoint
        if self._write_queue:
            self._wlock = open_write_lock(self._file)
            if self._wlock is not None:  # a store dropped without close() frees its lock file
                weakref.finalize(self, self._wlock.close)
        if self._wlock is not None:
            # SQLite's automatic checkpoint runs inside COMMIT, so it would keep the write
            # lock held (and every queued writer waiting) through its fsyncs; the store
            # checkpoints on a thread of its own instead (see _wrote).
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            # The thread must not keep the store alive: it gets a plain function, and a
            # store dropped without close() stops it.
            self._checkpointer = Checkpointer(
                self._file, functools.partial(_checkpoint_connection, self._file, self.busy_timeout),
                self.busy_timeout)
            weakref.finalize(self, self._checkpointer.close, False)

    def _reopen_after_fork(self) -> None:
        """In a forked child: leave the parent's connection alone (closing it here could
        disturb the parent's locks and WAL) and open one for this process."""
        _inherited.append((self._conn, self._cur))
        self._conn = None
        self._forked = False
        if self._file is None:  # pragma: no cover - an in-memory database is the parent's alone
            raise DatabaseError("an in-memory store cannot be used after fork (its data is in the parent)")
        self._connect()

    def _connection(self) -> sqlite3.Connection:
        """The connection of this process (reopened after a fork). Call under ``_lock``."""
        if self._forked:
            self._reopen_after_fork()
        if self._conn is None:
            raise DatabaseError("the store is closed")
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._forked:  # the connection is the parent's: leave it open
                _inherited.append((self._conn, self._cur))
                self._conn = None
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
            if self._conn is not None and self._wlock is not None and self._unchecked_frames:
                checkpoint(self._conn, self._wlock, self.busy_timeout)  # what this store wrote since
            if self._wlock is not None:
                self._wlock.close()
                self._wlock = None
            if self._conn is not None:
                self._cur.close()
                self._conn.close()
                self._conn = None
            if self._marks is not None:
                self._marks.close()
                self._marks = None

    def files(self) -> list[str]:
        if self._file is None:
            return []
        real = os.path.realpath(self._file)
        return [real + suffix for suffix in ("", "-wal", "-shm", "-journal", "-lock")]

    # --- transactions ------------------------------------------------------------------------

    def _cached_head(self, session_id: str) -> tuple[int, int, str] | None:
        """``(next seq, next position, last hash)`` of ``session_id`` as this store left it
        after its own last append, or None (unknown, or backing off). Call in a write
        transaction.

        Reading the head costs a query per append; a process that appends alone can skip
        it. The cache is never trusted: the guard trigger refuses an INSERT whose seq is
        not its session's next or whose position is not above every stored one, which is
        exactly what happens when another writer appended since (to this session, or to
        any session). The caller then reads the head and tries again
        (:meth:`_head_was_stale`). A seq and position that pass both checks prove that
        nothing was appended since this store's own last event, so its hash is the last.
        Where other processes keep writing, the cache would be stale nearly every time:
        after each stale find, it sits out twice as many appends as before (up to 64).
        """
        if self._stale_skip:
            self._stale_skip -= 1
            return None
        head = self._heads.get(session_id)
        if head is None or self._next_position is None:
            return None
        return head[0], self._next_position, head[1]

    def _head_was_stale(self, e: sqlite3.IntegrityError) -> bool:
        """Whether ``e`` is the guard trigger refusing a seq or position from the cache."""
        if error_code(e) in (base.SEQ_NOT_NEXT, base.POSITION_NOT_NEXT):
            self._stale_backoff = min(64, 2 * self._stale_backoff or 1)
            self._stale_skip = self._stale_backoff
            return True
        return False

    def _remember(self, session_id: str, next_seq: int, next_position: int, last_hash: str,
                  optimistic: bool = False) -> None:
        """After a commit: the session's new head, for :meth:`_cached_head`."""
        if len(self._heads) >= 4096 and session_id not in self._heads:
            self._heads.clear()
        self._heads[session_id] = (next_seq, last_hash)
        self._next_position = next_position
        if optimistic:
            self._stale_backoff = 0

    def _transact(self, body: Callable[[sqlite3.Cursor], Any], session_id: str | None = None,
                  expected_seq: int | None = None) -> Any:
        """Call ``body(cursor)`` in a write transaction and return what it returns:
        ``BEGIN IMMEDIATE`` ... ``COMMIT`` under the store's thread lock and the write
        queue; rolled back on any error, with sqlite3 errors translated to the store's
        exceptions (``session_id`` and ``expected_seq`` say what about).

        A function rather than a ``@contextmanager`` generator, which cost three times as
        much per append. Written so that an interrupt (Ctrl-C) landing anywhere leaves
        nothing held: the thread lock is a ``with``; the write queue's lock and ``BEGIN``
        come inside the ``try`` whose cleanup rolls back whatever transaction is open and
        releases the queue's lock even when the interrupt came between taking it and
        noting it."""
        with self._lock:
            if self._forked or self._conn is None:
                self._connection()  # reopened after a fork
            if self._file in _forked_mid_write:
                raise _forked_mid_write_error(self._file)
            wlock = self._wlock
            try:
                if wlock is not None:
                    try:
                        wlock.acquire(self.busy_timeout)
                    except DatabaseError:
                        wlock = None  # not ours to release
                        raise
                cur = self._cur
                cur.execute("BEGIN IMMEDIATE")
                if self._marks is not None:
                    self._marks.mark(cur)
                result = body(cur)
                cur.execute("COMMIT")
                return result
            except BaseException as e:
                error = self._rolled_back(e, session_id, expected_seq)
                if error is None:
                    raise
                raise error from None
            finally:
                if wlock is not None:
                    wlock.release()

    def _rolled_back(self, error: BaseException, session_id: str | None,
                     expected_seq: int | None) -> Exception | None:
        """After ``error`` in a write transaction (in ``BEGIN``, the block or ``COMMIT``):
        roll back what is open, and return the store's exception for ``error``, or None to
        raise it as it is."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")
        if isinstance(error, sqlite3.Error):
            return self._translate(error, session_id, expected_seq)
        if isinstance(error, UnicodeEncodeError):
            return InvalidEvent(f"text holds a lone UTF-16 surrogate outside a payload: {error.reason}")
        return None

    def _wrote(self, first_position: int, last_position: int, payload_bytes: int) -> None:
        """After committing the events at positions ``first_position..last_position``
        (``payload_bytes`` of payload): ask the background checkpointer for a checkpoint of
        the WAL when one is due (see :mod:`.sqlite_checkpoint`).

        Due when this store's commits since its last checkpoint wrote about
        ``CHECKPOINT_FRAMES`` WAL frames (:func:`.sqlite_engine.wal_frames` estimates a
        commit's), SQLite's own cadence: about every 400 single appends, every 95 batches
        of 100 small events. (A count of events checkpointed batches 30 times as often for
        the same WAL growth: each checkpoint copies the same last pages again and costs two
        fsyncs.) Only with the write queue: otherwise SQLite checkpoints by itself.
        """
        if self._wlock is None:
            return
        self._unchecked_frames += _engine.wal_frames(last_position - first_position + 1, payload_bytes)
        if self._unchecked_frames >= _engine.CHECKPOINT_FRAMES:
            self._unchecked_frames = 0
            self._checkpointer.request()

    def _read(self, sql: str, params: tuple = ()) -> list:
        with self._lock:
            if self._forked or self._conn is None:
                self._connection()
            try:
                return self._cur.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise self._translate(e) from None
            except UnicodeEncodeError:
                raise InvalidEvent("text holds a lone UTF-16 surrogate, which no stored value can") from None

    def _translate(self, e: sqlite3.Error, session_id: str | None = None,
                   expected_seq: int | None = None) -> Exception:
        """The store's exception for ``e``, by SQLite's extended error name and the guard's
        error code (never by the message)."""
        name = getattr(e, "sqlite_errorname", "") or ""
        if isinstance(e, sqlite3.IntegrityError | sqlite3.DataError) and session_id is not None:
            full = base.counter_full(self.display, session_id, *self._cur.execute(
                "SELECT (SELECT max(position) FROM events), (SELECT max(seq) + 1 FROM events WHERE session_id = ?)",
                (session_id,)).fetchone())
            if full is not None:
                return full
        if isinstance(e, sqlite3.IntegrityError):
            code = error_code(e)
            if code == base.UNKNOWN_SESSION and session_id is not None:
                return SessionNotFound(session_id)
            if code == base.SEQ_NOT_NEXT and expected_seq is not None and session_id is not None:
                actual = self._cur.execute(_NEXT_SEQ, (session_id,)).fetchone()[0]
                return SeqConflict(session_id, expected_seq, actual)
            if code == base.SESSION_EXISTS and session_id is not None:
                return SessionExists(session_id)
            return AppendOnlyViolation(str(e))
        if name.startswith("SQLITE_READONLY"):
            return DatabaseError(f"{self.display} is open read-only: {e}")
        if name == "SQLITE_FULL":
            what = f"session {session_id!r}: " if session_id is not None else ""
            return DatabaseError(f"{self.display}: {what}{e}: nothing was written (free space, or raise its "
                                 f"max_page_count)")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return DatabaseError(f"database is busy: another writer held it longer than the busy "
                                 f"timeout ({self.busy_timeout:g} s)")
        return DatabaseError(str(e))

    # --- sessions -------------------------------------------------------------------------------

    def create_session(self, session_id: str, created_at: float, meta_json: str) -> None:
        def insert(cur: sqlite3.Cursor) -> None:
            try:
                cur.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (?, ?, ?, ?)",
                            (session_id, created_at, meta_json, session_hash(session_id, created_at, meta_json)))
            except sqlite3.IntegrityError as e:  # the key itself (the guard refuses first)
                if e.sqlite_errorname in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"):
                    raise SessionExists(session_id) from None
                raise
            if cur.rowcount != 1:
                raise DatabaseError(f"session {session_id!r}: the database reported the insert done but the "
                                    f"session was not stored (a trigger ignores it: run eventstore verify)")

        self._transact(insert, session_id)

    def session_meta(self, session_id: str) -> str | None:
        if not encodable(session_id):
            return None
        rows = self._read("SELECT meta FROM sessions WHERE id = ? AND id NOT IN (SELECT session_id FROM importing)",
                          (session_id,))
        return rows[0][0] if rows else None

    def sessions(self) -> list[tuple[str, float, int, float | None]]:
        return self._read("""
            SELECT s.id, s.created_at,
                   coalesce((SELECT max(seq) + 1 FROM events WHERE session_id = s.id), 0),
                   (SELECT ts FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
            FROM sessions AS s WHERE s.id NOT IN (SELECT session_id FROM importing)
            ORDER BY s.created_at, s.id""")

    # --- appends ----------------------------------------------------------------------------------

    def _at_head(self, sid: str, expected_seq: int | None, insert: Callable) -> tuple:
        """In one write transaction, call ``insert(cursor, seq, position, prev_hash)`` with the
        session's head: the next seq, the next global position and the last hash (the
        genesis hash for an empty session). Returns ``(insert's result, seq, position,
        whether the head came from the cache)``.

        The head comes from the store's cache when it has one (see :meth:`_cached_head`).
        ``insert`` raises :class:`_StaleHead` when its first statement is refused; if the
        guard trigger refused a cached seq or position, the head is read from the database
        and ``insert`` runs again, in the same transaction. Raises :class:`SeqConflict`
        when ``expected_seq`` is not the stored head, and the store's translation of any
        other refusal.
        """

        def at_head(cur: sqlite3.Cursor) -> tuple:
            head = self._cached_head(sid)
            while True:
                seq, position, prev = head if head is not None else cur.execute(_HEAD, (sid,)).fetchone()
                if expected_seq is not None and expected_seq != seq:
                    if head is None:
                        raise SeqConflict(sid, expected_seq, seq)
                    head = None  # the cache may be behind: read the head
                    continue
                try:
                    result = insert(cur, seq, position, genesis_hash(sid) if prev is None else prev)
                except _StaleHead as e:
                    if head is None or not self._head_was_stale(e.error):
                        raise e.error from None
                    head = None  # another writer appended since: read the head
                    continue
                return result, seq, position, head is not None

        return self._transact(at_head, sid, expected_seq)

    def append_one(self, session_id: str, type_: str, ts: float, payload: str,
                   expected_seq: int | None) -> tuple[int, int, str]:
        def insert(cur: sqlite3.Cursor, seq: int, position: int, prev: str) -> str:
            hash_ = chain_hash(prev, event_line(type_, seq, ts, payload))
            try:
                cur.execute(_INSERT, (position, session_id, seq, type_, ts, payload, hash_))
            except sqlite3.IntegrityError as e:
                raise _StaleHead(e) from None
            if cur.rowcount != 1:
                raise base.not_stored(session_id, seq)
            return hash_

        hash_, seq, position, cached = self._at_head(session_id, expected_seq, insert)
        self._remember(session_id, seq + 1, position + 1, hash_, optimistic=cached)
        self._wrote(position, position, len(payload))
        return seq, position, hash_

    def append(self, session_id: str, types: list[str], tss: list[float], payloads: list[str],
               expected_seq: int | None) -> tuple[int, int, str]:
        def insert(cur: sqlite3.Cursor, seq0: int, pos0: int, prev: str) -> str:
            shared = (types[0], tss[0]) if n and types.count(types[0]) == n and tss.count(tss[0]) == n else None
            rows = chain_rows(prev, seq0, types, tss, payloads, pairs=shared is not None)
            _insert_rows(cur, session_id, seq0, pos0, rows, shared)
            return rows[-1]

        n = len(payloads)
        last_hash, seq0, pos0, cached = self._at_head(session_id, expected_seq, insert)
        self._remember(session_id, seq0 + n, pos0 + n, last_hash, optimistic=cached)
        self._wrote(pos0, pos0 + n - 1, sum(map(len, payloads)))
        return seq0, pos0, last_hash

    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        rows = self._read(_BY_EVENT_ID, (session_id, event_id))
        return rows[0] if rows else None

    # --- reads ----------------------------------------------------------------------------------

    def next_seq(self, session_id: str) -> int:
        return self._read(_NEXT_SEQ, (session_id,))[0][0]

    def session_events(self, session_id: str, after_seq: int = -1, types: list[str] | None = None,
                       limit: int = base.PAGE, last: bool = False) -> list[tuple[int, int, str, float, str]]:
        after_seq = max(-1, min(after_seq, MAX_CURSOR))
        sql = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND seq > ?"
        if types:
            sql += " AND type IN (" + ",".join("?" * len(types)) + ")"
        sql += f" ORDER BY seq {'DESC' if last else ''} LIMIT {int(limit)}"
        rows = self._read(sql, (session_id, after_seq, *(types or ())))
        if last:
            rows.reverse()
        return rows

    def session_payloads(self, session_id: str, types: list[str], limit: int | None = None,
                         last: bool = False, from_seq: int = 0) -> tuple[int, list[tuple[int, str, str]]]:
        # the head comes as a last row (its seq is past every event's; no row has a NULL type)
        marks = ",".join(f"?{i}" for i in range(2, len(types) + 2))
        rows = (f"SELECT seq, type, payload FROM events WHERE session_id = ?1 AND type IN ({marks})"
                f" AND seq >= {int(from_seq)}")
        if limit is not None:
            rows = f"SELECT * FROM ({rows} ORDER BY seq {'DESC' if last else ''} LIMIT {int(limit)})"
        found = self._read(f"{rows} UNION ALL SELECT coalesce(max(seq) + 1, 0), NULL, NULL FROM events "
                           "WHERE session_id = ?1 ORDER BY 1", (session_id, *types))
        return found.pop()[0], found

    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        return self._read(_STORE_ROWS, (min(after_position, MAX_CURSOR), _owners(dead_owners), limit))

    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        return self._read(_LAST_POSITION, (None, _owners(dead_owners)))[0][0]

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self._read(_IMPORTS)

    def import_lock(self, session_id: str) -> ImportLock | None:
        if self._file is None:
            return _importlock.memory_lock(self._memory_imports, session_id)
        return _importlock.file_lock(self._file, session_id)

    def import_owner_alive(self, owner: str) -> bool:
        if self._file is None:
            return owner in self._memory_imports.values()
        return _importlock.file_owner_alive(owner)

    def follower(self, poll_interval: float) -> Follower:
        if self._file is None:
            return _MemoryFollower(self)
        try:
            conn = self._new_connection(self._file, self.busy_timeout, self.durability, self.readonly)
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open {self._file} to follow it: {e}") from None
        return _FileFollower(conn, self._file, poll_interval)

    # --- the projection ----------------------------------------------------------------------------

    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        if upto_seq is None:
            rows = self._read("SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
        else:
            # the last compaction up to that seq cuts, not the session's last (the view's)
            upto = max(-1, min(upto_seq, MAX_CURSOR))
            rows = self._read(_MESSAGES_UPTO, (session_id, upto, session_id, upto))
        return "[" + ",".join([r[0] for r in rows]) + "]"

    def messages_size(self, session_id: str, upto_seq: int | None = None) -> int:
        if upto_seq is None:
            return self._read("SELECT coalesce(sum(length(CAST(message AS BLOB))), 0) FROM messages "
                              "WHERE session_id = ?", (session_id,))[0][0]
        upto = max(-1, min(upto_seq, MAX_CURSOR))
        return self._read(f"SELECT coalesce(sum(length(CAST(message AS BLOB))), 0) FROM ({_MESSAGES_UPTO})",
                          (session_id, upto, session_id, upto))[0][0]

    # --- the viewer's index ----------------------------------------------------------------------

    def session_rows(self) -> list[tuple[str, float]]:
        return self._read("SELECT id, created_at FROM sessions WHERE id NOT IN (SELECT session_id FROM importing) "
                          "ORDER BY created_at, id")

    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        # count, max(seq) and max(position) come from the (session_id, seq) index alone; the
        # two joins are index look-ups.
        return self._read(_COUNTS_SQL, (min(upto_position, MAX_CURSOR),))

    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        return self._read(_STATE_SQL, (min(after_position, MAX_CURSOR), min(upto_position, MAX_CURSOR), limit))

    # --- export -------------------------------------------------------------------------------

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        sql = "SELECT type, seq, ts, payload FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        if max_bytes is None:
            return self._read(sql, (session_id, after_seq, limit))
        # SQLite hands rows over one at a time: stop taking them at the byte bound
        with self._lock:
            cur = self._connection().cursor()
            try:
                rows, size = [], 0
                for row in cur.execute(sql, (session_id, after_seq, limit)):
                    if size >= max_bytes:
                        break
                    rows.append(row)
                    p = row[3]
                    size += len(p) if type(p) is not str or p.isascii() else len(p.encode("utf-8", "surrogatepass"))
                return rows
            except sqlite3.Error as e:
                raise self._translate(e) from None
            finally:
                cur.close()

    def export_chunks(self, session_id: str, meta_json: str) -> Iterator[tuple[list, int, int]]:
        return _export_chunks(self, session_id, meta_json)

    # --- import -------------------------------------------------------------------------------

    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], Any]) -> Any:
        tx: _SQLiteImport | None = None

        def run(cur: sqlite3.Cursor) -> Any:
            nonlocal tx
            tx = _SQLiteImport(cur, session_id)
            return body(tx)

        result = self._transact(run, session_id)
        if tx is not None and tx.added:  # let the write queue checkpoint the WAL (see _wrote)
            self._wrote(tx.first_position, tx.first_position + tx.added - 1, tx.added_bytes)
        return result

    # --- search and usage (see .sqlite_search) ----------------------------------------------

    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        from . import sqlite_search

        return sqlite_search.catch_up(self, progress)

    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        from . import sqlite_search

        return sqlite_search.search(self, query, raw, session_id, type_, limit, rank_window)

    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None) -> int:
        from . import sqlite_search

        return sqlite_search.count(self, query, raw, session_id, type_)

    def summary_titles(self, session_id: str | None = None) -> list[tuple[str, str]]:
        summaries = """(SELECT ts, position, payload ->> '$.source.leafUuid' AS leaf,
                                 payload ->> '$.source.summary' AS title
                            FROM events
                           WHERE type = 'claude/summary' AND json_type(payload, '$.source.summary') = 'text'
                             AND json_type(payload, '$.source.leafUuid') = 'text'
                             AND session_id NOT IN (SELECT session_id FROM importing)) AS sm"""
        # (a line's uuid is the key of its first event; keys with ':', '#' or '@' are its others')
        if session_id is None:  # each summary's line, by the index on event_id alone
            return [tuple(r) for r in self._read(f"""
                SELECT t.session_id, sm.title FROM {summaries}
                  JOIN events AS t ON t.event_id = sm.leaf AND t.event_id NOT GLOB '*[:#@]*'
                 WHERE t.session_id NOT IN (SELECT session_id FROM importing)
                 ORDER BY sm.ts, sm.position, t.session_id""")]
        # One session: a probe of (session_id, event_id) per summary, never a pass over its events.
        rows = self._read(f"""
            SELECT sm.title FROM {summaries}
             WHERE EXISTS (SELECT 1 FROM events AS t
                            WHERE t.session_id = ? AND t.event_id = sm.leaf
                              AND t.event_id NOT GLOB '*[:#@]*')
               AND ? NOT IN (SELECT session_id FROM importing)
             ORDER BY sm.ts, sm.position""", (session_id, session_id))
        return [(session_id, r[0]) for r in rows]

    def info_rows(self) -> list[tuple[str, str]]:
        return self._read("SELECT session_id, payload FROM events WHERE type = 'session/info' "
                          "AND session_id NOT IN (SELECT session_id FROM importing) ORDER BY session_id, seq")

    def usage_totals(self) -> list[tuple[str, int, int, int, int, int]]:
        from . import sqlite_search

        return sqlite_search.usage_totals(self)

    # --- audit -------------------------------------------------------------------------------

    @classmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = 30.0,
                         max_memory: int | None = None):
        from .sqlite_sandbox import SQLiteQueryConnection

        return SQLiteQueryConnection(url, busy_timeout, timeout, max_memory)

    def guard_problems(self) -> list[str]:
        from .sqlite_schema import GUARDS

        stored = dict(self._read("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        out = []
        for name, ddl in GUARDS.items():
            if name not in stored:
                out.append(f"append-only trigger {name} is missing")
            elif _NORMALIZE.sub(" ", stored[name] or "").strip() != _NORMALIZE.sub(" ", ddl).strip():
                out.append(f"append-only trigger {name} differs from its definition")
        return out

    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        return _integrity_findings(self._read, self.display, full)

    @classmethod
    def unopened_findings(cls, url: str, full: bool = False) -> list[tuple[str, str]]:
        from .sqlite_sandbox import connect_readonly

        try:
            path = _engine.database_path(url)
            if path is None or not os.path.isfile(path):
                return []
            conn = connect_readonly(path, authorizer=False)  # refuses a foreign -wal
        except DatabaseError:
            return []  # open()'s error says it
        try:
            def read(sql: str) -> list:
                try:
                    return conn.execute(sql).fetchall()
                except sqlite3.Error as e:
                    raise DatabaseError(str(e)) from None

            return _integrity_findings(read, path, full)
        finally:
            conn.close()

    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        return self._read("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY rowid")

    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        with self._lock:
            if self._forked or self._conn is None:
                self._connection()
            cur = self._cur
            try:
                cur.execute("BEGIN")  # one read snapshot for everything below
                try:
                    out = {"position": cur.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0],
                           "sessions": cur.execute(_CHECKPOINT_HEADS).fetchall(), "at": {}}
                    for sid, seq in (at or {}).items():
                        row = cur.execute("SELECT hash, position FROM events WHERE session_id = ? AND seq = ?",
                                          (sid, seq)).fetchone()
                        if row is not None:
                            out["at"][sid] = tuple(row)
                    out["counted"] = cur.execute("SELECT count(*) FROM events WHERE position <= ?",
                                                 (position,)).fetchone()[0]
                finally:
                    if self._conn.in_transaction:
                        cur.execute("COMMIT")
            except sqlite3.Error as e:
                raise self._translate(e) from None
        return out

    def orphan_session_ids(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT session_id FROM events WHERE session_id NOT IN "
                                         "(SELECT id FROM sessions) ORDER BY session_id")]

    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any]]:
        # A connection of its own, in one read transaction (a snapshot) for the whole
        # session, so the store's lock is not held while the caller checks the rows. Stored
        # text is canonical JSON (valid UTF-8), so the C decoder reads it fastest; a page
        # holding text that is not UTF-8 (only a hand edit could put it there) is read again
        # with a tolerant decoder.
        from .sqlite_sandbox import _decode_text

        if self._file is None:
            yield from self._read(_VERIFY_ROWS, (session_id, -1, MAX_CURSOR))
            return
        try:
            conn = _engine.open_read_only(self._file, self.busy_timeout, isolation_level=None)
            conn.execute("BEGIN")
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open {self._file}: {e}") from None
        try:
            last = -1
            while True:
                try:
                    rows = conn.execute(_VERIFY_ROWS, (session_id, last, _VERIFY_PAGE)).fetchall()
                except sqlite3.Error as e:  # text that is not UTF-8, or a damaged page
                    if conn.text_factory is not str or not isinstance(e, sqlite3.OperationalError):
                        raise DatabaseError(f"cannot read {self._file}: {e}") from None
                    conn.text_factory = _decode_text
                    continue
                conn.text_factory = str
                yield from rows
                if len(rows) < _VERIFY_PAGE:
                    return
                last = rows[-1][0]
        finally:
            conn.close()


_VERIFY_ROWS = ("SELECT seq, position, type, ts, payload, hash FROM events "
                "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")
_VERIFY_PAGE = 5000


_NORMALIZE = re.compile(r"\s+")


# --- following ----------------------------------------------------------------------------------

_SCHEMA_ROWS = ("SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
_CHECKPOINT_HEADS = """
SELECT s.id, s.created_at, s.meta,
       coalesce((SELECT seq FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) + 1, 0),
       (SELECT hash FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
FROM sessions AS s"""


def _schema_of(rows: list) -> dict[str, tuple[str, str]]:
    """``{name: (kind, normalised SQL)}`` of ``sqlite_master`` rows (type, name, tbl_name, sql);
    an index's or trigger's kind names its table."""
    return {name: (f"{type_} on {table}" if type_ in ("index", "trigger") else type_,
                   _NORMALIZE.sub(" ", sql or "").strip()) for type_, name, table, sql in rows}


def _integrity_findings(read: Callable[[str], list], display: str, full: bool) -> list[tuple[str, str]]:
    """:meth:`SQLiteBackend.integrity_findings` through ``read(sql) -> rows`` (which raises
    :class:`DatabaseError`): ``PRAGMA quick_check`` (``integrity_check`` with ``full``),
    then the schema against a freshly migrated one."""
    from .sqlite_schema import GUARDS

    pragma = "integrity_check" if full else "quick_check"
    out: list[tuple[str, str]] = []
    try:
        rows = [r[0] for r in read(f"PRAGMA {pragma}(100)")]
    except DatabaseError as e:
        return [("storage", f"{display}: the database cannot be read: {e}")]
    if rows != ["ok"]:
        out += [("storage", f"PRAGMA {pragma}: {line}") for r in rows for line in str(r).splitlines() if line.strip()]
    try:
        have = _schema_of(read(_SCHEMA_ROWS))
    except DatabaseError as e:
        return out + [("storage", f"{display}: the schema cannot be read: {e}")]
    out += [("schema", m) for m in base.schema_differences(have, _expected_schema(), skip=GUARDS)]
    return out


_expected: dict[str, tuple[str, str]] | None = None


def _expected_schema() -> dict[str, tuple[str, str]]:
    """The schema (as :func:`_schema_of`) of a fresh in-memory database migrated to the head
    revision with the package's Alembic history (built once per process)."""
    global _expected
    if _expected is None:
        conn = _engine.connect(None, 1.0)
        try:
            _engine.upgrade(conn, ":memory:")
            _expected = _schema_of(conn.execute(_SCHEMA_ROWS).fetchall())
        finally:
            conn.close()
    return _expected


class _FileFollower(Follower):
    """A follower on a connection of its own. It asks ``PRAGMA data_version`` whether
    anything was committed since it last looked (a read of the shared WAL index,
    microseconds) and sleeps ``poll_interval`` seconds between looks. Every query runs to
    completion in autocommit mode, so no read transaction stays open while the caller
    handles the events: the WAL can be checkpointed and reset beside a tail that runs for
    days."""

    def __init__(self, conn: sqlite3.Connection, path: str, poll_interval: float):
        self.conn = conn
        self.path = path
        self.poll_interval = poll_interval
        self.version = None

    def _rows(self, sql: str, params: tuple) -> list:
        try:
            # data_version first: a commit after it is seen by the next wait
            self.version = self.conn.execute("PRAGMA data_version").fetchall()[0][0]
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot follow {self.path}: {e}") from None

    def events_after(self, after_position: int, limit: int, dead_owners: Collection[str] = ()) -> list:
        return self._rows(_STORE_ROWS, (min(after_position, MAX_CURSOR), _owners(dead_owners), limit))

    def imports(self) -> list[tuple[str, int, str, float]]:
        try:
            return self.conn.execute(_IMPORTS).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot follow {self.path}: {e}") from None

    def session_events_after(self, session_id: str, after_seq: int, limit: int) -> list:
        return self._rows(_SESSION_ROWS, (session_id, min(after_seq, MAX_CURSOR), limit))

    def wait_for_commit(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while self.conn.execute("PRAGMA data_version").fetchall()[0][0] == self.version:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    time.sleep(min(self.poll_interval, left))
                else:
                    time.sleep(self.poll_interval)
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot follow {self.path}: {e}") from None
        return True

    def close(self) -> None:
        self.conn.close()


class _MemoryFollower(Follower):
    """An in-memory database has only the store's connection (read under the store's lock),
    and ``data_version`` does not move for the store's own writes: the follower looks again
    after every poll interval."""

    def __init__(self, backend: SQLiteBackend):
        self.backend = backend

    def events_after(self, after_position: int, limit: int, dead_owners: Collection[str] = ()) -> list:
        return self.backend.events_after(after_position, limit, dead_owners)

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self.backend.imports()

    def session_events_after(self, session_id: str, after_seq: int, limit: int) -> list:
        return self.backend._read(_SESSION_ROWS, (session_id, min(after_seq, MAX_CURSOR), limit))

    def wait_for_commit(self, timeout: float | None) -> bool:
        time.sleep(_MEMORY_POLL if timeout is None else min(_MEMORY_POLL, timeout))
        return True

    def close(self) -> None:
        pass


_MEMORY_POLL = 0.02  # seconds


# --- the viewer's index ------------------------------------------------------------------------

# What the model saw at a seq: the last compaction up to it cuts (see migration 0270).
_MESSAGES_UPTO = """
SELECT message FROM messages_uncut
WHERE session_id = ? AND seq <= ?
  AND seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = ? AND c.type = 'compaction/boundary'
                        AND c.seq <= ? ORDER BY c.seq DESC LIMIT 1), -1)
ORDER BY seq"""


_COUNTS_SQL = """
SELECT a.session_id, a.n, a.last_position, f.ts, l.ts
FROM (SELECT session_id, count(*) AS n, max(seq) AS last_seq, max(position) AS last_position
      FROM events WHERE position <= ? AND session_id NOT IN (SELECT session_id FROM importing)
      GROUP BY session_id) AS a
JOIN events AS f ON f.session_id = a.session_id AND f.seq = 0
JOIN events AS l ON l.session_id = a.session_id AND l.seq = a.last_seq"""

_STATE_SQL = """
SELECT position, session_id, type,
       CASE WHEN type IN ('assistant/message', 'assistant/part') THEN payload -> '$.tool_calls'
            WHEN type = 'tool/result' THEN payload ->> '$.tool_call_id' END
FROM events
WHERE position > ? AND position <= ?
  AND type IN ('turn/start', 'turn/end', 'user/message', 'assistant/message', 'tool/result', 'assistant/part')
  AND session_id NOT IN (SELECT session_id FROM importing)
ORDER BY position LIMIT ?"""


# --- import ----------------------------------------------------------------------------------

IMPORT_GROUP = 50  # rows per INSERT statement of an import (multi-row VALUES)

# The session id and the first position go into the statement as constants (a hex blob
# literal holds any id, NUL included), so each row binds only its own five values; payload
# and hash may come as UTF-8 bytes (the reader's fast path), CAST keeps them TEXT. One
# statement inserts IMPORT_GROUP rows: SQLite's per-statement work (the guard trigger's
# setup, the partial indexes' WHERE) is then paid once per group instead of once per row.
_VALUES = "(?{a} + {base}, {sid}, ?{a}, ?{b}, ?{c}, CAST(?{d} AS TEXT), CAST(?{e} AS TEXT))"
_INSERT_HEAD = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
_STORED = ("SELECT seq, type, ts, payload, hash FROM events "
           "WHERE session_id = ? AND seq >= ? AND seq <= ? ORDER BY seq")


def _import_sql(base_position: int, sid: str, rows: int) -> str:
    sid_sql = f"CAST(x'{sid.encode('utf-8').hex()}' AS TEXT)"
    return _INSERT_HEAD + ",".join(_VALUES.format(a=5 * i + 1, b=5 * i + 2, c=5 * i + 3, d=5 * i + 4, e=5 * i + 5,
                                                  base=base_position, sid=sid_sql) for i in range(rows))


class _SQLiteImport(ImportTransaction):
    """An import's transaction on the store's cursor (see :meth:`SQLiteBackend.import_transaction`)."""

    def __init__(self, cur: sqlite3.Cursor, sid: str):
        self.cur = cur
        self.sid = sid
        self.sql: tuple[int, str, str] | None = None  # (base position, one row, IMPORT_GROUP rows)
        self.added = 0
        self.added_bytes = 0
        self.first_position = 0

    def session_meta(self) -> str | None:
        row = self.cur.execute("SELECT meta FROM sessions WHERE id = ?", (self.sid,)).fetchone()
        return None if row is None else row[0]

    def importing(self) -> tuple[int, str] | None:
        row = self.cur.execute("SELECT first_position, owner FROM importing WHERE session_id = ?",
                               (self.sid,)).fetchone()
        return None if row is None else tuple(row)

    def begin_import(self, first_position: int, owner: str, started_at: float) -> None:
        self.cur.execute("INSERT INTO importing (session_id, first_position, owner, started_at) VALUES (?, ?, ?, ?)",
                         (self.sid, first_position, owner, started_at))

    def take_over(self, owner: str) -> None:
        self.cur.execute("UPDATE importing SET owner = ? WHERE session_id = ?", (owner, self.sid))

    def end_import(self) -> None:
        self.cur.execute("DELETE FROM importing WHERE session_id = ?", (self.sid,))

    def create_session(self, created_at: float, meta_json: str) -> Refusal | None:
        try:
            self.cur.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (?, ?, ?, ?)",
                             (self.sid, created_at, meta_json, session_hash(self.sid, created_at, meta_json)))
        except sqlite3.IntegrityError as e:
            return Refusal(error_code(e), str(e))
        return None

    def next_seq(self) -> int:
        return self.cur.execute(_NEXT_SEQ, (self.sid,)).fetchone()[0]

    def next_position(self) -> int:
        return self.cur.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()[0]

    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        return self.cur.execute(_STORED, (self.sid, first_seq, last_seq)).fetchall()

    def event_id_seq(self, event_id: str) -> int | None:
        row = self.cur.execute("SELECT seq FROM events WHERE session_id = ? AND event_id = ?",
                               (self.sid, event_id)).fetchone()
        return None if row is None else row[0]

    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        if self.sql is None or self.sql[0] != position0:
            self.sql = (position0, _import_sql(position0, self.sid, 1), _import_sql(position0, self.sid, IMPORT_GROUP))
            if not self.added:
                self.first_position = position0 + rows[0][0]
        refused = self._insert(rows)
        stored = len(rows) if refused is None else refused[0]
        self.added += stored
        self.added_bytes += sum(len(r[3]) for r in rows[:stored])
        return refused

    def _insert(self, rows: list[tuple]) -> tuple[int, Refusal] | None:
        cur = self.cur
        _, one, many = self.sql
        full = len(rows) - len(rows) % IMPORT_GROUP
        start = 0
        try:
            stored = 0
            if full:
                flat = itertools.chain.from_iterable
                cur.executemany(many, [tuple(flat(rows[i:i + IMPORT_GROUP])) for i in range(0, full, IMPORT_GROUP)])
                stored = cur.rowcount
            start = full
            cur.executemany(one, rows[full:])
            stored += max(cur.rowcount, 0)
            if stored != len(rows):  # a trigger's RAISE(IGNORE) drops rows silently
                raise DatabaseError(f"session {self.sid!r} seqs {rows[0][0]}..{rows[-1][0]}: the database "
                                    f"reported the insert done but stored {stored} of {len(rows)} events (a "
                                    f"trigger ignores them: run eventstore verify); nothing was imported")
            return None
        except sqlite3.IntegrityError as e:
            stored = self.next_seq() - rows[0][0]
            if start:  # a single row failed: it is the next one
                return stored, Refusal(error_code(e), str(e))
        for i in range(stored, len(rows)):  # a group failed: find the row one at a time
            try:
                cur.execute(one, rows[i])
            except sqlite3.IntegrityError as e:
                return i, Refusal(error_code(e), str(e))
        raise AssertionError("a refused group of rows was accepted row by row")  # pragma: no cover


# --- export ------------------------------------------------------------------------------

# The fast export of a page: one query gathers the page's lines in SQLite, type and payload
# of each (``TYPE \x02 PAYLOAD``, joined by ``\n\x02{``: a control character never stands
# unescaped in a JSON text, so splitting at ``\x02{`` gives types and payloads without their
# "{"), and the exact bits of each ts (ts * 2**22 is an integer below 2**63 for
# 2**30 <= ts < 2**41, that is from 2004 on); Python then writes seqs and ts with orjson
# and puts the pieces together (_fast_page). A page holding anything else (an older or odd
# ts, a payload of FAST_PAYLOAD bytes or more, a type that needs escapes, an array-index
# key) goes row by row (_EXPORT), which streams long payloads.
#
# The query does as little per row as it can (callgrind, on the bench corpus): the payload's
# size is its byte length (length() of TEXT counts characters, after copying the text to
# NUL-terminate it; the CAST to BLOB only relabels the value), a long payload's line is a
# lone \x01 that _fast_page looks for in the page (count(line) would copy every line once
# more through the subquery; and a missing line could be made up for, in the split, by a
# type holding \x02{), and the ts range is checked in Python on the page's doubles rather
# than by a CASE per row.
EXPORT_PAGE = 500  # events per read query of an export (one short read transaction each)
EXPORT_BUFFER = 1 << 20  # bytes gathered before each write
FAST_PAYLOAD = 8192  # bytes: a longer payload goes row by row (memory: EXPORT_PAGE of these)
_FAST_OK = f"length(CAST(payload AS BLOB)) < {FAST_PAYLOAD}"
_EXPORT_FAST = (f"SELECT CAST(group_concat(line, char(10, 2, 123)) AS BLOB), group_concat(m), count(*) "
                f"FROM (SELECT CASE WHEN {_FAST_OK} THEN type || char(2) || payload ELSE char(1) END AS line, "
                f"CAST(ts * 4194304.0 AS INTEGER) AS m "
                f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq)")
_TS_SCALE = 4194304.0  # 2**22
_TS_MIN, _TS_MAX = 1073741824.0, 2199023255552.0  # 2**30, 2**41
_LINE_FMT = b'{"type":"%s","seq":%s,"ts":%s%s'
_EMPTY = b"}\n"  # what is left of "{}"
# A payload the row-by-row path must write: a first key that may be an array index
# (JavaScript writes those first), or whitespace after the "{", which plain SQL could store
# before revision 0006 of the first release ("{ }", '{ "a":1}'; a line break or \r sends
# the page row by row anyway). A false hit, a type starting with '"' and a digit, a space
# or a tab, only costs speed.
_ROW_BY_ROW = re.compile(rb'\x02\{(?:"[0-9]|[ \t])').search


def _fast_page(blob: bytes, mtext: str, first: int, n: int, plain_types: set[bytes]) -> bytes | None:
    """The JSONL text of ``n`` events from seq ``first`` (see _EXPORT_FAST), or None when
    the row-by-row path must write them."""
    if b"\x01" in blob:  # a long payload (or a type holding \x01, which needs an escape anyway)
        return None
    if blob.count(b"\n") != n - 1 or b"\r" in blob:  # a line break in a payload (or a type): row by row
        return None
    ts = list(map(truediv, orjson.loads("[" + mtext + "]"), itertools.repeat(_TS_SCALE)))  # exact: a power of 2
    # ts * 2**22 was exact only in that range: below it, CAST dropped bits; above it, CAST
    # stopped at 2**63 - 1, which comes back as 2**41
    if len(ts) != n or min(ts) < _TS_MIN or max(ts) >= _TS_MAX:
        return None
    ts_text = orjson.dumps(ts)
    # orjson writes a finite double as JavaScript does, but for integer values (5.0) and
    # exponents (1e+16); JSON.stringify writes 1764460800 for 1764460800.0
    if b"e" in ts_text or b".0," in ts_text or ts_text.endswith(b".0]"):
        return None
    parts = blob.split(b"\x02{")
    if len(parts) != 2 * n or _ROW_BY_ROW(blob) is not None:
        return None
    parts[-1] += b"\n"
    types = parts[0::2]
    for t in set(types).difference(plain_types):
        text = t.decode("utf-8", "surrogatepass")
        if not encodable(text) or dumps(text) != '"' + text + '"':
            return None  # a type that JSON writes with escapes (and \x02 in a type)
        plain_types.add(t)
    rests = parts[1::2]
    flat: list = [None] * (4 * n)
    flat[0::4] = types
    flat[1::4] = orjson.dumps(list(range(first, first + n)))[1:-1].split(b",")
    flat[2::4] = (ts_text[1:-1] + b",").replace(b",", b",\x00").split(b"\x00")[:-1]  # "ts,": the payload's comma
    flat[3::4] = rests
    i = -1
    try:
        while True:  # an empty payload: no comma after ts
            i = rests.index(_EMPTY, i + 1)
            flat[4 * i + 2] = flat[4 * i + 2][:-1]
    except ValueError:
        pass
    return (_LINE_FMT * n) % tuple(flat)


# SQLite writes the end of each line (payload minus its "{", newline) as bytes, in C; a
# long payload (BIG_PAYLOAD characters and more) comes whole instead, and Python writes a
# view of it, so that no line is copied more than it must be.
BIG_PAYLOAD = 1 << 16
# A payload that does not start as JSON.stringify starts an object ('{"' or exactly '{}':
# whitespace before or just after the "{", or a BLOB, which plain SQL could store before
# revision 0006 of the first release) comes whole too, and is written anew.
_CANONICAL_START = "typeof(payload) = 'text' AND (payload GLOB '{\"*' OR payload = '{}')"
_EXPORT = (f"SELECT type, seq, ts, "
           f"CASE WHEN length(payload) < {BIG_PAYLOAD} AND {_CANONICAL_START} THEN CAST(CASE payload "
           f"WHEN '{{}}' THEN '}}' ELSE ',' || substr(payload, 2) END || char(10) AS BLOB) END, "
           f"CASE WHEN length(payload) >= {BIG_PAYLOAD} OR NOT ({_CANONICAL_START}) THEN CAST(payload AS BLOB) END "
           f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq")


def _export_chunks(backend: SQLiteBackend, session_id: str, meta_json: str):
    """Yield ``(pieces, bytes, events)``: the session's lines as a list of byte strings (and
    memoryviews of stored payloads, not copied), about EXPORT_BUFFER bytes at a time.

    Pages of EXPORT_PAGE events, each one short read transaction: _fast_page writes a page in
    one piece when it can, else the page goes row by row."""
    from eventstore.log.lines_fast import rewritten_payload

    out: list = [(meta_line(session_id, meta_json) + "\n").encode("utf-8")]
    size = len(out[0])
    pending = 0  # events in out
    heads: dict[str, str] = {}
    plain_types: set[bytes] = set()
    js_float = _js_float
    last = -1
    while True:
        got = 0
        with backend._lock:  # one short read transaction per page
            cur = backend._connection().cursor()
            try:
                blob, mtext, n = cur.execute(_EXPORT_FAST, (session_id, last, last + EXPORT_PAGE)).fetchone()
                if n == 0:
                    break
                data = _fast_page(blob, mtext, last + 1, n, plain_types)
                if data is not None:
                    got = n
                    out.append(data)
                    size += len(data)
                    pending += n
                else:
                    cur.execute(_EXPORT, (session_id, last, last + EXPORT_PAGE))
                    app = out.append
                    for t, seq, ts, tail, big in cur:
                        payload_head = tail if tail is not None else big
                        # A raw line break can stand in a stored payload only as whitespace
                        # between tokens (plain SQL wrote it): the line is written anew, not
                        # split in two.
                        broken = (b"\r" in tail or tail.find(b"\n", 0, len(tail) - 1) >= 0 if tail is not None
                                  else b"\n" in big or b"\r" in big or big[:2] != b'{"')
                        if payload_head[2:3].isdigit() or broken:  # an array-index key: JavaScript writes it first
                            raw = b"{" + bytes(tail[1:-1]) if tail is not None else bytes(big)
                            text = rewritten_payload(raw, session_id, seq) if broken else raw.decode()
                            line = (event_line(t, seq, ts, text) + "\n").encode("utf-8")
                            app(line)
                            size += len(line)
                            got += 1
                            pending += 1
                            continue
                        try:
                            head = heads[t]
                        except KeyError:
                            head = heads[t] = '{"type":' + dumps(t) + ',"seq":'
                        r = repr(ts)  # JavaScript's text too, but for 1e+16, 5.0 and the like
                        if "e" in r or r[-2:] == ".0":
                            r = js_float(ts)
                        app(f'{head}{seq},"ts":{r}'.encode())
                        if tail is not None:
                            app(tail)
                            size += len(tail) + 40
                        else:
                            app(b",")
                            app(memoryview(big)[1:])
                            app(b"\n")
                            size += len(big) + 40
                        got += 1
                        pending += 1
                        if size >= EXPORT_BUFFER:
                            yield out, size, pending
                            out = []
                            app = out.append
                            size = pending = 0
            except sqlite3.Error as e:
                raise backend._translate(e) from None
            finally:
                cur.close()
        last += EXPORT_PAGE
        if size >= EXPORT_BUFFER:
            yield out, size, pending
            out = []
            size = pending = 0
        if got < EXPORT_PAGE:
            break
    yield out, size, pending
