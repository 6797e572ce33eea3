"""The SQLite insert guard reads one row for the head of a batch, not two.

Revision ID: 0230
Revises: 0220
Create Date: 2026-12-02

``events_guard_insert`` refuses exactly what it refused before (the same rows, the same
error codes, in the same order when several apply), at about 2,000 fewer CPU instructions
per inserted event (tools/batch_icount.py, docs/benchmarks.md):

* ES002 (seq not the session's next) and ES003 (position not the next) read the session's
  last seq through the ``(session_id, seq)`` index and the largest position through the
  table: two cursors opened per row. Now one read of the table's last row (the largest
  position) proves both when that row is the previous event of the same session, which
  is every event of a batch but its session's first; otherwise the two reads of before
  decide, in the order of before (ES001, ES002, ES003). See the comment on ``GUARD``.
* The six statements become two ``SELECT CASE`` (the conditions in their order of before:
  the first that holds raises), and ES008 tests its two allowed ranges directly (the same
  set of texts: two comparisons for a payload that starts with ``{"``, not three).

PostgreSQL: nothing changes (its guard is a PL/pgSQL function that reads the head once).
"""
from alembic import op

revision = "0230"
down_revision = "0220"
branch_labels = None
depends_on = None

# Why the first statement may skip ES001-ES003 when its WHERE is false, i.e. when the table's
# last row L (largest position) has session_id = NEW.session_id, seq + 1 = NEW.seq and
# position + 1 = NEW.position (all three comparisons true, so none is NULL):
# * ES003 asks NEW.position IS NOT max(position) + 1: L.position is max(position).
# * ES002 asks NEW.seq IS NOT (the session's largest seq) + 1. The guard has only ever let
#   in an event whose seq is its session's largest + 1 and whose position is the largest + 1
#   (events are never updated or deleted), so within a session seq and position grow
#   together and the session's row with the largest position, L, holds its largest seq.
#   (verify reports a log where this does not hold: "events out of commit order"; only
#   SQL with the guards removed can write one.)
# * ES001 asks NEW.seq = 0 AND the session is unknown: NEW.seq = L.seq + 1 >= 1 (a stored
#   seq is >= 0: the guard lets in 0 or a stored seq + 1).
# The comparisons are those of ES002/ES003 (seq + 1 and position + 1 carry no affinity, as
# coalesce(... + 1, ...) did): a seq given as '5x' equals no integer here either.
# Otherwise (an empty table: the subquery gives no row, the comparison NULL; the first event
# of a session; another session's event last; a wrong seq or position) the WHERE holds and
# the CASE runs the checks of before, in their order.
GUARD = r"""
CREATE TRIGGER events_guard_insert BEFORE INSERT ON events
BEGIN
  SELECT CASE
      WHEN NEW.seq = 0 AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id)
        THEN RAISE(ABORT, 'ES001: unknown session')
      WHEN NEW.seq IS NOT coalesce((SELECT seq FROM events WHERE session_id = NEW.session_id
                                    ORDER BY seq DESC LIMIT 1) + 1, 0)
        THEN RAISE(ABORT, 'ES002: seq is not the next seq of its session')
      WHEN NEW.position IS NOT coalesce((SELECT position FROM events ORDER BY position DESC LIMIT 1) + 1, 1)
        THEN RAISE(ABORT, 'ES003: position must be the next position, the largest stored one + 1 (give it explicitly)')
    END
    WHERE ((SELECT session_id, seq + 1, position + 1 FROM events ORDER BY position DESC LIMIT 1)
           = (NEW.session_id, NEW.seq, NEW.position)) IS NOT 1;
  SELECT CASE
      WHEN NOT (NEW.payload BETWEEN '{!' AND '{}' OR NEW.payload >= '{~' AND NEW.payload < '|')
        THEN RAISE(ABORT, 'ES008: payload must be the text of a JSON object as JSON.stringify writes it')
      WHEN NEW.payload GLOB '*"[tse\][ysev\u]*'
           AND EXISTS (SELECT 1 FROM json_each(NEW.payload)
                       WHERE key IN ('type', 'seq', 'ts')
                          OR (key = 'event_id' AND (type <> 'text' OR value IS NOT NEW.event_id)))
        THEN RAISE(ABORT, 'ES009: payload holds a key of the line itself (type, seq, ts) or a non-string event_id, or spells event_id so that the event_id column does not see it (escaped, twice)')
      WHEN NEW.event_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND event_id = NEW.event_id)
        THEN RAISE(ABORT, 'ES007: event_id is already stored in this session')
    END;
END"""


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql("DROP TRIGGER events_guard_insert")
    bind.exec_driver_sql(GUARD)  # as written: no bind parameters


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
