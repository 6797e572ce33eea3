"""Raw psycopg: eventstore's own statements without eventstore, on PostgreSQL.

The same INSERT into the same ``events`` table (its triggers included), one autocommit
statement per append (or one statement of 100 rows per batch, ``unnest``), under the same
commit setting as the store's durability; the caller keeps seq and the chained hash over
each event's salted commit line (computed with the log's own functions, so the guard
accepts the rows; the salt stored with the event, as eventstore stores it). Import is
``COPY`` of the prepared rows into the same table in one transaction per file.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

NAME = "raw psycopg"
INSERT = "INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) VALUES (%s, %s, %s, %s, %s, %s, %s)"
INSERT_MANY = ("INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) "
               "SELECT %s, %s + u.i - 1, u.t, u.ts, u.p, u.h, u.s "
               "FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[], %s::bytea[]) "
               "WITH ORDINALITY AS u(t, ts, p, h, s, i)")
#: the commit of each store durability (normal and full are durable on PostgreSQL)
SYNC = {"normal": "on", "full": "on", "may-lose-recent": "off"}


def available() -> str:
    """'' when psycopg imports, else why not."""
    try:
        import psycopg  # noqa: F401
    except ImportError as e:
        return f"not installed: {e}"
    return ""


def connect(url: str, durability: str = "normal"):
    """An autocommit connection with the commit setting of ``durability``."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f"SET synchronous_commit = {SYNC[durability]}")
    return conn


def create_session(conn, sid: str) -> None:
    """The session row the events table's foreign key needs."""
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (%s, %s)", (sid, time.time()))


class Log:
    """One session's raw log on PostgreSQL (the session row made here)."""

    def __init__(self, conn, sid: str):
        from eventstore.log.chain import genesis_hash

        self.conn, self.sid, self.seq, self.prev = conn, sid, 0, genesis_hash(sid)
        create_session(conn, sid)

    def _row(self, type_: str, payload: dict, ts: float) -> tuple:
        from eventstore.log.chain import chain_hash

        from .raw_sqlite import salted_line

        pj, salt, line = salted_line(type_, self.seq, ts, payload)
        self.prev = chain_hash(self.prev, line)
        row = (self.sid, self.seq, type_, ts, pj, self.prev, salt)
        self.seq += 1
        return row

    def append(self, type_: str, payload: dict) -> None:
        """One autocommit INSERT of the next event."""
        self.conn.execute(INSERT, self._row(type_, payload, time.time()))

    def append_many(self, events) -> None:
        """One INSERT of the whole batch (``unnest``), autocommit."""
        seq0, now = self.seq, time.time()
        rows = [self._row(t, p, now) for t, p in events]
        self.conn.execute(INSERT_MANY, (self.sid, seq0, [r[2] for r in rows], [r[3] for r in rows],
                                        [r[4] for r in rows], [r[5] for r in rows], [r[6] for r in rows]))


def import_file(conn, path: Path, rows_per_transaction: int | None = None) -> int:
    """orjson-parse each line, re-encode the payload, salt it and chain the hash of its line
    with eventstore's own public functions (:func:`~.raw_sqlite.salted_line`,
    :func:`eventstore.log.chain.chain_hash`), ``COPY`` the rows into the
    events table (its triggers run) in transactions of ``rows_per_transaction`` rows
    (eventstore's chunk, :data:`eventstore.io.bulk.CHUNK_ROWS`, by default), the session row
    in the first."""
    from eventstore.io.bulk import CHUNK_ROWS
    from eventstore.log.chain import chain_hash, genesis_hash

    from .raw_sqlite import salted_line

    size = rows_per_transaction or CHUNK_ROWS
    loads = orjson.loads
    rows, sid, prev, n = [], None, "", 0

    def commit() -> None:
        with conn.transaction():
            if n <= size:
                create_session(conn, sid)
            with conn.cursor().copy("COPY events (session_id, seq, type, ts, payload, hash, salt) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        rows.clear()

    with open(path, "rb") as f:
        for raw in f:
            obj = loads(raw)
            t = obj.pop("type")
            if t == "session/meta":
                sid = obj["id"]
                prev = genesis_hash(sid)
                continue
            seq, ts = obj.pop("seq"), obj.pop("ts")
            pj, salt, line = salted_line(t, seq, ts, obj)
            prev = chain_hash(prev, line)
            rows.append((sid, seq, t, ts, pj, prev, salt))
            n += 1
            if len(rows) >= size:
                commit()
    if rows or not n:
        commit()
    return n


def export_session(conn, sid: str, path: Path) -> int:
    """One SELECT, each line put together by string concatenation."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(orjson.dumps({"type": "session/meta", "id": sid}).decode() + "\n")
        for type_, seq, ts, pj in conn.execute("SELECT type, seq, ts, payload FROM events WHERE session_id = %s "
                                               "ORDER BY seq", (sid,)):
            head = orjson.dumps({"type": type_, "seq": seq, "ts": ts}).decode()
            f.write(head[:-1] + ("}" if pj == "{}" else "," + pj[1:]) + "\n")
            n += 1
    return n
