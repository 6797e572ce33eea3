"""Tell the JSONL formats apart from a file's first lines."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import IO

from eventstore.io.transcripts import formats, names

LOOK_AT = 20  # lines


def detect(head: bytes) -> str | None:
    """The name of the format of a file whose first bytes are ``head`` (``"eventstore"``,
    ``"claude-code"``, ``"codex"``, or another registered one: :mod:`eventstore.io.transcripts`),
    or None when the first lines that parse fit none.

    Each line that parses as an object is shown to every format's ``looks_like``, in the
    order they were registered (the store's own format first); the first that says yes
    names the format. Lines that do not parse (a truncated tail) are passed over.
    """
    registered = formats()
    seen = 0
    for raw in head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply to tell
            continue
        if not isinstance(d, dict):
            continue
        seen += 1
        for fmt in registered:
            if fmt.looks_like(d):
                return fmt.name
        if seen >= LOOK_AT:
            break
    return None


@dataclass
class Head:
    """The first :data:`LOOK_AT` lines of a file (each at most ``limit`` bytes) and whether
    the file ends there. ``data`` is every byte read, to be read again by the import."""

    lines: list[bytes]
    at_end: bool
    data: bytes


def read_head(f: IO[bytes], limit: int = 64 << 20) -> Head:
    """The :class:`Head` of the binary stream ``f``, read from where it is (a pipe as much
    as a file: it is read once, and :func:`replay` gives back the stream from its start):
    its first :data:`LOOK_AT` lines, at most ``limit`` bytes of them in all (a device
    such as /dev/zero has no newline to stop at)."""
    lines: list[bytes] = []
    left = limit
    while len(lines) < LOOK_AT and left > 0:
        line = f.readline(left)
        if not line:
            break
        lines.append(line)
        left -= len(line)
    more = f.read(1) if len(lines) == LOOK_AT or left <= 0 else b""
    return Head(lines, not more, b"".join(lines) + more)


def replay(head: Head, rest: IO[bytes]) -> IO[bytes]:
    """A binary stream of ``head``'s bytes followed by what is left of ``rest``: the whole
    of a stream that cannot be opened twice (a pipe, stdin) after :func:`read_head`."""
    return io.BufferedReader(_Chain(head.data, rest), buffer_size=1 << 20)


class _Chain(io.RawIOBase):
    def __init__(self, first: bytes, rest: IO[bytes]) -> None:
        self._first = memoryview(first)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._first:
            n = min(len(b), len(self._first))
            b[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        read1 = getattr(self._rest, "read1", self._rest.read)
        data = read1(len(b))
        b[:len(data)] = data
        return len(data)


def detect_file(path: str, limit: int = 64 << 20) -> str | None:
    """:func:`detect` on the first :data:`LOOK_AT` lines of the file at ``path`` (at most
    ``limit`` bytes: a transcript's line can hold a whole file or image). Raises ``OSError``."""
    with open(path, "rb") as f:
        return detect(read_head(f, limit).data)


def unknown_format_reason() -> str:
    """The sentence for a file in none of the formats."""
    return (f"not in a known format (the formats are {', '.join(names())}; "
            "give one with --format if the first lines do not say)")


def first_line_unfinished(path: str, limit: int = 64 << 20) -> bool:
    """Whether the file at ``path`` holds bytes but no newline (within ``limit`` bytes):
    its writer has not finished its first line. Raises ``OSError``."""
    read = 0
    with open(path, "rb") as f:
        while read < limit:
            chunk = f.read(1 << 16)
            if not chunk:
                return read > 0
            if b"\n" in chunk:
                return False
            read += len(chunk)
    return False


def undetected_reason(path: str, limit: int = 64 << 20) -> tuple[int, str]:
    """:func:`head_reason` of the file at ``path``. Raises ``OSError``."""
    with open(path, "rb") as f:
        return head_reason(read_head(f, limit))


def head_reason(head: Head) -> tuple[int, str]:
    """Why :func:`detect` found no format in a file that begins with ``head``, as ``(line,
    reason)`` for :class:`~eventstore.errors.InvalidJSONL` (line 0: the file as a whole):
    the file is empty, holds only blank lines, or its first non-blank line is not UTF-8 or
    is nested too deeply to parse (the format was not the problem); otherwise :func:`unknown_format_reason`."""
    if not any(head.lines):
        return 0, "the file is empty"
    for lineno, raw in enumerate(head.lines, 1):
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return lineno, f"invalid UTF-8 at byte {e.start + 1} of the line"
        try:
            json.loads(raw)
        except RecursionError:
            return lineno, "nested too deeply"
        except ValueError:
            pass
        return 0, unknown_format_reason()
    return 0, "the file holds only blank lines" if head.at_end else unknown_format_reason()
