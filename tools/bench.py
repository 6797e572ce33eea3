"""Benchmarks: eventstore against raw sqlite3 (the limit) and its peers, side by side in one run.

Usage (from the repository root; peers are optional: ``pip install -e '.[bench]'``)::

    python tools/bench.py                      # the full run (sizes 1k/10k/100k, 1M-event corpus)
    python tools/bench.py --markdown           # the same, tables as Markdown (for docs/benchmarks.md)
    python tools/bench.py --quick --no-peers   # seconds: tiny sizes, eventstore and raw sqlite3 only
    python tools/bench.py --backend postgres   # PostgreSQL: eventstore against raw psycopg (tools/bench_pg.py)

Workloads (each on the same data for every system, the systems interleaved repetition by
repetition so background load hits them alike; each figure is the **minimum** over
``--repeat`` repetitions of the mean time of one operation in a block):

* ``append``: single appends, one event per transaction, into a session already holding
  1k, 10k and 100k events. eventstore ``Session.append``; raw ``sqlite3`` (same pragmas:
  WAL, ``synchronous=NORMAL``, ``BEGIN IMMEDIATE``; a plain table with the same columns and
  ``UNIQUE(session_id, seq)``, seq and hash kept by the caller; no SQLAlchemy); the
  reference persistence pattern (the reference ``Session`` of ``shared/reference``: append,
  then ``save()`` rewrites the whole file; O(n) per append, so only a sample of size/10
  appends at most is timed at each size, from a file reset to the size each repetition;
  ``ref.mjs bench-append N`` itself is run at the smallest size as a cross-check); the
  OpenAI Agents SDK ``SQLiteSession.add_items`` (one item per
  call); Google ADK's ``DatabaseSessionService.append_event`` (one ``Event`` per call, over
  aiosqlite); the ``eventsourcing`` library's ``SQLiteApplicationRecorder.insert_events`` (one
  event per call).
* ``batch``: ``Session.append_many`` of 100 events vs raw ``executemany`` of 100 in one
  transaction (and the peers' own batch calls).
* ``bulk``: import and export of a generated corpus (``--corpus`` events, default one
  million, in ``--sessions`` files): ``EventStore.import_jsonl``/``export_jsonl`` vs raw
  ``json.loads`` + ``executemany`` and a raw ``SELECT`` + write loop.
* ``projection``: ``Session.derive_messages`` of a session with ``--messages`` messages and
  0 vs ``--chunks`` chunk events; the reference ``Session.load()`` + ``deriveMessages()``
  (``ref.mjs bench-load``) on the same file; the Agents SDK ``SQLiteSession.get_items`` of
  the same messages; ADK ``get_session`` of the same messages as ADK events;
  ``eventsourcing`` ``select_events`` + the same projection in Python.
* ``contention``: 8 writer processes via ``tools/loadgen.py`` when it is present.

Peers run with ``synchronous=NORMAL`` like eventstore (their default, FULL, syncs the WAL on
every commit); ``--peer-defaults`` keeps their shipped settings instead. Figures depend on
the machine and its load: compare ratios taken in the same run, not absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventstore import EventStore  # noqa: E402
from eventstore.log.codec import event_line, meta_line  # noqa: E402


def find_shared() -> Path:
    """The shared folder holding the reference implementation: ``$EVENTSTORE_SHARED``, else
    ``../shared`` beside the repository (where tests/conftest.py and CI have it), else the
    nearest ``shared`` folder further up (a git worktree sits one level deeper)."""
    env = os.environ.get("EVENTSTORE_SHARED")
    if env:
        return Path(env)
    for folder in ROOT.parents:
        if (folder / "shared" / "reference" / "ref.mjs").is_file():
            return folder / "shared"
    return ROOT.parent / "shared"


SHARED = find_shared()
REFERENCE = SHARED / "reference" / "ref.mjs"
SESSION_MJS = SHARED / "reference" / "session.mjs"
LOADGEN = ROOT / "tools" / "loadgen.py"

ES = "eventstore"
RAW = "raw sqlite3"
RAW_NO_CKPT = "raw sqlite3, no checkpoints"
RAW_PLAIN = "raw sqlite3, plain"
REF = "reference (node)"
REF_OWN = "reference, ref.mjs bench-append"
AGENTS = "openai-agents SQLiteSession"
EVSRC = "eventsourcing SQLite recorder"
ADK = "ADK DatabaseSessionService"
PEER_HINT = "not installed: pip install -e '.[bench]'"
T0 = 1764460800.0  # seconds since the epoch of the generated events (2025-11-30)
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # C encoder

# The reference persistence pattern at a given size: load the file, then time K appends,
# each followed by the reference's save() of the whole file.
REF_APPEND_JS = """
const [url, file, k] = process.argv.slice(1);
const { Session } = await import(url);
const s = Session.load(file);
const t0 = performance.now();
for (let i = 0; i < Number(k); i++) {
  s.append("assistant/chunk", { delta: { content: "tok" + i } });
  s.save(file);
}
console.log(JSON.stringify({ events: s.events.length, ms: performance.now() - t0 }));
"""


# --- results ---------------------------------------------------------------------------

@dataclass
class Row:
    """One figure: ``seconds`` is the time of one ``unit`` (None when not measured)."""

    section: str
    case: str
    system: str
    seconds: float | None
    unit: str
    note: str = ""
    ratio: float | None = None  # this system's time / eventstore's, same section and case


@dataclass
class Report:
    machine: dict
    args: dict
    rows: list[Row] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    contention: dict | None = None
    # eventstore's projection of the two sessions (seconds), timed in one interleaved loop
    projection_pair: tuple[float, float] | None = None

    def add(self, *args, **kw) -> Row:
        row = Row(*args, **kw)
        self.rows.append(row)
        return row

    def get(self, section: str, case: str, system: str) -> float | None:
        for r in self.rows:
            if (r.section, r.case, r.system) == (section, case, system):
                return r.seconds
        return None

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"check": what, "ok": bool(ok), "detail": detail})

    def compute_ratios(self) -> None:
        for r in self.rows:
            base = self.get(r.section, r.case, ES)
            if base and r.seconds:
                r.ratio = r.seconds / base


def best_of(repeat: int, systems: dict[str, Callable[[], float]], budget: float | None = None) -> dict[str, float]:
    """Run each system's block ``repeat`` times, interleaved (the starting system rotates
    each round); each block returns the mean seconds of one operation. Keep the minimum.

    With ``budget`` (seconds), a system stops repeating once its blocks took that long in
    all, after at least 3 of them (so one slow peer cannot hold up the whole run)."""
    names = list(systems)
    best = dict.fromkeys(names, float("inf"))
    spent = dict.fromkeys(names, 0.0)
    runs = dict.fromkeys(names, 0)
    for rep in range(repeat):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            if budget is not None and runs[name] >= 3 and spent[name] > budget:
                continue
            t0 = time.perf_counter()
            best[name] = min(best[name], systems[name]())
            spent[name] += time.perf_counter() - t0
            runs[name] += 1
    return best


# --- machine ---------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    node = None
    if shutil.which("node"):
        try:
            node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            node = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "node": node,
        "eventstore": _version("eventstore"),
        "SQLAlchemy": _version("SQLAlchemy"),
        "openai-agents": _version("openai-agents"),
        "google-adk": _version("google-adk"),
        "eventsourcing": _version("eventsourcing"),
        "load average at start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


# --- data ------------------------------------------------------------------------------

def chunk(i: int) -> dict:
    """The append workload's event payload (the same as ``ref.mjs bench-append``'s)."""
    return {"delta": {"content": f"tok{i}"}}


def write_jsonl(path: Path, session_id: str, events) -> int:
    """Write ``(type, payload)`` events as the reference ``save()`` would; return the count.

    Payloads go through Python's C encoder: for the generated data (ASCII text, integers,
    no floats) its output is ``JSON.stringify``'s (the bulk workload's byte-identical
    export check would show otherwise)."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(meta_line(session_id) + "\n")
        lines = []
        for n, (type_, payload) in enumerate(events, 1):
            lines.append(event_line(type_, n - 1, T0 + (n - 1) * 0.001 + 0.0005, _compact(payload)) + "\n")
            if len(lines) >= 10_000:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)
    return n


