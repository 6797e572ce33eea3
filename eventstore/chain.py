"""The hash chain: each stored event's ``hash`` binds it to its session, its seq and every
event before it.

``hash = SHA-256 hex of (previous hash + "\n" + the event's JSONL line)``, the line in its
canonical form (:func:`eventstore.codec.event_line`); the first event of a session chains
from :func:`genesis_hash` of the session id. An edit, a deleted or reordered event breaks
every later hash; ``verify`` recomputes the chain. Backends call :func:`chain_rows` (or
:func:`chain_hash`) once they hold a session's head, to build the rows they insert.
"""

from __future__ import annotations

import hashlib
from json.encoder import encode_basestring as _c_encode_str  # C: keeps non-ASCII as is

from .codec import _fix_surrogates, _js_float, event_line, meta_line

__all__ = ["chain_hash", "chain_rows", "genesis_hash"]


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
    return _sha256((prev_hash + "\n" + line).encode("utf-8")).hexdigest()


_SHA256 = hashlib.sha256()
#: ``hashlib.sha256`` itself: one call with the data hashes it (quicker than ``copy()`` of a
#: fresh object, then ``update()``: two method calls fewer per event).
_sha256 = hashlib.sha256


def chain_rows(prev_hash: str, first_seq: int, types: list[str], tss: list[float],
               payload_jsons: list[str], *, pairs: bool = False) -> list:
    """Consecutive events of one session, hashed: the flat list ``[type, ts, payload_json,
    hash, type, ts, ...]`` (four items an event, the order of an INSERT's parameters) for
    seqs ``first_seq``, ``first_seq + 1``, ...; ``prev_hash`` is the hash before the first.
    Each hash is :func:`chain_hash` of the event's :func:`event_line`; each type and ts is
    encoded once per run (a batch shares its ts and a few types). With ``pairs``, the list
    is ``[payload_json, hash, payload_json, ...]`` (two items an event: for a caller that
    binds a batch's one type and ts once). Raises ``ValueError`` when the three lists
    differ in length.
    """
    sha256 = _sha256
    heads: dict[str, str] = {}
    last_type = last_ts = head = tail = None
    out: list = []
    seq = first_seq
    for type_, ts, pj in zip(types, tss, payload_jsons, strict=True):
        if type_ is not last_type:
            head = heads.get(type_)
            if head is None:
                head = heads[type_] = _fix_surrogates('{"type":' + _c_encode_str(type_) + ',"seq":')
            last_type = type_
        if ts is not last_ts:  # a batch shares one float object; equal values encode alike anyway
            tail = ',"ts":' + _js_float(ts)
            last_ts = ts
        if pj[2:3].isdigit():  # index keys go first: event_line() orders them
            data = f"{prev_hash}\n{event_line(type_, seq, ts, pj)}"
        elif pj == "{}":
            data = f"{prev_hash}\n{head}{seq}{tail}}}"
        else:
            data = f"{prev_hash}\n{head}{seq}{tail},{pj[1:]}"
        prev_hash = sha256(data.encode()).hexdigest()
        out += (pj, prev_hash) if pairs else (type_, ts, pj, prev_hash)
        seq += 1
    return out

