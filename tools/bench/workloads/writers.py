"""Concurrent writers: N processes, each appending single events to a session of its own."""

from __future__ import annotations

import multiprocessing as mp
import time

from .. import data
from ..harness import ES, Figure, percentiles

SUMMARY = "1 and 8 writer processes appending single events at once; eventstore against the raw driver"
NAME = "Concurrent writers"


def _writer(system: str, target: str, durability: str, index: int, count: int, barrier, results,
            stop=None) -> None:
    """Append ``count`` events (or, given ``stop``, until it is set) and report each one's latency."""
    sid = f"w{index}-{time.time_ns()}"
    if system == ES:
        from eventstore import EventStore

        store = EventStore.open(target, durability=durability, busy_timeout=60)
        s = store.create_session(sid)
        append, close = s.append, store.close
    elif target.startswith("postgresql"):
        from ..peers import raw_psycopg

        conn = raw_psycopg.connect(target, durability)
        append, close = raw_psycopg.Log(conn, sid).append, conn.close
    else:
        from ..peers import raw_sqlite

        conn = raw_sqlite.connect(target)
        append, close = raw_sqlite.Log(conn, sid).append, conn.close
    append("assistant/chunk", data.chunk(0))  # connection made, head known
    lat = []
    barrier.wait()
    t0 = time.perf_counter()
    i = 0
    while (i < count) if stop is None else not stop.is_set():
        t = time.perf_counter()
        append("assistant/chunk", data.chunk(i))
        lat.append(time.perf_counter() - t)
        i += 1
    results.put((t0, time.perf_counter(), lat))
    close()


def _context():
    # forkserver: a clean process (no inherited connection or thread, as docs/concurrency.md asks)
    # that has imported the writer's modules once; each writer is forked from it (a spawned
    # interpreter takes ~0.5 s to start and import here)
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["eventstore", __name__])
    else:
        ctx = mp.get_context("spawn")
    return ctx


def _once(system: str, target: str, durability: str, procs: int, count: int) -> tuple[float, list[float]]:
    ctx = _context()
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_writer, args=(system, target, durability, i, count, barrier, results))
          for i in range(procs)]
    for p in ps:
        p.start()
    got = [results.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"a {system} writer failed ({p.exitcode})")
    wall = max(g[1] for g in got) - min(g[0] for g in got)
    return wall / (procs * count), [x for g in got for x in g[2]]


def _importer(target: str, durability: str, path: str, barrier, stop, results) -> None:
    from eventstore import EventStore

    with EventStore.open(target, durability=durability) as store:
        barrier.wait()
        t0 = time.perf_counter()
        store.import_jsonl(path)
        results.put(("import", time.perf_counter() - t0))
    stop.set()


def _during_import(target: str, durability: str, procs: int, path: str) -> tuple[float, list[float]]:
    """``procs`` eventstore writers appending while another process imports ``path``:
    the import's seconds and every append's latency."""
    ctx = _context()
    barrier, results, stop = ctx.Barrier(procs + 1), ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=_writer, args=(ES, target, durability, i, 0, barrier, results, stop))
          for i in range(procs)]
    ps.append(ctx.Process(target=_importer, args=(target, durability, path, barrier, stop, results)))
    for p in ps:
        p.start()
    got = [results.get(timeout=1800) for _ in ps]
    for p in ps:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"a writer or the importer failed ({p.exitcode})")
    seconds = next(g[1] for g in got if g[0] == "import")
    return seconds, [x for g in got if g[0] != "import" for x in g[2]]


def run(bench) -> None:
    """Time 1 and 8 writer processes of eventstore and of the raw driver."""
    from eventstore import EventStore

    from ._systems import raw_psycopg, raw_sqlite

    count = bench.pick(100, 2000)
    targets = {ES: bench.target("writers")}
    EventStore.open(targets[ES]).close()
    raw = raw_sqlite.NAME if bench.backend == "sqlite" else raw_psycopg.NAME
    if bench.backend == "sqlite":
        targets[raw] = bench.target("writers-raw")
        raw_sqlite.connect(targets[raw]).close()
    else:
        targets[raw] = targets[ES]  # the same events table, its triggers and position lock
    for procs in (1, 8):
        case = f"{procs} writer{'s' if procs > 1 else ''} × {count:,} appends"
        lat: dict[str, list[float]] = {ES: [], raw: []}

        def block(system: str, procs=procs, lat=lat) -> float:
            per, got = _once(system, targets[system], bench.durability, procs, count)
            lat[system] += got
            return per

        figs = bench.measure(NAME, case, {ES: lambda: block(ES), raw: lambda: block(raw)}, "event",
                             {ES: f"Session.append in each process, durability {bench.durability}",
                              raw: "the same appends by the raw driver" + (" (busy handler)" if raw == raw_sqlite.NAME
                                                                        else ", same table")})
        for name, f in figs.items():
            f.extra = percentiles(lat[name])
    # live writers while a large file is imported (eventstore's import commits in chunks)
    events = bench.pick(2_000, 200_000)
    path = bench.folder("writers") / f"import-{events}.jsonl"
    if not path.exists():
        data.write_jsonl(path, "imported", data.take(data.agent_events(99), events))
    times, lat = [], []
    for r in range(bench.rounds):
        target = bench.target(f"writers-import-{r}")
        EventStore.open(target).close()  # the schema, before five processes open it at once
        seconds, got = _during_import(target, bench.durability, 4, str(path))
        times.append(seconds / events)
        lat += got
    bench.add(Figure(NAME, f"4 writers during an import of {events:,} events", ES, "imported event", times,
                     "import_jsonl in a fifth process; the writers append until it ends",
                     extra={"appends": f"{len(lat):,}", **percentiles(lat)}))
