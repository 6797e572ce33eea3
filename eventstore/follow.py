"""Live tailing: yield events as other processes commit them.

:meth:`EventStore.follow <eventstore.EventStore.follow>` (every session, by global
position) and :meth:`Session.follow <eventstore.Session.follow>` (one session, by seq) are
generators built on :func:`follow_rows`. How they work:

* A follower reads through a connection of its own (not the store's), so it sees the
  store's own appends like anyone else's, and never waits on the store's thread lock.
* It asks ``PRAGMA data_version`` whether anything was committed since it last looked (a
  read of the shared WAL index, microseconds), and only then queries for new rows, a page at
  a time. With nothing new it sleeps ``poll_interval`` seconds.
* Every query runs to completion (``fetchall``) in autocommit mode, so no read transaction
  stays open while the caller handles the events or while the follower sleeps: the WAL can
  be checkpointed and reset beside a tail that runs for days.
* Positions and seqs are assigned inside the write transaction that commits them (writers
  are serialized), so a row committed later always has a larger position (and, within a
  session, a larger seq): reading ``> last seen`` yields each event exactly once, in order.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .errors import DatabaseError, InvalidEvent

if TYPE_CHECKING:
    from .store import Event, EventStore

__all__ = ["follow_rows", "DEFAULT_POLL_INTERVAL", "PAGE"]

DEFAULT_POLL_INTERVAL = 0.02  # seconds between two looks when nothing changed
PAGE = 256  # rows per query: each query is a read transaction, kept short so checkpoints can finish

STORE_SQL = ("SELECT position, session_id, seq, type, ts, payload FROM events "
             "WHERE position > ? ORDER BY position LIMIT ?")
SESSION_SQL = ("SELECT position, session_id, seq, type, ts, payload FROM events "
               "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")


def _check_interval(value, what: str) -> float | None:
    """``value`` as seconds (a finite number >= 0; None stays None). Raises
    :class:`InvalidEvent` (the store's ValueError) otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise InvalidEvent(f"{what} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def follow_rows(store: EventStore, sql: str, key: tuple, after: int, cursor_column: int, *,
                poll_interval: float = DEFAULT_POLL_INTERVAL, idle_timeout: float | None = None,
                make_event: Callable[[tuple], Event]) -> Iterator[Event]:
    """Yield ``make_event(row)`` for each row of ``sql`` (parameters ``*key, after, PAGE``)
    whose cursor column (``row[cursor_column]``) is greater than ``after``, forever, as
    rows are committed; stop after ``idle_timeout`` seconds with no new row (None: never).

    Raises :class:`InvalidEvent` at once for a bad interval (not at the first event), and
    :class:`DatabaseError` when the database cannot be read.
    """
    return _follow_rows(store, sql, key, min(after, MAX_CURSOR), cursor_column,
                        _check_interval(poll_interval, "poll_interval"),
                        _check_interval(idle_timeout, "idle_timeout"), make_event)


#: The largest seq or position a query can bind (SQLite's integers are 64-bit); a cursor
#: past it is the same as at it: nothing comes after.
MAX_CURSOR = 2**63 - 1


def _follow_rows(store: EventStore, sql: str, key: tuple, after: int, cursor_column: int,
                 poll_interval: float, idle_timeout: float | None,
                 make_event: Callable[[tuple], Event]) -> Iterator[Event]:
    conn, close = _reader(store)
    try:
        execute = conn.execute
        last_version = None
        idle_since = time.monotonic()
        while True:
            try:
                version = execute("PRAGMA data_version").fetchall()[0][0]
                rows = execute(sql, (*key, after, PAGE)).fetchall() if version != last_version else ()
            except sqlite3.Error as e:
                raise DatabaseError(f"cannot follow {store._file or 'the in-memory database'}: {e}") from None
            if rows:
                # Only now is nothing left to read as of `version`: a short page means
                # caught up; a full page means look again at once, whatever the version.
                last_version = version if len(rows) < PAGE else None
                after = rows[-1][cursor_column]
                for row in rows:
                    yield make_event(row)
                idle_since = time.monotonic()
                continue
            last_version = version
            if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                return
            time.sleep(poll_interval)
    finally:
        close()


def _reader(store: EventStore) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """A connection for a follower, and how to give it back. A file gets its own
    connection; an in-memory database has only the store's (and then ``data_version`` does
    not move for the store's own writes, so the follower queries on every poll)."""
    if store._file is None:
        conn = _MemoryReader(store)
        return conn, lambda: None
    try:
        fairy = store.engine.raw_connection()
    except Exception as e:
        raise DatabaseError(f"cannot open {store._file} to follow it: {e}") from None
    return fairy.driver_connection, fairy.close


class _MemoryReader:
    """The in-memory store's own connection, read under the store's lock, with a
    ``data_version`` that always says "look again"."""

    def __init__(self, store: EventStore):
        self.store = store
        self.n = 0

    def execute(self, sql: str, params: tuple = ()):
        if sql == "PRAGMA data_version":
            self.n += 1
            return _Rows([(self.n,)])
        return _Rows(self.store._read(sql, params))


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows

