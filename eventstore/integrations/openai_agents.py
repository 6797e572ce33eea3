"""A drop-in ``Session`` for the OpenAI Agents SDK that keeps the conversation in eventstore.

::

    from agents import Agent, Runner
    from eventstore import EventStore
    from eventstore.integrations.openai_agents import EventStoreSession

    session = EventStoreSession("chat-1", EventStore.open("agent.db"))
    result = await Runner.run(agent, "hello", session=session, hooks=session.hooks())

``EventStoreSession(session_id, store)`` takes an :class:`~eventstore.EventStore` or an
:class:`~eventstore.AsyncEventStore`; the session is created on first use (get-or-create,
safe across processes). Needs the ``openai-agents`` extra (``pip install '.[openai-agents]'`` in the checkout).

How Responses items become events (docs/session-log-format.md, "Extensions"): each item
is stored once, as one event of the spec's types where one fits, with what the chat shape
does not hold kept in the payload's ``responses_item`` (the item with the values the chat
keys already carry set to null, so nothing is stored twice):

* a message with role ``user`` -> ``user/message`` ``{"content"}``;
* a message with role ``assistant`` -> ``assistant/message`` ``{"content": its text}``;
* consecutive ``function_call`` items (of one ``add_items`` call) -> one
  ``assistant/message`` ``{"tool_calls": [...]}`` (chat tool calls), the items in
  ``responses_items``;
* ``function_call_output`` -> ``tool/result`` ``{"tool_call_id", "content": output}``,
  with ``"is_error": true`` when the call failed and the run reported it through
  :meth:`EventStoreSession.tool_error_formatter`
  (``RunConfig(tool_error_formatter=session.tool_error_formatter())``);
* every other item (reasoning, web search, compaction, system or developer messages, ...)
  -> ``responses/item`` ``{"responses_item": item}``.

``get_items`` rebuilds exactly the items that were added (equal as JSON, key order
included); events appended by other code (``user/message`` without ``responses_item``,
say) come back as the equivalent Responses items. ``pop_item`` and ``clear_session``
delete nothing: they append a ``context/retract`` event, which ``get_items`` and
``Session.context_at`` honour (the reference projection, ``derive_messages``, shows the
log as it is).

No write lands in another writer's turn: each write of a session object expects the seq
that follows its own last read or write of the log (``expected_seq``), so when another
process appended to the same session in between, the write raises
:class:`~eventstore.SeqConflict` (stores nothing) and the run fails; ``get_items`` reads
the head again. What was stored before stays: a run's question is in the log before its
model sees it, so the other process's model may see it too (README, "With an agent
framework").
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from eventstore.core.aio import AsyncEventStore
from eventstore.core.store import Event, EventStore, Session
from eventstore.log.context import RETRACT, SYSTEM, TOOLS, retraction
from eventstore.log.gcpause import paused
from eventstore.log.projection import loads as _loads

from ..errors import SeqConflict

__all__ = ["EventStoreSession", "item_events", "event_items"]

ITEM = "responses/item"
_ITEM_TYPES = ["user/message", "assistant/message", "tool/result", ITEM, RETRACT]
_ALL = 2**62  # more items than any read holds

def _async_store(store: EventStore | AsyncEventStore) -> AsyncEventStore:
    if isinstance(store, AsyncEventStore):
        return store
    if not isinstance(store, EventStore):
        raise TypeError(f"EventStoreSession takes an EventStore or an AsyncEventStore, not {type(store).__name__}")
    return AsyncEventStore(store, max_workers=2)  # its threads end when the session object goes


# --- items <-> events ------------------------------------------------------------------------


def _single_text_part(content: Any) -> bool:
    return (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)
            and content[0].get("type") == "output_text")


def _is_call(item: Any) -> bool:
    return (isinstance(item, dict) and item.get("type") == "function_call"
            and all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")))


def _item_event(item: dict) -> tuple[str, dict]:
    """One item that is not a function call as ``(type, payload)``."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and "content" in item and role in ("user", "assistant"):
        content = item["content"]
        skeleton = dict(item)
        if role == "user":
            skeleton["content"] = None
            return "user/message", {"content": content, "responses_item": skeleton}
        if content is None or isinstance(content, str):
            skeleton["content"] = None
            return "assistant/message", {"content": content, "responses_item": skeleton}
        if _single_text_part(content):
            part = dict(content[0])
            text = part.get("text")
            part["text"] = None
            skeleton["content"] = [part]
            return "assistant/message", {"content": text, "responses_item": skeleton}
        text = "".join(p.get("text") or p.get("refusal") or "" for p in content if isinstance(p, dict)) \
            if isinstance(content, list) else ""
        return "assistant/message", {"content": text, "responses_item": skeleton}
    if kind == "function_call_output" and isinstance(item.get("call_id"), str) and "output" in item:
        skeleton = dict(item)
        skeleton["call_id"] = None
        skeleton["output"] = None
        return "tool/result", {"tool_call_id": item["call_id"], "content": item["output"], "responses_item": skeleton}
    return ITEM, {"responses_item": item}


def item_events(items: list[dict]) -> list[tuple[str, dict]]:
    """Responses items as ``(type, payload)`` events: one event per item, except that a
    run of consecutive ``function_call`` items becomes one ``assistant/message`` with
    ``tool_calls`` (see the module's docstring)."""
    events: list[tuple[str, dict]] = []
    i = 0
    while i < len(items):
        item = items[i]
        if not isinstance(item, dict):
            raise TypeError(f"a session item must be a dict (a Responses input item), not {type(item).__name__}")
        if _is_call(item):
            calls, skeletons = [], []
            while i < len(items) and _is_call(items[i]):
                call = items[i]
                calls.append({"id": call["call_id"], "type": "function",
                              "function": {"name": call["name"], "arguments": call["arguments"]}})
                skeleton = dict(call)
                skeleton["call_id"] = skeleton["name"] = skeleton["arguments"] = None
                skeletons.append(skeleton)
                i += 1
            events.append(("assistant/message", {"tool_calls": calls, "responses_items": skeletons}))
            continue
        events.append(_item_event(item))
        i += 1
    return events


def event_items(type_: str, payload: dict) -> list[dict]:
    """The Responses items one event holds (the inverse of :func:`item_events`): the
    items stored with it, or, for a chat event written by other code, its equivalent
    items (an ``assistant/message`` with text and tool calls gives a message item, then a
    ``function_call`` item per call). ``[]`` for events that hold none."""
    return _event_items(type_, payload, dict)


def _same(d: dict) -> dict:
    return d


def _event_items(type_: str, payload: dict, copy) -> list[dict]:
    """:func:`event_items`; ``copy`` is ``dict`` to leave ``payload`` as it is, or
    :func:`_same` to build the items out of it (a payload parsed for this read only)."""
    if "responses_items" in payload:
        items = []
        for skeleton, call in zip(payload["responses_items"], payload.get("tool_calls") or [], strict=True):
            item = copy(skeleton)
            item["call_id"], item["name"], item["arguments"] = (
                call["id"], call["function"]["name"], call["function"]["arguments"])
            items.append(item)
        return items
    skeleton = payload.get("responses_item")
    if skeleton is not None:
        item = copy(skeleton)
        if type_ == "user/message" or (type_ == "assistant/message" and item.get("content") is None):
            item["content"] = payload.get("content")
        elif type_ == "assistant/message":
            if _single_text_part(item["content"]) and item["content"][0].get("text") is None:
                part = dict(item["content"][0])
                part["text"] = payload.get("content")
                item["content"] = [part]
        elif type_ == "tool/result":
            item["call_id"], item["output"] = payload.get("tool_call_id"), payload.get("content")
        return [item]
    # a chat event that some other code appended
    if type_ == "user/message":
        return [{"role": "user", "content": payload.get("content")}]
    if type_ == "tool/result":
        return [{"type": "function_call_output", "call_id": payload.get("tool_call_id"),
                 "output": payload.get("content")}]
    if type_ == "assistant/message":
        items: list[dict] = []
        if payload.get("content"):
            items.append({"role": "assistant", "content": payload["content"]})
        for call in payload.get("tool_calls") or []:
            fn = call.get("function") or {}
            items.append({"type": "function_call", "call_id": call.get("id"), "name": fn.get("name"),
                          "arguments": fn.get("arguments")})
        return items
    return []


