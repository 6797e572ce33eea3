"""Search covers thinking events and message parts: one definition of an event's searchable
text, in the schema, on both databases.

Revision ID: 0280
Revises: 0270
Create Date: 2026-12-07

The searchable events were the message events (``user/message``, ``assistant/message``,
``tool/result``). They are now also:

* ``assistant/part`` (the later lines of one API message, revision 0270): its payload has a
  message's shape, so its text is a message's (content, then tool calls' names and
  arguments);
* ``assistant/thinking`` (Claude Code's thinking blocks, Codex's reasoning summaries): its
  ``thinking`` string ('' when that is not a string).

SQLite: ``events_search_text`` (the FTS5 index's external content) is created again with
those rows; a message event's text is unchanged, byte for byte, so the rows already indexed
still match their content.

PostgreSQL: ``es_event_text(event_type, payload)`` and ``es_event_vector(event_type,
payload)`` are the text and vector of any searchable event (a message event's are
``es_search_text`` and ``es_search_vector`` of revision 0100, unchanged), written in the
SQL-standard form as revision 0250's (bound when created: a caller's ``search_path``
decides nothing). ``events_search_text`` reads them; the guard of ``events_search``
(revision 0250) takes a row's session, type and vector from the searchable event at its
position (``es_event_vector``) and refuses any other position, and
``events_search_state`` may only move on past positions whose searchable events all have
their row.

Both: the index gets the rows of the parts and thinking events already at or below its
bound (``indexed_through``), computed here once; the events past it are indexed by the next
search's catch-up as before. Lowering the bound instead would have the catch-up recompute
(and, on SQLite, index twice) every message event between the lowest such event and the
bound.
"""
from alembic import op

revision = "0280"
down_revision = "0270"
branch_labels = None
depends_on = None

_NEW_TYPES = "('assistant/part', 'assistant/thinking')"
_TYPES = "('user/message', 'assistant/message', 'tool/result', 'assistant/part', 'assistant/thinking')"

# Revision 0100's text of a message's payload (content strings and content parts' text, then
# each tool call's name and arguments), written out again.
_SQLITE_MESSAGE_TEXT = """coalesce((SELECT group_concat(CASE WHEN c.type = 'text' THEN c.value
                                     ELSE json_extract(c.value, '$.text') END, ' ')
           FROM json_each(payload, '$.content') AS c
           WHERE c.type = 'text' OR (c.type = 'object' AND json_type(c.value, '$.text') = 'text')), '')
  || coalesce(' ' || (SELECT group_concat(coalesce(json_extract(t.value, '$.function.name'), '') || ' '
                                          || coalesce(json_extract(t.value, '$.function.arguments'), ''), ' ')
                      FROM json_each(payload, '$.tool_calls') AS t WHERE t.type = 'object'), '')"""

SQLITE = [
    "DROP VIEW events_search_text",
    f"""
CREATE VIEW events_search_text AS
SELECT position, session_id, seq, type,
       CASE WHEN type = 'assistant/thinking'
            THEN CASE WHEN json_type(payload, '$.thinking') = 'text' THEN json_extract(payload, '$.thinking') ELSE '' END
            ELSE {_SQLITE_MESSAGE_TEXT} END AS text
FROM events
WHERE type IN {_TYPES}
""",
    f"""
INSERT INTO events_search (rowid, text)
SELECT position, text FROM events_search_text
WHERE type IN {_NEW_TYPES} AND position <= (SELECT indexed_through FROM events_search_state)""",
]


def upgrade() -> None:
    bind = op.get_bind()
    for sql in SQLITE:
        bind.exec_driver_sql(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
