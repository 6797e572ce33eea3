"""The SQLite backend's core contract: one held ``sqlite3`` connection, the write queue, the checkpointer.

The hot paths (append, reads, import, export) run plain SQL on one held connection, inside
transactions that start with ``BEGIN IMMEDIATE``. Writers of all processes wait for each
other on a lock file beside the database (:mod:`.writelock`) instead of in SQLite's
sleep-and-retry busy handler, and the WAL is checkpointed on a thread of the store's own
(:mod:`.checkpoint`). A store remembers the head of the sessions it appended to,
so a process that appends alone skips reading the head (:meth:`SQLiteBackend._cached_head`).
After ``os.fork()`` the child leaves the parent's connection alone and opens its own.
Refusals are recognised by SQLite's extended error name and the trigger's error code (the
RAISE message starts with ``ESnnn:``, see :mod:`eventstore.backends.base`).

The capabilities are mixins of their own modules (:mod:`.search`, :mod:`.audit`,
:mod:`.index`, :mod:`.views`, :mod:`.sandbox`) and the export fast path is :mod:`.export`.
"""

from __future__ import annotations

import _thread  # threading's own RLock, without importing threading (eventstore's start-up)
import functools
import os
import sqlite3
from _weakrefset import WeakSet  # weakref.WeakSet, without importing weakref
from collections.abc import Callable, Collection

