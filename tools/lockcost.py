"""What the write queue costs one writer alone: single appends with and without it.

One process, one database per mode, rounds alternating between the modes so that machine
noise hits both alike; prints the median and the best round's time per append of each mode
(microseconds), the difference, and the cost of one bare uncontended flock/unlock pair for
scale. The only system calls the queue adds are those two ``flock`` calls per write
transaction (``strace -f -c`` on both modes shows the same counts otherwise); on a busy
machine the round-to-round noise is larger than that, so compare on a quiet one.

Usage (from the repository root)::

    python tools/lockcost.py --appends 3000 --rounds 7
"""

from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import EventStore  # noqa: E402


def per_append_us(store: EventStore, n: int) -> float:
    s = store.create_session()
    payload = {"delta": {"content": "a streamed piece of text"}}
    t0 = time.perf_counter()
    for _ in range(n):
        s.append("assistant/chunk", payload)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appends", type=int, default=3000, help="appends per round (default 3000)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds per mode (default 7)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lockcost-") as tmp:
        stores = {mode: EventStore.open(os.path.join(tmp, f"{mode}.db"), write_queue=mode == "queue")
                  for mode in ("queue", "plain")}
        times: dict[str, list[float]] = {"queue": [], "plain": []}
        per_append_us(stores["queue"], 200)  # warm up
        per_append_us(stores["plain"], 200)
        for _ in range(args.rounds):
            for mode in ("queue", "plain"):
                times[mode].append(per_append_us(stores[mode], args.appends))
        for s in stores.values():
            s.close()
        fd = os.open(os.path.join(tmp, "bare-lock"), os.O_RDWR | os.O_CREAT, 0o644)
        n = 100_000
        t0 = time.perf_counter()
        for _ in range(n):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        pair = (time.perf_counter() - t0) / n * 1e6
        os.close(fd)
    for name, f in (("median", statistics.median), ("best", min)):
        q, p = f(times["queue"]), f(times["plain"])
        print(f"single append, {name} of {args.rounds} rounds x {args.appends}: "
              f"write queue {q:.1f} us, without {p:.1f} us, difference {q - p:+.1f} us ({(q - p) / p:+.1%})")
    print(f"one uncontended flock + unlock pair: {pair:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
