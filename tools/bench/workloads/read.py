"""Reading one session: its chat messages (the projection), and all its events.

On SQLite, timed in CPU seconds of this process (every thread: the SDK reads on a worker
thread), not wall time: a read is CPU work in this one process, and on a shared machine
the wall time of a round mostly measures who else had the cores. On PostgreSQL, wall
time: the server's share of a read (the projection is built there) runs in another process.
"""

from __future__ import annotations

import asyncio
import time

import orjson

from eventstore import EventStore

from .. import data
from ..harness import ES
from ..peers import agents_sdk, eventsourcing_lib, raw_psycopg, raw_sqlite
from ._systems import sqlite_peers

SUMMARY = ("derive_messages and events() of one session of 1k/10k/100k messages; raw read, SDK get_items "
           "(CPU time on SQLite)")
NAME = "Read one session"


def _timer(bench):
    """``timed(fn, count)``: seconds of one unit when ``fn`` does ``count`` units, in CPU time
    of this process on SQLite, in wall time on PostgreSQL (see the module's docstring)."""
    clock = time.process_time if bench.backend == "sqlite" else time.perf_counter

    def timed(fn, count: int) -> float:
        t0 = clock()
        fn()
        return (clock() - t0) / count
    return timed


def run(bench) -> None:
    """Time reading one session at each size."""
    for size in bench.pick([1_000], [1_000, 10_000, 100_000]):
        _at(bench, size)


def _at(bench, size: int) -> None:
    timed = _timer(bench)
    clock = "CPU time" if bench.backend == "sqlite" else "wall time"
    events = list(data.chat(size))
    reps = max(1, bench.pick(2, 100_000 // size))
    target = bench.target(f"read-{size}")
    store = EventStore.open(target)
    s = store.create_session("bench")
    for k in range(0, len(events), 5000):
        s.append_many(events[k:k + 5000])
    store.close()
    store = EventStore.open(target)  # reopened: the reads start on a settled database
    s = store.session("bench")
    closers = [store.close]
    if bench.backend == "sqlite":
        conn = raw_sqlite.connect(bench.target(f"read-{size}-raw"))
        raw_sqlite.Log(conn, "bench").append_many(events)
        raw_name = raw_sqlite.NAME

        def raw_messages():
            return raw_sqlite.messages(conn, "bench")

        def raw_events():
            return [orjson.loads(p) for _t, _seq, _ts, p in conn.execute(
                "SELECT type, seq, ts, payload FROM events WHERE session_id = ? ORDER BY seq", ("bench",))]
    else:
        conn = raw_psycopg.connect(target)
        raw_name = raw_psycopg.NAME + ", same table"

        def raw_messages():
            rows = conn.execute("SELECT type, payload FROM events WHERE session_id = %s AND type IN "
                                "('user/message', 'assistant/message', 'tool/result') ORDER BY seq", ("bench",))
            return data.derive({"type": t, **orjson.loads(p)} for t, p in rows)

        def raw_events():
            return [orjson.loads(r[3]) for r in conn.execute(
                "SELECT type, seq, ts, payload FROM events WHERE session_id = %s ORDER BY seq", ("bench",))]
    closers.append(conn.close)
    case = f"messages of a session of {size:,} ({clock})"
    systems = {ES: lambda: timed(lambda: [s.derive_messages() for _ in range(reps)], reps * size),
               raw_name: lambda: timed(lambda: [raw_messages() for _ in range(reps)], reps * size)}
    notes = {ES: "Session.derive_messages", raw_name: "SELECT the message rows, orjson, mapped in Python"}
    peers = sqlite_peers(bench)
    if bench.backend != "sqlite":  # the SDK reads its own SQLite file: the yardstick on PostgreSQL too
        peers[agents_sdk.NAME] = agents_sdk.available() if bench.peers else "--no-peers"
    if peers.get(agents_sdk.NAME) == "":
        loop = asyncio.new_event_loop()
        sdk = agents_sdk.session("bench", bench.folder(f"read-{size}") / "sdk.db",
                                 bench.durability if bench.backend == "sqlite" else "normal")
        loop.run_until_complete(sdk.add_items([agents_sdk.item(t, p) for t, p in events]))
        systems[agents_sdk.NAME] = lambda: timed(
            lambda: [loop.run_until_complete(sdk.get_items()) for _ in range(reps)], reps * size)
        notes[agents_sdk.NAME] = "get_items() of the same messages"
        closers += [sdk.close, loop.close]
    if peers.get(eventsourcing_lib.NAME) == "":
        rec = eventsourcing_lib.Recorder(bench.folder(f"read-{size}") / "evsrc.db")
        rec.append_many(events)
        systems[eventsourcing_lib.NAME] = lambda: timed(lambda: [rec.messages() for _ in range(reps)], reps * size)
        notes[eventsourcing_lib.NAME] = "select_events + the projection in Python"
        closers.append(rec.close)
    for name, reason in peers.items():
        if reason:
            bench.skip(NAME, case, name, reason)
    bench.measure(NAME, case, systems, "message", notes)
    bench.check(f"read {size}: eventstore derives {size} messages", len(s.derive_messages()) == size)
    bench.check(f"read {size}: the raw read derives the same messages", raw_messages() == s.derive_messages())
    case = f"events() of a session of {size:,} ({clock})"
    bench.measure(NAME, case, {ES: lambda: timed(lambda: [list(s.events()) for _ in range(reps)], reps * size),
                               raw_name: lambda: timed(lambda: [raw_events() for _ in range(reps)], reps * size)},
                  "event", {ES: "list(Session.events())", raw_name: "SELECT the rows, orjson each payload"})
    for close in closers:
        close()

