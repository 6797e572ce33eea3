"""The import transaction (``COPY``) and the import lock (a session advisory lock).
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from eventstore.log.chain import session_hash

from ..base import ImportLock, ImportTransaction, Refusal
from .statements import NEXT_SEQ, refusal_of

WRITERS_WAITING = ("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
                   "AND relation = 'events_position_lock'::regclass AND database = "
                   "(SELECT oid FROM pg_database WHERE datname = current_database()))")
# A COPY's savepoint released and the writers waiting looked up in one round trip (the simple
# query protocol: two statements, no parameters).
RELEASE_AND_LOOK = "RELEASE SAVEPOINT es_copy; " + WRITERS_WAITING


class PgImportLock(ImportLock):
    """An import lock: a session advisory lock held by a connection of its own; the owner
    names the server process holding it (``pg:PID#TAG``), which pg_locks shows while it
    lives."""

    def __init__(self, conn: psycopg.Connection):
        self._conn = conn
        self.owner = f"pg:{conn.info.backend_pid}#{uuid.uuid4().hex[:12]}"

    def release(self, unlink: bool) -> None:
        if not self._conn.closed:
            self._conn.close()  # ends the session: the lock goes with it


class PgImport(ImportTransaction):
    """An import's work inside its transaction (see :meth:`PostgresBackend.import_transaction`)."""

    stores_salts = True

    def __init__(self, conn: psycopg.Connection, session_id: str):
        self._conn = conn
        self._sid = session_id
        self._waiting = False  # a writer waited for the position lock after the last insert

    def session_meta(self) -> str | None:
        row = self._conn.execute("SELECT meta FROM sessions WHERE id = %s", (self._sid,)).fetchone()
        return row[0] if row else None

    def importing(self) -> tuple[int, str] | None:
        row = self._conn.execute("SELECT first_position, owner FROM importing WHERE session_id = %s",
                                 (self._sid,)).fetchone()
        return tuple(row) if row else None

    def begin_import(self, first_position: int, owner: str, started_at: float) -> None:
        self._conn.execute("INSERT INTO importing (session_id, first_position, owner, started_at) "
                           "VALUES (%s, %s, %s, %s)", (self._sid, first_position, owner, started_at))

    def take_over(self, owner: str) -> None:
        self._conn.execute("UPDATE importing SET owner = %s WHERE session_id = %s", (owner, self._sid))

    def end_import(self) -> None:
        self._conn.execute("DELETE FROM importing WHERE session_id = %s", (self._sid,))

    def create_session(self, created_at: float, meta_json: str) -> Refusal | None:
        try:
            with self._conn.transaction():  # a savepoint: a refusal leaves the transaction usable
                self._conn.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (%s, %s, %s, %s)",
                                   (self._sid, created_at, meta_json,
                                    session_hash(self._sid, created_at, meta_json)))
        except psycopg.Error as e:
            return refusal_of(e)
        return None

    def next_seq(self) -> int:
        return self._conn.execute(NEXT_SEQ, (self._sid,)).fetchone()[0]

    def next_position(self) -> int:
        return self._conn.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()[0]

    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        return [tuple(r) for r in self._conn.execute(
            "SELECT seq, type, ts, payload, hash FROM events WHERE session_id = %s AND seq BETWEEN %s AND %s "
            "ORDER BY seq", (self._sid, first_seq, last_seq)).fetchall()]

    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        if not rows:
            return None
        conn = self._conn
        try:  # (a savepoint of our own, released with the look for waiting writers: see writers_waiting)
            conn.execute("SAVEPOINT es_copy")
            if self._copy(rows, position0) != len(rows):  # a BEFORE INSERT trigger returning NULL drops
                raise _Dropped                            # rows silently: roll back, find the first below
            cur = conn.execute(RELEASE_AND_LOOK)
            cur.nextset()
            self._waiting = cur.fetchone()[0]
            return None
        except (psycopg.Error, _Dropped, UnicodeError, ValueError, OverflowError):
            # (text the server cannot take, a ts beyond a float: the row below says which)
            conn.execute("ROLLBACK TO SAVEPOINT es_copy; RELEASE SAVEPOINT es_copy")
        # COPY is all or nothing: find the first row the database refuses or drops, one
        # INSERT at a time, and keep the rows before it.
        for i, (seq, type_, ts, payload, hash_, *salt) in enumerate(rows):
            try:
                with self._conn.transaction():
                    cur = self._conn.execute(
                        "INSERT INTO events (position, session_id, seq, type, ts, payload, hash, salt) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (position0 + seq, self._sid, seq, type_, ts, _text(payload), _text(hash_),
                         salt[0] if salt else None))
                if cur.rowcount != 1:  # a BEFORE INSERT trigger returning NULL dropped it
                    return i, Refusal(None, "the database reported the insert done but stored nothing (a trigger "
                                            "ignores it: run eventstore verify); nothing was imported")
            except psycopg.Error as e:
                return i, refusal_of(e)
            except (UnicodeError, ValueError) as e:
                return i, Refusal(None, f"text PostgreSQL cannot hold: {e}")
        return None

    def _copy(self, rows: list[tuple], position0: int) -> int:
        """COPY ``rows`` in; the number of rows the server stored. The rows become one text
        block (COPY's text format, each field escaped) in one f-string a row."""
        sid = _copy_text(self._sid)
        types: dict[str, str] = {}
        out = []
        for seq, type_, ts, payload, hash_, *salt in rows:  # a row may carry its salt
            t = types.get(type_)
            if t is None:
                t = types[type_] = _copy_text(type_)
            if type(payload) is bytes:
                payload = payload.decode()
            if type(hash_) is bytes:
                hash_ = hash_.decode()
            if type(ts) is not float:
                ts = float(ts)
            salt_field = "\\\\x" + salt[0].hex() if salt and salt[0] is not None else "\\N"
            out.append(f"{position0 + seq}\t{sid}\t{seq}\t{t}\t{ts!r}\t{_copy_text(payload)}\t{hash_}\t{salt_field}\n")
        cur = self._conn.cursor()
        with cur.copy("COPY events (position, session_id, seq, type, ts, payload, hash, salt) FROM STDIN") as copy:
            copy.write("".join(out).encode())
        return cur.rowcount

    def writers_waiting(self) -> bool:
        # A writer waiting for the position lock this transaction holds, as seen right after
        # the last insert (one round trip with its savepoint's release). The server grants
        # queued lock requests in order, so a commit lets the waiters in before the next chunk.
        waiting, self._waiting = self._waiting, False
        return waiting

    def event_id_seq(self, event_id: str) -> int | None:
        row = self._conn.execute("SELECT seq FROM events WHERE session_id = %s AND event_id = %s",
                                 (self._sid, event_id)).fetchone()
        return row[0] if row else None


class _Dropped(Exception):
    """COPY stored fewer rows than it was given (rolled back)."""


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _copy_text(text: str) -> str:
    """``text`` escaped for COPY's text format (backslash, tab, newline, carriage return)."""
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text
