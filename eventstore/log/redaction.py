"""The redaction's rules that need no database (docs/redaction.md): paths, the marker, the
new payload, the ``redaction`` event's payload with its digests, and the key salts that stay
with the event.

A path is a list of keys and indexes from the payload's root (``["tool_calls", 0,
"function", "arguments"]``), or its string form ``tool_calls[0].function.arguments``. The
redacted value becomes the string ``"[redacted: REASON]"``.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from eventstore.errors import InvalidEvent
from eventstore.log.codec import dumps, loads
from eventstore.log.commit import is_event_salt, key_salt, key_salts_blob, key_salts_of, value_digest

__all__ = ["REDACTION", "TARGET_SEQ", "MAX_PATHS", "NOT_ERASED", "Redaction", "marker", "nameable", "pairing_id",
           "parse_path", "path_text", "check_reason", "redacted_payload", "redaction_record", "record_json"]

#: The event type that records a redaction.
REDACTION = "redaction"
#: The redaction event's key naming the redacted event's seq (the design's "seq" cannot be a
#: payload key: type, seq and ts are the line's own, refused in a payload).
TARGET_SEQ = "event_seq"
#: The most paths one redaction names (SQLite's trigger applies them in one ``json_set``).
MAX_PATHS = 32
#: :attr:`Redaction.erasure` of a redaction made with ``erase=False``: nothing erased yet.
NOT_ERASED = ("the old bytes are not erased yet: EventStore.erase_redacted() (or `eventstore redact`) "
              "erases what redactions left")


@dataclass(frozen=True, slots=True)
class Redaction:
    """A redaction done by :meth:`eventstore.EventStore.redact`: event ``seq`` of
    ``session_id`` lost the values at ``paths``; the ``redaction`` event that records it is
    at ``redaction_seq``. ``erasure`` is None when the old bytes were erased from the
    database's storage, else a sentence saying what is left to do: :data:`NOT_ERASED` when
    the redaction was made with ``erase=False`` (the erasure is the caller's, once for several
    redactions: :meth:`eventstore.EventStore.erase_redacted`)."""

    session_id: str
    seq: int
    redaction_seq: int
    paths: list
    reason: str
    by: str
    erasure: str | None
    #: The paths named (or, for the whole payload, the top-level keys) that an earlier
    #: redaction had already redacted: left as they were (see :func:`redacted_payload`).
    already: list = ()


def marker(reason: str) -> str:
    """The value a redacted field reads as."""
    return f"[redacted: {reason}]"


def check_reason(reason: Any, where: str = "") -> str:
    """``reason`` when it can go into the marker: a non-empty string of one line without
    control characters (the marker must read the same in every JSON encoder). ``where``
    (``session 's', seq 4``) starts the error's message when given."""
    at = f"{where}: " if where else ""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidEvent(f"{at}a redaction needs a reason: a non-empty string, not {reason!r}")
    if any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or 0xd800 <= ord(c) < 0xe000 for c in reason):
        raise InvalidEvent(f"{at}the reason {reason!r} holds a control character or a lone surrogate: give one "
                           f"line of plain text")
    return reason


def parse_path(path: Any) -> list:
    """A path as a list: a list or tuple as it is (keys strings, indexes non-negative
    integers, the first a key), a JSON array text ``["a", 0]``, or the text
    :func:`path_text` writes: ``a.b[0].c``, a key that is not a plain name in brackets as a
    JSON string (``env["GITHUB.TOKEN"]``, ``["a b"][0]``). ``parse_path(path_text(p)) == p``
    for every path. Raises :class:`InvalidEvent` for anything else."""
    if isinstance(path, str):
        text = path.strip()
        path = None
        if text.startswith("["):  # a JSON array; or a first key in brackets, read below
            try:
                path = loads(text)
            except ValueError:
                path = None
        if path is None:
            path = _read_steps(text)
    if not isinstance(path, (list, tuple)) or not path:
        raise InvalidEvent(f"a path is a non-empty list of keys and indexes, not {path!r}")
    out = list(path)
    if not isinstance(out[0], str):
        raise InvalidEvent(f"path {out!r}: the first step is a top-level key (a string)")
    for step in out:
        if isinstance(step, bool) or not isinstance(step, (str, int)) or (isinstance(step, int) and step < 0):
            raise InvalidEvent(f"path {out!r}: each step is a key (string) or an index (integer >= 0), not {step!r}")
    return out


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # a key path_text writes bare
_BARE = re.compile(r"[^.\[\]\"]+")  # a key parse_path reads bare (any text without . [ ] ")
_INDEX = re.compile(r"\[(\d+)\]")
_JSON = json.JSONDecoder()


