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

With ``--postgres URL`` (an empty database; the role must own it, to drop and recreate
the index) a quick sanity run on PostgreSQL instead: the same queries over ``--events``
imported events (GIN expression index, no catch-up), and single appends of message events
with the index and with it dropped.
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
from eventstore.codec import dumps, event_line, meta_line  # noqa: E402
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
    if not indexed:  # PostgreSQL: indexed on insert
        store.close()
        return
    print(f"\nindexed {indexed:,} message events in {spent:.1f} s ({spent / indexed * 1e6:.1f} µs each)",
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
    n_events = store.backend._read("SELECT count(*) FROM events")[0][0]
    indexed = store.backend._read("SELECT count(*) FROM events_search_text")[0][0]
    queries = ["w40000", "w5000", "w500", "w50", "w5", "w0", "w50 w500", "w5 w50 w500", "w123*"]
    rows = []
    for q in queries:
        hits = count(store, q)
        med, best = timed(lambda q=q: search(store, q, limit=20), repeat)
        rows.append((q, hits, med, best))
    store.close()
    return [("events", n_events), ("indexed", indexed)], rows


def _store_at(path: Path, variant: str) -> None:
    """A new store: ``current`` (revision 0100), ``0008`` (the 0100 objects dropped), or
    ``trigger`` (0100 plus an FTS5 insert trigger, the rejected design)."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.unlink(str(path) + suffix)
    EventStore.open(path).close()
    con = sqlite3.connect(path)
    if variant == "0008":
        con.executescript("""DROP TABLE events_search; DROP TABLE events_search_state; DROP VIEW events_search_text;
                             DROP VIEW usage; ALTER TABLE sessions DROP COLUMN meta_hash;
                             UPDATE alembic_version SET version_num = '0008';""")
    elif variant == "trigger":
        text = con.execute("SELECT sql FROM sqlite_master WHERE name = 'events_search_text'").fetchone()[0]
        expr = text.split("type,", 1)[1].rsplit("AS text", 1)[0].replace("payload", "new.payload")
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
    # Revision 0008 opens as it is only read-only; for appends, keep the store from
    # upgrading it by opening the current code's engine without migrating: the file is
    # opened once at head first, then stamped back (the objects are gone, the code does
    # not use them to append).
    stores = {}
    for v in variants:
        path = work / f"append-{v}.db"
        if v == "0008":
            con = sqlite3.connect(path)
            con.execute("UPDATE alembic_version SET version_num = '0100'")
            con.commit()
            con.close()
        stores[v] = EventStore.open(path)
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


def bench_postgres(url: str, work: Path, a: argparse.Namespace) -> None:
    """The sanity run on PostgreSQL (see the module's docstring)."""
    build(url, work, a.events, a.files)
    store = EventStore.open(url)
    n_events = store.backend._read("SELECT count(*) FROM events")[0][0]
    version = store.backend._read("SHOW server_version")[0][0]
    print(f"## Search on PostgreSQL {version}: events {n_events:,} (load {os.getloadavg()[0]:.2f})\n")
    print("| query | matching events | median | best |\n|---|---:|---:|---:|")
    for q in ["w40000", "w5000", "w500", "w50", "w5", "w0", "w50 w500", "w5 w50 w500", "w123*"]:
        med, best = timed(lambda q=q: search(store, q, limit=20), a.repeat)
        print(f"| `{q}` | {count(store, q):,} | {med * 1000:.1f} ms | {best * 1000:.1f} ms |")
    words = Words(random.Random(7))
    msgs = [("user/message", {"content": words.text(30)}), ("tool/result", {"tool_call_id": "c",
                                                                            "content": words.text(120)})]
    index = store.backend._read("SELECT indexdef FROM pg_indexes WHERE indexname = 'events_search'")[0][0]
    sess = store.create_session("appends")
    best = {}
    for _ in range(a.rounds):
        for variant in ("index", "no index"):
            if variant == "no index":
                store.backend._conn("w").execute("DROP INDEX events_search")
            t0 = time.perf_counter()
            for i in range(a.appends):
                sess.append(*msgs[i % 2])
            best[variant] = min(best.get(variant, float("inf")), (time.perf_counter() - t0) / a.appends)
            if variant == "no index":
                store.backend._conn("w").execute(index)
    store.close()
    print("\n## Single appends of message events (one per transaction)\n")
    print("| without the index | with it | cost |\n|---:|---:|---:|")
    print(f"| {best['no index'] * 1e6:.1f} µs | {best['index'] * 1e6:.1f} µs "
          f"| {(best['index'] / best['no index'] - 1) * 100:+.1f}% |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15, help="timed runs of each query")
    ap.add_argument("--appends", type=int, default=2000, help="single appends per timed block")
    ap.add_argument("--rounds", type=int, default=5, help="blocks per system (best counts)")
    ap.add_argument("--work", type=Path, help="folder for the databases (kept; reused when it holds one)")
    ap.add_argument("--postgres", metavar="URL", help="a sanity run on this (empty) PostgreSQL database instead")
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
