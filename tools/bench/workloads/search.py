"""Full-text search: the call in process, and the command as a user runs it against a plain
script running the same queries with the same driver (SQLite)."""

from __future__ import annotations

import os
import sqlite3
import sys
import time

from eventstore import EventStore
from eventstore import search as es_search

from .. import data
from ..harness import ES, command, process_figures, timed

SUMMARY = "search of agent sessions: eventstore.search.search() in process and `eventstore search` as a command"
NAME = "Search"
QUERIES = ("session", "shell build", "function error")
#: the plain script: the queries eventstore's SQLite backend runs (the newest 2,000 matches
#: ranked by BM25, the best 20 read back with their text, the matches counted up to 2,001), one print a hit
SCRIPT = """import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
match = " ".join('"' + w + '"' for w in sys.argv[2].split())
floor = conn.execute("SELECT rowid FROM events_search WHERE events_search MATCH ? ORDER BY rowid DESC "
                     "LIMIT 1 OFFSET 1999", (match,)).fetchone()
best = conn.execute("SELECT rowid, bm25(events_search) AS score FROM events_search WHERE events_search MATCH ? "
                    "AND rowid >= ? ORDER BY score LIMIT 20", (match, floor[0] if floor else 0)).fetchall()
for position, score in best:
    print(*conn.execute("SELECT e.session_id, e.seq, e.type, (SELECT x.text FROM events_search_text AS x "
                        "WHERE x.position = e.position) FROM events AS e WHERE e.position = ?", (position,)).fetchone())
n = conn.execute("SELECT count(*) FROM (SELECT 1 FROM events_search WHERE events_search MATCH ? LIMIT 2001)",
                 (match,)).fetchone()[0]
print(n, "matches (at most 2,001 counted)", file=sys.stderr)
"""


def build(db: str, corpus) -> float:
    """Import the corpus into ``db`` and index it; returns the first search's seconds (catch-up)."""
    with EventStore.open(db) as store:
        for _sid, path in corpus:
            store.import_jsonl(path)
        return timed(lambda: es_search.search(store, "warm", limit=1), 1)


def corpus_db(bench, files: int, per: int) -> tuple[str, float | None]:
    """The database of the corpus, indexed, and the first search's seconds (None when an earlier
    run built it). On SQLite it is kept in the work folder (``--workdir`` keeps it between runs)."""
    corpus = data.corpus(bench.workdir / "corpus" / f"{files}x{per}", files, per)
    if bench.backend != "sqlite":
        db = bench.target("search")
        return db, build(db, corpus)
    path = bench.folder("search") / f"search-{files}x{per}.db"
    if path.exists():
        return str(path), None
    part = path.with_suffix(".part")  # renamed when complete: an interrupted build is not reused
    for suffix in ("", "-wal", "-shm", "-lock"):
        (part.parent / (part.name + suffix)).unlink(missing_ok=True)
    t = build(str(part), corpus)
    sqlite3.connect(part).close()  # (the last connection gone: the WAL is folded in)
    os.replace(part, path)
    (part.parent / (part.name + "-lock")).unlink(missing_ok=True)
    return str(path), t


def run(bench) -> None:
    """Import the corpus (or reuse it), then time the queries and the command."""
    files, per = bench.pick((4, 500), (50, 20_000))
    n = files * per
    t0 = time.perf_counter()
    db, first = corpus_db(bench, files, per)
    print(f"search: corpus of {n:,} events ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    with EventStore.open(db) as store:
        reps = bench.pick(3, 20)
        for q in QUERIES:
            hits = es_search.search(store, q, limit=20)
            bench.check(f"search {q!r} finds events", len(hits) > 0, len(hits))
            bench.measure(NAME, f"{q!r} in {n:,} events", {ES: lambda q=q: timed(
                lambda: [es_search.search(store, q, limit=20) for _ in range(reps)], reps)},
                "query", {ES: "search(store, q, limit=20), ranked, with snippets"})
    argvs = {f"{ES} search": command("search", QUERIES[1], db=db)}
    notes = {f"{ES} search": f"eventstore search {QUERIES[1]!r} (a table), stdout to /dev/null"}
    if bench.backend == "sqlite":
        plain = "plain Python script"
        argvs[plain] = [sys.executable, "-c", SCRIPT, db, QUERIES[1]]
        notes[plain] = "the same queries (sqlite3, eventstore's tables), one print a hit, no snippet"
    figs = process_figures(bench, NAME, f"command, {n:,} events", argvs, notes)
    if first is not None:
        figs[f"{ES} search"].extra["first search (index catch-up)"] = f"{first:.2f} s"
