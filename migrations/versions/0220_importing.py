"""The importing table: sessions whose import has not finished yet.

Revision ID: 0220
Revises: 0150
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

POSTGRESQL_IMPORTING = """
CREATE TABLE importing (
  session_id text PRIMARY KEY REFERENCES sessions (id),
  first_position bigint NOT NULL,
  owner text NOT NULL,
  started_at double precision NOT NULL
)"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        bind.exec_driver_sql(SQLITE_IMPORTING)
    else:
        bind.connection.driver_connection.execute(POSTGRESQL_IMPORTING)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
