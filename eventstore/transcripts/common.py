"""What the transcript converters share: reading a file's lines, timestamps, the result shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import InvalidJSONL


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


@dataclass
class Lines:
    """The parsed lines of one file: ``lines`` is ``[(line number, object), ...]``,
    ``dropped`` the ``FILE:LINE: reason`` of each line ``salvage`` skipped, ``waiting``
    True when the last line is incomplete (no newline, not JSON yet: the agent is still
    writing it) and was left for the next run."""

    lines: list[tuple[int, dict]]
    dropped: list[str]
    waiting: bool


def read_lines(path: str, data: bytes | None = None, *, salvage: bool = False) -> Lines:
    """Parse a JSONL transcript. ``data`` is the file's bytes (read from ``path`` when None).

    Blank lines are skipped. A last line that does not parse (with or without its newline),
    or that ends inside a UTF-8 character (no newline yet), is left for the next run
    (``waiting``): once more lines follow it, it is an error.
    Raises :class:`InvalidJSONL` (``FILE:LINE: reason``) for a line that is not UTF-8, not
    JSON, or not an object, unless ``salvage``, which skips such lines and lists them in
    ``dropped``. Raises ``OSError`` when the file cannot be read.
    """
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    parts = data.split(b"\n")
    last = len(parts)
    while last > 0 and not parts[last - 1].strip():
        last -= 1
    out: list[tuple[int, dict]] = []
    dropped: list[str] = []
    waiting = False
    for i, raw in enumerate(parts, 1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip():
            continue
        is_tail = i == last  # the last line that holds anything, newline or not
        reason = None
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict):
                reason = f"not a JSON object (a {type(obj).__name__})"
        except UnicodeDecodeError as e:
            if is_tail and i == len(parts) and e.reason == "unexpected end of data":
                waiting = True  # cut inside a character: the agent is still writing it
                continue
            reason = f"invalid UTF-8 at byte {e.start}"
        except ValueError as e:
            if is_tail:
                waiting = True
                continue
            reason = f"not JSON: {e}"
        if reason is not None:
            if not salvage:
                raise InvalidJSONL(path, i, reason)
            dropped.append(f"{path}:{i}: {reason}")
            continue
        out.append((i, obj))
    return Lines(out, dropped, waiting)


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
