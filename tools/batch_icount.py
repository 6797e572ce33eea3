"""Instructions per event of a batched append, counted by valgrind: eventstore's
``append_many`` against the peers' batch calls, independent of the machine's load.

Wall-clock figures for batches move by 30 % or more between runs on a shared 2-core
machine; CPU instructions do not. Each system runs twice under ``valgrind --tool=callgrind``
(in a child process): once with ``--batches 0`` (start-up, imports, a warm-up of 10 batches)
and once with ``--batches N``; the difference divided by ``N * size`` is one event's cost.
Instructions are not time (cache misses, fsync and sleeping threads count for nothing), but
a difference between two variants of the same code shows where the work is.

Usage (from the repository root; needs valgrind, and ``pip install '.[bench]'`` for peers)::

    python tools/batch_icount.py                      # eventstore, raw sqlite3, both peers
    python tools/batch_icount.py --only eventstore --batches 50

Scratch databases only, in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("eventstore", "raw", "agents", "eventsourcing")


def run_child(system: str, batches: int, size: int) -> None:
    """Append ``10 + batches`` batches of ``size`` chunk events with ``system``."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    import bench  # the same workload and peer wrappers as tools/bench.py

    folder = Path(tempfile.mkdtemp(prefix="icount-"))
    counter = [0]

    def batch() -> list[tuple[str, dict]]:
        out = [("assistant/chunk", bench.chunk(counter[0] + j)) for j in range(size)]
        counter[0] += size
        return out

    warm, timed = [batch() for _ in range(10)], [batch() for _ in range(batches)]
    try:
        if system == "eventstore":
            from eventstore import EventStore

            with EventStore.open(folder / "es.db") as store:
                session = store.create_session("batch")
                for b in warm + timed:
                    session.append_many(b)
        elif system == "raw":
            raw = bench.RawLog(bench.raw_connect(folder / "raw.db"), "batch")
            for b in warm + timed:
                raw.append_many(b)
        elif system == "agents":
            loop = asyncio.new_event_loop()
            peer = bench.AgentsPeer(folder / "agents.db", "batch", loop, False)
            peer.time_batches([[{"type": t, **p} for t, p in b] for b in warm + timed])
        elif system == "eventsourcing":
            peer = bench.EventsourcingPeer(folder / "es.db", False)
            oid = uuid.uuid5(uuid.NAMESPACE_URL, "batch")
            for b in warm + timed:
                peer.append_many(oid, b)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def instructions(system: str, batches: int, size: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--child", system, "--batches", str(batches), "--size", str(size)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or m is None:
        raise SystemExit(f"{system}: valgrind run failed:\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help=f"comma list of systems ({', '.join(SYSTEMS)})")
    ap.add_argument("--batches", type=int, default=100, help="batches counted (default 100)")
    ap.add_argument("--size", type=int, default=100, help="events per batch (default 100)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        run_child(a.child, a.batches, a.size)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt install valgrind)")
    systems = a.only.split(",") if a.only else list(SYSTEMS)
    print(f"instructions per event, append of {a.batches} batches of {a.size} (callgrind)")
    for system in systems:
        try:
            base = instructions(system, 0, a.size)
            full = instructions(system, a.batches, a.size)
        except SystemExit as e:
            print(f"{system:14s} skipped: {str(e).splitlines()[0]}")
            continue
        print(f"{system:14s} {(full - base) / (a.batches * a.size):10,.0f}")


if __name__ == "__main__":
    main()
