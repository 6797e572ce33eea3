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

import orjson

VIEW_NAME = "messages"

# Each message is written by concatenating JSON texts, with one JSON function call per key
# it copies: ``payload -> '$.k'`` is the key's value as JSON text (strings and numbers as
# stored, arrays and objects without whitespace: what ``json()`` writes), NULL when the key
# is missing, and ``'{...,"k":' || NULL`` is NULL, so ``coalesce`` leaves a missing key out.
# SQLite parses the payload once per row (its JSON functions share a small parse cache
# within a statement); json_object()/json()/json_remove() of the first definition (0001)
# parsed and wrote every message three more times. tool_calls is kept when JavaScript finds
# it truthy and it is not an empty array: json_type() says which falsy values to look for
# (an array '[]', a string '""', a number equal to 0; null and false always are).
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
      coalesce('{"role":"user","content":' || (payload -> '$.content') || '}', '{"role":"user"}')
    WHEN 'assistant/message' THEN
      '{"role":"assistant","content":' || coalesce(nullif(payload -> '$.content', 'null'), '""')
      || CASE json_type(payload, '$.tool_calls')
           WHEN 'array' THEN coalesce(',"tool_calls":' || nullif(payload -> '$.tool_calls', '[]'), '')
           WHEN 'object' THEN ',"tool_calls":' || (payload -> '$.tool_calls')
           WHEN 'true' THEN ',"tool_calls":true'
           WHEN 'text' THEN coalesce(',"tool_calls":' || nullif(payload -> '$.tool_calls', '""'), '')
           WHEN 'integer' THEN iif(payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (payload -> '$.tool_calls'))
           WHEN 'real' THEN iif(payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (payload -> '$.tool_calls'))
           ELSE '' END
      || '}'
    ELSE
      '{"role":"tool"' || coalesce(',"tool_call_id":' || (payload -> '$.tool_call_id'), '')
      || coalesce(',"content":' || (payload -> '$.content'), '') || '}'
  END AS message
FROM events
WHERE (type = 'user/message' OR type = 'assistant/message' OR type = 'tool/result')
"""

_SELECT = "SELECT message FROM messages WHERE session_id = ? ORDER BY seq"

# orjson parses the array in about half the time of json.loads, and gives the same objects
# except where it cannot: a lone surrogate escape (``"\ud83d"``) or a number beyond a
# double (``1e400``) makes it raise, and an integer outside [-2**63, 2**64) comes back as a
# float, silently. Such an integer has at least 19 digits in a row; so may a string or a
# float with long digits, which json.loads then reads (slower, the same result). The digit
# runs are found by mapping each byte of the UTF-8 text to '0' (a digit) or ' ' (anything
# else) and looking for 19 zeros: a tenth of orjson's time (a regular expression took three
# times orjson's). tests/test_projection_fast.py checks that loads() equals json.loads().
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def messages_json(conn: sqlite3.Connection, session_id: str) -> str:
    """The projection of one session as JSON array text (``[]`` for no messages).

    The text is what ``JSON.stringify`` of the reference's ``deriveMessages()`` gives, with
    the empty-``tool_calls`` rule applied.
    """
    rows = conn.execute(_SELECT, (session_id,)).fetchall()
    return "[" + ",".join([r[0] for r in rows]) + "]"


def loads(text: str):
    """``json.loads(text)``, through orjson when it gives the same result (see above)."""
    data = text.encode("utf-8", "surrogatepass")
    if _LONG_RUN not in data.translate(_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def derive_messages(conn: sqlite3.Connection, session_id: str) -> list[dict]:
    """The projection of one session: a list of chat message dicts, in seq order."""
    return loads(messages_json(conn, session_id))
