"""Benchmark of the full-text search index (migration 0100): query time and append cost.

    python tools/bench_search.py                 # 1,000,000 events, then the append cost
    python tools/bench_search.py --events 100000 --work /tmp/bs   # smaller, keep the files

1. **Queries.** A store of ``--events`` agent-like events (turns of a user message,
   assistant messages with tool calls, tool results: about 60% of them message events, all
   indexed) is built by importing JSONL files. The text is drawn from a Zipf-distributed
   vocabulary of 50,000 words, so that query words have the spread of frequencies real logs
   have. Each query runs ``eventstore.search.search(store, q, limit=20)`` (ranked, with
   snippets) ``--repeat`` times after one warm-up; the table gives the number of matching
   events, the median and the best time. Target: under 50 ms.
2. **Append cost.** Single appends (one event per transaction, ``Session.append``) of
   ``assistant/chunk`` events (the bench.py append workload) and of message events, into a
   store at the current schema and into one at revision 0008 (before the index existed),
   interleaved, best of ``--rounds`` blocks. Target: the index costs at most 15%. For the
   record, the same with the rejected design: an FTS5 insert trigger on ``events``.
3. **Catching up.** What the first search after the appends pays: indexing them
   (microseconds per indexed event).

With ``--postgres URL`` (a database that is empty, or holds a previous run's events; the
role must be allowed to create databases) the same on PostgreSQL: the store is built by
import and its first catch-up timed, the queries are timed (also within one session), and
single appends of message events are timed side by side, in a database of their own,
interleaved: with no search object at all, with the current design (revision 0200: the
derived table, which appends do not touch), and with revision 0100's GIN expression index
on ``events`` (the rejected design); then the catch-up after them.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore import EventStore  # noqa: E402
from eventstore.log.codec import dumps, event_line, meta_line  # noqa: E402
from eventstore.search import catch_up, count, search  # noqa: E402

VOCAB = 50_000
T0 = 1764460800.0


class Words:
    """Words ``w0 .. w49999`` drawn with probability ~ 1/rank (Zipf, s = 1)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        weights = [1 / (r + 1) for r in range(VOCAB)]
        total = sum(weights)
        acc, self.cum = 0.0, []
        for w in weights:
            acc += w / total
            self.cum.append(acc)
        self.names = [f"w{r}" for r in range(VOCAB)]

    def text(self, n: int) -> str:
        r = self.rng.random
        cum, names = self.cum, self.names
        return " ".join(names[min(bisect.bisect_left(cum, r()), VOCAB - 1)] for _ in range(n))


def events(rng: random.Random, words: Words):
    """``(type, payload)`` forever: an imported transcript's shape (no streamed chunks)."""
    turn = 0
    while True:
        yield "turn/start", {"turn": turn}
        yield "user/message", {"content": words.text(rng.randint(5, 40))}
        steps = rng.randint(1, 4)
        for step in range(steps):
            yield "step/start", {"step": step}
            calls = []
            if step < steps - 1:
                calls = [{"id": f"call_{turn}_{step}_{c}", "type": "function",
                          "function": {"name": "run_bash", "arguments": json.dumps({"command": words.text(5)})}}
                         for c in range(rng.randint(1, 2))]
            payload = {"content": words.text(rng.randint(10, 80))}
            if calls:
                payload["tool_calls"] = calls
            yield "assistant/message", payload
            for c in calls:
                yield "tool/result", {"tool_call_id": c["id"], "content": words.text(rng.randint(5, 200))}
            yield "step/end", {"step": step, "tool_calls": len(calls)}
        yield "turn/end", {"turn": turn}
        turn += 1