def _index(payload: dict, items: list[dict], i: int) -> int | None:
    """How a ``context/retract`` names item ``i`` of an event holding ``items``: None (the
    whole event) for its only item, else the index of the tool call it is (an
    ``assistant/message`` with text and tool calls holds its text first: taking that
    back, the last of its items, takes back the event)."""
    if "responses_items" in payload:
        return i
    if len(items) == 1:
        return None
    if items[0].get("type") != "function_call":  # the text of the message, then its calls
        return None if i == 0 else i - 1
    return i


def _fill_assistant(payload: dict, item: dict) -> None:
    """Put the text of an ``assistant/message`` back into its stored item (parsed for
    this read only: filled in place)."""
    content = item.get("content")
    if content is None:
        item["content"] = payload.get("content")
    elif _single_text_part(content) and content[0].get("text") is None:
        content[0]["text"] = payload.get("content")


def _live(rows: list[tuple], want: int | None, keyed: bool = True) -> tuple[list, bool]:
    """The items of ``rows`` (``(seq, type, payload)`` of the item types, in seq order) that no
    ``context/retract`` among them took back, newest first, as ``(seq, index, item)``
    (index None for an event's only item, else the position of the item in an event that
    holds several), or only the items without ``keyed``: all of them, or at least the
    newest ``want``. Also whether a clear (``before_seq``) was reached, past which
    nothing older is live.

    One pass, newest first: a retraction comes after what it takes back, so it is known
    before its target is reached. The payloads are parsed in one call (the rows' texts
    joined as a JSON array) and the items are built out of them in place."""
    payloads = _loads("[" + ",".join([row[2] for row in rows]) + "]")
    found: list = []
    whole: set[int] = set()
    parts: set[tuple[int, int]] = set()
    before = -1  # every event below this seq is retracted
    enough = _ALL if want is None else want
    for (seq, type_, _), payload in zip(reversed(rows), reversed(payloads), strict=True):
        if seq < before:
            return found, True
        if type_ == RETRACT:
            target, index, cut = retraction(payload)
            if cut is not None:
                before = max(before, cut)
            if target is not None:
                if index is None:
                    whole.add(target)
                else:
                    parts.add((target, index))
            continue
        if whole and seq in whole:
            continue
        if "responses_items" not in payload and (item := payload.get("responses_item")) is not None:
            # the common case: the item stored with the event gets its chat keys back
            if type_ == "tool/result":
                item["call_id"], item["output"] = payload.get("tool_call_id"), payload.get("content")
            elif type_ == "user/message":
                item["content"] = payload.get("content")
            elif type_ == "assistant/message":
                _fill_assistant(payload, item)
            found.append((seq, None, item) if keyed else item)
        else:
            items = _event_items(type_, payload, _same)
            if len(items) == 1 and "responses_items" not in payload:
                found.append((seq, None, items[0]) if keyed else items[0])
            else:
                for i in reversed(range(len(items))):
                    index = _index(payload, items, i)
                    if index is None or (seq, index) not in parts:
                        found.append((seq, index, items[i]) if keyed else items[i])
        if len(found) >= enough:
            break
    return found, False


