"""Export: every session of a database to JSONL files."""

from __future__ import annotations

import filecmp

from eventstore import EventStore

from .. import data
from ..harness import ES, timed
from ..peers import raw_psycopg, raw_sqlite

SUMMARY = "export_jsonl of every session (byte-identical to the imported files); raw SELECT + concatenation"
NAME = "Export"


def run(bench) -> None:
    """Import the corpus once, then time exporting every session."""
    files, per = bench.pick((4, 500), (20, 10_000))
    corpus = data.corpus(bench.workdir / "corpus" / f"{files}x{per}", files, per)
    n = files * per
    target = bench.target("export")
    store = EventStore.open(target)
    for _sid, path in corpus:
        store.import_jsonl(path)
    out = bench.folder("export-out")
    if bench.backend == "sqlite":
        conn = raw_sqlite.connect(bench.target("export-raw"))
        for _sid, path in corpus:
            raw_sqlite.import_file(conn, path)
        raw_name, export = raw_sqlite.NAME, raw_sqlite.export_session
    else:
        conn = raw_psycopg.connect(target)
        raw_name, export = raw_psycopg.NAME, raw_psycopg.export_session

    def es() -> float:
        return timed(lambda: [store.export_jsonl(sid, out / f"es-{sid}.jsonl") for sid, _ in corpus], n)

    def raw() -> float:
        return timed(lambda: [export(conn, sid, out / f"raw-{sid}.jsonl") for sid, _ in corpus], n)

    bench.measure(NAME, f"{n:,} events in {files} sessions", {ES: es, raw_name: raw}, "event",
                  {ES: "EventStore.export_jsonl per session", raw_name: "SELECT + string concatenation + write"})
    same = all(filecmp.cmp(path, out / f"es-{sid}.jsonl", shallow=False) for sid, path in corpus)
    bench.check("export: eventstore's files are byte-identical to the imported ones", same, f"{files} files")
    conn.close()
    store.close()
