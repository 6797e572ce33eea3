"""The projection folds a split API message into one assistant message and starts again after
a compaction.

Revision ID: 0270
Revises: 0260
Create Date: 2026-12-07

An agent's transcript writes one API response over many lines, and an import stores each
line's part as it appears (docs/import-export.md, "Agents' transcripts"): the first line
holding text or tool calls is an ``assistant/message`` with a ``message_id``, each later one
an ``assistant/part`` with the same ``message_id``. So that the projection is what the
model was sent:

* ``messages_uncut`` (new): the projection of every message event; ``messages``: its rows
  after the session's last ``compaction/boundary`` (a compaction ends what the model is
  sent; the earlier events stay in the log). ``messages_json(upto_seq)`` (the viewer's
  "What the model saw" at a seq) cuts at the last boundary up to that seq, from
  ``messages_uncut``. In both, an ``assistant/message`` with a ``message_id`` that later
  ``assistant/part`` events of the same id follow (before the next ``assistant/message``)
  is projected folded: its content and theirs (the non-empty strings, joined by a blank
  line, in seq order), its tool calls then theirs. Every other row is as before, byte for
  byte (the reference event types' rules do not change).
* ``tool_calls``, ``turns``, ``session_summary``: a part's tool calls are calls (its
  results answer them until the next user or assistant message).

Partial indexes on ``(session_id, seq)`` keep the folds index look-ups: ``events_parts``
and ``events_compact``; ``events_info`` lets ``sessions --json`` read every ``session/info``
event (facts an import learned later) in one pass over few rows.

SQLite: the views are dropped and created again (no row is touched). PostgreSQL: ``CREATE
OR REPLACE VIEW`` with the same columns, keeping the grants on the views; the roles that may
read ``messages`` may read ``messages_uncut``.
"""
from alembic import op

revision = "0270"
down_revision = "0260"
branch_labels = None
depends_on = None

_PG_MSG = "('user/message', 'assistant/message', 'tool/result')"
_PG_NEXT = f"""coalesce((SELECT n.seq FROM events AS n
            WHERE n.session_id = e.session_id AND n.seq > e.seq AND n.type IN {_PG_MSG}
              AND n.type = 'assistant/message'
            ORDER BY n.seq LIMIT 1), 9223372036854775807)"""
_PG_FOLD = f"""x.session_id = e.session_id AND x.seq >= e.seq AND x.seq < {_PG_NEXT}
              AND (x.seq = e.seq OR (x.type = 'assistant/part'
                                      AND es_json(x.payload) ->> 'message_id' = f.message_id))"""

POSTGRESQL_INDEXES = [
    "CREATE INDEX IF NOT EXISTS events_info ON events (session_id, seq) WHERE type = 'session/info'",
    "CREATE INDEX IF NOT EXISTS events_parts ON events (session_id, seq) WHERE type = 'assistant/part'",
    "CREATE INDEX IF NOT EXISTS events_compact ON events (session_id, seq) WHERE type = 'compaction/boundary'",
]

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
                        AND es_json(p.payload) ->> 'message_id' = f.message_id) THEN
      '{{"role":"assistant","content":' || to_json(coalesce(
         (SELECT string_agg(es_json(x.payload) ->> 'content', E'\\n\\n' ORDER BY x.seq) FROM events AS x WHERE {_PG_FOLD}
             AND json_typeof(es_json(x.payload) -> 'content') = 'string'
             AND es_json(x.payload) ->> 'content' <> ''), ''))::text
      || coalesce(',"tool_calls":' || (
         SELECT json_agg(j.value ORDER BY x.seq, j.n)::text
           FROM events AS x
           CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(es_json(x.payload) -> 'tool_calls') = 'array'
                                                       THEN es_json(x.payload) -> 'tool_calls' ELSE '[]' END)
                WITH ORDINALITY AS j(value, n)
          WHERE {_PG_FOLD}), '')
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
              THEN es_json(e.payload) ->> 'message_id' END AS message_id
  OFFSET 0
) AS f
WHERE e.type IN {_PG_MSG}
"""

POSTGRESQL_MESSAGES = """
CREATE OR REPLACE VIEW messages AS
SELECT m.session_id, m.seq, m.role, m.message
FROM messages_uncut AS m
WHERE m.seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = m.session_id
                         AND c.type = 'compaction/boundary' ORDER BY c.seq DESC LIMIT 1), -1)
"""

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
                 AND es_json(x.payload) ->> 'tool_call_id' = c.call ->> 'id'
               ORDER BY x.seq LIMIT 1)
"""

_PG_CALLS = """(SELECT coalesce(sum(json_array_length(es_json(x.payload) -> 'tool_calls')), 0) FROM events AS x
    WHERE {where} AND x.type IN ('assistant/message', 'assistant/part')
      AND json_typeof(es_json(x.payload) -> 'tool_calls') = 'array')"""

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
         coalesce(w.next_type = 'turn/end', false)::int AS complete
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

POSTGRESQL_SUMMARY = f"""
CREATE OR REPLACE VIEW session_summary AS
SELECT
  s.id AS session_id,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id) AS events,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id AND x.type IN {_PG_MSG}) AS messages,
  {_PG_CALLS.format(where="x.session_id = s.id")} AS tool_calls,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq LIMIT 1) AS first_ts,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) AS last_ts
FROM sessions AS s
"""

# Who may read the projection may read the new view (`eventstore roles`, or a DBA's own
# grants on messages). PUBLIC and the owner aside.
POSTGRESQL_GRANTS = r"""
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee::regrole::text AS who
             FROM pg_class AS c, aclexplode(c.relacl) AS a
            WHERE c.oid = 'messages'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
              AND a.privilege_type = 'SELECT'
  LOOP
    EXECUTE format('GRANT SELECT ON messages_uncut TO %s', g.who);
  END LOOP;
END $$"""


def upgrade() -> None:
    # On the driver's connection, as the baseline does: no bind-parameter parsing.
    conn = op.get_bind().connection.driver_connection
    for sql in (*POSTGRESQL_INDEXES, POSTGRESQL_UNCUT, POSTGRESQL_MESSAGES, POSTGRESQL_TOOL_CALLS, POSTGRESQL_TURNS,
                POSTGRESQL_SUMMARY, POSTGRESQL_GRANTS):
        conn.execute(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
