"""The events_messages partial index with an OR predicate: no temporary b-tree per insert.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

``events_messages`` indexes the three message types only. Its predicate was
``type IN ('user/message', 'assistant/message', 'tool/result')``, and SQLite tests an IN
list of three or more constants against a temporary b-tree that it builds again for every
INSERT (``OpenEphemeral`` in ``EXPLAIN``): about 26,000 CPU instructions per appended event
(a single append costs about 160,000), the largest cost of the schema after the guard
trigger. The same predicate written ``type = 'user/message' OR type = 'assistant/message'
OR type = 'tool/result'`` is three comparisons.

SQLite uses a partial index only for a query whose WHERE clause contains the index's
predicate, so every view that reads message events through it (``messages``,
``tool_calls``, ``turns``, ``session_summary``) is recreated with the same OR term in place
of the IN list; nothing else in them changes. The views are rewritten from their stored
text (the definitions of revisions 0002 and 0004), so this revision means the same thing
forever; eventstore.projection and docs/schema.md hold the resulting text.
"""
import re

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

PREDICATE = "type = 'user/message' OR type = 'assistant/message' OR type = 'tool/result'"
_IN_LIST = re.compile(r"\b(\w+\.)?type IN \('user/message', 'assistant/message', 'tool/result'\)")
VIEWS = ("messages", "tool_calls", "turns", "session_summary")


def _or_term(match: re.Match) -> str:
    alias = match.group(1) or ""
    return "(" + " OR ".join(f"{alias}type = '{t}'" for t in ("user/message", "assistant/message",
                                                               "tool/result")) + ")"


def upgrade() -> None:
    bind = op.get_bind()
    op.execute("DROP INDEX events_messages")
    op.execute(f"CREATE INDEX events_messages ON events (session_id, seq) WHERE {PREDICATE}")
    for name in VIEWS:
        (sql,) = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?",
                                      (name,)).fetchone()
        new_sql, n = _IN_LIST.subn(_or_term, sql)
        if not n:
            raise RuntimeError(f"migration 0005: view {name} does not hold the message-type IN list")
        bind.exec_driver_sql(f"DROP VIEW {name}")
        bind.exec_driver_sql(new_sql)  # (not op.execute: view texts hold ':true', not a parameter)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
