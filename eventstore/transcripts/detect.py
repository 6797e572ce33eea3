"""Tell the JSONL formats apart from a file's first lines."""

from __future__ import annotations

import json

from . import FORMATS

CLAUDE_TYPES = {"user", "assistant", "system", "summary", "file-history-snapshot", "progress", "queue-operation"}
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
LOOK_AT = 20  # lines


def detect(head: bytes) -> str | None:
    """The format of a file whose first bytes are ``head``: ``"eventstore"``,
    ``"claude-code"``, ``"codex"``, or None when the first lines that parse fit none.

    An eventstore file has a ``session/meta`` line or events with ``type``, ``seq`` and
    ``ts``; a Codex rollout has ``{timestamp, type, payload}`` lines of its types; a Claude
    Code transcript has lines of its types with ``sessionId``, ``uuid``, ``leafUuid`` or
    ``messageId``. Lines that do not parse (a truncated tail) are passed over.
    """
    seen = 0
    for raw in head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        seen += 1
        t = d.get("type")
        if t == "session/meta" or ("seq" in d and "ts" in d and isinstance(t, str)):
            return "eventstore"
        if t in CODEX_TYPES and "payload" in d:
            return "codex"
        if t in CLAUDE_TYPES and any(k in d for k in ("sessionId", "uuid", "leafUuid", "messageId")):
            return "claude-code"
        if seen >= LOOK_AT:
            break
    return None


def detect_file(path: str, limit: int = 64 << 20) -> str | None:
    """:func:`detect` on the first :data:`LOOK_AT` lines of the file at ``path`` (at most
    ``limit`` bytes: a transcript's line can hold a whole file or image). Raises ``OSError``."""
    with open(path, "rb") as f:
        head = b"".join(f.readline(limit) for _ in range(LOOK_AT))
    return detect(head)


def unknown_format_reason() -> str:
    """The sentence for a file in none of the formats."""
    return (f"not in a known format (the formats are {', '.join(FORMATS)}; "
            "give one with --format if the first lines do not say)")


def undetected_reason(path: str, limit: int = 64 << 20) -> tuple[int, str]:
    """Why :func:`detect_file` found no format in the file at ``path``, as ``(line,
    reason)`` for :class:`~eventstore.errors.InvalidJSONL` (line 0: the file as a whole):
    the file is empty, holds only blank lines, or its first non-blank line is not UTF-8 (the
    format was not the problem); otherwise :func:`unknown_format_reason`. Raises ``OSError``."""
    with open(path, "rb") as f:
        lines = [f.readline(limit) for _ in range(LOOK_AT)]
        at_end = not f.read(1)
    if not any(lines):
        return 0, "the file is empty"
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return lineno, f"invalid UTF-8 at byte {e.start + 1} of the line"
        return 0, unknown_format_reason()
    return 0, "the file holds only blank lines" if at_end else unknown_format_reason()
