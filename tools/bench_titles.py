"""Titles from summary lines of other files (revision 0290): what its index on ``event_id``
costs appends, and what reading the titles costs, on both databases.

    PYTHONPATH=. EVENTSTORE_PG_BINDIR=/usr/lib/postgresql/15/bin python tools/bench_titles.py

Per database: 1,000 sessions of 200 events, each event with an ``event_id`` (as every
imported event has; 2 in 5 a line's uuid, the others suffixed: about a Claude file's mix),
appended in batches of 200, with and without ``events_by_event_id`` (dropped before the
appends); then one ``claude/summary`` event per session naming a line of another session,
and the time of ``all_info`` (``sessions --json``'s ``info``) and of ``current_meta`` of
one session (the viewer's ``/api/session``).
"""
from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from pgserver import PgServer  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.io.transcripts.common import all_info, current_meta  # noqa: E402

SESSIONS, EVENTS = 1000, 200


def key(k: int, j: int) -> str:
    """A Claude-like key of session k's event j: 2 in 5 a line's uuid (random-looking, as
    real ones are), the others a line's other events' ("<uuid>:turn-start" and the like)."""
    g, r = divmod(j, 5)
    line = uuid.uuid5(uuid.NAMESPACE_URL, f"{k}/{g}/{min(r, 1)}")
    return str(line) if r < 2 else f"{line}:x{r}"


def run(url: str, label: str, index: bool) -> None:
    with EventStore.open(url):
        pass  # (creates the schema)
    if not index:
        if url.startswith("postgresql"):
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP INDEX events_by_event_id")
        else:
            import sqlite3

            with sqlite3.connect(url) as conn:
                conn.execute("DROP INDEX events_by_event_id")
    with EventStore.open(url) as store:
        t = time.perf_counter()
        for k in range(SESSIONS):
            s = store.create_session(f"s{k}", meta={"source": "claude-code"})
            s.append_many([("user/message", {"content": f"m{j}", "event_id": key(k, j)}) for j in range(EVENTS)])
        took = time.perf_counter() - t
        print(f"{label}, events_by_event_id {'kept' if index else 'dropped'}: "
              f"{SESSIONS * EVENTS:,} events appended in {took:.2f} s")
        if not index:
            return
        for k in range(SESSIONS):
            store.session(f"s{k}").append("claude/summary", {"source": {"summary": f"T{k}", "leafUuid":
                                                                       key((k * 7) % SESSIONS, 0)},
                                                            "event_id": f"L{k}"})
        t = time.perf_counter()
        n = sum("title" in v for v in all_info(store).values())
        print(f"{label}: all_info over {SESSIONS} sessions ({n} titled): {(time.perf_counter() - t) * 1000:.1f} ms")
        t = time.perf_counter()
        for k in range(100):
            current_meta(store, f"s{k}")
        print(f"{label}: current_meta of one session: {(time.perf_counter() - t) * 10:.2f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        for index in (False, True):
            run(str(Path(d) / f"t{index}.db"), "SQLite", index)
    srv = PgServer().start()
    try:
        for index in (False, True):
            run(srv.url(srv.create_database()), "PostgreSQL", index)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