from eventstore.errors import (
    AppendOnlyViolation,
    DatabaseError,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from eventstore.lazy import LazyModule
from eventstore.log.chain import chain_hash, chain_rows, genesis_hash, session_hash
from eventstore.log.codec import encodable
from eventstore.log.line import event_line

from .. import base
from ..base import Backend, Follower, ImportLock, ImportTransaction
from . import engine as _engine
from .audit import SQLiteAudit
from .export import SQLiteExport
from .index import SQLiteIndex
from .redact import SQLiteRedactor
from .sandbox import SQLiteSandbox
from .search import SQLiteSearch
from .statements import (
    BY_EVENT_ID,
    HEAD,
    IMPORTS,
    INSERT_EVENT,
    LAST_POSITION,
    MAX_CURSOR,
    NEXT_SEQ,
    STORE_ROWS,
    StaleHead,
    error_code,
    import_owners,
    insert_rows,
)
from .views import SQLiteViews
from .walcheck import check_wal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

    from .checkpoint import Checkpointer
    from .importer import SQLiteImport

# What only a store that writes, imports or follows uses: imported at its first use, not at
# eventstore's start-up (a read-only command such as `eventstore sessions` uses none of it).
_checkpoint = LazyModule("eventstore.backends.sqlite.checkpoint")
_follower = LazyModule("eventstore.backends.sqlite.follower")
_importer = LazyModule("eventstore.backends.sqlite.importer")
_importlock = LazyModule("eventstore.backends.sqlite.importlock")
_writelock = LazyModule("eventstore.backends.sqlite.writelock")

__all__ = ["SQLiteBackend", "error_code"]


def _checkpoint_connection(database: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection for a store's checkpointer (opened on its thread)."""
    return _engine.connect(database, busy_timeout)


# Backends alive in this process, and connections inherited from a parent process that
# must stay open (unused) in a forked child: see SQLiteBackend._reopen_after_fork.
_live: WeakSet[SQLiteBackend] = WeakSet()
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
        backend._lock = _thread.RLock()  # another thread may have held it at the fork
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



class SQLiteBackend(SQLiteSearch, SQLiteAudit, SQLiteIndex, SQLiteViews, SQLiteSandbox, SQLiteExport, SQLiteRedactor,
                    Backend):
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
        self._lock = _thread.RLock()
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
             write_queue: bool = True, readonly: bool = False, upgrade: bool = True) -> SQLiteBackend:
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
                    _engine.check_writable(conn, name, upgrade)
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
            import weakref  # (a store that writes: not at eventstore's start-up)

            self._wlock = _writelock.open_write_lock(self._file)
            if self._wlock is not None:  # a store dropped without close() frees its lock file
                weakref.finalize(self, self._wlock.close)
        if self._wlock is not None:
            # SQLite's automatic checkpoint runs inside COMMIT, so it would keep the write
            # lock held (and every queued writer waiting) through its fsyncs; the store
            # checkpoints on a thread of its own instead (see _wrote).
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            # The thread must not keep the store alive: it gets a plain function, and a
            # store dropped without close() stops it.
            self._checkpointer = _checkpoint.Checkpointer(
                self._file, functools.partial(_checkpoint_connection, self._file, self.busy_timeout),
                self.busy_timeout)
            import weakref

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
                _checkpoint.checkpoint(self._conn, self._wlock, self.busy_timeout, self._file)  # what it wrote since
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
                if self._marks is not None:
                    self._marks.settle(self._conn, self.busy_timeout)  # a mark of this copy's own, first
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
        the WAL when one is due (see :mod:`.checkpoint`).

        Due when this store's commits since its last checkpoint wrote about
        ``CHECKPOINT_FRAMES`` WAL frames (:func:`.engine.wal_frames` estimates a
        commit's), SQLite's own cadence. Frames, not events: a count of events would
        checkpoint batches far more often for the same WAL growth, and each checkpoint
        copies the same last pages again and costs two fsyncs. Only with the write queue:
        otherwise SQLite checkpoints by itself.
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

    def _read_joined(self, sql: str, params: tuple) -> str | None:
        """The one text value ``sql`` selects, or None when it would be longer than SQLite's
        longest value (``SQLITE_TOOBIG``): then the caller joins the rows itself."""
        with self._lock:
            if self._forked or self._conn is None:
                self._connection()
            try:
                return self._cur.execute(sql, params).fetchone()[0]
            except sqlite3.Error as e:
                if getattr(e, "sqlite_errorname", "") == "SQLITE_TOOBIG":
                    return None
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
                actual = self._cur.execute(NEXT_SEQ, (session_id,)).fetchone()[0]
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
        ``insert`` raises :class:`StaleHead` when its first statement is refused; if the
        guard trigger refused a cached seq or position, the head is read from the database
        and ``insert`` runs again, in the same transaction. Raises :class:`SeqConflict`
        when ``expected_seq`` is not the stored head, and the store's translation of any
        other refusal.
        """

        def at_head(cur: sqlite3.Cursor) -> tuple:
            head = self._cached_head(sid)
            while True:
                seq, position, prev = head if head is not None else cur.execute(HEAD, (sid,)).fetchone()
                if expected_seq is not None and expected_seq != seq:
                    if head is None:
                        raise SeqConflict(sid, expected_seq, seq)
                    head = None  # the cache may be behind: read the head
                    continue
                try:
                    result = insert(cur, seq, position, genesis_hash(sid) if prev is None else prev)
                except StaleHead as e:
                    if head is None or not self._head_was_stale(e.error):
                        raise e.error from None
                    head = None  # another writer appended since: read the head
                    continue
                return result, seq, position, head is not None

        return self._transact(at_head, sid, expected_seq)

    def append_one(self, session_id: str, type_: str, ts: float, payload: str,
                   expected_seq: int | None, *, salt: bytes | None = None, commit: str | None = None,
                   ) -> tuple[int, int, str]:
        line_payload = payload if salt is None else commit

        def insert(cur: sqlite3.Cursor, seq: int, position: int, prev: str) -> str:
            hash_ = chain_hash(prev, event_line(type_, seq, ts, line_payload))
            try:
                cur.execute(INSERT_EVENT, (position, session_id, seq, type_, ts, payload, hash_, salt))
            except sqlite3.IntegrityError as e:
                raise StaleHead(e) from None
            if cur.rowcount != 1:
                raise base.not_stored(session_id, seq)
            return hash_

        hash_, seq, position, cached = self._at_head(session_id, expected_seq, insert)
        self._remember(session_id, seq + 1, position + 1, hash_, optimistic=cached)
        self._wrote(position, position, len(payload))
        return seq, position, hash_

    def append(self, session_id: str, types: list[str], tss: list[float], payloads: list[str],
               expected_seq: int | None, *, salts: list[bytes] | None = None,
               commits: list[str] | None = None) -> tuple[int, int, str]:
        def insert(cur: sqlite3.Cursor, seq0: int, pos0: int, prev: str) -> str:
            shared = (types[0], tss[0]) if n and types.count(types[0]) == n and tss.count(tss[0]) == n else None
            rows = chain_rows(prev, seq0, types, tss, payloads, pairs=shared is not None, commits=commits,
                              salts=salts)
            insert_rows(cur, session_id, seq0, pos0, rows, shared)
            return rows[-2]

        n = len(payloads)
        last_hash, seq0, pos0, cached = self._at_head(session_id, expected_seq, insert)
        self._remember(session_id, seq0 + n, pos0 + n, last_hash, optimistic=cached)
        self._wrote(pos0, pos0 + n - 1, sum(map(len, payloads)))
        return seq0, pos0, last_hash

    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        rows = self._read(BY_EVENT_ID, (session_id, event_id))
        return rows[0] if rows else None

    # --- reads ----------------------------------------------------------------------------------

    def next_seq(self, session_id: str) -> int:
        return self._read(NEXT_SEQ, (session_id,))[0][0]

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
        return self._read(STORE_ROWS, (min(after_position, MAX_CURSOR), import_owners(dead_owners), limit))

    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        return self._read(LAST_POSITION, (None, import_owners(dead_owners)))[0][0]

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self._read(IMPORTS)

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
            return _follower.MemoryFollower(self)
        try:
            conn = self._new_connection(self._file, self.busy_timeout, self.durability, self.readonly)
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open {self._file} to follow it: {e}") from None
        return _follower.FileFollower(conn, self._file, poll_interval)

    # --- the projection ----------------------------------------------------------------------------

    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        if upto_seq is None:
            sql, params = "SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        else:
            # the last compaction up to that seq cuts, not the session's last (the view's)
            upto = max(-1, min(upto_seq, MAX_CURSOR))
            sql, params = _MESSAGES_UPTO, (session_id, upto, session_id, upto)
        # joined by SQLite: one text instead of a row object and a string per message
        text = self._read_joined(_JOINED.format(rows=sql), params)
        if text is not None:
            return text
        return "[" + ",".join([r[1] for r in self._read(sql, params)]) + "]"

    def messages_size(self, session_id: str, upto_seq: int | None = None) -> int:
        if upto_seq is None:
            return self._read("SELECT coalesce(sum(length(CAST(message AS BLOB))), 0) FROM messages "
                              "WHERE session_id = ?", (session_id,))[0][0]
        upto = max(-1, min(upto_seq, MAX_CURSOR))
        return self._read(f"SELECT coalesce(sum(length(CAST(message AS BLOB))), 0) FROM ({_MESSAGES_UPTO})",
                          (session_id, upto, session_id, upto))[0][0]

    # --- import -------------------------------------------------------------------------------

    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], Any]) -> Any:
        tx: SQLiteImport | None = None

        def run(cur: sqlite3.Cursor) -> Any:
            nonlocal tx
            tx = _importer.SQLiteImport(cur, session_id, self._wlock)
            return body(tx)

        result = self._transact(run, session_id)
        if tx is not None and tx.added:  # let the write queue checkpoint the WAL (see _wrote)
            self._wrote(tx.first_position, tx.first_position + tx.added - 1, tx.added_bytes)
        if tx is not None:
            tx.let_writers_in()
        return result


_MESSAGES_UPTO = """
SELECT seq, message FROM messages_uncut
WHERE session_id = ? AND seq <= ?
  AND seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = ? AND c.type = 'compaction/boundary'
                        AND c.seq <= ? ORDER BY c.seq DESC LIMIT 1), -1)
ORDER BY seq"""
# The messages of a query of (seq, message) rows in seq order, joined into the JSON array
# text by the database. SQLite 3.44 orders inside the aggregate; before it an aggregate
# takes the rows in its ordered subquery's order (a subquery with ORDER BY is not flattened
# into an aggregate query; the views' own json_group_array folds rely on the same).
_JOINED = ("SELECT '[' || coalesce(group_concat(message, ','"
           + (" ORDER BY seq" if sqlite3.sqlite_version_info >= (3, 44, 0) else "") + "), '') || ']' FROM ({rows})")
