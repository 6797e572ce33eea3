"""The database schema, defined once with SQLAlchemy Core.

Tables (see docs/schema.md for the column-by-column description):

* ``sessions(id, created_at, meta)``: one row per session; ``created_at`` is seconds since
  the epoch (float) when the session was first stored; ``meta`` is the JSON object text of
  the ``session/meta`` line's keys other than ``type`` and ``id`` (export writes them back).
* ``events(position, session_id, seq, type, ts, payload, hash, event_id)``: the append-only log.
  ``(session_id, seq)`` is the key (``seq`` = 0, 1, 2, ... per session with no gaps);
  ``position`` is the global position, an explicit ``INTEGER PRIMARY KEY`` that only grows,
  in commit order, and is kept by ``VACUUM``; ``ts`` is seconds since the epoch (float);
  ``payload`` is the JSON object text of every other key, exactly as ``JSON.stringify``
  writes it (see :mod:`eventstore.jsonl`); ``hash`` chains the event to the previous one of
  its session (:func:`eventstore.jsonl.chain_hash`); ``event_id`` is a generated column,
  the payload's optional ``event_id`` key (the idempotency key), unique per session.

:data:`GUARDS` are the triggers that make the tables append-only for every SQL statement
(UPDATE, DELETE, INSERT with any conflict clause, an INSERT that gaps or repeats a seq);
the migrations install them and a test checks that they exist at head.

The payload check of ``events_guard_insert`` parses the payload only when its text matches
``*"[tse\\][ysev\\u]*``: a top-level key ``type``, ``seq``, ``ts`` or ``event_id`` is written
as a quote, then ``t``/``s``/``e`` or an escape (``\\u``), then ``y``/``s``/``e``/``v`` or an
escape, so the pattern misses none of them; one ``GLOB`` looks at the text once (as
``json_each`` did: a 20 MB payload is not copied again) and skips the parse for most
payloads (about 3 microseconds an insert; migration 0003).
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Computed,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    or_,
)

#: The Alembic revision this package's code expects; opening a database upgrades to it.
SCHEMA_REVISION = "0100"

#: Older revisions that a read-only open reads as they are, without asking for an upgrade:
#: every read, view and ``verify`` gives the same answers (0007 rewrote CHECK constraints,
#: which apply to writes). What 0100 adds (the ``usage`` view, the search index) is missing
#: from such a file until a writable open upgrades it: ``eventstore search`` says so, and
#: ``eventstore sessions`` shows no token totals.
READ_COMPATIBLE_REVISIONS = frozenset({"0006", "0007"})

#: Event types that the projection turns into chat messages.
MESSAGE_TYPES = ("user/message", "assistant/message", "tool/result")

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("meta", Text, nullable=False, server_default="{}"),
    CheckConstraint("typeof(id) = 'text' AND id <> ''", name="sessions_id_not_empty"),
    CheckConstraint("json_valid(meta) AND json_type(meta) = 'object'", name="sessions_meta_object"),
)

events = Table(
    "events",
    metadata,
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("session_id", Text, ForeignKey("sessions.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("ts", Float, nullable=False),
    Column("payload", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("event_id", Text, Computed("payload ->> '$.event_id'", persisted=False)),
    UniqueConstraint("session_id", "seq", name="events_key"),
    # Written with comparisons and CAST, not typeof() and json_type(): the function calls
    # cost about 2,200 CPU instructions an event of a batched append (migration 0007, which
    # also says why each refuses exactly what the typeof() form refused).
    CheckConstraint("seq >= 0 AND CAST(seq AS INTEGER) = seq", name="events_seq_integer"),
    CheckConstraint("type > '' AND type < x'' AND type <> 'session/meta'", name="events_type_text"),
    CheckConstraint("ts BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308", name="events_ts_finite"),
    CheckConstraint("json_valid(payload) AND (payload >= '{' AND payload < '|' OR json_type(payload) = 'object')",
                    name="events_payload_object"),
    CheckConstraint("length(hash) = 64", name="events_hash_sha256"),
)

# Idempotent appends: a retried append with the same event_id finds the stored event.
Index(
    "events_event_id",
    events.c.session_id,
    events.c.event_id,
    unique=True,
    sqlite_where=events.c.event_id.is_not(None),
)

# The projection reads only message events: a partial index keeps its cost independent of
# how many chunks and other events a session holds.
Index(
    "events_messages",
    events.c.session_id,
    events.c.seq,
    # OR, not IN: SQLite tests an IN list of 3+ constants against a temporary b-tree built
    # for every INSERT (migration 0005). Queries must repeat this term to use the index.
    sqlite_where=or_(*(events.c.type == t for t in MESSAGE_TYPES)),
)

_REFUSE = "SELECT RAISE(ABORT, 'eventstore: {}')"

#: Triggers that make ``events`` and ``sessions`` append-only. Names are stable (verify checks them).
GUARDS = {
    "events_guard_insert": f"""