def build(db: Path, work: Path, total: int, files: int) -> None:
    rng = random.Random(42)
    words = Words(rng)
    gen = events(rng, words)
    per = total // files
    store = EventStore.open(db)
    t0 = time.perf_counter()
    for f in range(files):
        sid = f"bench-{f:04d}"
        path = work / f"{sid}.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            out.write(meta_line(sid) + "\n")
            for seq in range(per):
                type_, payload = next(gen)
                out.write(event_line(type_, seq, T0 + seq * 0.001 + 0.0005, dumps(payload)) + "\n")
        store.import_jsonl(path)
        path.unlink()
        print(f"\rbuilt {(f + 1) * per:,} events", end="", file=sys.stderr, flush=True)
    print(f" in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    indexed = catch_up(store, lambda done, total: print(f"\rindexing {done:,}/{total:,}", end="",
                                                          file=sys.stderr, flush=True))
    spent = time.perf_counter() - t0
    print(f"\nindexed {indexed:,} message events in {spent:.1f} s ({spent / max(1, indexed) * 1e6:.1f} µs each)",
          file=sys.stderr)
    (work / f"search-{total}.indexing.txt").write_text(f"{indexed} {spent}\n")
    store.close()


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()  # warm-up: the pages in the cache
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def bench_queries(db: Path, repeat: int) -> list[tuple]:
    store = EventStore.open(db, readonly=True)
    n_events = store._backend._read("SELECT count(*) FROM events")[0][0]
    indexed = store._backend._read("SELECT count(*) FROM events_search_text")[0][0]
    queries = ["w40000", "w5000", "w500", "w50", "w5", "w0", "w50 w500", "w5 w50 w500", "w123*"]
    rows = []
    for q in queries:
        hits = count(store, q)
        med, best = timed(lambda q=q: search(store, q, limit=20), repeat)
        rows.append((q, hits, med, best))
    store.close()
    return [("events", n_events), ("indexed", indexed)], rows


