"""The JSONL codec: JSON text exactly as JavaScript's ``JSON.stringify`` writes it.

The reference implementation (``shared/reference/session.mjs``) saves a session as one
``JSON.stringify`` line per event. To stay byte-compatible, every JSON text the store writes
(the stored payloads and every exported line) follows the same rules:

* no spaces; object keys in JavaScript's property order: keys that are array indices
  (``"0"``, ``"7"``, ... up to 2**32-2) first in ascending numeric order, then every other
  key in insertion order;
* non-ASCII characters written as themselves; ``"`` ``\\`` and control characters escaped
  (``\\b \\f \\n \\r \\t``, others as lower-case ``\\u00XX``); a lone UTF-16 surrogate as
  ``\\udXXX`` (well-formed ``JSON.stringify``), a high+low pair as the character it encodes;
* numbers as JavaScript's ``Number.prototype.toString`` writes them (``1`` not ``1.0``,
  ``1e-7``, ``1e+21``, ``-0`` as ``0``); an integer that a double cannot hold exactly is
  refused rather than rounded, and so are NaN and Infinity.

Reading is the reference loader made strict: lines split on ``\\n`` only (U+2028 and
friends are content), a trailing ``\\r`` dropped, blank lines skipped, and every other line
checked (see :class:`JsonlReader`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from json.encoder import encode_basestring as _c_encode_str  # C: keeps non-ASCII as is
from typing import IO, Any

from .errors import InvalidEvent, InvalidJSONL

__all__ = [
    "JsonlReader",
    "chain_hash",
    "dumps",
    "event_line",
    "file_name_for",
    "genesis_hash",
    "js_number",
    "meta_line",
    "parse_line",
    "session_id_from_file_name",
]

MAX_SAFE_INTEGER = 2**53 - 1
RESERVED_KEYS = ("type", "seq", "ts")

_SURROGATES = re.compile("[\ud800-\udfff]+")
# C encoder used to check that a parsed line is already in canonical form.
_c_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# Texts on which Python's and JavaScript's number forms may differ (or that a double cannot
# hold exactly): long digit runs, exponents, floats ending in ".0". A false hit only sends
# the line down the slower, exact path.
_NUMBER_SUSPECT = re.compile(r"[0-9]{16}|[0-9][eE]|\.0(?=[,}\]]|$)|[{,]\"[0-9]")


# --- numbers -------------------------------------------------------------------------

def _js_float(f: float) -> str:
    if f != f or f in (math.inf, -math.inf):
        raise InvalidEvent(f"{f!r} is not a JSON number (NaN and Infinity are refused)")
    if f == 0.0:
        return "0"
    if -9007199254740992.0 <= f <= 9007199254740992.0 and f.is_integer():
        return str(int(f))
    r = repr(f)
    if "e" not in r:
        # Python writes fixed notation only for 1e-4 <= |f| < 1e16, inside JavaScript's
        # fixed range, and with the same shortest round-trip digits.
        return r
    mantissa, _, exp = r.partition("e")
    neg = mantissa.startswith("-")
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    k = len(digits)
    n = int(exp) + 1  # value = 0.digits * 10**n
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e >= 0 else "e-") + str(abs(e))
    return "-" + s if neg else s


def js_number(x: int | float) -> str:
    """Return the text JavaScript writes for the number ``x`` (``Number.prototype.toString``).

    Raises :class:`InvalidEvent` for NaN, Infinity, and integers that would not read back
    equal: beyond 2**53 an integer is kept only when JavaScript's text for it reads back as
    the same value (``66773554652564690``, ``10**21`` as ``1e+21``); ``2**60`` would come
    back as ``1152921504606847000`` and is refused rather than rounded.
    """
    if type(x) is int or (isinstance(x, int) and not isinstance(x, bool)):
        x = int(x)
        if -9007199254740992 <= x <= 9007199254740992:
            return str(x)
        try:
            text = _js_float(float(x))
        except (OverflowError, InvalidEvent):
            text = None
        if text is None or json.loads(text) != x:
            raise InvalidEvent(f"integer {x} cannot be stored exactly as a JSON number (IEEE double)")
        return text
    return _js_float(float(x))


# --- values --------------------------------------------------------------------------

def _fix_surrogates(s: str) -> str:
    """Pair adjacent high+low surrogates; escape lone ones as JSON.stringify does."""

    def repl(m: re.Match) -> str:
        run = m.group()
        out = []
        i = 0
        while i < len(run):
            c = ord(run[i])
            if 0xD800 <= c <= 0xDBFF and i + 1 < len(run) and 0xDC00 <= ord(run[i + 1]) <= 0xDFFF:
                out.append(chr(0x10000 + ((c - 0xD800) << 10) + (ord(run[i + 1]) - 0xDC00)))
                i += 2
            else:
                out.append(f"\\u{c:04x}")
                i += 1
        return "".join(out)

    return _SURROGATES.sub(repl, s)


def _is_index(key: str) -> bool:
    """True for keys JavaScript treats as array indices: "0" or [1-9][0-9]*, below 2**32-1."""
    return key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) < 4294967295


def js_items(d: dict) -> Any:
    """``d``'s items in the order JavaScript enumerates (and ``JSON.stringify`` writes) them."""
    for k in d:
        if type(k) is str and k[:1].isdigit():
            break
    else:
        return d.items()
    index_keys = sorted((k for k in d if type(k) is str and _is_index(k)), key=int)
    if not index_keys:
        return d.items()
    first = set(index_keys)
    return [(k, d[k]) for k in index_keys] + [(k, v) for k, v in d.items() if k not in first]


