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
2. **Append cost.** Single appends (one event per transaction, ``Session.append``) into two
   copies of the same store, one with the index's trigger and one without (the trigger
   dropped), interleaved, best of ``--rounds`` blocks: ``assistant/chunk`` events (the
   bench.py append workload; not indexed) and message events (indexed). Target: the index
   costs at most 15%.
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
from eventstore.jsonl import dumps, event_line, meta_line  # noqa: E402
from eventstore.search import fts_query, search  # noqa: E402

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
    n_events = store._read("SELECT count(*) FROM events")[0][0]
    indexed = store._read("SELECT count(*) FROM events_search_text")[0][0]
    queries = ["w40000", "w5000", "w500", "w50", "w5", "w0", "w50 w500", "w5 w50 w500", "w123*"]
    rows = []
    for q in queries:
        hits = store._read("SELECT count(*) FROM events_search WHERE events_search MATCH ?", (fts_query(q),))[0][0]
        med, best = timed(lambda q=q: search(store, q, limit=20), repeat)
        rows.append((q, hits, med, best))
    store.close()
    return [("events", n_events), ("indexed", indexed)], rows


def bench_appends(db: Path, work: Path, n: int, rounds: int) -> list[tuple]:
    """Single appends with and without the index trigger, interleaved; seconds per append."""
    with_ix = work / "with.db"
    without = work / "without.db"
    for target in (with_ix, without):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(str(target) + suffix):
                os.unlink(str(target) + suffix)
    # Small copies (the append cost does not depend on the other sessions' size much, and
    # copying a GB twice would dominate the run): fresh stores with one session each.
    for target in (with_ix, without):
        EventStore.open(target).close()
    con = sqlite3.connect(without)
    con.execute("DROP TRIGGER events_search_insert")
    con.commit()
    con.close()
    rng = random.Random(7)
    words = Words(rng)
    msgs = [("user/message", {"content": words.text(30)}),
            ("assistant/message", {"content": words.text(60), "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "run_bash",
                                                             "arguments": json.dumps({"command": words.text(5)})}}]}),
            ("tool/result", {"tool_call_id": "c", "content": words.text(120)})]
    results = []
    stores = {name: EventStore.open(path) for name, path in (("with index", with_ix), ("without", without))}
    sessions = {name: s.create_session("s") for name, s in stores.items()}
    for workload in ("assistant/chunk", "messages"):
        best = {name: float("inf") for name in stores}
        for _ in range(rounds):
            for name, sess in sessions.items():
                t0 = time.perf_counter()
                for i in range(n):
                    if workload == "assistant/chunk":
                        sess.append("assistant/chunk", {"delta": {"content": f"tok{i}"}})
                    else:
                        t, p = msgs[i % 3]
                        sess.append(t, p)
                best[name] = min(best[name], (time.perf_counter() - t0) / n)
        results.append((workload, best["without"], best["with index"], best["with index"] / best["without"] - 1))
    for s in stores.values():
        s.close()
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15, help="timed runs of each query")
    ap.add_argument("--appends", type=int, default=2000, help="single appends per timed block")
    ap.add_argument("--rounds", type=int, default=5, help="blocks per system (best counts)")
    ap.add_argument("--work", type=Path, help="folder for the databases (kept; reused when it holds one)")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-search-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / f"search-{a.events}.db"
    try:
        if not db.exists():
            build(db, work, a.events, a.files)
        counts, rows = bench_queries(db, a.repeat)
        print(f"## Search: {', '.join(f'{k} {v:,}' for k, v in counts)} (Python {sys.version.split()[0]}, "
              f"SQLite {sqlite3.sqlite_version}, load {os.getloadavg()[0]:.2f})\n")
        print("| query | matching events | median | best |\n|---|---:|---:|---:|")
        for q, hits, med, best in rows:
            print(f"| `{q}` | {hits:,} | {med * 1000:.1f} ms | {best * 1000:.1f} ms |")
        print("\n## Single appends with and without the index trigger\n")
        print("| events | without | with index | cost |\n|---|---:|---:|---:|")
        for workload, without, with_ix, cost in bench_appends(db, work, a.appends, a.rounds):
            print(f"| {workload} | {without * 1e6:.1f} µs | {with_ix * 1e6:.1f} µs | {cost * 100:+.1f}% |")
        print(f"\n(load at the end {os.getloadavg()[0]:.2f})")
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
