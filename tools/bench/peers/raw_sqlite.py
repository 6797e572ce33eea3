"""Raw ``sqlite3``: the floor. The same work as eventstore, without eventstore.

Same pragmas as the store's ``normal`` durability (WAL, ``synchronous=NORMAL``), the same
transaction shape (``BEGIN IMMEDIATE`` ... ``COMMIT``), the same JSON library (orjson) and
the same salted, chained SHA-256 over each event's line (the salt stored beside the event,
the line built from its commit payload, docs/redaction.md); a plain table with the same
columns and ``UNIQUE(session_id, seq)``, the caller keeping seq and the previous hash. No
trigger, no CHECK, no validation: what a hand-written loop would do.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import orjson

NAME = "raw sqlite3"
SCHEMA = """CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
  ts REAL NOT NULL, payload TEXT NOT NULL, hash TEXT NOT NULL, salt BLOB, UNIQUE (session_id, seq))"""
INSERT = "INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) VALUES (?, ?, ?, ?, ?, ?, ?)"
MESSAGE_TYPES = ("user/message", "assistant/message", "tool/result")


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection with the store's pragmas and the plain events table."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 60000")
    conn.execute(SCHEMA)
    conn.execute("CREATE INDEX IF NOT EXISTS events_messages ON events (session_id, seq) "
                 "WHERE type IN ('user/message', 'assistant/message', 'tool/result')")
    return conn


def salted_line(type_: str, seq: int, ts: float, payload: dict) -> tuple[str, bytes, str]:
    """The payload's JSON text, a new salt, and the line the chain hashes: the event's line
    built from its commit payload (with eventstore's own :func:`eventstore.log.commit.commit_jsons`,
    so the baseline follows the rule whatever it becomes)."""
    from eventstore.log.commit import commit_jsons

    salt = os.urandom(16)
    commit = commit_jsons([salt], [payload])[0]
    head = orjson.dumps({"type": type_, "seq": seq, "ts": ts}).decode()
    return orjson.dumps(payload).decode(), salt, head[:-1] + ("}" if commit == "{}" else "," + commit[1:])


class Log:
    """One session's raw log: the caller keeps the next seq and the previous hash."""

    def __init__(self, conn: sqlite3.Connection, session_id: str):
        self.conn, self.sid = conn, session_id
        self.seq, self.prev = 0, hashlib.sha256(orjson.dumps({"type": "session/meta", "id": session_id})).hexdigest()

    def _row(self, type_: str, payload: dict, ts: float) -> tuple:
        pj, salt, text = salted_line(type_, self.seq, ts, payload)
        self.prev = hashlib.sha256((self.prev + "\n" + text).encode()).hexdigest()
        row = (self.sid, self.seq, type_, ts, pj, self.prev, salt)
        self.seq += 1
        return row

    def append(self, type_: str, payload: dict) -> None:
        """One event in a transaction of its own."""
        row = self._row(type_, payload, time.time())
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(INSERT, row)
        self.conn.execute("COMMIT")

    def append_many(self, events) -> None:
        """A batch in one transaction (``executemany``)."""
        now = time.time()
        rows = [self._row(t, p, now) for t, p in events]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(INSERT, rows)
        self.conn.execute("COMMIT")


def import_file(conn: sqlite3.Connection, path: Path, rows_per_transaction: int | None = None) -> int:
    """The raw import: orjson-parse each line, re-encode the payload, salt it and chain the
    hash of its line (:func:`salted_line`, :func:`eventstore.log.chain.chain_hash`: eventstore's
    own public functions, so the baseline follows the chain whatever it becomes), ``executemany`` in transactions of
    ``rows_per_transaction`` rows (eventstore's chunk, :data:`eventstore.io.bulk.CHUNK_ROWS`,
    by default)."""
    from eventstore.io.bulk import CHUNK_ROWS
    from eventstore.log.chain import chain_hash, genesis_hash

    size = rows_per_transaction or CHUNK_ROWS
    loads = orjson.loads
    rows, sid, prev, n = [], None, "", 0

    def commit() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows)
        conn.execute("COMMIT")
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
    if rows:
        commit()
    return n


def export_session(conn: sqlite3.Connection, sid: str, path: Path) -> int:
    """The raw export: one SELECT, each line put together by string concatenation."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(orjson.dumps({"type": "session/meta", "id": sid}).decode() + "\n")
        for type_, seq, ts, pj in conn.execute("SELECT type, seq, ts, payload FROM events WHERE session_id = ? "
                                               "ORDER BY seq", (sid,)):
            head = orjson.dumps({"type": type_, "seq": seq, "ts": ts}).decode()
            f.write(head[:-1] + ("}" if pj == "{}" else "," + pj[1:]) + "\n")
            n += 1
    return n


def messages(conn: sqlite3.Connection, sid: str) -> list[dict]:
    """A session's chat messages: its message rows, parsed and mapped in Python."""
    from ..data import derive

    loads = orjson.loads
    rows = conn.execute("SELECT type, payload FROM events WHERE session_id = ? AND type IN (?, ?, ?) ORDER BY seq",
                        (sid, *MESSAGE_TYPES))
    return derive({"type": t, **loads(p)} for t, p in rows)
