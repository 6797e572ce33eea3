"""The follower: LISTEN/NOTIFY on a connection of its own (polling where LISTEN is not available).
"""

from __future__ import annotations

import time
from collections.abc import Collection

import psycopg
from psycopg import errors as pg_errors

from eventstore.errors import (
    DatabaseError,
)

from ..base import Backend, Follower
from .connection import open_connection, wait_flushed
from .statements import (
    CHANNEL,
    EVENT_COLUMNS,
    FLUSH,
    IMPORTS,
    LOSSY,
    RECONNECT_PAUSE,
    RECONNECT_SECONDS,
    STORE_ROWS,
)


class PgFollower(Follower):
    """A follower on a connection of its own that LISTENs on :data:`CHANNEL` (polls every
    ``poll_interval`` seconds where LISTEN fails). When the server goes away (a restart), it
    connects again, for up to :data:`RECONNECT_SECONDS`, and goes on where it was once the
    last event it handed out is still stored; a crash that lost it (commits are asynchronous
    with ``durability="may-lose-recent"``) raises :class:`DatabaseError` instead, since new events
    may then take the positions this follower has passed."""

    def __init__(self, backend: Backend, poll_interval: float):
        self._backend = backend
        self._poll = poll_interval
        self._last: tuple | None = None  # the last EventRow handed out
        self._watch_flush = False  # (see _flush)
        # The store connected when it opened, so a failure here is the server going away
        # (a restart under a starting `tail -f`): waited for as a lost connection is.
        self._connect()

    def _open(self) -> None:
        self._conn = open_connection(self._backend.url, self._backend.display)
        self._sync_level = None  # unless durability is LOSSY: the level FLUSH commits with
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

    def _connect(self) -> None:
        """:meth:`_open`, tried again for up to :data:`RECONNECT_SECONDS` while the server is
        away. Raises :class:`DatabaseError` when it is not back by then."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                self._open()
                return
            except (DatabaseError, psycopg.Error):
                if time.monotonic() > deadline:
                    raise
                time.sleep(RECONNECT_PAUSE)

    def _reconnect(self) -> None:
        """Connect again after the connection was lost. Raises :class:`DatabaseError` when
        the server is not back within :data:`RECONNECT_SECONDS`, or lost the last event
        handed out (a WAL replay keeps a prefix of the commits: when that event is there,
        every event before it is too)."""
        self._connect()
        if self._last is not None:
            try:
                row = self._conn.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE position = %s",
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
        :data:`FLUSH`, or, for a role that may not call ``pg_logical_emit_message`` (a
        superuser's ``eventstore roles`` withholds it from the auditor), by watching the
        server's flushed WAL position pass its insert position of now."""
        if not self._watch_flush:
            try:
                self._conn.execute(FLUSH, (self._sync_level,))
                return
            except pg_errors.InsufficientPrivilege:
                self._watch_flush = True
        wait_flushed(self._conn)

    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        return self._rows(STORE_ROWS, (after_position, list(dead_owners), limit), events=True)

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self._rows(IMPORTS, ())

    def session_events_after(self, session_id: str, after_seq: int,
                             limit: int) -> list[tuple[int, str, int, str, float, str]]:
        return self._rows(f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq > %s "
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
