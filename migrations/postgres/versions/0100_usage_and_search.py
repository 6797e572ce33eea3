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

_PG_MSG = "('user/message', 'assistant/message', 'tool/result')"

POSTGRESQL = [
    # An integer field of the usage object, NULL when it is missing or not a number (a view
    # that raised on one odd payload would hide every session's totals).
    r"""
CREATE FUNCTION es_usage_int(u json, key text) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN json_typeof(u -> key) = 'number' THEN round((u ->> key)::numeric)::bigint END
$$""",
    r"""
CREATE VIEW usage AS
SELECT
  session_id,
  seq,
  ts,
  type,
  es_usage_int(u, 'turn') AS turn,
  es_usage_int(u, 'step') AS step,
  u ->> 'model' AS model,
  coalesce(es_usage_int(u, 'input_tokens'), es_usage_int(u, 'prompt_tokens'), 0) AS input_tokens,
  coalesce(es_usage_int(u, 'output_tokens'), es_usage_int(u, 'completion_tokens'), 0) AS output_tokens,
  coalesce(es_usage_int(u, 'cache_read_tokens'), 0) AS cache_read_tokens,
  coalesce(es_usage_int(u, 'cache_creation_tokens'), 0) AS cache_creation_tokens,
  coalesce(es_usage_int(u, 'reasoning_tokens'), 0) AS reasoning_tokens
FROM (SELECT session_id, seq, ts, type, es_json(payload) -> 'usage' AS u FROM events
      WHERE strpos(payload, '"usage":{') > 0) AS e
WHERE json_typeof(u) = 'object'
""",
    # The searchable text of a message event's payload, as the SQLite view builds it:
    # content strings and content parts' text, then each tool call's name and arguments.
    # COST: it parses the payload (about 0.1 ms for a few hundred words), so that the planner
    # takes the index rather than a scan even before ANALYZE has seen the table.
    r"""
CREATE FUNCTION es_search_text(payload text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE COST 5000 AS $$
SELECT concat_ws(' ',
  CASE json_typeof(j -> 'content')
    WHEN 'string' THEN j ->> 'content'
    WHEN 'array' THEN (SELECT string_agg(CASE json_typeof(c) WHEN 'string' THEN c #>> '{}' ELSE c ->> 'text' END, ' ')
                         FROM json_array_elements(j -> 'content') AS c
                        WHERE json_typeof(c) = 'string'
                           OR (json_typeof(c) = 'object' AND json_typeof(c -> 'text') = 'string'))
  END,
  CASE WHEN json_typeof(j -> 'tool_calls') = 'array' THEN
    (SELECT string_agg(concat_ws(' ', CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'name' END,
                                      CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'arguments' END), ' ')
       FROM json_array_elements(j -> 'tool_calls') AS t WHERE json_typeof(t) = 'object')
  END)
FROM (SELECT es_json(payload) AS j) AS p
$$""",
    # The words of that text: ASCII punctuation (and _) separate words, as they do for
    # FTS5's unicode61 tokenizer, so "src/search.py" is the words src, search, py on both
    # databases. Cut at 200,000 characters: a tsvector holds at most 1 MB, and an index
    # expression that raised would refuse the append.
    r"""
CREATE FUNCTION es_search_vector(payload text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT to_tsvector('simple'::regconfig,
                   regexp_replace(left(es_search_text(payload), 200000), '[!-/:-@[-`{-~]+', ' ', 'g'))
$$""",
    f"""
CREATE VIEW events_search_text AS
SELECT position, session_id, seq, type, es_search_text(payload) AS text
FROM events
WHERE type IN {_PG_MSG}
""",
    f"CREATE INDEX events_search ON events USING gin (es_search_vector(payload)) WHERE type IN {_PG_MSG}",
]


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    for ddl in POSTGRESQL:
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
