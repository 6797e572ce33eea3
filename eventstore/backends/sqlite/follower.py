"""Followers: readers on a connection of their own that wait for commits (``follow``, ``tail -f``, the viewer).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection

from eventstore.errors import (
    DatabaseError,
)

from ..base import Backend, Follower
from .statements import IMPORTS, MAX_CURSOR, SESSION_ROWS, STORE_ROWS, import_owners


class FileFollower(Follower):
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
        return self._rows(STORE_ROWS, (min(after_position, MAX_CURSOR), import_owners(dead_owners), limit))

    def imports(self) -> list[tuple[str, int, str, float]]:
        try:
            return self.conn.execute(IMPORTS).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot follow {self.path}: {e}") from None

    def session_events_after(self, session_id: str, after_seq: int, limit: int) -> list:
        return self._rows(SESSION_ROWS, (session_id, min(after_seq, MAX_CURSOR), limit))

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


class MemoryFollower(Follower):
    """An in-memory database has only the store's connection (read under the store's lock),
    and ``data_version`` does not move for the store's own writes: the follower looks again
    after every poll interval."""

    def __init__(self, backend: Backend):
        self.backend = backend

    def events_after(self, after_position: int, limit: int, dead_owners: Collection[str] = ()) -> list:
        return self.backend.events_after(after_position, limit, dead_owners)

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self.backend.imports()

    def session_events_after(self, session_id: str, after_seq: int, limit: int) -> list:
        return self.backend._read(SESSION_ROWS, (session_id, min(after_seq, MAX_CURSOR), limit))

    def wait_for_commit(self, timeout: float | None) -> bool:
        time.sleep(_MEMORY_POLL if timeout is None else min(_MEMORY_POLL, timeout))
        return True

    def close(self) -> None:
        pass


_MEMORY_POLL = 0.02  # seconds
