"""Keep pydantic-ai's message history in eventstore: record a run's messages as the log's
events, and rebuild ``message_history`` for the next run from the log, losslessly.

::

    from eventstore import EventStore
    from eventstore.integrations.pydantic_ai import load_messages, record_messages

    s = EventStore.open("agent.db").session("chat-1", create=True)
    result = agent.run_sync("1+2?", message_history=load_messages(s))
    record_messages(s, result.new_messages())

``arecord_messages`` / ``aload_messages`` do the same for an
:class:`~eventstore.AsyncSession`. Needs the ``pydantic-ai`` extra (``pip install '.[pydantic-ai]'`` in the checkout).

How a message becomes events (docs/session-log-format.md, "Extensions"): a
``pydantic_ai/request`` or ``pydantic_ai/response`` event holds the message without its
parts (``{"pydantic_ai": {..., "parts": N}}``: timestamps, usage, model name, run id,
instructions, ...), then each part is one event of the spec's types where one fits, with the
part's other fields in ``pydantic_ai_part`` (the values the chat keys hold set to null):

* ``system-prompt`` -> ``system/message``; ``user-prompt`` -> ``user/message``;
* ``text`` -> ``assistant/message``; consecutive ``tool-call`` parts -> one
  ``assistant/message`` with ``tool_calls`` (``arguments`` is the JSON text of ``args``);
* ``tool-return`` -> ``tool/result`` (``is_error: true`` unless its outcome is success);
  ``retry-prompt`` -> ``tool/result`` with ``is_error: true`` for a tool, else ``user/message``;
* any other part (thinking, built-in tools, files) -> ``pydantic_ai/part``.

Each event is stamped with the time the messages record for it (a tool's result: when the
tool returned), a ``pydantic_ai/response`` carries its token ``usage`` (the ``usage`` view),
and each :func:`record_messages` call is one turn between ``turn/start`` and ``turn/end``.

:func:`load_messages` reads them back through ``ModelMessagesTypeAdapter``: the messages
equal the recorded ones. Other events in the session (turn markers, other writers' events)
are skipped. A request's ``instructions`` stay in its ``pydantic_ai/request`` event; the
system prompt parts are what ``Session.context_at`` shows as the instructions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from eventstore.core.aio import AsyncSession
from eventstore.core.store import Event, Session

__all__ = ["record_messages", "load_messages", "arecord_messages", "aload_messages", "message_events",
           "events_messages"]

REQUEST = "pydantic_ai/request"
RESPONSE = "pydantic_ai/response"
PART = "pydantic_ai/part"
_OK = (None, "success")


def _call_event(parts: list[dict]) -> tuple[str, dict]:
    calls, skeletons = [], []
    for part in parts:
        args = part.get("args")
        skeleton = dict(part)
        skeleton["tool_name"] = skeleton["tool_call_id"] = None
        if isinstance(args, str):
            skeleton["args"], arguments = None, args
        elif args is None:
            skeleton["args"], arguments = [], "{}"   # [] (never real args): there were none
        else:
            skeleton["args"], arguments = {}, json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        calls.append({"id": part["tool_call_id"], "type": "function",
                      "function": {"name": part["tool_name"], "arguments": arguments}})
        skeletons.append(skeleton)
    return "assistant/message", {"tool_calls": calls, "pydantic_ai_parts": skeletons}


def _part_event(part: dict) -> tuple[str, dict]:
    kind = part.get("part_kind")
    skeleton = dict(part)
    if kind in ("system-prompt", "user-prompt", "text") and "content" in part:
        skeleton["content"] = None
        type_ = {"system-prompt": "system/message", "user-prompt": "user/message", "text": "assistant/message"}[kind]
        return type_, {"content": part["content"], "pydantic_ai_part": skeleton}
    if kind in ("tool-return", "retry-prompt") and isinstance(part.get("tool_call_id"), str):
        error = kind == "retry-prompt" or part.get("outcome") not in _OK
        if kind == "retry-prompt" and part.get("tool_name") is None:
            skeleton["content"] = None
            return "user/message", {"content": part.get("content"), "pydantic_ai_part": skeleton}
        skeleton["tool_call_id"] = skeleton["content"] = None
        return "tool/result", {"tool_call_id": part["tool_call_id"], "content": part.get("content"),
                               **({"is_error": True} if error else {}), "pydantic_ai_part": skeleton}
    return PART, {"pydantic_ai_part": part}


def _is_call(part: dict) -> bool:
    return (part.get("part_kind") == "tool-call" and isinstance(part.get("tool_name"), str)
            and isinstance(part.get("tool_call_id"), str))


def _ts(value: object) -> float | None:
    """A message's or part's ``timestamp`` (ISO 8601 text) as seconds since the epoch."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _usage(usage: dict, step: int) -> dict:
    """A response's usage as the ``usage`` view reads it (docs/schema.md): pydantic-ai counts
    the cache's tokens in ``input_tokens``, the view counts them apart."""
    ints = {k: v if isinstance(v, int) else 0 for k, v in usage.items()}
    cache_read, cache_write = ints.get("cache_read_tokens", 0), ints.get("cache_write_tokens", 0)
    out = {"step": step, "input_tokens": ints.get("input_tokens", 0) - cache_read - cache_write,
           "output_tokens": ints.get("output_tokens", 0)}
    for key, value in (("cache_read_tokens", cache_read), ("cache_creation_tokens", cache_write),
                       ("reasoning_tokens", ints.get("output_reasoning_tokens", 0))):
        if value:
            out[key] = value
    return out


