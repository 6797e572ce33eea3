"""The tool-call and turn rules: one tracker that follows a session's events in seq order.

The rules are the ``tool_calls`` and ``turns`` views' (docs/schema.md), so that ``verify``,
``repair`` and the viewer's sessions index say what the views say:

* the calls of an ``assistant/message`` or ``assistant/part`` are the elements of its
  ``tool_calls`` when that is a JSON array; an element's ``id`` (a string) names it;
* the ``tool/result`` answering a call is the first one after it with the call's id, before
  the next ``user/message`` or ``assistant/message`` (which closes the window: a call still
  waiting then dangles); one result answers every waiting call of its id;
* a turn runs from a ``turn/start`` to the next ``turn/end`` (complete) or to the event
  before the next ``turn/start`` (not complete), or to the session's last event (complete
  when answered: its last message is an assistant message and every call made in it has
  its result, revision 0300);
* a session is *complete* when no call dangles or waits and its last turn is over: ended,
  or answered (its last message is an assistant message without tool calls: an imported
  transcript's turn has no end line, see docs/import-export.md).

:class:`ToolCallTracker` counts; with ``keep=True`` it also keeps every :class:`Call` and
:class:`Turn` (what the views list). A subclass reports problems by overriding
:meth:`~ToolCallTracker.on_dangling`, :meth:`~ToolCallTracker.on_orphan` and
:meth:`~ToolCallTracker.on_bad_calls` (``verify`` does).
"""

from __future__ import annotations

from typing import Any