def agent_events(rng: random.Random):
    """Yield ``(type, payload)`` forever, shaped like a coding agent's log: turns of a user
    message, then steps of streamed chunks, an assistant message (with tool calls but in
    the last step), tool results."""
    words = ("the file tests pass now let me check output function error value path run import store "
             "session append event result tool call shell build fix line return data").split()
    turn = 0
    while True:
        yield "turn/start", {"agent": "bench", "turn": turn}
        yield "user/message", {"content": " ".join(rng.choices(words, k=rng.randint(5, 30)))}
        steps = rng.randint(1, 3)
        for step in range(steps):
            yield "step/start", {"step": step}
            text = " ".join(rng.choices(words, k=rng.randint(10, 80)))
            for i in range(0, len(text), 24):
                yield "assistant/chunk", {"delta": {"content": text[i:i + 24]}}
            calls = []
            if step < steps - 1:
                for c in range(rng.randint(1, 2)):
                    args = json.dumps({"command": " ".join(rng.choices(words, k=4))})
                    calls.append({"id": f"call_{turn}_{step}_{c}", "type": "function",
                                  "function": {"name": "run_bash", "arguments": args}})
            yield "assistant/message", {"content": text, "tool_calls": calls}
            for c in calls:
                out = " ".join(rng.choices(words, k=rng.randint(5, 200)))
                yield "tool/result", {"tool_call_id": c["id"], "content": out}
            yield "step/end", {"step": step, "tool_calls": len(calls)}
        yield "turn/end", {}
        turn += 1


def take(gen, n: int):
    for _ in range(n):
        yield next(gen)


def projection_events(messages: int, chunks: int):
    """``messages`` chat messages (user, assistant with a tool call, tool result, assistant)
    with ``chunks`` assistant/chunk events spread evenly before the assistant messages."""
    assistants = [k for k in range(messages) if k % 4 in (1, 3)]
    before = {}
    for j, k in enumerate(assistants):
        before[k] = chunks * (j + 1) // len(assistants) - chunks * j // len(assistants)
    n = 0
    for k in range(messages):
        kind = k % 4
        for _ in range(before.get(k, 0)):
            yield "assistant/chunk", {"delta": {"content": f"piece {n} of the answer "}}
            n += 1
        if kind == 0:
            yield "user/message", {"content": f"question {k}: what does the test output say?"}
        elif kind == 1:
            yield "assistant/message", {"content": f"let me look ({k})", "tool_calls": [
                {"id": f"call_{k}", "type": "function",
                 "function": {"name": "run_bash", "arguments": json.dumps({"command": f"pytest -k case{k}"})}}]}
        elif kind == 2:
            yield "tool/result", {"tool_call_id": f"call_{k - 1}", "content": f"{k} passed, 0 failed"}
        else:
            yield "assistant/message", {"content": f"all {k} cases pass"}
    if not assistants:  # no assistant message to hang chunks on
        for _ in range(chunks):
            yield "assistant/chunk", {"delta": {"content": "x"}}


def py_derive(events: list[dict]) -> list[dict]:
    """The reference's ``deriveMessages()`` in Python, for peers that only store events."""
    out = []
    for ev in events:
        t = ev.get("type")
        if t == "user/message":
            out.append({"role": "user", "content": ev.get("content")})
        elif t == "assistant/message":
            msg = {"role": "assistant", "content": ev.get("content") if ev.get("content") is not None else ""}
            if ev.get("tool_calls"):
                msg["tool_calls"] = ev["tool_calls"]
            out.append(msg)
        elif t == "tool/result":
            out.append({"role": "tool", "tool_call_id": ev.get("tool_call_id"), "content": ev.get("content")})
    return out


# --- systems ---------------------------------------------------------------------------

RAW_SCHEMA = """CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
  ts REAL NOT NULL, payload TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (session_id, seq))"""
RAW_INSERT = "INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES (?, ?, ?, ?, ?, ?)"


def raw_connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with eventstore's pragmas and the plain events table."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute(RAW_SCHEMA)
    return conn


class RawLog:
    """The raw sqlite3 baseline for one session: the caller keeps the next seq and the
    previous hash (the hash chains SHA-256 like eventstore's, over the payload text)."""

    def __init__(self, conn: sqlite3.Connection, session_id: str):
        self.conn, self.cur, self.sid = conn, conn.cursor(), session_id
        self.seq, self.prev = 0, "0" * 64

    def _row(self, type_: str, payload: dict, ts: float) -> tuple:
        pj = _compact(payload)
        self.prev = hashlib.sha256((self.prev + "\n" + pj).encode()).hexdigest()
        row = (self.sid, self.seq, type_, ts, pj, self.prev)
        self.seq += 1
        return row

    def append(self, type_: str, payload: dict) -> None:
        row = self._row(type_, payload, time.time())
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        cur.execute(RAW_INSERT, row)
        cur.execute("COMMIT")

    def append_many(self, events) -> None:
        now = time.time()
        rows = [self._row(t, p, now) for t, p in events]
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        cur.executemany(RAW_INSERT, rows)
        cur.execute("COMMIT")


