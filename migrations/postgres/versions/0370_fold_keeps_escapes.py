"""A fold keeps every escape of its strings; es_json rewrites every escape it must.

Revision ID: 0370
Revises: 0350
Create Date: 2026-12-07

``es_json`` spells ``\\u0000`` and lone-surrogate escapes ``\\/u...`` so that PostgreSQL's
JSON functions parse the payload (the baseline, 0008). Two faults followed:

* Its pattern took the character before each escape, so of two escapes in a row
  (``"\\u0000\\ud83d"``, which JSON.stringify writes for those two characters) the second
  was left alone: the payload did not parse, and the insert guard refused the event. The pattern now looks behind
  instead (an escape starts after an even run of backslashes) and takes none.
* The fold of ``messages_uncut`` (0270) read each part's content with ``->>`` (the string
  decoded, so ``\\ud83d`` came back as ``/ud83d``) and joined the tool calls with
  ``json_agg`` (the rewritten ``\\/u`` escapes kept, and ``", "`` between elements). It now
  joins each content's JSON text and each call's JSON text with the rewriting undone
  (``es_raw``), so a fold is the bytes JSON.stringify writes, as the unfolded rows are; a
  part's ``message_id`` is compared as JSON text (``"1"`` and ``1`` differ, as on SQLite).
* ``tool_calls`` and ``turns`` matched a result to a call by the decoded ids, so a result
  of ``"/ud83d"`` answered a call of ``"\\ud83d"``; they compare the ids' JSON texts now.

``es_raw(value)`` (new): the JSON text of a value read through ``es_json``, its escapes as
stored (JSON.stringify never writes ``\\/``, so each odd-placed ``\\/u`` is a rewritten one);
``es_field`` undoes the rewriting the same way (its ``replace`` also changed an escaped
backslash followed by ``/u``). The text columns of ``tool_calls`` and the search text still
show such a character as ``/u...``: PostgreSQL's text holds neither (docs/schema.md).

``CREATE OR REPLACE`` (the same columns) keeps the functions' and the views' grants; no
row is touched. A stored ``event_id`` (``es_json(payload) ->> 'event_id'``) is unchanged:
where the two patterns differ inside an id, the old one's ``->>`` failed.
"""
from alembic import op

revision = "0370"
down_revision = "0350"
branch_labels = None
depends_on = None

# An escape to rewrite: \u0000 or a surrogate's \uD8.. to \uDF.., its backslash after an even run
# of backslashes (escaped ones) not itself preceded by one; es_raw finds the rewritten \/u the same way.
_ESCAPE = r"(?<!\\)((\\\\)*)\\(u0000|u[dD][89a-fA-F])"
_REWRITTEN = r"(?<!\\)((\\\\)*)\\/(u0000|u[dD][89a-fA-F])"

SQL_FUNCTIONS = [rf"""
CREATE OR REPLACE FUNCTION es_json(payload text) RETURNS json LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN strpos(payload, '\u') = 0 THEN payload::json
            ELSE regexp_replace(payload, '{_ESCAPE}', '\1\\/\3', 'g')::json END""",
rf"""
CREATE OR REPLACE FUNCTION es_raw(value json) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN strpos(value::text, '\/u') = 0 THEN value::text
            ELSE regexp_replace(value::text, '{_REWRITTEN}', '\1\\\3', 'g') END""",
r"""
CREATE OR REPLACE FUNCTION es_field(payload text, key text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN strpos(payload, '\u') = 0 THEN (payload::json -> key)::text
            ELSE es_raw(es_json(payload) -> key) END""",
]

_PG_MSG = "('user/message', 'assistant/message', 'tool/result')"
_PG_NEXT = f"""coalesce((SELECT n.seq FROM events AS n
            WHERE n.session_id = e.session_id AND n.seq > e.seq AND n.type IN {_PG_MSG}
              AND n.type = 'assistant/message'
            ORDER BY n.seq LIMIT 1), 9223372036854775807)"""
# A part folds when its message_id is the same JSON text (the message's is a string).
_PG_FOLD = f"""x.session_id = e.session_id AND x.seq >= e.seq AND x.seq < {_PG_NEXT}
              AND (x.seq = e.seq OR (x.type = 'assistant/part'
                                      AND (es_json(x.payload) -> 'message_id')::text = f.message_id))"""

