"""The JSON codec: JSON text exactly as JavaScript's ``JSON.stringify`` writes it.

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

The JSONL line is spelled in :mod:`eventstore.log.line`, hashed in :mod:`eventstore.log.chain`;
the JSONL reader is :mod:`eventstore.io.jsonl`.
orjson (a required dependency, at a version that writes exponents with their sign as
JavaScript does) writes and proves the common payloads; the pure-Python encoder decides
every doubtful case and gives every error its message.
"""

from __future__ import annotations

import math
from itertools import repeat

try:  # C: keeps non-ASCII as is (json.encoder's, without importing json: its import compiles its patterns)
    from _json import encode_basestring as _c_encode_str
except ImportError:  # pragma: no cover - an interpreter without json's C part
    from json.encoder import encode_basestring as _c_encode_str

from eventstore.errors import InvalidEvent
from eventstore.lazy import LazyPattern

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    import re
    from typing import Any

__all__ = [
    "dumps",
    "canonical_bytes",
    "canonical_bytes_many",
    "encodable",
    "good_event_id",
    "fix_surrogates",
    "js_float",
    "js_number",
    "js_truthy",
    "loads",
    "payload_json",
    "payload_json_stored",
    "payload_jsons",
]

MAX_SAFE_INTEGER = 2**53 - 1
RESERVED_KEYS = ("type", "seq", "ts")

SURROGATES = LazyPattern("[\ud800-\udfff]+")  # (compiled at first use: not at start-up)


# --- numbers -------------------------------------------------------------------------

