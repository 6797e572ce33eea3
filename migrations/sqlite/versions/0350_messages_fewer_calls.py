"""The projection makes fewer SQL calls a row (SQLite): the same bytes, cheaper.

Revision ID: 0350
Revises: 0340
Create Date: 2026-12-07

``messages_uncut`` (revision 0270) tested the fold of an ``assistant/message`` first, for
every row, and built a ``tool/result`` with five concatenations. SQLite 3.40 keeps a parse
of the last few JSON texts a statement read (so a row's payload is parsed once, not once per
JSON function), but each JSON function call still costs about as much again as that parse
(looking the text up among the kept ones, walking the path, copying out the result), and
each ``||`` a copy: the view's cost is its calls and copies. This revision branches on the
event type first (a ``user/message`` or ``tool/result`` row makes no call for the fold), lets
an ``assistant/message`` close its object in the ``tool_calls`` branch (one copy less), and
builds a ``tool/result`` holding both keys with four copies. Measured on the benchmark's
sessions (docs/benchmarks.md, "Read one session"): about 5% fewer instructions a message.

Every row's ``message`` is byte for byte what 0270's view gives (the fold and every other
rule are the same text), proven on random payloads and on folds in
tests/log/test_projection_fast.py, but for one fix: a fold took each tool call as
``json(value)`` of ``json_each``, the *value* of a string element (not its JSON text), so a
tool call that is a string made the whole read fail ("malformed JSON") or changed it
(``"1"`` became ``1``, ``true`` became ``1``); it now takes the element's JSON text (``->``
its full key), as PostgreSQL's fold and the unfolded rule do. Tool calls that are objects
(every agent's) come out as before. ``messages`` is created again as it was (it reads
``messages_uncut``). No row is touched.

PostgreSQL: its revision of the same number changes nothing (its view reads each field
once through a lateral subquery already).
"""
from alembic import op

revision = "0350"
down_revision = "0340"
branch_labels = None
depends_on = None

_MSG = "(x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result')"


def _m(alias: str) -> str:
    return _MSG.replace("x.", f"{alias}.")


# As in 0270 (a revision never imports another): the seq where the parts of the
# assistant/message e end (the next assistant/message), and the events folded into e.
_SQ_NEXT = f"""coalesce((SELECT n.seq FROM events AS n
            WHERE n.session_id = e.session_id AND n.seq > e.seq AND {_m('n')} AND n.type = 'assistant/message'
            ORDER BY n.seq LIMIT 1), 9223372036854775807)"""
_SQ_FOLD = f"""x.session_id = e.session_id AND x.seq >= e.seq AND x.seq < {_SQ_NEXT}
              AND (x.seq = e.seq OR (x.type = 'assistant/part'
                                      AND x.payload ->> '$.message_id' = e.payload ->> '$.message_id'))"""

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
                          AND p.payload ->> '$.message_id' = e.payload ->> '$.message_id') THEN
        '{{"role":"assistant","content":' || json_quote(coalesce(
           (SELECT group_concat(text, char(10) || char(10)) FROM (
              SELECT x.payload ->> '$.content' AS text FROM events AS x WHERE {_SQ_FOLD}
                AND json_type(x.payload, '$.content') = 'text' AND x.payload ->> '$.content' <> ''
              ORDER BY x.seq)), ''))
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

# As 0270 created it.
SQLITE_MESSAGES = """
CREATE VIEW messages AS
SELECT m.session_id, m.seq, m.role, m.message
FROM messages_uncut AS m
WHERE m.seq > coalesce((SELECT c.seq FROM events AS c WHERE c.session_id = m.session_id
                         AND c.type = 'compaction/boundary' ORDER BY c.seq DESC LIMIT 1), -1)
"""


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql("DROP VIEW messages")
    bind.exec_driver_sql("DROP VIEW messages_uncut")
    bind.exec_driver_sql(SQLITE_UNCUT)
    bind.exec_driver_sql(SQLITE_MESSAGES)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
