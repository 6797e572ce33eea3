"""What the transcript converters share: reading a file's lines, timestamps, the result shape."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO

from eventstore.backends.capabilities import LogViews
from eventstore.errors import InvalidJSONL
from eventstore.io.jsonl import MAX_LINE_BYTES, too_long


@dataclass
class Converted:
    """One session converted from a transcript file.

    ``events`` holds ``(type, payload, ts)`` tuples in seq order; every payload has an
    ``event_id`` derived from the source (a line's uuid, or ``L<line number>``), stable as
    the file grows, so a re-import recognises what it already stored. ``held`` counts the
    source lines left for the next run because what they belong to is not complete yet
    (an API message whose last block is not written).
    """

    session_id: str
    meta: dict
    events: list[tuple[str, dict, float]] = field(default_factory=list)
    held: int = 0
    #: ``{(line type, event type): count}``: what the source lines became (``import -v``).
    folded: dict = field(default_factory=dict)


@dataclass
class Lines:
    """The parsed lines of one file: ``lines`` is ``[(line number, object), ...]``,
    ``dropped`` the ``FILE:LINE: reason`` of each line ``salvage`` skipped, ``waiting``
    True when the last line is incomplete (no newline, not JSON yet: the agent is still
    writing it) and was left for the next run."""

    lines: list[tuple[int, dict]]
    dropped: list[str]
    waiting: bool


MAX_DROPPED = 10_000  # lines salvage drops from one file before it gives the file up


def read_lines(path: str, data: bytes | None = None, *, salvage: bool = False,
               stream: IO[bytes] | None = None, max_line: int = MAX_LINE_BYTES) -> Lines:
    """Parse a JSONL transcript, line by line as it is read: from ``stream`` (a binary
    file object: a pipe, stdin) when given, else from ``data`` (the file's bytes), else
    from the file at ``path`` (which names it in messages either way).

    Blank lines are skipped. A last line that does not parse (with or without its newline),
    or that ends inside a UTF-8 character (no newline yet), is left for the next run
    (``waiting``): once more lines follow it, it is an error.
    Raises :class:`InvalidJSONL` (``FILE:LINE: reason``) for a line that is not UTF-8, not
    JSON, nested too deeply, not an object, or longer than ``max_line`` bytes (read no
    further than that), unless ``salvage``, which skips such lines and lists them in
    ``dropped`` (up to :data:`MAX_DROPPED` of them: past that the file is an error).
    Raises ``OSError`` when the file cannot be read. Memory: the parsed lines (what the
    converters need) and one line's bytes.
    """
    if stream is None:
        with (io.BytesIO(data) if data is not None else open(path, "rb")) as f:
            return read_lines(path, salvage=salvage, stream=f, max_line=max_line)
    out: list[tuple[int, dict]] = []
    dropped: list[str] = []
    unparsed: tuple[int, str] | None = None  # a line that is not JSON: an error unless it is the last

    def bad(i: int, reason: str) -> None:
        if not salvage:
            raise InvalidJSONL(path, i, reason)
        if len(dropped) >= MAX_DROPPED:  # (a device such as /dev/urandom would grow the list forever)
            raise InvalidJSONL(path, i, f"{reason}; more than {MAX_DROPPED} bad lines to drop: not a transcript "
                                        f"that --salvage can keep (nothing of it is stored)")
        dropped.append(f"{path}:{i}: {reason}")

    readline = stream.readline
    i = 0
    while True:
        raw = readline(max_line + 1)
        if not raw:
            break
        i += 1
        if len(raw) > max_line and not raw.endswith(b"\n"):
            if unparsed is not None:
                bad(*unparsed)
                unparsed = None
            bad(i, too_long(max_line))
            while raw and not raw.endswith(b"\n"):  # salvage: the rest of the line, a piece at a time
                raw = readline(1 << 20)
            continue
        had_newline = raw.endswith(b"\n")
        raw = raw.rstrip(b"\n")
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip():
            continue
        if unparsed is not None:  # a line follows it: it was not the last one, still being written
            bad(*unparsed)
            unparsed = None
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            if not had_newline and e.reason == "unexpected end of data":
                unparsed = (i, f"invalid UTF-8 at byte {e.start}")  # cut inside a character: still being written
                continue
            bad(i, f"invalid UTF-8 at byte {e.start}")
            continue
        except RecursionError:
            bad(i, "nested too deeply")
            continue
        except ValueError as e:
            unparsed = (i, f"not JSON: {e}")
            continue
        if not isinstance(obj, dict):
            bad(i, f"not a JSON object (a {type(obj).__name__})")
            continue
        out.append((i, obj))
    return Lines(out, dropped, unparsed is not None)


def parse_ts(value: object) -> float | None:
    """An ISO-8601 timestamp (``2025-07-18T09:14:05.212Z``) as seconds since the epoch
    (millisecond precision, as the JSONL format writes ``ts``); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return round(dt.timestamp(), 3)


def without(d: dict, keys: tuple[str, ...] | set[str] | frozenset[str]) -> dict:
    """``d`` without ``keys`` (a new dict)."""
    return {k: v for k, v in d.items() if k not in keys}


#: The event type of facts an import learns after a session is created (a model, a title,
#: the Task call a subagent answers, the branch a /rewind continued in): see
#: docs/import-export.md, "Facts learned later".
INFO = "session/info"


def effective_meta(meta: dict, events) -> dict:
    """A session's ``meta`` as its ``session/info`` events leave it: each one's ``info``
    updates it in seq order (the latest value wins; a null value removes the key).
    ``events`` yields ``(type, payload)`` pairs (or longer tuples starting so)."""
    out = dict(meta)
    for ev in events:
        type_, payload = ev[0], ev[1]
        if type_ != INFO or not isinstance(payload, dict) or not isinstance(payload.get("info"), dict):
            continue
        for k, v in payload["info"].items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
    return out


def current_meta(store, session_id: str) -> dict:
    """The stored session's meta as its ``session/info`` events leave it (see
    :func:`effective_meta`): what ``sessions --json`` and the viewer show. ``{}`` for a
    session that is not stored. Its ``title`` is also the latest stored ``claude/summary``
    event's whose ``leafUuid`` is one of this session's lines (a summary line of any file,
    imported before or after this one), unless a ``session/info`` of its own sets one."""
    text = store.session_meta_json(session_id)
    if text is None:
        return {}
    meta = json.loads(text)
    out = meta if isinstance(meta, dict) else {}
    titles = store.capability(LogViews).summary_titles(session_id)
    if titles:  # a summary line naming one of its lines, in any file; below its own session/info title
        out["title"] = titles[-1][1]
    out = effective_meta(out, ((e.type, e.payload) for e in store.session(session_id).events(types=INFO)))
    parent = out.get("parent_session")
    if out.get("relation") == "subagent" and "tool_call_id" not in out and isinstance(parent, str):
        # A subagent file's events come from its own file only: the Task call it answers is
        # named on the parent's side (``subagent/<tool_call_id>``), when the parent is stored.
        up = current_meta(store, parent) if parent != session_id else {}
        calls = [k.split("/", 1)[1] for k, v in up.items() if k.startswith("subagent/") and v == session_id]
        if calls:
            out["tool_call_id"] = calls[-1]
    return out


def all_info(store, keys: frozenset[str] | None = None) -> dict[str, dict]:
    """``{session id: what its session/info events say}`` (each merged as
    :func:`effective_meta` merges them; sessions without any are left out), in one read,
    over the ``title`` of the latest Claude ``summary`` line naming one of the session's
    lines from any file (see :func:`current_meta`). With ``keys``, only those keys are
    kept (one event's payload in memory at a time, not every session's whole info)."""
    views = store.capability(LogViews)
    out: dict[str, dict] = {sid: {"title": title} for sid, title in views.summary_titles()}
    for sid, payload in views.info_rows():
        p = json.loads(payload)
        if keys is not None and isinstance(p, dict) and isinstance(p.get("info"), dict):
            p = {"info": {k: v for k, v in p["info"].items() if k in keys}}
        out[sid] = effective_meta(out.get(sid, {}), [(INFO, p)])
        del p
    return out
