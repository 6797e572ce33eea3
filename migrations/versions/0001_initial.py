"""The initial schema: sessions, events, their append-only guards, the messages view.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Any later migration that recreates ``events`` (Alembic batch mode copies, drops and
renames the table) loses its triggers and must install eventstore.schema.GUARDS again.
"""
from alembic import op

from eventstore import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# The messages view as this revision created it, written out so that the revision means the
# same thing forever (0004 replaces it with a cheaper definition of the same projection).
# json_remove() of a key that is absent from the object is a no-op: '$.none' is how a
# CASE says "remove nothing".
CREATE_MESSAGES_VIEW = """
CREATE VIEW messages AS
SELECT
  session_id,
  seq,
  CASE type WHEN 'user/message' THEN 'user'
            WHEN 'assistant/message' THEN 'assistant'
            ELSE 'tool' END AS role,
  CASE type
    WHEN 'user/message' THEN
      json_remove(json_object('role', 'user', 'content', json(payload -> '$.content')),
                  CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
    WHEN 'assistant/message' THEN
      json_remove(
        json_object('role', 'assistant',
                    'content', CASE WHEN coalesce(json_type(payload, '$.content'), 'null') = 'null'
                                   THEN '' ELSE json(payload -> '$.content') END,
                    'tool_calls', json(payload -> '$.tool_calls')),
        CASE WHEN coalesce(json_type(payload, '$.tool_calls'), 'null') IN ('null', 'false')
               OR (json_type(payload, '$.tool_calls') IN ('integer', 'real') AND payload ->> '$.tool_calls' = 0)
               OR (json_type(payload, '$.tool_calls') = 'text' AND payload -> '$.tool_calls' = '""')
               OR (json_type(payload, '$.tool_calls') = 'array'
                   AND json_array_length(payload, '$.tool_calls') = 0)
             THEN '$.tool_calls' ELSE '$.none' END)
    ELSE
      json_remove(
        json_object('role', 'tool',
                    'tool_call_id', json(payload -> '$.tool_call_id'),
                    'content', json(payload -> '$.content')),
        CASE WHEN json_type(payload, '$.tool_call_id') IS NULL THEN '$.tool_call_id' ELSE '$.none' END,
        CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
  END AS message
FROM events
WHERE type IN ('user/message', 'assistant/message', 'tool/result')
"""


def upgrade() -> None:
    bind = op.get_bind()
    schema.metadata.create_all(bind, tables=[schema.sessions, schema.events])
    for ddl in schema.GUARDS.values():
        op.execute(ddl)
    op.execute(CREATE_MESSAGES_VIEW)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
