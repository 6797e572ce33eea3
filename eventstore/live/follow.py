"""Live tailing: yield events as other processes commit them.

:meth:`EventStore.follow <eventstore.EventStore.follow>` (every session, by global
position) and :meth:`Session.follow <eventstore.Session.follow>` (one session, by seq) are
generators built on :func:`follow_store` and :func:`follow_session`. How they work:

* A follower reads through a connection of its own (the backend's
  :meth:`~eventstore.backends.base.Backend.follower`), so it sees the store's own appends
  like anyone else's, and never waits on the store.
* It reads new rows a page at a time; with nothing new it waits for a commit
  (:meth:`~eventstore.backends.base.Follower.wait_for_commit`: SQLite polls
  ``PRAGMA data_version`` every ``poll_interval`` seconds, PostgreSQL waits on
  LISTEN/NOTIFY). No read transaction stays open while the caller handles the events or
  while the follower waits.
* Positions and seqs are assigned in commit order (a row committed later always has a
  larger position and, within a session, a larger seq): reading ``> last seen`` yields each
  event exactly once, in order.
* A large import commits in chunks, its session hidden until the last one
  (:mod:`eventstore.io.bulk`), so its events are stored at positions that other events pass
  while it runs. A reader of positions stops before the first position of every unfinished
  import whose owner still holds its import lock, and waits there (writers do not); it goes
  on past an import whose owner died or gave up (:class:`DeadOwners`), whose events stay
  hidden.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from eventstore.errors import InvalidEvent
from eventstore.log.codec import encodable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import TypeVar

    from eventstore.backends.base import Backend, Follower

    E = TypeVar("E")  # what make_event makes of a row (the store's Event)

__all__ = ["DeadOwners", "follow_store", "follow_session", "wait_for_session", "DEFAULT_POLL_INTERVAL", "PAGE"]

DEFAULT_POLL_INTERVAL = 0.02  # seconds between two looks when nothing changed (polling backends)
PAGE = 256  # rows per query: each query is a read transaction, kept short so checkpoints can finish


class DeadOwners:
    """The owners of unfinished imports that are known dead, for the ``dead_owners`` of
    :meth:`~eventstore.backends.base.Backend.events_after` and ``last_position``.

    Calling it with a reader (the backend or a follower) lists the unfinished imports (one
    small query; none, almost always) and asks the backend whether each owner's lock is
    still held; a dead owner never comes back (a resumed import gets a new owner), so it is
    asked once. The owners are tested *before* the caller's read, so an import that
    completes between the two is never taken for dead while its rows are still hidden."""

    def __init__(self, backend: Backend):  # or an EventStore: both have imports and import_owner_alive
        self.backend = backend
        self.dead: set[str] = set()

    def __call__(self, reader: Backend | Follower | None = None) -> list[str]:
        """The dead owners among the unfinished imports ``reader`` sees now."""
        rows = (reader or self.backend).imports()
        if not rows:
            return []
        out = []
        for _sid, _first, owner, _started in rows:
            if owner not in self.dead and not self.backend.import_owner_alive(owner):
                self.dead.add(owner)
            if owner in self.dead:
                out.append(owner)
        return out


def _check_interval(value, what: str) -> float | None:
    """``value`` as seconds (a finite number >= 0; None stays None). Raises
    :class:`InvalidEvent` (the store's ValueError) otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise InvalidEvent(f"{what} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def follow_store(backend: Backend, after_position: int, *, poll_interval: float = DEFAULT_POLL_INTERVAL,
                 idle_timeout: float | None = None, make_event: Callable[[tuple], E]) -> Iterator[E]:
    """Yield ``make_event(row)`` for every ``EventRow`` with ``position > after_position``,
    in position order, forever, as rows are committed; stop after ``idle_timeout`` seconds
    with no new row (None: never). Raises :class:`InvalidEvent` at once for a bad interval
    (not at the first event), and :class:`DatabaseError` when the database cannot be read."""
    poll = _check_interval(poll_interval, "poll_interval")
    idle = _check_interval(idle_timeout, "idle_timeout")
    dead = DeadOwners(backend)
    return _follow(backend, lambda f, after: f.events_after(after, PAGE, dead(f)), after_position, 0, poll, idle,
                   make_event)


def follow_session(backend: Backend, session_id: str, after_seq: int, *,
                   poll_interval: float = DEFAULT_POLL_INTERVAL, idle_timeout: float | None = None,
                   make_event: Callable[[tuple], E]) -> Iterator[E]:
    """As :func:`follow_store`, for the events of ``session_id`` with ``seq > after_seq``,
    in seq order."""
    poll = _check_interval(poll_interval, "poll_interval")
    idle = _check_interval(idle_timeout, "idle_timeout")
    return _follow(backend, lambda f, after: f.session_events_after(session_id, after, PAGE), after_seq, 2,
                   poll, idle, make_event)


def wait_for_session(backend: Backend, session_id: str, *, poll_interval: float = DEFAULT_POLL_INTERVAL,
                     timeout: float | None = None) -> bool:
    """Block until ``session_id`` is stored and visible (an import's session once its last
    chunk commits) and return True, or return False after ``timeout`` seconds (None: no
    limit). Waits for commits as the followers do (LISTEN/NOTIFY, or polling); PostgreSQL
    notifies inserts of events, so a session created without events may be seen only at
    its first event (or at the timeout): nothing for a follower to show before that."""
    poll = _check_interval(poll_interval, "poll_interval")
    limit = _check_interval(timeout, "timeout")
    if not encodable(session_id):  # no database can hold it
        return False
    follower = backend.follower(poll)
    try:
        start = time.monotonic()
        while True:
            # A read of the follower first: wait_for_commit wakes for any commit after it began.
            follower.session_events_after(session_id, -1, 1)
            if backend.session_meta(session_id) is not None:
                return True
            if limit is None:
                follower.wait_for_commit(None)
                continue
            left = limit - (time.monotonic() - start)
            if left <= 0 or not follower.wait_for_commit(left):
                return backend.session_meta(session_id) is not None
    finally:
        follower.close()


def _follow(backend: Backend, read: Callable[[Follower, int], list], after: int, cursor_column: int,
            poll_interval: float, idle_timeout: float | None,
            make_event: Callable[[tuple], E]) -> Iterator[E]:
    follower = backend.follower(poll_interval)
    try:
        idle_since = time.monotonic()
        while True:
            rows = read(follower, after)
            if rows:
                after = rows[-1][cursor_column]
                for row in rows:
                    yield make_event(row)
                idle_since = time.monotonic()
                if len(rows) == PAGE:  # a full page: look again at once
                    continue
            if idle_timeout is None:
                follower.wait_for_commit(None)
                continue
            left = idle_timeout - (time.monotonic() - idle_since)
            if left <= 0 or not follower.wait_for_commit(left):
                return
    finally:
        follower.close()
