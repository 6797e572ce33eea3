"""The JSONL reader: session files in, as validated canonical rows, strictly.

Reading is the reference loader made strict: lines split on ``\\n`` only (U+2028 and
friends are content), a trailing ``\\r`` dropped, blank lines skipped, and every other line
checked (see :class:`JsonlReader`). Each row comes with its payload in canonical form
(:mod:`eventstore.log.codec`) and its chained hash (:mod:`eventstore.log.chain`). Also here: the
file names of exported sessions (:func:`file_name_for`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from itertools import accumulate
from operator import add
from typing import IO, Any

import orjson as _orjson

from eventstore.errors import InvalidEvent, InvalidJSONL
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.codec import RESERVED_KEYS, SURROGATES, dumps, js_number, loads
from eventstore.log.line import event_line, line_head

__all__ = [
    "JsonlReader",
    "file_name_for",
    "parse_line",
    "session_id_from_file_name",
]

MAX_SAFE_INTEGER = 2**53 - 1
# The longest line a reader takes (an event of 64 MiB: a whole file or image in a tool
# result); a longer one is an error, so that no input (/dev/zero, a file without newlines)
# grows a reader's memory past a few copies of it.
MAX_LINE_BYTES = 64 << 20


def too_long(limit: int) -> str:
    """The reason of a line longer than ``limit`` bytes."""
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"
    return (f"the line is longer than {size}, the longest line eventstore reads "
            f"(not a JSONL file, or an event too large to store)")


# --- reading -------------------------------------------------------------------------
#
# The fast path: a line that is already exactly what JSON.stringify writes (the reference
# writes nothing else) is stored as sliced from the file: its bytes are the canonical line,
# hashed as they are, and the payload is the line's text after "ts". orjson (C) parses the
# line and writes it back; when the two agree byte for byte, the line is canonical except
# for a few number forms that orjson and JavaScript write differently (an integer-valued
# float "5.0", exponents "1e+16", integers beyond 2**53), which _odd_numbers() detects.
# Every other line takes the slow path: the
# standard library parses it and dumps() writes the canonical form; that path also gives
# every error its message.

_JS_SPACE = " \t\n\v\f\r\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000\ufeff"
_DIGITS = frozenset(b"0123456789")
# A key that may be an array index: JavaScript writes those first, so the line's order may
# not be JSON.stringify's (false hits, a string like ',"0' inside a value, only cost speed).
_INDEX_KEY = re.compile(rb'[{,]"[0-9]').search
_EXP = re.compile(rb"e[-+][0-9]").search


def _odd_numbers(raw: bytes) -> bool:
    """True if ``raw`` (orjson's own output) may hold a float that JavaScript writes otherwise:
    an integer-valued one (``5.0``) or one in exponent form (``1e+16``, ``1e-7``). False
    hits (``"v1.0,"`` or ``"re-3"`` inside a string) only send the line down the slow path."""
    if _DOT0_SEARCH(raw) is not None:
        return True
    m = _EXP(raw)
    while m is not None:
        i = m.start()
        if i and raw[i - 1] in _DIGITS:
            return True
        m = _EXP(raw, i + 1)
    return False


def _fast_line(raw: bytes) -> tuple[str, int, int | float, int] | None:
    """``(type, seq, ts, payload_start)`` when ``raw`` is a canonical event line whose first
    keys are ``type``, ``seq``, ``ts`` (the payload is ``"{" + raw[payload_start + 1:]``,
    or ``{}`` when ``raw[payload_start:]`` is ``"}"``); None when the slow path must decide."""
    if not raw.startswith(b'{"type":"'):
        return None
    try:
        obj = _orjson.loads(raw)
        t = obj["type"]
        seq = obj["seq"]
        ts = obj["ts"]
        if (type(t) is not str or not t or t == "session/meta" or type(seq) is not int
                or (type(ts) is not float and type(ts) is not int)):
            return None
        if _orjson.dumps(obj, option=_orjson.OPT_STRICT_INTEGER) != raw:
            return None
    except (ValueError, TypeError, KeyError):
        return None
    # raw is orjson's own text of obj: the keys' positions follow from the values' lengths
    head = line_head(t).encode()
    q = len(head) + len(str(seq))
    if not raw.startswith(head) or raw[q:q + 6] != b',"ts":' or _odd_numbers(raw) or _INDEX_KEY(raw):
        return None
    end = raw.find(b",", q + 6)  # a number holds no comma
    return t, seq, ts, len(raw) - 1 if end < 0 else end


RUN_LINES = 500  # lines per run of the batch fast path
_STRICT = _orjson.OPT_STRICT_INTEGER
# Digits become \x01, the bytes before a key ({ ,) \x03, signs (+ -) \x04: control
# characters never stand unescaped in a JSON text, so these bytes mean what they replace.
_MARK = bytes.maketrans(b"0123456789{,+-", b"\x01" * 10 + b"\x03" * 2 + b"\x04" * 2)
_DOT0_SEARCH = re.compile(rb"\.0[,}\]]").search
_EXP_SEARCH = re.compile(rb"\x01e\x04").search


def _odd_run(text: bytes) -> bool:
    """True if ``text`` (JSON lines as orjson writes them) may hold a float that JavaScript
    writes otherwise (``5.0``, ``1e+16``, ``1e-7``) or an array-index key (``{"0":``,
    ``,"7":``), which JavaScript writes first. A false hit (``"v1.0,"`` or ``"x,\\"0"`` in a
    string) only sends the lines one by one. Made of one translation and searches whose
    needles start with rare bytes, which C does fast (no regex alternation: with no fixed
    first byte the engine tries every position)."""
    if _DOT0_SEARCH(text) is not None:
        return True
    t = text.translate(_MARK)
    return b'\x03"\x01' in t or (b"\x04" in t and _EXP_SEARCH(t) is not None)


def _fast_rows(lines: list[bytes], expected: int, prev: str,
               heads: dict[str, bytes]) -> tuple[list[tuple], str] | None:
    """The fast path for a run of event lines (no ``\\r``): the rows
    ``(seq, type, ts, payload, hash)`` (payload and hash as ``str``) and the last hash,
    when every line is exactly what JSON.stringify writes for it, with the keys ``type``,
    ``seq`` (= ``expected``, ``expected + 1``, ...), ``ts`` first; None as soon as one line
    is not (the caller then takes the lines one by one, the slow path saying why).

    A line is taken when orjson parses it and writes it back byte for byte, and no search
    of _odd_run (made once for the whole run) finds what orjson and JavaScript write
    differently. ``heads`` caches, per type, the line's text up to its seq.
    """
    if _odd_run(b",".join(lines)):
        return None
    loads = _orjson.loads
    dumps_ = _orjson.dumps
    strict = _STRICT
    rows = []
    append = rows.append
    seq = expected
    try:
        for raw in lines:
            obj = loads(raw)
            if dumps_(obj, option=strict) != raw:
                return None
            t = obj["type"]
            head = heads.get(t)
            if head is None:
                if type(t) is not str or not t or t == "session/meta":
                    return None
                head = heads[t] = line_head(t).encode()
            s = obj["seq"]
            if s != seq or type(s) is not int or not raw.startswith(head):
                return None
            q = len(head) + len(str(seq))
            ts = obj["ts"]
            if raw[q:q + 6] != b',"ts":' or (type(ts) is not float and type(ts) is not int):
                return None
            prev = chain_hash(prev, raw)
            end = raw.find(b",", q + 6)  # a number holds no comma
            append((seq, t, ts, "{}" if end < 0 else "{" + raw[end + 1:].decode(), prev))
            seq += 1
    except (ValueError, TypeError, KeyError):
        # invalid JSON, an integer beyond 2**53 (orjson's JSONEncodeError is a TypeError),
        # not an object, a key missing
        return None
    return rows, prev


def parse_line(text: str | bytes) -> tuple[Any, str | None]:
    """Parse one JSONL line into ``(value, canonical_payload_or_None)``.

    When the line is an object exactly as ``JSON.stringify`` writes it, starting with the
    keys ``type``, ``seq``, ``ts``, the second item is the payload's canonical JSON text
    (the line's keys after ``ts``), sliced from the line; otherwise it is None and the
    caller re-encodes (:func:`dumps`). Raises ``ValueError`` for invalid JSON (NaN and
    Infinity included) or invalid UTF-8.
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    fast = _fast_line(raw)
    if isinstance(text, bytes):
        text = raw.decode("utf-8")
    value = loads(text)
    if fast is None:
        return value, None
    end = fast[3]
    return value, "{}" if end == len(raw) - 1 else "{" + raw[end + 1:].decode("utf-8")


class JsonlReader:
    """Read a JSONL session file as a stream of validated, canonical event rows, strictly.

    ``JsonlReader(fileobj, name, session_id=None, start=None)``: ``fileobj`` is a binary
    file read in 1 MiB chunks (memory stays bounded by the longest line, not the file);
    ``name`` is what errors call it (``-`` for stdin); ``session_id``, when given, is the
    session's id for a file without a ``session/meta`` line (a meta line naming another id
    is then an error). ``start`` ``(seq, hash)`` reads the rest of a session: the first
    event has seq ``seq`` (not 0) and is chained to ``hash``, the hash of the event before
    it (:func:`genesis_hash` of the id for seq 0). ``max_line`` is the longest line read
    (:data:`MAX_LINE_BYTES`; None: no limit, for a stream eventstore wrote itself).

    :meth:`batches` yields lists of rows ``(seq, type, ts, payload, hash)``: ``payload`` is
    the JSON object text of the event's other keys in canonical form (UTF-8 ``bytes`` or
    ``str``) and ``hash`` the event's chained hash (a ``str``: :func:`chain_hash` of the line,
    from :func:`genesis_hash` of the session id). Iterating the reader yields ``(seq, type, ts,
    payload)`` with ``str`` payloads and raises the first error.

    Rules (the reference loader made strict; see docs/import-export.md): lines split on
    ``\\n`` only, a trailing ``\\r`` dropped, blank lines skipped; the ``session/meta`` line
    anywhere before the first event (exposed as ``session_id``, ``meta_json``, the JSON
    text of its other keys, and ``meta_line``). Everything else is an
    :class:`~eventstore.errors.InvalidJSONL` ``FILE:LINE: reason``: invalid UTF-8, invalid
    JSON (NaN and Infinity included; ``truncated last line`` when the last line has no
    newline), a line that is not an object, ``type`` missing or not a non-empty string,
    ``seq`` missing, not an integer, not starting at 0, gapped, duplicated or above
    2**53-1, ``ts`` missing or not a finite number, a payload value that is not exact JSON
    (an integer a double cannot hold), a second ``session/meta`` naming another id (or
    other keys), a ``session/meta`` after the first event, no ``session/meta`` at all.

    :meth:`batches` does not raise: it stops at the first error, yields the rows before it
    and leaves the error in ``error`` (its byte offset in ``error_offset``), so an importer
    can keep the valid prefix; :meth:`drain` then counts what is left (``lines``,
    ``bytes``). ``normalized`` counts the event lines whose canonical form differs from
    their bytes in the file (spaces, escapes, number forms, key order): they are stored in
    canonical form and export that way.
    """

    CHUNK = 1 << 20  # bytes read at a time

    def __init__(self, fileobj: IO[bytes], name: str, session_id: str | None = None,
                 start: tuple[int, str] | None = None, max_line: int | None = MAX_LINE_BYTES):
        self.fileobj = fileobj
        self.max_line = max_line if max_line is not None else 1 << 62
        self.name = name
        self._start = start
        self._forced_id = session_id
        self.session_id = session_id
        self.meta_json = "{}"
        self.meta_line = 0
        self.events = 0
        self.lines = 0
        self.normalized = 0
        self._read = 0
        self._newlines = 0
        self._last = b""
        self.error: InvalidJSONL | None = None
        self.error_offset = 0
        self.batch_lines: list[int] = []
        self.batch_offsets: list[int] = []
        self._pending: list[bytes] = []

    def _err(self, line: int, reason: str) -> InvalidJSONL:
        return InvalidJSONL(self.name, line, reason)

    def __iter__(self) -> Iterator[tuple[int, str, float, str]]:
        for batch in self.batches():
            for seq, t, ts, payload, _h in batch:
                yield seq, t, float(ts), payload if type(payload) is str else payload.decode("utf-8")
        if self.error is not None:
            raise self.error

    def batches(self, max_rows: int = 20000, max_bytes: int = 16 << 20) -> Iterator[list[tuple]]:
        """Yield the file's event rows in lists of at most ``max_rows`` rows (or about
        ``max_bytes`` bytes of lines); see the class docstring. Stops at the first error."""
        read = self.fileobj.read
        pending = self._pending
        lineno = 0
        offset = 0  # byte offset of the next line
        batch: list[tuple] = []
        blines = self.batch_lines
        boffs = self.batch_offsets
        size = 0
        expected = 0 if self._start is None else self._start[0]
        fast = _fast_line
        fast_rows = _fast_rows
        heads: dict[str, bytes] = {}
        slow = self._slow
        prev = self._genesis() if self.session_id is not None else None  # the previous event's hash
        unterminated = False
        max_line = self.max_line
        held = 0  # bytes in pending: the start of a line not ended yet
        overlong = False  # pending passed max_line: the file ends being read after the lines before it
        while True:
            chunk = read(self.CHUNK)
            if chunk:
                self._read += len(chunk)
                self._last = chunk[-1:]
                parts = chunk.split(b"\n")
                self._newlines += len(parts) - 1
                cr = b"\r" in chunk
                tail = parts.pop()
                if parts and pending:  # the line held from the chunks before ends here
                    pending.append(parts[0])
                    parts[0] = b"".join(pending)
                    pending.clear()
                    held = 0
                    cr = cr or b"\r" in parts[0]
                if tail:
                    pending.append(tail)
                    held += len(tail)
                if parts and (len(parts[0]) > max_line or len(chunk) > max_line):
                    # a line past the limit: the lines before it are taken, then it is the error
                    k = next((i for i, part in enumerate(parts) if len(part) > max_line), None)
                    if k is not None:
                        del parts[k:]
                        overlong = True
                if held > max_line:  # the line not ended yet: the same, once the lines before it are taken
                    overlong = True
            elif pending:  # the last line has no newline
                parts = [b"".join(pending)]
                pending.clear()
                unterminated = cr = True
            else:
                break
            # Runs of lines go through _fast_rows; a run it refuses (a line not canonical, a
            # blank line, an error) and every line of a chunk holding "\r" go line by line.
            i = 0
            nparts = len(parts)
            while i < nparts:
                # before the session id is known (the meta line), one line at a time
                room = min(RUN_LINES, max_rows - len(batch)) if prev is not None else 1
                run = parts[i:i + room]
                i += len(run)
                got = fast_rows(run, expected, prev, heads) if prev is not None and not cr else None
                if got is not None:
                    rows, prev = got
                    n = len(rows)
                    batch += rows
                    blines.extend(range(lineno + 1, lineno + n + 1))
                    lens = list(map(len, run))
                    boffs.extend(map(add, accumulate(lens, initial=offset), range(n)))
                    nbytes = sum(lens)
                    lineno += n
                    offset += nbytes + n
                    expected += n
                    size += nbytes
                    if len(batch) >= max_rows or size >= max_bytes:
                        self.lines, self.events = lineno, expected
                        yield batch
                        batch = []
                        blines.clear()
                        boffs.clear()
                        size = 0
                    continue
                for raw in run:
                    lineno += 1
                    start = offset
                    offset += len(raw) + 1
                    if cr and raw.endswith(b"\r"):
                        raw = raw[:-1]
                    if not raw:
                        continue
                    got = fast(raw) if prev is not None else None
                    if got is not None and got[1] == expected:
                        t, seq, ts, end = got
                        payload = b"{}" if end == len(raw) - 1 else b"{" + raw[end + 1:]
                        line = raw
                    else:
                        try:
                            row = slow(lineno, raw, unterminated, expected)
                        except InvalidJSONL as e:
                            self.error = e
                            self.error_offset = start
                            self.lines, self.events = lineno, expected
                            if batch:
                                yield batch
                            return
                        if row is None:  # a blank or session/meta line
                            if prev is None and self.session_id is not None:
                                prev = self._genesis()
                            continue
                        seq, t, ts, payload, line = row
                    prev = chain_hash(prev, line)
                    batch.append((seq, t, ts, payload, prev))
                    blines.append(lineno)
                    boffs.append(start)
                    expected += 1
                    size += len(line)
                    if len(batch) >= max_rows or size >= max_bytes:
                        self.lines, self.events = lineno, expected
                        yield batch
                        batch = []
                        blines.clear()
                        boffs.clear()
                        size = 0
            if overlong:  # the lines before it are taken; this one is the error
                pending.clear()
                self.error = self._err(lineno + 1, too_long(max_line))
                self.error_offset = offset
                self.lines, self.events = lineno + 1, expected
                if batch:
                    yield batch
                return
        self.lines, self.events = lineno, expected
        if self.session_id is None:
            what = "the file is empty: " if lineno == 0 else ""
            self.error = self._err(0, f"{what}no session/meta line and no events (give the id with --session-id)")
        if batch:
            yield batch

    def _genesis(self) -> str:
        """The hash the first event is chained to."""
        if self._start is not None:
            return self._start[1]
        return genesis_hash(self.session_id)

    @property
    def bytes(self) -> int:
        """Bytes read so far (the file's size once read to the end)."""
        return self._read

    def drain(self) -> None:
        """Read the rest of the file, only counting it: afterwards ``lines`` is the file's
        number of lines and ``bytes`` its size (after an error, to say what was dropped)."""
        read = self.fileobj.read
        while True:
            chunk = read(self.CHUNK)
            if not chunk:
                break
            self._read += len(chunk)
            self._last = chunk[-1:]
            self._newlines += chunk.count(b"\n")
        self._pending.clear()
        self.lines = self._newlines + (1 if self._read and self._last != b"\n" else 0)

    def _slow(self, lineno: int, raw: bytes, unterminated: bool, expected: int) -> tuple | None:
        """Check one line the exact way; return the row ``(seq, type, ts, payload, line)``
        (``line`` = canonical line as UTF-8 bytes) or None for a blank or meta line."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._err(lineno, f"invalid UTF-8 at byte {e.start + 1} of the line") from None
        try:
            obj = loads(text)
        except (ValueError, RecursionError) as e:
            if not text.strip(_JS_SPACE):
                return None  # the reference skips lines that trim() to nothing
            why = "nested too deeply" if isinstance(e, RecursionError) else _json_reason(e)
            if text.startswith("\ufeff"):
                why = "the line starts with a byte order mark (U+FEFF)"
            if unterminated:
                raise self._err(lineno, f"truncated last line (no newline at the end; invalid JSON: {why})") from None
            raise self._err(lineno, f"invalid JSON: {why}") from None
        if type(obj) is not dict:
            raise self._err(lineno, f"not a JSON object but {_json_kind(obj)}")
        if "type" not in obj:
            raise self._err(lineno, "'type' is missing")
        t = obj["type"]
        if type(t) is not str or not t:
            raise self._err(lineno, f"'type' must be a non-empty string, not {_json_kind(t)}")
        if SURROGATES.search(t):
            raise self._err(lineno, f"'type' {dumps(t)} holds a lone UTF-16 surrogate")
        if t == "session/meta":
            self._meta(lineno, obj, expected - (0 if self._start is None else self._start[0]))
            return None
        if self.session_id is None:
            raise self._err(lineno, "event before any session/meta line (no session id; give one with --session-id)")
        if "seq" not in obj:
            raise self._err(lineno, "'seq' is missing")
        seq = obj["seq"]
        if type(seq) is float and seq.is_integer() and abs(seq) < 2**63:
            seq = int(seq)  # JavaScript writes 3, but 3.0 (or 3e0) is the same number
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
        if type(ts) is int and abs(ts) < 2**1024:
            ts = float(ts)
        if type(ts) is not float or not math.isfinite(ts):
            big = _too_big(text) if type(ts) is float else None
            why = f"not {_json_kind(ts)}" if big is None else f"not {_too_big_reason(big)}"
            raise self._err(lineno, f"'ts' must be a finite number (seconds), {why}")
        try:
            payload = dumps({k: v for k, v in obj.items() if k not in RESERVED_KEYS})
            line = event_line(t, seq, ts, payload).encode("utf-8")
        except InvalidEvent as e:
            big = _too_big(text) if "inf is not a JSON number" in str(e) else None
            raise self._err(lineno, str(e) if big is None else f"not JSON: {_too_big_reason(big)}") from None
        if line != raw:
            self.normalized += 1
        return seq, t, ts, payload, line

    def _meta(self, lineno: int, obj: dict, events: int) -> None:
        sid = obj.get("id")
        if type(sid) is not str or not sid:
            what = "it has none" if "id" not in obj else f"not {_json_kind(sid)}"
            raise self._err(lineno, f"session/meta needs a non-empty string 'id', {what}")
        if SURROGATES.search(sid):
            raise self._err(lineno, f"session id {dumps(sid)} holds a lone UTF-16 surrogate")
        if events:
            raise self._err(lineno, "session/meta after the first event")
        try:
            meta_json = dumps({k: v for k, v in obj.items() if k not in ("type", "id")})
        except InvalidEvent as e:
            raise self._err(lineno, str(e)) from None
        if self.meta_line:
            if sid != self.session_id:
                raise self._err(lineno, f"second session/meta names another id ({dumps(sid)}, "
                                        f"line {self.meta_line} named {dumps(self.session_id)})")
            if meta_json != self.meta_json:
                raise self._err(lineno, f"second session/meta with other keys than line {self.meta_line}")
            return
        if self._forced_id is not None and sid != self._forced_id:
            raise self._err(lineno, f"session/meta names session {dumps(sid)}, "
                                    f"not the given session id {dumps(self._forced_id)}")
        self.session_id = sid
        self.meta_json = meta_json
        self.meta_line = lineno


# A number literal that may be too big for a double: an exponent, or 309 digits and more.
_BIG_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][-+]?[0-9]+|-?[1-9][0-9]{308,}(?:\.[0-9]+)?")


def _too_big(text: str) -> str | None:
    """The first number literal in the line ``text`` that no double holds (the standard
    library and JavaScript both read it as Infinity), or None."""
    for m in _BIG_NUMBER.finditer(text):
        if math.isinf(float(m.group())):
            return m.group()
    return None


def _too_big_reason(literal: str) -> str:
    shown = literal if len(literal) <= 24 else f"{literal[:12]}...({len(literal)} characters)"
    return (f"{shown}, a number beyond the largest double (about 1.8e308): JavaScript reads it "
            f"as Infinity, which JSON cannot hold")


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return f"the number {js_number(v) if isinstance(v, int) and abs(v) < 10**20 else repr(v)}"
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

_NAME_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_")
_NAME_BYTE = [chr(b) if b in _NAME_SAFE else f"%{b:02X}" for b in range(256)]
# Names that Windows reserves for devices, whatever the extension ("con.jsonl" is the console).
_WINDOWS_DEVICES = frozenset(["con", "prn", "aux", "nul"] + [f"{d}{i}" for d in ("com", "lpt") for i in range(1, 10)])
MAX_NAME_BYTES = 200


def file_name_for(session_id: str) -> str:
    """A safe file name for a session's export: ``<encoded id>.jsonl``.

    Session ids come from files and are untrusted. Lower-case ASCII letters, digits, ``-``
    and ``_`` stay as they are; every other byte of the id's UTF-8 (``/``, ``\\``, ``.``,
    ``:``, NUL, ``%``, upper-case letters) is written ``%XX`` (upper-case hex). So a name
    never holds a separator, never is ``.`` or ``..``, never starts with a dot, and two ids
    differing only in case get names that differ on a case-insensitive file system too (a
    letter in a name is always lower case). A Windows device name (``con``, ``nul``,
    ``com1``...) gets its first letter escaped. The name maps back with
    :func:`session_id_from_file_name`. An id whose name would pass 200 bytes is cut and
    suffixed with ``~`` and 16 hex digits of the id's SHA-256 (``~`` is never otherwise
    in a name); such a file's id is read from its ``session/meta`` line.
    """
    data = session_id.encode("utf-8", "surrogatepass")
    name = "".join([_NAME_BYTE[b] for b in data])
    if name in _WINDOWS_DEVICES:
        name = f"%{data[0]:02X}" + name[1:]
    if len(name) > MAX_NAME_BYTES:
        name = name[:MAX_NAME_BYTES - 17] + "~" + hashlib.sha256(data).hexdigest()[:16]
    return name + ".jsonl"


def session_id_from_file_name(name: str) -> str | None:
    """The session id that :func:`file_name_for` encoded in ``name``; None for a cut
    (hashed) name, or for a name that :func:`file_name_for` does not write."""
    from urllib.parse import unquote_to_bytes

    if not name.endswith(".jsonl") or "~" in name:
        return None
    try:
        sid = unquote_to_bytes(name[:-6]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return sid if sid and file_name_for(sid) == name else None
