"""A redaction's UPDATE must change the payload: nothing to do on PostgreSQL.

Revision ID: 0340
Revises: 0320
Create Date: 2026-12-07

SQLite's revision of the same number adds ``NEW.payload IS NOT OLD.payload`` to its
``events_guard_update`` trigger, which accepted a replay of a committed redaction's UPDATE
(``salt = NULL`` with the same markers) while the redaction event was still the session's
last. PostgreSQL's guard (``es_redaction_guard``, revision 0320) already accepts the UPDATE
only in the transaction that inserted the redaction event (its ``xmin``), so no replay
after the commit passes it; this revision keeps the two histories' ids in step.
"""

revision = "0340"
down_revision = "0320"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
