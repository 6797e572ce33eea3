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

_SETTINGS = "SET search_path = pg_catalog, pg_temp"


def postgresql(s: str) -> list[str]:
    """The DDL, with the schema's name ``s`` (quoted as an identifier) in every reference."""
    return [
        # One expression, no subquery: inlined into its caller, as es_search_vector is (a
        # function that is not is planned again at each call from the index's guard: the
        # catch-up took five times as long).
        r"""
CREATE FUNCTION es_event_text(event_type text, payload text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN event_type <> 'assistant/thinking' THEN es_search_text(payload)
            WHEN json_typeof(es_json(payload) -> 'thinking') = 'string' THEN es_json(payload) ->> 'thinking'
            ELSE '' END""",
        # (as es_search_vector: ASCII punctuation separates words; cut at 200,000 characters)
        r"""
CREATE FUNCTION es_event_vector(event_type text, payload text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_tsvector('simple'::regconfig,
                   regexp_replace(left(es_event_text(event_type, payload), 200000), '[!-/:-@[-`{-~]+', ' ', 'g'))""",
        f"""
CREATE OR REPLACE VIEW events_search_text AS
SELECT position, session_id, seq, type, es_event_text(type, payload) AS text
FROM events
WHERE type IN {_TYPES}
""",
        f"""
CREATE OR REPLACE FUNCTION es_search_guard() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  e record;
BEGIN
  IF TG_OP = 'INSERT' AND TG_TABLE_NAME = 'events_search' THEN
    SELECT x.session_id, x.type, x.payload INTO e FROM {s}.events AS x
     WHERE x.position = NEW.position AND x.type IN {_TYPES};
    IF NOT FOUND THEN
      RAISE EXCEPTION 'eventstore: events_search: position % is no searchable event', NEW.position USING ERRCODE = 'ES012';
    END IF;
    NEW.session_id := e.session_id;
    NEW.type := e.type;
    NEW.tsv := {s}.es_event_vector(e.type, e.payload);
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'events_search_state' THEN
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.indexed_through < OLD.indexed_through
       OR NEW.indexed_through > (SELECT coalesce(max(x.position), 0) FROM {s}.events AS x)
       OR EXISTS (SELECT 1 FROM {s}.events AS x
                   WHERE x.position > OLD.indexed_through AND x.position <= NEW.indexed_through
                     AND x.type IN {_TYPES}
                     AND NOT EXISTS (SELECT 1 FROM {s}.events_search AS i WHERE i.position = x.position)) THEN
      RAISE EXCEPTION 'eventstore: events_search_state: indexed_through may only move on to a position up to which every searchable event is indexed'
        USING ERRCODE = 'ES012';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'eventstore: %: % refused (derived from the log)', TG_TABLE_NAME, TG_OP USING ERRCODE = 'ES012';
END
$$""",
        # The guard fills in each row's session, type and vector from its event.
        f"""
INSERT INTO {s}.events_search (position, session_id, type, tsv)
SELECT e.position, e.session_id, e.type, ''::tsvector FROM {s}.events AS e
WHERE e.type IN {_NEW_TYPES} AND e.position <= (SELECT st.indexed_through FROM {s}.events_search_state AS st)
ORDER BY e.position""",
    ]


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    for ddl in postgresql(schema):
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
