"""Load generator: N agent processes append realistic sessions to one database.

Each writer is a separate process (multiprocessing, spawn) that opens its own
:class:`eventstore.EventStore` and appends agent turns: ``turn/start``, ``user/message``,
then steps of ``step/start``, streamed ``assistant/chunk`` deltas, an ``assistant/message``
(with tool calls in every step but the last), one ``tool/result`` per call, ``step/end``,
and finally ``turn/end``. Every writer appends to its own session, or with ``--shared``
all of them append to one session. Writers start together (a barrier) and time every
single ``append`` call.

Afterwards the script checks every session (seq 0..n-1, no gap, no duplicate, the expected
count) and prints the aggregate throughput (events per second over the wall time from the
first writer's start to the last one's end) and the p50/p99/max latency of one append
(milliseconds). With ``--tail``, a follower process tails the store meanwhile (checking it
sees every event once, in order) and the largest ``-wal`` file size seen is reported.

Usage (from the repository root)::

    python tools/loadgen.py --writers 1 --events 3000
    python tools/loadgen.py --writers 8 --events 3000
    python tools/loadgen.py --writers 8 --events 3000 --shared --tail
    python tools/loadgen.py --writers 8 --events 3000 --no-write-queue   # SQLite's busy handler only
    python tools/loadgen.py --writers 4 --think 0.005 --import-events 1000000   # appends during an import

With ``--import-events N``, a JSONL file of one agent session of N events is written first
(kept as ``--import-file`` when given, and reused when it exists), and an importer process
imports it while the writers append; the writers append until the import ends (at least
``--events`` each), and the import's time is reported beside the appends' latency.

Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import random
import sqlite3
import sys
import tempfile
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventstore import EventStore, EventStoreError  # noqa: E402

WORDS = ("the file tests pass now let me check output function error value path run import "
         "store session append event result tool call shell build fix line return data").split()


def agent_events(rng: random.Random, agent: str):
    """Yield ``(type, payload)`` of agent turns forever, shaped like a coding agent's log."""
    turn = 0
    while True:
        yield "turn/start", {"agent": agent, "turn": turn}
        yield "user/message", {"content": " ".join(rng.choices(WORDS, k=rng.randint(5, 40)))}
        steps = rng.randint(1, 4)
        call_n = 0
        for step in range(steps):
            yield "step/start", {"step": step}
            text = " ".join(rng.choices(WORDS, k=rng.randint(10, 120)))
            size = rng.randint(8, 40)
            for i in range(0, len(text), size):
                yield "assistant/chunk", {"delta": {"content": text[i:i + size]}}
            calls = []
            if step < steps - 1:
                for _ in range(rng.randint(1, 3)):
                    call_n += 1
                    args = json.dumps({"command": " ".join(rng.choices(WORDS, k=4))})
                    calls.append({"id": f"call_{turn}_{call_n}", "type": "function",
                                  "function": {"name": "run_bash", "arguments": args}})
            yield "assistant/message", {"content": text, "tool_calls": calls}
            for c in calls:
                out = " ".join(rng.choices(WORDS, k=rng.randint(5, 400)))
                yield "tool/result", {"tool_call_id": c["id"], "content": out}
            yield "step/end", {"step": step, "tool_calls": len(calls)}
        yield "turn/end", {}
        turn += 1


def writer(db: str, index: int, events: int, shared: str | None, think: float, options: dict,
           spin_us: float, barrier, results, until=None) -> None:
    """One agent process: append ``events`` events, timing each append (nanoseconds).
    With ``spin_us``, spin the CPU that long instead of appending (no database at all).
    An append that fails (``database is busy`` past the busy timeout) is counted, timed
    like the others, and not retried; the writer goes on with its next event."""
    rng = random.Random(index)
    try:
        with EventStore.open(db, **options) as store:
            session = store.session(shared) if shared else store.create_session(f"agent-{index:03d}")
            gen = agent_events(rng, session.id)
            lat = array("q")
            errors, first_error = 0, None
            barrier.wait()
            start = time.monotonic()
            clock = time.perf_counter_ns
            spin_ns = int(spin_us * 1000)
            n = 0
            while n < events or (until is not None and not until.is_set()):
                n += 1
                type_, payload = next(gen)
                if think:
                    time.sleep(rng.expovariate(1 / think))
                t0 = clock()
                if spin_ns:
                    while clock() - t0 < spin_ns:
                        pass
                else:
                    try:
                        session.append(type_, payload)
                    except EventStoreError as e:
                        errors += 1
                        first_error = first_error or str(e)
                lat.append(clock() - t0)
            end = time.monotonic()
    except BaseException as e:
        barrier.abort()  # nobody waits for a writer that will not come
        results.put((index, None, None, b"", 1, f"{type(e).__name__}: {e}"))
        raise
    results.put((index, start, end, lat.tobytes(), errors, first_error))


