"""The JSONL line: the one place where an event's line (and a file's meta line) is spelled.

An event's line is ``{"type":T,"seq":N,"ts":TS,...payload}`` exactly as ``JSON.stringify``
writes it (:mod:`eventstore.log.codec`); export writes it, the hash chain hashes it
(:mod:`eventstore.log.chain`), and the JSONL reader recognises a canonical line by its
:func:`line_head`. :func:`event_lines` is the batch form of :func:`event_line` for the
append path (each type's head and each ts encoded once per run); both give the same text.

The lines of stored rows, a page at a time, are spelled here too: :func:`row_pages` reads a
session's rows bounded by bytes, and :func:`chunks_from_rows` writes them as export, ``copy``
and the viewer do (the default of :meth:`eventstore.backends.base.Backend.export_chunks`),
so that memory does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

try:  # C: keeps non-ASCII as is (json.encoder's, without importing json: its import compiles its patterns)
    from _json import encode_basestring as _c_encode_str
except ImportError:  # pragma: no cover - an interpreter without json's C part
    from json.encoder import encode_basestring as _c_encode_str

from eventstore.errors import DatabaseError
from eventstore.log.codec import SURROGATES, dumps, encodable, fix_surrogates, js_float, loads

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["EXPORT_BUFFER", "PAGE_BYTES", "PAGE_ROWS", "chunks_from_rows", "event_line", "event_lines",
           "line_head", "line_start", "lines_bytes", "meta_line", "rewritten_payload", "row_pages"]

EXPORT_BUFFER = 1 << 20  # bytes gathered before each write
PAGE_ROWS = 5_000  # events per read of rows, at most (one short read each) ...
PAGE_BYTES = 1 << 20  # ... and about this many payload bytes (one larger event comes alone)


def line_head(type_: str) -> str:
    """The start of every line of an event of type ``type_``, up to its seq:
    ``{"type":T,"seq":``."""
    head = '{"type":' + _c_encode_str(type_) + ',"seq":'
    if not head.isascii() and SURROGATES.search(head):
        head = fix_surrogates(head)
    return head


def event_line(type_: str, seq: int, ts: float, payload_json: str) -> str:
    """One event line (no trailing newline): ``{"type","seq","ts",...payload}``.

    ``payload_json`` is the stored payload, a JSON object text already in canonical form.
    """
    if payload_json[2:3].isdigit():  # index keys go before type, seq and ts in JavaScript
        return dumps({"type": type_, "seq": seq, "ts": ts, **loads(payload_json)})
    head = line_head(type_) + str(seq) + ',"ts":' + js_float(ts)
    return head + ("}" if payload_json == "{}" else "," + payload_json[1:])


def event_lines(types: Iterable[str], first_seq: int, tss: Iterable[float],
                payload_jsons: Iterable[str]) -> Iterator[str]:
    """:func:`event_line` of consecutive events of one session (seqs ``first_seq``,
    ``first_seq + 1``, ...), each type's head and each run of one ts encoded once. Raises
    ``ValueError`` when the three iterables differ in length."""
    heads: dict[str, str] = {}
    last_type = last_ts = head = tail = None
    seq = first_seq
    for type_, ts, pj in zip(types, tss, payload_jsons, strict=True):
        if type_ is not last_type:
            head = heads.get(type_)
            if head is None:
                head = heads[type_] = line_head(type_)
            last_type = type_
        if ts is not last_ts:  # a batch shares one float object; equal values encode alike anyway
            tail = ',"ts":' + js_float(ts)
            last_ts = ts
        if pj[2:3].isdigit():
            yield event_line(type_, seq, ts, pj)
        elif pj == "{}":
            yield f"{head}{seq}{tail}}}"
        else:
            yield f"{head}{seq}{tail},{pj[1:]}"
        seq += 1


def line_start(head: str, seq: int, ts: float) -> str:
    """An event line up to its ts (``{"type":T,"seq":N,"ts":TS``), from its type's
    :func:`line_head`: the payload's keys (``,...}``) or ``}`` follow."""
    r = repr(ts)  # JavaScript's text too, but for 1e+16, 5.0 and the like
    if "e" in r or r[-2:] == ".0":
        r = js_float(ts)
    return f'{head}{seq},"ts":{r}'


_LINE_BYTES = b'{"type":"%s","seq":%s,"ts":%s%s'
_EMPTY_REST = b"}\n"  # what is left of "{}"


def lines_bytes(types: list[bytes], first_seq: int, tss: list[float], rests: list[bytes],
                plain_types: set[bytes]) -> bytes | None:
    """The byte form of :func:`event_lines` for a page read in one piece: the UTF-8 JSONL
    text, each line ending in a newline, of consecutive events from seq ``first_seq``, or
    None when one of them needs :func:`event_line` (a type that JSON writes with escapes, a
    ts that orjson writes unlike JavaScript).

    ``types`` are UTF-8 type names; each of ``rests`` is a payload's canonical text past its
    ``{`` plus a newline, whose first key the caller made sure is not an array index (JavaScript
    writes those first). ``plain_types`` caches the types found plain (updated in place).
    """
    import orjson  # (imported when used: eventstore's start-up)

    n = len(types)
    ts_text = orjson.dumps(tss)
    # orjson writes a finite double as JavaScript does, but for integer values (5.0) and
    # exponents (1e+16); JSON.stringify writes 1764460800 for 1764460800.0
    if b"e" in ts_text or b".0," in ts_text or ts_text.endswith(b".0]"):
        return None
    for t in set(types).difference(plain_types):
        text = t.decode("utf-8", "surrogatepass")
        if not encodable(text) or dumps(text) != '"' + text + '"':
            return None  # a type that JSON writes with escapes
        plain_types.add(t)
    flat: list = [None] * (4 * n)
    flat[0::4] = types
    flat[1::4] = orjson.dumps(list(range(first_seq, first_seq + n)))[1:-1].split(b",")
    flat[2::4] = (ts_text[1:-1] + b",").replace(b",", b",\x00").split(b"\x00")[:-1]  # "ts,": the payload's comma
    flat[3::4] = rests
    i = -1
    try:
        while True:  # an empty payload: no comma after ts
            i = rests.index(_EMPTY_REST, i + 1)
            flat[4 * i + 2] = flat[4 * i + 2][:-1]
    except ValueError:
        pass
    return (_LINE_BYTES * n) % tuple(flat)


def meta_line(session_id: str, meta_json: str = "{}") -> str:
    """The first line of an exported file: ``{"type":"session/meta","id":ID,...meta}``.

    ``meta_json`` is the stored JSON object text of the meta line's other keys.
    """
    if meta_json[2:3].isdigit():  # index keys go before type and id in JavaScript
        return dumps({"type": "session/meta", "id": session_id, **loads(meta_json)})
    head = '{"type":"session/meta","id":' + dumps(session_id)
    return head + ("}" if meta_json == "{}" else "," + meta_json[1:])


def row_pages(backend: Any, session_id: str, after_seq: int = -1,
              limit: int | None = None) -> Iterator[list[tuple[str, int, float, str]]]:
    """The session's :meth:`~eventstore.backends.base.Backend.export_rows` after
    ``after_seq`` (at most ``limit`` in all), a page at a time: each page at most
    :data:`PAGE_ROWS` events and, past its first event, under :data:`PAGE_BYTES` of payload,
    cut by the backend's read, so a reader holds about a megabyte whatever the events hold
    (the export, the viewer's answers and ``copy`` all page so)."""
    last, left = after_seq, limit
    while left is None or left > 0:
        want = PAGE_ROWS if left is None else min(PAGE_ROWS, left)
        rows = backend.export_rows(session_id, last, want, PAGE_BYTES)
        if not rows:
            return
        yield rows
        last = rows[-1][1]
        if left is not None:
            left -= len(rows)


def chunks_from_rows(backend: Any, session_id: str, meta_json: str,
                     after_seq: int = -1) -> Iterator[tuple[list, int, int]]:
    """The session's JSONL as ``(pieces, bytes, events)`` (see
    :meth:`~eventstore.backends.base.Backend.export_chunks`), built from
    :func:`row_pages` (bounded by bytes), about :data:`EXPORT_BUFFER` bytes a chunk. With ``after_seq``, the meta line
    and only the events past that seq (what :func:`eventstore.io.bulk.import_jsonl` reads with
    ``continues``)."""
    out: list = [(meta_line(session_id, meta_json) + "\n").encode("utf-8")]
    size = len(out[0])
    pending = 0
    for rows in row_pages(backend, session_id, after_seq):
        for type_, seq, ts, payload in rows:
            text = payload if type(payload) is str and _canonical_start(payload) else None
            if text is None or "\n" in text or "\r" in text:
                raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
                text = rewritten_payload(raw, session_id, seq)
            line = (event_line(type_, seq, ts, text) + "\n").encode("utf-8")
            out.append(line)
            size += len(line)
            pending += 1
            if size >= EXPORT_BUFFER:
                yield out, size, pending
                out = []
                size = pending = 0
    yield out, size, pending


def _canonical_start(payload: str) -> bool:
    """Whether ``payload`` starts as JSON.stringify starts an object (``{"`` or exactly ``{}``)."""
    return payload.startswith('{"') or payload == "{}"


def rewritten_payload(raw: bytes, session_id: str, seq: int) -> str:
    """The canonical text of a stored payload (UTF-8 ``raw``) that export cannot write as
    it stands: a line break, whitespace before or just after the ``{``, or a BLOB, which
    plain SQL could store (the last two only before revision 0006). Raises
    :class:`DatabaseError` naming the event if it is not a JSON object after all."""
    try:
        payload = loads(raw.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        payload = e
    if not isinstance(payload, dict):
        raise DatabaseError(f"session {session_id!r} seq {seq}: the stored payload is not a JSON object "
                            f"that export can write ({str(payload)[:80] or type(payload).__name__})")
    return dumps(payload)
