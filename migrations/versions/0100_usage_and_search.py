"""Token usage and full-text search: the ``usage`` view, the ``events_search`` FTS5 index.

Revision ID: 0100
Revises: 0007
Create Date: 2026-12-02

* ``usage``: one row per event whose payload has a ``usage`` object (an imported model
  response: Claude Code's ``assistant/message``, Codex's ``codex/token_count``), with the
  session, seq, turn, step, model and token counts (0 where the source recorded none).
* ``events_search_text``: the searchable text of each message event: a message's content
  (a string, or the ``text`` of its content parts), a tool call's name and arguments, a tool
  result's content. It is the FTS5 table's external content: the text is not stored twice.
* ``events_search``: an FTS5 index over that text (``rowid`` = ``events.position``), kept
  current by the trigger ``events_search_insert`` and filled here for the events already
  stored. The log stays append-only: the index is derived and can be rebuilt:
  ``INSERT INTO events_search (events_search) VALUES ('delete-all')``, then the INSERT of
  :func:`upgrade` below (FTS5's own ``'rebuild'`` command fails on this view with "SQL
  logic error" in SQLite 3.40, so the fill is written as a plain INSERT ... SELECT).

The definitions are written out, not imported, so that this revision means the same thing
forever. PostgreSQL (tsvector + GIN) comes with that backend.
"""
from alembic import op

revision = "0100"
down_revision = "0007"
branch_labels = None
depends_on = None

USAGE = """
CREATE VIEW usage AS
SELECT
  session_id,
  seq,
  ts,
  type,
  payload ->> '$.usage.turn' AS turn,
  payload ->> '$.usage.step' AS step,
  payload ->> '$.usage.model' AS model,
  coalesce(payload ->> '$.usage.input_tokens', payload ->> '$.usage.prompt_tokens', 0) AS input_tokens,
  coalesce(payload ->> '$.usage.output_tokens', payload ->> '$.usage.completion_tokens', 0) AS output_tokens,
  coalesce(payload ->> '$.usage.cache_read_tokens', 0) AS cache_read_tokens,
  coalesce(payload ->> '$.usage.cache_creation_tokens', 0) AS cache_creation_tokens,
  coalesce(payload ->> '$.usage.reasoning_tokens', 0) AS reasoning_tokens
FROM events
WHERE payload GLOB '*"usage":{*' AND json_type(payload, '$.usage') = 'object'
"""

# The text of one message event's payload {P}: content strings and content parts' text,
# then each tool call's name and arguments. Only rows json_each types as text or object are
# read, so no payload shape can make the expression fail (and the trigger refuse an append).
_TEXT = """coalesce((SELECT group_concat(CASE WHEN c.type = 'text' THEN c.value
                                     ELSE json_extract(c.value, '$.text') END, ' ')
           FROM json_each({P}, '$.content') AS c
           WHERE c.type = 'text' OR (c.type = 'object' AND json_type(c.value, '$.text') = 'text')), '')
  || coalesce(' ' || (SELECT group_concat(coalesce(json_extract(t.value, '$.function.name'), '') || ' '
                                          || coalesce(json_extract(t.value, '$.function.arguments'), ''), ' ')
                      FROM json_each({P}, '$.tool_calls') AS t WHERE t.type = 'object'), '')"""

SEARCH_TEXT = f"""
CREATE VIEW events_search_text AS
SELECT position, session_id, seq, type, {_TEXT.format(P="payload")} AS text
FROM events
WHERE type = 'user/message' OR type = 'assistant/message' OR type = 'tool/result'
"""

SEARCH_INDEX = """
CREATE VIRTUAL TABLE events_search USING fts5(
  text,
  content = 'events_search_text',
  content_rowid = 'position',
  tokenize = 'unicode61 remove_diacritics 2'
)
"""

SEARCH_TRIGGER = f"""
CREATE TRIGGER events_search_insert AFTER INSERT ON events
WHEN new.type = 'user/message' OR new.type = 'assistant/message' OR new.type = 'tool/result'
BEGIN
  INSERT INTO events_search (rowid, text) VALUES (new.position, {_TEXT.format(P="new.payload")});
END
"""


def upgrade() -> None:
    op.execute(USAGE)
    op.execute(SEARCH_TEXT)
    op.execute(SEARCH_INDEX)
    op.execute(SEARCH_TRIGGER)
    op.execute("INSERT INTO events_search (rowid, text) SELECT position, text FROM events_search_text")


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
