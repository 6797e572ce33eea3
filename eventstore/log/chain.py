"""The hash chain: each stored event's ``hash`` binds it to its session, its seq and every
event before it.

``hash = SHA-256 hex of (previous hash + "\n" + the event's JSONL line)``, the line in its
canonical form (:func:`eventstore.log.line.event_line`); the first event of a session chains
from :func:`genesis_hash` of the session id. An edit, a deleted or reordered event breaks
every later hash; ``verify`` recomputes the chain. Backends call :func:`chain_rows` (or
:func:`chain_hash`) once they hold a session's head, to build the rows they insert.
"""

from __future__ import annotations

from eventstore.log.line import event_lines, meta_line

__all__ = ["chain_hash", "chain_rows", "genesis_hash", "session_hash", "session_hash_changes"]


def genesis_hash(session_id: str) -> str:
    """The hash chain's start for a session: SHA-256 (hex) of ``{"type":"session/meta","id":ID}``."""
    return _sha256(meta_line(session_id).encode("utf-8")).hexdigest()


def _half(session_id: str, field: str, value) -> str:
    import json  # (imported when used: eventstore's start-up)

    text = json.dumps([session_id, field, value], ensure_ascii=True, separators=(",", ":"))
    return _sha256(text.encode("ascii")).hexdigest()[:32]


def session_hash(session_id: str, created_at: float, meta_json: str) -> str:
    """The ``sessions.meta_hash`` of a row (64 hex digits): the first 128 bits of
    SHA-256(``["ID","created_at",C]``) followed by the first 128 bits of
    SHA-256(``["ID","meta","M"]``) (JSON arrays, ASCII escapes, no spaces; ``C`` the float
    as Python's ``json`` writes it, ``M`` the stored meta text), so that ``verify`` can say
    which of the two was edited. No event hash covers the session row; this does."""
    return _half(session_id, "created_at", float(created_at)) + _half(session_id, "meta", meta_json)


def session_hash_changes(session_id: str, created_at, meta_json, stored) -> list[str]:
    """Which of ``created_at`` and ``meta`` no longer match the stored ``meta_hash``
    (all of ``["created_at", "meta"]`` when it is missing or malformed, or when the id was
    changed); empty when the row is as the store wrote it."""
    if not isinstance(stored, str) or len(stored) != 64:
        return ["created_at", "meta"]
    changed = []
    try:
        if _half(session_id, "created_at", float(created_at)) != stored[:32]:
            changed.append("created_at")
    except (TypeError, ValueError):
        changed.append("created_at")
    if not isinstance(meta_json, str) or _half(session_id, "meta", meta_json) != stored[32:]:
        changed.append("meta")
    return changed


def chain_hash(prev_hash: str, line: str | bytes) -> str:
    """The hash of an event: SHA-256 (hex, 64 characters) of ``prev_hash + "\\n" + line``.

    ``prev_hash`` is the previous event's hash in the same session, or
    :func:`genesis_hash` for seq 0; ``line`` is the event's JSONL line
    (:func:`~eventstore.log.line.event_line`, or its UTF-8 bytes as read from a file), the
    canonical form. The append path, the importer and ``verify`` all hash through here.
    """
    if type(line) is str:
        return _sha256(f"{prev_hash}\n{line}".encode()).hexdigest()
    if len(line) < 65536:
        return _sha256(prev_hash.encode() + b"\n" + line).hexdigest()
    h = _sha256(prev_hash.encode() + b"\n")  # a long line is not copied
    h.update(line)
    return h.hexdigest()


def _sha256(data: bytes = b""):
    """``hashlib.sha256(data)``; hashlib's own function once imported, at the first hash
    (its import, OpenSSL's start-up, is a large part of a command that hashes nothing)."""
    global _sha256
    import hashlib

    _sha256 = hashlib.sha256
    return _sha256(data)


def chain_rows(prev_hash: str, first_seq: int, types: list[str], tss: list[float],
               payload_jsons: list[str], *, pairs: bool = False, commits: list[str] | None = None,
               salts: list[bytes] | None = None) -> list:
    """Consecutive events of one session, hashed: the flat list ``[type, ts, payload_json,
    hash, salt, type, ts, ...]`` (five items an event, the order of an INSERT's parameters)
    for seqs ``first_seq``, ``first_seq + 1``, ...; ``prev_hash`` is the hash before the first.
    Each hash is :func:`chain_hash` of the event's line (:func:`~eventstore.log.line.event_lines`):
    for salted events (``salts`` and their ``commits``, the
    :func:`~eventstore.log.commit.commit_json` of each payload) the line built from the commit
    payload, else from the payload itself (``salt`` None). With ``pairs``, the list is
    ``[payload_json, hash, salt, payload_json, ...]`` (three items an event: for a caller that
    binds a batch's one type and ts once). Raises ``ValueError`` when the lists differ in length.
    """
    out: list = []
    if salts is None:
        salts = [None] * len(payload_jsons)
        commits = payload_jsons
    lines = event_lines(types, first_seq, tss, commits)
    for type_, ts, pj, salt, line in zip(types, tss, payload_jsons, salts, lines, strict=True):
        prev_hash = chain_hash(prev_hash, line)
        out += (pj, prev_hash, salt) if pairs else (type_, ts, pj, prev_hash, salt)
    return out
