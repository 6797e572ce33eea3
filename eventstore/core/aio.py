"""The asyncio API: :class:`AsyncEventStore` and :class:`AsyncSession`.

Every method of the sync API (:class:`~eventstore.EventStore`,
:class:`~eventstore.Session`) as a coroutine, ``events`` and ``follow`` as async
iterators::

    async with AsyncEventStore.open("agent.db") as store:
        s = await store.session("chat-1", create=True)
        await s.append("user/message", {"content": "hi"})
        async for event in s.events(last=10):
            ...

How: each call runs the sync API on a worker thread of the store's own pool
(``max_workers`` threads, 4 by default), so the event loop never waits on the database (a
lock, a checkpoint, a round trip): a coroutine whose append waits seconds for another
process's write lock only suspends, and the other tasks keep running. The same path serves
every backend: SQLite has no async driver, and on PostgreSQL psycopg's ``AsyncConnection``
measured no better (appends are serialized by the position lock, and the encoding and
hashing would run on the loop; docs/concurrency.md, "asyncio", has both measurements).
Writes of one store are serialized by its backend (one write connection), so many tasks
can share one store; followers read through connections of their own.

Cancellation: a call that is cancelled before its worker thread starts it never runs; one
that is already running runs to its end on its thread (the awaiting task sees
``CancelledError`` at once). So a cancelled ``append`` or ``append_many`` either landed
whole or not at all, never half: each is one transaction. To find out which, retry it with
the same ``event_id`` (in ``append_many``: every payload with its ``event_id``): a retry
of an append that landed returns the stored event instead of writing a second one.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from eventstore.backends.base import Follower
from eventstore.core.store import Event, EventStore, Session, SessionInfo, event_from_row
from eventstore.live import follow as _follow
from eventstore.log.validate import check_seq as _check_seq

__all__ = ["AsyncEventStore", "AsyncSession"]

_PAGE = 256  # events per worker-thread hop of an async iterator


class AsyncSession:
    """The async handle of one stored session; the methods of :class:`eventstore.Session`
    as coroutines. Get one from :meth:`AsyncEventStore.create_session` or
    :meth:`AsyncEventStore.session`. ``sync`` is the sync handle."""

    __slots__ = ("id", "sync", "_store")

    def __init__(self, store: AsyncEventStore, session: Session):
        self.id = session.id
        self.sync = session
        self._store = store

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def append(self, type: str, payload: dict | None = None, *, ts: float | None = None,
                     expected_seq: int | None = None, event_id: str | None = None) -> Event:
        """:meth:`eventstore.Session.append`, awaitable: returns the stored :class:`Event`,
        raises the same errors. Cancelled, it landed whole or not at all (see the module's
        docstring); retry with the same ``event_id`` to be sure it is stored once."""
        return await self._store._run(self.sync.append, type, payload, ts=ts, expected_seq=expected_seq,
                                      event_id=event_id)

    async def append_many(self, events: Iterable[tuple], *, expected_seq: int | None = None) -> list[Event]:
        """:meth:`eventstore.Session.append_many`, awaitable (all or none, also when
        cancelled). A generator of events is read on the worker thread."""
        return await self._store._run(self.sync.append_many, events, expected_seq=expected_seq)

    async def next_seq(self) -> int:
        """The seq the next appended event will get (= the number of events stored)."""
        return await self._store._run(self.sync.next_seq)

    def events(self, after_seq: int | None = None, types: Iterable[str] | str | None = None, *,
               last: int | None = None) -> AsyncIterator[Event]:
        """:meth:`eventstore.Session.events` as an async iterator (``last=N``: the newest N,
        one index read). Pages of events are read on a worker thread."""
        return self._store._iterate(functools.partial(self.sync.events, after_seq, types, last=last))

    def follow(self, after_seq: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> AsyncIterator[Event]:
        """:meth:`eventstore.Session.follow` as an async iterator: the session's events
        with ``seq > after_seq``, then each new one as any process commits it. Waits with
        ``asyncio.sleep`` between looks (the loop stays free); stops after ``idle_timeout``
        seconds without a new event (None: never). Raises :class:`DatabaseError`."""
        after = -1 if after_seq is None else _check_seq(after_seq, "after_seq")
        sid = self.id
        return self._store._poll(lambda f, a: f.session_events_after(sid, a, _follow.PAGE), after, 2,
                                 poll_interval, idle_timeout)

    async def derive_messages(self) -> list[dict]:
        """The projection (:meth:`eventstore.Session.derive_messages`)."""
        return await self._store._run(self.sync.derive_messages)

    async def messages_json(self) -> str:
        """The projection as JSON array text (:meth:`eventstore.Session.messages_json`)."""
        return await self._store._run(self.sync.messages_json)

    async def repair(self) -> list[Event]:
        """:meth:`eventstore.Session.repair`, awaitable."""
        return await self._store._run(self.sync.repair)

    async def context_at(self, seq: int | None = None) -> dict:
        """:meth:`eventstore.Session.context_at`, awaitable: the model request as it stood
        before the event at ``seq`` (at the head when None)."""
        return await self._store._run(self.sync.context_at, seq)


class _Opening:
    """What :meth:`AsyncEventStore.open` returns: await it for the store, or use it in
    ``async with`` (which closes the store at the end)."""

    def __init__(self, opener: Callable[[], AsyncEventStore]):
        self._opener = opener
        self._store: AsyncEventStore | None = None

    def __await__(self):
        return asyncio.get_running_loop().run_in_executor(None, self._opener).__await__()

    async def __aenter__(self) -> AsyncEventStore:
        self._store = await self
        return self._store

    async def __aexit__(self, *exc) -> None:
        await self._store.close()


class AsyncEventStore:
    """An :class:`eventstore.EventStore` for asyncio code; every call runs on a worker
    thread of the store's own pool, never on the event loop.

    Open with ``await AsyncEventStore.open(...)`` or ``async with AsyncEventStore.open(...)
    as store``; or wrap a sync store you already have: ``AsyncEventStore(store)`` (closing
    the wrapper then leaves the sync store open). ``sync`` is the sync store; one store may
    be used by many tasks at once.
    """

    def __init__(self, store: EventStore, *, max_workers: int = 4, _owns: bool = False):
        self.sync = store
        self._owns = _owns
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="eventstore-aio")

    def __repr__(self) -> str:
        return f"AsyncEventStore({self.sync.display!r})"

    @classmethod
    def open(cls, target: str | os.PathLike = "eventstore.db", *, max_workers: int = 4,
             **options: Any) -> _Opening:
        """Open the database at ``target`` (an SQLite path or a ``postgresql://`` URL) as
        :meth:`eventstore.EventStore.open` does, with the same keyword ``options``
        (``busy_timeout``, ``durability``, ``write_queue``, ``readonly``), on a worker
        thread. Await the result, or use it in ``async with``. Raises
        :class:`DatabaseError`."""
        return _Opening(lambda: cls(EventStore.open(target, **options), max_workers=max_workers, _owns=True))

    async def close(self) -> None:
        """Wait for the calls in flight, then close the store (if this wrapper opened it)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._close)

    def _close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._owns:
            self.sync.close()

    async def __aenter__(self) -> AsyncEventStore:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- the worker threads ------------------------------------------------------------

    async def _run(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a worker thread. Cancelling the caller cancels a call
        not yet started; a started one runs to its end (see the module's docstring)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def _iterate(self, make: Callable[[], Iterable]) -> AsyncIterator:
        """Iterate ``make()`` (a sync iterator, created and advanced on worker threads) a
        page at a time."""
        it = await self._run(lambda: iter(make()))
        try:
            while True:
                page = await self._run(lambda: list(itertools.islice(it, _PAGE)))
                for item in page:
                    yield item
                if len(page) < _PAGE:
                    return
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()  # a generator between pages holds no transaction: closing it is instant

    async def _poll(self, read: Callable[[Follower, int], list], after: int, cursor_column: int,
                    poll_interval: float, idle_timeout: float | None) -> AsyncIterator[Event]:
        """Follow on one backend follower (its own connection, held for the whole iteration):
        each look (``read(follower, after)``, a page of ``EventRow``) runs on a worker
        thread; between looks that find nothing, ``asyncio.sleep(poll_interval)``."""
        poll_interval = _follow._check_interval(poll_interval, "poll_interval")
        idle_timeout = _follow._check_interval(idle_timeout, "idle_timeout")
        loop = asyncio.get_running_loop()
        pending = self._pool.submit(self.sync.follower, poll_interval)
        try:
            follower = await asyncio.wrap_future(pending)
        except asyncio.CancelledError:  # the follower may still be made: close it then
            pending.add_done_callback(lambda f: None if f.exception() else f.result().close())
            raise
        try:
            idle_since = loop.time()
            while True:
                pending = self._pool.submit(read, follower, after)
                rows = await asyncio.wrap_future(pending)
                if rows:
                    after = rows[-1][cursor_column]
                    for row in rows:
                        yield event_from_row(row)
                    idle_since = loop.time()
                    if len(rows) == _follow.PAGE:  # a full page: look again at once
                        continue
                if idle_timeout is not None and loop.time() - idle_since >= idle_timeout:
                    return
                await asyncio.sleep(poll_interval)
        finally:
            if pending.done():
                follower.close()
            else:  # cancelled during a look: close once the worker thread is done with it
                pending.add_done_callback(lambda _: follower.close())

    # --- the API -----------------------------------------------------------------------

    async def create_session(self, session_id: str | None = None, *, meta: dict | None = None) -> AsyncSession:
        """:meth:`eventstore.EventStore.create_session`, awaitable. Raises
        :class:`SessionExists`, :class:`InvalidEvent`."""
        return AsyncSession(self, await self._run(self.sync.create_session, session_id, meta=meta))

    async def session(self, session_id: str, *, create: bool = False) -> AsyncSession:
        """:meth:`eventstore.EventStore.session`, awaitable; ``create=True`` is a race-free
        get-or-create. Raises :class:`SessionNotFound` (without ``create``)."""
        return AsyncSession(self, await self._run(self.sync.session, session_id, create=create))

    async def sessions(self) -> list[SessionInfo]:
        """The registry (:meth:`eventstore.EventStore.sessions`)."""
        return await self._run(self.sync.sessions)

    async def last_position(self) -> int:
        """The global position of the newest event (0 when empty)."""
        return await self._run(self.sync.last_position)

    def follow(self, after_position: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> AsyncIterator[Event]:
        """:meth:`eventstore.EventStore.follow` as an async iterator: every event of every
        session with ``position > after_position``, then each new one as committed."""
        after = 0 if after_position is None else _check_seq(after_position, "after_position")
        dead = _follow.DeadOwners(self.sync)
        return self._poll(lambda f, a: f.events_after(a, _follow.PAGE, dead(f)), after, 0, poll_interval,
                          idle_timeout)

    async def import_jsonl(self, source: str | os.PathLike | IO[bytes], **options: Any) -> str:
        """:meth:`eventstore.EventStore.import_jsonl` on a worker thread (same options:
        ``name``, ``session_id``, ``append``, ``salvage``, ``created_at``); returns the session id."""
        return await self._run(self.sync.import_jsonl, source, **options)

    async def export_jsonl(self, session_id: str, dest: str | os.PathLike | IO) -> int:
        """:meth:`eventstore.EventStore.export_jsonl` on a worker thread; returns the
        number of events written."""
        return await self._run(self.sync.export_jsonl, session_id, dest)

    async def repair(self, session_id: str) -> list[Event]:
        """:meth:`eventstore.Session.repair` of the session ``session_id``."""
        return await self._run(lambda: self.sync.session(session_id).repair())
