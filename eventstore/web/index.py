"""The sessions index: one summary per session, kept in memory, current to the last commit.

Built once from the log (:meth:`SessionIndex.load`, from the backend's ``session_rows``,
``session_counts`` and ``state_rows``), then kept current event by event from a backend
follower (see :mod:`eventstore.web.hub`), through the same
:meth:`Summary.state` that followed the stored events' turns and calls: the sessions page
sorts, filters and pages in memory, where asking the database per request would cost a
scan of the log.

Whether a session is *complete* (no tool call without its result, its last turn over) and
its counts follow the rules of :mod:`eventstore.log.toolcalls`, the views' rules.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

import orjson

from eventstore.log.toolcalls import ToolCallTracker
from eventstore.log.types import ASSISTANT_MESSAGE, ASSISTANT_PART, TOOL_RESULT

__all__ = ["Summary", "SessionIndex", "SORT_KEYS", "state_extra"]

_NO_PAYLOAD: dict = {}


def _loads(text: str):
    """JSON text to a value: orjson, or json where orjson refuses (a lone surrogate escape,
    a number past a double)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def state_extra(type_: str, payload_json: str):
    """What :meth:`Summary.state` takes of an event with the JSON text ``payload_json``: an
    assistant message's or part's ``tool_calls`` (a str as JSON text, as the backend's
    ``state_rows`` give it), a ``tool/result``'s ``tool_call_id``, None for any other event."""
    if type_ == ASSISTANT_MESSAGE or type_ == ASSISTANT_PART:
        calls = _loads(payload_json).get("tool_calls")
        return json.dumps(calls) if isinstance(calls, str) else calls
    if type_ == TOOL_RESULT:
        return _loads(payload_json).get("tool_call_id")
    return None


class Summary(ToolCallTracker):
    """What the sessions page shows of one session. Times are seconds since the epoch; the
    turn and tool-call counts are the tracker's (:class:`~eventstore.log.toolcalls.ToolCallTracker`)."""

    __slots__ = ("id", "created_at", "events", "first_ts", "last_ts", "last_position")

    def __init__(self, session_id: str, created_at: float):
        super().__init__()
        self.id = session_id
        self.created_at = created_at
        self.events = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.last_position = 0

    def count(self, position: int, seq: int, ts: float) -> None:
        """Count one event (every event, in order)."""
        self.events = seq + 1
        self.last_position = position
        if seq == 0:
            self.first_ts = ts
        self.last_ts = ts

    def state(self, type_: str, extra, seq: int = -1) -> None:
        """Follow the turns and tool calls with one event. ``extra`` is, for an
        ``assistant/message`` or ``assistant/part``, its ``tool_calls`` (a value, or JSON text
        of it); for a ``tool/result``, its ``tool_call_id``."""
        if type_ == ASSISTANT_MESSAGE or type_ == ASSISTANT_PART:
            payload = {"tool_calls": _loads(extra) if isinstance(extra, str) else extra}
        elif type_ == TOOL_RESULT:
            payload = {"tool_call_id": extra}
        else:
            payload = _NO_PAYLOAD
        self.feed(seq, type_, payload)

    def to_dict(self) -> dict:
        return {"id": self.id, "created_at": self.created_at, "events": self.events,
                "messages": self.messages, "tool_calls": self.tool_calls, "first_ts": self.first_ts,
                "last_ts": self.last_ts, "complete": self.complete, "open_turn": self.open_turn,
                "dangling_calls": self.dangling + self.waiting}


def sort_key(attr: str, descending: bool):
    # A missing value (an empty session's times) sorts last in either direction.
    def key(s: Summary):
        v = getattr(s, attr)
        return ((v is None) != descending, 0 if v is None else v, s.id)
    return key


#: The columns :meth:`SessionIndex.page` sorts by.
SORT_KEYS = ("id", "events", "messages", "tool_calls", "first_ts", "last_ts", "created_at", "complete")


class SessionIndex:
    """Every session's :class:`Summary`, safe to read from many threads while one thread
    applies new events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Summary] = {}
        self._order: list[Summary] = []  # insertion order (sessions as stored)
        self.version = 0  # grows with every change; sorted orders are cached per version
        self._sorted: dict[tuple, tuple[int, list[Summary]]] = {}

    def load(self, sessions: Iterable[tuple], counts: Iterable[tuple], states: Iterable[tuple]) -> None:
        """Build from the log as of one position: ``sessions`` rows ``(id, created_at)``,
        ``counts`` rows ``(id, events, last_position, first_ts, last_ts)``, ``states`` rows
        ``(position, id, type, extra)`` in position order (see
        :meth:`~eventstore.backends.capabilities.SessionIndex.state_rows`)."""
        with self._lock:
            by_id = self._by_id
            for sid, created_at in sessions:
                if sid not in by_id:
                    s = by_id[sid] = Summary(sid, created_at)
                    self._order.append(s)
            for sid, events, last_position, first_ts, last_ts in counts:
                s = by_id.get(sid)
                if s is None:
                    s = by_id[sid] = Summary(sid, first_ts)
                    self._order.append(s)
                s.events, s.last_position, s.first_ts, s.last_ts = events, last_position, first_ts, last_ts
            for _position, sid, type_, extra in states:
                by_id[sid].state(type_, extra)
            self.version += 1

    def apply(self, position: int, session_id: str, seq: int, type_: str, ts: float, extra) -> bool:
        """Apply one new event (see :meth:`Summary.count` and :meth:`Summary.state`); a
        session not yet known is added, created at ``ts``. False when the event was
        already counted."""
        with self._lock:
            s = self._by_id.get(session_id)
            if s is None:
                s = self._by_id[session_id] = Summary(session_id, ts)
                self._order.append(s)
            if position <= s.last_position:
                return False
            s.count(position, seq, ts)
            s.state(type_, extra, seq)
            self.version += 1
            return True

    def get(self, session_id: str) -> Summary | None:
        with self._lock:
            return self._by_id.get(session_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def summaries(self) -> list[Summary]:
        """Every session's summary, in storage order (a copy of the list; the summaries
        themselves change as events are applied)."""
        with self._lock:
            return list(self._order)

    def page(self, *, sort: str = "last_ts", descending: bool = True, query: str = "", offset: int = 0,
             limit: int = 50) -> tuple[int, list[dict]]:
        """``(matching, rows)``: how many sessions contain ``query`` in their id (any case),
        and the ``limit`` of them from ``offset`` in ``sort`` order, as dicts
        (:meth:`Summary.to_dict`). Raises ``KeyError`` for an unknown ``sort``."""
        if sort not in SORT_KEYS:
            raise KeyError(sort)
        key = (lambda s: s.id) if sort == "id" else sort_key(sort, descending)
        with self._lock:
            version = self.version
            cache_key = (sort, descending, query)
            cached = self._sorted.get(cache_key)
            if cached is None or cached[0] != version:
                items = self._order
                if query:
                    q = query.casefold()
                    items = [s for s in items if q in s.id.casefold()]
                ordered = sorted(items, key=key, reverse=descending)
                if len(self._sorted) > 16:
                    self._sorted.clear()
                self._sorted[cache_key] = (version, ordered)
            else:
                ordered = cached[1]
            return len(ordered), [s.to_dict() for s in ordered[offset:offset + limit]]
