"""Import: JSONL files of agent sessions into an empty database."""

from __future__ import annotations

from eventstore import EventStore

from .. import data
from ..harness import ES, timed
from ..peers import raw_psycopg, raw_sqlite

SUMMARY = "import_jsonl of generated agent sessions; raw loop with orjson, the hash chain, a transaction a file"
NAME = "Import"


def run(bench) -> None:
    """Time importing the corpus into a fresh database each round."""
    files, per = bench.pick((4, 500), (20, 10_000))
    corpus = data.corpus(bench.workdir / "corpus" / f"{files}x{per}", files, per)
    n = files * per
    case = f"{n:,} events in {files} files"
    k = iter(range(10**6))

    def es() -> float:
        with EventStore.open(bench.target(f"import-{next(k)}"), durability=bench.durability) as store:
            return timed(lambda: [store.import_jsonl(path) for _sid, path in corpus], n)

    if bench.backend == "sqlite":
        def raw() -> float:
            conn = raw_sqlite.connect(bench.target(f"import-raw-{next(k)}"))
            try:
                return timed(lambda: [raw_sqlite.import_file(conn, path) for _sid, path in corpus], n)
            finally:
                conn.close()
        raw_name, note = raw_sqlite.NAME, "orjson parse + re-encode, chained sha256, executemany, a transaction a file"
    else:
        def raw() -> float:
            url = bench.target(f"import-raw-{next(k)}")
            EventStore.open(url).close()
            conn = raw_psycopg.connect(url, bench.durability)
            try:
                return timed(lambda: [raw_psycopg.import_file(conn, path) for _sid, path in corpus], n)
            finally:
                conn.close()
        raw_name, note = raw_psycopg.NAME + " COPY", "orjson parse + re-encode, chained sha256, COPY into events"
    bench.measure(NAME, case, {ES: es, raw_name: raw}, "event",
                  {ES: "EventStore.import_jsonl per file (strict parse, chain, guard)", raw_name: note})
