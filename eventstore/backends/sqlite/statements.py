"""The SQL of the hot paths (append, reads, following) and the error codes of SQLite's refusals.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections.abc import Collection

from .. import base

__all__ = ["MAX_CURSOR", "error_code"]

# Appends read the session's head (next seq, next position, last hash) and insert with
# plain VALUES, inside one BEGIN IMMEDIATE transaction; the guard trigger re-checks seq and
# position. (An INSERT ... SELECT ... RETURNING computing all three in SQL costs more:
# temporary b-trees and a Python SQL-function call per append.)
INSERT_EVENT = ("INSERT INTO events (position, session_id, seq, type, ts, payload, hash, salt) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
HEAD = """SELECT coalesce(max(seq) + 1, 0), (SELECT coalesce(max(position), 0) + 1 FROM events),
                  (SELECT hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)
           FROM events WHERE session_id = ?1"""
BY_EVENT_ID = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND event_id = ?"
NEXT_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?"
# Unfinished imports (the importing table, revision 0220): their sessions are hidden, and
# readers of positions stop before the first position of each whose owner is not known dead
# (?2: a JSON array of dead owners). One statement: barrier and rows in one snapshot.
_HIDDEN = "session_id NOT IN (SELECT session_id FROM importing)"
_BARRIER = ("coalesce((SELECT min(first_position) FROM importing WHERE owner NOT IN "
            "(SELECT value FROM json_each(?2))), 9223372036854775807)")
STORE_ROWS = ("SELECT position, session_id, seq, type, ts, payload FROM events "
               f"WHERE position > ?1 AND position < {_BARRIER} AND {_HIDDEN} ORDER BY position LIMIT ?3")
LAST_POSITION = f"SELECT min((SELECT coalesce(max(position), 0) FROM events), {_BARRIER} - 1)"
IMPORTS = "SELECT session_id, first_position, owner, started_at FROM importing ORDER BY first_position"
SESSION_ROWS = ("SELECT position, session_id, seq, type, ts, payload FROM events "
                 "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")

#: The largest integer SQLite binds (64-bit): a cursor past it reads as at it.
MAX_CURSOR = 2**63 - 1

# append inserts up to 100 rows per statement, in groups of the sizes _GROUPS: a batch's
# hundreds, tens and units (123 events: 100, 20 and 3 rows), so a batch of a round size
# (6, 10, 50, 100) is one statement, one under 200 at most three, and 19
# statements of each kind are prepared whatever the batch sizes (well inside the
# connection's statement cache). SQLite's per-statement work (a statement journal for the
# guard trigger's ABORT, the program's setup) is then paid once per group instead of once
# per event. Position and seq are the first row's plus a constant; each row binds its
# type, ts, payload, hash and salt. A batch of one type and one ts
# (append_many's usual: ts defaults to one time.time()) binds those two once per statement
# (_INSERT_SHARED), each row its payload, hash and salt: fewer the parameters to convert and copy.
_GROUPS = (*range(1, 10), *range(10, 100, 10), 100)


class _Inserts(dict):
    """``{n: the INSERT of n rows}`` for n in _GROUPS, each spelled at its first use (not at
    eventstore's start-up); ``row(k)`` spells the VALUES of row k."""

    def __init__(self, row) -> None:
        super().__init__()
        self.row = row

    def __missing__(self, n: int) -> str:
        text = self[n] = ("INSERT INTO events (position, session_id, seq, type, ts, payload, hash, salt) VALUES "
                          + ",".join(map(self.row, range(n))))
        return text


_INSERT_ROWS = _Inserts(lambda k: f"(?1 + {k}, ?2, ?3 + {k}, ?{5 * k + 4}, ?{5 * k + 5}, ?{5 * k + 6}, "
                                  f"?{5 * k + 7}, ?{5 * k + 8})")
_INSERT_SHARED = _Inserts(lambda k: f"(?1 + {k}, ?2, ?3 + {k}, ?4, ?5, ?{3 * k + 6}, ?{3 * k + 7}, ?{3 * k + 8})")


def import_owners(dead_owners: Collection[str]) -> str:
    """``dead_owners`` as the JSON array text the barrier's ``json_each`` reads."""
    if not dead_owners:
        return "[]"
    import orjson  # (imported when used: eventstore's start-up)

    return orjson.dumps(list(dead_owners)).decode()


def error_code(e: sqlite3.Error) -> str | None:
    """The eventstore error code (``ES001``...) of a refusal by one of the guard triggers,
    or None: the error is SQLite's ``SQLITE_CONSTRAINT_TRIGGER`` and its message starts with
    the code and a colon (the RAISE messages of the migrations)."""
    if getattr(e, "sqlite_errorname", None) == "SQLITE_CONSTRAINT_TRIGGER":
        message = e.args[0] if e.args else ""
        if message[:2] == "ES" and message[5:6] == ":":
            return message[:5]
    return None


class StaleHead(Exception):
    """An append's first statement was refused: maybe because the cached head was stale
    (see :meth:`SQLiteBackend._at_head`)."""

    def __init__(self, error: sqlite3.IntegrityError):
        self.error = error


def insert_rows(cur: sqlite3.Cursor, sid: str, seq0: int, pos0: int, rows: list,
                 shared: tuple[str, float] | None = None) -> None:
    """Insert ``rows`` at seqs ``seq0...`` and positions ``pos0...``: the flat ``[type, ts,
    payload_json, hash, salt, ...]`` of :func:`eventstore.log.chain.chain_rows`, or with
    ``shared`` (the ``(type, ts)`` of every row) its ``pairs`` form ``[payload_json, hash, salt, ...]``.
    Raises :class:`StaleHead` when the first statement is refused (nothing of the batch is
    stored then), sqlite3 errors for any later one."""
    width, statements, head = (5, _INSERT_ROWS, ()) if shared is None else (3, _INSERT_SHARED, shared)
    done = 0
    total = len(rows) // width
    while done < total:
        n = _GROUPS[bisect_right(_GROUPS, total - done) - 1]
        params = [pos0 + done, sid, seq0 + done, *head]
        params += rows[width * done:width * (done + n)]
        try:
            cur.execute(statements[n], params)
        except sqlite3.IntegrityError as e:
            if done == 0:
                raise StaleHead(e) from None
            raise
        if cur.rowcount != n:  # a trigger's RAISE(IGNORE) drops rows without an error
            raise base.not_stored(sid, seq0 + done, n)
        done += n