class AgentsPeer:
    """The OpenAI Agents SDK's ``SQLiteSession`` (async API, driven from one event loop)."""

    available = False
    note = PEER_HINT

    def __init__(self, path: Path, session_id: str, loop: asyncio.AbstractEventLoop, shipped: bool):
        from agents import SQLiteSession

        if shipped or not hasattr(SQLiteSession, "_configure_connection"):
            cls = SQLiteSession
            self.pragmas = "shipped pragmas" if shipped else "shipped pragmas (no hook to set NORMAL)"
        else:
            self.pragmas = "synchronous=NORMAL"
            class _Normal(SQLiteSession):
                @staticmethod
                def _configure_connection(conn):
                    SQLiteSession._configure_connection(conn)
                    conn.execute("PRAGMA synchronous = NORMAL")
            cls = _Normal
        self.session = cls(session_id, path)
        self.loop = loop

    @classmethod
    def probe(cls) -> None:
        try:
            import agents  # noqa: F401
            cls.available, cls.note = True, ""
        except Exception as e:  # ImportError, or a broken install
            cls.available = False
            cls.note = PEER_HINT if isinstance(e, ImportError) else f"unusable: {e}"

    def add(self, items: list[dict]) -> None:
        self.loop.run_until_complete(self.session.add_items(items))

    def time_appends(self, items: list[dict]) -> float:
        add = self.session.add_items

        async def run() -> float:
            t0 = time.perf_counter()
            for item in items:
                await add([item])
            return (time.perf_counter() - t0) / len(items)

        return self.loop.run_until_complete(run())

    def time_batches(self, batches: list[list[dict]]) -> float:
        add = self.session.add_items

        async def run() -> float:
            t0 = time.perf_counter()
            for b in batches:
                await add(b)
            return (time.perf_counter() - t0) / sum(len(b) for b in batches)

        return self.loop.run_until_complete(run())

    def time_get_items(self) -> tuple[float, int]:
        async def run():
            t0 = time.perf_counter()
            items = await self.session.get_items()
            return time.perf_counter() - t0, len(items)

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        self.session.close()


class AdkPeer:
    """Google ADK's ``DatabaseSessionService`` on SQLite (async SQLAlchemy over aiosqlite),
    one ADK session, driven from one event loop. Each event is an ADK ``Event`` with text
    content (a chat message's, or a chunk's ``tok…`` text; a partial event would not be
    stored at all); a message's tool calls and results become ``function_call`` and
    ``function_response`` parts. ADK has no batch append."""

    available = False
    note = PEER_HINT

    def __init__(self, path: Path, session_id: str, loop: asyncio.AbstractEventLoop, shipped: bool):
        from google.adk.sessions import DatabaseSessionService

        self.service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
        if shipped:
            self.pragmas = "shipped pragmas"
        else:
            from sqlalchemy import event

            def normal(dbapi_connection, _record) -> None:
                cur = dbapi_connection.cursor()
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
                cur.close()

            event.listen(self.service.db_engine.sync_engine, "connect", normal)
            self.pragmas = "WAL, synchronous=NORMAL"
        self.loop, self.sid = loop, session_id
        self.session = loop.run_until_complete(
            self.service.create_session(app_name="bench", user_id="user", session_id=session_id))

    @classmethod
    def probe(cls) -> None:
        try:
            import aiosqlite  # noqa: F401
            import google.adk.sessions  # noqa: F401
            cls.available, cls.note = True, ""
        except Exception as e:  # ImportError, or a broken install
            cls.available = False
            cls.note = PEER_HINT if isinstance(e, ImportError) else f"unusable: {e}"

    @staticmethod
    def event(type_: str, payload: dict):
        """The ADK ``Event`` for one of our ``(type, payload)`` events."""
        from google.adk.events import Event
        from google.genai import types

        author = "user" if type_.startswith("user/") else "model"
        if type_ == "assistant/chunk":
            parts = [types.Part(text=payload["delta"]["content"])]
        elif type_ == "tool/result":
            author = "user"
            parts = [types.Part(function_response=types.FunctionResponse(
                id=payload["tool_call_id"], name="run_bash", response={"content": payload["content"]}))]
        else:
            parts = [types.Part(text=payload["content"])]
            for call in payload.get("tool_calls", ()):
                parts.append(types.Part(function_call=types.FunctionCall(
                    id=call["id"], name=call["function"]["name"], args=json.loads(call["function"]["arguments"]))))
        return Event(author=author, invocation_id="bench", content=types.Content(role=author, parts=parts))

    def fill(self, events) -> None:
        """Store ``(type, payload)`` events as ``append_event`` would store them, in one
        transaction (setting up 100,000 events one ``append_event`` at a time takes minutes)."""
        from google.adk.sessions.base_session_service import GetSessionConfig

        service, schema = self.service, self.service._get_schema_classes()

        async def run() -> None:
            async with service.database_session_factory() as sql:
                sql.add_all([schema.StorageEvent.from_event(self.session, self.event(t, p)) for t, p in events])
                await sql.commit()
            self.session = await service.get_session(app_name="bench", user_id="user", session_id=self.sid,
                                                     config=GetSessionConfig(num_recent_events=0))

        self.loop.run_until_complete(run())

    def time_appends(self, events: list[tuple[str, dict]]) -> float:
        append, made = self.service.append_event, [self.event(t, p) for t, p in events]

        async def run() -> float:
            t0 = time.perf_counter()
            for e in made:
                await append(self.session, e)
            return (time.perf_counter() - t0) / len(made)

        return self.loop.run_until_complete(run())

    def time_get_session(self) -> tuple[float, int]:
        async def run():
            t0 = time.perf_counter()
            got = await self.service.get_session(app_name="bench", user_id="user", session_id=self.sid)
            return time.perf_counter() - t0, len(got.events)

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        self.loop.run_until_complete(self.service.close())


class EventsourcingPeer:
    """The ``eventsourcing`` library's SQLite application recorder, one aggregate per session
    (``originator_version`` = seq; the caller keeps it, as the library's applications do)."""

    available = False
    note = PEER_HINT

    def __init__(self, path: Path, shipped: bool):
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnectionPool, SQLiteDatastore

        self.StoredEvent = StoredEvent
        self.datastore = SQLiteDatastore(str(path))
        self.pragmas = "shipped pragmas"
        if not shipped and hasattr(SQLiteConnectionPool, "_create_connection"):
            self.pragmas = "synchronous=NORMAL"
            class _Normal(SQLiteConnectionPool):
                def _create_connection(self):
                    conn = super()._create_connection()
                    conn._sqlite_conn.execute("PRAGMA synchronous = NORMAL")
                    return conn
            self.datastore.pool.close()
            self.datastore.pool = _Normal(db_name=str(path))
        self.recorder = SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()
        self.versions: dict[uuid.UUID, int] = {}

    @classmethod
    def probe(cls) -> None:
        try:
            import eventsourcing.sqlite  # noqa: F401
            cls.available, cls.note = True, ""
        except Exception as e:
            cls.available = False
            cls.note = PEER_HINT if isinstance(e, ImportError) else f"unusable: {e}"

    def stored(self, oid: uuid.UUID, type_: str, payload: dict):
        v = self.versions.get(oid, 0)
        self.versions[oid] = v + 1
        return self.StoredEvent(originator_id=oid, originator_version=v, topic=type_,
                                state=_compact(payload).encode())

    def append(self, oid: uuid.UUID, type_: str, payload: dict) -> None:
        self.recorder.insert_events([self.stored(oid, type_, payload)])

    def append_many(self, oid: uuid.UUID, events) -> None:
        self.recorder.insert_events([self.stored(oid, t, p) for t, p in events])

    def derive(self, oid: uuid.UUID) -> list[dict]:
        loads = json.loads
        events = [{"type": s.topic, **loads(s.state.decode())} for s in self.recorder.select_events(oid)]
        return py_derive(events)

    def close(self) -> None:
        self.datastore.close()


