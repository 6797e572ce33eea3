"""The one in-place change the log accepts: a redaction (SQLite's rule).

Revision ID: 0320
Revises: 0310
Create Date: 2026-12-07

A redaction (docs/redaction.md) appends a ``redaction`` event to a session and, in the same
transaction, replaces named fields of one earlier event's payload with the marker
``"[redacted: REASON]"`` and replaces its salt by the salts of the keys it keeps (or NULL). ``events_guard_update`` is created again so
that it accepts exactly that UPDATE and refuses every other one, as before, with ES004:

* no column but ``payload`` and ``salt`` changes, and ``salt`` becomes NULL or, where the
  event had one, the key salts it keeps: a JSON object (UTF-8), holding only entries of the
  old one when that was already such an object (their digests are checked by verify);
* the event is not a ``redaction`` event (the proof of another redaction);
* the session's last event is a ``redaction`` event that names this event by its seq
  (``event_seq``: a payload holds no ``seq`` key) and its stored hash, holds 1 to 32 ``paths`` (each a JSON array from a top-level key: object
  keys as strings, array indexes as integers), a ``reason`` string and, for a salted event,
  its ``digests``;
* every path leads to a value of the old payload, and the new payload is exactly the text
  SQLite's ``json_set`` makes of the old one with each of those values set to the marker
  (``json_set`` keeps the other keys' text, and their order, as stored).

(A trigger body cannot hold a common table expression, so the paths are applied by one
``json_set`` of 32 path arguments: the paths past the redaction's own repeat its first.)
DELETE stays refused. ``sessions`` and ``importing`` are unchanged.

PostgreSQL: its rule (a ``SECURITY DEFINER`` function for the ``redactor`` role) is in the
PostgreSQL revision of the same number.
"""
from alembic import op

revision = "0320"
down_revision = "0310"
branch_labels = None
depends_on = None

MAX_PATHS = 32


def _path(i: int) -> str:
    """The SQLite JSON path text of the redaction event's path ``i`` (NULL when it has none)."""
    return ("('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' "
            "ELSE '.\"' || e.atom || '\"' END, '') "
            f"FROM json_each(r.payload, '$.paths[{i}]') AS e))")


_SETS = ", ".join(f"coalesce({_path(i)}, {_path(0)}), '[redacted: ' || json_extract(r.payload, '$.reason') || ']'"
                  for i in range(MAX_PATHS))

TRIGGER = f"""
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
WHEN NOT coalesce((
  SELECT NEW.position IS OLD.position AND NEW.session_id IS OLD.session_id AND NEW.seq IS OLD.seq
     AND NEW.type IS OLD.type AND NEW.ts IS OLD.ts AND NEW.hash IS OLD.hash
     AND CASE WHEN NEW.salt IS NULL THEN 1
              WHEN OLD.salt IS NULL OR NOT json_valid(CAST(NEW.salt AS TEXT)) THEN 0
              WHEN json_type(CAST(NEW.salt AS TEXT)) <> 'object' THEN 0
              WHEN length(OLD.salt) = 16 THEN 1
              WHEN NOT json_valid(CAST(OLD.salt AS TEXT)) THEN 0
              ELSE NOT EXISTS (SELECT 1 FROM json_each(CAST(NEW.salt AS TEXT)) AS n WHERE NOT EXISTS (
                     SELECT 1 FROM json_each(CAST(OLD.salt AS TEXT)) AS o WHERE o.key = n.key AND o.value = n.value))
         END
     AND OLD.type <> 'redaction'
     AND r.type = 'redaction' AND r.seq > OLD.seq
     AND json_type(r.payload, '$.event_seq') = 'integer' AND json_extract(r.payload, '$.event_seq') = OLD.seq
     AND json_extract(r.payload, '$.hash') IS OLD.hash
     AND json_type(r.payload, '$.reason') = 'text'
     AND (OLD.salt IS NULL OR json_type(r.payload, '$.digests') = 'object')
     AND json_type(r.payload, '$.paths') = 'array'
     AND json_array_length(r.payload, '$.paths') BETWEEN 1 AND {MAX_PATHS}
     AND NOT EXISTS (SELECT 1 FROM json_each(r.payload, '$.paths') AS p
                     WHERE p.type <> 'array' OR json_array_length(p.value) < 1
                        OR json_type(p.value, '$[0]') <> 'text'
                        OR EXISTS (SELECT 1 FROM json_each(p.value) AS e
                                   WHERE NOT (e.type = 'integer' AND e.atom >= 0
                                              OR e.type = 'text' AND instr(e.atom, '"') = 0)))
     AND NOT EXISTS (SELECT 1 FROM json_each(r.payload, '$.paths') AS p
                     WHERE json_type(OLD.payload, '$' || (SELECT group_concat(CASE WHEN e.type = 'integer'
                                THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '')
                                FROM json_each(p.value) AS e)) IS NULL)
     AND NEW.payload IS json_set(OLD.payload, {_SETS})
  FROM events AS r WHERE r.session_id = OLD.session_id ORDER BY r.seq DESC LIMIT 1), 0)
BEGIN SELECT RAISE(ABORT, 'ES004: events are append-only: UPDATE refused'); END"""

OLD_TRIGGER = """
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'ES004: events are append-only: UPDATE refused'); END"""


def upgrade() -> None:
    op.execute("DROP TRIGGER events_guard_update")
    op.execute(TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER events_guard_update")
    op.execute(OLD_TRIGGER)
