"""Full-text search: the call in process, and the command as a user runs it."""

from __future__ import annotations

from eventstore import EventStore
from eventstore import search as es_search

from .. import data
from ..harness import ES, command, run_command, timed

SUMMARY = "search of agent sessions: eventstore.search.search() in process and `eventstore search` as a command"
NAME = "Search"
QUERIES = ("session", "shell build", "function error")


def run(bench) -> None:
    """Import the corpus, then time the queries and the command."""
    files, per = bench.pick((4, 500), (50, 20_000))
    corpus = data.corpus(bench.workdir / "corpus" / f"{files}x{per}", files, per)
    db = bench.target("search")
    n = files * per
    with EventStore.open(db) as store:
        for _sid, path in corpus:
            store.import_jsonl(path)
        t = timed(lambda: es_search.search(store, "warm", limit=1), 1)  # the index catches up
        reps = bench.pick(3, 20)
        for q in QUERIES:
            hits = es_search.search(store, q, limit=20)
            bench.check(f"search {q!r} finds events", len(hits) > 0, len(hits))
            bench.measure(NAME, f"{q!r} in {n:,} events", {ES: lambda q=q: timed(
                lambda: [es_search.search(store, q, limit=20) for _ in range(reps)], reps)},
                "query", {ES: "search(store, q, limit=20), ranked, with snippets"})
    bench.measure(NAME, f"command, {n:,} events", {f"{ES} search": lambda: run_command(command("search", QUERIES[1],
                                                                                             db=db))},
                  "command", {f"{ES} search": f"eventstore search {QUERIES[1]!r}, stdout to /dev/null"})
    bench.figures[-1].extra = {"first search (index catch-up)": f"{t:.2f} s"}
