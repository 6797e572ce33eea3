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

revision = "0230"
down_revision = "0220"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing changes on PostgreSQL (its guard is a PL/pgSQL function that reads the head once)."""


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
