"""Benchmarks on PostgreSQL: eventstore against raw psycopg doing the same inserts, on one
server, side by side in one run (``python tools/bench.py --backend postgres`` runs this).

Usage (from the repository root)::

    python tools/bench.py --backend postgres                 # a throwaway server (tests/pgserver.py)
    python tools/bench.py --backend postgres --pg-url URL    # an existing server (a new database in it)
    python tools/bench.py --backend postgres --quick         # seconds
    python tools/bench.py --backend postgres --pg-setting synchronous_commit=off

Workloads (each figure the best of ``--repeat`` rounds, the systems interleaved round by
round so background load hits them alike):

* ``append``: single appends, one event per transaction, into a session of 1,000 events.
  eventstore ``Session.append`` (payload encoding, hash chain, the insert guard) against
  raw psycopg: the same INSERT into the same ``events`` table (triggers included), in the
  same transaction shape (one autocommit statement), with seq and hash kept by the caller.
* ``batch``: ``Session.append_many`` of 100 events against raw psycopg inserting the same
  100 rows in one statement (``unnest``), one transaction each.
* ``import``: ``EventStore.import_jsonl`` of a generated file (parse, validate, hash, then
  ``COPY``) against raw psycopg ``executemany`` of the same rows in one transaction (rows
  prepared beforehand: raw does less work).
* ``writers``: 8 processes each appending to a session of its own, against 1 process:
  events per second and the p50/p99 latency of one append.

The server's settings are printed with the results (docs/benchmarks.md keeps them).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

#: Server settings of the throwaway server: PostgreSQL's durable defaults (fsync on,
#: synchronous_commit on), so a commit waits for its WAL flush as it would in production.
DURABLE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
SHOWN = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "wal_level",
         "max_connections")


def payload(i: int, size: int = 200) -> dict:
    return {"content": ("lorem ipsum " * (size // 12))[:size], "i": i}


def best(rounds: int, systems: dict) -> dict[str, float]:
    out = {k: float("inf") for k in systems}
    for _ in range(rounds):
        for name, fn in systems.items():
            out[name] = min(out[name], fn())
    return out


def _raw_conn(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def bench_append(url: str, n: int, rounds: int) -> dict:
    from eventstore import EventStore
    from eventstore.chain import chain_hash, genesis_hash
    from eventstore.codec import dumps, event_line

    store = EventStore.open(url)
    s = store.create_session("append-es")
    s.append_many([("tool/result", payload(i)) for i in range(1000)])
    raw = _raw_conn(url)
    store.create_session("append-raw")
    state = {"seq": 0, "hash": genesis_hash("append-raw")}

    def raw_one(i: int) -> None:
        seq, ts = state["seq"], time.time()
        pj = dumps(payload(i))
        h = chain_hash(state["hash"], event_line("tool/result", seq, ts, pj))
        raw.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES (%s, %s, %s, %s, %s, %s)",
                    ("append-raw", seq, "tool/result", ts, pj, h))
        state["seq"], state["hash"] = seq + 1, h

    for i in range(1000):
        raw_one(i)

    def es() -> float:
        t = time.perf_counter()
        for i in range(n):
            s.append("tool/result", payload(i))
        return (time.perf_counter() - t) / n

    def rw() -> float:
        t = time.perf_counter()
        for i in range(n):
            raw_one(i)
        return (time.perf_counter() - t) / n

    systems = {"eventstore": es, "raw psycopg": rw}
    peer = _agents_peer(url)
    if peer is not None:
        loop, session = peer

        def agents() -> float:
            t = time.perf_counter()
            for i in range(n):
                loop.run_until_complete(session.add_items([{"role": "tool", "content": payload(i)["content"],
                                                            "tool_call_id": "c", "i": i}]))
            return (time.perf_counter() - t) / n

        systems["Agents SDK SQLAlchemySession"] = agents
    res = best(rounds, systems)
    if peer is not None:
        peer[0].run_until_complete(peer[1].engine.dispose())
        peer[0].close()
    store.close()
    raw.close()
    return res


def _agents_peer(url: str):
    """The OpenAI Agents SDK's SQLAlchemySession on the same server (psycopg's async driver),
    or None when the SDK is not installed."""
    try:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    except ImportError:
        return None
    import asyncio

    loop = asyncio.new_event_loop()
    session = SQLAlchemySession.from_url("bench-agents", url=url.replace("postgresql://", "postgresql+psycopg://"),
                                         create_tables=True)
    return loop, session


def bench_batch(url: str, batches: int, rounds: int, size: int = 100) -> dict:
    from eventstore import EventStore
    from eventstore.chain import chain_rows, genesis_hash
    from eventstore.codec import dumps

    store = EventStore.open(url)
    s = store.create_session("batch-es")
    raw = _raw_conn(url)
    store.create_session("batch-raw")
    state = {"seq": 0, "hash": genesis_hash("batch-raw")}
    sql = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) SELECT %s, %s + u.i - 1, u.t, u.ts, u.p, u.h "
           "FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[]) WITH ORDINALITY AS u(t, ts, p, h, i)")

    def es() -> float:
        t = time.perf_counter()
        for _ in range(batches):
            s.append_many([("assistant/chunk", payload(i, 40)) for i in range(size)])
        return (time.perf_counter() - t) / (batches * size)

    def rw() -> float:
        t = time.perf_counter()
        for _ in range(batches):
            ts = time.time()
            rows = chain_rows(state["hash"], state["seq"], ["assistant/chunk"] * size, [ts] * size,
                              [dumps(payload(i, 40)) for i in range(size)])
            raw.execute(sql, ("batch-raw", state["seq"], rows[0::4], rows[1::4], rows[2::4], rows[3::4]))
            state["seq"] += size
            state["hash"] = rows[-1]
        return (time.perf_counter() - t) / (batches * size)

    res = best(rounds, {"eventstore": es, "raw psycopg": rw})
    store.close()
    raw.close()
    return res


def bench_import(url: str, events: int, rounds: int, work: Path) -> dict:
    from eventstore import EventStore
    from eventstore.chain import chain_hash, genesis_hash
    from eventstore.codec import dumps, event_line

    store = EventStore.open(url)
    raw = _raw_conn(url)
    counter = {"n": 0}

    def write_file() -> tuple[Path, str, list]:
        counter["n"] += 1
        sid = f"import-{counter['n']}"
        path = work / f"{sid}.jsonl"
        rows = []
        prev = genesis_hash(sid)
        with path.open("w", encoding="utf-8") as f:
            f.write(json.dumps({"type": "session/meta", "id": sid}, separators=(",", ":")) + "\n")
            for seq in range(events):
                pj = dumps(payload(seq, 120))
                line = event_line("tool/result", seq, 1.5 + seq, pj)
                prev = chain_hash(prev, line)
                rows.append((sid, seq, "tool/result", 1.5 + seq, pj, prev))
                f.write(line + "\n")
        return path, sid, rows

    def es() -> float:
        path, _sid, _rows = write_file()
        t = time.perf_counter()
        store.import_jsonl(path)
        return (time.perf_counter() - t) / events

    def rw() -> float:
        _path, sid, rows = write_file()
        t = time.perf_counter()
        with raw.transaction():
            raw.execute("INSERT INTO sessions (id, created_at) VALUES (%s, %s)", (sid, time.time()))
            with raw.cursor() as cur:
                cur.executemany("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                                "VALUES (%s, %s, %s, %s, %s, %s)", rows)
        return (time.perf_counter() - t) / events

    res = best(rounds, {"eventstore (COPY)": es, "raw psycopg executemany": rw})
    store.close()
    raw.close()
    return res


def _writer(url: str, index: int, count: int, barrier, results) -> None:
    from eventstore import EventStore

    with EventStore.open(url, busy_timeout=60) as store:
        s = store.create_session(f"writer-{index}-{time.time_ns()}")
        lat = []
        barrier.wait()
        t0 = time.perf_counter()
        for i in range(count):
            t = time.perf_counter()
            s.append("tool/result", payload(i))
            lat.append(time.perf_counter() - t)
        results.put((index, t0, time.perf_counter(), lat))


def bench_writers(url: str, procs: int, count: int) -> dict:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    results = ctx.Queue()
    ps = [ctx.Process(target=_writer, args=(url, i, count, barrier, results)) for i in range(procs)]
    for p in ps:
        p.start()
    got = [results.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    start = min(g[1] for g in got)
    end = max(g[2] for g in got)
    lat = sorted(x for g in got for x in g[3])
    return {"events_per_s": procs * count / (end - start), "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))]}


def server_settings(url: str) -> dict:
    with _raw_conn(url) as conn:
        return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SHOWN}


def run(a) -> int:
    """Run the PostgreSQL benchmarks (``a``: bench.py's parsed arguments plus ``pg_url``)."""
    from pgserver import PgServer

    server = None
    if a.pg_url:
        import psycopg

        base = a.pg_url
        name = f"bench_{int(time.time())}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + "/" + name
    else:
        extra = dict(item.split("=", 1) for item in getattr(a, "pg_setting", []))
        server = PgServer(settings={**DURABLE, **extra}).start()
        url = server.url(server.create_database("bench"))
    quick = a.quick
    rounds = 2 if quick else 5
    try:
        with tempfile.TemporaryDirectory(prefix="eventstore-pgbench-") as tmp:
            settings = server_settings(url)
            print("running append ...", file=sys.stderr, flush=True)
            app = bench_append(url, 50 if quick else 500, rounds)
            print("running batch ...", file=sys.stderr, flush=True)
            bat = bench_batch(url, 5 if quick else 50, rounds)
            print("running import ...", file=sys.stderr, flush=True)
            imp = bench_import(url, 2000 if quick else 50000, 2 if quick else 3, Path(tmp))
            print("running writers ...", file=sys.stderr, flush=True)
            count = 50 if quick else 500
            one = bench_writers(url, 1, count * 2)
            eight = bench_writers(url, 8, count)
    finally:
        if server is not None:
            server.stop()
    command = "python tools/bench.py " + " ".join(sys.argv[1:])
    lines = [f"`{command}`", "", "Server: " + ", ".join(f"{k}={v}" for k, v in settings.items()), ""]

    def rate(sec: float) -> str:
        return f"{1 / sec:,.0f}/s"

    lines += ["| workload | eventstore | raw psycopg | ratio (eventstore / raw) |", "|---|---|---|---|"]
    lines.append(f"| single append (1 event per transaction) | {rate(app['eventstore'])} | {rate(app['raw psycopg'])} "
                 f"| {app['raw psycopg'] / app['eventstore']:.2f}x |")
    if "Agents SDK SQLAlchemySession" in app:
        peer = app["Agents SDK SQLAlchemySession"]
        lines.append(f"| single append: Agents SDK `SQLAlchemySession.add_items` (1 item) | {rate(peer)} "
                     f"| {rate(app['raw psycopg'])} | {app['raw psycopg'] / peer:.2f}x |")
    lines.append(f"| batch of 100 (events) | {rate(bat['eventstore'])} | {rate(bat['raw psycopg'])} "
                 f"| {bat['raw psycopg'] / bat['eventstore']:.2f}x |")
    e, r = imp["eventstore (COPY)"], imp["raw psycopg executemany"]
    lines.append(f"| import (events; eventstore: JSONL file, COPY; raw: executemany of ready rows) | {rate(e)} "
                 f"| {rate(r)} | {r / e:.2f}x |")
    lines += ["", "| writers (own sessions) | events/s | p50 append | p99 append |", "|---|---|---|---|"]
    for label, w in (("1 process", one), ("8 processes", eight)):
        lines.append(f"| {label} | {w['events_per_s']:,.0f} | {w['p50_ms']:.2f} ms | {w['p99_ms']:.2f} ms |")
    lines.append(f"\n8 writers / 1 writer: {eight['events_per_s'] / one['events_per_s']:.2f}x")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": settings, "append": app, "batch": bat, "import": imp,
                                            "writers": {"1": one, "8": eight}}, indent=1))
    return 0
