"""Render events as a chat UI shows them: what ``eventstore tail`` prints.

Streamed ``assistant/chunk`` deltas are written as they arrive, on one growing line (no
newline until the message is complete), and the ``assistant/message`` that closes the
stream is not printed a second time unless its text differs from what was streamed.
User messages, tool calls (``-> name(arguments)``), tool results (``<- id: output``, long
output cut to a few lines), reasoning (``thinking: text`` on one line) and turn boundaries
get a line each; step boundaries are not shown; any other event type is shown as ``[type]
payload``, without the payload's ``event_id`` and ``source`` (the transcript line an
import kept: ``eventstore events`` shows it), and not at all when that is all it holds.
With several sessions interleaved, each line starts with ``[session id]``.

Text from the log is untrusted (model output, tool output): control characters other
than newline and tab are shown escaped (``\\x1b``), so a payload cannot drive the terminal.
"""

from __future__ import annotations

from collections.abc import Callable

from eventstore.core.store import Event
from eventstore.lazy import LazyModule, LazyPattern

json = LazyModule("json")  # imported at the first payload shown

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    import re

__all__ = ["TailView"]

#: Characters never written raw to a terminal (a regex character-class body): C0 and C1
#: controls but tab and newline (each caller escapes or keeps those), and the
#: bidirectional-text and line-separator characters that make a terminal show text in
#: another order or on other lines than it is stored (U+202E, "Trojan Source").
UNSAFE_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_CONTROL = LazyPattern(f"[{UNSAFE_CHARS}]")  # (compiled at first use: not at start-up)
#: The same, and tab and newline: for what must stay on one line (a session id).
CONTROL_OR_NEWLINE = LazyPattern(f"[\t\n{UNSAFE_CHARS}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
#: Payload keys that other events are shown without: the idempotency key, and the source
#: line an import of an agent's transcript keeps beside what it mapped (docs/import-export.md).
_NOT_SHOWN = frozenset({"event_id", "source"})


def escape_char(m: re.Match) -> str:
    """The escape shown for the one matched character: ``\\t``, ``\\n``, ``\\r``, ``\\xNN`` or ``\\uNNNN``."""
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if c < "\u0100" else f"\\u{ord(c):04x}")


def _clean(text: str) -> str:
    return _CONTROL.sub(escape_char, text)


def _text(content) -> str:
    """Message content as text: a string as is, content parts joined, null as empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(json.dumps(part, ensure_ascii=False))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


class TailView:
    """Turns events into text for a terminal, one :meth:`feed` per event.

    ``write(text, style)`` receives every piece of output (``style`` is None, ``"user"``,
    ``"assistant"``, ``"tool"`` or ``"dim"``: the caller decides how, or whether, to color
    it); ``show_session`` prefixes lines with the session id; ``result_lines`` is how many
    lines of a tool result are shown. Call :meth:`finish` at the end to close a line a
    stream left open.
    """

    def __init__(self, write: Callable[[str, str | None], None], *, show_session: bool = False,
                 result_lines: int = 6):
        self.write = write
        self.show_session = show_session
        self.result_lines = result_lines
        self._open: str | None = None  # session whose streamed line is not yet ended
        self._streamed: dict[str, str] = {}  # session -> text streamed for the message in progress

    def finish(self) -> None:
        """End the line a stream left open, if any."""
        if self._open is not None:
            self.write("\n", None)
            self._open = None

    def _line(self, sid: str, label: str, text: str, style: str | None) -> None:
        self.finish()
        prefix = f"[{CONTROL_OR_NEWLINE.sub(escape_char, sid)}] " if self.show_session else ""
        if label:
            self.write(prefix, "dim")
            self.write(label, style)
            self.write(_clean(text) + "\n", None if style in ("user", "assistant") else style)
        else:
            self.write(prefix, "dim")
            self.write(_clean(text) + "\n", style)

    def _calls(self, sid: str, calls: object) -> None:
        for call in calls if isinstance(calls, list) else []:  # anything else is no list of calls
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                args = fn.get("arguments")
                args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                self._line(sid, "", f"  -> {fn.get('name')}({_short(args, 200)})", "tool")
            else:
                self._line(sid, "", f"  -> {_short(json.dumps(call, ensure_ascii=False), 200)}", "tool")

    def feed(self, ev: Event) -> None:
        """Render one event."""
        sid, t, p = ev.session_id, ev.type, ev.payload
        if t == "assistant/chunk":
            delta = p.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else None
            if not isinstance(piece, str) or not piece:
                return
            if self._open != sid:
                self.finish()
                if self.show_session:
                    self.write(f"[{CONTROL_OR_NEWLINE.sub(escape_char, sid)}] ", "dim")
                self.write("assistant: ", "assistant")
                if self._streamed.get(sid):
                    self.write("...", "dim")  # this stream was interrupted by another session
                self._open = sid
            self.write(_clean(piece), None)
            self._streamed[sid] = self._streamed.get(sid, "") + piece
        elif t == "assistant/message":
            text = _text(p.get("content"))
            streamed = self._streamed.pop(sid, None)
            if streamed is not None and self._open == sid:
                self.finish()
            if streamed is None or streamed != text:
                if text or not p.get("tool_calls"):
                    self._line(sid, "assistant: ", text, "assistant")
            self._calls(sid, p.get("tool_calls"))
        elif t == "assistant/part":  # a later line of one API message (an agent's transcript)
            text = _text(p.get("content"))
            if text:
                self._line(sid, "assistant: ", text, "assistant")
            self._calls(sid, p.get("tool_calls"))
        elif t == "user/message":
            self._line(sid, "user: ", _text(p.get("content")), "user")
        elif t == "tool/result":
            lines = _text(p.get("content")).split("\n")
            shown = lines[:self.result_lines]
            if len(lines) > len(shown):
                shown.append(f"... ({len(lines) - len(shown)} more lines)")
            head = f"  <- {p.get('tool_call_id')}: "
            self._line(sid, "", head + ("\n" + " " * 6).join(_short(s, 300) for s in shown), "tool")
        elif t in ("turn/start", "turn/end"):
            self._line(sid, "", "--- turn ---" if t == "turn/start" else "--- end of turn ---", "dim")
        elif t in ("step/start", "step/end"):
            return
        elif t == "assistant/thinking":
            text = p.get("thinking")
            text = " ".join(text.split()) if isinstance(text, str) and text.strip() else "[redacted]"
            self._line(sid, "", f"thinking: {_short(text, 200)}", "dim")
        else:
            rest = {k: v for k, v in p.items() if k not in _NOT_SHOWN}
            if not rest and "source" in p:  # a transcript line kept as it was: nothing for a chat view
                return
            self._line(sid, "", f"[{t}]" + (f" {_short(json.dumps(rest, ensure_ascii=False), 200)}" if rest else ""),
                       "dim")