def _encode(o: Any, out: list) -> None:
    t = type(o)
    if t is str:
        out.append(_c_encode_str(o))
    elif t is dict:
        if not o:
            out.append("{}")
            return
        sep = "{"
        for k, v in js_items(o):
            if type(k) is not str:
                if not isinstance(k, str):
                    raise InvalidEvent(f"object key {k!r} is not a string")
                k = str.__str__(k)
            out.append(sep)
            out.append(_c_encode_str(k))
            out.append(":")
            _encode(v, out)
            sep = ","
        out.append("}")
    elif t is list or t is tuple:
        if not o:
            out.append("[]")
            return
        sep = "["
        for v in o:
            out.append(sep)
            _encode(v, out)
            sep = ","
        out.append("]")
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif t is int or t is float:
        out.append(js_number(o))
    elif isinstance(o, str):
        out.append(_c_encode_str(str.__str__(o)))
    elif isinstance(o, (int, float)) and not isinstance(o, bool):
        out.append(js_number(o))
    elif isinstance(o, dict):
        _encode(dict(o), out)
    elif isinstance(o, (list, tuple)):
        _encode(list(o), out)
    else:
        raise InvalidEvent(f"{type(o).__name__} value {o!r:.60} is not JSON")


def dumps(obj: Any) -> str:
    """Serialize ``obj`` exactly as ``JSON.stringify`` would (see the module docstring).

    ``obj`` is made of dict (str keys), list/tuple, str, int, float, bool and None.
    Raises :class:`InvalidEvent` for anything else, NaN/Infinity, non-string keys,
    integers beyond what a double holds exactly, and nesting too deep or circular.
    """
    out: list = []
    try:
        _encode(obj, out)
    except RecursionError:
        raise InvalidEvent("value is nested too deeply (or contains itself)") from None
    s = "".join(out)
    if _SURROGATES.search(s):
        s = _fix_surrogates(s)
    return s


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """Parse JSON text; NaN/Infinity are refused (JavaScript never writes them).

    Lone surrogate escapes (``\\ud83d``) are kept as lone surrogates in the ``str``.
    Raises ``ValueError`` (``json.JSONDecodeError``) on invalid input.
    """
    return json.loads(text, parse_constant=_reject_constant)


# --- lines ---------------------------------------------------------------------------

