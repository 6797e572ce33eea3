"""The projection makes fewer SQL calls a row: nothing to do on PostgreSQL.

Revision ID: 0350
Revises: 0340
Create Date: 2026-12-07

SQLite's revision of the same number creates ``messages_uncut`` again with the same rows
from fewer JSON function calls and string copies a row. PostgreSQL's view (revision 0270)
already reads each payload field once, through a lateral subquery, so this revision keeps
the two histories' ids in step and changes nothing.
"""

revision = "0350"
down_revision = "0340"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
