"""Code that the asyncio and agent-integration tests run in separate processes (spawn).

Each function reports through a file or a queue, never by raising out of the process."""

from __future__ import annotations

import os
import time
import traceback


def hold_write_lock_until(db: str, ready: str, release: str) -> None:
    """Take what every append of the store ``db`` must wait for, write ``ready``, and hold
    it until the file ``release`` exists; then commit. SQLite: the store's write lock (write
    queue and SQLite's lock, one open transaction). PostgreSQL: the position lock that the
    insert guard takes (a table lock held to the commit, from plain psycopg)."""
    def hold(*_) -> None:
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
        while not os.path.exists(release):
            time.sleep(0.005)

    if db.startswith("postgresql://"):
        import psycopg

        from eventstore.backends.postgres import LOCK_POSITIONS

        with psycopg.connect(db) as conn, conn.transaction():
            conn.execute(LOCK_POSITIONS)
            hold()
        return
    from eventstore import EventStore

    store = EventStore.open(db, busy_timeout=60)
    store.backend._transact(hold)
    store.close()


def get_or_create(db: str, session_id: str, index: int, barrier, results) -> None:
    """Wait for the others, then ``session(session_id, create=True)`` and append one event."""
    try:
        from eventstore import EventStore

        with EventStore.open(db, busy_timeout=30) as store:
            barrier.wait(60)
            s = store.session(session_id, create=True)
            results.put(("ok", index, s.append("user/message", {"content": f"from {index}"}).seq))
    except BaseException:
        results.put(("error", index, traceback.format_exc()))


def add_items(db: str, session_id: str, content: str) -> None:
    """A second process: one EventStoreSession.add_items of a user message."""
    import asyncio

    from eventstore import EventStore
    from eventstore.integrations.openai_agents import EventStoreSession

    with EventStore.open(db, busy_timeout=30) as store:
        asyncio.run(EventStoreSession(session_id, store).add_items([{"content": content, "role": "user"}]))