def meta_line(session_id: str, meta_json: str = "{}") -> str:
    """The first line of an exported file: ``{"type":"session/meta","id":ID,...meta}``.

    ``meta_json`` is the stored JSON object text of the meta line's other keys.
    """
    if meta_json[2:3].isdigit():  # index keys go before type and id in JavaScript
        return dumps({"type": "session/meta", "id": session_id, **loads(meta_json)})
    head = '{"type":"session/meta","id":' + dumps(session_id)
    return head + ("}" if meta_json == "{}" else "," + meta_json[1:])


def event_line(type_: str, seq: int, ts: float, payload_json: str) -> str:
    """One exported event line (no trailing newline): ``{"type","seq","ts",...payload}``.

    ``payload_json`` is the stored payload, a JSON object text already in canonical form.
    """
    if payload_json[2:3].isdigit():  # index keys go before type, seq and ts in JavaScript
        return dumps({"type": type_, "seq": seq, "ts": ts, **loads(payload_json)})
    head = '{"type":' + _c_encode_str(type_) + ',"seq":' + str(seq) + ',"ts":' + _js_float(ts)
    if _SURROGATES.search(head):
        head = _fix_surrogates(head)
    return head + ("}" if payload_json == "{}" else "," + payload_json[1:])


def genesis_hash(session_id: str) -> str:
    """The hash chain's start for a session: SHA-256 (hex) of ``{"type":"session/meta","id":ID}``."""
    return hashlib.sha256(meta_line(session_id).encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, line: str) -> str:
    """The hash of an event: SHA-256 (hex, 64 characters) of ``prev_hash + "\\n" + line``.

    ``prev_hash`` is the previous event's hash in the same session, or
    :func:`genesis_hash` for seq 0; ``line`` is the event's JSONL line (:func:`event_line`),
    the canonical form. The chain binds each event to its session, its seq and all that
    came before it: an edit, a deleted or reordered event breaks every later hash.
    """
    return hashlib.sha256((prev_hash + "\n" + line).encode("utf-8")).hexdigest()


def sql_chain_hash(prev_hash: str | None, session_id: str, type_: str, seq: int, ts: float, payload: str) -> str:
    """:func:`chain_hash` as the SQL function ``eventstore_chain`` used by the append path."""
    return chain_hash(genesis_hash(session_id) if prev_hash is None else prev_hash,
                      event_line(type_, seq, ts, payload))


def payload_json(payload: dict) -> str:
    """Validate an append's payload and return its canonical JSON object text.

    Raises :class:`InvalidEvent` when ``payload`` is not a dict, holds a reserved key
    (``type``, ``seq``, ``ts``), an ``event_id`` that is not a non-empty string, or anything
    that is not JSON.
    """
    if not isinstance(payload, dict):
        raise InvalidEvent(f"payload must be a dict (a JSON object), not {type(payload).__name__}")
    for key in RESERVED_KEYS:
        if key in payload:
            raise InvalidEvent(f"payload key {key!r} is reserved: the store sets type, seq and ts")
    if "event_id" in payload and (type(payload["event_id"]) is not str or not payload["event_id"]):
        raise InvalidEvent(f"payload key 'event_id' (the idempotency key) must be a non-empty string, "
                           f"not {payload['event_id']!r:.60}")
    return dumps(payload)


def parse_line(text: str) -> tuple[dict, str | None]:
    """Parse one JSONL line into ``(object, canonical_payload_or_None)``.

    When the line is already exactly what ``JSON.stringify`` writes and starts with the keys
    ``type``, ``seq``, ``ts``, the second item is the payload's canonical text sliced from the
    line (no re-encoding); otherwise it is None and the caller re-encodes.
    Raises ``ValueError`` for invalid JSON (NaN and Infinity included).
    """
    obj = json.loads(text, parse_constant=_reject_constant)
    if type(obj) is not dict or _NUMBER_SUSPECT.search(text):
        return obj, None
    try:
        if _c_dumps(obj) != text:
            return obj, None
    except ValueError:  # 1e999 parses to inf: the exact path says where
        return obj, None
    it = iter(obj)
    if next(it, None) != "type" or next(it, None) != "seq" or next(it, None) != "ts":
        return obj, None
    t, seq, ts = obj["type"], obj["seq"], obj["ts"]
    if type(t) is not str or type(seq) is not int or type(ts) not in (int, float):
        return obj, None
    cut = 8 + len(_c_encode_str(t)) + 7 + len(str(seq)) + 6 + len(repr(ts))
    if text[cut] == "}":
        return obj, "{}"
    return obj, "{" + text[cut + 1:]