def _store_at(path: Path, variant: str) -> None:
    """A new store: ``current`` (the head revision), ``0008`` (the head without the search
    index, as before revision 0100 made it), or
    ``trigger`` (0100 plus an FTS5 insert trigger, the rejected design)."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.unlink(str(path) + suffix)
    EventStore.open(path).close()
    con = sqlite3.connect(path)
    if variant == "0008":
        # only the search objects go: the rest of the schema is what appends use today
        con.executescript("""DROP TABLE events_search; DROP TABLE events_search_state;
                             DROP VIEW events_search_text;""")
    elif variant == "trigger":
        text = con.execute("SELECT sql FROM sqlite_master WHERE name = 'events_search_text'").fetchone()[0]
        expr = (text.split("type,", 1)[1].rsplit("AS text", 1)[0].replace("payload", "new.payload")
                .replace("WHEN type =", "WHEN new.type ="))  # (the view's own column, not json_each's c.type)
        con.execute("CREATE TRIGGER events_search_insert AFTER INSERT ON events WHEN new.type = 'user/message' "
                    "OR new.type = 'assistant/message' OR new.type = 'tool/result' BEGIN "
                    f"INSERT INTO events_search (rowid, text) VALUES (new.position, {expr}); END")
    con.commit()
    con.close()


def bench_appends(work: Path, n: int, rounds: int) -> tuple[list[tuple], float]:
    """Single appends into stores of each variant, interleaved; seconds per append. Also
    returns the seconds per indexed event of the catch-up after them."""
    rng = random.Random(7)
    words = Words(rng)
    msgs = [("user/message", {"content": words.text(30)}),
            ("assistant/message", {"content": words.text(60), "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "run_bash",
                                                             "arguments": json.dumps({"command": words.text(5)})}}]}),
            ("tool/result", {"tool_call_id": "c", "content": words.text(120)})]
    variants = ("0008", "current", "trigger")
    for v in variants:
        _store_at(work / f"append-{v}.db", v)
    # The "0008" file (no search index) stays at the head revision, so opening it migrates
    # nothing: appends do not use the search objects.
    stores = {v: EventStore.open(work / f"append-{v}.db") for v in variants}
    sessions = {v: s.create_session("s") for v, s in stores.items()}
    results = []
    for workload in ("assistant/chunk", "messages"):
        best = dict.fromkeys(variants, float("inf"))
        for _ in range(rounds):
            for v, sess in sessions.items():
                t0 = time.perf_counter()
                for i in range(n):
                    if workload == "assistant/chunk":
                        sess.append("assistant/chunk", {"delta": {"content": f"tok{i}"}})
                    else:
                        t, p = msgs[i % 3]
                        sess.append(t, p)
                best[v] = min(best[v], (time.perf_counter() - t0) / n)
        results.append((workload, best["0008"], best["current"], best["trigger"]))
    t0 = time.perf_counter()
    indexed = catch_up(stores["current"])
    per_indexed = (time.perf_counter() - t0) / max(1, indexed)
    for s in stores.values():
        s.close()
    return results, per_indexed


def _pg_search_objects() -> tuple[list[str], list[str]]:
    """Revision 0200's statements that create the derived search table (from the migration
    file itself), and revision 0100's expression index on events (the rejected design)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "migrations/versions/0200_pg_search_table.py"
    spec = importlib.util.spec_from_file_location("m0200", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    create = [d for d in mod.POSTGRESQL
              if not d.lstrip().startswith(("DROP INDEX", "DO $$", "ANALYZE", "INSERT INTO events_search "))]
    expression = [f"CREATE INDEX events_search_expr ON events USING gin (es_search_vector(payload)) "
                  f"WHERE type IN {mod._PG_MSG}"]
    return create, expression


def bench_pg_appends(url: str, a: argparse.Namespace) -> tuple[dict, float, int]:
    """Single appends of message events into a new database next to ``url``'s, with each
    search design, interleaved, best of ``--rounds`` blocks: seconds per append by design;
    then the catch-up after them (seconds per indexed event, events indexed)."""
    import psycopg

    base, _, name = url.rpartition("/")
    appends_db = f"{name}_appends"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{appends_db}"')
        admin.execute(f'CREATE DATABASE "{appends_db}"')
    store = EventStore.open(f"{base}/{appends_db}")
    conn = store._backend._conn("w")
    create, expression = _pg_search_objects()
    words = Words(random.Random(7))
    msgs = [("user/message", {"content": words.text(30)}),
            ("assistant/message", {"content": words.text(60), "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "run_bash",
                                                             "arguments": json.dumps({"command": words.text(5)})}}]}),
            ("tool/result", {"tool_call_id": "c", "content": words.text(120)})]
    sessions = {v: store.create_session(f"appends-{v}") for v in ("none", "current", "expression")}
    best: dict[str, float] = {}
    for _ in range(a.rounds):
        for variant, sess in sessions.items():
            if variant == "none":  # no search object at all (what 0150 minus its index would be)
                conn.execute("DROP TABLE events_search, events_search_state")
            elif variant == "expression":
                for ddl in expression:
                    conn.execute(ddl)
            t0 = time.perf_counter()
            for i in range(a.appends):
                sess.append(*msgs[i % 3])
            best[variant] = min(best.get(variant, float("inf")), (time.perf_counter() - t0) / a.appends)
            if variant == "none":
                with conn.transaction():
                    for ddl in create:
                        conn.execute(ddl)
                    conn.execute("UPDATE events_search_state SET indexed_through = 0")
            elif variant == "expression":
                conn.execute("DROP INDEX events_search_expr")
    t0 = time.perf_counter()
    indexed = catch_up(store)
    per_indexed = (time.perf_counter() - t0) / max(1, indexed)
    store.close()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{appends_db}"')
    return best, per_indexed, indexed