def reference_available() -> bool:
    return shutil.which("node") is not None and REFERENCE.is_file() and SESSION_MJS.is_file()


def node_json(args: list[str], timeout: float = 600) -> dict:
    out = subprocess.run(["node", *args], capture_output=True, text=True, timeout=timeout, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- workloads -------------------------------------------------------------------------

def fmt_int(n: int) -> str:
    return f"{n:,}"


def bench_append(rep: Report, a, work: Path, loop) -> None:
    for size in a.sizes:
        _append_at(rep, a, work, loop, size)


def _append_at(rep: Report, a, work: Path, loop, size: int) -> None:
    """Single appends into sessions already holding ``size`` events."""
    section = "Single appends (one event per transaction)"
    case = f"session of {fmt_int(size)} events"
    folder = work / f"append-{size}"
    folder.mkdir()
    sid = f"append-{size}"
    jsonl = folder / f"{sid}.jsonl"
    write_jsonl(jsonl, sid, (("assistant/chunk", chunk(-i - 1)) for i in range(size)))
    k = min(a.samples, size) if size else a.samples
    counter = [0]

    def next_items(n: int) -> list[int]:
        start = counter[0]
        counter[0] += n
        return list(range(start, start + n))

    store = EventStore.open(folder / "eventstore.db")
    store.import_jsonl(jsonl)
    session = store.session(sid)

    def timed_appends(append) -> Callable[[], float]:
        """A block of ``k`` single appends through ``append(type, payload)``; seconds each."""
        def block() -> float:
            ids = next_items(k)
            t0 = time.perf_counter()
            for i in ids:
                append("assistant/chunk", chunk(i))
            return (time.perf_counter() - t0) / k
        return block

    es_block = timed_appends(session.append)

    raw_conn = raw_connect(folder / "raw.db")
    raw = RawLog(raw_conn, sid)
    raw.append_many(("assistant/chunk", chunk(-i - 1)) for i in range(size))
    raw_block = timed_appends(raw.append)

    # eventstore checkpoints on a background thread, so its appends never wait for one;
    # raw sqlite3 checkpoints inside COMMIT (every 1000 pages, SQLite's default). For the
    # record, the same raw loop with checkpoints off (its WAL grows without end).
    raw_nc_conn = raw_connect(folder / "raw-no-checkpoints.db")
    raw_nc_conn.execute("PRAGMA wal_autocheckpoint = 0")
    raw_nc = RawLog(raw_nc_conn, sid)
    raw_nc.append_many(("assistant/chunk", chunk(-i - 1)) for i in range(size))
    raw_nc_block = timed_appends(raw_nc.append)

    systems: dict[str, Callable[[], float]] = {ES: es_block, RAW: raw_block, RAW_NO_CKPT: raw_nc_block}
    notes = {ES: f"{k} appends timed per repetition; checkpoints on a background thread",
             RAW: "same pragmas, plain table, no SQLAlchemy; checkpoints inside COMMIT (SQLite's default)",
             RAW_NO_CKPT: "the same with wal_autocheckpoint = 0 (not a target: its WAL grows without end)"}

    # O(n) per append: a sample only, and the file is reset to ``size`` events before each
    # repetition so that every sample is taken between size and size * 1.1 events.
    ref_k = max(10, min(k, int(a.ref_budget / max(size, 1)), size // 10))
    ref_file = folder / "reference.jsonl"
    if a.peers and reference_available():
        url = SESSION_MJS.as_uri()

        def ref_block() -> float:
            shutil.copyfile(jsonl, ref_file)
            out = node_json(["--input-type=module", "-e", REF_APPEND_JS, "--", url, str(ref_file), str(ref_k)])
            return out["ms"] / 1000 / ref_k

        systems[REF] = ref_block
        notes[REF] = f"append + save() of the whole file; {ref_k} appends sampled per repetition"
        if size == min(a.sizes):
            # Cross-check with the reference's own benchmark: it starts from an empty
            # session, so its mean covers sizes 0..N (cheaper than the sample at N).
            out_file = folder / "ref-bench-append.jsonl"

            def ref_own_block() -> float:
                return node_json([str(REFERENCE), "bench-append", str(size), str(out_file)])["ms"] / 1000 / size

            systems[REF_OWN] = ref_own_block
            notes[REF_OWN] = f"ref.mjs bench-append {size}: mean over a session growing 0 to {fmt_int(size)}"
    else:
        notes[REF] = "skipped: --no-peers" if not a.peers else "skipped: node or ../shared/reference absent"

    agents = None
    if a.peers and AgentsPeer.available:
        agents = AgentsPeer(folder / "agents.db", sid, loop, a.peer_defaults)
        agents.add([{"type": "assistant/chunk", **chunk(-i - 1)} for i in range(size)])
        systems[AGENTS] = lambda: agents.time_appends([{"type": "assistant/chunk", **chunk(i)}
                                                       for i in next_items(k)])
        notes[AGENTS] = f"add_items([item]) awaited once per item; {agents.pragmas}"
    else:
        notes[AGENTS] = "skipped: --no-peers" if not a.peers else AgentsPeer.note

    adk = None
    if a.peers and AdkPeer.available:
        adk = AdkPeer(folder / "adk.db", sid, loop, a.peer_defaults)
        adk.fill([("assistant/chunk", chunk(-i - 1)) for i in range(size)])
        systems[ADK] = lambda: adk.time_appends([("assistant/chunk", chunk(i)) for i in next_items(k)])
        notes[ADK] = f"append_event(session, Event) awaited once per event; {adk.pragmas}"
    else:
        notes[ADK] = "skipped: --no-peers" if not a.peers else AdkPeer.note

    evsrc = None
    if a.peers and EventsourcingPeer.available:
        evsrc = EventsourcingPeer(folder / "eventsourcing.db", a.peer_defaults)
        oid = uuid.uuid5(uuid.NAMESPACE_URL, sid)
        evsrc.append_many(oid, (("assistant/chunk", chunk(-i - 1)) for i in range(size)))

        def evsrc_block() -> float:
            ids = next_items(k)
            append = evsrc.append
            t0 = time.perf_counter()
            for i in ids:
                append(oid, "assistant/chunk", chunk(i))
            return (time.perf_counter() - t0) / k

        systems[EVSRC] = evsrc_block
        notes[EVSRC] = f"insert_events([event]) once per event; {evsrc.pragmas}"
    else:
        notes[EVSRC] = "skipped: --no-peers" if not a.peers else EventsourcingPeer.note

    best = best_of(a.repeat, systems)
    for name in (ES, RAW, RAW_NO_CKPT, REF, REF_OWN, AGENTS, ADK, EVSRC):
        if name in notes:
            rep.add(section, case, name, best.get(name), "append", notes[name])

    rep.check(f"append {case}: eventstore seqs gapless",
              session.next_seq() == size + a.repeat * k, f"{session.next_seq()} events")
    store.close()
    raw_conn.close()
    raw_nc_conn.close()
    if agents:
        agents.close()
    if adk:
        adk.close()
    if evsrc:
        evsrc.close()
    shutil.rmtree(folder, ignore_errors=True)


def bench_batch(rep: Report, a, work: Path, loop) -> None:
    section = f"Batched appends ({a.batch} events per transaction)"
    case = f"{a.batches} batches of {a.batch}"
    folder = work / "batch"
    folder.mkdir()
    sid = "batch"
    counter = [0]

    def batches() -> list[list[tuple[str, dict]]]:
        out = []
        for _ in range(a.batches):
            out.append([("assistant/chunk", chunk(counter[0] + j)) for j in range(a.batch)])
            counter[0] += a.batch
        return out

    store = EventStore.open(folder / "eventstore.db")
    session = store.create_session(sid)

    def es_block() -> float:
        bs = batches()
        append_many = session.append_many
        t0 = time.perf_counter()
        for b in bs:
            append_many(b)
        return (time.perf_counter() - t0) / (a.batches * a.batch)

    raw_conn = raw_connect(folder / "raw.db")
    raw = RawLog(raw_conn, sid)

    def raw_block() -> float:
        bs = batches()
        t0 = time.perf_counter()
        for b in bs:
            raw.append_many(b)
        return (time.perf_counter() - t0) / (a.batches * a.batch)

    systems: dict[str, Callable[[], float]] = {ES: es_block, RAW: raw_block}
    notes = {ES: "append_many", RAW: "executemany in BEGIN IMMEDIATE ... COMMIT",
             REF: "n/a: the reference saves per append",
             ADK: "skipped: --no-peers" if not a.peers else
             "n/a: no batch form (append_event only)" if AdkPeer.available else AdkPeer.note}
    agents = evsrc = None
    if a.peers and AgentsPeer.available:
        agents = AgentsPeer(folder / "agents.db", sid, loop, a.peer_defaults)
        systems[AGENTS] = lambda: agents.time_batches([[{"type": t, **p} for t, p in b] for b in batches()])
        notes[AGENTS] = f"add_items of {a.batch} items; {agents.pragmas}"
    else:
        notes[AGENTS] = "skipped: --no-peers" if not a.peers else AgentsPeer.note
    if a.peers and EventsourcingPeer.available:
        evsrc = EventsourcingPeer(folder / "eventsourcing.db", a.peer_defaults)
        oid = uuid.uuid5(uuid.NAMESPACE_URL, sid)

        def evsrc_block() -> float:
            bs = batches()
            t0 = time.perf_counter()
            for b in bs:
                evsrc.append_many(oid, b)
            return (time.perf_counter() - t0) / (a.batches * a.batch)

        systems[EVSRC] = evsrc_block
        notes[EVSRC] = f"insert_events of {a.batch} events; {evsrc.pragmas}"
    else:
        notes[EVSRC] = "skipped: --no-peers" if not a.peers else EventsourcingPeer.note

    best = best_of(a.repeat, systems)
    for name in (ES, RAW, AGENTS, ADK, EVSRC):
        rep.add(section, case, name, best.get(name), "event", notes[name])
    rep.check("batch: eventstore seqs gapless", session.next_seq() == a.repeat * a.batches * a.batch,
              f"{session.next_seq()} events")
    store.close()
    raw_conn.close()
    if agents:
        agents.close()
    if evsrc:
        evsrc.close()
    shutil.rmtree(folder, ignore_errors=True)


def raw_import(conn: sqlite3.Connection, path: Path) -> int:
    """The raw import baseline: ``json.loads`` each line, re-encode the payload, chain the
    hash, ``executemany`` in one transaction per file. No validation. The baseline of the
    import target ("at least as fast as a plain Python loop doing json.loads plus
    executemany"); raw_import_plain is a plainer loop, reported beside it."""
    loads = json.loads
    sha = hashlib.sha256
    rows = []
    prev = "0" * 64
    sid = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            obj = loads(line)
            t = obj.pop("type")
            if t == "session/meta":
                sid = obj["id"]
                continue
            seq, ts = obj.pop("seq"), obj.pop("ts")
            pj = _compact(obj)
            prev = sha((prev + "\n" + line).encode()).hexdigest()
            rows.append((sid, seq, t, ts, pj, prev))
    cur = conn.cursor()
    cur.execute("BEGIN IMMEDIATE")
    cur.executemany(RAW_INSERT, rows)
    cur.execute("COMMIT")
    return len(rows)


RAW_PLAIN_SCHEMA = """CREATE TABLE IF NOT EXISTS lines (
  position INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
  ts REAL NOT NULL, line TEXT NOT NULL, UNIQUE (session_id, seq))"""


def raw_import_plain(conn: sqlite3.Connection, path: Path) -> int:
    """A plainer raw import, for the record: ``json.loads`` each line for its type, seq and
    ts, and store the line's text as it is (no re-encoding, no hash), ``executemany`` in one
    transaction per file. Not the baseline of the import target (see raw_import)."""
    loads = json.loads
    rows = []
    sid = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            obj = loads(line)
            t = obj["type"]
            if t == "session/meta":
                sid = obj["id"]
                continue
            rows.append((sid, obj["seq"], t, obj["ts"], line))
    cur = conn.cursor()
    cur.execute("BEGIN IMMEDIATE")
    cur.executemany("INSERT INTO lines (session_id, seq, type, ts, line) VALUES (?, ?, ?, ?, ?)", rows)
    cur.execute("COMMIT")
    return len(rows)


def raw_export(conn: sqlite3.Connection, sid: str, path: Path) -> int:
    """The raw export baseline: one SELECT, each line built by string concatenation."""
    enc = json.encoder.encode_basestring
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write('{"type":"session/meta","id":' + enc(sid) + "}\n")
        lines = []
        for seq, t, ts, p in conn.execute("SELECT seq, type, ts, payload FROM events WHERE session_id = ? "
                                          "ORDER BY seq", (sid,)):
            lines.append('{"type":' + enc(t) + ',"seq":' + str(seq) + ',"ts":' + repr(ts)
                         + ("}" if p == "{}" else "," + p[1:]) + "\n")
            n += 1
            if len(lines) >= 10_000:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)
    return n


def bench_bulk(rep: Report, a, work: Path) -> None:
    section = "Bulk import and export"
    folder = work / "bulk"
    corpus = folder / "corpus"
    out = folder / "out"
    corpus.mkdir(parents=True)
    out.mkdir()
    rng = random.Random(6)
    gen = agent_events(rng)
    per = [a.corpus // a.sessions + (1 if i < a.corpus % a.sessions else 0) for i in range(a.sessions)]
    files = []
    t0 = time.perf_counter()
    for i, n in enumerate(per):
        sid = f"bulk-{i:04d}"
        write_jsonl(corpus / f"{sid}.jsonl", sid, take(gen, n))
        files.append((sid, corpus / f"{sid}.jsonl"))
    size = sum(p.stat().st_size for _, p in files)
    gen_s = time.perf_counter() - t0
    total = sum(per)
    case_in = f"import {fmt_int(total)} events ({len(files)} files, {size / 1e6:.0f} MB)"
    case_out = f"export {fmt_int(total)} events ({len(files)} files)"

    state = {}

    def fresh(db: Path) -> Path:
        """``db`` with no file, WAL or shared memory left from a previous repetition."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        return db

    def es_import() -> float:
        db = fresh(folder / "eventstore.db")
        store = EventStore.open(db)
        t0 = time.perf_counter()
        for _sid, path in files:
            store.import_jsonl(path)
        dt = time.perf_counter() - t0
        store.close()
        state[ES] = db
        return dt / total

    def raw_imp() -> float:
        db = fresh(folder / "raw.db")
        conn = raw_connect(db)
        t0 = time.perf_counter()
        n = 0
        for _sid, path in files:
            n += raw_import(conn, path)
        dt = time.perf_counter() - t0
        conn.close()
        state[RAW] = db
        return dt / total

    def raw_imp_plain() -> float:
        db = fresh(folder / "raw-plain.db")
        conn = raw_connect(db)
        conn.execute(RAW_PLAIN_SCHEMA)
        t0 = time.perf_counter()
        for _sid, path in files:
            raw_import_plain(conn, path)
        dt = time.perf_counter() - t0
        conn.close()
        return dt / total

    best_in = best_of(a.bulk_repeat, {ES: es_import, RAW: raw_imp, RAW_PLAIN: raw_imp_plain})
    rep.add(section, case_in, ES, best_in[ES], "event",
            f"import_jsonl per file (strict parse, hash chain, triggers); corpus written in {gen_s:.1f} s")
    rep.add(section, case_in, RAW, best_in[RAW], "event",
            "json.loads + payload re-encoded + chained sha256 + executemany, one transaction per file "
            "(the import target's baseline)")
    rep.add(section, case_in, RAW_PLAIN, best_in[RAW_PLAIN], "event",
            "json.loads + executemany of the line as it is (no re-encoding, no hash); for the record")

    store = EventStore.open(state[ES])
    raw_conn = sqlite3.connect(state[RAW], isolation_level=None)

    def es_export() -> float:
        t0 = time.perf_counter()
        for sid, _path in files:
            store.export_jsonl(sid, out / f"{sid}.jsonl")
        return (time.perf_counter() - t0) / total

    def raw_exp() -> float:
        t0 = time.perf_counter()
        for sid, _path in files:
            raw_export(raw_conn, sid, out / f"{sid}.raw.jsonl")
        return (time.perf_counter() - t0) / total

    best_out = best_of(a.bulk_repeat, {ES: es_export, RAW: raw_exp})
    rep.add(section, case_out, ES, best_out[ES], "event", "export_jsonl per session (JS-exact lines)")
    rep.add(section, case_out, RAW, best_out[RAW], "event", "SELECT + string concatenation + write")
    same = all((out / f"{sid}.jsonl").read_bytes() == path.read_bytes() for sid, path in files)
    rep.check("bulk: eventstore export is byte-identical to the imported corpus", same, f"{len(files)} files")
    store.close()
    raw_conn.close()
    shutil.rmtree(folder, ignore_errors=True)


def bench_projection(rep: Report, a, work: Path, loop) -> None:
    folder = work / "projection"
    folder.mkdir()
    store = EventStore.open(folder / "eventstore.db")
    cases = []
    for chunks in (0, a.chunks):
        sid = f"proj-{chunks}"
        path = folder / f"{sid}.jsonl"
        n = write_jsonl(path, sid, projection_events(a.messages, chunks))
        store.import_jsonl(path)
        cases.append((chunks, sid, path, n))
    # Reads are timed on a settled file: close() runs the checkpoint the imports asked for
    # (a 30 MB WAL copied on the background thread would otherwise overlap the timings).
    store.close()
    store = EventStore.open(folder / "eventstore.db")
    case_names = {c: f"{fmt_int(a.messages)} messages + {fmt_int(c)} chunks" for c, *_ in cases}

    agents = evsrc = adk = None
    if a.peers and AgentsPeer.available:
        agents = AgentsPeer(folder / "agents.db", "proj", loop, a.peer_defaults)
        msgs = store.session(cases[0][1]).derive_messages()
        agents.add(msgs)
    if a.peers and AdkPeer.available:
        adk = AdkPeer(folder / "adk.db", "proj", loop, a.peer_defaults)
        adk.fill([(e.type, e.payload) for e in store.session(cases[0][1]).events()])
    if a.peers and EventsourcingPeer.available:
        evsrc = EventsourcingPeer(folder / "eventsourcing.db", a.peer_defaults)
        for _chunks, sid, _path, _n in cases:
            oid = uuid.uuid5(uuid.NAMESPACE_URL, sid)
            ev = store.session(sid).events()
            batch = []
            for e in ev:
                batch.append((e.type, e.payload))
                if len(batch) >= 10_000:
                    evsrc.append_many(oid, batch)
                    batch = []
            if batch:
                evsrc.append_many(oid, batch)

    for chunks, sid, path, n in cases:
        _projection_case(rep, a, store.session(sid), case_names[chunks], chunks, path, n, agents, evsrc, adk)
    # The chunk target compares eventstore with itself: the two sessions take turns in one
    # loop, so a slow phase of a shared machine falls on both (timed one after the other,
    # the ratio moved between 0.9x and 2x from run to run here).
    few, many = (store.session(sid) for _chunks, sid, _path, _n in cases)

    def timed(session) -> Callable[[], float]:
        def block() -> float:
            t0 = time.perf_counter()
            session.derive_messages()
            return time.perf_counter() - t0
        return block

    pair = best_of(2 * a.projection_repeat, {"few": timed(few), "many": timed(many)})
    rep.projection_pair = (pair["few"], pair["many"])

    store.close()
    if agents:
        agents.close()
    if adk:
        adk.close()
    if evsrc:
        evsrc.close()
    shutil.rmtree(folder, ignore_errors=True)


def _projection_case(rep: Report, a, session, case: str, chunks: int, path: Path, n: int,
                     agents: AgentsPeer | None, evsrc: EventsourcingPeer | None, adk: AdkPeer | None) -> None:
    """Time every system's projection of one session (``n`` events, ``chunks`` of them chunks)."""
    section = "Projection (derive the chat messages)"
    reps = a.projection_repeat
    sid = session.id
    got = {}

    def es_block(session=session) -> float:
        t0 = time.perf_counter()
        m = session.derive_messages()
        dt = time.perf_counter() - t0
        got[ES] = len(m)
        return dt

    systems: dict[str, Callable[[], float]] = {ES: es_block}
    notes = {ES: f"derive_messages (SQL view); session of {fmt_int(n)} events"}
    if a.peers and reference_available():
        def ref_block(path=path) -> float:
            out = node_json([str(REFERENCE), "bench-load", str(path)])
            got[REF] = out["messages"]
            return out["ms"] / 1000

        systems[REF] = ref_block
        notes[REF] = "ref.mjs bench-load: Session.load() + deriveMessages(), timed inside node"
    else:
        notes[REF] = "skipped: --no-peers" if not a.peers else "skipped: node or ../shared/reference absent"
    if agents and chunks == 0:
        def agents_block() -> float:
            dt, got[AGENTS] = agents.time_get_items()
            return dt

        systems[AGENTS] = agents_block
        notes[AGENTS] = "get_items() of the same messages (it stores no chunks)"
    elif agents:
        notes[AGENTS] = "n/a: stores messages only, no chunks"
    else:
        notes[AGENTS] = "skipped: --no-peers" if not a.peers else AgentsPeer.note
    if adk and chunks == 0:
        def adk_block() -> float:
            dt, got[ADK] = adk.time_get_session()
            return dt

        systems[ADK] = adk_block
        notes[ADK] = "get_session() with every event (the same messages as Events; no chunks stored)"
    elif adk:
        notes[ADK] = "n/a: holds the messages only, no chunks (its get_session returns every event)"
    else:
        notes[ADK] = "skipped: --no-peers" if not a.peers else AdkPeer.note
    if evsrc:
        oid = uuid.uuid5(uuid.NAMESPACE_URL, sid)

        def evsrc_block(oid=oid) -> float:
            t0 = time.perf_counter()
            m = evsrc.derive(oid)
            dt = time.perf_counter() - t0
            got[EVSRC] = len(m)
            return dt

        systems[EVSRC] = evsrc_block
        notes[EVSRC] = "select_events + json.loads + the projection in Python"
    else:
        notes[EVSRC] = "skipped: --no-peers" if not a.peers else EventsourcingPeer.note

    best = best_of(reps, systems, budget=a.budget)
    for name in (ES, REF, AGENTS, ADK, EVSRC):
        rep.add(section, case, name, best.get(name), "projection", notes[name])
    for name, count in got.items():
        rep.check(f"projection {case}: {name} derives {a.messages} messages", count == a.messages, str(count))


def bench_contention(rep: Report, a) -> None:
    # ---- HOOK: 8-process contention -------------------------------------------------
    # tools/loadgen.py (issue 3) runs N writer processes on one database and prints the
    # aggregate throughput and the p50/p99/max latency of one append. When it is present
    # we run it with --json and report its figures; otherwise the section says n/a.
    if not LOADGEN.is_file():
        rep.contention = {"status": "n/a (tools/loadgen.py not present)"}
        return
    cmd = [sys.executable, str(LOADGEN), "--writers", str(a.writers), "--events", str(a.writer_events), "--json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
        if not isinstance(figures, dict):
            raise ValueError("not a JSON object")
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        tail = ""
        if "proc" in locals():
            tail = (proc.stdout + proc.stderr).strip()[-300:]
        rep.contention = {"status": f"failed: {e}", "output": tail}
        return
    rep.contention = {"status": "ok", "command": " ".join(["python", "tools/loadgen.py", *cmd[2:]]), **figures}
    rep.check("contention: loadgen found no problem", proc.returncode == 0 and not figures.get("problems"),
              "; ".join(figures.get("problems") or []))


# --- targets ---------------------------------------------------------------------------

def compute_targets(rep: Report, a) -> None:
    sec_append = "Single appends (one event per transaction)"
    sec_batch = f"Batched appends ({a.batch} events per transaction)"
    for size in a.sizes:
        case = f"session of {fmt_int(size)} events"
        es, raw = rep.get(sec_append, case, ES), rep.get(sec_append, case, RAW)
        if es and raw:
            r = raw / es
            rep.targets.append({"target": f"single append >= 0.6x raw sqlite3 throughput ({case})",
                                "value": f"{r:.2f}x", "met": r >= 0.6})
    sec_bulk = "Bulk import and export"
    for r in rep.rows:
        if r.section == sec_bulk and r.system == ES and r.seconds:
            if r.case.startswith("import"):
                raw = rep.get(sec_bulk, r.case, RAW)
                if raw:
                    rep.targets.append({"target": "bulk import at least as fast as raw json.loads + executemany "
                                                  "(same corpus, same run)",
                                        "value": f"{raw / r.seconds:.2f}x", "met": raw / r.seconds >= 1.0})
            elif r.case.startswith("export"):
                rate = 1 / r.seconds
                rep.targets.append({"target": "bulk export >= 300,000 events/s", "value": f"{rate:,.0f} events/s",
                                    "met": rate >= 300_000})
    sec_proj = "Projection (derive the chat messages)"
    if rep.projection_pair:  # set whenever the projection workload ran
        p0, p1 = rep.projection_pair
        r = p1 / p0
        rep.targets.append({"target": f"projection with {fmt_int(a.chunks)} chunks <= 1.5x the time with 0",
                            "value": f"{r:.2f}x ({fmt_time(p1)} against {fmt_time(p0)}, the two timed in turns)",
                            "met": r <= 1.5})
    for label, section in (("append", sec_append), ("batched append", sec_batch), ("read", sec_proj)):
        worst = None
        for r in rep.rows:
            if r.section == section and r.system in (REF, AGENTS, ADK, EVSRC) and r.ratio is not None:
                if worst is None or r.ratio < worst[0]:
                    worst = (r.ratio, r.system, r.case)
        if worst:
            rep.targets.append({"target": f"ahead of every peer on {label} (slowest-beaten ratio)",
                                "value": f"{worst[0]:.2f}x ({worst[1]}, {worst[2]})", "met": worst[0] > 1.0})
        else:
            rep.targets.append({"target": f"ahead of every peer on {label}", "value": "no peer measured",
                                "met": None})


# --- output ----------------------------------------------------------------------------

def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_rate(s: float | None, unit: str) -> str:
    if not s:
        return "—"
    r = 1 / s
    return f"{r:,.0f} {unit}s/s" if r >= 10 else f"{r:.2f} {unit}s/s"


def tables(rep: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    sections: dict[str, list[Row]] = {}
    for r in rep.rows:
        sections.setdefault(r.section, []).append(r)
    for section, rows in sections.items():
        body = []
        last = None
        for r in rows:
            body.append([r.case if r.case != last else "", r.system, fmt_time(r.seconds),
                         fmt_rate(r.seconds, r.unit), f"{r.ratio:.2f}x" if r.ratio else "—", r.note])
            last = r.case
        out.append((section, ["case", "system", "time / op", "throughput", "÷ eventstore", "note"], body))
    c = rep.contention
    if c is not None:
        if c.get("status") == "ok":
            body = [[str(c.get("events", "")), f"{c.get('throughput_eps', '')} events/s", f"{c.get('p50_ms')} ms",
                     f"{c.get('p99_ms')} ms", f"{c.get('max_ms')} ms", c.get("command", "")]]
        else:
            body = [["—", c["status"], "—", "—", "—", c.get("output", "")]]
        out.append((f"Contention ({rep.args.get('writers')} writer processes, tools/loadgen.py)",
                    ["events", "throughput", "p50", "p99", "max", "note"], body))
    if rep.targets:
        out.append(("Targets", ["target", "measured", "status"],
                    [[t["target"], t["value"], {True: "met", False: "MISSED", None: "n/a"}[t["met"]]]
                     for t in rep.targets]))
    if rep.checks:
        out.append(("Checks", ["check", "result", "detail"],
                    [[c["check"], "ok" if c["ok"] else "FAILED", c["detail"]] for c in rep.checks]))
    return out


def machine_lines(rep: Report) -> list[str]:
    m = rep.machine
    peers = ", ".join(f"{k} {m[k] or 'absent'}" for k in ("openai-agents", "google-adk", "eventsourcing"))
    return [
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}",
        f"Python {m['python']}, SQLite {m['sqlite']}, SQLAlchemy {m['SQLAlchemy']}, node {m['node'] or 'absent'}; "
        f"{peers}",
        f"Load average: {m['load average at start']} at start, {m.get('load average at end')} at end",
    ]


LEGEND = ("time / op: minimum over the repetitions of the mean time of one operation; "
          "÷ eventstore: this system's time divided by eventstore's (above 1: eventstore is faster; "
          "for raw sqlite3 it is eventstore's share of raw throughput).")


def print_markdown(rep: Report, command: str) -> None:
    print(f"Command: `{command}`\n")
    for line in machine_lines(rep):
        print(f"- {line}")
    print(f"\n{LEGEND}\n")
    for title, header, body in tables(rep):
        print(f"### {title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in body:
            print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        print()


def print_rich(rep: Report, command: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(f"[bold]{command}[/bold]")
    for line in machine_lines(rep):
        console.print(line)
    console.print(f"[dim]{LEGEND}[/dim]")
    for title, header, body in tables(rep):
        table = Table(title=title, title_justify="left")
        for i, h in enumerate(header):
            table.add_column(h, justify="right" if i in (2, 3, 4) and title not in ("Targets", "Checks") else "left",
                             overflow="fold")
        for row in body:
            style = None
            if title == "Targets" and row[-1] == "MISSED" or title == "Checks" and row[1] == "FAILED":
                style = "red"
            table.add_row(*row, style=style)
        console.print(table)


# --- main ------------------------------------------------------------------------------

#: ``peers`` is PostgreSQL's own workload (the frameworks' stores side by side); on SQLite the
#: peers run inside each workload.
WORKLOADS = ("append", "batch", "bulk", "projection", "contention", "peers")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes for a check that the tool runs (seconds)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables instead of a terminal table")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON")
    ap.add_argument("--no-peers", dest="peers", action="store_false",
                    help="skip the reference and the peer libraries (eventstore and raw sqlite3 only)")
    ap.add_argument("--peer-defaults", action="store_true",
                    help="leave the peers' pragmas as shipped (synchronous=FULL) instead of NORMAL")
    ap.add_argument("--only", default=",".join(WORKLOADS), help=f"comma list of workloads ({', '.join(WORKLOADS)})")
    ap.add_argument("--repeat", type=int, help="repetitions per figure, minimum kept (default 7; quick 2)")
    ap.add_argument("--sizes", help="comma list of session sizes for single appends (default 1000,10000,100000)")
    ap.add_argument("--samples", type=int, help="appends timed per repetition and size (default 500)")
    ap.add_argument("--ref-budget", type=int, default=2_000_000,
                    help="reference appends sampled per repetition = budget / size, at least 10 (default 2e6)")
    ap.add_argument("--batch", type=int, default=100, help="events per append_many (default 100)")
    ap.add_argument("--batches", type=int, help="batches per repetition (default 50)")
    ap.add_argument("--corpus", type=int, help="events in the bulk corpus (default 1000000)")
    ap.add_argument("--sessions", type=int, help="files in the bulk corpus (default 100)")
    ap.add_argument("--bulk-repeat", type=int, help="repetitions of the bulk workloads (default 3)")
    ap.add_argument("--projection-repeat", type=int,
                    help="repetitions of each projection (cheap: default 20; quick 3)")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds after which a slow system stops repeating a projection (after 3; default 30)")
    ap.add_argument("--messages", type=int, help="messages in the projection sessions (default 1000)")
    ap.add_argument("--chunks", type=int, help="chunks in the projection session with chunks (default 100000)")
    ap.add_argument("--writers", type=int, default=8, help="contention: writer processes (default 8)")
    ap.add_argument("--writer-events", type=int, help="contention: appends per writer (default 2000)")
    ap.add_argument("--workdir", help="scratch folder (default: a temporary folder, removed afterwards)")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                    help="postgres: the PostgreSQL benchmarks of tools/bench_pg.py (default sqlite)")
    ap.add_argument("--pg-url", help="with --backend postgres: a server to use (a new database is made in it); "
                                     "default: a throwaway server with PostgreSQL's durable defaults")
    ap.add_argument("--writer-rounds", type=int, default=3,
                    help="with --backend postgres: rounds of the writers cases, alternated (default 3)")
    ap.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                    help="with --backend postgres: a setting of the throwaway server (repeatable), "
                         "e.g. synchronous_commit=off")
    a = ap.parse_args(argv)
    quick = a.quick
    defaults = {
        "repeat": (2, 7), "sizes": ("200", "1000,10000,100000"), "samples": (100, 500), "batches": (5, 50),
        "corpus": (2000, 1_000_000), "sessions": (2, 100), "bulk_repeat": (1, 3), "messages": (40, 1000),
        "chunks": (4000, 100_000), "projection_repeat": (3, 20), "writer_events": (50, 2000),
    }
    for key, (q, full) in defaults.items():
        if getattr(a, key) is None:
            setattr(a, key, q if quick else full)
    a.sizes = [int(s) for s in str(a.sizes).split(",") if s.strip()]
    a.only = [w.strip() for w in a.only.split(",") if w.strip()]
    unknown = set(a.only) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    if a.sessions < 1 or a.corpus < a.sessions:
        ap.error("--corpus must be at least --sessions (>= 1)")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a._backend == "postgres":
        import bench_pg

        return bench_pg.run(a)
    command = "python tools/bench.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.peers:
        AgentsPeer.probe()  # importing the Agents SDK takes seconds: only when it is wanted
        AdkPeer.probe()
        EventsourcingPeer.probe()
    rep = Report(machine=machine_info(), args={k: v for k, v in vars(a).items()})
    loop = asyncio.new_event_loop()
    tmp = None
    if a.workdir:
        work = Path(a.workdir)
        work.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="bench-", dir=work))
    else:
        tmp = tempfile.TemporaryDirectory(prefix="eventstore-bench-")
        work = Path(tmp.name)
    try:
        for name in a.only:
            if name == "peers":
                continue
            print(f"running {name} ...", file=sys.stderr, flush=True)
            if name == "append":
                bench_append(rep, a, work, loop)
            elif name == "batch":
                bench_batch(rep, a, work, loop)
            elif name == "bulk":
                bench_bulk(rep, a, work)
            elif name == "projection":
                bench_projection(rep, a, work, loop)
            elif name == "contention":
                bench_contention(rep, a)
    finally:
        loop.close()
        if tmp is not None:
            tmp.cleanup()
    rep.machine["load average at end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    rep.compute_ratios()
    compute_targets(rep, a)
    if a.json:
        Path(a.json).write_text(json.dumps({"command": command, "machine": rep.machine,
                                            "rows": [asdict(r) for r in rep.rows], "targets": rep.targets,
                                            "checks": rep.checks, "contention": rep.contention}, indent=1) + "\n")
    if a.markdown:
        print_markdown(rep, command)
    else:
        print_rich(rep, command)
    return 0 if all(c["ok"] for c in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