def _session_items(store: EventStore, session_id: str, known: tuple[int, bytes] | None,
                   keep: bool = True) -> tuple[list[dict], int, tuple[int, bytes] | None]:
    """``(every live item oldest first, head, known)`` of the session: the item-bearing
    events' rows and the head in one read (see :meth:`EventStoreSession._live_locked`).

    ``known`` is what an earlier call returned: ``(head, the items as JSON)``. Then only the
    events from that head on are read, and when none of them is a ``context/retract`` the
    items are the known ones plus theirs; a retraction (it may take back anything) or items
    that JSON cannot carry exactly (orjson refuses them) make it a whole read. Without
    ``keep``, a whole read returns no ``known`` (it skips writing the items as JSON)."""
    if known is not None:
        head, rows = store.session_payloads(session_id, _ITEM_TYPES, from_seq=known[0])
        if not any(row[1] == RETRACT for row in rows):
            text = known[1]
            if rows:
                new = _live(rows, None, keyed=False)[0]
                new.reverse()
                try:
                    more = orjson.dumps(new)
                except TypeError:
                    more = None
                if more is None:
                    known = None
                elif len(more) > 2:
                    text = more if len(text) == 2 else text[:-1] + b"," + more[1:]
            if known is not None:
                return orjson.loads(text), head, (head, text)
    head, rows = store.session_payloads(session_id, _ITEM_TYPES)
    items = _live(rows, None, keyed=False)[0]
    items.reverse()
    if not keep:
        return items, head, None
    try:
        return items, head, (head, orjson.dumps(items))
    except TypeError:
        return items, head, None


def _live_items(store: EventStore, session_id: str,
                want: int) -> tuple[list[tuple[int, int | None, dict]], int]:
    """``(at least the newest want live items, newest first, head)`` of the session (see
    :meth:`EventStoreSession._live_locked`): reads backwards from the head (the last-N
    index read) in growing windows, so the cost follows ``want``, not the length of the
    session."""
    window = want + 2  # an event holds one item or more; room for a retraction and its target
    while True:
        head, rows = store.session_payloads(session_id, _ITEM_TYPES, window, last=True)
        found, cleared = _live(rows, want)
        if len(found) >= want or cleared or len(rows) < window:
            return found, head
        window *= 4


class _LoopRuns:
    """What the hooks and :meth:`EventStoreSession.record_stream` of the runs on one event
    loop share: asyncio objects belong to one loop, and a session object may be used from
    several threads, each with a loop of its own (``Runner.run_sync`` in a thread pool)."""

    def __init__(self) -> None:
        self.llm_calls = 0  # model calls begun (hooks)
        self.streamed = 0  # responses whose deltas are recorded
        self.streams = 0  # streams being iterated
        self.progress = asyncio.Condition()
        self.turn: int | None = None  # id() of the run context whose turn/start is in the log
        self.step = 0  # model responses of that run
        self.response_ts: float | None = None  # when the last model response arrived (on_llm_end)
        self.usage: dict | None = None  # its token usage, for the next model item stored
        # the turn/end of a run whose agent gave its final output (the SDK calls the hook
        # before it stores that output): appended after the next items stored
        self.turn_end: dict | None = None


