"""A session's last turn is complete when it was answered, as the session is.

Revision ID: 0300
Revises: 0290
Create Date: 2026-12-07

Most agents' transcripts have no end-of-turn line (Claude Code writes ``turn_duration`` in
some versions only, and ``stop_reason`` is null on most lines), and an import never writes a
guessed ``turn/end``: the file may go on. The session is *complete* when its last turn ended
or was answered (docs/import-export.md, "When a session is finished"; the viewer's rule,
``eventstore.web.index.Summary``), so the ``turns`` view says the same of that turn: the
last turn of a session (no ``turn/start`` or ``turn/end`` after it) is complete when the
last message event of the session is an ``assistant/message`` and every tool call made in
the turn (of an ``assistant/message`` or an ``assistant/part``) has its answering
``tool/result`` (the ``tool_calls`` view's rule: before the next user or assistant
message). A turn cut by the next ``turn/start`` stays incomplete, and every other column is
as before.

The view is dropped and created again. No row is touched. The check runs for a session's
last turn only, through the ``(session_id, seq)`` key.
"""
from alembic import op

revision = "0300"
down_revision = "0290"
branch_labels = None
depends_on = None

_MSG = "(x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result')"

# The tool calls of the events x (already limited to a session and a span).
_SQ_CALLS = f"""(SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {{where}} AND {_MSG} AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array')
  + (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE {{where}} AND x.type = 'assistant/part'
      AND json_type(x.payload, '$.tool_calls') = 'array')"""

# The turn w (a turn/start) was answered: the session's last message event after it is an
# assistant/message, and no tool call after it lacks its answering result. An element of
# tool_calls that is not an object has no id (`->>` of a path past it is NULL): unanswered.
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
             AND r.payload ->> '$.tool_call_id' = a.payload ->> (j.fullkey || '.id')))"""

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
    bind.exec_driver_sql("DROP VIEW turns")
    bind.exec_driver_sql(SQLITE_TURNS)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
