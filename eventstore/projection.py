"""The projection: the chat ``messages`` array, computed by one SQL view.

The view ``messages(session_id, seq, role, message)`` is the only definition of the
projection; :func:`derive_messages` reads it. ``message`` is the JSON text of one chat
message, following ``shared/spec/session-log.md`` (``deriveMessages`` of the reference):

* ``user/message`` -> ``{"role":"user","content":content}``
* ``assistant/message`` -> ``{"role":"assistant","content":content ?? "","tool_calls":[...]}``,
  ``tool_calls`` only when JavaScript would find it truthy and it is not an empty array
  (chat APIs reject ``tool_calls: []``; the reference keeps it, the fixtures drop it);
* ``tool/result`` -> ``{"role":"tool","tool_call_id":id,"content":content}``;

a key whose source is missing is left out (as ``JSON.stringify`` drops ``undefined``), a
JSON ``null`` is kept. Payload values are copied as stored JSON text, so strings (lone
surrogates included) and numbers come out exactly as they went in.
"""

from __future__ import annotations

import json
import sqlite3

VIEW_NAME = "messages"

# json_remove() of a key that is absent from the object is a no-op: '$.none' is how a
# CASE says "remove nothing".
CREATE_MESSAGES_VIEW = """
CREATE VIEW messages AS
SELECT
  session_id,
  seq,
  CASE type WHEN 'user/message' THEN 'user'
            WHEN 'assistant/message' THEN 'assistant'
            ELSE 'tool' END AS role,
  CASE type
    WHEN 'user/message' THEN
      json_remove(json_object('role', 'user', 'content', json(payload -> '$.content')),
                  CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
    WHEN 'assistant/message' THEN
      json_remove(
        json_object('role', 'assistant',
                    'content', CASE WHEN coalesce(json_type(payload, '$.content'), 'null') = 'null'
                                   THEN '' ELSE json(payload -> '$.content') END,
                    'tool_calls', json(payload -> '$.tool_calls')),
        CASE WHEN coalesce(json_type(payload, '$.tool_calls'), 'null') IN ('null', 'false')
               OR (json_type(payload, '$.tool_calls') IN ('integer', 'real') AND payload ->> '$.tool_calls' = 0)
               OR (json_type(payload, '$.tool_calls') = 'text' AND payload -> '$.tool_calls' = '""')
               OR (json_type(payload, '$.tool_calls') = 'array'
                   AND json_array_length(payload, '$.tool_calls') = 0)
             THEN '$.tool_calls' ELSE '$.none' END)
    ELSE
      json_remove(
        json_object('role', 'tool',
                    'tool_call_id', json(payload -> '$.tool_call_id'),
                    'content', json(payload -> '$.content')),
        CASE WHEN json_type(payload, '$.tool_call_id') IS NULL THEN '$.tool_call_id' ELSE '$.none' END,
        CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
  END AS message
FROM events
WHERE type IN ('user/message', 'assistant/message', 'tool/result')
"""

_SELECT = "SELECT message FROM messages WHERE session_id = ? ORDER BY seq"


def messages_json(conn: sqlite3.Connection, session_id: str) -> str:
    """The projection of one session as JSON array text (``[]`` for no messages).

    The text is what ``JSON.stringify`` of the reference's ``deriveMessages()`` gives, with
    the empty-``tool_calls`` rule applied.
    """
    rows = conn.execute(_SELECT, (session_id,)).fetchall()
    return "[" + ",".join([r[0] for r in rows]) + "]"


def derive_messages(conn: sqlite3.Connection, session_id: str) -> list[dict]:
    """The projection of one session: a list of chat message dicts, in seq order."""
    return json.loads(messages_json(conn, session_id))