def _read_steps(text: str) -> list:
    """The steps of a path's text (see :func:`parse_path`)."""
    steps: list = []
    at = 0
    while at < len(text):
        m = _INDEX.match(text, at)
        if m is not None:
            steps.append(int(m.group(1)))
            at = m.end()
            continue
        if text.startswith('["', at):
            try:
                key, end = _JSON.raw_decode(text, at + 1)
            except ValueError:
                key, end = None, at
            if isinstance(key, str) and text.startswith("]", end):
                steps.append(key)
                at = end + 1
                continue
        elif not steps or text[at] == ".":  # the first key, or .key
            m = _BARE.match(text, at + 1 if steps else at)
            if m is not None:
                steps.append(m.group(0))
                at = m.end()
                continue
        raise InvalidEvent(f"path {text!r}: cannot read it at character {at + 1} (write keys with dots, indexes "
                           f"in brackets and other keys as JSON strings in brackets: "
                           f'tool_calls[0].function.arguments, env["GITHUB.TOKEN"])')
    return steps


def path_text(path: list) -> str:
    """A path's string form, which :func:`parse_path` reads back: ``tool_calls[0].function.arguments``;
    a key that is not a plain name (``[A-Za-z_][A-Za-z0-9_-]*``) as a JSON string in brackets
    (``env["GITHUB.TOKEN"]``, ``["a b"][0]``)."""
    out = []
    for i, step in enumerate(path):
        if type(step) is int:
            out.append(f"[{step}]")
        elif isinstance(step, str) and _NAME.fullmatch(step):
            out.append(f".{step}" if i else step)
        else:
            out.append(f"[{json.dumps(step, ensure_ascii=False)}]")
    return "".join(out)


def _lookup(payload: Any, path: list) -> tuple[bool, Any]:
    node = payload
    for step in path:
        if isinstance(step, int) and isinstance(node, list) and step < len(node):
            node = node[step]
        elif isinstance(step, str) and isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return False, None
    return True, node


def nameable(step: str | int) -> bool:
    """Whether a redaction's path can name ``step``: an index, or a key that JSON writes
    without escapes (no ``"``, ``\\``, control character or lone surrogate). SQLite's JSON
    paths, which its trigger applies, name a key by its text between quotes, unescaped."""
    return type(step) is int or dumps(step) == '"' + step + '"'


def pairing_id(path: list) -> bool:
    """Whether ``path`` names an identifier that pairs messages in the projection: a tool
    result's ``tool_call_id`` or a call's ``tool_calls[i].id``. Such a value is never
    redacted: without it a call and its result no longer pair, and the ``messages`` a chat API
    is given are invalid (a dangling call, an orphan result)."""
    return path == ["tool_call_id"] or (len(path) == 3 and path[0] == "tool_calls" and type(path[1]) is int
                                        and path[2] == "id")


def _call_paths(payload: dict, path: list) -> list[list]:
    """``path``, or for ``tool_calls`` as a whole, one call of it or one call's ``function``,
    when it holds calls: the name and arguments of each call, so that the calls keep their
    ids and shape and their results still pair with them (a chat API refuses a ``tool_calls``
    that is no array, a call without an id or whose ``function`` is no object)."""
    if path[0] != "tool_calls" or len(path) > 3 or (len(path) == 3 and path[2] != "function"):
        return [path]
    calls = payload["tool_calls"]
    if not isinstance(calls, list):
        return [path]
    indexes = range(len(calls)) if len(path) == 1 else [path[1]]
    if not all(isinstance(calls[i], dict) and isinstance(calls[i].get("function"), dict) for i in indexes):
        return [path]
    return [["tool_calls", i, "function", key] for i in indexes for key in ("name", "arguments")
            if key in calls[i]["function"]] or [path]


def _under(path: list, done: list) -> bool:
    """Whether ``path`` is one of the paths ``done`` or lies inside one of them."""
    return any(q == path[:len(q)] for q in done)