CREATE TRIGGER events_guard_insert BEFORE INSERT ON events
BEGIN
  {_REFUSE.format("unknown session")}
    WHERE NEW.seq = 0 AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id);
  {_REFUSE.format("seq is not the next seq of its session")}
    WHERE NEW.seq IS NOT coalesce((SELECT seq FROM events WHERE session_id = NEW.session_id
                                   ORDER BY seq DESC LIMIT 1) + 1, 0);
  {_REFUSE.format("position must be the next position, the largest stored one + 1 (give it explicitly)")}
    WHERE NEW.position IS NOT coalesce((SELECT position FROM events ORDER BY position DESC LIMIT 1) + 1, 1);
  {_REFUSE.format("payload must be the text of a JSON object as JSON.stringify writes it")}
    WHERE NOT (NEW.payload >= '{{!' AND NEW.payload < '|') OR (NEW.payload > '{{}}' AND NEW.payload < '{{~');
  {_REFUSE.format("payload holds a key of the line itself (type, seq, ts) or a non-string event_id, "
                  "or spells event_id so that the event_id column does not see it (escaped, twice)")}
    WHERE NEW.payload GLOB '*"[tse\\][ysev\\u]*'
      AND EXISTS (SELECT 1 FROM json_each(NEW.payload)
                  WHERE key IN ('type', 'seq', 'ts')
                     OR (key = 'event_id' AND (type <> 'text' OR value IS NOT NEW.event_id)));
  {_REFUSE.format("event_id is already stored in this session")}
    WHERE NEW.event_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND event_id = NEW.event_id);
END""",
    "events_guard_update": f"""
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
BEGIN {_REFUSE.format("events are append-only: UPDATE refused")}; END""",
    "events_guard_delete": f"""
CREATE TRIGGER events_guard_delete BEFORE DELETE ON events
BEGIN {_REFUSE.format("events are append-only: DELETE refused")}; END""",
    "sessions_guard_insert": f"""
CREATE TRIGGER sessions_guard_insert BEFORE INSERT ON sessions
BEGIN
  {_REFUSE.format("session already exists")}
    WHERE EXISTS (SELECT 1 FROM sessions WHERE id = NEW.id);
  {_REFUSE.format("a stored session has this rowid (sessions are append-only)")}
    WHERE EXISTS (SELECT 1 FROM sessions WHERE rowid = NEW.rowid);
  {_REFUSE.format("created_at must be a number of seconds since the epoch")}
    WHERE typeof(NEW.created_at) NOT IN ('real', 'integer');
END""",
    "sessions_guard_rowid": f"""
CREATE TRIGGER sessions_guard_rowid AFTER INSERT ON sessions
WHEN NEW.rowid < 1
BEGIN {_REFUSE.format("a session rowid must be positive (leave it out)")}; END""",
    "sessions_guard_update": f"""
CREATE TRIGGER sessions_guard_update BEFORE UPDATE ON sessions
BEGIN {_REFUSE.format("sessions are append-only: UPDATE refused")}; END""",
    "sessions_guard_delete": f"""
CREATE TRIGGER sessions_guard_delete BEFORE DELETE ON sessions
BEGIN {_REFUSE.format("sessions are append-only: DELETE refused")}; END""",
}
