"""Benchmark the audit views and verify against plain reads of the same database, in one run.

    python tools/bench_audit.py [--sessions 1000] [--turns 10] [--db PATH]

Builds (or reuses, with --db on an existing file) a store of synthetic sessions: each turn is
turn/start, user/message, a step with 10 assistant/chunk events, an assistant/message with two
tool calls and their results, a second step with the answer, turn/end (21 events a turn).
Prints, best of 3 runs each:

* each view read whole and for one session, next to ``SELECT * FROM events`` (whole) and one
  session's events as the baseline (ratio = view time / baseline time);
* ``audit.verify`` of the whole database (events/s) next to reading the same rows in the
  same order with plain sqlite3 (ratio).

Figures are for comparing runs on one machine; docs/schema.md quotes one run with its command.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import EventStore  # noqa: E402
from eventstore.audit import verify as audit


def build(path: Path, sessions: int, turns: int) -> None:
    with EventStore.open(path) as store:
        ts = 1_700_000_000.0
        for i in range(sessions):
            s = store.create_session(f"s{i:05d}")
            events = []
            for t in range(turns):
                calls = [{"id": f"c{t}{x}", "type": "function", "function": {"name": "run_bash", "arguments": "{}"}}
                         for x in "ab"]
                events += [("turn/start", {"agent": "bench"}), ("user/message", {"content": f"question {t}"}),
                           ("step/start", {"step": 0})]
                events += [("assistant/chunk", {"delta": {"content": "ab"}})] * 10
                events += [("assistant/message", {"content": "ab" * 10, "tool_calls": calls}),
                           ("tool/result", {"tool_call_id": f"c{t}a", "content": "out a"}),
                           ("tool/result", {"tool_call_id": f"c{t}b", "content": "out b"}),
                           ("step/end", {"step": 0, "tool_calls": 2}), ("step/start", {"step": 1}),
                           ("assistant/message", {"content": "done", "tool_calls": []}),
                           ("step/end", {"step": 1, "tool_calls": 0}), ("turn/end", {})]
            s.append_many([(typ, p, ts + k * 0.01) for k, (typ, p) in enumerate(events)])


def best(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--db", type=Path, help="database file (built when missing; default: a temporary file)")
    args = ap.parse_args()
    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory()
        args.db = Path(tmp.name) / "bench.db"
    if not args.db.exists():
        t = time.perf_counter()
        build(args.db, args.sessions, args.turns)
        print(f"built {args.db} in {time.perf_counter() - t:.1f} s")
    conn = sqlite3.connect(args.db)
    n_events, n_sessions = conn.execute("SELECT count(*), count(DISTINCT session_id) FROM events").fetchone()
    mid = conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1 OFFSET ?", (n_sessions // 2,)).fetchone()[0]
    print(f"{n_events} events in {n_sessions} sessions; SQLite {sqlite3.sqlite_version}")

    def read(sql: str, *params) -> None:
        conn.execute(sql, params).fetchall()

    base_all = best(lambda: read("SELECT * FROM events"))
    base_one = best(lambda: read("SELECT * FROM events WHERE session_id = ?", mid), runs=20)
    print(f"{'baseline SELECT * FROM events':40s} {base_all * 1e3:9.1f} ms   one session {base_one * 1e3:7.3f} ms")
    for view in ("messages", "tool_calls", "turns", "session_summary"):
        whole = best(lambda v=view: read(f"SELECT * FROM {v}"))
        one = best(lambda v=view: read(f"SELECT * FROM {v} WHERE session_id = ?", mid), runs=20)
        print(f"{'view ' + view:40s} {whole * 1e3:9.1f} ms ({whole / base_all:4.1f}x)   "
              f"one session {one * 1e3:7.3f} ms ({one / base_one:4.1f}x)")

    plain = best(lambda: read("SELECT seq, position, type, ts, payload, hash FROM events "
                              "ORDER BY session_id, seq"))
    ro = EventStore.open(args.db, readonly=True)
    report = None

    def run_verify() -> None:
        nonlocal report
        report = audit.verify(ro._backend)

    took = best(run_verify)
    assert report is not None and report.ok, report.findings[:5] if report else None
    print(f"{'verify (all checks)':40s} {took * 1e3:9.1f} ms = {n_events / took:,.0f} events/s "
          f"({took / plain:.1f}x a plain read of the same rows, {plain * 1e3:.1f} ms)")
    ro.close()
    conn.close()
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