from eventstore.log.codec import js_truthy
from eventstore.log.types import (
    ASSISTANT_MESSAGE,
    ASSISTANT_PART,
    STEP_END,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = ["Call", "ToolCallTracker", "Turn"]

_NO_ID = object()  # the key of calls without a string id: no result answers them


class Call:
    """One tool call: the seq of the event holding it, its id (None when it has no string
    id), its function name (None when it has none) and the seq of the result answering it."""

    __slots__ = ("seq", "id", "name", "result_seq")

    def __init__(self, seq: int, id: str | None, name: Any):
        self.seq = seq
        self.id = id
        self.name = name
        self.result_seq: int | None = None

    def __repr__(self) -> str:
        return f"Call(seq={self.seq}, id={self.id!r}, result_seq={self.result_seq})"


class Turn:
    """One turn: its first and last seq, whether a ``turn/end`` ended it, its ``step/start``
    events and tool calls."""

    __slots__ = ("start_seq", "end_seq", "complete", "steps", "tool_calls")

    def __init__(self, start_seq: int):
        self.start_seq = start_seq
        self.end_seq = start_seq
        self.complete = False
        self.steps = 0
        self.tool_calls = 0

    def __repr__(self) -> str:
        return (f"Turn({self.start_seq}..{self.end_seq}, complete={self.complete}, steps={self.steps}, "
                f"tool_calls={self.tool_calls})")


class ToolCallTracker:
    """Follow one session's events in seq order (:meth:`feed`, then :meth:`finish` at the end
    of the log): its tool calls and results, its turns and steps (see the module docstring).

    Counters: ``messages`` (user, assistant and tool messages), ``tool_calls``, ``waiting``
    (calls not answered yet, in their window), ``dangling`` (calls whose window closed
    without a result); ``pending`` maps each waiting call id to its calls; ``open_turn``,
    ``answered`` (the last message is an assistant message without tool calls),
    ``step_open`` (the open ``step/start``'s payload) and ``step_calls`` (its calls)."""

    __slots__ = ("pending", "answered_ids", "waiting", "dangling", "messages", "tool_calls", "open_turn",
                 "answered", "step_open", "step_calls", "last_seq", "calls", "turns")

    def __init__(self, keep: bool = False):
        self.pending: dict[Any, list[Call]] = {}
        self.answered_ids: dict[str, int] = {}  # call id -> the seq of its result, in the window
        self.waiting = 0
        self.dangling = 0
        self.messages = 0
        self.tool_calls = 0
        self.open_turn = False
        self.answered = False
        self.step_open: dict | None = None
        self.step_calls = 0
        self.last_seq = -1
        self.calls: list[Call] | None = [] if keep else None
        self.turns: list[Turn] | None = [] if keep else None

    @property
    def complete(self) -> bool:
        """No call dangles or waits, and the last turn ended or was answered."""
        return (not self.open_turn or self.answered) and not self.waiting and not self.dangling

    def feed(self, seq: int, type_: str, payload: Any) -> None:
        """Take the next event (``payload`` its dict; only ``tool_calls``, ``tool_call_id``
        and a ``step/start``'s payload are read; anything else counts as ``{}``)."""
        if self.turns is not None:
            self._span(seq, type_)
        self.last_seq = seq
        if type(payload) is not dict:
            payload = {}
        if type_ == ASSISTANT_MESSAGE:
            self.messages += 1
            self._close(seq, type_)
            self._take(seq, payload.get("tool_calls"), type_)
            self.answered = not self.waiting
        elif type_ == ASSISTANT_PART:  # more of the last assistant message: its window stays open
            if self._take(seq, payload.get("tool_calls"), type_):
                self.answered = False
        elif type_ == USER_MESSAGE:
            self.messages += 1
            self.answered = False
            self._close(seq, type_)
        elif type_ == TOOL_RESULT:
            self.messages += 1
            self.answered = False
            self._result(seq, payload.get("tool_call_id"))
        elif type_ == STEP_START:
            self.step_open = payload
            self.step_calls = 0
        elif type_ == STEP_END:
            self.step_open = None
        elif type_ == TURN_START:
            self.open_turn = True
            self.answered = False  # (a new turn is answered by a message of its own)
        elif type_ == TURN_END:
            self.open_turn = False
            self.step_open = None

    def finish(self) -> None:
        """The log ends here: calls still waiting dangle (:meth:`on_dangling` with ``at_seq``
        None), an open turn ends at the last event."""
        self._close(None, "")
        if self.turns and not self.turns[-1].complete and self.open_turn:
            last = self.turns[-1]
            last.end_seq = self.last_seq
            last.complete = self.answered and all(c.result_seq is not None for c in self.calls
                                                  if c.seq > last.start_seq)

    def waiting_ids(self) -> list[str]:
        """The ids (non-empty strings) of the calls still waiting for a result, in the order
        they were made."""
        return [cid for cid in self.pending if cid is not _NO_ID and cid]

    # --- what a subclass may report --------------------------------------------------------

    def on_dangling(self, calls: list[Call], at_seq: int | None, what: str) -> None:
        """``calls`` (in order) got no result before the ``what`` message at ``at_seq``
        (None: the log ended)."""

    def on_orphan(self, seq: int, call_id: Any, answered_at: int | None) -> None:
        """The ``tool/result`` at ``seq`` answers no waiting call: ``call_id`` is not a string
        (None when missing), or ``answered_at`` is the seq of the result that already
        answered it, or None (no call of that id in the window)."""

    def on_bad_calls(self, seq: int, problem: str) -> None:
        """The event at ``seq`` holds ``tool_calls`` that a chat API rejects (``problem``)."""

    # --- the rules -----------------------------------------------------------------------

    def _close(self, seq: int | None, what: str) -> None:
        if self.pending:
            left = [c for calls in self.pending.values() for c in calls]
            left.sort(key=_call_seq)
            self.dangling += len(left)
            self.on_dangling(left, seq, what)
            self.pending = {}
            self.waiting = 0
        if self.answered_ids:
            self.answered_ids = {}

    def _take(self, seq: int, calls: Any, type_: str) -> bool:
        """Take an event's calls; True when it holds at least one."""
        if type(calls) is not list:
            if js_truthy(calls):
                self.on_bad_calls(seq, f"tool_calls is a JSON {type(calls).__name__}, not an array: the "
                                       f"projection passes it on and a chat API rejects it")
            return False
        pending = self.pending
        for i, call in enumerate(calls):
            cid = call.get("id") if type(call) is dict else None
            fn = call.get("function") if type(call) is dict else None
            key = cid if type(cid) is str else _NO_ID
            c = Call(seq, None if key is _NO_ID else cid, fn.get("name") if type(fn) is dict else None)
            if key is _NO_ID or not cid:
                self.on_bad_calls(seq, f"tool call #{i} has no id (a string), so no result can answer it")
            elif cid in pending:
                self.on_bad_calls(seq, f"tool call id {cid!r} appears twice in this message")
            pending.setdefault(key, []).append(c)
            if self.calls is not None:
                self.calls.append(c)
        n = len(calls)
        self.tool_calls += n
        self.waiting += n
        self.step_calls += n
        if self.turns and self.open_turn:
            self.turns[-1].tool_calls += n
        return n > 0

    def _result(self, seq: int, cid: Any) -> None:
        if type(cid) is str:
            calls = self.pending.pop(cid, None)
            if calls is not None:
                for c in calls:
                    c.result_seq = seq
                self.waiting -= len(calls)
                self.answered_ids[cid] = seq
                return
            self.on_orphan(seq, cid, self.answered_ids.get(cid))
        else:
            self.on_orphan(seq, cid, None)

    def _span(self, seq: int, type_: str) -> None:
        """Keep the turns (the ``turns`` view's rows) as the events come."""
        turns = self.turns
        if type_ == TURN_START:
            if self.open_turn and turns:
                turns[-1].end_seq = seq - 1
            turns.append(Turn(seq))
        elif type_ == TURN_END and self.open_turn:
            turns[-1].end_seq = seq
            turns[-1].complete = True
        elif type_ == STEP_START and self.open_turn:
            turns[-1].steps += 1


def _call_seq(c: Call) -> int:
    return c.seq

