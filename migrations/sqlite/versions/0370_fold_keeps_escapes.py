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
as JSON text (two ids that differ after a ``\\u0000`` no longer fold together). Every other
rule is 0350's text. ``messages`` is created again as it was; no row is touched.

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


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql("DROP VIEW messages")
    bind.exec_driver_sql("DROP VIEW messages_uncut")
    bind.exec_driver_sql(SQLITE_UNCUT)
    bind.exec_driver_sql(SQLITE_MESSAGES)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