class JsonlReader:
    """Stream a JSONL session file into validated rows, strictly.

    ``JsonlReader(fileobj, name)``: ``fileobj`` is a binary file; ``name`` is what errors
    call it. Iterating yields ``(seq, type, ts, payload_json)`` tuples in file order; the
    ``session/meta`` line is consumed and exposed as ``session_id`` and ``meta_json`` (the
    JSON text of its other keys). ``session_id`` is known once the first event has been
    yielded (the meta line must come before the first event, as the reference writes it)
    or, for a file with no events, once iteration ends.

    Every problem raises :class:`InvalidJSONL` (``FILE:LINE: reason``): invalid UTF-8,
    invalid JSON (a truncated last line says so), a line that is not an object, ``type``
    missing or not a string, ``seq`` missing, not an integer, not the next one (starting at
    0) or above 2**53-1, ``ts`` missing or not a finite number, NaN/Infinity anywhere, a
    reserved key problem, a second ``session/meta`` naming another id, or no meta at all
    (unless ``session_id`` was given).
    """

    def __init__(self, fileobj: IO[bytes], name: str, session_id: str | None = None):
        self.fileobj = fileobj
        self.name = name
        self.session_id = session_id
        self._forced_id = session_id is not None
        self.meta_json = "{}"
        self._meta_seen = False
        self.events = 0
        self.lines = 0

    def _err(self, line: int, reason: str) -> InvalidJSONL:
        return InvalidJSONL(self.name, line, reason)

    def _lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """Yield (line number, line bytes without \\n or trailing \\r, is_last_unterminated)."""
        buf = b""
        lineno = 0
        read = self.fileobj.read
        while True:
            chunk = read(1 << 20)
            if not chunk:
                break
            buf += chunk
            parts = buf.split(b"\n")
            buf = parts.pop()
            for raw in parts:
                lineno += 1
                yield lineno, raw[:-1] if raw.endswith(b"\r") else raw, False
        if buf:
            lineno += 1
            yield lineno, buf[:-1] if buf.endswith(b"\r") else buf, True
        self.lines = lineno

    def __iter__(self) -> Iterator[tuple[int, str, float, str, str]]:
        expected = 0
        for lineno, raw, unterminated in self._lines():
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise self._err(lineno, f"invalid UTF-8 at byte {e.start + 1} of the line") from None
            try:
                obj, payload = parse_line(text)
            except ValueError as e:
                if unterminated:
                    reason = f"truncated last line (no newline, invalid JSON: {_json_reason(e)})"
                    raise self._err(lineno, reason) from None
                raise self._err(lineno, f"invalid JSON: {_json_reason(e)}") from None
            if type(obj) is not dict:
                raise self._err(lineno, f"not a JSON object but {_json_kind(obj)}")
            t = obj.get("type")
            if "type" not in obj:
                raise self._err(lineno, "'type' is missing")
            if type(t) is not str or not t:
                raise self._err(lineno, f"'type' must be a non-empty string, not {_json_kind(t)}")
            if t == "session/meta":
                self._meta(lineno, obj)
                continue
            if self.session_id is None:
                raise self._err(lineno, "event before any session/meta line "
                                        "(no session id; give one with --session-id)")
            if "seq" not in obj:
                raise self._err(lineno, "'seq' is missing")
            seq = obj["seq"]
            if type(seq) is float and seq.is_integer():
                seq = int(seq)  # JavaScript writes 3, but 3.0 is the same number
            if type(seq) is not int:
                raise self._err(lineno, f"'seq' must be an integer, not {_json_kind(seq)}")
            if seq > MAX_SAFE_INTEGER or seq < 0:
                raise self._err(lineno, f"'seq' {seq} is out of range (0 to 2**53-1)")
            if seq != expected:
                if expected == 0:
                    raise self._err(lineno, f"'seq' must start at 0, found {seq}")
                what = "duplicated" if seq < expected else "gap"
                raise self._err(lineno, f"'seq' {seq} is not the next one ({expected} expected: {what})")
            if "ts" not in obj:
                raise self._err(lineno, "'ts' is missing")
            ts = obj["ts"]
            if type(ts) not in (int, float) or not math.isfinite(ts):
                raise self._err(lineno, f"'ts' must be a finite number (seconds), not {_json_kind(ts)}")
            if payload is None:
                rest = {k: v for k, v in obj.items() if k not in RESERVED_KEYS}
                try:
                    payload = dumps(rest)
                    text = event_line(t, seq, float(ts), payload)
                except InvalidEvent as e:
                    raise self._err(lineno, str(e)) from None
            expected += 1
            self.events = expected
            yield seq, t, float(ts), payload, text
        if self.session_id is None:
            raise self._err(self.lines, "no session/meta line (no session id; give one with --session-id)")

    def _meta(self, lineno: int, obj: dict) -> None:
        sid = obj.get("id")
        if type(sid) is not str or not sid:
            raise self._err(lineno, "session/meta needs a non-empty string 'id'")
        if self._meta_seen:
            if sid != self.session_id:
                raise self._err(lineno, f"second session/meta names another id ({sid!r}, not {self.session_id!r})")
            return
        if self.events:
            raise self._err(lineno, "session/meta after the first event")
        self._meta_seen = True
        if not self._forced_id:
            self.session_id = sid
        rest = {k: v for k, v in obj.items() if k not in ("type", "id")}
        try:
            self.meta_json = dumps(rest)
        except InvalidEvent as e:
            raise self._err(lineno, str(e)) from None


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return f"the number {v}"
    if isinstance(v, str):
        return "a string" if v else "an empty string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _json_reason(e: ValueError) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg.removesuffix(' at')} at column {e.colno}"
    return str(e)


