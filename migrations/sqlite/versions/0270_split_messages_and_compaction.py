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

_MSG = "(x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result')"


def _m(alias: str) -> str:
    return _MSG.replace("x.", f"{alias}.")


# The seq where the parts of the assistant/message e end (the next assistant/message).
_SQ_NEXT = f"""coalesce((SELECT n.seq FROM events AS n
            WHERE n.session_id = e.session_id AND n.seq > e.seq AND {_m('n')} AND n.type = 'assistant/message'
            ORDER BY n.seq LIMIT 1), 9223372036854775807)"""
# The events folded into e: itself and its parts.
_SQ_FOLD = f"""x.session_id = e.session_id AND x.seq >= e.seq AND x.seq < {_SQ_NEXT}
              AND (x.seq = e.seq OR (x.type = 'assistant/part'
                                      AND x.payload ->> '$.message_id' = e.payload ->> '$.message_id'))"""

SQLITE_INDEXES = [
    "CREATE INDEX IF NOT EXISTS events_info ON events (session_id, seq) WHERE type = 'session/info'",
    "CREATE INDEX IF NOT EXISTS events_parts ON events (session_id, seq) WHERE type = 'assistant/part'",
    "CREATE INDEX IF NOT EXISTS events_compact ON events (session_id, seq) WHERE type = 'compaction/boundary'",
]

SQLITE_UNCUT = f"""
CREATE VIEW messages_uncut AS
SELECT
  e.session_id,
  e.seq,
  CASE e.type WHEN 'user/message' THEN 'user'
              WHEN 'assistant/message' THEN 'assistant'
              ELSE 'tool' END AS role,
  CASE
    WHEN e.type = 'assistant/message' AND json_type(e.payload, '$.message_id') = 'text'
         AND EXISTS (SELECT 1 FROM events AS p
                      WHERE p.session_id = e.session_id AND p.seq > e.seq AND p.type = 'assistant/part'
                        AND p.seq < {_SQ_NEXT}
                        AND p.payload ->> '$.message_id' = e.payload ->> '$.message_id') THEN
      '{{"role":"assistant","content":' || json_quote(coalesce(
         (SELECT group_concat(text, char(10) || char(10)) FROM (
            SELECT x.payload ->> '$.content' AS text FROM events AS x WHERE {_SQ_FOLD}
              AND json_type(x.payload, '$.content') = 'text' AND x.payload ->> '$.content' <> ''
            ORDER BY x.seq)), ''))
      || coalesce(',"tool_calls":' || nullif(
         (SELECT json_group_array(json(value)) FROM (
            SELECT j.value FROM events AS x, json_each(x.payload, '$.tool_calls') AS j WHERE {_SQ_FOLD}
              AND json_type(x.payload, '$.tool_calls') = 'array'
            ORDER BY x.seq)), '[]'), '')
      || '}}'
    WHEN e.type = 'user/message' THEN
      coalesce('{{"role":"user","content":' || (e.payload -> '$.content') || '}}', '{{"role":"user"}}')
    WHEN e.type = 'assistant/message' THEN
      '{{"role":"assistant","content":' || coalesce(nullif(e.payload -> '$.content', 'null'), '""')
      || CASE json_type(e.payload, '$.tool_calls')
           WHEN 'array' THEN coalesce(',"tool_calls":' || nullif(e.payload -> '$.tool_calls', '[]'), '')
           WHEN 'object' THEN ',"tool_calls":' || (e.payload -> '$.tool_calls')
           WHEN 'true' THEN ',"tool_calls":true'
           WHEN 'text' THEN coalesce(',"tool_calls":' || nullif(e.payload -> '$.tool_calls', '""'), '')
           WHEN 'integer' THEN iif(e.payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (e.payload -> '$.tool_calls'))
           WHEN 'real' THEN iif(e.payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (e.payload -> '$.tool_calls'))
           ELSE '' END
      || '}}'
    ELSE
      '{{"role":"tool"' || coalesce(',"tool_call_id":' || (e.payload -> '$.tool_call_id'), '')
      || coalesce(',"content":' || (e.payload -> '$.content'), '') || '}}'
  END AS message
FROM events AS e
WHERE {_m('e')}
"""

