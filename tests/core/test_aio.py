"""The asyncio API (eventstore.core.aio): every method awaitable, the loop never blocked (also
while another process holds the write lock), many tasks on one store, cancellation, and
the two additions to both APIs: ``events(last=N)`` and ``session(id, create=True)``."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import agent_workers
import pytest
import workers
from conftest import TESTS

from eventstore import AsyncEventStore, EventStore, SessionNotFound

CTX = workers.CTX  # fresh processes from a server that imported eventstore once
DATA = TESTS / "data"


def run(coro):
    return asyncio.run(coro)


def test_every_method_is_awaitable(backend_url):
    async def main():
        async with AsyncEventStore.open(backend_url) as store:
            s = await store.create_session("a")
            assert (await s.append("user/message", {"content": "1+1?"})).seq == 0
            got = await s.append_many([("assistant/message", {"content": "2"}), ("turn/end", {})])
            assert [e.seq for e in got] == [1, 2]
            assert await s.derive_messages() == [{"role": "user", "content": "1+1?"},
                                                 {"role": "assistant", "content": "2"}]
            assert await s.messages_json() == s.sync.messages_json()
            assert [e.seq async for e in s.events()] == [0, 1, 2]
            assert [e.seq async for e in s.events(after_seq=0, types="assistant/message")] == [1]
            assert [e.seq async for e in s.events(last=2)] == [1, 2]
            assert await s.next_seq() == 3
            assert [i.id for i in await store.sessions()] == ["a"]
            with pytest.raises(SessionNotFound):
                await store.session("nope")
            assert (await store.session("a")).id == "a"
            sid = await store.import_jsonl(DATA / "demo.jsonl")
            buf = io.BytesIO()
            assert await store.export_jsonl(sid, buf) == 15
            assert buf.getvalue() == (DATA / "demo.jsonl").read_bytes()
            t = await store.create_session("t")
            await t.append_many([("turn/start", {}), ("step/start", {"step": 0}),
                                 ("assistant/message", {"tool_calls": [{"id": "c1", "type": "function",
                                                                        "function": {"name": "f", "arguments": "{}"}}]})])
            repaired = await t.repair()
            assert [e.type for e in repaired] == ["tool/result", "step/end", "turn/end"]
            assert await store.last_position() == repaired[-1].position
        store2 = await AsyncEventStore.open(backend_url)
        assert len(await store2.sessions()) == 3
        await store2.close()

    run(main())


def test_wraps_a_sync_store_and_leaves_it_open(store):
    async def main():
        async with AsyncEventStore(store) as astore:
            s = await astore.session("w", create=True)
            await s.append("turn/start", {})
    run(main())
    assert store.session("w").next_seq() == 1  # still open


def test_follow_yields_events_as_other_tasks_append(backend_url):
    async def main():
        async with AsyncEventStore.open(backend_url) as store:
            s = await store.create_session("f")
            other = await store.create_session("o")
            await s.append("turn/start", {})

            async def writer():
                for i in range(300):  # more than a page of the follower
                    await s.append("user/message", {"content": str(i)})
                    if i % 50 == 0:
                        await other.append("turn/start", {})

            task = asyncio.create_task(writer())
            seen = []
            async for e in s.follow(after_seq=0, poll_interval=0.005):
                seen.append(e.seq)
                if len(seen) == 300:
                    break
            await task
            assert seen == list(range(1, 301))
            all_seen = [e.position async for e in store.follow(idle_timeout=0.05)]
            assert all_seen == list(range(1, 308))
            assert [e.seq async for e in s.follow(after_seq=299, idle_timeout=0.05)] == [300]
    run(main())


def test_many_tasks_share_one_store(backend_url):
    async def main():
        async with AsyncEventStore.open(backend_url) as store:
            shared = await store.create_session("shared")

            async def agent(i: int):
                own = await store.session(f"own-{i}", create=True)
                for k in range(10):
                    await shared.append("user/message", {"content": f"{i}:{k}"})
                    await own.append_many([("user/message", {"content": str(k)}), ("turn/end", {})])
                return [e.seq async for e in own.events()]

            results = await asyncio.gather(*(agent(i) for i in range(30)))
            assert all(r == list(range(20)) for r in results)
            contents = [e.payload["content"] async for e in shared.events()]
            assert sorted(contents) == sorted(f"{i}:{k}" for i in range(30) for k in range(10))
            assert await shared.next_seq() == 300
    run(main())


class _LockHolder:
    """Another process holding the store's write lock until released."""

    def __init__(self, url: str, folder: Path):
        self.ready = folder / "lock.ready"
        self.release_file = folder / "lock.release"
        self.p = CTX.Process(target=agent_workers.hold_write_lock_until,
                             args=(url, str(self.ready), str(self.release_file)))

    def __enter__(self):
        self.p.start()
        deadline = time.monotonic() + 60
        while not self.ready.exists():
            assert self.p.is_alive() and time.monotonic() < deadline
            time.sleep(0.01)
        return self

    def release(self):
        self.release_file.write_text("go")

    def __exit__(self, *exc):
        self.release()
        self.p.join(30)
        assert self.p.exitcode == 0