# As 0270's, but for the fold: each content's JSON text without its quotes, joined by an
# escaped blank line, and each call's JSON text joined by commas.
POSTGRESQL_UNCUT = f"""
CREATE OR REPLACE VIEW messages_uncut AS
SELECT
  e.session_id,
  e.seq,
  CASE e.type WHEN 'user/message' THEN 'user'
              WHEN 'assistant/message' THEN 'assistant'
              ELSE 'tool' END AS role,
  CASE
    WHEN f.message_id IS NOT NULL
         AND EXISTS (SELECT 1 FROM events AS p
                      WHERE p.session_id = e.session_id AND p.seq > e.seq AND p.type = 'assistant/part'
                        AND p.seq < {_PG_NEXT}
                        AND (es_json(p.payload) -> 'message_id')::text = f.message_id) THEN
      '{{"role":"assistant","content":"' || coalesce(
         (SELECT string_agg(substr(c.text, 2, length(c.text) - 2), '\\n\\n' ORDER BY c.seq)
            FROM (SELECT x.seq, es_raw(es_json(x.payload) -> 'content') AS text FROM events AS x WHERE {_PG_FOLD}
                     AND json_typeof(es_json(x.payload) -> 'content') = 'string') AS c
           WHERE c.text <> '""'), '') || '"'
      || coalesce(',"tool_calls":[' || (
         SELECT string_agg(es_raw(j.value), ',' ORDER BY x.seq, j.n)
           FROM events AS x
           CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(es_json(x.payload) -> 'tool_calls') = 'array'
                                                       THEN es_json(x.payload) -> 'tool_calls' ELSE '[]' END)
                WITH ORDINALITY AS j(value, n)
          WHERE {_PG_FOLD}) || ']', '')
      || '}}'
    WHEN e.type = 'user/message' THEN
      coalesce('{{"role":"user","content":' || f.content || '}}', '{{"role":"user"}}')
    WHEN e.type = 'assistant/message' THEN
      '{{"role":"assistant","content":' || coalesce(nullif(f.content, 'null'), '""')
      || CASE WHEN f.tool_calls IS NULL OR f.tool_calls IN ('null', 'false', '[]', '""') THEN ''
              WHEN left(f.tool_calls, 1) IN ('-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9')
                   AND abs(f.tool_calls::numeric) < 2.4703282292062328e-324 THEN ''
              ELSE ',"tool_calls":' || f.tool_calls END
      || '}}'
    ELSE
      '{{"role":"tool"' || coalesce(',"tool_call_id":' || f.tool_call_id, '')
      || coalesce(',"content":' || f.content, '') || '}}'
  END AS message
FROM events AS e
CROSS JOIN LATERAL (
  SELECT es_field(e.payload, 'content') AS content,
         CASE WHEN e.type = 'assistant/message' THEN es_field(e.payload, 'tool_calls') END AS tool_calls,
         CASE WHEN e.type = 'tool/result' THEN es_field(e.payload, 'tool_call_id') END AS tool_call_id,
         CASE WHEN e.type = 'assistant/message' AND strpos(e.payload, '"message_id"') > 0
                   AND json_typeof(es_json(e.payload) -> 'message_id') = 'string'
              THEN (es_json(e.payload) -> 'message_id')::text END AS message_id
  OFFSET 0
) AS f
WHERE e.type IN {_PG_MSG}
"""


# As 0270's, but a result answers a call of the same id as JSON text (->> decoded a
# rewritten "\ud83d" as "/ud83d", the id of another call).
POSTGRESQL_TOOL_CALLS = f"""
CREATE OR REPLACE VIEW tool_calls AS
SELECT
  c.session_id,
  c.call_seq,
  c.call ->> 'id' AS call_id,
  c.call -> 'function' ->> 'name' AS name,
  c.call -> 'function' ->> 'arguments' AS arguments,
  r.seq AS result_seq,
  es_json(r.payload) ->> 'content' AS result,
  round((r.ts - c.call_ts)::numeric, 6)::double precision AS latency_s,
  CASE WHEN r.seq IS NULL THEN NULL WHEN (es_json(r.payload) -> 'is_error')::text = 'true' THEN 1 ELSE 0 END
    AS is_error
FROM (
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, j.value AS call,
         (SELECT n.seq FROM events AS n
           WHERE n.session_id = a.session_id AND n.seq > a.seq
             AND n.type IN {_PG_MSG} AND n.type <> 'tool/result'
           ORDER BY n.seq LIMIT 1) AS next_seq
  FROM events AS a,
       json_array_elements(CASE WHEN json_typeof(es_json(a.payload) -> 'tool_calls') = 'array'
                                THEN es_json(a.payload) -> 'tool_calls' ELSE '[]' END) AS j
  WHERE a.type IN ('user/message', 'assistant/message', 'tool/result', 'assistant/part')
    AND a.type IN ('assistant/message', 'assistant/part')
) AS c
LEFT JOIN events AS r
  ON r.session_id = c.session_id
 AND r.seq = (SELECT x.seq FROM events AS x
               WHERE x.session_id = c.session_id AND x.seq > c.call_seq
                 AND x.seq < coalesce(c.next_seq, 9223372036854775807)
                 AND x.type IN {_PG_MSG} AND x.type = 'tool/result'
                 AND (es_json(x.payload) -> 'tool_call_id')::text = (c.call -> 'id')::text
               ORDER BY x.seq LIMIT 1)
"""

