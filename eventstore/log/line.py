"""The JSONL line: the one place where an event's line (and a file's meta line) is spelled.

An event's line is ``{"type":T,"seq":N,"ts":TS,...payload}`` exactly as ``JSON.stringify``
writes it (:mod:`eventstore.log.codec`); export writes it, the hash chain hashes it
(:mod:`eventstore.log.chain`), and the JSONL reader recognises a canonical line by its
:func:`line_head`. :func:`event_lines` is the batch form of :func:`event_line` for the
append path (each type's head and each ts encoded once per run); both give the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

try:  # C: keeps non-ASCII as is (json.encoder's, without importing json: its import compiles its patterns)
    from _json import encode_basestring as _c_encode_str
except ImportError:  # pragma: no cover - an interpreter without json's C part
    from json.encoder import encode_basestring as _c_encode_str

from eventstore.log.codec import SURROGATES, dumps, fix_surrogates, js_float, loads

__all__ = ["event_line", "event_lines", "line_head", "meta_line"]


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


def meta_line(session_id: str, meta_json: str = "{}") -> str:
    """The first line of an exported file: ``{"type":"session/meta","id":ID,...meta}``.

    ``meta_json`` is the stored JSON object text of the meta line's other keys.
    """
    if meta_json[2:3].isdigit():  # index keys go before type and id in JavaScript
        return dumps({"type": "session/meta", "id": session_id, **loads(meta_json)})
    head = '{"type":"session/meta","id":' + dumps(session_id)
    return head + ("}" if meta_json == "{}" else "," + meta_json[1:])
