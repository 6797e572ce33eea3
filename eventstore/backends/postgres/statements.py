"""The SQL of the hot paths and the translation of refusals (by SQLSTATE and constraint name).
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from .. import base
from ..base import Refusal
from .connection import first_line

#: The position lock that the insert guard takes (revision 0250): a table lock in a mode that
#: only roles with UPDATE on the (empty) table may take, i.e. the writers, released at commit.
LOCK_POSITIONS = "LOCK TABLE events_position_lock IN EXCLUSIVE MODE"
#: ``pg_advisory_xact_lock`` key (the bytes ``esmigrat`` as an integer) that makes concurrent
#: first opens migrate once.
MIGRATION_LOCK = 7310306919626989940

# The searchable text and vector of an event of ``events AS e`` (revision 0280's functions, as
# the index's guard and the events_search_text view compute them).
SEARCH_TEXT = "es_event_text(e.type, e.payload)"
SEARCH_VECTOR = "es_event_vector(e.type, e.payload)"
# The searchable events (those of the events_search_text view) past the index's bound, up
# to the last position read with it (:data:`SEARCH_BOUNDS`), as ``events AS e``. (Bounded on
# both sides: without statistics of events, as right after an import, the planner takes
# ``position > bound`` alone for a third of the table and scans all of it.)
PAST_BOUND = ("events_search_text AS x JOIN events AS e ON e.position = x.position "
              "WHERE x.position > %(through)s AND x.position <= %(last)s")
#: What a search reads first, in one statement: the index's bound, the last stored position,
#: and whether some import is unfinished (its sessions are hidden).
SEARCH_BOUNDS = ("SELECT st.indexed_through, (SELECT coalesce(max(e.position), 0) FROM events AS e), "
                 "EXISTS (SELECT 1 FROM importing) FROM events_search_state AS st")

#: The catch-up's insert of the searchable events at positions in ``(%s, %s]``: the guard
#: trigger fills in each row's vector from its event (revisions 0250, 0280), so none is computed here.
CATCH_UP = ("INSERT INTO events_search (position, session_id, type, tsv) "
             "SELECT position, session_id, type, ''::tsvector FROM events_search_text "
             "WHERE position > %s AND position <= %s "
             "ORDER BY position ON CONFLICT (position) DO NOTHING")

#: The channel the schema's statement trigger NOTIFYs after every INSERT into events.
CHANNEL = "eventstore_events"

#: The ``durability`` values (see docs/concurrency.md, "Durability"). Every append commits
#: asynchronously (``synchronous_commit = off`` on the write connection), so that the WAL
#: flush is not inside the position lock. "normal" (the default) and "full" are the same here:
#: an append returns once the WAL is flushed past its commit, as the server's
#: ``synchronous_commit`` says (``on`` where the server is set to ``off``): inside the commit
#: when the position lock was free (:data:`INSERT_ONE_FULL`), else after it, outside the lock
#: (:data:`FLUSH`); a server crash loses no acknowledged append. LOSSY, opt-in, returns right
#: after the commit: a server crash may lose the appends acknowledged in its last moments
#: (about 3 x ``wal_writer_delay``, 600 ms by default), never corrupts, gaps or reorders what
#: is kept (recovery replays a prefix of the WAL).
LOSSY = "may-lose-recent"
DURABILITY = ("normal", "full", LOSSY)
# A one-statement transaction that writes a WAL record (an empty logical-decoding message,
# prefix "eventstore") and commits synchronously: its commit waits until the WAL is flushed
# (and replicated, per the level) up to its own record, so past every commit before it.
# Concurrent waiters share one flush (group commit).
FLUSH = "SELECT pg_logical_emit_message(true, 'eventstore', '') FROM set_config('synchronous_commit', %s, true)"
#: Makes the current transaction's own commit wait for the flush at the given level: for a
#: transaction whose role may not call FLUSH's function (a redaction), where watching the WAL
#: position would wait for the WAL writer's next round (``wal_writer_delay``).
DURABLE_COMMIT = "SELECT set_config('synchronous_commit', %s, true)"

#: How long a follower tries to connect again to a server that went away (seconds), and
#: how long it waits between tries.
RECONNECT_SECONDS = 60.0
RECONNECT_PAUSE = 0.5

#: ``statement_timeout`` of ``eventstore sql`` queries (seconds).
QUERY_TIMEOUT = 30.0

#: The triggers that make events and sessions append-only, by table (verify checks them).
GUARDS = {
    "events": ("events_guard_insert", "events_guard_check", "events_guard_update", "events_guard_delete",
               "events_guard_truncate"),
    "sessions": ("sessions_guard_update", "sessions_guard_delete", "sessions_guard_truncate"),
    # (an importing row may hide only a session being created, and change only by its importer)
    "importing": ("importing_guard_insert", "importing_guard_update", "importing_guard_delete",
                  "importing_guard_truncate"),
    # (derived from the log: a row is what the log says of its position; revision 0250)
    "events_search": ("events_search_guard_insert", "events_search_guard_update", "events_search_guard_delete",
                      "events_search_guard_truncate"),
    "events_search_state": ("events_search_state_guard_insert", "events_search_state_guard_update",
                            "events_search_state_guard_delete", "events_search_state_guard_truncate"),
    "events_position_lock": ("events_position_lock_guard_insert", "events_position_lock_guard_truncate"),
}

EVENT_COLUMNS = "position, session_id, seq, type, ts, payload"
INSERT_ONE = ("INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) "
               "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING position")
# A batch: one statement text for every size (the server prepares it once).
INSERT_MANY = ("INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) "
                "SELECT %s, %s + u.i - 1, u.type, u.ts, u.payload, u.hash, u.salt "
                "FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[], %s::bytea[]) "
                "WITH ORDINALITY AS u(type, ts, payload, hash, salt, i) ORDER BY u.i RETURNING position")
# A durable append (durability other than LOSSY), one event at the cached head: the INSERT
# first tries the position lock.
# When the lock is free, the transaction commits at the durable level, so the commit flushes
# inside the lock within the INSERT's one round trip, as any application's durable INSERT
# does; RETURNING says so. When another append holds it, the commit stays asynchronous and
# the flush follows outside the lock (:data:`FLUSH`), shared with the appends waiting then.
# (The guard trigger takes the lock again, a no-op for its holder, and reads the heads after.)
INSERT_ONE_FULL = ("INSERT INTO events (session_id, seq, type, ts, payload, hash, salt) "
                    "SELECT %s, %s, %s, %s, %s, %s, %s::bytea FROM (SELECT set_config('synchronous_commit', "
                    "CASE WHEN es_try_position_lock() THEN %s ELSE 'off' END, true)) AS d "
                    "RETURNING position, current_setting('synchronous_commit') <> 'off'")
IDLE_SQL = psycopg.pq.TransactionStatus.IDLE  # (after a statement: it committed on its own)
LOCK_HEAD = "SELECT next_seq, last_hash FROM es_lock_head(%s)"
NEXT_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = %s"



def violated_constraint(e: psycopg.Error) -> str | None:
    return e.diag.constraint_name


# Refusals that PostgreSQL reports as constraint violations, by constraint name.
_CONSTRAINT_CODES = {
    base.SESSIONS_PKEY: base.SESSION_EXISTS,
    base.EVENT_ID_INDEX: base.EVENT_ID_TAKEN,
    "events_payload_object": base.PAYLOAD_NOT_CANONICAL,
}


def refusal_of(e: psycopg.Error) -> Refusal:
    """The database's refusal of a row, as a :class:`Refusal` with the contract's code.
    Raises ``e`` itself when it refuses the role, not the row (no privilege)."""
    if isinstance(e, pg_errors.InsufficientPrivilege):
        raise e
    code = e.sqlstate
    if not (code or "").startswith("ES"):
        code = _CONSTRAINT_CODES.get(violated_constraint(e)) if isinstance(e, pg_errors.IntegrityError) else None
    return Refusal(code, e.diag.message_primary or first_line(e))



# Unfinished imports (the importing table, revision 0220): hidden sessions, and the barrier
# before the first position of each whose owner is not known dead (see Backend.events_after).
_BARRIER = ("coalesce((SELECT min(first_position) FROM importing WHERE owner <> ALL(%s::text[])), "
            "9223372036854775807)")
STORE_ROWS = (f"SELECT {EVENT_COLUMNS} FROM events WHERE position > %s AND position < {_BARRIER} "
               "AND session_id NOT IN (SELECT session_id FROM importing) ORDER BY position LIMIT %s")
LAST_POSITION = f"SELECT least((SELECT coalesce(max(position), 0) FROM events), {_BARRIER} - 1)"
IMPORTS = "SELECT session_id, first_position, owner, started_at FROM importing ORDER BY first_position"
#: The advisory lock class (first key) of import locks; the second is hashtext(session id).
IMPORT_LOCK_CLASS = 1702063169
# (the lock of the owner's own session: another lock of that class held by a process that
# got the dead owner's pid makes no import look alive)
OWNER_ALIVE = (f"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = %s "
                f"AND classid = {IMPORT_LOCK_CLASS}::oid AND objsubid = 2 AND granted "
                "AND objid IN (SELECT hashtext(i.session_id)::oid FROM importing AS i WHERE i.owner = %s))")

# The viewer's index (see SessionIndex.session_counts and SessionIndex.state_rows). The payload is
# text: es_field gives a value's JSON text as stored, es_json parses it (both in the baseline).
# What the model saw at a seq: the last compaction up to it cuts (see migration 0270).
EXPORT_BOUNDED = """
SELECT type, seq, ts, payload FROM (
  SELECT type, seq, ts, payload,
         sum(octet_length(payload)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - octet_length(payload) AS before
  FROM (SELECT type, seq, ts, payload FROM events WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s) AS page
) AS w WHERE before < %s ORDER BY seq"""


MESSAGES_UPTO = """
SELECT message FROM messages_uncut
WHERE session_id = %s AND seq <= %s
  AND seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = %s AND c.type = 'compaction/boundary'
                        AND c.seq <= %s ORDER BY c.seq DESC LIMIT 1), -1)
ORDER BY seq"""


COUNTS_SQL = """
SELECT a.session_id, a.n, a.last_position, f.ts, l.ts
FROM (SELECT session_id, count(*) AS n, max(seq) AS last_seq, max(position) AS last_position
      FROM events WHERE position <= %s AND session_id NOT IN (SELECT session_id FROM importing)
      GROUP BY session_id) AS a
JOIN events AS f ON f.session_id = a.session_id AND f.seq = 0
JOIN events AS l ON l.session_id = a.session_id AND l.seq = a.last_seq"""

STATE_SQL = """
SELECT position, session_id, type,
       CASE WHEN type IN ('assistant/message', 'assistant/part') THEN es_field(payload, 'tool_calls')
            WHEN type = 'tool/result' THEN es_json(payload) ->> 'tool_call_id' END
FROM events
WHERE position > %s AND position <= %s
  AND type IN ('turn/start', 'turn/end', 'user/message', 'assistant/message', 'tool/result', 'assistant/part')
  AND session_id NOT IN (SELECT session_id FROM importing)
ORDER BY position LIMIT %s"""
