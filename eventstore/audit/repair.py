"""Repair: append what an interrupted session needs for its projection to be valid again.

:func:`repair` (``Session.repair()``, ``eventstore repair``) appends a ``tool/result`` for each
dangling tool call, a ``step/end`` for an open step, a ``turn/end`` for an open turn. History
is never changed: it writes only through :meth:`Session.append_many`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventstore.errors import SeqConflict
from eventstore.log.codec import loads
from eventstore.log.toolcalls import ToolCallTracker
from eventstore.log.types import STEP_END, TOOL_RESULT, TURN_END

__all__ = ["INTERRUPTED", "repair", "repair_plan"]

#: The content of the ``tool/result`` that :func:`repair` appends for an interrupted call.
INTERRUPTED = ("Tool call interrupted: no result was recorded (the agent stopped before the tool "
               "returned). Appended by eventstore repair.")


def repair_plan(events: Iterable[tuple[int, str, Any]]) -> list[tuple[str, dict]]:
    """The ``(type, payload)`` events that :func:`repair` would append after ``events``
    (``(seq, type, payload)`` in seq order, payload a dict or its JSON text).

    In this order: a ``tool/result`` for each tool call still waiting for its result at the
    end of the log (``{"tool_call_id": id, "content": INTERRUPTED, "repair": true}``); a
    ``step/end`` if a step is open (``{"step": n, "tool_calls": count, "repair": true}``,
    ``step`` copied from the open ``step/start``, ``count`` the tool calls of that step); a
    ``turn/end`` if a turn is open (``{"reason": "interrupted", "repair": true}``). Empty
    when the log needs nothing.
    """
    calls = ToolCallTracker()
    for seq, type_, payload in events:
        if isinstance(payload, str):
            try:
                payload = loads(payload)
            except ValueError:
                payload = {}
        calls.feed(seq, type_, payload)
    plan: list[tuple[str, dict]] = [
        (TOOL_RESULT, {"tool_call_id": cid, "content": INTERRUPTED, "repair": True}) for cid in calls.waiting_ids()
    ]
    if calls.step_open is not None:
        end: dict = {"step": calls.step_open["step"]} if "step" in calls.step_open else {}
        end.update({"tool_calls": calls.step_calls, "repair": True})
        plan.append((STEP_END, end))
    if calls.open_turn:
        plan.append((TURN_END, {"reason": "interrupted", "repair": True}))
    return plan


def repair(session: Any, *, attempts: int = 3) -> list:
    """Make an interrupted session valid again by appending (see :func:`repair_plan`) and
    return the appended events; ``[]`` (no write at all) when the session needs nothing.

    The events go through :meth:`Session.append_many` in one transaction with
    ``expected_seq`` = the session's length as read, so the hash chain continues and a
    concurrent append is never overtaken: the plan is re-read and retried up to
    ``attempts`` times, then :class:`SeqConflict` is raised. Run it when the agent that owns
    the session is not running (it cannot tell a running tool from a crashed one).

    What appending cannot fix stays (``verify`` still reports it): a call left without a
    result before a later message, a result that answers no call.
    """
    for attempt in range(attempts):
        rows = [(ev.seq, ev.type, ev.payload) for ev in session.events()]
        plan = repair_plan(rows)
        if not plan:
            return []
        try:
            return session.append_many(plan, expected_seq=rows[-1][0] + 1)
        except SeqConflict:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
