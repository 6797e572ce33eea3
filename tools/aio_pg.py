"""PostgreSQL: the asyncio API on a worker thread against psycopg's own ``AsyncConnection``.

Side by side, on one server, the same work through two paths:

* ``worker thread``: :class:`eventstore.AsyncEventStore` as shipped: each call runs the
  sync store (one psycopg ``Connection`` for writes) on a thread of the store's pool;
* ``AsyncConnection``: what a native path would at best cost: psycopg's
  ``AsyncConnection`` running the statements the PostgreSQL backend runs (the append at a
  cached head: one autocommit INSERT of the chained row, hashed with
  :func:`eventstore.log.chain.chain_rows`; the last-N read), without the store's validation.

Cases: sequential single appends from one task (time per append); 16 tasks appending to
their own sessions at once (total throughput; the AsyncConnection path once on one shared
connection, as the store has, and once with a connection per task); ``events(last=10)``
reads from 16 tasks. For each, the largest event-loop lag a 5 ms probe saw.

Run: ``python tools/aio_pg.py [--db postgresql://...] [--n 2000]``; without ``--db`` it
starts a throwaway server (tests/pgserver.py: fsync and synchronous_commit off, so the
figures show the client paths, not the disk). docs/concurrency.md ("asyncio") keeps the
figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import psycopg  # noqa: E402

from eventstore import AsyncEventStore  # noqa: E402
from eventstore.log.chain import chain_rows, genesis_hash  # noqa: E402
from eventstore.log.codec import dumps  # noqa: E402

TASKS = 16

_INSERT_ONE = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
               "VALUES (%s, %s, %s, %s, %s, %s) RETURNING position")
_LAST = ("SELECT * FROM (SELECT seq, position, type, ts, payload FROM events WHERE session_id = %s AND seq > %s "
         "ORDER BY seq DESC LIMIT %s) AS t ORDER BY seq")


class NativeSession:
    """One session appended through an AsyncConnection, head cached as the backend does."""

    def __init__(self, conn: psycopg.AsyncConnection, sid: str, lock: asyncio.Lock | None):
        self.conn, self.sid, self.lock = conn, sid, lock
        self.seq, self.prev = 0, genesis_hash(sid)

    async def create(self) -> None:
        await self.conn.execute("INSERT INTO sessions (id, created_at, meta) VALUES (%s, %s, '{}')",
                                (self.sid, time.time()))

    async def append(self, content: str) -> int:
        rows = chain_rows(self.prev, self.seq, ["user/message"], [time.time()], [dumps({"content": content})])
        if self.lock is None:
            position = (await (await self.conn.execute(_INSERT_ONE, (self.sid, self.seq, *rows))).fetchone())[0]
        else:
            async with self.lock:
                cur = await self.conn.execute(_INSERT_ONE, (self.sid, self.seq, *rows))
                position = (await cur.fetchone())[0]
        self.seq, self.prev = self.seq + 1, rows[-1]
        return position

    async def last(self, n: int) -> list:
        if self.lock is None:
            return await (await self.conn.execute(_LAST, (self.sid, -1, n))).fetchall()
        async with self.lock:
            return await (await self.conn.execute(_LAST, (self.sid, -1, n))).fetchall()


async def lag_probe(stop: asyncio.Event, lags: list[float], tick: float = 0.005) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(tick)
        lags.append(loop.time() - t - tick)


async def timed(body) -> tuple[float, float]:
    """(seconds, largest loop lag in seconds) of ``await body()``."""
    stop, lags = asyncio.Event(), []
    probe = asyncio.create_task(lag_probe(stop, lags))
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    await body()
    took = time.perf_counter() - t0
    stop.set()
    await probe
    return took, max(lags, default=0.0)


async def run(url: str, n: int, repeat: int) -> list[tuple[str, str, str, str]]:
    per = max(1, n // TASKS)
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}

    def keep(case: str, path: str, took: float, lag: float) -> None:
        results.setdefault((case, path), []).append((took, lag))

    async def one_run(r: int) -> None:
        async with AsyncEventStore.open(url) as store:
            s = await store.session(f"seq-{r}", create=True)
            await s.append("user/message", {"content": "warm-up"})

            async def seq_store():
                for i in range(n):
                    await s.append("user/message", {"content": f"m{i}"})
            keep("sequential appends", "worker thread", *await timed(seq_store))

            own = [await store.session(f"par-{r}-{t}", create=True) for t in range(TASKS)]

            async def par_store():
                async def agent(x):
                    for i in range(per):
                        await x.append("user/message", {"content": f"m{i}"})
                await asyncio.gather(*(agent(x) for x in own))
            keep(f"{TASKS} tasks appending", "worker thread", *await timed(par_store))

            async def reads_store():
                async def reader(x):
                    for _ in range(per):
                        [e async for e in x.events(last=10)]
                await asyncio.gather(*(reader(x) for x in own))
            keep(f"{TASKS} tasks reading last 10", "worker thread", *await timed(reads_store))

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            lock = asyncio.Lock()
            ns = NativeSession(conn, f"nseq-{r}", lock)
            await ns.create()
            await ns.append("warm-up")

            async def seq_native():
                for i in range(n):
                    await ns.append(f"m{i}")
            keep("sequential appends", "AsyncConnection", *await timed(seq_native))

            shared = [NativeSession(conn, f"npar-{r}-{t}", lock) for t in range(TASKS)]
            for x in shared:
                await x.create()

            async def par_native(sessions):
                async def agent(x):
                    for i in range(per):
                        await x.append(f"m{i}")
                await asyncio.gather(*(agent(x) for x in sessions))
            keep(f"{TASKS} tasks appending", "AsyncConnection (one, shared)",
                 *await timed(lambda: par_native(shared)))

            async def reads_native(sessions):
                async def reader(x):
                    for _ in range(per):
                        await x.last(10)
                await asyncio.gather(*(reader(x) for x in sessions))
            keep(f"{TASKS} tasks reading last 10", "AsyncConnection (one, shared)",
                 *await timed(lambda: reads_native(shared)))

            conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(TASKS)]
            try:
                mine = [NativeSession(c, f"nown-{r}-{t}", None) for t, c in enumerate(conns)]
                for x in mine:
                    await x.create()
                keep(f"{TASKS} tasks appending", f"AsyncConnection ({TASKS}, one per task)",
                     *await timed(lambda: par_native(mine)))
                keep(f"{TASKS} tasks reading last 10", f"AsyncConnection ({TASKS}, one per task)",
                     *await timed(lambda: reads_native(mine)))
            finally:
                for c in conns:
                    await c.close()

    for r in range(repeat):
        await one_run(r)

    rows = []
    for (case, path), runs in results.items():
        took = statistics.median(t for t, _ in runs)
        lag = max(lg for _, lg in runs)
        ops = n if case.startswith("sequential") else per * TASKS
        rows.append((case, path, f"{took / ops * 1e6:.0f} µs", f"{lag * 1000:.1f} ms"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", help="a postgresql:// URL of an empty database (default: a throwaway server)")
    ap.add_argument("--n", type=int, default=2000, help="appends (and reads) per case")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the table shows the median time, the largest lag")
    a = ap.parse_args()
    server = None
    url = a.db
    if url is None:
        from pgserver import PgServer

        server = PgServer().start()
        url = server.url(server.create_database())
    try:
        rows = asyncio.run(run(url, a.n, a.repeat))
    finally:
        if server is not None:
            server.stop()
    print(f"PostgreSQL {url.split('@')[-1]}; {a.n} operations a case, median of {a.repeat} runs\n")
    print("| case | path | time / op | largest loop lag |")
    print("|---|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
