"""Import: JSONL files of agent sessions into an empty database."""

from __future__ import annotations

from eventstore import EventStore

from .. import data
from ..harness import ES, command, run_command, timed
from ..peers import raw_psycopg, raw_sqlite

SUMMARY = ("import_jsonl and `eventstore import` of generated agent sessions; raw loop with orjson, the same "
           "hash chain, the same transaction size")
NAME = "Import"
CLI = "eventstore import (command)"
SALTED = "salted, chained hashes (log.commit, log.chain)"


def run(bench) -> None:
    """Time importing the corpus into a fresh database each round: the call, the command and the raw loop."""
    from eventstore.io.bulk import CHUNK_ROWS

    files, per = bench.pick((4, 500), (20, 10_000))
    folder = bench.workdir / "corpus" / f"{files}x{per}"
    corpus = data.corpus(folder, files, per)
    n = files * per
    case = f"{n:,} events in {files} files"
    k = iter(range(10**6))

    def es() -> float:
        with EventStore.open(bench.target(f"import-{next(k)}"), durability=bench.durability) as store:
            return timed(lambda: [store.import_jsonl(path) for _sid, path in corpus], n)

    def cli() -> float:
        target = bench.target(f"import-cli-{next(k)}")
        EventStore.open(target).close()  # the schema, as for the raw loop's database
        argv = command("import", str(folder), db=target)
        if bench.durability != "normal":
            argv[argv.index("--db") + 2:argv.index("--db") + 2] = ["--durability", bench.durability]
        return run_command(argv) / n

    shape = f"{CHUNK_ROWS:,} rows a transaction"
    if bench.backend == "sqlite":
        def raw() -> float:
            conn = raw_sqlite.connect(bench.target(f"import-raw-{next(k)}"))
            try:
                return timed(lambda: [raw_sqlite.import_file(conn, path) for _sid, path in corpus], n)
            finally:
                conn.close()
        raw_name, note = raw_sqlite.NAME, f"orjson parse + re-encode, {SALTED}, executemany, {shape}"
    else:
        def raw() -> float:
            url = bench.target(f"import-raw-{next(k)}")
            EventStore.open(url).close()
            conn = raw_psycopg.connect(url, bench.durability)
            try:
                return timed(lambda: [raw_psycopg.import_file(conn, path) for _sid, path in corpus], n)
            finally:
                conn.close()
        raw_name, note = (raw_psycopg.NAME + " COPY",
                          f"orjson parse + re-encode, {SALTED}, COPY into the triggered events, {shape}")
    bench.measure(NAME, case, {ES: es, CLI: cli, raw_name: raw}, "event",
                  {ES: "EventStore.import_jsonl per file (strict parse, chain, guard)",
                   CLI: "the folder in one command: interpreter start-up, detection, report", raw_name: note})
