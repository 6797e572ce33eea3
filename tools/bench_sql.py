"""Time and peak memory of ``eventstore sql "SELECT * FROM events"``: the table against --csv.

    python tools/bench_sql.py [--events 180000] [--db PATH] [--runs 3]

Builds (or reuses, with --db on an existing file) a store of chat-message events (sessions
of 2,000 events, appended in batches of 1,000), then runs the command line in a child
process for each form, stdout to /dev/null, best of --runs, and prints wall time (including
the small Python that starts it) and peak RSS (the child's ``ru_maxrss``) with the load
average. docs/benchmarks.md quotes one run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventstore import EventStore  # noqa: E402

QUERY = "SELECT * FROM events"


def build(db: Path, n: int) -> None:
    with EventStore.open(db) as store:
        for s in range(0, n, 2000):
            session = store.create_session(f"sess-{s // 2000:06d}")
            for b in range(s, min(n, s + 2000), 1000):
                session.append_many([("message", {"role": "user" if i % 2 else "assistant",
                                                  "content": f"message {i}: " + "lorem ipsum dolor sit amet " * 4})
                                     for i in range(b, min(n, s + 2000, b + 1000))])


# Runs argv[2:] and writes its peak RSS (KiB) to the file argv[1]: a child's ru_maxrss
# counts the memory of the process that forked it, and this one holds the store it built.
_PEAK_RSS = ("import resource, subprocess, sys; status = subprocess.call(sys.argv[2:]); "
             "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
             "sys.exit(status)")


def measure(db: Path, runs: int, *args: str) -> tuple[float, float]:
    """Best wall time (s) and the largest peak RSS (MiB) of ``eventstore --db DB sql QUERY ARGS``."""
    best, peak = float("inf"), 0.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        rss = Path(tmp) / "rss"
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", _PEAK_RSS, str(rss), sys.executable, "-m", "eventstore",
                            "--db", str(db), "sql", QUERY, *args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
            best = min(best, time.perf_counter() - t)
            peak = max(peak, int(rss.read_text()) / 1024)
    return best, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=180_000)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "events.db"
        if not db.exists():
            build(db, args.events)
        n = sqlite3.connect(db).execute("SELECT count(*) FROM events").fetchone()[0]
        print(f"{n} events; SQLite {sqlite3.sqlite_version}; load average {os.getloadavg()[0]:.2f}")
        for label, extra in (("sql (table)", ()), ("sql --csv", ("--csv",)), ("sql --json", ("--json",))):
            wall, rss = measure(db, args.runs, *extra)
            print(f"{label:<14} {wall:7.2f} s  {rss:7.1f} MiB peak  (load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