# As 0300's, with the same change.
_PG_CALLS = """(SELECT coalesce(sum(json_array_length(es_json(x.payload) -> 'tool_calls')), 0) FROM events AS x
    WHERE {where} AND x.type IN ('assistant/message', 'assistant/part')
      AND json_typeof(es_json(x.payload) -> 'tool_calls') = 'array')"""

# The turn w (a turn/start) was answered: the session's last message event after it is an
# assistant/message, and no tool call after it lacks its answering result (`->` of an
# element of tool_calls that is not an object is NULL: unanswered).
POSTGRESQL_ANSWERED = """(SELECT m.type FROM events AS m
        WHERE m.session_id = w.session_id AND m.seq > w.seq
          AND m.type IN ('user/message', 'assistant/message', 'tool/result')
        ORDER BY m.seq DESC LIMIT 1) = 'assistant/message'
   AND NOT EXISTS (
     SELECT 1 FROM events AS a
       CROSS JOIN LATERAL json_array_elements(
         CASE WHEN json_typeof(es_json(a.payload) -> 'tool_calls') = 'array'
              THEN es_json(a.payload) -> 'tool_calls' ELSE '[]' END) AS j(value)
      WHERE a.session_id = w.session_id AND a.seq > w.seq
        AND a.type IN ('assistant/message', 'assistant/part')
        AND NOT EXISTS (
          SELECT 1 FROM events AS r
           WHERE r.session_id = a.session_id AND r.seq > a.seq AND r.type = 'tool/result'
             AND r.seq < coalesce((SELECT n.seq FROM events AS n
                                    WHERE n.session_id = a.session_id AND n.seq > a.seq
                                      AND n.type IN ('user/message', 'assistant/message')
                                    ORDER BY n.seq LIMIT 1), 9223372036854775807)
             AND (es_json(r.payload) -> 'tool_call_id')::text = (j.value -> 'id')::text))"""

POSTGRESQL_TURNS = f"""
CREATE OR REPLACE VIEW turns AS
SELECT
  b.session_id,
  b.start_seq,
  b.end_seq,
  b.started_at,
  e.ts AS ended_at,
  round((e.ts - b.started_at)::numeric, 6)::double precision AS duration_s,
  (SELECT count(*) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type = 'step/start') AS steps,
  {_PG_CALLS.format(where="x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq")} AS tool_calls,
  b.complete
FROM (
  SELECT w.session_id, w.seq AS start_seq, w.ts AS started_at,
         CASE WHEN w.next_type = 'turn/end' THEN w.next_seq
              WHEN w.next_seq IS NOT NULL THEN w.next_seq - 1
              ELSE (SELECT max(m.seq) FROM events AS m WHERE m.session_id = w.session_id)
         END AS end_seq,
         CASE WHEN w.next_type = 'turn/end' THEN 1
              WHEN w.next_seq IS NOT NULL THEN 0
              WHEN {POSTGRESQL_ANSWERED} THEN 1
              ELSE 0 END AS complete
  FROM (
    SELECT session_id, seq, type, ts,
           lead(seq) OVER (PARTITION BY session_id ORDER BY seq) AS next_seq,
           lead(type) OVER (PARTITION BY session_id ORDER BY seq) AS next_type
    FROM events
    WHERE type IN ('turn/start', 'turn/end')
  ) AS w
  WHERE w.type = 'turn/start'
) AS b
JOIN events AS e ON e.session_id = b.session_id AND e.seq = b.end_seq
"""


def upgrade() -> None:
    # On the driver's connection, as the baseline does: no bind-parameter parsing.
    conn = op.get_bind().connection.driver_connection
    for sql in (*SQL_FUNCTIONS, POSTGRESQL_UNCUT, POSTGRESQL_TOOL_CALLS, POSTGRESQL_TURNS):
        conn.execute(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