def redacted_payload(session_id: str, seq: int, payload: dict, paths: list | None,
                     reason: str, done: list | None = None) -> tuple[list, dict, list]:
    """``(paths, new payload, already)``: ``paths`` checked (each leads to a value of
    ``payload``; None means every top-level key; a path inside another one is dropped;
    ``tool_calls`` as a whole, one call or its ``function``, means each call's name and
    arguments; the identifiers that pair a call with its result, :func:`pairing_id`, are kept:
    refused when named, left out of the whole payload) and the payload with the marker at each.

    ``done`` holds the paths earlier redactions of the event named: a path that is one of
    them or lies inside one is already redacted and is left as it is (listed in ``already``);
    the others are redacted. Raises :class:`InvalidEvent` naming the session and seq, and the
    paths when every one is already redacted, or when the payload would not change (each
    value already reads as this marker: an UPDATE that changes nothing proves nothing)."""
    where = f"session {session_id!r}, seq {seq}"
    done = [q for q in done or [] if isinstance(q, list) and q]
    already: list = []
    if paths is None:
        paths = [[k] for k in payload if not pairing_id([k])]
        if not paths:
            raise InvalidEvent(f"{where}: the event's payload is empty: there is nothing to redact" if not payload else
                               f"{where}: the event's payload holds only {', '.join(payload)}, which pairs "
                               f"messages and is kept: there is nothing to redact")
    else:
        try:
            paths = [parse_path(p) for p in paths]
        except InvalidEvent as e:
            raise InvalidEvent(f"{where}: {e}") from None
    fresh = []
    for p in paths:
        if _under(p, done):  # (its value is a marker now: the path may lead nowhere)
            if p not in already:
                already.append(p)
            continue
        fresh.append(p)
        if not _lookup(payload, p)[0]:
            raise InvalidEvent(f"{where}: the payload has no {path_text(p)}")
        if p[0] == "event_id":
            raise InvalidEvent(f"{where}: event_id is the event's idempotency key and cannot be redacted")
        if not all(map(nameable, p)):
            raise InvalidEvent(f"{where}: path {path_text(p)}: a key holding '\"', '\\' or a control character "
                               f"cannot be redacted by path; redact its parent")
        if pairing_id(p):
            raise InvalidEvent(f"{where}: {path_text(p)} pairs a tool call with its result (the messages a chat "
                               f"API is given need it) and cannot be redacted; redact the other fields")
    expanded = [q for p in fresh for q in _call_paths(payload, p)]
    already += [q for q in expanded if _under(q, done) and q not in already]
    expanded = [q for q in expanded if not _under(q, done)]
    kept = []
    for p in expanded:  # a path under another (or twice) is covered by it
        if not any(q != p and q == p[:len(q)] for q in expanded) and p not in kept:
            kept.append(p)
    if not kept:
        raise InvalidEvent(f"{where}: {', '.join(path_text(p) for p in already)} already redacted")
    if len(kept) > MAX_PATHS:
        raise InvalidEvent(f"{where}: a redaction names at most {MAX_PATHS} paths ({len(kept)} given): redact "
                           f"in several steps")
    new = copy.deepcopy(payload)
    mark = marker(reason)
    for p in kept:
        node = new
        for step in p[:-1]:
            node = node[step]
        node[p[-1]] = mark
    if new == payload:  # (only a string equals the marker: each value was this very marker already)
        raise InvalidEvent(f"{where}: {', '.join(path_text(p) for p in kept)} already reads {mark}: there is "
                           f"nothing to redact")
    return kept, new, already


def redaction_record(seq: int, paths: list, reason: str, by: str, stored_hash: str, payload: dict,
                     salt: bytes | None, earlier: list[dict]) -> tuple[dict, bytes | None]:
    """``(record, new salt)``: the ``redaction`` event's payload for event ``seq`` (stored
    ``payload`` and ``salt``, and the payloads of the ``redaction`` events that named it
    before, ``earlier``), and what the event's salt column holds afterwards.

    ``digests`` in the record: each touched top-level key's digest of its value before this
    redaction (from the event's salt, from the key salts an earlier redaction left in the
    column, or from an earlier record). The key salts of the untouched keys go into the
    column (:func:`~eventstore.log.commit.key_salts_blob`), not into the log, so that a later
    redaction of one of them removes its salt with its value and leaves only a digest
    nobody can test a guess against. Neither for an event that was never salted (a legacy
    event): its ``hash`` binds it."""
    record: dict = {TARGET_SEQ: seq, "paths": paths, "reason": reason, "by": by, "hash": stored_hash}
    touched = list(dict.fromkeys(p[0] for p in paths))
    known_digests: dict[str, str] = {}
    for rec in earlier:
        for k, v in (rec.get("digests") or {}).items():
            known_digests.setdefault(k, v)
    key_salts = {} if salt is None or is_event_salt(salt) else key_salts_of(salt)
    if salt is None and not known_digests:
        return record, None
    digests, kept = {}, {}
    for k, v in payload.items():
        ks = key_salt(salt, k) if is_event_salt(salt) else key_salts.get(k)
        if k in touched:
            if ks is not None:
                digests[k] = value_digest(ks, v)
            elif k in known_digests:
                digests[k] = known_digests[k]
        elif ks is not None:
            kept[k] = ks
    record["digests"] = digests
    return record, key_salts_blob(kept)


def record_json(record: dict) -> str:
    """The canonical text of a redaction record."""
    return dumps(record)