def write_import_file(path: str, events: int) -> None:
    """A JSONL file of one agent session (``session/meta`` ``imported``) of ``events`` events."""
    rng = random.Random(12345)
    gen = agent_events(rng, "imported")
    ts = 1.7e9
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"type":"session/meta","id":"imported"}\n')
        for seq in range(events):
            type_, payload = next(gen)
            ts += 0.001
            f.write(json.dumps({"type": type_, "seq": seq, "ts": round(ts, 3), **payload},
                               separators=(",", ":")) + "\n")


def importer(db: str, path: str, options: dict, barrier, done, results) -> None:
    """Import ``path`` once the writers are ready; report ``(start, end, error)``."""
    error = None
    start = end = time.monotonic()
    try:
        with EventStore.open(db, **options) as store:
            barrier.wait()
            time.sleep(0.2)  # the writers are appending before the import starts
            start = time.monotonic()
            store.import_jsonl(path)
            end = time.monotonic()
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"
        barrier.abort()
    finally:
        done.set()
        results.put(("importer", start, end, error))


def follower(db: str, total: int, barrier, results) -> None:
    """Tail the whole store until ``total`` events were seen, checking their order."""
    seen = 0
    last = 0
    ok = True
    try:
        with EventStore.open(db) as store:
            barrier.wait()
            for ev in store.follow(after_position=0, poll_interval=0.005, idle_timeout=30):
                if ev.position != last + 1:
                    ok = False
                last = ev.position
                seen += 1
                if seen >= total:
                    break
    finally:
        results.put(("follower", seen, ok))


def check(db: str, expected: dict[str, int]) -> list[str]:
    """Problems found in the database (empty list: all good): a session whose seqs are not
    exactly 0..n-1, a session of ``expected`` without its expected count, global positions
    not exactly 1..N, or a failed ``PRAGMA integrity_check``."""
    problems = []
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("""SELECT session_id, count(*), count(DISTINCT seq), min(seq), max(seq)
                               FROM events GROUP BY session_id""").fetchall()
        found = {r[0]: r[1:] for r in rows}
        for sid, (count, distinct, lo, hi) in found.items():
            if count != distinct or lo != 0 or hi != count - 1:
                problems.append(f"session {sid}: {count} events, {distinct} distinct seqs, {lo}..{hi}")
        for sid, n in expected.items():
            if found.get(sid, (0,))[0] != n:
                problems.append(f"session {sid}: {found.get(sid, (0,))[0]} events, expected {n}")
        positions = conn.execute("SELECT count(*), count(DISTINCT position), coalesce(max(position), 0) "
                                 "FROM events").fetchone()
        if positions[0] != positions[1] or positions[0] != positions[2]:
            problems.append(f"positions: {positions[0]} events, {positions[1]} distinct, max {positions[2]}")
        ic = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if ic != "ok":
            problems.append(f"integrity_check: {ic}")
    finally:
        conn.close()
    return problems


