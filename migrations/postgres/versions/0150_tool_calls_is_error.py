"""The tool_calls view gets is_error: whether the tool/result says the tool failed.

Revision ID: 0150
Revises: 0100
Create Date: 2026-12-02

A ``tool/result`` may carry ``"is_error": true`` (docs/session-log-format.md,
"Extensions"): the agent frameworks' adapters set it when a tool raised or its result was
an error. ``tool_calls.is_error`` is 1 when the answering result carries ``is_error:
true``, 0 when it does not (or carries anything else), NULL when no result answers the call.
Everything else in the view is as in the baseline (0008), one definition per database.
SQLite: the view is dropped and created again (no row is touched). PostgreSQL: ``CREATE OR
REPLACE VIEW`` adds the column at the end and keeps the grants on the view (the auditor's
and writer's SELECT, ``eventstore roles``), which a DROP would lose.
"""
from alembic import op

revision = "0150"
down_revision = "0100"
branch_labels = None
depends_on = None

_PG_MSG = "('user/message', 'assistant/message', 'tool/result')"

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
  WHERE a.type IN {_PG_MSG} AND a.type = 'assistant/message'
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


def upgrade() -> None:
    # On the driver's connection, as the baseline does: no bind-parameter parsing.
    op.get_bind().connection.driver_connection.execute(POSTGRESQL_TOOL_CALLS)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