SQLITE_MESSAGES = """
CREATE VIEW messages AS
SELECT m.session_id, m.seq, m.role, m.message
FROM messages_uncut AS m
WHERE m.seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = m.session_id
                         AND c.type = 'compaction/boundary' ORDER BY c.seq DESC LIMIT 1), -1)
"""

SQLITE_TOOL_CALLS = f"""
CREATE VIEW tool_calls AS
SELECT
  c.session_id,
  c.call_seq,
  c.call ->> '$.id' AS call_id,
  c.call ->> '$.function.name' AS name,
  c.call ->> '$.function.arguments' AS arguments,
  r.seq AS result_seq,
  r.payload ->> '$.content' AS result,
  round(r.ts - c.call_ts, 6) AS latency_s,
  CASE WHEN r.seq IS NULL THEN NULL WHEN json_type(r.payload, '$.is_error') = 'true' THEN 1 ELSE 0 END AS is_error
FROM (
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, j.value AS call,
         (SELECT n.seq FROM events AS n
           WHERE n.session_id = a.session_id AND n.seq > a.seq
             AND {_m('n')} AND n.type <> 'tool/result'
           ORDER BY n.seq LIMIT 1) AS next_seq
  FROM (SELECT m.session_id, m.seq, m.ts, m.payload FROM events AS m
         WHERE {_m('m')} AND m.type = 'assistant/message' AND json_type(m.payload, '$.tool_calls') = 'array'
        UNION ALL
        SELECT p.session_id, p.seq, p.ts, p.payload FROM events AS p
         WHERE p.type = 'assistant/part' AND json_type(p.payload, '$.tool_calls') = 'array') AS a,
       json_each(a.payload, '$.tool_calls') AS j
) AS c
LEFT JOIN events AS r
  ON r.session_id = c.session_id
 AND r.seq = (SELECT x.seq FROM events AS x
               WHERE x.session_id = c.session_id AND x.seq > c.call_seq
                 AND x.seq < coalesce(c.next_seq, 9223372036854775807)
                 AND {_MSG} AND x.type = 'tool/result'
                 AND x.payload ->> '$.tool_call_id' = c.call ->> '$.id'
               ORDER BY x.seq LIMIT 1)
"""

# The tool calls of the events x (already limited to a session and a span) of one view.
_SQ_CALLS = """(SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {where} AND {msg} AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array')
  + (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {where} AND x.type = 'assistant/part'
      AND json_type(x.payload, '$.tool_calls') = 'array')"""

SQLITE_TURNS = f"""
CREATE VIEW turns AS
SELECT
  b.session_id,
  b.start_seq,
  b.end_seq,
  b.started_at,
  e.ts AS ended_at,
  round(e.ts - b.started_at, 6) AS duration_s,
  (SELECT count(*) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type = 'step/start') AS steps,
  {_SQ_CALLS.format(where="x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq", msg=_MSG)}
    AS tool_calls,
  b.complete
FROM (
  SELECT w.session_id, w.seq AS start_seq, w.ts AS started_at,
         CASE WHEN w.next_type = 'turn/end' THEN w.next_seq
              WHEN w.next_seq IS NOT NULL THEN w.next_seq - 1
              ELSE (SELECT max(m.seq) FROM events AS m WHERE m.session_id = w.session_id)
         END AS end_seq,
         coalesce(w.next_type = 'turn/end', 0) AS complete
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

SQLITE_SUMMARY = f"""
CREATE VIEW session_summary AS
SELECT
  s.id AS session_id,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id) AS events,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id AND {_MSG}) AS messages,
  {_SQ_CALLS.format(where="x.session_id = s.id", msg=_MSG)} AS tool_calls,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq LIMIT 1) AS first_ts,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) AS last_ts
FROM sessions AS s
"""


def upgrade() -> None:
    bind = op.get_bind()
    for sql in SQLITE_INDEXES:
        bind.exec_driver_sql(sql)
    bind.exec_driver_sql("DROP VIEW IF EXISTS messages_uncut")
    bind.exec_driver_sql(SQLITE_UNCUT)
    for name, sql in (("messages", SQLITE_MESSAGES), ("tool_calls", SQLITE_TOOL_CALLS),
                      ("turns", SQLITE_TURNS), ("session_summary", SQLITE_SUMMARY)):
        bind.exec_driver_sql(f"DROP VIEW {name}")
        bind.exec_driver_sql(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
