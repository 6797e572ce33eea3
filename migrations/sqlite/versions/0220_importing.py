"""The importing table: sessions whose import has not finished yet.

Revision ID: 0220
Revises: 0210
Create Date: 2026-12-02

A large import commits in chunks, so that other writers get the lock between them
(docs/concurrency.md, "Large imports"). Until its last chunk commits, the session has a row
here and every reader of the store hides it (its sessions row and its events are stored,
but ``sessions()``, ``session(id)``, ``follow``, search, export and the viewer do not show
them; readers of positions stop before ``first_position``). The row is deleted when the
import completes: this table is bookkeeping, not part of the log, so it is not append-only.
``owner`` names the importer's lock (a ``flock`` on SQLite, a session advisory lock on
PostgreSQL) so that readers can tell a running import from an abandoned one.
"""
from alembic import op

revision = "0220"
down_revision = "0210"
branch_labels = None
depends_on = None

SQLITE_IMPORTING = """
CREATE TABLE importing (
  session_id TEXT PRIMARY KEY REFERENCES sessions (id),
  first_position INTEGER NOT NULL,
  owner TEXT NOT NULL,
  started_at REAL NOT NULL
)"""

# The writer role may insert importing rows (an import needs to), so the row itself is
# checked: it may only hide a session that holds no event yet (the import inserts it right
# after the sessions row, before its first chunk), and only from the next position on (it
# is where position readers stop). A row inserted for a stored session would hide it.
SQLITE_GUARD = """
CREATE TRIGGER importing_guard_insert BEFORE INSERT ON importing
WHEN EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id)
  OR NEW.first_position IS NOT (SELECT coalesce(max(position), 0) + 1 FROM events)
BEGIN
  SELECT RAISE(ABORT, 'ES011: importing: only an import creating a session (no events yet, first_position the next position) may hide it');
END"""


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(SQLITE_IMPORTING)
    bind.exec_driver_sql(SQLITE_GUARD)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
