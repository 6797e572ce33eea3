"""Where does a single append's time go? Time variants of the append on copies of the schema.

Each variant appends one event per transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) to a
fresh database; they differ by one thing at a time, from the full ``Session.append`` down to
a plain table, so the difference between two neighbours is the cost of that one thing:

=====================  ======================================================================
``api``                ``Session.append`` as shipped (validation, payload encoding, write
                       queue, cached head, ``INSERT ... VALUES``, guard trigger, foreign key,
                       CHECKs, both partial indexes, a checkpoint request every 500 events)
``sql``                the store's own statements on its cursor (head read, chained hash,
                       ``INSERT ... VALUES``) without the Python API around them
                       (validation, write queue, checkpoints): the API's share is ``api``
                       minus this
``values``             the same ``INSERT ... VALUES`` with the head kept by the caller: no
                       head query (what the store's cached head saves when it appends alone)
``no-trigger``         ``values`` with the ``events_guard_insert`` trigger dropped
``no-fk``              ... and ``PRAGMA foreign_keys = OFF``
``no-check``           ... and the table rebuilt without its CHECK constraints
``no-event-id-index``  ... and without the ``events_event_id`` partial index (its WHERE
                       clause evaluates the generated column, a JSON extraction, per insert)
``no-messages-index``  ... and without the ``events_messages`` partial index
``raw``                ``tools/bench.py``'s raw sqlite3 baseline (same pragmas, plain table
                       with the same columns and ``UNIQUE(session_id, seq)``)
=====================  ======================================================================

Usage (from the repository root)::

    python tools/append_variants.py                       # all variants, interleaved, min of 5
    python tools/append_variants.py --only values -n 2000 # one variant (e.g. under callgrind)
    python tools/append_variants.py --batch 100 -n 20     # transactions of 100 events (append_many)

Under ``valgrind --tool=callgrind`` run one variant with ``-n N`` and with ``-n 0``: the
difference of the two instruction totals divided by N is the load-independent cost of one
append (see docs/benchmarks.md). Scratch databases only: never run against a real store.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import EventStore  # noqa: E402
from eventstore.backends.sqlite import statements as _store  # noqa: E402
from eventstore.log.chain import chain_hash, genesis_hash  # noqa: E402
from eventstore.log.codec import event_line, payload_json  # noqa: E402

VARIANTS = ("api", "sql", "values", "no-trigger", "no-fk", "no-check", "no-event-id-index",
            "no-messages-index", "raw")
SID = "bench-session"


def payload(i: int) -> dict:
    return {"delta": {"content": f"tok{i}"}}


def _strip_checks(sql: str) -> str:
    return re.sub(r",\s*CONSTRAINT \w+ CHECK \((?:[^()]|\([^()]*\))*\)", "", sql)


class Variant:
    """One way of appending; ``append(i)`` writes event i in its own transaction."""

    def __init__(self, name: str, folder: Path, prefill: int, batch: int = 1):
        self.name = name
        self.batch = batch
        path = folder / f"{name}.db"
        if name == "raw":
            self._open_raw(path)
        else:
            self.store = EventStore.open(path)
            self.session = self.store.create_session(SID)
            if prefill:
                self.session.append_many([("assistant/chunk", payload(-i)) for i in range(prefill)])
            self.cur = self.store._backend._cur
            self._degrade(self.store._backend._conn)
        self.seq, self.position, self.prev = self._head()

    def _open_raw(self, path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("""CREATE TABLE events (position INTEGER PRIMARY KEY, session_id TEXT NOT NULL,
            seq INTEGER NOT NULL, type TEXT NOT NULL, ts REAL NOT NULL, payload TEXT NOT NULL,
            hash TEXT NOT NULL, UNIQUE (session_id, seq))""")
        self.conn, self.cur = conn, conn.cursor()

    def _degrade(self, conn: sqlite3.Connection) -> None:
        steps = VARIANTS.index(self.name)
        if steps >= VARIANTS.index("no-trigger"):
            conn.execute("DROP TRIGGER events_guard_insert")
        if steps >= VARIANTS.index("no-fk"):
            conn.execute("PRAGMA foreign_keys = OFF")
        if steps >= VARIANTS.index("no-check"):
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
            indexes = [r[0] for r in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND sql IS NOT NULL")]
            triggers = [r[0] for r in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'")]
            conn.execute("DROP VIEW messages")
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
                                        ).fetchall():
                conn.execute(f'DROP TRIGGER "{name}"')
            conn.execute("ALTER TABLE events RENAME TO events_old")
            conn.execute(_strip_checks(sql))
            conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                         "SELECT position, session_id, seq, type, ts, payload, hash FROM events_old")
            conn.execute("DROP TABLE events_old")
            for statement in indexes:
                if steps >= VARIANTS.index("no-event-id-index") and "events_event_id" in statement:
                    continue
                if steps >= VARIANTS.index("no-messages-index") and "events_messages" in statement:
                    continue
                conn.execute(statement)
            for statement in triggers:
                conn.execute(statement)

    def _head(self) -> tuple[int, int, str]:
        row = self.cur.execute(_store._HEAD, (SID,)).fetchone()
        return row[0], row[1], row[2] or genesis_hash(SID)

    def append(self, i: int) -> None:
        """Write event i (or, with ``batch`` > 1, events i*batch ...) in one transaction."""
        ids = range(i * self.batch, (i + 1) * self.batch)
        if self.name == "api":
            if self.batch == 1:
                self.session.append("assistant/chunk", payload(i))
            else:
                self.session.append_many([("assistant/chunk", payload(j)) for j in ids])
            return
        cur = self.cur
        ts = time.time()
        if self.name == "sql":
            cur.execute("BEGIN IMMEDIATE")
            seq, position, prev = cur.execute(_store._HEAD, (SID,)).fetchone()
            prev = prev or genesis_hash(SID)
            rows = []
            for j in ids:
                pj = payload_json(payload(j))
                prev = chain_hash(prev, event_line("assistant/chunk", seq, ts, pj))
                rows.append((position, SID, seq, "assistant/chunk", ts, pj, prev))
                seq, position = seq + 1, position + 1
            cur.executemany(_store._INSERT, rows)
            cur.execute("COMMIT")
            return
        rows = []
        seq, position, prev = self.seq, self.position, self.prev
        for j in ids:
            if self.name == "raw":
                pj = json.dumps(payload(j), separators=(",", ":"), ensure_ascii=False)
                prev = hashlib.sha256((prev + "\n" + pj).encode()).hexdigest()
            else:
                pj = payload_json(payload(j))
                prev = chain_hash(prev, event_line("assistant/chunk", seq, ts, pj))
            rows.append((position, SID, seq, "assistant/chunk", ts, pj, prev))
            seq, position = seq + 1, position + 1
        cur.execute("BEGIN IMMEDIATE")
        if len(rows) == 1:
            cur.execute(_store._INSERT, rows[0])
        else:
            cur.executemany(_store._INSERT, rows)
        cur.execute("COMMIT")
        self.seq, self.position, self.prev = seq, position, prev


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1000, help="appends per repetition (default 1000)")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions; the minimum is kept (default 5)")
    ap.add_argument("--prefill", type=int, default=10_000, help="events already in the session (default 10000)")
    ap.add_argument("--only", choices=VARIANTS, help="run one variant once (for callgrind)")
    ap.add_argument("--batch", type=int, default=1,
                    help="events per transaction (default 1; >1 uses append_many / executemany)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="append-variants-") as tmp:
        names = [args.only] if args.only else list(VARIANTS)
        variants = [Variant(name, Path(tmp), args.prefill, args.batch) for name in names]
        if args.only:
            for i in range(args.n):
                variants[0].append(i)
            return 0
        best = dict.fromkeys(names, float("inf"))
        counter = 0
        for rep in range(args.repeat):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for v in order:
                t0 = time.perf_counter()
                for _ in range(args.n):
                    v.append(counter)
                    counter += 1
                best[v.name] = min(best[v.name], (time.perf_counter() - t0) / args.n / args.batch)
        print(f"{'variant':<20} {'us/event':>10} {'vs raw':>8}   (min of {args.repeat} x {args.n} transactions "
              f"of {args.batch} event(s), "
              f"{args.prefill} events prefilled; load {os.getloadavg()[0]:.1f})")
        for name in names:
            print(f"{name:<20} {best[name] * 1e6:>10.1f} {best[name] / best['raw']:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
