"""sessions.meta_hash: the session row gets a check of its own.

Revision ID: 0210
Revises: 0200
Create Date: 2026-12-02

No event hash covers a ``sessions`` row, so an edit of its ``meta`` or ``created_at``
(guards switched off) was caught only against a checkpoint kept elsewhere. ``meta_hash``
(:func:`eventstore.log.chain.session_hash`: 128 bits over the id and ``created_at``, 128 over
the id and ``meta``) is written by the store with every new session and checked by
``eventstore verify``, which says which of the two changed. This revision adds the column
and fills it for the sessions already stored (computed here in Python: SQLite has no
SHA-256). SQLite: ``ADD COLUMN`` keeps the table (and its triggers); the UPDATE guard is
dropped for the fill and created again with its baseline definition. PostgreSQL: the guard
trigger is disabled for the fill and enabled again. Everything runs in the migration's one
transaction.
"""
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0210"
down_revision = "0200"
branch_labels = None
depends_on = None

SQLITE_ADD = "ALTER TABLE sessions ADD COLUMN meta_hash TEXT"
SQLITE_DROP_GUARD = "DROP TRIGGER sessions_guard_update"
SQLITE_FILL = "UPDATE sessions SET meta_hash = :h WHERE id = :id"
SQLITE_GUARD = r"""
CREATE TRIGGER sessions_guard_update BEFORE UPDATE ON sessions
BEGIN SELECT RAISE(ABORT, 'ES005: sessions are append-only: UPDATE refused'); END"""


def _half(session_id, field, value):
    text = json.dumps([session_id, field, value], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


def session_hash(session_id, created_at, meta):
    """eventstore.log.chain.session_hash as of this revision (written out: a migration must not
    change when the package does)."""
    return _half(session_id, "created_at", float(created_at)) + _half(session_id, "meta", meta)


def _fill(bind, fill: str) -> None:
    rows = bind.execute(sa.text("SELECT id, created_at, meta FROM sessions")).fetchall()
    if rows:
        bind.execute(sa.text(fill), [{"id": sid, "h": session_hash(sid, created, meta)}
                                     for sid, created, meta in rows])


def upgrade() -> None:
    bind = op.get_bind()
    op.execute(SQLITE_ADD)
    op.execute(SQLITE_DROP_GUARD)
    _fill(bind, SQLITE_FILL)
    op.execute(SQLITE_GUARD)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
