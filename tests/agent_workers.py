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
    store._backend._transact(hold)
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


def run_turn(db: str, session_id: str, question: str, answer: str, asked: str | None, go: str | None,
             report: str) -> None:
    """A process running one Agents SDK turn on an EventStoreSession (hooks on). With
    ``asked``/``go``: once its model has the request, it writes ``asked`` and answers only
    when the file ``go`` exists. Writes ``report`` (JSON): the outcome and what its model
    was sent."""
    import asyncio
    import json

    from agents import Agent, Runner
    from scripted_agents import ScriptedModel, text

    from eventstore import EventStore
    from eventstore.integrations.openai_agents import EventStoreSession

    class Gated(ScriptedModel):
        async def get_response(self, *args, **kwargs):
            response = await super().get_response(*args, **kwargs)
            if asked is not None:
                with open(asked, "w") as f:
                    f.write("asked")
                while not os.path.exists(go):
                    await asyncio.sleep(0.01)
            return response

    model = Gated([text(answer, id=f"msg_{answer}")])
    out: dict = {}
    try:
        with EventStore.open(db, busy_timeout=30) as store, EventStoreSession(session_id, store) as session:
            result = Runner.run_sync(Agent(name=answer, model=model), question, session=session,
                                     hooks=session.hooks())
            out["final_output"] = result.final_output
    except Exception as e:
        out["error"] = type(e).__name__
        out["notes"] = getattr(e, "__notes__", [])
    out["model_input"] = [item.get("content") for item in model.requests[0][1]] if model.requests else None
    with open(report, "w") as f:
        json.dump(out, f)
