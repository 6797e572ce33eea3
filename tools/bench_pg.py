"""Benchmarks on PostgreSQL: eventstore against raw psycopg doing the same inserts, on one
server, side by side in one run (``python tools/bench.py --backend postgres`` runs this).

Usage (from the repository root)::

    python tools/bench.py --backend postgres                 # a throwaway server (tests/pgserver.py)
    python tools/bench.py --backend postgres --pg-url URL    # an existing server (a new database in it)
    python tools/bench.py --backend postgres --quick         # seconds
    python tools/bench.py --backend postgres --pg-setting synchronous_commit=off

Workloads (each figure the best of ``--repeat`` rounds, the systems interleaved round by
round so background load hits them alike):

* ``append``: single appends, one event per transaction, into a session of 1,000 events.
  eventstore ``Session.append`` (payload encoding, hash chain, the insert guard) against
  raw psycopg: the same INSERT into the same ``events`` table (triggers included), in the
  same transaction shape (one autocommit statement), with seq and hash kept by the caller.
* ``batch``: ``Session.append_many`` of 100 events against raw psycopg inserting the same
  100 rows in one statement (``unnest``), one transaction each.
* ``import``: ``EventStore.import_jsonl`` of a generated file (parse, validate, hash, then
  ``COPY``) against raw psycopg ``executemany`` of the same rows in one transaction (rows
  prepared beforehand: raw does less work).
* ``writers`` (``--only contention``): 8 processes each appending to a session of its own, against 1 process:
  events per second and the p50/p99 latency of one append, for each ``durability``
  (``normal``: asynchronous commit; ``full``: the append waits for the WAL flush after its
  commit, outside the position lock), each beside raw psycopg doing the same work (payload
  encoding, hash chain, one autocommit INSERT per event, under the same commit setting) into
  eventstore's ``events`` table (guard triggers and position lock, indexes, NOTIFY) and
  into a plain table of the same columns with only a primary key (no trigger, no lock the
  writers share: the machine's ceiling for 8 writers against 1). For comparison, two more
  eventstore cases: every commit asynchronous and followed by the flush statement in a
  round trip of its own (what ``full`` does only when another append holds the position
  lock), and every commit flushing inside the lock (``synchronous_commit = on`` on the
  store's write connection). Rounds alternate the cases so that background load hits them
  alike; each figure is given as the range over the rounds.

Single appends, batches and imports run under both durabilities against raw psycopg under
the same setting (``normal``: ``SET synchronous_commit = off``; ``full``: the server's
durable ``synchronous_commit = on``).
* ``peers`` (skipped with ``--no-peers``): the OpenAI Agents SDK's ``SQLAlchemySession`` and
  Google ADK's ``DatabaseSessionService`` on the same server (a database each, asyncpg):
  single appends of chat messages into a session of 1,000 (``Session.append``,
  ``add_items([item])``, ``append_event``), batches of 100 (``append_many``, ``add_items``;
  ADK has no batch form), and reading a session of 1,000 back (``events()`` and
  ``derive_messages()``, ``get_items()``, ``get_session()``).

The server's settings are printed with the results (docs/benchmarks.md keeps them).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

#: Server settings of the throwaway server: PostgreSQL's durable defaults (fsync on,
#: synchronous_commit on), so a commit waits for its WAL flush as it would in production.
DURABLE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
SHOWN = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "commit_delay",
         "wal_writer_delay", "shared_buffers", "wal_level", "max_connections")
#: "normal" is the default (durable: the same as "full" on PostgreSQL); "may-lose-recent" the
#: opt-in asynchronous commit.
LOSSY = "may-lose-recent"
DURABILITIES = ("normal", LOSSY)
#: raw psycopg's connection setting for each durability: the same commit as the store's.
RAW_SETTING = {LOSSY: "off", "normal": "on", "full": "on"}


def payload(i: int, size: int = 200) -> dict:
    return {"content": ("lorem ipsum " * (size // 12))[:size], "i": i}


def best(rounds: int, systems: dict) -> dict[str, float]:
    out = {k: float("inf") for k in systems}
    for _ in range(rounds):
        for name, fn in systems.items():
            out[name] = min(out[name], fn())
    return out


def _raw_conn(url: str, durability: str | None = None):
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    if durability is not None:
        conn.execute(f"SET synchronous_commit = {RAW_SETTING[durability]}")
    return conn


def bench_append(url: str, n: int, rounds: int, durability: str, peers: bool) -> dict:
    from eventstore import EventStore
    from eventstore.log.chain import chain_hash, genesis_hash
    from eventstore.log.codec import dumps, event_line

    store = EventStore.open(url, durability=durability)
    s = store.create_session(f"append-es-{durability}")
    s.append_many([("tool/result", payload(i)) for i in range(1000)])
    raw = _raw_conn(url, durability)
    rid = f"append-raw-{durability}"
    store.create_session(rid)
    state = {"seq": 0, "hash": genesis_hash(rid)}

    def raw_one(i: int) -> None:
        seq, ts = state["seq"], time.time()
        pj = dumps(payload(i))
        h = chain_hash(state["hash"], event_line("tool/result", seq, ts, pj))
        raw.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES (%s, %s, %s, %s, %s, %s)",
                    (rid, seq, "tool/result", ts, pj, h))
        state["seq"], state["hash"] = seq + 1, h

    for i in range(1000):
        raw_one(i)

    def es() -> float:
        t = time.perf_counter()
        for i in range(n):
            s.append("tool/result", payload(i))
        return (time.perf_counter() - t) / n

    def rw() -> float:
        t = time.perf_counter()
        for i in range(n):
            raw_one(i)
        return (time.perf_counter() - t) / n

    systems = {"eventstore": es, "raw psycopg": rw}
    peer = _agents_peer(url) if peers else None
    if peer is not None:
        loop, session = peer

        def agents() -> float:
            t = time.perf_counter()
            for i in range(n):
                loop.run_until_complete(session.add_items([{"role": "tool", "content": payload(i)["content"],
                                                            "tool_call_id": "c", "i": i}]))
            return (time.perf_counter() - t) / n

        systems["Agents SDK SQLAlchemySession"] = agents
    res = best(rounds, systems)
    if peer is not None:
        peer[0].run_until_complete(peer[1].engine.dispose())
        peer[0].close()
    store.close()
    raw.close()
    return res


def _agents_peer(url: str):
    """The OpenAI Agents SDK's SQLAlchemySession on the same server (psycopg's async driver),
    or None when the SDK is not installed."""
    try:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    except ImportError:
        return None
    import asyncio

    loop = asyncio.new_event_loop()
    session = SQLAlchemySession.from_url("bench-agents", url=url.replace("postgresql://", "postgresql+psycopg://"),
                                         create_tables=True)
    return loop, session


def bench_batch(url: str, batches: int, rounds: int, durability: str, size: int = 100) -> dict:
    from eventstore import EventStore
    from eventstore.log.chain import chain_rows, genesis_hash
    from eventstore.log.codec import dumps

    store = EventStore.open(url, durability=durability)
    s = store.create_session(f"batch-es-{durability}")
    raw = _raw_conn(url, durability)
    rid = f"batch-raw-{durability}"
    store.create_session(rid)
    state = {"seq": 0, "hash": genesis_hash(rid)}
    sql = ("INSERT INTO events (session_id, seq, type, ts, payload, hash) SELECT %s, %s + u.i - 1, u.t, u.ts, u.p, u.h "
           "FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[]) WITH ORDINALITY AS u(t, ts, p, h, i)")

    def es() -> float:
        t = time.perf_counter()
        for _ in range(batches):
            s.append_many([("assistant/chunk", payload(i, 40)) for i in range(size)])
        return (time.perf_counter() - t) / (batches * size)

    def rw() -> float:
        t = time.perf_counter()
        for _ in range(batches):
            ts = time.time()
            rows = chain_rows(state["hash"], state["seq"], ["assistant/chunk"] * size, [ts] * size,
                              [dumps(payload(i, 40)) for i in range(size)])
            raw.execute(sql, (rid, state["seq"], rows[0::4], rows[1::4], rows[2::4], rows[3::4]))
            state["seq"] += size
            state["hash"] = rows[-1]
        return (time.perf_counter() - t) / (batches * size)

    res = best(rounds, {"eventstore": es, "raw psycopg": rw})
    store.close()
    raw.close()
    return res


def bench_import(url: str, events: int, rounds: int, work: Path, durability: str) -> dict:
    from eventstore import EventStore
    from eventstore.log.chain import chain_hash, genesis_hash
    from eventstore.log.codec import dumps, event_line

    store = EventStore.open(url, durability=durability)
    raw = _raw_conn(url, durability)
    counter = {"n": 0}

    def write_file() -> tuple[Path, str, list]:
        counter["n"] += 1
        sid = f"import-{durability}-{counter['n']}"
        path = work / f"{sid}.jsonl"
        rows = []
        prev = genesis_hash(sid)
        with path.open("w", encoding="utf-8") as f:
            f.write(json.dumps({"type": "session/meta", "id": sid}, separators=(",", ":")) + "\n")
            for seq in range(events):
                pj = dumps(payload(seq, 120))
                line = event_line("tool/result", seq, 1.5 + seq, pj)
                prev = chain_hash(prev, line)
                rows.append((sid, seq, "tool/result", 1.5 + seq, pj, prev))
                f.write(line + "\n")
        return path, sid, rows

    def es() -> float:
        path, _sid, _rows = write_file()
        t = time.perf_counter()
        store.import_jsonl(path)
        return (time.perf_counter() - t) / events

    def rw() -> float:
        _path, sid, rows = write_file()
        t = time.perf_counter()
        with raw.transaction():
            raw.execute("INSERT INTO sessions (id, created_at) VALUES (%s, %s)", (sid, time.time()))
            with raw.cursor() as cur:
                cur.executemany("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                                "VALUES (%s, %s, %s, %s, %s, %s)", rows)
        return (time.perf_counter() - t) / events

    res = best(rounds, {"eventstore (COPY)": es, "raw psycopg executemany": rw})
    store.close()
    raw.close()
    return res


# --- peers: the agent frameworks' own session stores, on the same server ---------------------

#: The peers' driver: asyncpg, the one their documentation names for PostgreSQL (both are
#: async SQLAlchemy; ADK's error for a sync URL says to use ``postgresql+asyncpg://``).
PEER_SCHEME = "postgresql+asyncpg://"
PEER_LABELS = {"agents": "Agents SDK SQLAlchemySession", "adk": "ADK DatabaseSessionService"}


def chat_text(i: int) -> tuple[str, str]:
    """Turn ``i`` of a chat: (role, text of 200 characters), users and assistants in turn."""
    return ("user" if i % 2 == 0 else "assistant"), f"turn {i}: " + ("lorem ipsum " * 17)[:190]


def es_event(i: int) -> tuple[str, dict]:
    role, text = chat_text(i)
    return f"{role}/message", {"content": text}


class AgentsSession:
    """One OpenAI Agents SDK ``SQLAlchemySession``: ``add_items`` of chat items, ``get_items``."""

    def __init__(self, url: str, sid: str):
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        self.session = SQLAlchemySession.from_url(sid, url=url, create_tables=True)

    @staticmethod
    def item(i: int) -> dict:
        role, text = chat_text(i)
        return {"role": role, "content": text}

    async def append(self, i: int) -> None:
        await self.session.add_items([self.item(i)])

    async def append_many(self, ids: range) -> None:
        await self.session.add_items([self.item(i) for i in ids])

    async def read(self) -> int:
        return len(await self.session.get_items())

    async def close(self) -> None:
        await self.session.engine.dispose()


class AdkSession:
    """One Google ADK ``DatabaseSessionService`` session: ``append_event`` of an ``Event``
    with text content (ADK has no batch append), ``get_session`` with all its events."""

    def __init__(self, url: str, sid: str):
        from google.adk.sessions import DatabaseSessionService

        self.service = DatabaseSessionService(db_url=url)
        self.sid = sid
        self.session = None

    async def open(self) -> AdkSession:
        self.session = await self.service.create_session(app_name="bench", user_id="user", session_id=self.sid)
        return self

    @staticmethod
    def event(i: int):
        from google.adk.events import Event
        from google.genai import types

        role, text = chat_text(i)
        author = "user" if role == "user" else "model"
        return Event(author=author, invocation_id=f"inv-{i // 2}",
                     content=types.Content(role=author, parts=[types.Part(text=text)]))

    async def append(self, i: int) -> None:
        await self.service.append_event(self.session, self.event(i))

    append_many = None  # no batch form

    async def read(self) -> int:
        got = await self.service.get_session(app_name="bench", user_id="user", session_id=self.sid)
        return len(got.events)

    async def close(self) -> None:
        await self.service.close()


def _peer_kinds() -> tuple[dict, dict]:
    """{kind: opener} for the installed peers, and {kind: reason} for those skipped."""
    kinds, skipped = {}, {}
    try:
        import agents.extensions.memory.sqlalchemy_session  # noqa: F401
        kinds["agents"] = AgentsSession
    except ImportError as e:
        skipped["agents"] = f"not installed ({e.name}): pip install -e '.[bench]'"
    try:
        import google.adk.sessions  # noqa: F401
        kinds["adk"] = AdkSession
    except ImportError as e:
        skipped["adk"] = f"not installed ({e.name}): pip install -e '.[bench]'"
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        skipped.update({k: "asyncpg not installed: pip install -e '.[bench]'" for k in kinds})
        kinds = {}
    return kinds, skipped


def bench_peers(url: str, n: int, batches: int, reads: int, rounds: int, size: int = 100,
                events: int = 1000) -> dict:
    """eventstore against the agent frameworks' session stores, interleaved round by round:
    single appends (into a session of ``events``), batches of ``size`` (where the peer has a
    batch form), and reading back a whole session of ``events`` chat messages.

    Returns {"append"|"batch"|"read": {system: seconds per event, or per read}, "skipped":
    {peer: reason}, "checks": {system: events read back}}."""
    import asyncio

    from eventstore import EventStore

    kinds, skipped = _peer_kinds()
    base, _, dbname = url.rpartition("/")
    with _raw_conn(url) as conn:  # a database of its own for each peer: ADK's tables are named events, sessions
        for kind in kinds:
            conn.execute(f'CREATE DATABASE "{dbname}_{kind}"')
    loop = asyncio.new_event_loop()
    store = EventStore.open(url, durability="full")  # the peers commit durably, as the server says
    es = {w: store.create_session(f"peers-{w}") for w in ("append", "batch", "read")}
    for w in ("append", "read"):
        es[w].append_many([es_event(i) for i in range(events)])
    peers: dict[str, dict] = {}
    for kind, cls in kinds.items():
        peers[kind] = {}
        for w in ("append", "batch", "read"):
            peer = cls(f"{base}/{dbname}_{kind}".replace("postgresql://", PEER_SCHEME, 1), f"peers-{kind}-{w}")
            if hasattr(peer, "open"):
                loop.run_until_complete(peer.open())
            peers[kind][w] = peer
        for w in ("append", "read"):
            if peers[kind][w].append_many is not None:
                loop.run_until_complete(peers[kind][w].append_many(range(events)))
            else:
                async def fill(p=peers[kind][w]) -> None:
                    for i in range(events):
                        await p.append(i)

                loop.run_until_complete(fill())

    def timed_async(make) -> float:
        async def block() -> float:
            t = time.perf_counter()
            await make()
            return time.perf_counter() - t

        return loop.run_until_complete(block())

    counter = {"i": events}

    def es_append() -> float:
        t = time.perf_counter()
        for i in range(n):
            es["append"].append(*es_event(counter["i"] + i))
        return (time.perf_counter() - t) / n

    def peer_append(p) -> float:
        async def go() -> None:
            for i in range(n):
                await p.append(events + i)

        return timed_async(go) / n

    def es_batch() -> float:
        t = time.perf_counter()
        for b in range(batches):
            es["batch"].append_many([es_event(b * size + i) for i in range(size)])
        return (time.perf_counter() - t) / (batches * size)

    def peer_batch(p) -> float:
        async def go() -> None:
            for b in range(batches):
                await p.append_many(range(b * size, (b + 1) * size))

        return timed_async(go) / (batches * size)

    def es_read() -> float:
        t = time.perf_counter()
        for _ in range(reads):
            list(es["read"].events())
        return (time.perf_counter() - t) / reads

    def es_messages() -> float:
        t = time.perf_counter()
        for _ in range(reads):
            es["read"].derive_messages()
        return (time.perf_counter() - t) / reads

    def peer_read(p) -> float:
        async def go() -> None:
            for _ in range(reads):
                await p.read()

        return timed_async(go) / reads

    out: dict = {"skipped": skipped}
    try:
        print("running peers: append ...", file=sys.stderr, flush=True)
        out["append"] = best(rounds, {"eventstore": es_append,
                                      **{k: (lambda p=v["append"]: peer_append(p)) for k, v in peers.items()}})
        print("running peers: batch ...", file=sys.stderr, flush=True)
        out["batch"] = best(rounds, {"eventstore": es_batch,
                                     **{k: (lambda p=v["batch"]: peer_batch(p)) for k, v in peers.items()
                                        if v["batch"].append_many is not None}})
        print("running peers: read ...", file=sys.stderr, flush=True)
        out["read"] = best(rounds, {"eventstore": es_read, "eventstore messages": es_messages,
                                    **{k: (lambda p=v["read"]: peer_read(p)) for k, v in peers.items()}})
        out["checks"] = {"eventstore": len(list(es["read"].events())), "eventstore messages":
                         len(es["read"].derive_messages()),
                         **{k: loop.run_until_complete(v["read"].read()) for k, v in peers.items()}}
    finally:
        for v in peers.values():
            for p in v.values():
                loop.run_until_complete(p.close())
        loop.close()
        store.close()
    return out


def peer_lines(res: dict, n: int, batches: int, reads: int, events: int) -> list[str]:
    """The peers' Markdown table: rates, and each peer's time over eventstore's."""
    kinds = [k for k in PEER_LABELS if k in res["read"]]
    head = ["workload", "eventstore"] + [PEER_LABELS[k] for k in kinds] + \
        [f"{PEER_LABELS[k].split()[0]} ÷ eventstore" for k in kinds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(label: str, fig: dict, es_key: str, unit: str, per: float = 1.0) -> None:
        cells = [label, f"{per / fig[es_key]:,.0f} {unit}"]
        cells += [f"{per / fig[k]:,.0f} {unit}" if k in fig else "— (no batch form)" for k in kinds]
        cells += [f"{fig[k] / fig[es_key]:.2f}x" if k in fig else "—" for k in kinds]
        lines.append("| " + " | ".join(cells) + " |")

    row(f"single append, session of {events:,} ({n} appends a round)", res["append"], "eventstore", "events/s")
    row(f"batches of 100 ({batches} a round)", res["batch"], "eventstore", "events/s")
    row(f"read back a session of {events:,} (`events()`; `get_items`; `get_session`)", res["read"], "eventstore",
        "reads/s")
    row(f"read back as chat messages (`derive_messages()`), {reads} reads a round", res["read"],
        "eventstore messages", "reads/s")
    for k, why in res["skipped"].items():
        lines.append(f"\n{PEER_LABELS[k]}: skipped, {why}")
    lines.append("\nEvents read back: " + ", ".join(f"{k} {v}" for k, v in res["checks"].items()))
    return lines


def _writer(url: str, index: int, count: int, mode: str, barrier, results) -> None:
    from eventstore import EventStore
    from eventstore.backends.postgres.statements import _FLUSH

    with EventStore.open(url, busy_timeout=60, durability=LOSSY if mode in (IN_LOCK, APART) else mode) as store:
        s = store.create_session(f"writer-{index}-{time.time_ns()}")
        conn = store._backend._conn("w")
        if mode == IN_LOCK:  # the commit flushes before it lets the position lock go
            conn.execute("SET synchronous_commit = on")
        s.append("tool/result", payload(0))  # (the head cached, the connection made)
        lat = []
        barrier.wait()
        t0 = time.perf_counter()
        for i in range(count):
            t = time.perf_counter()
            s.append("tool/result", payload(i))
            if mode == APART:  # "full" with the flush statement in a round trip of its own
                conn.execute(_FLUSH, (store._backend._sync_level,))
            lat.append(time.perf_counter() - t)
        results.put((index, t0, time.perf_counter(), lat))


#: The writers case that flushes inside the position lock (the store's commit with
#: synchronous_commit = on), for comparison with "full".
IN_LOCK = "flush in lock"
#: The writers case of "full" with the flush statement sent after the append's INSERT has
#: returned (two round trips), for comparison with "full" (one when the position lock is
#: free: the INSERT's own commit flushes).
APART = "flush in own round trip"
#: The systems of the writers cases: eventstore's ``Session.append``, and raw psycopg doing
#: the same work (payload encoding, hash chain, one autocommit INSERT of the same row) into
#: eventstore's ``events`` table (guard triggers and position lock, indexes, NOTIFY) or
#: into :data:`PLAIN`, a table of the same columns with a primary key and nothing else (no
#: trigger, no lock shared by the writers: the machine's ceiling for this work).
ES, RAW_EVENTS, RAW_PLAIN = "eventstore", "raw psycopg, events table", "raw psycopg, plain table"
PLAIN = "bench_plain"
_PLAIN_DDL = (f"CREATE TABLE IF NOT EXISTS {PLAIN} (session_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, "
              "ts float8 NOT NULL, payload text NOT NULL, hash text NOT NULL, PRIMARY KEY (session_id, seq))")


def _raw_writer(url: str, index: int, count: int, mode: str, barrier, results, table: str) -> None:
    """:func:`_writer`'s work done by raw psycopg into ``table`` (``events`` or :data:`PLAIN`),
    under ``mode``'s commit (:data:`RAW_SETTING`), seq and hash kept by the caller."""
    from eventstore import EventStore
    from eventstore.log.chain import chain_hash, genesis_hash
    from eventstore.log.codec import dumps, event_line

    sid = f"raw-writer-{index}-{time.time_ns()}"
    if table == "events":
        with EventStore.open(url) as store:
            store.create_session(sid)
    sql = f"INSERT INTO {table} (session_id, seq, type, ts, payload, hash) VALUES (%s, %s, %s, %s, %s, %s)"
    with _raw_conn(url, mode) as conn:
        state = [0, genesis_hash(sid)]

        def one(i: int) -> None:
            seq, ts = state[0], time.time()
            pj = dumps(payload(i))
            h = chain_hash(state[1], event_line("tool/result", seq, ts, pj))
            conn.execute(sql, (sid, seq, "tool/result", ts, pj, h))
            state[0], state[1] = seq + 1, h

        one(0)
        lat = []
        barrier.wait()
        t0 = time.perf_counter()
        for i in range(count):
            t = time.perf_counter()
            one(i)
            lat.append(time.perf_counter() - t)
        results.put((index, t0, time.perf_counter(), lat))


def bench_writers(url: str, procs: int, count: int, mode: str, system: str = ES) -> dict:
    """``procs`` writer processes, ``count`` appends each, ``mode`` a durability or
    :data:`IN_LOCK` (eventstore only), ``system`` one of :data:`ES`, :data:`RAW_EVENTS`,
    :data:`RAW_PLAIN` (which needs :data:`PLAIN`: :func:`run` makes it): events/s over the
    wall time from the first start to the last end, and the p50/p99 of one append (ms)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    results = ctx.Queue()
    if system == ES:
        target, extra = _writer, ()
    else:
        target, extra = _raw_writer, ("events" if system == RAW_EVENTS else PLAIN,)
    ps = [ctx.Process(target=target, args=(url, i, count, mode, barrier, results, *extra)) for i in range(procs)]
    syncs = _wal_syncs(url)
    for p in ps:
        p.start()
    got: list = []
    while len(got) < procs:
        try:
            got.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in ps):  # (the others wait at the barrier)
                for p in ps:
                    p.terminate()
                raise RuntimeError(f"a writer process failed ({mode}, {system}): see its traceback above") from None
    for p in ps:
        p.join()
    syncs = _wal_syncs(url) - syncs
    start = min(g[1] for g in got)
    end = max(g[2] for g in got)
    lat = sorted(x for g in got for x in g[3])
    return {"events_per_s": procs * count / (end - start), "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))], "syncs_per_event": syncs / (procs * (count + 1))}


def writer_cases() -> list[tuple[str, str]]:
    """The writers cases, (mode, system), in the order a round runs them and the table lists them."""
    return [*((d, s) for d in DURABILITIES for s in (ES, RAW_EVENTS, RAW_PLAIN)), (APART, ES), (IN_LOCK, ES)]


def _wal_syncs(url: str) -> int:
    """WAL flushes the server has made (pg_stat_wal.wal_sync; shared by every commit waiting
    for one: group commit)."""
    with _raw_conn(url) as conn:
        return conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()[0]


def server_settings(url: str) -> dict:
    with _raw_conn(url) as conn:
        return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SHOWN}


def run(a) -> int:
    """Run the PostgreSQL benchmarks (``a``: bench.py's parsed arguments plus ``pg_url``)."""
    from pgserver import PgServer

    server = None
    if a.pg_url:
        import psycopg

        base = a.pg_url
        name = f"bench_{int(time.time())}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + "/" + name
    else:
        extra = dict(item.split("=", 1) for item in getattr(a, "pg_setting", []))
        server = PgServer(settings={**DURABLE, **extra}).start()
        url = server.url(server.create_database("bench"))
    quick = a.quick
    rounds = 2 if quick else 5
    try:
        with tempfile.TemporaryDirectory(prefix="eventstore-pgbench-") as tmp:
            settings = server_settings(url)
            only = set(getattr(a, "only", None) or ("append", "batch", "bulk", "contention", "peers"))
            app, bat, imp = {}, {}, {}
            for d in DURABILITIES:
                print(f"running append, batch, import ({d}) ...", file=sys.stderr, flush=True)
                if "append" in only:
                    app[d] = bench_append(url, 50 if quick else 500, rounds, d, peers=d == "normal")
                if "batch" in only:
                    bat[d] = bench_batch(url, 5 if quick else 50, rounds, d)
                if "bulk" in only:
                    imp[d] = bench_import(url, 2000 if quick else 50000, 2 if quick else 3, Path(tmp), d)
            counts = {LOSSY: 50 if quick else 400, "normal": 20 if quick else 100, IN_LOCK: 20 if quick else 100,
                      APART: 20 if quick else 100}
            cases = writer_cases()
            writers: dict = {f"{m} | {sy}": {"1": [], "8": []} for m, sy in cases}
            if "contention" in only:
                with _raw_conn(url) as conn:
                    conn.execute(_PLAIN_DDL)
            for r in range((1 if quick else a.writer_rounds) if "contention" in only else 0):
                for m, sy in cases:
                    print(f"running writers ({m}, {sy}, round {r + 1}) ...", file=sys.stderr, flush=True)
                    writers[f"{m} | {sy}"]["1"].append(bench_writers(url, 1, counts[m] * 2, m, sy))
                    writers[f"{m} | {sy}"]["8"].append(bench_writers(url, 8, counts[m], m, sy))
            peer_sizes = dict(n=20, batches=2, reads=2, events=200) if quick else \
                dict(n=200, batches=20, reads=10, events=1000)
            peers = bench_peers(url, rounds=rounds, **peer_sizes) if a.peers and "peers" in only else None
    finally:
        if server is not None:
            server.stop()
    command = "python tools/bench.py " + " ".join(sys.argv[1:])
    lines = [f"`{command}`", "", "Server: " + ", ".join(f"{k}={v}" for k, v in settings.items()), ""]

    def rate(sec: float) -> str:
        return f"{1 / sec:,.0f}/s"

    if app or bat or imp:
        lines += ["| workload | durability | eventstore | raw psycopg | ratio (eventstore / raw) |",
                  "|---|---|---|---|---|"]
    for d in DURABILITIES:
        if d in app:
            a_ = app[d]
            lines.append(f"| single append (1 event per transaction) | {d} | {rate(a_['eventstore'])} "
                         f"| {rate(a_['raw psycopg'])} | {a_['raw psycopg'] / a_['eventstore']:.2f}x |")
            if "Agents SDK SQLAlchemySession" in a_:
                peer = a_["Agents SDK SQLAlchemySession"]
                lines.append(f"| single append: Agents SDK `SQLAlchemySession.add_items` (1 item), in the "
                             f"eventstore column | server's | {rate(peer)} | {rate(a_['raw psycopg'])} "
                             f"| {a_['raw psycopg'] / peer:.2f}x |")
        if d in bat:
            b_ = bat[d]
            lines.append(f"| batch of 100 (events) | {d} | {rate(b_['eventstore'])} | {rate(b_['raw psycopg'])} "
                         f"| {b_['raw psycopg'] / b_['eventstore']:.2f}x |")
        if d in imp:
            e, r = imp[d]["eventstore (COPY)"], imp[d]["raw psycopg executemany"]
            lines.append(f"| import (events; eventstore: JSONL file, COPY; raw: executemany of ready rows) | {d} "
                         f"| {rate(e)} | {rate(r)} | {r / e:.2f}x |")

    if peers is not None:
        lines += ["", "Peers on the same server (each figure the best of the rounds; ÷ eventstore: the peer's "
                  "time over eventstore's, above 1 eventstore is faster):", ""]
        lines += peer_lines(peers, **peer_sizes)

    def span(values: list[float], fmt: str) -> str:
        lo, hi = min(values), max(values)
        return format(lo, fmt) if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}} to {hi:{fmt}}"

    n_rounds = len(writers[f"normal | {ES}"]["1"])
    title = f"Writers on sessions of their own ({n_rounds} rounds, ranges over the rounds):"
    lines += [] if not n_rounds else ["", title, "",
              "| durability | system | writers | events/s | p50 append (ms) | p99 append (ms) | WAL flushes per append "
              "| 8 writers / 1 writer, each round |", "|---|---|---|---|---|---|---|---|"]
    for key, w in writers.items() if n_rounds else ():
        ratios = [e["events_per_s"] / o["events_per_s"] for o, e in zip(w["1"], w["8"], strict=True)]
        for label in ("1", "8"):
            runs = w[label]
            lines.append(f"| {key} | {label} | {span([x['events_per_s'] for x in runs], ',.0f')} "
                         f"| {span([x['p50_ms'] for x in runs], '.2f')} | {span([x['p99_ms'] for x in runs], '.2f')} "
                         f"| {span([x['syncs_per_event'] for x in runs], '.2f')} "
                         f"| {', '.join(f'{x:.2f}x' for x in ratios) if label == '8' else ''} |")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": settings, "append": app, "batch": bat, "import": imp,
                                            "writers": writers, "peers": peers}, indent=1))
    return 0
