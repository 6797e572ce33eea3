"""Measure what an append that waits for another process's write lock does to the event loop.

Another process holds the write lock for ``--hold`` seconds (default 1.5) while a
coroutine appends: once through the sync API called from the coroutine (the loop is
frozen for the wait), once through ``AsyncSession.append`` (a worker thread waits). A probe
task sleeps 10 ms again and again and records how late it wakes; the largest lag is the
longest time the loop could not run anything.

Run: ``python tools/aio_lag.py [--hold SECONDS]``; docs/concurrency.md ("asyncio") keeps
the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import AsyncEventStore, EventStore  # noqa: E402


def hold(db: str, ready: str, seconds: float) -> None:
    store = EventStore.open(db, busy_timeout=60)

    def body(cur) -> None:
        Path(ready).write_text(str(os.getpid()))
        time.sleep(seconds)

    store._backend._transact(body)  # (SQLite's write transaction: the write queue and the lock)
    store.close()


async def probe(stop: asyncio.Event, lags: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.01)
        lags.append(loop.time() - t - 0.01)


async def one(db: Path, seconds: float, use_async: bool) -> tuple[float, float]:
    ready = db.with_suffix(f".ready{int(use_async)}")
    p = mp.get_context("spawn").Process(target=hold, args=(str(db), str(ready), seconds))
    async with AsyncEventStore.open(db, busy_timeout=60) as store:
        s = await store.session("lag", create=True)
        p.start()
        while not ready.exists():
            if not p.is_alive():
                raise SystemExit(f"the lock holder exited with {p.exitcode}")
            await asyncio.sleep(0.01)
        stop, lags = asyncio.Event(), []
        task = asyncio.create_task(probe(stop, lags))
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        if use_async:
            await s.append("user/message", {"content": "x"})
        else:
            s.sync.append("user/message", {"content": "x"})
        waited = time.perf_counter() - t0
        stop.set()
        await task
    p.join()
    return waited, max(lags)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hold", type=float, default=1.5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lag.db"
        EventStore.open(db).close()
        for name, use_async in (("Session.append from a coroutine", False), ("AsyncSession.append", True)):
            waited, lag = asyncio.run(one(db, a.hold, use_async))
            print(f"{name}: the append waited {waited:.3f} s; largest loop lag {lag * 1000:.1f} ms")


if __name__ == "__main__":
    main()
