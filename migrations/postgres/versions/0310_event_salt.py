"""Each new event carries a salt, so that a redaction can remove a field and keep the proof.

Revision ID: 0310
Revises: 0300
Create Date: 2026-12-07

``events.salt`` (bytea, nullable): 16 random bytes per event written from this revision
on. A salted event's hash covers its *commit payload* (each top-level value replaced by a
salted digest, :mod:`eventstore.log.commit`) instead of its payload; NULL means unsalted:
an event written before this revision (its hash covers the payload itself, as before), or
one whose salt a redaction removed (docs/redaction.md). No row is touched.
"""
from alembic import op

revision = "0310"
down_revision = "0300"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE events ADD COLUMN salt bytea")


def downgrade() -> None:
    op.execute("ALTER TABLE events DROP COLUMN salt")
