"""Why does the projection slow down with chunks? Time variants of it on a scratch copy.

Builds one scratch database holding two sessions with the same ``--messages`` chat
messages, one with no other events and one with ``--chunks`` ``assistant/chunk`` events
spread between them (the data of ``tools/bench.py``'s projection workload), then derives
both sessions' messages with each variant and prints the CPU time of one projection
(``time.process_time``, minimum of ``--repeat``: less sensitive to other processes than wall
time) and the number of ``read`` system calls it made (``/proc/self/io`` ``syscr``: SQLite
reads a page it does not hold in its page cache with one ``pread``; load-independent).

=================  ========================================================================
``view``           ``view_messages``: the store's read as shipped (the ``messages`` view over the
                   ``events_messages`` partial index), default page cache (2 MiB)
``view+write``     the same, while a second connection appends one event between two
                   projections (as other agent processes do): WAL readers then drop their
                   page cache, so every projection starts cold
``view+cache``     ``PRAGMA cache_size = -16384`` (16 MiB page cache)
``view+mmap``      ``PRAGMA mmap_size = 268435456`` (pages read through a memory map)
``covering``       the ``events_messages`` index made covering (``session_id, seq, type,
                   payload``): the message rows are read from the index, which keeps them
                   together, instead of from table pages shared with the chunks
``covering+write`` ``covering`` with the foreign write between projections
``python``         ``SELECT type, payload`` of the message rows, mapped in Python (json.loads
                   per row), for comparison with the SQL view
=================  ========================================================================

Usage (from the repository root)::

    python tools/projection_variants.py [--messages 1000] [--chunks 100000] [--repeat 10]

Scratch databases only: never run against a real store.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.log import projection
from eventstore.log.types import MESSAGE_TYPES  # noqa: E402

_TYPES = "(" + ", ".join(f"'{t}'" for t in MESSAGE_TYPES) + ")"
_PY_SELECT = f"SELECT type, payload FROM events WHERE session_id = ? AND type IN {_TYPES} ORDER BY seq"


def read_syscalls() -> int:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("syscr:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def view_messages(conn: sqlite3.Connection, sid: str) -> list[dict]:
    """The projection as the store reads it: the messages view's rows, parsed as one array."""
    rows = conn.execute("SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    return projection.loads("[" + ",".join(r[0] for r in rows) + "]")


def py_messages(conn: sqlite3.Connection, sid: str) -> list[dict]:
    loads = json.loads
    out = []
    for t, p in conn.execute(_PY_SELECT, (sid,)):
        ev = loads(p)
        if t == "user/message":
            m = {"role": "user"}
            if "content" in ev:
                m["content"] = ev["content"]
        elif t == "assistant/message":
            m = {"role": "assistant", "content": "" if ev.get("content") is None else ev["content"]}
            if ev.get("tool_calls"):
                m["tool_calls"] = ev["tool_calls"]
        else:
            m = {"role": "tool"}
            for k in ("tool_call_id", "content"):
                if k in ev:
                    m[k] = ev[k]
        out.append(m)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="projection-variants-") as tmp:
        base = Path(tmp) / "base.db"
        sids = []
        with EventStore.open(base) as store:
            for chunks in (0, args.chunks):
                sid = f"proj-{chunks}"
                path = Path(tmp) / f"{sid}.jsonl"
                bench.write_jsonl(path, sid, bench.projection_events(args.messages, chunks))
                store.import_jsonl(path)
                sids.append(sid)
            expected = [store.session(s).derive_messages() for s in sids]
        covering = Path(tmp) / "covering.db"
        shutil.copyfile(base, covering)
        conn = sqlite3.connect(covering, isolation_level=None)
        conn.execute("DROP INDEX events_messages")
        conn.execute(f"CREATE INDEX events_messages ON events (session_id, seq, type, payload) WHERE type IN {_TYPES}")
        conn.execute("VACUUM")
        conn.close()

        variants = {
            "view": (base, [], False, view_messages),
            "view+write": (base, [], True, view_messages),
            "view+cache": (base, ["PRAGMA cache_size = -16384"], False, view_messages),
            "view+mmap": (base, ["PRAGMA mmap_size = 268435456"], False, view_messages),
            "covering": (covering, [], False, view_messages),
            "covering+write": (covering, [], True, view_messages),
            "python": (base, [], False, py_messages),
        }
        print(f"{'variant':<16} {'0 chunks':>10} {f'{args.chunks:,} chunks':>16} {'ratio':>6}  "
              f"{'reads/projection (0 / chunks)':>30}")
        for name, (db, pragmas, foreign_write, derive) in variants.items():
            conn = sqlite3.connect(db, isolation_level=None)
            for p in pragmas:
                conn.execute(p)
            writer = None
            if foreign_write:
                writer = EventStore.open(db)
                noise = writer.create_session(f"noise-{name}")
            times, reads = [], []
            for i, sid in enumerate(sids):
                assert derive(conn, sid) == expected[i], (name, sid)
                best, syscr = float("inf"), 0
                for _ in range(args.repeat):
                    if writer:
                        noise.append("assistant/chunk", {"delta": {"content": "x"}})
                    r0 = read_syscalls()
                    t0 = time.process_time()
                    derive(conn, sid)
                    best = min(best, time.process_time() - t0)
                    syscr += read_syscalls() - r0
                times.append(best)
                reads.append(syscr / args.repeat)
            if writer:
                writer.close()
            conn.close()
            print(f"{name:<16} {times[0] * 1e3:>8.2f}ms {times[1] * 1e3:>14.2f}ms {times[1] / times[0]:>5.2f}x  "
                  f"{reads[0]:>14.0f} / {reads[1]:<14.0f}")
        for db in (base, covering):
            print(f"{db.name}: {os.path.getsize(db) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
