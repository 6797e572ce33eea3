"""Audit views: tool_calls, turns, session_summary.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

The view definitions are written out here, not imported, so that this revision means the
same thing forever; a later change to a view is a new migration (DROP VIEW + CREATE VIEW).
They use only SQLite's built-in SQL (JSON functions, ``->``/``->>``, SQLite >= 3.38), so
they work in any connection: the ``sqlite3`` shell, datasette, a plain ``sqlite3.connect``.
docs/schema.md documents every column.

Shared rules (the same as ``eventstore verify``, see :mod:`eventstore.audit`):

* the calls of an ``assistant/message`` are the elements of its ``tool_calls`` when that is
  a JSON array (anything else is not a list of calls);
* the ``tool/result`` answering a call is the first one after the call that carries the
  call's id, before the next ``user/message`` or ``assistant/message`` of the session (a
  result after that point would be rejected by a chat API; it answers nothing);
* a turn runs from a ``turn/start`` to the next ``turn/start`` or ``turn/end`` of its session;
  it is complete when that next one is a ``turn/end`` (its ``end_seq``); otherwise it ends at
  the event before the next ``turn/start``, or at the session's last event;
* the conditions ``type IN (<the three message types>) AND type = ...`` repeat the
  ``events_messages`` partial index's WHERE term word for word, so SQLite can use that
  index (it only uses a partial index when the query contains its WHERE term).

A later migration that recreates ``events`` (Alembic batch mode) must drop these views and
``messages`` first and create them again after: SQLite refuses to rename a table into place
while a view refers to a missing one.
"""
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_MSG = "('user/message', 'assistant/message', 'tool/result')"

TOOL_CALLS = f"""
CREATE VIEW tool_calls AS
SELECT
  c.session_id,
  c.call_seq,
  c.call ->> '$.id' AS call_id,
  c.call ->> '$.function.name' AS name,
  c.call ->> '$.function.arguments' AS arguments,
  r.seq AS result_seq,
  r.payload ->> '$.content' AS result,
  round(r.ts - c.call_ts, 6) AS latency_s
FROM (
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, j.value AS call,
         (SELECT n.seq FROM events AS n
           WHERE n.session_id = a.session_id AND n.seq > a.seq
             AND n.type IN {_MSG} AND n.type <> 'tool/result'
           ORDER BY n.seq LIMIT 1) AS next_seq
  FROM events AS a, json_each(a.payload, '$.tool_calls') AS j
  WHERE a.type IN {_MSG} AND a.type = 'assistant/message'
    AND json_type(a.payload, '$.tool_calls') = 'array'
) AS c
LEFT JOIN events AS r
  ON r.session_id = c.session_id
 AND r.seq = (SELECT x.seq FROM events AS x
               WHERE x.session_id = c.session_id AND x.seq > c.call_seq
                 AND x.seq < coalesce(c.next_seq, 9223372036854775807)
                 AND x.type IN {_MSG} AND x.type = 'tool/result'
                 AND x.payload ->> '$.tool_call_id' = c.call ->> '$.id'
               ORDER BY x.seq LIMIT 1)
"""

TURNS = f"""
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
  (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type IN {_MSG} AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array') AS tool_calls,
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

SESSION_SUMMARY = f"""
CREATE VIEW session_summary AS
SELECT
  s.id AS session_id,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id) AS events,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id AND x.type IN {_MSG}) AS messages,
  (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE x.session_id = s.id AND x.type IN {_MSG} AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array') AS tool_calls,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq LIMIT 1) AS first_ts,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) AS last_ts
FROM sessions AS s
"""

VIEWS = {"tool_calls": TOOL_CALLS, "turns": TURNS, "session_summary": SESSION_SUMMARY}


def upgrade() -> None:
    for ddl in VIEWS.values():
        op.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
