"""A Claude Code title reaches the session it names, whichever file holds it.

Revision ID: 0290
Revises: 0280
Create Date: 2026-12-07

A Claude Code ``summary`` line (``{type: "summary", summary, leafUuid}``) is stored as a
``claude/summary`` event of its file's main session; its ``leafUuid`` is the uuid of a line
that may be in another file, imported before or after it. Readers (``sessions --json``, the
viewer) give the session holding that line the title at read time, so no stored event
changes and the import order decides nothing (docs/import-export.md, "Facts learned later").
Two indexes make that one look-up per summary:

* ``events_summaries``: the ``claude/summary`` events (few rows), as ``events_info`` holds
  the ``session/info`` events (revision 0270);
* ``events_by_event_id``: an event by its ``event_id`` in any session (the per-session
  unique index ``events_event_id``/``events_session_event_id`` needs the session first), so
  the session holding a summary's ``leafUuid`` line is found without a scan; only keys
  without ``:``, ``#`` or ``@`` (a line's uuid is its first event's key; the line's other
  events have suffixed keys), which keeps it off most imported events.
"""
from alembic import op

revision = "0290"
down_revision = "0280"
branch_labels = None
depends_on = None

SUMMARIES = "CREATE INDEX IF NOT EXISTS events_summaries ON events (session_id, seq) WHERE type = 'claude/summary'"
POSTGRESQL_BY_ID = "CREATE INDEX IF NOT EXISTS events_by_event_id ON events (event_id) WHERE event_id !~ '[:#@]'"


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    for sql in (SUMMARIES, POSTGRESQL_BY_ID):
        conn.execute(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