def js_float(f: float) -> str:
    """The text JavaScript writes for the double ``f``; raises :class:`InvalidEvent` for NaN
    and Infinity."""
    if f != f or f in (math.inf, -math.inf):
        raise InvalidEvent(f"{f!r} is not a JSON number (NaN and Infinity are refused)")
    if type(f) is float:
        # orjson (Ryu) writes the same shortest round-trip digits as repr() and JavaScript;
        # where it writes plain decimal notation with a fraction, so do they (JavaScript's
        # plain range, 1e-7 to 1e21, holds orjson's). A ts is formatted on every append.
        r = _fast_float(f).decode()
        if "e" not in r and not r.endswith(".0"):
            return r
    if f == 0.0:
        return "0"
    if -9007199254740992.0 <= f <= 9007199254740992.0 and f.is_integer():
        return str(int(f))
    r = repr(f)
    if "e" not in r:
        # Python writes fixed notation only for 1e-4 <= |f| < 1e16, inside JavaScript's
        # fixed range, and with the same shortest round-trip digits; an integer-valued
        # double above 2**53 (9007199254740994.0) loses its ".0", as in JavaScript.
        return r[:-2] if r.endswith(".0") else r
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

    JSON numbers in this format are IEEE doubles, as in JavaScript. Raises
    :class:`InvalidEvent` for NaN, Infinity, and integers that a double cannot hold: an
    integer beyond 2**53 is kept when it is exactly a double's value (``2**60`` is written
    ``1152921504606847000``, as JavaScript does) or already JavaScript's digits for the
    nearest double (``123456789012345680000``); ``2**53 + 1`` would be rounded and is refused.
    """
    if type(x) is int or (isinstance(x, int) and not isinstance(x, bool)):
        x = int(x)
        if -9007199254740992 <= x <= 9007199254740992:
            return str(x)
        f = float(x) if abs(x) < 2**1024 else math.inf
        if f != math.inf and f != -math.inf:
            text = js_float(f)
            if int(f) == x or text == str(x):
                return text
        raise InvalidEvent(f"integer {x} cannot be stored exactly as a JSON number (IEEE double)")
    return js_float(float(x))


# --- values --------------------------------------------------------------------------

def fix_surrogates(s: str) -> str:
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

    return SURROGATES.sub(repl, s)


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
    if not s.isascii() and SURROGATES.search(s):
        s = fix_surrogates(s)
    return s


def js_truthy(v: Any) -> bool:
    """JavaScript truthiness of a JSON value."""
    return not (v is None or v is False or (v == 0 and not isinstance(v, bool)) or v == "")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _std_decode(text: str) -> Any:
    """``json.JSONDecoder(parse_constant=_reject_constant).decode``, made at the first call."""
    global _std_decode
    import json

    _std_decode = json.JSONDecoder(parse_constant=_reject_constant).decode
    return _std_decode(text)


def loads(text: str) -> Any:
    """Parse JSON text; NaN/Infinity are refused (JavaScript never writes them).

    Lone surrogate escapes (``\\ud83d``) are kept as lone surrogates in the ``str``.
    Raises ``ValueError`` (``json.JSONDecodeError``) on invalid input.
    """
    return _std_decode(text)


_MISSING = object()


def meta_difference(a_json: str, b_json: str, a_name: str, b_name: str) -> str:
    """Which keys two sessions' meta JSON object texts hold differently, for a conflict
    message: ``KEY (VALUE a_name, VALUE b_name); ...`` (``none`` where a key is missing;
    values cut to 60 characters; three keys at most, then how many more)."""
    a, b = loads(a_json), loads(b_json)
    keys = [k for k in {**a, **b} if a.get(k, _MISSING) != b.get(k, _MISSING)]

    def shown(d: dict, k: str) -> str:
        text = dumps(d[k]) if k in d else "none"
        return text if len(text) <= 60 else text[:59] + "…"

    parts = [f"{dumps(k)} ({shown(a, k)} {a_name}, {shown(b, k)} {b_name})" for k in keys[:3]]
    return "; ".join(parts) + (f"; and {len(keys) - 3} more" if len(keys) > 3 else "")


def encodable(text: Any) -> bool:
    """True for a str that UTF-8 (and so SQLite) can hold: no lone UTF-16 surrogates."""
    if type(text) is not str:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True



class _LazyOrjson:
    """orjson, imported at its first use (then this module's ``_orjson`` is orjson itself):
    its import (dataclasses, uuid, enum, json) costs more than the rest of the start-up of a
    command that writes no JSON, such as ``eventstore sessions``. Sets ``_ORJSON_STRICT``
    and ``_fast_float`` too, so a call ``_orjson.f(..., _ORJSON_STRICT)`` gets the real
    options (the callee is evaluated before the arguments)."""

    def __getattr__(self, name: str) -> Any:
        global _orjson, _ORJSON_STRICT, _fast_float
        import orjson

        _ORJSON_STRICT = (orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_SUBCLASS
                          | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME)
        _fast_float = orjson.dumps
        _orjson = orjson
        return getattr(orjson, name)


_orjson: Any = _LazyOrjson()
_ORJSON_STRICT: int = 0  # set with orjson's import (see _LazyOrjson)
# orjson writes exponents with their sign, as JavaScript does, since 3.11.7 (pyproject
# requires it; before, 1e16 came out as "1e16"): _orjson_odd() finds exponents by it.


def _fast_float(f: float) -> bytes:
    """``orjson.dumps(f)``; orjson's own function once imported."""
    return _orjson.dumps(f)


# (each compiled at first use: not at start-up)
_EXP_AFTER_DIGIT = LazyPattern(rb"[0-9]e[-+]")
_DIGIT_AFTER_QUOTE = LazyPattern(rb'"[0-9]')  # literal first: a quick scan
# A digit after a quote: a key that may be an array index is one (so is a string that
# starts with a digit: a false hit only costs _orjson_odd's exact look).
_QUOTE_DIGIT_TEXT = LazyPattern('"[0-9]')


def _orjson_odd(raw: bytes) -> bool:
    """True if orjson's output ``raw`` (compact: a number is followed by ``,`` ``}`` or ``]``)
    may differ from ``JSON.stringify``'s: it holds an integer-valued float (``5.0``), an
    exponent (orjson writes ``1e+16`` where JavaScript writes ``10000000000000000``), or a
    key that may be an array index (JavaScript writes those first). Substring tests first
    (fast, in C); false hits inside strings (``"v1.0,"``, ``"re-run"``) only cost a regex
    search, or send the value down the slow path."""
    if b".0" in raw and _DOT0.search(raw) is not None:
        return True
    if (b"e+" in raw or b"e-" in raw) and _EXP_AFTER_DIGIT.search(raw) is not None:
        return True
    m = _DIGIT_AFTER_QUOTE.search(raw)
    while m is not None:
        i = m.start()
        if raw[i - 1] in b"{,":
            return True
        m = _DIGIT_AFTER_QUOTE.search(raw, i + 1)
    return False


_DOT0 = LazyPattern(rb"\.0[,}\]]")  # literal prefixes: fast searches


def canonical_bytes(value: Any) -> bytes:
    """:func:`dumps` of a JSON value read back from stored text (plain ``dict``, ``list``,
    ``str``, ``int``, ``float``, ``bool``, None), as UTF-8: orjson's text when it is
    provably the same (see :func:`_orjson_odd`), else :func:`dumps`'. (The commitments of
    :mod:`eventstore.log.commit` encode every payload value.)"""
    if type(value) not in (dict, list, str):  # a number's own text (5.0, -0.0) is dumps' to write
        return dumps(value).encode("utf-8")
    try:
        raw = _orjson.dumps(value, option=_ORJSON_STRICT)
    except (TypeError, _orjson.JSONEncodeError):  # past 2**53, a lone surrogate: dumps decides
        return dumps(value).encode("utf-8")
    if type(value) is not str and _orjson_odd(raw):  # (inside a container a number is followed by , } or ])
        return dumps(value).encode("utf-8")
    return raw


def canonical_bytes_many(values: list) -> list[bytes] | None:
    """:func:`canonical_bytes` of each of ``values`` when orjson's text is provably it for
    all of them (C loops, one screen over the joined text), else None: the caller then
    encodes them one by one. Values are joined by ``]``, so a number at the top ends in
    ``]`` as it would inside an array (``5.0]`` is screened) and a string at the top that
    starts with a digit is not taken for an array index key (only keys are reordered)."""
    try:
        raws = list(map(_orjson.dumps, values, repeat(None), repeat(_ORJSON_STRICT)))
    except (TypeError, _orjson.JSONEncodeError):  # past 2**53, a lone surrogate, not JSON
        return None
    if _orjson_odd(b"[" + b"]".join(raws) + b"]"):
        return None
    return raws


def good_event_id(key: Any) -> bool:
    """Whether ``key`` can be an idempotency key: a non-empty ``str`` that UTF-8 can hold (a
    lone surrogate could be stored, escaped in the payload, but never looked up again)."""
    return type(key) is str and key != "" and (key.isascii() or encodable(key))


def payload_json(payload: dict) -> str:
    """Validate an append's payload and return its canonical JSON object text; ``None`` (no
    payload) is ``{}``.

    Raises :class:`InvalidEvent` when ``payload`` is not a dict, holds a reserved key
    (``type``, ``seq``, ``ts``), an ``event_id`` that is not a non-empty string, or anything
    that is not JSON.
    """
    fast = _plain_fast_dumps(payload)
    if fast is not None:
        return fast[0]
    if payload is None:
        return "{}"
    if not isinstance(payload, dict):
        raise InvalidEvent(f"payload must be a dict (a JSON object), not {type(payload).__name__}")
    for key in RESERVED_KEYS:
        if key in payload:
            raise InvalidEvent(f"payload key {key!r} is reserved: the store sets type, seq and ts")
    if "event_id" in payload and not good_event_id(payload["event_id"]):
        raise InvalidEvent(f"payload key 'event_id' (the idempotency key) must be a non-empty string "
                           f"without lone UTF-16 surrogates (it is looked up as SQLite text), "
                           f"not {payload['event_id']!r:.60}")
    fast = _fast_dumps(payload)
    if fast is not None:
        return fast[0]
    return dumps(payload)


def payload_json_stored(payload: dict) -> tuple[str, Any]:
    """:func:`payload_json` of ``payload``, and the payload as stored: its text read back
    (as :func:`payload_jsons` gives it for a batch). Raises what :func:`payload_json` raises.
    """
    fast = _plain_fast_dumps(payload)  # its proof reads the text back: that is the stored payload
    if fast is not None:
        return fast
    text = payload_json(payload)
    return text, loads(text)


def _plain_fast_dumps(payload: Any) -> tuple[str, Any] | None:
    """:func:`_fast_dumps` for the common case, a plain dict of JSON values without the
    keys that :func:`payload_json` checks first (``type``, ``seq``, ``ts``, ``event_id``);
    None for anything else."""
    if (type(payload) is dict
            and "type" not in payload and "seq" not in payload and "ts" not in payload
            and "event_id" not in payload):
        return _fast_dumps(payload)
    return None


def _refuse(_value: Any) -> Any:
    raise TypeError


def _fast_dumps(obj: dict) -> tuple[str, Any] | None:
    """``dumps(obj)`` written by orjson (C) when that is provably the same text, and the
    text read back (the payload as stored); else None.

    orjson writes what ``JSON.stringify`` writes (the import fast path below relies on the
    same fact) except where :func:`_orjson_odd` looks. Integers past 2**53 and every type ``dumps`` does not
    take as it is (subclasses, dataclasses, datetimes) make orjson raise; reading the
    text back and comparing catches what orjson writes for values ``dumps`` refuses (NaN
    and Infinity as ``null``, UUIDs and enums as their values). Any doubt returns None:
    :func:`dumps` then decides, and gives every error its message.
    """
    try:
        raw = _orjson.dumps(obj, default=_refuse, option=_ORJSON_STRICT)
    except (TypeError, _orjson.JSONEncodeError):
        return None
    text = raw.decode("utf-8")
    if ((".0" in text or "e+" in text or "e-" in text or _QUOTE_DIGIT_TEXT.search(text) is not None)
            and _orjson_odd(raw)):
        return None
    stored = _orjson.loads(raw)
    if stored != obj:
        return None
    return text, stored


def payload_jsons(payloads: list) -> tuple[list[str], list]:
    """:func:`payload_json` of each of ``payloads`` (a list of dicts; None counts as ``{}``),
    and each payload as stored: its text read back (dicts, lists, str, int, float, bool,
    None; a tuple comes back a list, an integer-valued float an int).

    A batch of plain dicts is written by orjson and proven as :func:`_fast_dumps` proves
    one payload, but once for the whole batch: one set of text screens over the joined
    text and one read-back, instead of a function call and a screen per payload. The
    reserved keys are looked up in each dict only when the joined text holds one of their
    names (at any depth: a nested ``"type"`` is common and allowed). At any doubt every
    payload goes through :func:`payload_json`, which also gives an error its message.
    Raises :class:`InvalidEvent` as :func:`payload_json` does.
    """
    if payloads and set(map(type, payloads)) == _DICT_ONLY:
        try:  # C loops: without ``default``, orjson raises for every type it does not take as it is
            texts = list(map(bytes.decode, map(_orjson.dumps, payloads, repeat(None), repeat(_ORJSON_STRICT))))
        except (TypeError, _orjson.JSONEncodeError):
            texts = None
        if texts is not None:
            joined = "[" + ",".join(texts) + "]"
            if (('"type"' in joined or '"seq"' in joined or '"ts"' in joined or '"event_id"' in joined)
                    and not all(map(_plain_keys, payloads))):
                pass  # a reserved key or an odd event_id: payload_json() decides and says why
            elif not ((".0" in joined or "e+" in joined or "e-" in joined
                       or _QUOTE_DIGIT_TEXT.search(joined) is not None) and _orjson_odd(joined.encode("utf-8"))):
                stored = _orjson.loads(joined)
                if stored == payloads:
                    return texts, stored
    texts = list(map(payload_json, payloads))
    return texts, [loads(text) for text in texts]


_DICT_ONLY = {dict}


def _plain_keys(p: dict) -> bool:
    """No reserved key at the top of ``p``, and an ``event_id`` (if any) that can be a key."""
    return not ("type" in p or "seq" in p or "ts" in p or "event_id" in p and not good_event_id(p["event_id"]))
