"""What a redaction costs on PostgreSQL, by store size: the redaction's transaction
(``redact_event``) and the rewrite that erases the old row versions (``erase_old_versions``,
``VACUUM FULL``; docs/redaction-postgres.md), on the tests' throwaway server with durable
settings.

    python -m tools.bench.redaction_erase [N ...]    (default 10000 100000 300000 events)
"""

from __future__ import annotations

import json
import sys
import time


def measure(url: str, n: int) -> tuple[str, float, float]:
    """``(table size, redact_event seconds, erase_old_versions seconds)`` for a session of
    ``n`` tool results (about 500 bytes each) at ``url`` (an empty database)."""
    import psycopg

    from eventstore import EventStore
    from eventstore.backends.capabilities import Redactor
    from eventstore.log.codec import dumps
    from eventstore.log.commit import commit_json, new_salts

    with EventStore.open(url) as store:
        s = store.create_session("s")
        batch = [("tool/result", {"tool_call_id": f"c{i}", "content": "result line " * 40}) for i in range(1000)]
        for _ in range(n // 1000):
            s.append_many(batch)
        with psycopg.connect(url, autocommit=True) as conn:
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('events'))").fetchone()[0]
            ts, payload, hash_ = conn.execute("SELECT ts, payload, hash FROM events WHERE session_id = 's' "
                                              "AND seq = 5").fetchone()
        new = {**json.loads(payload), "content": "[redacted: bench]"}
        record = {"event_seq": 5, "paths": [["content"]], "reason": "bench", "by": "bench", "hash": hash_}
        salt = new_salts(1)[0]
        red = store.capability(Redactor)
        t0 = time.perf_counter()
        red.redact_event("s", 5, hash_, dumps(new), ts + 1, dumps(record), salt, commit_json(salt, record))
        t1 = time.perf_counter()
        said = red.erase_old_versions()
        t2 = time.perf_counter()
        assert said is None, said
    return size, t1 - t0, t2 - t1


def main(argv: list[str]) -> None:
    """Print a Markdown table of :func:`measure` for each size in ``argv``."""
    from tests.pgserver import PgServer

    from .harness import PG_DURABLE

    sizes = [int(a) for a in argv] or [10_000, 100_000, 300_000]
    print("| events | table with TOAST and indexes | redact_event | erase_old_versions (VACUUM FULL) |")
    print("|---:|---:|---:|---:|")
    with PgServer(settings=PG_DURABLE) as server:
        for n in sizes:
            name = server.create_database()
            try:
                size, redact, erase = measure(server.url(name), n)
            finally:
                server.drop_database(name)
            print(f"| {n:,} | {size} | {redact * 1000:.0f} ms | {erase:.2f} s |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