# --- file names ----------------------------------------------------------------------

_NAME_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_NAME_BYTES = 200


def file_name_for(session_id: str) -> str:
    """A safe file name for a session's export: ``<encoded id>.jsonl``.

    Session ids come from files and are untrusted. Lower-case ASCII letters, digits, ``-``
    and ``_`` stay as they are; every other character (``/``, ``.``, NUL, upper-case
    letters, so that ids differing only in case never collide on a case-insensitive file
    system) is written ``%XX`` per UTF-8 byte. The name can never leave its folder and maps
    back with :func:`session_id_from_file_name`. An id whose name would pass 200 bytes is
    cut and suffixed with ``~`` and 16 hex digits of its SHA-256 (the id is in the file's
    ``session/meta`` line).
    """
    import hashlib

    data = session_id.encode("utf-8", "surrogatepass")
    name = "".join(chr(b) if chr(b) in _NAME_SAFE else f"%{b:02X}" for b in data)
    if len(name) > MAX_NAME_BYTES:
        name = name[:MAX_NAME_BYTES - 17] + "~" + hashlib.sha256(data).hexdigest()[:16]
    return name + ".jsonl"


def session_id_from_file_name(name: str) -> str | None:
    """The session id encoded in a :func:`file_name_for` name, or None for a cut (hashed) name."""
    from urllib.parse import unquote_to_bytes

    stem = name[:-6] if name.endswith(".jsonl") else name
    if "~" in stem:
        return None
    return unquote_to_bytes(stem).decode("utf-8", "surrogatepass")
