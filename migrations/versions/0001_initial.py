"""The initial schema: sessions, events, their append-only guards, the messages view.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Any later migration that recreates ``events`` (Alembic batch mode copies, drops and
renames the table) loses its triggers and must install eventstore.schema.GUARDS again.
"""
from alembic import op

from eventstore import projection, schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    schema.metadata.create_all(bind, tables=[schema.sessions, schema.events])
    for ddl in schema.GUARDS.values():
        op.execute(ddl)
    op.execute(projection.CREATE_MESSAGES_VIEW)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
