"""What each part of the ``events`` table costs writers on PostgreSQL: raw psycopg writers
(tools/bench_pg.py's, 1 and 8 processes) into copies of the events table with parts taken
away, alternated round by round. Scratch databases only; eventstore's guarantees are gone
in the stripped copies, which exist to be measured.

Usage (from the repository root)::

    python tools/bench_pg_parts.py                    # a throwaway server (tests/pgserver.py)
    python tools/bench_pg_parts.py --pg-url URL --durability full --rounds 3

Copies: as migrated; without the statement check ``events_guard_check`` (and the NOTIFY it
sends); without the row guard ``events_guard_insert`` as well (no position lock: positions
from a sequence).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tools")]

NO_CHECK = ["ALTER TABLE events DISABLE TRIGGER events_guard_check"]
NO_GUARD = [*NO_CHECK, "ALTER TABLE events DISABLE TRIGGER events_guard_insert", "CREATE SEQUENCE bench_position",
            "ALTER TABLE events ALTER position SET DEFAULT nextval('bench_position')"]
VARIANTS = {"as migrated": [], "no statement check (nor its NOTIFY)": NO_CHECK,
            "no statement check, no row guard (no position lock)": NO_GUARD}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg-url", help="a server to use (new databases are made in it); default: a throwaway one")
    ap.add_argument("--durability", choices=("normal", "full"), default="normal")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--count", type=int, default=400, help="appends per writer of the 8 (the lone writer: twice)")
    a = ap.parse_args(argv)

    import bench_pg
    import psycopg
    from pgserver import PgServer

    from eventstore import EventStore

    server = None
    if a.pg_url:
        base = a.pg_url.rsplit("/", 1)[0]
    else:
        server = PgServer(settings=bench_pg.DURABLE).start()
        base = server.url().rsplit("/", 1)[0]
    try:
        urls = {}
        with psycopg.connect(base + "/postgres", autocommit=True) as conn:
            for i, (name, ddl) in enumerate(VARIANTS.items()):
                db = f"parts_{int(time.time())}_{i}"
                conn.execute(f'CREATE DATABASE "{db}"')
                urls[name] = f"{base}/{db}"
                EventStore.open(urls[name]).close()
                with psycopg.connect(urls[name], autocommit=True) as d:
                    for statement in ddl:
                        d.execute(statement)
        res: dict = {name: {"1": [], "8": []} for name in VARIANTS}
        for r in range(a.rounds):
            for name, url in urls.items():
                print(f"running {name} (round {r + 1}) ...", file=sys.stderr, flush=True)
                res[name]["1"].append(bench_pg.bench_writers(url, 1, 2 * a.count, a.durability, bench_pg.RAW_EVENTS))
                res[name]["8"].append(bench_pg.bench_writers(url, 8, a.count, a.durability, bench_pg.RAW_EVENTS))
    finally:
        if server is not None:
            server.stop()
    print(f"`python tools/bench_pg_parts.py {' '.join(sys.argv[1:] if argv is None else argv)}`\n")
    print("| events table | 1 writer, events/s | 8 writers, events/s | 8 writers / 1 writer, each round |")
    print("|---|---|---|---|")
    for name, w in res.items():
        one = ", ".join(f"{x['events_per_s']:,.0f}" for x in w["1"])
        eight = ", ".join(f"{x['events_per_s']:,.0f}" for x in w["8"])
        ratios = ", ".join(f"{e['events_per_s'] / o['events_per_s']:.2f}x" for o, e in zip(w["1"], w["8"], strict=True))
        print(f"| {name} | {one} | {eight} | {ratios} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
