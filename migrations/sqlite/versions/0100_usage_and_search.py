"""Token usage and full-text search: the ``usage`` view, the ``events_search`` FTS5 index.

Revision ID: 0100
Revises: 0008
Create Date: 2026-12-02

* ``usage``: one row per event whose payload has a ``usage`` object (an imported model
  response: Claude Code's ``assistant/message``, Codex's ``codex/token_count``), with the
  session, seq, turn, step, model and token counts (0 where the source recorded none).
* ``events_search_text``: the searchable text of each message event: a message's content
  (a string, or the ``text`` of its content parts), a tool call's name and arguments, a tool
  result's content. It is the FTS5 table's external content: the text is not stored twice.
* ``events_search``: an FTS5 index over that text (``rowid`` = ``events.position``), and
  ``events_search_state``: the position up to which it holds every message event. The index
  is derived and brought up to date by whoever searches (:func:`eventstore.search.catch_up`:
  the events past that position, in batches), not by a trigger on ``events``: FTS5 writes a
  segment per transaction, which made a single append of a message event about three
  times as slow (+188% to +235%, tools/bench_search.py), against a budget of 15%; so appends and imports pay
  nothing, and the first search after many writes pays for indexing them. This revision
  creates the index empty: on a large log, filling it here would hold the write lock for
  the whole upgrade.

On PostgreSQL the same ``usage`` and ``events_search_text`` views, and instead of the
FTS5 table an expression index: ``events_search`` is a GIN index over
``es_search_vector(payload)`` (a ``tsvector`` of the message events' text, ``simple``
configuration: lower-cased words, no stemming, no stop words, as FTS5's ``unicode61``).
PostgreSQL keeps a GIN index current on insert cheaply (its pending list), so there is no
catch-up and no state table there; the log stays append-only either way.

The definitions are written out, not imported, so that this revision means the same thing
forever.
"""
from alembic import op

revision = "0100"
down_revision = "0008"
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
# read, so no payload shape can make the expression fail.
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
  content_rowid = 'position'
)
"""

SEARCH_STATE = """
CREATE TABLE events_search_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  indexed_through INTEGER NOT NULL
)
"""


def upgrade() -> None:
    op.execute(USAGE)
    op.execute(SEARCH_TEXT)
    op.execute(SEARCH_INDEX)
    op.execute(SEARCH_STATE)
    op.execute("INSERT INTO events_search_state (id, indexed_through) VALUES (1, 0)")


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
