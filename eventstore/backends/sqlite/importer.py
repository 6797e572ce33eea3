"""The import transaction: multi-row INSERTs of stored rows inside one write transaction.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from operator import itemgetter

from eventstore.errors import (
    DatabaseError,
)
from eventstore.log.chain import session_hash

from ..base import ImportTransaction, Refusal
from .statements import NEXT_SEQ, error_code
from .writelock import WriteLock

# --- import ----------------------------------------------------------------------------------

IMPORT_GROUP = 50  # rows per INSERT statement of an import (multi-row VALUES)
# After a chunk that ended for waiting writers the importer waits until they have the lock
# (flock is not FIFO: it would take the lock again before the writers it woke), at most
# PAUSE_SHARE of the chunk's time, so that writers that keep coming still leave the import
# two thirds of the lock. Where the write queue cannot show a waiting writer (no queue, not
# Linux), a chunk ends after YIELD_AFTER seconds and the importer pauses that share of it.
YIELD_AFTER = 0.005
PAUSE_SHARE = 0.5

# The session id and the first position go into the statement as constants (a hex blob
# literal holds any id, NUL included), so each row binds only its own five values; payload
# and hash may come as UTF-8 bytes (the reader's fast path), CAST keeps them TEXT. One
# statement inserts IMPORT_GROUP rows: SQLite's per-statement work (the guard trigger's
# setup, the partial indexes' WHERE) is then paid once per group instead of once per row.
_VALUES = "(?{a} + {base}, {sid}, ?{a}, ?{b}, ?{c}, CAST(?{d} AS TEXT), CAST(?{e} AS TEXT))"
_INSERT_HEAD = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
_payload = itemgetter(3)
# rows that carry their salt (a copy: docs/redaction.md) bind it as a sixth value
_VALUES_SALTED = "(?{a} + {base}, {sid}, ?{a}, ?{b}, ?{c}, CAST(?{d} AS TEXT), CAST(?{e} AS TEXT), ?{f})"
_INSERT_HEAD_SALTED = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash, salt) VALUES "
_STORED = ("SELECT seq, type, ts, payload, hash FROM events "
           "WHERE session_id = ? AND seq >= ? AND seq <= ? ORDER BY seq")


def _import_sql(base_position: int, sid: str, rows: int, salted: bool = False) -> str:
    sid_sql = f"CAST(x'{sid.encode('utf-8').hex()}' AS TEXT)"
    if salted:
        return _INSERT_HEAD_SALTED + ",".join(_VALUES_SALTED.format(
            a=6 * i + 1, b=6 * i + 2, c=6 * i + 3, d=6 * i + 4, e=6 * i + 5, f=6 * i + 6, base=base_position,
            sid=sid_sql) for i in range(rows))
    return _INSERT_HEAD + ",".join(_VALUES.format(a=5 * i + 1, b=5 * i + 2, c=5 * i + 3, d=5 * i + 4, e=5 * i + 5,
                                                  base=base_position, sid=sid_sql) for i in range(rows))


class SQLiteImport(ImportTransaction):
    """An import's transaction on the store's cursor (see :meth:`SQLiteBackend.import_transaction`)."""

    stores_salts = True

    def __init__(self, cur: sqlite3.Cursor, sid: str, wlock: WriteLock | None = None):
        self.cur = cur
        self.sid = sid
        self.wlock = wlock
        self.began = time.perf_counter()
        self.yielded: bool | None = False  # writers_waiting said yes (None: by time, not seen)
        self.sql: tuple[tuple, str, str] | None = None  # ((base position, salted), one row, IMPORT_GROUP rows)
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
        return self.cur.execute(NEXT_SEQ, (self.sid,)).fetchone()[0]

    def next_position(self) -> int:
        return self.cur.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()[0]

    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        return self.cur.execute(_STORED, (self.sid, first_seq, last_seq)).fetchall()

    def event_id_seq(self, event_id: str) -> int | None:
        row = self.cur.execute("SELECT seq FROM events WHERE session_id = ? AND event_id = ?",
                               (self.sid, event_id)).fetchone()
        return None if row is None else row[0]

    def writers_waiting(self) -> bool:
        waiting = self.wlock.others_waiting() if self.wlock is not None else None
        if waiting is None:  # cannot tell: one may be waiting once the chunk held the lock a while
            if time.perf_counter() - self.began < YIELD_AFTER:
                return False
            self.yielded = None
            return True
        if waiting:
            self.yielded = True
        return waiting

    def let_writers_in(self) -> None:
        """After the commit of a transaction that ended for waiting writers: let them take
        the lock before the importer asks for it again (see :data:`PAUSE_SHARE`)."""
        took = time.perf_counter() - self.began
        if self.yielded is None:
            time.sleep(took * PAUSE_SHARE)
        elif self.yielded and self.wlock is not None:
            self.wlock.let_waiters_in(max(took * PAUSE_SHARE, 0.0005))

    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        salted = bool(rows) and len(rows[0]) == 6
        if self.sql is None or self.sql[0] != (position0, salted):
            self.sql = ((position0, salted), _import_sql(position0, self.sid, 1, salted),
                        _import_sql(position0, self.sid, IMPORT_GROUP, salted))
            if not self.added:
                self.first_position = position0 + rows[0][0]
        refused = self._insert(rows)
        stored = len(rows) if refused is None else refused[0]
        self.added += stored
        self.added_bytes += sum(map(len, map(_payload, rows[:stored] if refused is not None else rows)))
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
