"""The whole model request at any point of a session: instructions, tools and messages.

:func:`context_at` (``Session.context_at``, ``eventstore context``) answers "what did the
model see before it did this?" in the chat-completions request shape::

    {"messages": [{"role": "system", "content": ...}, {"role": "user", ...}, ...],
     "tools": [{"type": "function", "function": {...}}, ...]}

It reads the log's extension events (docs/session-log-format.md, "Extensions"):

* ``system/message`` ``{"content": ...}``: the instructions in force from then on, sent as
  the first message of every later request (each one replaces the one before);
* ``model/tools`` ``{"tools": [...]}``: the tool definitions in force from then on
  (replaced by the next one; ``[]`` says there are none);
* ``context/retract``: takes messages out of every later request without deleting
  anything: ``{"target_seq": N}`` the message of event N, ``{"target_seq": N, "index":
  i}`` only the i-th tool call of the assistant message at N, ``{"before_seq": N}`` every
  message before seq N. An assistant message left with neither content nor tool calls is
  left out;
* ``compaction/boundary``: a compaction boundary (an imported transcript's): the model is sent
  only what follows it, as the ``messages`` view projects it;
* ``assistant/part``: the rest of an API message written over many lines (an imported
  transcript's), folded into the ``assistant/message`` of the same ``message_id``, as the
  ``messages`` view folds it: the non-empty contents joined by a blank line, the tool
  calls appended.

The messages themselves are mapped exactly as the reference projection
(:mod:`eventstore.log.projection`) maps them; :meth:`Session.derive_messages` stays that
projection and ignores all three extension events.
"""

from __future__ import annotations

from eventstore.errors import InvalidEvent
from eventstore.log.codec import js_truthy
from eventstore.log.types import (
    ASSISTANT_MESSAGE,
    ASSISTANT_PART,
    COMPACTION_BOUNDARY,
    CONTEXT_RETRACT,
    MESSAGE_TYPES,
    MODEL_TOOLS,
    SYSTEM_MESSAGE,
    USER_MESSAGE,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["context_at", "SYSTEM", "TOOLS", "RETRACT", "MESSAGE_TYPES", "retraction"]

SYSTEM = SYSTEM_MESSAGE
TOOLS = MODEL_TOOLS
RETRACT = CONTEXT_RETRACT
COMPACT = COMPACTION_BOUNDARY
PART = ASSISTANT_PART
_READ = (*MESSAGE_TYPES, SYSTEM, TOOLS, RETRACT, COMPACT, PART)


def chat_message(type_: str, payload: dict) -> dict:
    """One message event as its chat message, exactly as the ``messages`` view maps it."""
    if type_ == USER_MESSAGE:
        return {"role": "user", **({"content": payload["content"]} if "content" in payload else {})}
    if type_ == ASSISTANT_MESSAGE:
        content = payload.get("content")
        message = {"role": "assistant", "content": "" if content is None else content}
        calls = payload.get("tool_calls")
        if js_truthy(calls) and calls != []:
            message["tool_calls"] = calls
        return message
    message = {"role": "tool"}
    for key in ("tool_call_id", "content"):
        if key in payload:
            message[key] = payload[key]
    return message


def retraction(payload: dict) -> tuple[int | None, int | None, int | None]:
    """A ``context/retract`` payload as ``(target_seq, index, before_seq)`` (each None when
    absent). Raises :class:`InvalidEvent` for one that names nothing."""
    def num(key: str) -> int | None:
        v = payload.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidEvent(f"context/retract: {key} must be an integer >= 0, not {v!r}")
        return v

    target, index, before = num("target_seq"), num("index"), num("before_seq")
    if target is None and before is None:
        raise InvalidEvent("context/retract names neither target_seq nor before_seq")
    return target, index, before


def context_at(session: Any, seq: int | None = None) -> dict:
    """The model request as it stood just before the event at ``seq`` was appended (for
    an ``assistant/message`` or a ``step/start``: exactly the request that produced it);
    at the head (the next request) when ``seq`` is None.

    Returns ``{"messages": [...], "tools": [...]}`` in the chat-completions shape: the
    instructions (the last ``system/message`` before ``seq``) as a leading ``system``
    message, then the chat messages left after retractions; ``tools`` only when tool
    definitions are in force. Raises :class:`InvalidEvent` for a bad ``seq`` or a
    malformed ``context/retract``.
    """
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
        raise InvalidEvent(f"seq must be an integer >= 0, not {seq!r}")
    if seq is not None and seq > (head := session.next_seq()):
        raise InvalidEvent(f"session {session.id!r} has no event {seq}: its events are 0..{head - 1} "
                           f"(seq {head} is the next request)")
    instructions = None
    tools: list = []
    messages: dict[int, dict] = {}  # seq -> chat message, in seq order
    calls: dict[int, list] = {}  # seq -> [(index, tool call)] still in the context
    folding: dict | None = None  # the last assistant/message: its seq, message_id, texts, calls so far
    for event in session.events(types=_READ):
        if seq is not None and event.seq >= seq:
            break
        p = event.payload
        if event.type == COMPACT:
            messages.clear()
            calls.clear()
            folding = None
        elif event.type == PART:
            mid = p.get("message_id")
            if folding is None or mid is None or folding["id"] != mid or folding["seq"] not in messages:
                continue
            message = messages[folding["seq"]]
            folding["texts"].append(p.get("content"))
            message["content"] = "\n\n".join(t for t in folding["texts"] if isinstance(t, str) and t)
            more = p.get("tool_calls")
            if isinstance(more, list) and more:
                calls.setdefault(folding["seq"], []).extend(enumerate(more, folding["calls"]))
                folding["calls"] += len(more)
        elif event.type == SYSTEM:
            instructions = p
        elif event.type == TOOLS:
            tools = p.get("tools") or []
        elif event.type == RETRACT:
            target, index, before = retraction(p)
            if before is not None:
                for s in [s for s in messages if s < before]:
                    del messages[s]
                    calls.pop(s, None)
            if target is not None and target in messages:
                if index is None or target not in calls:
                    del messages[target]
                    calls.pop(target, None)
                else:
                    calls[target] = [(i, c) for i, c in calls[target] if i != index]
                    if not calls[target] and not js_truthy(messages[target].get("content")):
                        del messages[target]
                        del calls[target]
        else:
            message = chat_message(event.type, p)
            if isinstance(message.get("tool_calls"), list):
                calls[event.seq] = list(enumerate(message["tool_calls"]))
            messages[event.seq] = message
            if event.type == ASSISTANT_MESSAGE:
                folding = {"seq": event.seq, "id": p.get("message_id"), "texts": [p.get("content")],
                           "calls": len(calls.get(event.seq, []))}
    out = []
    if instructions is not None:
        out.append({"role": "system", **({"content": instructions["content"]} if "content" in instructions else {})})
    for s, message in messages.items():
        if s in calls:
            if calls[s]:
                message["tool_calls"] = [call for _, call in calls[s]]
            else:
                message.pop("tool_calls", None)
        out.append(message)
    request: dict[str, Any] = {"messages": out}
    if tools:
        request["tools"] = tools
    return request