def _usage(response: Any, agent: Any, step: int) -> dict | None:
    """A model response's token usage as the ``usage`` payload field the ``usage`` view
    reads (docs/schema.md): ``input_tokens`` without the cached ones, which the SDK counts
    in its ``input_tokens`` and the view counts apart (``cache_read_tokens``)."""
    u = getattr(response, "usage", None)
    if u is None:
        return None
    details = getattr(u, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    out: dict[str, Any] = {"step": step, "input_tokens": u.input_tokens - cached, "output_tokens": u.output_tokens}
    if cached:
        out["cache_read_tokens"] = cached
    if getattr(details, "cache_write_tokens", None):
        out["cache_creation_tokens"] = details.cache_write_tokens
    reasoning = getattr(getattr(u, "output_tokens_details", None), "reasoning_tokens", None)
    if reasoning:
        out["reasoning_tokens"] = reasoning
    model = getattr(agent, "model", None)
    model = model if isinstance(model, str) else getattr(model, "model", None)
    if isinstance(model, str):
        out["model"] = model
    if getattr(response, "response_id", None):
        out["response_id"] = response.response_id
    return out


def _seq_after(s: Session, event: Event) -> int:
    """The seq after ``event`` on a store that redacts secrets before storing
    (``redact_secrets=True``): after its ``redaction`` event when it held a secret (that
    event follows it in the same transaction, and the append returns only the item's own)."""
    found = s.events(after_seq=event.seq)
    try:
        nxt = next(found, None)
    finally:
        found.close()
    ours = nxt is not None and nxt.seq == event.seq + 1 and nxt.type == "redaction" and \
        nxt.payload.get("before_storing") is True and nxt.payload.get("event_seq") == event.seq
    return event.seq + (2 if ours else 1)


class EventStoreSession:
    """The OpenAI Agents SDK's ``Session`` protocol, kept in an eventstore session.

    ``session_id`` names the eventstore session (created on first use); ``store`` is an
    :class:`~eventstore.EventStore` or :class:`~eventstore.AsyncEventStore`;
    ``session_settings`` (the SDK's ``SessionSettings``, or a dict of its fields; an unknown
    key raises ``TypeError``) gives the default ``limit`` of :meth:`get_items`. Methods
    raise the store's errors (:class:`~eventstore.SeqConflict` when another process wrote
    to this session since this object last read or wrote it).

    One object may be used by many tasks and threads at once, each thread with its own
    event loop: its reads and writes take turns (a lock held on the store's worker
    threads, never on a loop). :meth:`close` (or ``with`` / ``async with``) ends what the
    object opened: the worker threads it made for a sync ``EventStore``; the store itself,
    which may serve other sessions, stays open.
    """

    def __init__(self, session_id: str, store: EventStore | AsyncEventStore, *,
                 session_settings: SessionSettings | dict[str, Any] | None = None):
        self.session_id = session_id
        self.session_settings = (coerce_session_settings(session_settings) if session_settings is not None
                                 else SessionSettings())
        self._owns_workers = not isinstance(store, AsyncEventStore)
        self._store = _async_store(store)
        self._closed = False
        self._lock = threading.RLock()  # this object's reads and writes, from every thread and loop
        self._session: Session | None = None
        self._head: int | None = None  # the seq after this object's last read or write
        # (head, items as JSON) of the last whole read: the next one reads only what came after
        self._known: tuple[int, bytes] | None = None
        self._read_whole = False  # whether this object made a whole read before
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopRuns] = weakref.WeakKeyDictionary()
        self._instructions: Any = None
        self._tools: Any = None
        self._failed_calls: set[str] = set()  # call ids the SDK reported failed (tool_error_formatter)
        self._tool_times: dict[str, list[float | None]] = {}  # call id -> [start, end] (hooks)

    def __repr__(self) -> str:
        return f"EventStoreSession({self.session_id!r})"

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """End the session object: wait for its calls in flight, then stop the worker
        threads it started (for an ``EventStore`` given to it). The store stays open, and
        so does an ``AsyncEventStore`` given to it. Later calls raise ``RuntimeError``;
        closing again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_workers:
            self._store._pool.shutdown(wait=True)

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> EventStoreSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> EventStoreSession:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"EventStoreSession {self.session_id!r} is closed")

    def _runs(self) -> _LoopRuns:
        loop = asyncio.get_running_loop()
        with self._lock:
            runs = self._loops.get(loop)
            if runs is None:
                runs = self._loops[loop] = _LoopRuns()
            return runs

    async def _call(self, fn: Callable, *args: Any) -> Any:
        """``fn(session, *args)`` on a worker thread, holding this object's lock."""
        self._check_open()

        def locked():
            with self._lock:
                self._check_open()
                if self._session is None:
                    self._session = self._store.sync.session(self.session_id, create=True)
                return fn(self._session, *args)

        try:
            return await self._store._run(locked)
        except RuntimeError:
            self._check_open()  # the pool was shut down by close() in between: say so
            raise

    def _append_locked(self, s: Session, events: list[tuple]) -> list[Event]:
        """Append ``events`` right after the head this object last saw (any head when it
        has seen none): :class:`SeqConflict` if another writer came in between."""
        try:
            if len(events) == 1:  # one event (a streamed chunk, a single item): append, a third cheaper
                type_, payload, *ts = events[0]
                stored = [s.append(type_, payload, ts=ts[0] if ts else None, expected_seq=self._head)]
            else:
                stored = s.append_many(events, expected_seq=self._head)
        except SeqConflict as e:
            e.add_note(f"another writer appended to session {self.session_id!r} since this EventStoreSession "
                       "last read or wrote it: nothing of this write was stored; get_items() reads the "
                       "session again, then run the turn again")
            raise
        if stored:
            self._head = _seq_after(s, stored[-1]) if self._store.sync.secret_filter is not None else stored[-1].seq + 1
        return stored

    async def _append(self, events: list[tuple]) -> list[Event]:
        return await self._call(self._append_locked, events)

    def _live_locked(self, s: Session, want: int) -> list[tuple[int, int | None, dict]]:
        """At least the newest ``want`` live items (fewer when the session has fewer), newest
        first, as ``(seq, index, item)``; notes the head read with them (one snapshot: a
        writer that comes after it makes the next write fail)."""
        with paused():
            found, head = _live_items(self._store.sync, s.id, want)
        self._head = head
        return found

    def _all_locked(self, s: Session) -> list[dict]:
        """Every live item, oldest first (noting the head, as :meth:`_live_locked`)."""
        # The items are kept (as JSON) from the object's second whole read on: an object
        # that reads once (one per request) does not pay for a copy it never uses.
        with paused():  # a long session's items: many dicts made at once
            items, head, self._known = _session_items(self._store.sync, s.id, self._known, self._read_whole)
        self._read_whole = True
        self._head = head
        return items

    # --- the Session protocol -------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[dict]:
        """The items of the conversation, oldest first; with ``limit`` (or the settings'
        limit), only the newest ``limit`` (a read of the newest events, not the session)."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None or limit < 0:
            return await self._call(self._all_locked)
        self._check_open()
        if limit == 0:
            return []
        return [item for _, _, item in reversed((await self._call(self._live_locked, limit))[:limit])]

    async def add_items(self, items: list[dict]) -> None:
        """Store ``items`` (Responses input items), all in one atomic append. The
        ``tool/result`` of a call that :meth:`tool_error_formatter` saw fail carries
        ``"is_error": true`` (the item itself is stored, and read back, unchanged). With
        :meth:`hooks` in the run, each event gets the time it happened (a model item: when
        its response arrived; a tool's output: when the tool returned) and a model
        response's first item its token ``usage``."""
        self._check_open()
        if not items:
            return
        events = item_events(list(items))
        runs = self._runs()
        response_ts, runs.response_ts = runs.response_ts, None
        usage, runs.usage = runs.usage, None
        now = time.time()
        timed = []
        for type_, payload in events:
            ts = now
            if type_ == "tool/result":
                call = payload["tool_call_id"]
                if call in self._failed_calls:
                    payload["is_error"] = True
                    self._failed_calls.discard(call)
                times = self._tool_times.pop(call, None)
                if times is not None and times[1] is not None:
                    ts = times[1]
            elif type_ != "user/message" and (type_ != ITEM or payload["responses_item"].get("role") is None):
                if response_ts is not None:  # an item of the model's response
                    ts = response_ts
                if usage is not None:
                    payload["usage"], usage = usage, None
            timed.append((type_, payload, ts))
        if runs.turn_end is not None:
            timed.append(("turn/end", runs.turn_end, now))
        await self._append(timed)
        runs.turn_end = None

    def _pop_locked(self, s: Session) -> dict | None:
        found = self._live_locked(s, 1)
        if not found:
            return None
        seq, index, item = found[0]
        payload = {"target_seq": seq, **({"index": index} if index is not None else {}), "reason": "pop_item"}
        self._append_locked(s, [(RETRACT, payload)])
        return item

    async def pop_item(self) -> dict | None:
        """Take back the newest item (None when there is none): appends a
        ``context/retract`` naming it, and returns it."""
        for _ in range(8):
            try:
                return await self._call(self._pop_locked)
            except SeqConflict:
                continue  # another writer came in between: look again
        return await self._call(self._pop_locked)

    def _clear_locked(self, s: Session) -> None:
        head = s.next_seq()
        s.append(RETRACT, {"before_seq": head, "reason": "clear_session"}, expected_seq=head)
        self._head = head + 1

    async def clear_session(self) -> None:
        """Take back every item: appends one ``context/retract`` ``{"before_seq": N}`` (its
        own seq), so nothing stored before it is in the conversation any more."""
        for _ in range(8):
            try:
                return await self._call(self._clear_locked)
            except SeqConflict:
                continue
        await self._call(self._clear_locked)

    # --- the rest of the model request, turns, timing, streaming ---------------------------

    def _request_locked(self, s: Session, instructions: str | None, tools: list[dict]) -> None:
        if self._instructions is None or self._tools is None:
            last_system = list(s.events(types=[SYSTEM], last=1))
            last_tools = list(s.events(types=[TOOLS], last=1))
            self._instructions = last_system[0].payload.get("content") if last_system else None
            self._tools = last_tools[0].payload.get("tools") if last_tools else []
        events: list[tuple[str, dict]] = []
        if instructions is not None and instructions != self._instructions:
            events.append((SYSTEM, {"content": instructions}))
        if tools != self._tools:
            events.append((TOOLS, {"tools": tools}))
        if events:
            self._append_locked(s, events)
            self._instructions = instructions if instructions is not None else self._instructions
            self._tools = tools

    async def record_request(self, instructions: str | None, tools: list[dict] | None) -> None:
        """Record the instructions (``system/message``) and tool definitions
        (``model/tools``, chat-completions shape) of the next model request, each only when
        it differs from what the log already holds."""
        await self._call(self._request_locked, instructions, tools or [])

    def hooks(self):
        """``RunHooks`` for ``Runner.run(..., hooks=session.hooks())`` (and ``run_sync``,
        ``run_streamed``) that record what the session's items alone do not say:

        * a ``turn/start`` ``{"agent"}`` when a run's first agent starts and a ``turn/end``
          ``{"agent"}`` when it gives its final output;
        * before each model call, the agent's instructions and tool definitions when they
          change (see :meth:`record_request`), so that ``Session.context_at`` shows the
          whole request;
        * each model response's token ``usage`` (on its first item) and the time it
          arrived, and when each tool call returned: the ``tool_calls`` view's
          ``latency_s`` is the tool's real time.

        With :meth:`record_stream`, they also hold the saving of a streamed response until
        its deltas are in the log, so the ``assistant/chunk`` events come before the message
        they spell."""
        from agents import RunHooks

        session = self

        class _Hooks(RunHooks):
            async def on_agent_start(self, context, agent) -> None:
                runs = session._runs()
                run = id(getattr(context, "usage", context))
                if runs.turn != run:
                    runs.turn, runs.step = run, 0
                    await session._flush_turn_end(runs, [("turn/start", {"agent": agent.name})])

            async def on_agent_end(self, context, agent, output) -> None:
                runs = session._runs()
                runs.turn = None
                runs.turn_end = {"agent": agent.name}

            async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:
                session._runs().llm_calls += 1
                tools = await agent.get_all_tools(context)
                await session.record_request(system_prompt, [_tool_definition(t) for t in tools])

            async def on_llm_end(self, context, agent, response) -> None:
                runs = session._runs()
                async with runs.progress:
                    await runs.progress.wait_for(lambda: runs.streams == 0 or runs.streamed >= runs.llm_calls)
                runs.response_ts = time.time()  # after its streamed deltas
                runs.step += 1
                runs.usage = _usage(response, agent, runs.step)

            async def on_tool_start(self, context, agent, tool) -> None:
                call = getattr(context, "tool_call_id", None)
                if isinstance(call, str):
                    session._tool_times[call] = [time.time(), None]

            async def on_tool_end(self, context, agent, tool, result) -> None:
                times = session._tool_times.get(getattr(context, "tool_call_id", None))
                if times is not None:
                    times[1] = time.time()

        return _Hooks()

    async def _flush_turn_end(self, runs: _LoopRuns, then: list[tuple] = ()) -> None:
        """Append the pending ``turn/end`` of this loop's last run (if no items came after
        it), then ``then``."""
        events = ([("turn/end", runs.turn_end)] if runs.turn_end is not None else []) + list(then)
        if events:
            await self._append(events)
            runs.turn_end = None

    def tool_error_formatter(self, then: Callable[[Any], Any] | None = None) -> Callable[[Any], Any]:
        """A ``tool_error_formatter`` for ``RunConfig(tool_error_formatter=...)``: the SDK
        calls it with the call id of each tool call that failed (the tool raised, was not
        found, or its approval was rejected), and this session stores that call's
        ``tool/result`` with ``"is_error": true`` (the ``tool_calls`` view's ``is_error``).
        The SDK's items carry no failure flag, so without it the adapter cannot tell a
        failure from a result. It returns what ``then(args)`` returns (None without
        ``then``: the model sees the SDK's default message). The SDK calls it for tools with
        its default ``failure_error_function``; a tool with its own failure function is not
        reported."""
        async def formatter(args: Any) -> str | None:
            self._failed_calls.add(args.call_id)
            if then is None:
                return None
            message = then(args)
            return await message if inspect.isawaitable(message) else message

        return formatter

    def record_stream(self, result) -> AsyncIterator[Any]:
        """Iterate ``result.stream_events()`` of ``Runner.run_streamed`` unchanged, while
        appending each text delta as an ``assistant/chunk`` ``{"delta": {"content": ...}}``
        event as it arrives (so ``eventstore tail -f`` shows the text typing in). Call it
        right after ``run_streamed``, whose ``hooks`` are :meth:`hooks` (they keep each
        response's chunks before its message)."""
        runs = self._runs()
        runs.streamed = runs.llm_calls  # the model calls before this run are not streamed here
        return self._record_stream(result, runs)

    async def _record_stream(self, result, runs: _LoopRuns) -> AsyncIterator[Any]:
        # counted from the first step of the iteration (which runs before the runner's task
        # does), so a stream that is never iterated holds nothing up
        runs.streams += 1
        try:
            async for event in result.stream_events():
                if event.type == "raw_response_event":
                    kind = getattr(event.data, "type", None)
                    if kind == "response.output_text.delta":
                        await self._append([("assistant/chunk", {"delta": {"content": event.data.delta}})])
                    elif kind in ("response.completed", "response.failed", "response.incomplete"):
                        async with runs.progress:
                            runs.streamed += 1
                            runs.progress.notify_all()
                yield event
            await self._flush_turn_end(runs)
        finally:
            runs.streams -= 1
            async with runs.progress:
                runs.progress.notify_all()


def _tool_definition(tool: Any) -> dict:
    """An SDK tool as a chat-completions tool definition; a hosted tool (no JSON schema)
    as ``{"type": its type name}``."""
    schema = getattr(tool, "params_json_schema", None)
    if schema is None:
        return {"type": getattr(tool, "type", None) or type(tool).__name__}
    fn = {"name": tool.name, "description": getattr(tool, "description", "") or "", "parameters": schema}
    if getattr(tool, "strict_json_schema", False):
        fn["strict"] = True
    return {"type": "function", "function": fn}
