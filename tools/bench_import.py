"""Benchmark: bulk JSONL import and export against a plain sqlite3 loop, in one run.

Usage::

    python tools/bench_import.py [--sessions 100] [--events 2000] [--repeat 3] [--keep DIR]

Generates a corpus of agent-like session files (seeded, canonical JSONL as the reference
writes it: turns of user/assistant messages, streamed assistant/chunk deltas, tool calls and
results of a few KiB), then times, on the same files and in the same process:

* ``baseline``: a plain Python loop per file: ``json.loads`` each line, pop ``type``/``seq``/
  ``ts``, ``json.dumps`` the rest back to text (the payload column), a chained SHA-256 of
  the line (the hash column), ``executemany`` into a raw ``sqlite3`` table with the same
  columns (position, session_id, seq, type, ts, payload, hash) and no index, trigger or
  check, one transaction per file, same pragmas (WAL, synchronous=NORMAL);
* ``eventstore``: ``EventStore.import_jsonl`` of every file (strict validation, canonical
  form, hash chain, guard triggers, indexes, one transaction per file);
* ``eventstore, no guard triggers``: the same import into a scratch database whose
  ``events`` guard triggers were dropped, to show what the triggers cost (never done to a
  real store);
* ``export``: ``EventStore.export_jsonl`` of every session to a file.

Each timing is the best of ``--repeat`` runs on a fresh database. Figures are machine-
dependent: compare the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import EventStore  # noqa: E402
from eventstore.log.codec import dumps, event_line, meta_line  # noqa: E402

WORDS = ("the of and to in is it that for on with as was be by this are or from at an not file line "
         "error value return function test import def class self print result output tool call run "
         "bash python sqlite json event session append seq hash über naïve 日本語 ✓ 🚀").split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def session_lines(rng: random.Random, sid: str, n_events: int, t0: float = 1764460800.0) -> list[str]:
    """The JSONL lines (no newlines) of one agent-like session of ``n_events`` events."""
    lines = [meta_line(sid)]
    ts = t0
    events: list[tuple[str, dict]] = []
    turn = 0
    while len(events) < n_events:
        events.append(("turn/start", {"agent": sid}))
        events.append(("user/message", {"content": _text(rng, rng.randint(5, 60))}))
        for step in range(rng.randint(1, 3)):
            events.append(("step/start", {"step": step}))
            answer = _text(rng, rng.randint(10, 80))
            words = answer.split(" ")
            for i in range(0, len(words), 3):
                events.append(("assistant/chunk", {"delta": {"content": " ".join(words[i:i + 3]) + " "}}))
            calls = []
            for c in range(rng.choice((0, 1, 1, 2))):
                cid = f"call_{turn}_{step}_{c}"
                args = json.dumps({"command": _text(rng, rng.randint(2, 8))})
                calls.append({"id": cid, "type": "function", "function": {"name": "run_bash", "arguments": args}})
            events.append(("assistant/message", {"content": answer, "tool_calls": calls}))
            for call in calls:
                out = "\n".join(_text(rng, rng.randint(3, 15)) for _ in range(rng.randint(1, 40)))
                events.append(("tool/result", {"tool_call_id": call["id"], "content": out}))
            events.append(("step/end", {"step": step, "tool_calls": len(calls)}))
        events.append(("turn/end", {}))
        turn += 1
    for seq, (t, payload) in enumerate(events[:n_events]):
        ts = round(ts + rng.random() * 2, 3)
        lines.append(event_line(t, seq, ts, dumps(payload)))
    return lines


def make_corpus(folder: Path, sessions: int, events: int, seed: int = 1) -> tuple[list[Path], int, int]:
    """Write ``sessions`` files of ``events`` events each; return (files, events, bytes)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    size = 0
    for i in range(sessions):
        sid = f"bench-{i:05d}"
        path = folder / f"{sid}.jsonl"
        data = ("\n".join(session_lines(rng, sid, events)) + "\n").encode("utf-8")
        path.write_bytes(data)
        size += len(data)
        files.append(path)
    return files, sessions * events, size


