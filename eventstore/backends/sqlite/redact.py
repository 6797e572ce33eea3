"""SQLite's redaction (:class:`~eventstore.backends.capabilities.Redactor`, revision 0320):
the ``redaction`` event and the UPDATE of the event it names in one write transaction, and
the physical erasure of the old bytes afterwards (docs/redaction.md).

The UPDATE passes the ``events_guard_update`` trigger only in the redaction's form, right
after its ``redaction`` event; the search index's row of the event (FTS5, external
content) is deleted with its old text before the UPDATE and written again from the new
one after it, in the same transaction.
"""

from __future__ import annotations

import sqlite3

from eventstore.errors import ConflictError, SessionNotFound
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.line import event_line

from .. import base
from ..capabilities import Redactor
from .statements import HEAD, INSERT_EVENT

REDACTION = "redaction"

# The old text of an indexed event's row (the FTS5 'delete' command needs the text it indexed).
_UNINDEX = ("INSERT INTO events_search (events_search, rowid, text) "
            "SELECT 'delete', position, text FROM events_search_text WHERE position = ?")
_INDEX = "INSERT INTO events_search (rowid, text) SELECT position, text FROM events_search_text WHERE position = ?"


class SQLiteRedactor(Redactor):
    """The redaction of :class:`~.backend.SQLiteBackend`."""

    def redact_event(self, session_id: str, seq: int, old_hash: str, new_payload_json: str,
                     new_salt: bytes | None, redaction_ts: float, redaction_payload_json: str,
                     redaction_salt: bytes, redaction_commit_json: str) -> int:
        def redact(cur: sqlite3.Cursor) -> tuple[int, int, str]:
            row = cur.execute("SELECT position, hash FROM events WHERE session_id = ? AND seq = ?",
                              (session_id, seq)).fetchone()
            if row is None:
                if cur.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise SessionNotFound(session_id)
                raise ConflictError(session_id, seq, "no such event")
            position, stored_hash = row
            if stored_hash != old_hash:
                raise ConflictError(session_id, seq, "the event changed since it was read (another redaction "
                                                     "came first): read it again")
            next_seq, next_position, prev = cur.execute(HEAD, (session_id,)).fetchone()
            prev = genesis_hash(session_id) if prev is None else prev
            hash_ = chain_hash(prev, event_line(REDACTION, next_seq, redaction_ts, redaction_commit_json))
            cur.execute(INSERT_EVENT, (next_position, session_id, next_seq, REDACTION, redaction_ts,
                                       redaction_payload_json, hash_, redaction_salt))
            indexed = _indexed(cur, position)
            if indexed:
                cur.execute(_UNINDEX, (position,))
            cur.execute("UPDATE events SET payload = ?, salt = ? WHERE session_id = ? AND seq = ?",
                        (new_payload_json, new_salt, session_id, seq))
            if cur.rowcount != 1:
                raise base.not_stored(session_id, seq)
            if indexed:
                cur.execute(_INDEX, (position,))
            return next_seq, next_position, hash_

        with self._lock:
            self._connection().execute("PRAGMA secure_delete = ON")  # the old bytes are zeroed as pages change
            try:
                rseq, rposition, rhash = self._transact(redact, session_id)
            finally:
                self._conn.execute("PRAGMA secure_delete = OFF")
        self._remember(session_id, rseq + 1, rposition + 1, rhash)
        return rseq

    def erase_old_versions(self) -> str | None:
        """Zero what still holds the old bytes: the search index's old segments (merged with
        FTS5's ``optimize``, its freed pages zeroed by ``secure_delete``), the freed pages
        (``secure_delete`` zeroes them as they are freed), and the WAL (a ``TRUNCATE``
        checkpoint copies it into the file and empties it)."""
        if self._file is None:
            return None  # in memory: nothing outlives the connection

        def optimize(cur: sqlite3.Cursor) -> None:
            if cur.execute("SELECT 1 FROM sqlite_master WHERE name = 'events_search'").fetchone():
                cur.execute("INSERT INTO events_search (events_search) VALUES ('optimize')")

        with self._lock:
            self._connection().execute("PRAGMA secure_delete = ON")
            try:
                self._transact(optimize)
            finally:
                self._conn.execute("PRAGMA secure_delete = OFF")
            busy, _log, _done = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            return (f"{self.display}: the WAL could not be emptied (another connection is reading or writing): "
                    f"the old bytes may remain in {self.display} and {self.display}-wal until the WAL is copied "
                    f"into the file; close the other connections (SQLite copies it and removes it when the "
                    f"last one closes)")
        return None


def _indexed(cur: sqlite3.Cursor, position: int) -> bool:
    """Whether the search index holds the event at ``position`` (it indexes searchable events
    up to ``events_search_state.indexed_through``)."""
    if cur.execute("SELECT 1 FROM sqlite_master WHERE name = 'events_search_state'").fetchone() is None:
        return False
    through = cur.execute("SELECT indexed_through FROM events_search_state").fetchone()[0]
    return position <= through and cur.execute("SELECT 1 FROM events_search_text WHERE position = ?",
                                                (position,)).fetchone() is not None
