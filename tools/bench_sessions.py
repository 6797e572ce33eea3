"""Time and peak memory of ``eventstore sessions`` (the table) against ``sessions --json``.

    python tools/bench_sessions.py [--sessions 200000] [--db PATH]

Builds (or reuses, with --db on an existing file) a store of empty sessions, then runs the
command line in a child process for each form, stdout to /dev/null, best of 3, and prints
wall time and peak RSS (the child's ``ru_maxrss``). docs/schema.md quotes one run.
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


def build(db: Path, n: int) -> None:
    EventStore.open(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    t0 = time.time()
    conn.executemany("INSERT INTO sessions (id, created_at) VALUES (?, ?)",
                     ((f"sess-{i:08d}", t0 + i * 1e-3) for i in range(n)))
    conn.execute("COMMIT")
    conn.close()


def measure(db: Path, *args: str) -> tuple[float, float]:
    """Best wall time (s) and the largest peak RSS (MiB) of ``eventstore --db DB sessions ARGS``."""
    best, peak = float("inf"), 0.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(3):
        t = time.perf_counter()
        pid = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), "sessions", *args],
                               stdout=subprocess.DEVNULL, env=env).pid
        _pid, status, usage = os.wait4(pid, 0)
        best = min(best, time.perf_counter() - t)
        peak = max(peak, usage.ru_maxrss / 1024)
        assert os.waitstatus_to_exitcode(status) == 0
    return best, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=200_000)
    ap.add_argument("--db", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "sessions.db"
        if not db.exists():
            build(db, args.sessions)
        n = sqlite3.connect(db).execute("SELECT count(*) FROM sessions").fetchone()[0]
        print(f"{n} sessions; SQLite {sqlite3.sqlite_version}")
        for label, extra in (("sessions (table)", ()), ("sessions --json", ("--json",))):
            wall, rss = measure(db, *extra)
            print(f"{label:<20} {wall:7.2f} s  {rss:7.1f} MiB peak")


if __name__ == "__main__":
    main()