BASELINE_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at REAL NOT NULL, meta TEXT NOT NULL);
CREATE TABLE events (position INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL,
                     type TEXT NOT NULL, ts REAL NOT NULL, payload TEXT NOT NULL, hash TEXT NOT NULL);
"""


def import_baseline(db: Path, files: list[Path]) -> None:
    """The plain loop: json.loads + json.dumps of the payload + executemany, raw sqlite3."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(BASELINE_SCHEMA)
    loads, dumps_, sha256 = json.loads, json.dumps, hashlib.sha256
    position = 0
    for path in files:
        rows = []
        sid = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                obj = loads(line)
                t = obj.pop("type")
                if t == "session/meta":
                    sid = obj.pop("id")
                    prev = sha256(line.rstrip("\n").encode()).hexdigest()
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("INSERT INTO sessions VALUES (?, ?, ?)",
                                 (sid, time.time(), dumps_(obj, ensure_ascii=False, separators=(",", ":"))))
                    continue
                seq = obj.pop("seq")
                ts = obj.pop("ts")
                position += 1
                prev = sha256((prev + "\n" + line.rstrip("\n")).encode()).hexdigest()
                rows.append((position, sid, seq, t, ts, dumps_(obj, ensure_ascii=False, separators=(",", ":")), prev))
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
    conn.close()


def import_store(db: Path, files: list[Path], drop_guards: bool = False) -> None:
    with EventStore.open(db) as store:
        if drop_guards:
            for name in ("events_guard_insert",):
                store._backend._conn.execute(f"DROP TRIGGER {name}")
        for path in files:
            store.import_jsonl(path)


def export_store(db: Path, out: Path) -> int:
    n = 0
    with EventStore.open(db) as store:
        for info in store.sessions():
            n += store.export_jsonl(info.id, out / f"{info.id}.jsonl")
    return n


def timed(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--events", type=int, default=2000, help="events per session")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (interleaved); the best counts")
    ap.add_argument("--no-trigger-run", action="store_true", help="skip the run without guard trigger")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_import_"))
    try:
        files, n_events, size = make_corpus(work / "corpus", args.sessions, args.events)
        print(f"corpus: {len(files)} files, {n_events} events, {size / 1e6:.1f} MB "
              f"(python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} cpus, "
              f"load average {os.getloadavg()[0]:.1f})")

        def fresh(name: str) -> Path:
            for suffix in ("", "-wal", "-shm"):
                p = work / f"{name}.db{suffix}"
                if p.exists():
                    p.unlink()
            return work / f"{name}.db"

        runs = [("baseline: json.loads + executemany, raw sqlite3", import_baseline, ()),
                ("eventstore import", import_store, ())]
        if not args.no_trigger_run:
            runs.append(("eventstore import without guard trigger (scratch)", import_store, (True,)))
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):  # interleaved, so that a busy moment hits every contender
            for label, fn, extra in runs:
                wall, cpu = timed(fn, fresh(label.split()[0]), files, *extra)
                old = best.get(label, (float("inf"), float("inf")))
                best[label] = (min(old[0], wall), min(old[1], cpu))
        base_wall, base_cpu = best[runs[0][0]]
        print(f"{'':52} {'wall s':>7} {'events/s':>10} {'ratio':>6}   {'CPU s':>6} {'ratio':>6}")
        for label, (wall, cpu) in best.items():
            print(f"{label:52} {wall:7.2f} {n_events / wall:>10,.0f} {base_wall / wall:5.2f}x   "
                  f"{cpu:6.2f} {base_cpu / cpu:5.2f}x")
        out = work / "export"
        out.mkdir(exist_ok=True)
        fresh("eventstore")
        import_store(work / "eventstore.db", files)
        ex_wall = ex_cpu = float("inf")
        for _ in range(args.repeat):
            wall, cpu = timed(export_store, work / "eventstore.db", out)
            ex_wall, ex_cpu = min(ex_wall, wall), min(ex_cpu, cpu)
        print(f"{'eventstore export (every session to a file)':52} {ex_wall:7.2f} {n_events / ex_wall:>10,.0f}"
              f"          {ex_cpu:6.2f}  ({n_events / ex_cpu:,.0f} events per CPU second)")
        print("ratio: baseline time / eventstore time (above 1: eventstore is faster)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