def percentile(sorted_values, p: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", help="database file (default: a new file in a temporary folder)")
    ap.add_argument("--writers", type=int, default=8, help="agent processes (default 8)")
    ap.add_argument("--events", type=int, default=2000, help="appends per writer (default 2000)")
    ap.add_argument("--shared", action="store_true", help="all writers append to one session")
    ap.add_argument("--think", type=float, default=0.0,
                    help="mean pause between appends, seconds (default 0: as fast as possible)")
    ap.add_argument("--durability", choices=("normal", "full"), default="normal")
    ap.add_argument("--no-write-queue", action="store_true",
                    help="writers wait with SQLite's busy handler only (no lock-file queue)")
    ap.add_argument("--tail", action="store_true", help="run a follower process beside the writers")
    ap.add_argument("--spin-us", type=float, default=0.0, metavar="US",
                    help="baseline: writers spin the CPU this many microseconds instead of appending "
                         "(what the scheduler alone does to latency with this many processes)")
    ap.add_argument("--import-events", type=int, default=0, metavar="N",
                    help="import a JSONL session of N events while the writers append")
    ap.add_argument("--import-file", help="where to keep the import's JSONL file (reused when it exists)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)

    tmp = None
    if args.db:
        db = str(Path(args.db).absolute())
    else:
        tmp = tempfile.TemporaryDirectory(prefix="loadgen-")
        db = os.path.join(tmp.name, "load.db")
    options = {"durability": args.durability}
    if args.no_write_queue:
        options["write_queue"] = False
    with EventStore.open(db, **options) as store:
        shared = store.create_session().id if args.shared else None
        before = {i.id: i.events for i in store.sessions()}

    ctx = mp.get_context("spawn")
    parties = args.writers + (1 if args.tail else 0) + (1 if args.import_events else 0)
    barrier = ctx.Barrier(parties)
    results = ctx.Queue()
    until = ctx.Event() if args.import_events else None
    procs = [ctx.Process(target=writer, args=(db, i, args.events, shared, args.think, options, args.spin_us,
                                              barrier, results, until))
             for i in range(args.writers)]
    if args.import_events:
        path = args.import_file or os.path.join(tmp.name if tmp else os.path.dirname(db), "import.jsonl")
        if not os.path.exists(path):
            write_import_file(path, args.import_events)
        procs.append(ctx.Process(target=importer, args=(db, path, options, barrier, until, results)))
    if args.tail:
        total = args.writers * args.events
        procs.append(ctx.Process(target=follower, args=(db, total, barrier, results)))
    for p in procs:
        p.start()
    lat = array("q")
    starts, ends = [], []
    tail = None
    imported = None
    counts: dict[int, int] = {}
    biggest_wal = 0
    errors, error_text = 0, None
    for _ in procs:
        while True:  # sample the -wal file's size while waiting for the results
            try:
                r = results.get(timeout=0.05)
                break
            except queue.Empty:
                try:
                    biggest_wal = max(biggest_wal, os.path.getsize(db + "-wal"))
                except OSError:
                    pass
        if r[0] == "follower":
            tail = r
            continue
        if r[0] == "importer":
            imported = r
            continue
        index, start, end, raw, n_errors, first_error = r
        counts[index] = len(raw) // 8
        if start is not None:
            starts.append(start)
            ends.append(end)
        lat.frombytes(raw)
        errors += n_errors
        if first_error and not error_text:
            error_text = first_error
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode]

    if args.spin_us:
        expected = {}
    elif args.shared:
        expected = {shared: before.get(shared, 0) + args.writers * args.events}
    else:
        expected = {f"agent-{i:03d}": before.get(f"agent-{i:03d}", 0) + counts.get(i, args.events)
                    for i in range(args.writers)}
    if imported is not None:
        if imported[3]:
            problems_import = [f"import failed: {imported[3]}"]
        else:
            problems_import = []
            expected["imported"] = args.import_events
    problems = check(db, expected) if not errors else check(db, {})  # failed appends: counts differ
    if errors:
        problems.insert(0, f"{errors} append(s) failed, first: {error_text}")
    if imported is not None:
        problems += problems_import
    if failed:
        problems.append(f"writer exit codes {failed}")
    if tail is not None and not args.spin_us and (tail[1] != args.writers * args.events or not tail[2]):
        problems.append(f"follower saw {tail[1]} events, in order: {tail[2]}")
    wall = max(ends) - min(starts) if starts else 0.0
    ms = sorted(v / 1e6 for v in lat)
    figures = {
        "writers": args.writers, "events_per_writer": args.events, "shared": args.shared,
        "durability": args.durability, "write_queue": not args.no_write_queue, "think_s": args.think,
        "spin_us": args.spin_us,
        "events": len(ms), "wall_s": round(wall, 3),
        "throughput_eps": round(len(ms) / wall) if wall else 0,
        "p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(ms[-1], 3) if ms else 0.0,
        "max_wal_bytes": biggest_wal, "errors": errors,
        "import_events": args.import_events,
        "import_s": round(imported[2] - imported[1], 2) if imported else None,
        "problems": problems,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        mode = "one shared session" if args.shared else "own sessions"
        if args.spin_us:
            mode = f"BASELINE: {args.spin_us:g} us CPU spins, no database"
        print(f"{args.writers} writer(s) x {args.events} appends ({mode}, durability={args.durability}, "
              f"write queue {'off' if args.no_write_queue else 'on'}): {len(ms)} events in {wall:.2f} s")
        print(f"  throughput {figures['throughput_eps']} events/s; append latency p50 {figures['p50_ms']:.2f} ms, "
              f"p99 {figures['p99_ms']:.2f} ms, max {figures['max_ms']:.2f} ms")
        if imported:
            print(f"  import of {args.import_events} events beside them: {figures['import_s']:.2f} s")
        if tail:
            print(f"  follower saw {tail[1]} events in order: {tail[2]}")
        print(f"  largest -wal file seen: {biggest_wal / 1e6:.1f} MB")
        print("  check: " + ("every session gapless, no duplicates, integrity ok" if not problems
                             else "; ".join(problems)))
    if tmp is not None:
        tmp.cleanup()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
