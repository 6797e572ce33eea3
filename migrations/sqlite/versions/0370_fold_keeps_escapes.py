"""A fold keeps every escape of its content (SQLite): ``\\u0000`` and lone surrogates too.

Revision ID: 0370
Revises: 0350
Create Date: 2026-12-07

The fold of ``messages_uncut`` (0270) read each part's content with ``->>`` and quoted the
joined text again with ``json_quote``: SQLite's ``->>`` ends a text at ``\\u0000`` (the rest
of the content was lost) and writes a lone surrogate (``\\ud83d``, which JSON.stringify
writes) as bytes that are not UTF-8 (the read of the session failed). The fold now joins
each content's JSON text without its quotes, by an escaped blank line: the bytes
JSON.stringify writes, as the unfolded rows copy theirs. A part's ``message_id`` is compared
as JSON text (two ids that differ after a ``\\u0000`` no longer fold together), and so
are a call's and a result's ids in ``tool_calls`` and ``turns`` (a result of ``"a\\u0000c"``
answered a call of ``"a\\u0000b"``). A call of ``tool_calls`` is its element's JSON text
(``->`` its full key, as the fold takes it since 0350): a string element made a read of the
view fail ("malformed JSON"). Every other rule is 0350's, 0270's and 0300's text.
The four views are dropped and created again; no row is touched.

PostgreSQL's revision of the same number fixes its fold and ``es_json``.
"""
from alembic import op

revision = "0370"
down_revision = "0350"
branch_labels = None
depends_on = None

_MSG = "(x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result')"


def _m(alias: str) -> str:
    return _MSG.replace("x.", f"{alias}.")


# As in 0350 (a revision never imports another): the seq where the parts of the
# assistant/message e end (the next assistant/message), and the events folded into e.
_SQ_NEXT = f"""coalesce((SELECT n.seq FROM events AS n
            WHERE n.session_id = e.session_id AND n.seq > e.seq AND {_m('n')} AND n.type = 'assistant/message'
            ORDER BY n.seq LIMIT 1), 9223372036854775807)"""
_SQ_FOLD = f"""x.session_id = e.session_id AND x.seq >= e.seq AND x.seq < {_SQ_NEXT}
              AND (x.seq = e.seq OR (x.type = 'assistant/part'
                                      AND x.payload -> '$.message_id' = e.payload -> '$.message_id'))"""

SQLITE_UNCUT = f"""
CREATE VIEW messages_uncut AS
SELECT
  e.session_id,
  e.seq,
  CASE e.type WHEN 'user/message' THEN 'user'
              WHEN 'assistant/message' THEN 'assistant'
              ELSE 'tool' END AS role,
  CASE e.type
    WHEN 'user/message' THEN
      coalesce('{{"role":"user","content":' || (e.payload -> '$.content') || '}}', '{{"role":"user"}}')
    WHEN 'tool/result' THEN
      coalesce('{{"role":"tool","tool_call_id":' || (e.payload -> '$.tool_call_id')
               || coalesce(',"content":' || (e.payload -> '$.content') || '}}', '}}'),
               '{{"role":"tool"' || coalesce(',"content":' || (e.payload -> '$.content'), '') || '}}')
    ELSE CASE
      WHEN json_type(e.payload, '$.message_id') = 'text'
           AND EXISTS (SELECT 1 FROM events AS p
                        WHERE p.session_id = e.session_id AND p.seq > e.seq AND p.type = 'assistant/part'
                          AND p.seq < {_SQ_NEXT}
                          AND p.payload -> '$.message_id' = e.payload -> '$.message_id') THEN
        '{{"role":"assistant","content":"' || coalesce(
           (SELECT group_concat(substr(text, 2, length(text) - 2), '\\n\\n') FROM (
              SELECT x.payload -> '$.content' AS text FROM events AS x WHERE {_SQ_FOLD}
                AND json_type(x.payload, '$.content') = 'text' AND x.payload -> '$.content' <> '""'
              ORDER BY x.seq)), '') || '"'
        || coalesce(',"tool_calls":' || nullif(
           (SELECT json_group_array(json(value)) FROM (
              SELECT x.payload -> j.fullkey AS value
                FROM events AS x, json_each(x.payload, '$.tool_calls') AS j WHERE {_SQ_FOLD}
                AND json_type(x.payload, '$.tool_calls') = 'array'
              ORDER BY x.seq)), '[]'), '')
        || '}}'
      ELSE
        '{{"role":"assistant","content":' || coalesce(nullif(e.payload -> '$.content', 'null'), '""')
        || CASE json_type(e.payload, '$.tool_calls')
             WHEN 'array' THEN coalesce(',"tool_calls":' || nullif(e.payload -> '$.tool_calls', '[]') || '}}', '}}')
             WHEN 'object' THEN ',"tool_calls":' || (e.payload -> '$.tool_calls') || '}}'
             WHEN 'true' THEN ',"tool_calls":true}}'
             WHEN 'text' THEN coalesce(',"tool_calls":' || nullif(e.payload -> '$.tool_calls', '""') || '}}', '}}')
             WHEN 'integer' THEN iif(e.payload ->> '$.tool_calls' = 0, '}}',
                                     ',"tool_calls":' || (e.payload -> '$.tool_calls') || '}}')
             WHEN 'real' THEN iif(e.payload ->> '$.tool_calls' = 0, '}}',
                                  ',"tool_calls":' || (e.payload -> '$.tool_calls') || '}}')
             ELSE '}}' END
    END
  END AS message
FROM events AS e
WHERE {_m('e')}
"""

