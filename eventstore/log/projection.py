"""The projection: the chat ``messages`` array, computed by one SQL view per database.

The view ``messages(session_id, seq, role, message)`` (defined by the migrations; one per
database, with equal results) is the only definition of the projection; the backend reads
a session's rows as one JSON array text
(:meth:`~eventstore.backends.base.Backend.messages_json`), and :func:`loads` parses it.
``message`` is the JSON text of one chat message, following ``shared/spec/session-log.md``
(``deriveMessages`` of the reference):

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

from eventstore.lazy import LazyModule


class _LazyOrjson:
    """orjson, imported at its first use (then this module's ``orjson`` is orjson itself):
    its import costs more than the rest of the start-up of a command that reads no payload."""

    def __getattr__(self, name: str):
        global orjson
        import orjson

        return getattr(orjson, name)


orjson = _LazyOrjson()
json = LazyModule("json")  # imported at its first use, like orjson

# orjson gives the same objects as json.loads except where it cannot: a lone surrogate
# escape (``"\ud83d"``) or a number beyond a double (``1e400``) makes it raise, and an
# integer outside [-2**63, 2**64) comes back as a float, silently. Such an integer has at
# least 19 digits in a row (so may a string or a float with long digits, which json.loads
# then reads): the runs are found by mapping each byte to '0' (a digit) or ' ' and looking
# for 19 zeros. tests/log/test_projection_fast.py checks that loads() equals json.loads().
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def no_long_digit_run(data: bytes) -> bool:
    """Whether ``data`` (UTF-8 JSON text) has no run of 19 digits or more: then orjson reads
    every integer in it as json.loads does (see above)."""
    return _LONG_RUN not in data.translate(_DIGITS)


def loads(text: str):
    """``json.loads(text)``, through orjson when it gives the same result (see above)."""
    data = text.encode("utf-8", "surrogatepass")
    if no_long_digit_run(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
