"""Verify: the whole database checked as a user runs it, against a plain script re-chaining
every session's hashes (SQLite; on PostgreSQL eventstore alone); and `eventstore copy` of the same
sessions into a new SQLite file (each session verified in the source and in the target)."""

from __future__ import annotations

import sys
from pathlib import Path

from eventstore import EventStore

from .. import data
from ..harness import ES, command, run_command

SUMMARY = ("`eventstore verify` of agent sessions as a command; a plain script re-chaining every hash; "
           "`eventstore copy` of them into a new SQLite file")
NAME = "Verify"
#: the plain script: every event's line rebuilt and chained with sha256, session by session; a
#: salted event's line carries its commit payload (each value's salted digest, docs/redaction.md)
SCRIPT = """import hashlib, sqlite3, sys, orjson
sha = hashlib.sha256
conn = sqlite3.connect(sys.argv[1])
bad = 0
for (sid,) in conn.execute("SELECT id FROM sessions").fetchall():
    prev = sha(orjson.dumps({"type": "session/meta", "id": sid})).hexdigest()
    for t, seq, ts, pj, h, salt in conn.execute(
            "SELECT type, seq, ts, payload, hash, salt FROM events WHERE session_id = ? ORDER BY seq", (sid,)):
        if salt is not None:
            parts = []
            for k, v in orjson.loads(pj).items():
                kb = orjson.dumps(k)
                digest = sha(sha(salt + kb).digest()[:16] + orjson.dumps(v)).hexdigest()
                parts.append(kb + b':"' + digest.encode() + b'"')
            pj = (b"{" + b",".join(parts) + b"}").decode()
        head = orjson.dumps({"type": t, "seq": seq, "ts": ts}).decode()
        prev = sha((prev + "\\n" + head[:-1] + ("}" if pj == "{}" else "," + pj[1:])).encode()).hexdigest()
        bad += prev != h
sys.exit(bad != 0)
"""


def run(bench) -> None:
    """Import the corpus, then time the verify command (and the plain script on SQLite)."""
    files, per = bench.pick((2, 250), (20, 10_000))
    corpus = data.corpus(bench.workdir / "corpus" / f"{files}x{per}", files, per)
    db = bench.target("verify")
    with EventStore.open(db) as store:
        for _sid, path in corpus:
            store.import_jsonl(path)
    n = files * per
    systems = {ES: lambda: run_command(command("verify", db=db)) / n}
    notes = {ES: "eventstore verify (file, chains, rules), stdout to /dev/null"}
    if bench.backend == "sqlite":
        plain = "plain Python script"
        systems[plain] = lambda: run_command([sys.executable, "-c", SCRIPT, db]) / n
        notes[plain] = "re-chain every session's hashes from salted commitments (sqlite3, orjson, hashlib)"
    bench.measure(NAME, f"{n:,} events in {files} sessions", systems, "event", notes)
    copy_db = bench.folder("verify") / "copy.db"

    def copy_once() -> float:
        """`eventstore copy` into a new file: each session verified in the source, imported,
        and verified in the target."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy_db}{suffix}").unlink(missing_ok=True)
        return run_command(command("copy", db, str(copy_db))) / n

    bench.measure(NAME, f"copy: {n:,} events in {files} sessions", {ES: copy_once}, "event",
                  {ES: "eventstore copy SRC NEW.db (verify the source, import, verify the target)"})