# As 0270 created it (it reads messages_uncut).
SQLITE_MESSAGES = """
CREATE VIEW messages AS
SELECT m.session_id, m.seq, m.role, m.message
FROM messages_uncut AS m
WHERE m.seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = m.session_id
                         AND c.type = 'compaction/boundary' ORDER BY c.seq DESC LIMIT 1), -1)
"""


# As 0270's, but a result answers a call of the same id as JSON text (->> cut both at a
# U+0000), and a call is its element's JSON text (json_each's value of a string element is
# the string, which ->> then read as JSON: "malformed JSON").
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
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, a.payload -> j.fullkey AS call,
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
                 AND x.payload -> '$.tool_call_id' = c.call -> '$.id'
               ORDER BY x.seq LIMIT 1)
"""

# As 0300's, with the same change.
# The tool calls of the events x (already limited to a session and a span).
_SQ_CALLS = f"""(SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {{where}} AND {_MSG} AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array')
  + (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {{where}} AND x.type = 'assistant/part'
      AND json_type(x.payload, '$.tool_calls') = 'array')"""

# The turn w (a turn/start) was answered: the session's last message event after it is an
# assistant/message, and no tool call after it lacks its answering result. An element of
# tool_calls that is not an object has no id (`->` of a path past it is NULL): unanswered.
SQLITE_ANSWERED = """(SELECT m.type FROM events AS m
        WHERE m.session_id = w.session_id AND m.seq > w.seq
          AND (m.type = 'user/message' OR m.type = 'assistant/message' OR m.type = 'tool/result')
        ORDER BY m.seq DESC LIMIT 1) = 'assistant/message'
   AND NOT EXISTS (
     SELECT 1 FROM events AS a, json_each(a.payload, '$.tool_calls') AS j
      WHERE a.session_id = w.session_id AND a.seq > w.seq
        AND (a.type = 'assistant/message' OR a.type = 'assistant/part')
        AND json_type(a.payload, '$.tool_calls') = 'array'
        AND NOT EXISTS (
          SELECT 1 FROM events AS r
           WHERE r.session_id = a.session_id AND r.seq > a.seq AND r.type = 'tool/result'
             AND r.seq < coalesce((SELECT n.seq FROM events AS n
                                    WHERE n.session_id = a.session_id AND n.seq > a.seq
                                      AND (n.type = 'user/message' OR n.type = 'assistant/message')
                                    ORDER BY n.seq LIMIT 1), 9223372036854775807)
             AND r.payload -> '$.tool_call_id' = a.payload -> (j.fullkey || '.id')))"""

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
  {_SQ_CALLS.format(where="x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq")}
    AS tool_calls,
  b.complete
FROM (
  SELECT w.session_id, w.seq AS start_seq, w.ts AS started_at,
         CASE WHEN w.next_type = 'turn/end' THEN w.next_seq
              WHEN w.next_seq IS NOT NULL THEN w.next_seq - 1
              ELSE (SELECT max(m.seq) FROM events AS m WHERE m.session_id = w.session_id)
         END AS end_seq,
         CASE WHEN w.next_type = 'turn/end' THEN 1
              WHEN w.next_seq IS NOT NULL THEN 0
              WHEN {SQLITE_ANSWERED} THEN 1
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
    bind = op.get_bind()
    bind.exec_driver_sql("DROP VIEW messages")
    bind.exec_driver_sql("DROP VIEW messages_uncut")
    bind.exec_driver_sql(SQLITE_UNCUT)
    bind.exec_driver_sql(SQLITE_MESSAGES)
    for name, sql in (("tool_calls", SQLITE_TOOL_CALLS), ("turns", SQLITE_TURNS)):
        bind.exec_driver_sql(f"DROP VIEW {name}")
        bind.exec_driver_sql(sql)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
