"""The one in-place change the log accepts: a redaction (placeholder of the redact-pg branch).

Revision ID: 0320
Revises: 0310
Create Date: 2026-12-07

SQLite's rule (the triggers' one exception) is written on the redact-core branch, whose
file of this name replaces this one at the merge. PostgreSQL's rule is in the PostgreSQL
revision of the same number.
"""

revision = "0320"
down_revision = "0310"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing here (see the docstring)."""


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
