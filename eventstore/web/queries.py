"""The viewer's reads that the store's public API does not offer, in SQL.

BACKEND SEAM: this module is the viewer's only database-specific code. Everything else in
:mod:`eventstore.web` reads through the public API (``EventStore.session``,
``EventStore.follow``, ``EventStore.last_position``, ``EventStore.export_jsonl``) or through
the five functions below. Each is one read over the tables and views of docs/schema.md, run
through ``store._read``, in plain SQL but for SQLite's JSON paths (``payload -> '$.key'``;
PostgreSQL's ``jsonb`` writes ``payload -> 'key'``). When the store grows a backend
contract, they move behind it unchanged in meaning:

* :func:`session_rows`, :func:`session_counts`, :func:`state_rows`: what the sessions
  index is built from (every session; each one's counts and first and last times; the
  turn-bound and message events in commit order, without payloads but tool-call ids);
* :func:`event_rows`: a range of one session's events with the payload as its stored JSON text;
* :func:`messages_upto`: the projection (the ``messages`` view) of one session up to a seq.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store import EventStore

__all__ = ["session_rows", "session_counts", "state_rows", "event_rows", "messages_upto"]

_PAGE = 50_000  # rows a query: reads hold no transaction across pages

# Counts and times per session: count, max(seq) and max(position) come from the
# (session_id, seq) index alone; the two joins are index look-ups.
_COUNTS_SQL = """
SELECT a.session_id, a.n, a.last_position, f.ts, l.ts
FROM (SELECT session_id, count(*) AS n, max(seq) AS last_seq, max(position) AS last_position
      FROM events WHERE position <= ? GROUP BY session_id) AS a
JOIN events AS f ON f.session_id = a.session_id AND f.seq = 0
JOIN events AS l ON l.session_id = a.session_id AND l.seq = a.last_seq"""

_STATE_SQL = """
SELECT position, session_id, type,
       CASE type WHEN 'assistant/message' THEN payload -> '$.tool_calls'
                 WHEN 'tool/result' THEN payload ->> '$.tool_call_id' END
FROM events
WHERE position > ? AND position <= ?
  AND type IN ('turn/start', 'turn/end', 'user/message', 'assistant/message', 'tool/result')
ORDER BY position LIMIT ?"""


def session_rows(store: EventStore) -> list[tuple[str, float]]:
    """Every stored session as ``(id, created_at)`` (seconds since the epoch), oldest first
    (ties by id).

    ``store.sessions()`` gives the same plus counts the index computes itself; this skips
    the per-session look-ups (a second for 100,000 sessions)."""
    return store._read("SELECT id, created_at FROM sessions ORDER BY created_at, id")


def session_counts(store: EventStore, upto_position: int) -> list[tuple]:
    """For every session with events at positions ``<= upto_position``:
    ``(session_id, events, last_position, first_ts, last_ts)``, where ``first_ts`` is the
    ts of seq 0 and ``last_ts`` that of its last event. Raises ``DatabaseError``."""
    return store._read(_COUNTS_SQL, (upto_position,))


def state_rows(store: EventStore, upto_position: int) -> Iterator[tuple]:
    """The events that decide a session's state and message counts (turn bounds and the
    three message types) with ``position <= upto_position``, in position order, as
    ``(position, session_id, type, extra)``: ``extra`` is the ``tool_calls`` value's JSON
    text for an ``assistant/message`` (None when absent), the ``tool_call_id`` for a
    ``tool/result``, None otherwise. Read a page at a time. Raises ``DatabaseError``."""
    after = 0
    while True:
        rows = store._read(_STATE_SQL, (after, upto_position, _PAGE))
        yield from rows
        if len(rows) < _PAGE:
            return
        after = rows[-1][0]


def event_rows(store: EventStore, session_id: str, after_seq: int, limit: int) -> list[tuple]:
    """Up to ``limit`` events of ``session_id`` with ``seq > after_seq``, in seq order, as
    ``(seq, type, ts, payload)`` with ``payload`` the stored JSON text of the event's
    payload object (exactly as export writes it). Raises ``DatabaseError``."""
    return store._read("SELECT seq, type, ts, payload FROM events WHERE session_id = ? AND seq > ? "
                       "ORDER BY seq LIMIT ?", (session_id, after_seq, limit))


def messages_upto(store: EventStore, session_id: str, upto_seq: int) -> str:
    """The projection of ``session_id`` restricted to events with ``seq <= upto_seq``: the
    chat messages array as JSON text, what the model was sent at that point. Raises
    ``DatabaseError``."""
    rows = store._read("SELECT message FROM messages WHERE session_id = ? AND seq <= ? ORDER BY seq",
                       (session_id, upto_seq))
    return "[" + ",".join(r[0] for r in rows) + "]"
