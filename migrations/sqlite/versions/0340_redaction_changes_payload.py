"""A redaction's UPDATE must change the payload (SQLite's rule).

Revision ID: 0340
Revises: 0320
Create Date: 2026-12-07

0320's ``events_guard_update`` accepts a redaction's UPDATE whenever the session's last
event is the ``redaction`` event that names the row: not only in the redaction's own
transaction. After a redaction committed, and while its event is still the session's
last, any connection could replay the same UPDATE: the same markers leave the payload as
it is, and ``salt = NULL`` was accepted, dropping the key salts a later verify needs (it
reports "stored hash does not chain"). The trigger is created again with one more
condition, ``NEW.payload IS NOT OLD.payload``: a redaction always changes the payload (the
store refuses one that would not: every path already redacted, or already reading as
this marker), and a replay after its commit never can, since the payload already holds
the markers. Everything else is 0320's text, copied (a revision never imports another).

PostgreSQL: its revision of the same number changes nothing (its guard ties the UPDATE to
the transaction that inserted the redaction event).
"""
from alembic import op

revision = "0340"
down_revision = "0320"
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


def _trigger(changes: str) -> str:
    """``events_guard_update`` as 0320 made it, with ``changes`` (a condition) after its first
    line of conditions."""
    return f"""
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
WHEN NOT coalesce((
  SELECT NEW.position IS OLD.position AND NEW.session_id IS OLD.session_id AND NEW.seq IS OLD.seq
     AND NEW.type IS OLD.type AND NEW.ts IS OLD.ts AND NEW.hash IS OLD.hash{changes}
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


TRIGGER = _trigger("\n     AND NEW.payload IS NOT OLD.payload")
OLD_TRIGGER = _trigger("")  # 0320's


def upgrade() -> None:
    op.execute("DROP TRIGGER events_guard_update")
    op.execute(TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER events_guard_update")
    op.execute(OLD_TRIGGER)
