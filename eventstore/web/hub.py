"""The live feed: one thread follows the store and tells the open pages what changed.

The thread first reads the log into the index (:meth:`Hub.build`, through the backend's
``session_rows``, ``session_counts`` and ``state_rows``), then follows new commits from the
position the index was built at with one backend follower (SQLite: ``PRAGMA data_version``
polls; PostgreSQL: LISTEN/NOTIFY), applies each new event to the
:class:`~eventstore.web.index.SessionIndex`, and wakes the subscribers (the
server-sent-event streams of open pages) on the event loop. A subscriber learns only *that*
something changed; it reads what is new itself (from the seq it sent last), so a burst of a
thousand chunks wakes it once, and nothing is missed or sent twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from eventstore.backends.capabilities import SessionIndex as IndexReads
from eventstore.live.follow import DeadOwners

from .index import SessionIndex, state_extra

if TYPE_CHECKING:
    from eventstore.core.store import EventStore

__all__ = ["Hub", "Subscription"]

ALL = "*"  # the topic of subscribers who want to hear of every session (the sessions page)
PAGE = 50_000  # rows a query while building the index: no read holds a transaction across pages
FOLLOW_PAGE = 1000  # rows a query while following
IDLE_WAKE = 0.25  # seconds: how often the follow thread looks at the stop flag when nothing happens


class Subscription:
    """A subscriber's wake-up flag: ``await wait()`` returns when its topic changed since
    the last wait (at once if it did while the subscriber was busy)."""

    def __init__(self, hub: Hub, topic: str):
        self.hub = hub
        self.topic = topic
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

    @property
    def closing(self) -> bool:
        """The server is stopping: end the stream."""
        return self.hub.closing

    async def wait(self, timeout: float) -> bool:
        """True when woken, False after ``timeout`` seconds without a change."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        self._event.clear()
        return True

    def close(self) -> None:
        self.hub._unsubscribe(self)


class Hub:
    """Builds the sessions index and keeps it (and the subscribers) current."""

    def __init__(self, store: EventStore, poll_interval: float = 0.05):
        self.store = store
        self.index = SessionIndex()
        self.poll_interval = poll_interval
        self._subs: dict[str, set[Subscription]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[str] = set()
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.position = 0
        self.error: str | None = None
        self.closing = False
        self.ready = False
        self._reads = store.capability(IndexReads)  # the viewer's index reads (and the core's)
        self._dead = DeadOwners(self._reads)  # unfinished imports: wait for the live ones

    def build(self) -> None:
        """Read the log into the index (once, before :meth:`start`; seconds per million
        events). Until it returns, :attr:`ready` is False."""
        reads = self._reads
        position = reads.last_position(self._dead(reads))
        self.index.load(reads.session_rows(), reads.session_counts(position), self._states(position))
        self.position = position
        self.ready = True

    def _states(self, upto_position: int) -> Iterator[tuple]:
        after = 0
        while True:
            rows = self._reads.state_rows(after, upto_position, PAGE)
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """On a thread of its own: :meth:`build` the index (unless built), then follow the
        store, waking subscribers on ``loop``."""
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="eventstore-web-follow", daemon=True)
        self._thread.start()

    def close_streams(self) -> None:
        """Wake every subscriber with :attr:`closing` set, so that the server's open
        streams end and it can stop at once. Safe to call from a signal handler."""
        self.closing = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.notify()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self.ready and not self._stop.is_set():
            try:
                self.build()
                self.error = None
            except Exception as e:  # the database cannot be read (yet): say so, try again
                self.error = str(e)
                self._stop.wait(1.0)
        while not self._stop.is_set():
            try:
                follower = self.store.follower(self.poll_interval)
            except Exception as e:  # the database went away, say: tell the pages, try again
                self.error = str(e)
                self._stop.wait(1.0)
                continue
            try:
                self._follow(follower)
            except Exception as e:
                self.error = str(e)
                self._stop.wait(1.0)
            finally:
                follower.close()

    def _follow(self, follower) -> None:
        """Apply every event after :attr:`position` as it commits, until :meth:`stop`."""
        while not self._stop.is_set():
            rows = follower.events_after(self.position, FOLLOW_PAGE, self._dead(follower))
            for position, sid, seq, type_, ts, payload in rows:
                self.index.apply(position, sid, seq, type_, ts, state_extra(type_, payload))
                self.position = position
                self._changed(sid)
            self.error = None
            if len(rows) < FOLLOW_PAGE:
                follower.wait_for_commit(IDLE_WAKE)

    def _changed(self, session_id: str) -> None:
        with self._pending_lock:
            first = not self._pending
            self._pending.add(session_id)
        if first and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is closed: the server is stopping
                pass

    def _flush(self) -> None:
        with self._pending_lock:
            changed, self._pending = self._pending, set()
        for topic in (*changed, ALL):
            for sub in self._subs.get(topic, ()):
                sub.notify()

    def subscribe(self, topic: str = ALL) -> Subscription:
        """A subscription to one session's changes, or to every session's (``ALL``).
        Call on the event loop."""
        sub = Subscription(self, topic)
        self._subs.setdefault(topic, set()).add(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.topic]
