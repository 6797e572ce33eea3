"""Time `eventstore export --all` of a 100,000-event store (10 sessions) on PostgreSQL, and
on SQLite too with the argument `sqlite` (docs/benchmarks.md, "Export pages bounded by bytes")."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EVENTSTORE_PG_BINDIR", "/usr/lib/postgresql/15/bin")

from pgserver import PgServer  # noqa: E402

from eventstore import EventStore  # noqa: E402


def fill(url: str) -> None:
    with EventStore.open(url) as st:
        for k in range(10):
            s = st.create_session(f"s{k}")
            s.append_many([("assistant/chunk" if i % 3 else "user/message",
                            {"content": f"event {i} " + "x" * (i % 300)}, 1764460800.0 + i * 0.125)
                           for i in range(10_000)])


def run(url: str, label: str, runs: int = 9) -> None:
    times = []
    for _ in range(runs):
        out = tempfile.mkdtemp()
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "eventstore", "--db", url, "export", "--all", "--out", out],
                           capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        times.append(time.perf_counter() - t)
        assert r.returncode == 0, r.stderr
    times.sort()
    print(f"{label}: best {times[0]:.3f} s, median {times[len(times) // 2]:.3f} s")


if __name__ == "__main__":
    if "sqlite" in sys.argv:
        db = str(Path(tempfile.mkdtemp()) / "t.db")
        fill(db)
        run(db, "sqlite")
    with PgServer() as pg:
        url = pg.url(pg.create_database())
        fill(url)
        run(url, "postgres")