def bench_postgres(url: str, work: Path, a: argparse.Namespace) -> None:
    """The run on PostgreSQL (see the module's docstring)."""
    store = EventStore.open(url)
    n_events = store._backend._read("SELECT count(*) FROM events")[0][0]
    store.close()
    if n_events == 0:
        build(url, work, a.events, a.files)
    store = EventStore.open(url)
    n_events = store._backend._read("SELECT count(*) FROM events")[0][0]
    indexed = store._backend._read("SELECT count(*) FROM events_search")[0][0]
    version = store._backend._read("SHOW server_version")[0][0]
    store._backend._conn("w").execute("ANALYZE events_search")
    said = f"events {n_events:,}, indexed {indexed:,}"
    indexing = work / f"search-{a.events}.indexing.txt"
    if indexing.exists():
        n, spent = indexing.read_text().split()
        said += f", indexed by the first search: {int(n):,} in {float(spent):.1f} s " \
                f"({float(spent) / int(n) * 1e6:.0f} µs each)"
    print(f"## Search on PostgreSQL {version}: {said} (load {os.getloadavg()[0]:.2f})\n")
    print("| query | matching events | median | best |\n|---|---:|---:|---:|")
    for q in ["w40000", "w5000", "w500", "w50", "w5", "w0", "w50 w500", "w5 w50 w500", "w123*"]:
        med, best = timed(lambda q=q: search(store, q, limit=20), a.repeat)
        print(f"| `{q}` | {count(store, q):,} | {med * 1000:.1f} ms | {best * 1000:.1f} ms |")
    sid = store._backend._read("SELECT id FROM sessions ORDER BY id LIMIT 1")[0][0]
    for q in ["w0", "w5000"]:
        med, best = timed(lambda q=q: search(store, q, session_id=sid, limit=20), a.repeat)
        print(f"| `{q}` in one session | {count(store, q, session_id=sid):,} | {med * 1000:.1f} ms "
              f"| {best * 1000:.1f} ms |")
    store.close()
    best, per_indexed, n = bench_pg_appends(url, a)
    print(f"\n## Single appends of message events (one per transaction; load {os.getloadavg()[0]:.2f})\n")
    print("| no search index | current (0200: derived table) | cost | rejected (0100: GIN expression index) "
          "| its cost |\n|---:|---:|---:|---:|---:|")
    none, cur, expr = best["none"], best["current"], best["expression"]
    print(f"| {none * 1e6:.0f} µs | {cur * 1e6:.0f} µs | {(cur / none - 1) * 100:+.1f}% "
          f"| {expr * 1e6:.0f} µs | {(expr / none - 1) * 100:+.1f}% |")
    print(f"\nCatching up after them (the next search): {n:,} events, {per_indexed * 1e6:.0f} µs per indexed event.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15, help="timed runs of each query")
    ap.add_argument("--appends", type=int, default=2000, help="single appends per timed block")
    ap.add_argument("--rounds", type=int, default=5, help="blocks per system (best counts)")
    ap.add_argument("--work", type=Path, help="folder for the databases (kept; reused when it holds one)")
    ap.add_argument("--postgres", metavar="URL", help="the run on this PostgreSQL database instead (empty, or "
                    "built by an earlier run: reused)")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-search-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.postgres:
        try:
            bench_postgres(a.postgres, work, a)
        finally:
            if a.work is None:
                shutil.rmtree(work, ignore_errors=True)
        return 0
    db = work / f"search-{a.events}.db"
    try:
        if not db.exists():
            build(db, work, a.events, a.files)
        counts, rows = bench_queries(db, a.repeat)
        indexing = (work / f"search-{a.events}.indexing.txt")
        if indexing.exists():
            n, spent = indexing.read_text().split()
            counts.append(("indexed by the first search", f"{int(n):,} events in {float(spent):.1f} s "
                                                          f"({float(spent) / int(n) * 1e6:.1f} µs each)"))
        said = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k}: {v}" for k, v in counts)
        print(f"## Search: {said} (Python {sys.version.split()[0]}, "
              f"SQLite {sqlite3.sqlite_version}, load {os.getloadavg()[0]:.2f})\n")
        print("| query | matching events | median | best |\n|---|---:|---:|---:|")
        for q, hits, med, best in rows:
            print(f"| `{q}` | {hits:,} | {med * 1000:.1f} ms | {best * 1000:.1f} ms |")
        print("\n## Single appends (one event per transaction)\n")
        print("| events | revision 0008 (no index) | current (0100) | cost | rejected: FTS5 trigger | its cost |\n"
              "|---|---:|---:|---:|---:|---:|")
        appends, per_indexed = bench_appends(work, a.appends, a.rounds)
        for workload, old, cur, trig in appends:
            print(f"| {workload} | {old * 1e6:.1f} µs | {cur * 1e6:.1f} µs | {(cur / old - 1) * 100:+.1f}% "
                  f"| {trig * 1e6:.1f} µs | {(trig / old - 1) * 100:+.1f}% |")
        print(f"\nCatching up after them (the next search): {per_indexed * 1e6:.1f} µs per indexed event.")
        print(f"\n(load at the end {os.getloadavg()[0]:.2f})")
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
