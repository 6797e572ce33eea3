"""SQLite: the database file carries a mark, so that a ``-wal`` of another file is told apart.

Revision ID: 0260
Revises: 0250
Create Date: 2026-12-07

The file header gets ``application_id`` = ``0x45565354`` ("EVST": an eventstore database)
and ``user_version`` = a random number from 1 to 2**31 - 1, the database's *mark*. From
then on, the first transaction of every WAL generation an eventstore writer starts moves
the mark on by one (``sqlite_engine.WalMarks``). SQLite writes both in page 1, so a
``-wal``'s page-1 images say which database, and which state of it, the WAL was started
against: :mod:`eventstore.backends.sqlite_walcheck` refuses one of another database, or
of an older or newer state of this one, before SQLite reads it. Nothing else changes; a
read-only open reads a database at 0240 as it is.

PostgreSQL: nothing changes.
"""
import secrets

from alembic import op

revision = "0260"
down_revision = "0250"
branch_labels = None
depends_on = None

APPLICATION_ID = 0x45565354  # eventstore.backends.sqlite_walcheck.APPLICATION_ID


def upgrade() -> None:
    bind = op.get_bind()
    # Both pragmas are part of the migration's transaction (SQLite writes them in page 1).
    bind.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
    bind.exec_driver_sql(f"PRAGMA user_version = {1 + secrets.randbelow(2**31 - 1)}")


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
