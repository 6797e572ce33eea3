"""Single appends on PostgreSQL: this checkout against an older commit, side by side.

What a change to the schema or the append path costs one writer: both versions append to
a database of their own on one throwaway server (tests/pgserver.py, PostgreSQL's durable
settings), each round in a fresh process per version, the order of the versions swapped
every round so that machine noise hits both alike. Two cases: the asynchronous commit
(``--old-async``/``--new-async`` durability: the CPU cost of the append, no disk wait) and
the durable commit (``--old-durable``/``--new-durable``: what an acknowledged append costs
by default). Prints the median and best per-append time of each, and new/old.

Usage (from the repository root)::

    python tools/bench_pg_versions.py --old c9b1e30 --rounds 7 --appends 1000

``--old`` is any git revision (checked out with ``git archive`` into a temporary folder).
The durability names differ between versions: before revision 0250, ``normal`` was the
asynchronous commit and ``full`` the durable one; from 0250 on, ``may-lose-recent`` is
the asynchronous one and ``normal`` (the default) the durable one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CHILD = r"""
import sys, time
from eventstore import EventStore
url, sid, durability, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with EventStore.open(url, durability=durability) as st:
    s = st.session(sid, create=True)
    for i in range(50):
        s.append("tool/result", {"content": "x" * 200, "i": i})
    t = time.perf_counter()
    for i in range(n):
        s.append("tool/result", {"content": "x" * 200, "i": i})
    print((time.perf_counter() - t) / n * 1e6)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the git revision to compare with")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--appends", type=int, default=1000, help="timed appends per round and case")
    ap.add_argument("--old-async", default="normal")
    ap.add_argument("--old-durable", default="full")
    ap.add_argument("--new-async", default="may-lose-recent")
    ap.add_argument("--new-durable", default="normal")
    a = ap.parse_args(argv)
    from pgserver import PgServer

    with tempfile.TemporaryDirectory() as old_tree, \
            PgServer({"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}) as server:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.old], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old_tree], input=archive, check=True)
        trees = {"old": old_tree, "new": str(ROOT)}
        modes = {"async": {"old": a.old_async, "new": a.new_async},
                 "durable": {"old": a.old_durable, "new": a.new_durable}}
        dbs = {v: server.url(server.create_database()) for v in trees}
        times: dict[tuple[str, str], list[float]] = {(m, v): [] for m in modes for v in trees}
        for r in range(a.rounds):
            for m in modes:
                for v in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                    out = subprocess.run([sys.executable, "-c", CHILD, dbs[v], f"{m}-{r}", modes[m][v],
                                          str(a.appends)], env={**os.environ, "PYTHONPATH": trees[v]},
                                         capture_output=True, text=True, cwd=trees[v])  # (-c puts cwd first)
                    if out.returncode:
                        print(out.stderr, file=sys.stderr)
                        return 1
                    times[(m, v)].append(float(out.stdout))
        print(f"load average at the end: {os.getloadavg()[0]:.2f}; {a.rounds} rounds x {a.appends} appends")
        for m in modes:
            old, new = times[(m, "old")], times[(m, "new")]
            print(f"{m}: {a.old} median {statistics.median(old):.0f} us (best {min(old):.0f}), this checkout "
                  f"median {statistics.median(new):.0f} us (best {min(new):.0f}); new/old median "
                  f"{statistics.median(new) / statistics.median(old):.3f}, best {min(new) / min(old):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
