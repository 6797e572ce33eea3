"""Code that the concurrency tests run in separate processes (multiprocessing, spawn).

Kept apart from the test modules so a child process imports only this and eventstore.
Every function reports through its arguments (a queue, or a side file), never through
shared memory, and never raises out of the process without reporting first.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback

# Fresh processes that share nothing with the test process: "forkserver" starts them from a
# clean server process (started like "spawn") that has imported eventstore, the drivers and
# the Agents SDK once, so each child does not pay the imports again (half a second to two
# seconds of CPU each). Nothing is opened in the server before it forks. The one context of
# every test that starts processes: the preload list is the server's, one per test process.
CTX = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
if CTX.get_start_method() == "forkserver":
    CTX.set_forkserver_preload(["eventstore", "eventstore.backends.sqlite", "eventstore.backends.postgres",
                                "psycopg", "alembic.command", "agents", "workers", "agent_workers"])


def _report(results, tag, fn):
    try:
        results.put((tag, "ok", fn()))
    except BaseException:  # report everything, the test decides
        results.put((tag, "error", traceback.format_exc()))


def shared_and_own(db: str, index: int, count: int, shared_id: str, options: dict, barrier, results) -> None:
    """Append ``count`` events to the shared session and ``count`` to an own session,
    alternating; report what each append returned as ``(session, seq, position, n)``.
    ``options`` go to EventStore.open."""
    from eventstore import EventStore

    def run():
        got = []
        with EventStore.open(db, busy_timeout=30, **options) as store:
            shared = store.session(shared_id)
            own = store.create_session(f"own-{index}")
            barrier.wait()
            for n in range(count):
                for s in (shared, own):
                    ev = s.append("assistant/chunk", {"delta": {"content": f"w{index} n{n}"}, "w": index, "n": n})
                    got.append((s.id, ev.seq, ev.position, n))
        return got

    _report(results, index, run)


def optimistic_rounds(db: str, index: int, session_id: str, rounds: int, barrier, results) -> None:
    """Each round: read the next seq, wait for every process, then append with that
    ``expected_seq``; report per round ``("won", seq)`` or ``("conflict", expected, actual)``."""
    from eventstore import EventStore, SeqConflict

    def run():
        out = []
        with EventStore.open(db, busy_timeout=30) as store:
            s = store.session(session_id)
            for r in range(rounds):
                expected = s.next_seq()
                barrier.wait()
                try:
                    ev = s.append("user/message", {"content": f"p{index} r{r}"}, expected_seq=expected)
                    out.append(("won", r, ev.seq))
                except SeqConflict as e:
                    out.append(("conflict", r, e.expected_seq, e.actual_seq))
                barrier.wait()  # everyone has tried before the next round reads next_seq
        return out

    _report(results, index, run)


def idempotent_rounds(db: str, index: int, session_id: str, rounds: int, barrier, results) -> None:
    """Each round every process appends the same event under the same event_id at once;
    report the (seq, position) each got back."""
    from eventstore import EventStore

    def run():
        out = []
        with EventStore.open(db, busy_timeout=30) as store:
            s = store.session(session_id)
            for r in range(rounds):
                barrier.wait()
                ev = s.append("tool/result", {"tool_call_id": f"call_{r}", "content": "42"}, event_id=f"key-{r}")
                out.append((r, ev.seq, ev.position))
        return out

    _report(results, index, run)


def migrate(dbs: list[str], index: int, barrier, results) -> None:
    """For each (new) database file: open it at the same moment as the others, report
    whether this process migrated it, then append one event through a normal open."""
    import alembic.command  # noqa: F401 - imported before the race, not during it

    from eventstore import EventStore
    from eventstore.backends.sqlite import engine as _engine

    def run():
        out = []
        for db in dbs:
            barrier.wait()
            conn = _engine.connect(str(db), 30)
            try:
                out.append(_engine.upgrade(conn, str(db), 30).migrated)
            finally:
                conn.close()
            with EventStore.open(db, busy_timeout=30) as store:
                store.create_session(f"s{index}").append("turn/start", {})
        return out

    _report(results, index, run)


def append_forever(db: str, session_id: str, side: str) -> None:
    """Append single events until killed; after each append returns, record its seq and
    a digest of its payload in the side file (the acknowledged appends)."""
    from eventstore import EventStore

    with EventStore.open(db, busy_timeout=30) as store, open(side, "a", buffering=1) as log:
        s = store.session(session_id)
        n = 0
        while True:
            payload = {"content": f"event {n} " + "x" * (n % 200)}
            ev = s.append("assistant/chunk", {"delta": payload, "n": n})
            log.write(f"{ev.seq} {n}\n")
            n += 1


def append_many_forever(db: str, session_id: str, side: str, batch: int) -> None:
    """Append batches of ``batch`` events until killed; record each returned batch."""
    from eventstore import EventStore

    with EventStore.open(db, busy_timeout=30) as store, open(side, "a", buffering=1) as log:
        s = store.session(session_id)
        b = 0
        while True:
            events = s.append_many([("assistant/chunk", {"delta": {"content": "y" * 100}, "batch": b, "i": i})
                                    for i in range(batch)])
            log.write(f"{b} {events[0].seq} {events[-1].seq}\n")
            b += 1


def import_forever(db: str, source: str, side: str) -> None:
    """Import the JSONL file ``source`` again and again under new session ids, until
    killed; record each session id after its import returned."""
    import io

    from eventstore import EventStore

    # the events without the meta line, so that each import can name its own session
    body = open(source, "rb").read().split(b"\n", 1)[1]
    with EventStore.open(db, busy_timeout=30) as store, open(side, "a", buffering=1) as log:
        n = 0
        while True:
            sid = store.import_jsonl(io.BytesIO(body), name=source, session_id=f"imp-{n}")
            log.write(sid + "\n")
            n += 1


def hold_write_lock(db: str, ready: str) -> None:
    """Open a write transaction (with a row in it), say so, and sleep until killed."""
    from eventstore import EventStore

    store = EventStore.open(db, busy_timeout=30)
    def hold(cur) -> None:
        cur.execute("INSERT INTO sessions (id, created_at, meta) VALUES ('ghost', 0, '{}')")
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)

    store._backend._transact(hold)


def hold_checkpoint_lock(db: str, ready: str, release: str) -> None:
    """Hold SQLite's checkpoint lock on ``db`` as another process's checkpoint in progress
    does (a POSIX lock on byte 121 of the ``-shm`` file, https://www.sqlite.org/walformat.html),
    say so in the file ``ready``, and let go once the file ``release`` exists."""
    import fcntl

    fd = os.open(db + "-shm", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 121)
    with open(ready, "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists(release):
        time.sleep(0.005)
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 121)
    os.close(fd)


def follower(db: str, session_id: str | None, total: int, barrier, results, tag, durability: str = "normal") -> None:
    """Follow the store (or one session) until ``total`` events were seen; report
    ``(position, session, seq)`` of each, in the order they were yielded."""
    from eventstore import EventStore

    def run():
        seen = []
        with EventStore.open(db, busy_timeout=30, durability=durability) as store:
            source = store.follow(after_position=0, poll_interval=0.005, idle_timeout=60) if session_id is None \
                else store.session(session_id).follow(after_seq=None, poll_interval=0.005, idle_timeout=60)
            barrier.wait()
            for ev in source:
                seen.append((ev.position, ev.session_id, ev.seq, ev.payload.get("w"), ev.payload.get("n")))
                if len(seen) >= total:
                    break
        return seen

    _report(results, tag, run)


def writer(db: str, index: int, count: int, shared_id: str | None, payload_bytes: int, barrier, results,
           durability: str = "normal") -> None:
    """Append ``count`` events (to the shared session, or an own one) as fast as possible."""
    from eventstore import EventStore

    def run():
        with EventStore.open(db, busy_timeout=30, durability=durability) as store:
            s = store.session(shared_id) if shared_id else store.create_session(f"w{index}")
            filler = "z" * payload_bytes
            barrier.wait()
            for n in range(count):
                s.append("tool/result", {"tool_call_id": "c", "content": filler, "w": index, "n": n})
        return count

    _report(results, index, run)