def message_events(messages: Iterable[ModelMessage], *, turn: bool = False) -> list[tuple[str, dict, float]]:
    """pydantic-ai messages as ``(type, payload, ts)`` events (see the module's docstring).
    ``ts`` is when it happened, as the messages record it: a part's own ``timestamp`` (a
    tool's return: when the tool returned), else its message's (a response: when it
    arrived), so the ``tool_calls`` view's ``latency_s`` is the tool's real time. A
    ``pydantic_ai/response`` event also carries its token ``usage`` in the ``usage`` view's
    terms (the message keeps pydantic-ai's own). With ``turn``, the events are one turn:
    ``turn/start`` and ``turn/end`` ``{"run_id"}`` around them."""
    now = time.time()
    events: list[tuple[str, dict, float]] = []
    step = 0
    run_id = None
    for message in ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"):
        parts = message["parts"]
        envelope = dict(message)
        envelope["parts"] = len(parts)
        run_id = run_id or message.get("run_id")
        at = _ts(message.get("timestamp")) or now
        part_times = [t for t in (_ts(p.get("timestamp")) for p in parts) if t is not None]
        first = len(events)  # the message's own event
        events.append((REQUEST if message.get("kind") == "request" else RESPONSE, {"pydantic_ai": envelope},
                       min([at, *part_times])))
        i = 0
        while i < len(parts):
            if _is_call(parts[i]):
                j = i
                while j < len(parts) and _is_call(parts[j]):
                    j += 1
                events.append((*_call_event(parts[i:j]), at))
                i = j
            else:
                events.append((*_part_event(parts[i]), _ts(parts[i].get("timestamp")) or at))
                i += 1
        if message.get("kind") == "response" and isinstance(message.get("usage"), dict):
            step += 1
            events[first][1]["usage"] = _usage(message["usage"], step)
    if turn and events:
        marker = {"run_id": run_id} if run_id else {}
        events = [("turn/start", marker, events[0][2]), *events, ("turn/end", dict(marker), events[-1][2])]
    return events


def _parts(type_: str, payload: dict) -> list[dict]:
    """The parts an event holds (``[]`` for an event that holds none)."""
    if "pydantic_ai_parts" in payload:
        parts = []
        for skeleton, call in zip(payload["pydantic_ai_parts"], payload.get("tool_calls") or [], strict=True):
            part = dict(skeleton)
            part["tool_name"], part["tool_call_id"] = call["function"]["name"], call["id"]
            arguments = call["function"]["arguments"]
            part["args"] = (arguments if skeleton["args"] is None else None if skeleton["args"] == []
                            else json.loads(arguments))
            parts.append(part)
        return parts
    skeleton = payload.get("pydantic_ai_part")
    if skeleton is None:
        return []
    part = dict(skeleton)
    if type_ in ("system/message", "user/message", "assistant/message"):
        part["content"] = payload.get("content")
    elif type_ == "tool/result":
        part["tool_call_id"], part["content"] = payload.get("tool_call_id"), payload.get("content")
    return [part]


def events_messages(events: Iterable[Event]) -> list[ModelMessage]:
    """The pydantic-ai messages that ``events`` (in seq order) hold. Raises
    ``pydantic.ValidationError`` when a stored message no longer validates."""
    out: list[dict] = []
    current: dict | None = None
    want = 0
    for e in events:
        if e.type in (REQUEST, RESPONSE) and isinstance(e.payload.get("pydantic_ai"), dict):
            envelope = dict(e.payload["pydantic_ai"])
            want = envelope["parts"]
            envelope["parts"] = []
            current = envelope
            out.append(current)
            continue
        if current is None or len(current["parts"]) >= want:
            continue
        current["parts"].extend(_parts(e.type, e.payload))
    return ModelMessagesTypeAdapter.validate_python(out)


def record_messages(session: Session, messages: Iterable[ModelMessage], *, turn: bool = True) -> list[Event]:
    """Append ``messages`` (e.g. ``result.new_messages()``: one run) to ``session`` in one
    atomic ``append_many``, as one turn (``turn/start`` .. ``turn/end``; ``turn=False``
    leaves the markers out); returns the stored events."""
    return session.append_many(message_events(messages, turn=turn))


def load_messages(session: Session) -> list[ModelMessage]:
    """Every pydantic-ai message recorded in ``session``, for ``message_history=``."""
    return events_messages(session.events())


async def arecord_messages(session: AsyncSession, messages: Iterable[ModelMessage], *,
                           turn: bool = True) -> list[Event]:
    """:func:`record_messages` for an :class:`~eventstore.AsyncSession`."""
    return await session.append_many(message_events(messages, turn=turn))


async def aload_messages(session: AsyncSession) -> list[ModelMessage]:
    """:func:`load_messages` for an :class:`~eventstore.AsyncSession`."""
    return events_messages([e async for e in session.events()])