async def _lag_probe(stop: asyncio.Event, lags: list[float], tick: float = 0.01):
    """Sleep ``tick`` again and again; record how late each wake-up came."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(tick)
        lags.append(loop.time() - t - tick)


def test_an_append_waiting_for_another_process_does_not_block_the_loop(backend_url, tmp_path):
    EventStore.open(backend_url).close()

    async def main():
        async with AsyncEventStore.open(backend_url, busy_timeout=60) as store:
            s = await store.create_session("s")
            with _LockHolder(backend_url, tmp_path) as holder:
                stop, lags = asyncio.Event(), []
                probe = asyncio.create_task(_lag_probe(stop, lags))
                append = asyncio.create_task(s.append("user/message", {"content": "waited"}))
                # the loop keeps ticking for a whole second while the append waits on the lock
                while len(lags) < 10 or sum(lags) + 0.01 * len(lags) < 1.0:
                    await asyncio.sleep(0.01)
                assert not append.done()
                holder.release()
                event = await append
                stop.set()
                await probe
            assert event.seq == 0
            assert max(lags) < 0.2, max(lags)   # a blocked loop would show the whole wait
    run(main())


def test_a_cancelled_append_lands_whole_or_not_and_a_retry_stores_it_once(backend_url, tmp_path):
    EventStore.open(backend_url).close()

    async def main():
        async with AsyncEventStore.open(backend_url, busy_timeout=60, max_workers=1) as store:
            s = await store.create_session("c")
            with _LockHolder(backend_url, tmp_path) as holder:
                # started: its worker thread is waiting for the lock when it is cancelled
                started = asyncio.create_task(s.append("user/message", {"content": "a"}, event_id="e-a"))
                while not store._pool._work_queue.empty() or not store._pool._threads:  # until the worker took it
                    await asyncio.sleep(0.005)
                await asyncio.sleep(0.1)  # (and is waiting for the lock)
                # queued behind it on the one worker: not started when cancelled
                queued = asyncio.create_task(s.append_many([("user/message", {"content": "b", "event_id": "e-b"}),
                                                            ("user/message", {"content": "c", "event_id": "e-c"})]))
                await asyncio.sleep(0.05)
                started.cancel()
                queued.cancel()
                for task in (started, queued):
                    with pytest.raises(asyncio.CancelledError):
                        await task
                holder.release()
            # the retries: the started append had landed (returned, not written twice); the
            # queued batch had not (written now)
            a = await s.append("user/message", {"content": "a"}, event_id="e-a")
            bc = await s.append_many([("user/message", {"content": "b", "event_id": "e-b"}),
                                      ("user/message", {"content": "c", "event_id": "e-c"})])
            assert (a.seq, [e.seq for e in bc]) == (0, [1, 2])
            assert [e.payload["content"] async for e in s.events()] == ["a", "b", "c"]
    run(main())


# --- both APIs: the last N events, get-or-create -------------------------------------------


def test_events_last_n(store):
    s = store.create_session("l")
    s.append_many([("user/message", {"content": str(i)}) if i % 3 else ("turn/start", {}) for i in range(50)])
    assert [e.seq for e in s.events(last=3)] == [47, 48, 49]
    assert [e.seq for e in s.events(last=2, types=["turn/start"])] == [45, 48]
    assert [e.seq for e in s.events(after_seq=47, last=5)] == [48, 49]
    assert list(s.events(last=0)) == []
    assert len(list(s.events(last=1000))) == 50
    with pytest.raises(ValueError):
        s.events(last=-1)


def test_events_last_n_reads_the_index_backwards(sqlite_store):
    plan = sqlite_store._backend._read("EXPLAIN QUERY PLAN SELECT seq, position, type, ts, payload FROM events "
                       "WHERE session_id = ? AND seq > ? ORDER BY seq DESC LIMIT ?", ("x", -1, 3))
    detail = " ".join(str(r[-1]) for r in plan)
    assert "USING INDEX" in detail and "TEMP B-TREE" not in detail, detail


def test_get_or_create(store):
    a = store.session("g", create=True)
    a.append("turn/start", {})
    assert store.session("g", create=True).next_seq() == 1
    assert [i.id for i in store.sessions()] == ["g"]


def test_get_or_create_across_processes(backend_url):
    EventStore.open(backend_url).close()
    n = 4
    barrier, results = CTX.Barrier(n), CTX.Queue()
    procs = [CTX.Process(target=agent_workers.get_or_create, args=(str(backend_url), "race", i, barrier, results))
             for i in range(n)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in range(n)]
    for p in procs:
        p.join(30)
    assert all(r[0] == "ok" for r in got), got
    assert sorted(r[2] for r in got) == list(range(n))
    with EventStore.open(backend_url) as store:
        assert [i.id for i in store.sessions()] == ["race"]
        assert store.session("race").next_seq() == n


def test_the_core_imports_no_agent_framework():
    import subprocess
    import sys
    code = ("import sys, eventstore, eventstore.core.aio, eventstore.log.context, eventstore.cli, eventstore.integrations; "
            "eventstore.EventStore; print(sorted(m for m in ('agents', 'pydantic_ai', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"
