"""The store: sessions, the append path, reads, and JSONL import/export.

Database-neutral: everything here validates, encodes and hashes, and talks to the database
only through a backend (:mod:`eventstore.backends`), which owns connections, transactions,
locking, migrations and error translation.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat

from eventstore.backends import open_backend
from eventstore.backends.base import PAGE, Backend, Follower, ImportLock, ImportTransaction
from eventstore.errors import (
    AppendOnlyViolation,
    DatabaseError,
    EventStoreError,
    IdempotencyConflict,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from eventstore.lazy import LazyModule
from eventstore.live import follow as _follow
from eventstore.log.codec import (
    dumps,
    encodable,
    good_event_id,
    loads,
    payload_json,
    payload_json_stored,
    payload_jsons,
)
from eventstore.log.line import event_line
from eventstore.log.projection import loads as _messages_loads
from eventstore.log.validate import check_seq as _check_seq
from eventstore.log.validate import check_session_id as _check_session_id
from eventstore.log.validate import check_ts as _check_ts
from eventstore.log.validate import check_type as _check_type
from eventstore.records import frozen_record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import IO, Any, TypeVar

    from eventstore.log.redaction import Redaction
    _C = TypeVar("_C")

__all__ = ["EventStore", "Session", "Event", "SessionInfo"]


def _os_user() -> str:
    """Who runs this process, for a redaction's ``by``: the login name, else the uid."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name and no passwd entry: the uid says who
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


json = LazyModule("json")  # imported at the first payload read (its import compiles its patterns)
# Imported at first use, not at eventstore's start-up (a listing appends nothing).
_commit = LazyModule("eventstore.log.commit")
_gcpause = LazyModule("eventstore.log.gcpause")

DEFAULT_BUSY_TIMEOUT = 5.0  # seconds
_MAX_LIMIT = 2**62  # events(last=N): any N past this is "all" (a bound every database binds)


@frozen_record  # @dataclass(frozen=True, slots=True), without importing dataclasses at start-up
class Event:
    """One stored event.

    ``seq`` is its position in the session (0, 1, 2, ...), ``position`` its global position
    across all sessions (grows in commit order), ``ts`` seconds since the epoch, ``payload``
    every key besides ``type``, ``seq`` and ``ts``.
    """

    __slots__ = ("session_id", "seq", "position", "type", "ts", "payload")
    session_id: str
    seq: int
    position: int
    type: str
    ts: float
    payload: dict

    def to_dict(self) -> dict:
        """The event as the JSONL format spells it: ``{"type", "seq", "ts", **payload}``."""
        return {"type": self.type, "seq": self.seq, "ts": self.ts, **self.payload}

    def to_jsonl(self) -> str:
        """The event's JSONL line (no newline), exactly as the reference ``save()`` writes it."""
        return event_line(self.type, self.seq, self.ts, dumps(self.payload))


@frozen_record  # @dataclass(frozen=True, slots=True), without importing dataclasses at start-up
class SessionInfo:
    """A row of the session registry: ``events`` is the count, ``last_ts`` None when empty."""

    __slots__ = ("id", "created_at", "events", "last_ts")
    id: str
    created_at: float
    events: int
    last_ts: float | None


_set = [Event.__dict__[f].__set__ for f in ("session_id", "seq", "position", "type", "ts", "payload")]


def _new_event(session_id: str, seq: int, position: int, type_: str, ts: float, payload: dict,
               _new=object.__new__, _cls=Event, _s=_set) -> Event:
    """``Event(...)`` at half the cost: a frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` for each field; the slots' own setters are quicker."""
    e = _new(_cls)
    _s[0](e, session_id)
    _s[1](e, seq)
    _s[2](e, position)
    _s[3](e, type_)
    _s[4](e, ts)
    _s[5](e, payload)
    return e


def _new_events(session_id: str, seq0: int, position0: int, types: list[str], tss: list[float],
                payloads: list) -> list[Event]:
    """Consecutive events of one session (seqs ``seq0...``, positions ``position0...``), built
    a field at a time over the whole batch (see :func:`_events_of`)."""
    n = len(types)
    return _events_of(session_id, n, range(seq0, seq0 + n), range(position0, position0 + n), types, tss, payloads)


def _events_of(session_id: str, n: int, seqs: Iterable[int], positions: Iterable[int], types: Iterable[str],
               tss: Iterable[float], payloads: Iterable) -> list[Event]:
    """``n`` events of one session from their columns, built a field at a time: a C loop per
    field (``map`` over the slot's setter) instead of a Python call per event."""
    events = list(map(object.__new__, repeat(Event, n)))
    for setter, values in zip(_set, (repeat(session_id, n), seqs, positions, types, tss, payloads), strict=True):
        deque(map(setter, events, values), 0)
    return events


def _row_events(session_id: str, rows: list[tuple]) -> list[Event]:
    """The events of ``(seq, position, type, ts, payload JSON)`` rows of one session, their
    payloads parsed in one call (:func:`_payloads`)."""
    if not rows:
        return []
    seqs, positions, types, tss, texts = zip(*rows, strict=True)
    return _events_of(session_id, len(rows), seqs, positions, types, tss, _payloads(texts))


def _payloads(texts: tuple[str, ...]) -> list:
    """``[json.loads(t) for t in texts]``: the texts joined as one JSON array and parsed in
    one call, which costs about half as much as a call each; one at a time when that does
    not give one object per text (a payload orjson refuses sends the whole array to
    ``json.loads``, and a stored text that is not one JSON object gets its own error)."""
    try:
        values = _messages_loads("[" + ",".join(texts) + "]")
    except ValueError:  # a text that does not parse: its own call raises its own error
        values = None
    if values is not None and len(values) == len(texts):
        return values
    return [_messages_loads(t) for t in texts]


def event_from_row(row: tuple) -> Event:
    """An :class:`Event` from an ``EventRow`` ``(position, session_id, seq, type, ts, payload)``."""
    position, session_id, seq, type_, ts, payload = row
    return _new_event(session_id, seq, position, type_, ts, json.loads(payload))


def _item_error(session_id: str, index: int, error: InvalidEvent) -> InvalidEvent:
    """``error``, about item ``index`` (counting from 0) of an ``append_many`` batch for
    ``session_id``, as an error that says which item it was."""
    return InvalidEvent(f"session {session_id!r}: append_many item {index}: {error}")


def _bad_payload(payloads: list) -> tuple[int, InvalidEvent] | None:
    """The index of the first of ``payloads`` that :func:`payload_json` refuses, and its
    error (None if none): a batch's payloads are proven together, and only an error needs
    the item."""
    for index, payload in enumerate(payloads):
        try:
            payload_json(payload)
        except InvalidEvent as e:
            return index, e
    return None


def _first_item_error(session_id: str, payloads: list, index: int, error: InvalidEvent) -> InvalidEvent:
    """The error for item ``index`` (refused for its type, ts or shape), unless one of the
    ``payloads`` before it is refused too: the first bad item is the one named, whichever
    check finds it (payloads are checked after the rest, as a batch)."""
    return _item_error(session_id, *(_bad_payload(payloads[:index]) or (index, error)))


def _split_batch(events: Any, now: float, session_id: str) -> tuple[list, list, list | None, list | None]:
    """``append_many``'s ``events`` as ``(types, timestamps, payloads, payload_jsons)``:
    types checked, timestamps checked (``now`` where none is given), and either the
    payloads (``payload_jsons`` None) or their JSON texts (``payloads`` None). Raises
    :class:`InvalidEvent` for the first bad item, in order, naming ``session_id`` and the
    item's index.

    A list or tuple of events is read as it stands: ``payload_jsons`` is None, and the
    caller encodes the payloads as one batch (:func:`eventstore.log.codec.payload_jsons`); one
    of ``(type, payload)`` tuples is split by C loops. Any other iterable is read item by
    item, each payload encoded as it comes: a generator may reuse one mutable item or dict
    (each event keeps what it held when yielded), or never end after a bad one."""
    if type(events) in (list, tuple):
        if (events and len(set(map(type, events))) == 1 and type(events[0]) is tuple
                and len(set(map(len, events))) == 1):
            columns = list(zip(*events, strict=True))  # all (type, payload) or all (type, payload, ts): C loops
            if len(columns) == 2 and set(map(type, columns[0])) == {str}:
                types, payloads = columns
                for type_ in dict.fromkeys(types):  # each distinct type once, in order: the first bad one is named
                    try:
                        _check_type(type_)
                    except InvalidEvent as e:
                        raise _first_item_error(session_id, payloads, types.index(type_), e) from None
                return list(types), [now] * len(types), list(payloads), None
        eager = False
    else:
        try:
            events = iter(events)
        except TypeError:
            raise InvalidEvent(f"session {session_id!r}: append_many takes an iterable of events, "
                               f"not {type(events).__name__}") from None
        eager = True
    types, tss, payloads = [], [], []
    checked = set()  # the types checked so far: a batch holds a few
    for item in events:
        try:  # an error names the item: its index is len(types)
            if type(item) is tuple and len(item) == 2:
                type_, payload = item
                ts = now
            else:
                if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                    raise InvalidEvent("append_many takes (type, payload) or (type, payload, ts) tuples, "
                                       f"not {item!r:.80}")
                type_, payload = item[0], item[1]
                ts = _check_ts(item[2]) if len(item) == 3 and item[2] is not None else now
            if type(type_) is not str or type_ not in checked:
                _check_type(type_)
                checked.add(type_)
            pj = payload_json(payload) if eager else payload
        except InvalidEvent as e:  # eager: the payloads before it are proven already
            raise _first_item_error(session_id, [] if eager else payloads, len(types), e) from None
        types.append(type_)
        tss.append(ts)
        payloads.append(pj)
    return (types, tss, None, payloads) if eager else (types, tss, payloads, None)


class Session:
    """A handle on one stored session: append to it, read it, project it.

    Get one from :meth:`EventStore.create_session` or :meth:`EventStore.session`. Cheap to
    create; holds no database state of its own.
    """

    __slots__ = ("id", "_store")

    def __init__(self, store: EventStore, session_id: str):
        self.id = session_id
        self._store = store

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def append(self, type: str, payload: dict | None = None, *, ts: float | None = None,
               expected_seq: int | None = None, event_id: str | None = None) -> Event:
        """Append one event, in its own transaction, and return it as stored (the payload is
        the stored JSON read back: a tuple comes back a list, an IntEnum its number).

        ``payload`` is a JSON object (dict); ``ts`` is seconds since the epoch (default
        ``time.time()``); ``expected_seq``, when given, is the seq this event must get.
        ``event_id`` is an idempotency key, stored as the payload's ``event_id`` key (so it
        survives export): a retried append with the same key and the same type and payload
        returns the stored event instead of writing a second one.

        On a store opened with ``redact_secrets=True``, an event holding a secret is stored
        with markers and followed by its ``redaction`` event: the returned event is the
        item's own (with its markers), and the session's next seq is then its seq + 2.

        Raises :class:`InvalidEvent` (bad type, reserved key ``type``/``seq``/``ts`` in the
        payload, NaN/Infinity or a non-JSON value), :class:`SeqConflict` (another writer
        got there first; ``actual_seq`` says where the session is), :class:`IdempotencyConflict`
        (the key is stored with other content), :class:`SessionNotFound`,
        :class:`DatabaseError` (the database stayed locked past the busy timeout).
        """
        _check_type(type)
        if event_id is not None:
            if not isinstance(event_id, str) or not good_event_id(str(event_id)):
                raise InvalidEvent(f"event_id must be a non-empty string without lone UTF-16 surrogates "
                                   f"(it is looked up as SQLite text), not {event_id!r}")
            if payload and payload.get("event_id", event_id) != event_id:
                raise InvalidEvent(f"event_id {event_id!r} differs from the payload's {payload['event_id']!r}")
            payload = {**(payload or {}), "event_id": event_id}
        pj, stored = payload_json_stored(payload)
        ts = time.time() if ts is None else _check_ts(ts)
        if expected_seq is not None:
            _check_seq(expected_seq)
        if self._store.secret_filter is not None:
            try:
                redacted = self._append_redacting([type], [ts], [pj], expected_seq)
            except (SeqConflict, AppendOnlyViolation) as e:  # a retry meets its own event, stored redacted
                key = (payload or {}).get("event_id")
                out = self._store.secret_filter.events(0, [type], [ts], [pj])
                stored = None if key is None or out is None else self._stored_for_key(key, type, out[2][0])
                if stored is None:
                    raise self._seq_conflict(e) from None
                return stored
            if redacted is not None:
                return redacted[0]
        salts = _commit.new_salts(1)  # the commitment needs no seq: computed before the head is locked
        commit = _commit.commit_jsons(salts, [stored])[0]
        try:
            seq, position, _hash = self._store._backend.append_one(self.id, type, ts, pj, expected_seq,
                                                                   salt=salts[0], commit=commit)
        except (SeqConflict, AppendOnlyViolation) as e:
            # A retry of an append that did land (its answer was lost) meets its own event.
            key = (payload or {}).get("event_id")
            stored = None if key is None else self._stored_for_key(key, type, pj)
            if stored is None:
                raise self._seq_conflict(e) from None
            return stored
        return _new_event(self.id, seq, position, type, ts, stored)

    def _seq_conflict(self, e: EventStoreError) -> EventStoreError:
        """``e``, saying why when the seq an append expected holds the ``redaction`` event that
        the store's secret filter appended after the event before it (``open(...,
        redact_secrets=True)``): a caller counting its own events expects one seq too few."""
        if self._store.secret_filter is None or not isinstance(e, SeqConflict) or e.detail \
                or not 0 < e.expected_seq < e.actual_seq:
            return e
        found = self.events(after_seq=e.expected_seq - 1)
        try:
            first = next(found, None)
        finally:
            found.close()
        if first is None or first.seq != e.expected_seq or first.type != "redaction" \
                or first.payload.get("before_storing") is not True or first.payload.get("event_seq") != first.seq - 1:
            return e
        return SeqConflict(e.session_id, e.expected_seq, e.actual_seq,
                           f"seq {first.seq} is the redaction event of seq {first.seq - 1}, which held a secret "
                           f"(redact_secrets=True appends one after each such event: next_seq() says where the "
                           f"session is)")

    def _stored_for_key(self, key: Any, type_: str, pj: str) -> Event | None:
        """The event stored under idempotency key ``key`` (None if there is none).
        Raises :class:`IdempotencyConflict` if it holds another type or payload."""
        row = self._store._backend.event_by_id(self.id, key)
        if row is None:
            return None
        seq, position, stored_type, ts, stored_pj = row
        if stored_type != type_ or stored_pj != pj:
            raise IdempotencyConflict(self.id, key, seq)
        return Event(self.id, seq, position, stored_type, ts, json.loads(stored_pj))

    def append_many(self, events: Iterable[tuple], *, expected_seq: int | None = None) -> list[Event]:
        """Append several events atomically (all or none), with consecutive seqs.

        ``events`` holds ``(type, payload)`` or ``(type, payload, ts)`` tuples. With
        ``expected_seq``, the first event must get that seq. Returns the events as stored,
        one per item (as :meth:`append` does: each payload is its stored JSON read back; with
        ``redact_secrets=True`` the ``redaction`` events that follow the items that held a
        secret are stored between them, not returned: their seqs are not consecutive then). Raises what
        :meth:`append` raises; on any error nothing is stored. An :class:`InvalidEvent`
        about one item names the session and the item's index (counting from 0):
        ``session 'S': append_many item 3: payload key 'seq' is reserved ...``.

        Idempotent retries: when every event carries an ``event_id`` in its payload and the
        whole batch is already stored, in order, with the same types and payloads (a retry
        of a batch that landed), the stored events are returned. A key stored with other
        content, or stored without the rest of its batch, raises
        :class:`IdempotencyConflict`; a key twice in one batch raises :class:`InvalidEvent`.
        """
        types, tss, payloads, pjs = _split_batch(events, time.time(), self.id)
        if expected_seq is not None:
            _check_seq(expected_seq)
        if not types:
            return []
        if pjs is None:
            try:
                pjs, stored = payload_jsons(payloads)
            except InvalidEvent:
                found = _bad_payload(payloads)
                if found is None:
                    raise
                raise _item_error(self.id, *found) from None
        else:  # encoded item by item as an iterable yielded them
            stored = [loads(pj) for pj in pjs]
        if self._store.secret_filter is not None:
            try:
                redacted = self._append_redacting(types, tss, pjs, expected_seq)
            except SeqConflict as e:
                raise self._seq_conflict(e) from None
            if redacted is not None:
                return redacted
        salts = _commit.new_salts(len(types))
        commits = _commit.commit_jsons(salts, stored)
        try:
            seq0, pos0, _last_hash = self._store._backend.append(self.id, types, tss, pjs, expected_seq,
                                                                 salts=salts, commits=commits)
        except (SeqConflict, AppendOnlyViolation) as e:
            found = self._stored_batch(list(zip(types, tss, pjs, strict=True)), stored)
            if found is None:
                raise self._seq_conflict(e) from None
            return found
        return _new_events(self.id, seq0, pos0, types, tss, stored)

    def _append_redacting(self, types: list[str], tss: list[float], pjs: list[str],
                          expected_seq: int | None) -> list[Event] | None:
        """Append a batch through the store's secret filter (``open(..., redact_secrets=True)``):
        None when no event of it holds a secret (the caller appends it as it is), else the
        batch's events as stored, one per item: each secret-bearing field holds
        ``[redacted: secret: KIND]``, and each such event is followed in the session by its
        ``redaction`` event (see :class:`eventstore.audit.secrets.SecretFilter`), which is not
        returned. The redaction events name their event's seq, so the batch is appended at the
        seq read first (again if another writer got there in between, unless ``expected_seq``
        was given)."""
        secrets = self._store.secret_filter
        for _attempt in range(100):
            seq0 = self.next_seq() if expected_seq is None else expected_seq
            out = secrets.events(seq0, types, tss, pjs)
            if out is None:
                return None
            out_types, out_tss, out_pjs = out
            stored = [loads(pj) for pj in out_pjs]
            salts = _commit.new_salts(len(out_types))
            try:
                commits = _commit.commit_jsons(salts, stored)
                seq, position, _hash = self._store._backend.append(self.id, out_types, out_tss, out_pjs, seq0,
                                                                   salts=salts, commits=commits)
            except SeqConflict:
                if expected_seq is not None:
                    raise
                continue  # another writer appended after the read: the seqs the redactions name moved
            events = _new_events(self.id, seq, position, out_types, out_tss, stored)
            ours, j = [], 0
            for pj in pjs:  # an item stored with markers (its text changed) is followed by its redaction event
                ours.append(events[j])
                j += 1 if out_pjs[j] is pj or out_pjs[j] == pj else 2
            return ours
        raise SeqConflict(self.id, seq0, self.next_seq())

    def _stored_batch(self, prepared: list[tuple], payloads: list[dict]) -> list[Event] | None:
        """After a refused batch of ``prepared`` ``(type, ts, payload_json)`` with the
        ``payloads`` they encode: the stored events if the batch is a retry of one that
        landed whole (see :meth:`append_many`); None when no key of the batch explains the
        refusal. Raises :class:`IdempotencyConflict` or :class:`InvalidEvent` otherwise."""
        keys = [p.get("event_id") for p in payloads]
        seen: set = set()
        for key in keys:
            if key is not None and key in seen:
                raise InvalidEvent(f"session {self.id!r}: event_id {key!r} appears twice in one append_many batch")
            seen.add(key)
        stored = []
        for (t, _ts, pj), key in zip(prepared, keys, strict=True):
            stored.append(None if key is None else self._stored_for_key(key, t, pj))
        found = [e for e in stored if e is not None]
        if not found:
            return None
        if len(found) < len(stored) or [e.seq for e in found] != list(range(found[0].seq, found[0].seq + len(found))):
            first = found[0]
            raise IdempotencyConflict(self.id, first.payload.get("event_id"), first.seq,
                                      "but not with the rest of this batch (append_many stores all of a batch or none)")
        return found

    def next_seq(self) -> int:
        """The seq the next appended event will get (= the number of events stored)."""
        return self._store._backend.next_seq(self.id)

    def events(self, after_seq: int | None = None, types: Iterable[str] | str | None = None, *,
               last: int | None = None) -> Iterator[Event]:
        """Iterate the session's events in seq order: those with ``seq > after_seq`` (all
        when None), of the given ``types`` only (all when None).

        ``last=N`` keeps only the newest N of those events (still in seq order), read
        backwards from the head through the ``(session_id, seq)`` index in one query: the
        cost grows with N, not with the session.

        Reads page by page (1,000 events a query), so no read transaction stays open while
        the caller works between items.
        """
        if after_seq is not None and (isinstance(after_seq, bool) or not isinstance(after_seq, int)):
            raise InvalidEvent(f"after_seq must be an integer, not {after_seq!r}")
        if isinstance(types, str):
            types = [types]
        types = list(types) if types is not None else None
        after = -1 if after_seq is None else max(-1, after_seq)
        if last is not None:
            n = min(_check_seq(last, "last"), _MAX_LIMIT)
            with _gcpause.paused():
                rows = self._store._backend.session_events(self.id, after, types, n, last=True) if n else []
                return iter(_row_events(self.id, rows))
        return self._events(after, types)

    def _events(self, last: int, types: list[str] | None) -> Iterator[Event]:
        sid = self.id
        read = self._store._backend.session_events
        while True:
            with _gcpause.paused():  # a page is built at once; the caller's work runs with the collector on
                rows = read(sid, last, types, PAGE)
                page = _row_events(sid, rows)
            yield from page
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def follow(self, after_seq: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> Iterator[Event]:
        """Yield the session's events with ``seq > after_seq`` (all when None) in seq order,
        then each new one as it is committed, by any process: each exactly once, in order.

        Waits ``poll_interval`` seconds between looks when nothing changed; stops after
        ``idle_timeout`` seconds without a new event (None: follows until the caller stops
        iterating). Holds no read transaction between looks (see :mod:`eventstore.live.follow`).
        Raises :class:`DatabaseError` when the database cannot be read.
        """
        after = -1 if after_seq is None else _check_seq(after_seq, "after_seq")
        return _follow.follow_session(self._store._backend, self.id, after, poll_interval=poll_interval,
                                      idle_timeout=idle_timeout, make_event=event_from_row)

    def derive_messages(self) -> list[dict]:
        """The projection: the chat ``messages`` array (list of dicts) for this session,
        read from the ``messages`` view (see :mod:`eventstore.log.projection`)."""
        with _gcpause.paused():
            return _messages_loads(self._store._backend.messages_json(self.id))

    def messages_json(self, upto_seq: int | None = None) -> str:
        """The projection as JSON array text, as ``JSON.stringify`` would write it; with
        ``upto_seq``, of the events up to that seq only (what the model was sent then)."""
        return self._store._backend.messages_json(self.id, upto_seq)

    def messages_size(self, upto_seq: int | None = None) -> int:
        """The UTF-8 bytes of the messages :meth:`messages_json` would join, counted without
        reading them (the viewer refuses a projection past its limit before reading it)."""
        return self._store._backend.messages_size(self.id, upto_seq)

    def context_at(self, seq: int | None = None) -> dict:
        """What the model was sent just before the event at ``seq`` (at the head when None):
        ``{"messages": [...], "tools": [...]}`` in the chat-completions request shape, the
        instructions as a leading system message, retractions honoured. See
        :func:`eventstore.log.context.context_at`; raises :class:`InvalidEvent`."""
        from eventstore.log.context import context_at  # (imported when used: eventstore's start-up)

        return context_at(self, seq)

    def repair(self) -> list[Event]:
        """Append what an interrupted session needs for its projection to be valid for a
        chat API, and return the appended events (``[]`` when it needs nothing).

        Appends, in one atomic :meth:`append_many`: a ``tool/result`` saying the call was
        interrupted for each tool call still waiting for its result at the end of the log,
        a ``step/end`` for an open step, a ``turn/end`` for an open turn; each payload has
        ``"repair": true``. History is never changed. Run it when the agent that owns the
        session is not running. See :func:`eventstore.audit.repair.repair`; raises
        :class:`SeqConflict` if other writers keep appending.
        """
        from eventstore.audit.repair import repair  # (imported when used: eventstore's start-up)

        return repair(self)


class EventStore:
    """An append-only store of agent sessions in one database: an SQLite file (the default)
    or a PostgreSQL database.

    Open with :meth:`open`. One ``EventStore`` holds one backend (see
    :mod:`eventstore.backends`), private: the store's methods are the reads and writes, and
    :meth:`capability` hands out an optional capability (search, auditing reads, the
    viewer's index, ...) explicitly. It may be shared by threads (calls are serialized where the
    database needs it). Several processes may open the same database at once (see
    docs/concurrency.md). After ``os.fork()`` the child does not share the parent's
    connection: its first call opens a connection of its own.
    """

    def __init__(self, backend: Backend, *, redact_secrets: bool = False):
        self._backend = backend  # the core contract; capabilities through capability()
        self._secrets = None  # the secret filter appends go through (open(..., redact_secrets=True))
        if redact_secrets:
            from eventstore.audit.secrets import SecretFilter  # (imported when used: detect-secrets is slow to load)

            self._secrets = SecretFilter()

    @classmethod
    def open(cls, target: str | os.PathLike = "eventstore.db", *,
             busy_timeout: float = DEFAULT_BUSY_TIMEOUT, durability: str = "normal",
             write_queue: bool = True, readonly: bool = False, upgrade: bool = True,
             redact_secrets: bool = False) -> EventStore:
        """Open (creating and migrating if needed) the database at ``target``.

        ``target`` is a file path, ``:memory:``, an SQLAlchemy ``sqlite://`` URL, or a
        PostgreSQL URL (``postgresql://user@host:port/db`` or ``postgresql+psycopg://...``,
        with the ``postgres`` extra); ``busy_timeout`` is how long (seconds) a
        write waits for another writer. ``durability`` is ``"normal"`` (SQLite: WAL +
        ``synchronous=NORMAL``, an acknowledged append survives a process crash; PostgreSQL:
        an append returns once the server has flushed it, as its ``synchronous_commit``
        says, so a server crash loses no acknowledged append), ``"full"`` (SQLite: also
        survives power loss; PostgreSQL: as ``"normal"``) or, PostgreSQL only and opt-in,
        ``"may-lose-recent"`` (asynchronous commit: a server crash may lose the appends of
        its last ~600 ms, never corrupts or gaps).
        SQLite only: with ``write_queue`` (the default) writers
        wait for each other on a lock file beside the database (``FILE-lock``, see
        :mod:`eventstore.backends.sqlite.writelock`) instead of in SQLite's sleep-and-retry busy
        handler. With ``readonly``, the database must exist at the latest schema and is
        opened read-only (for auditors, or a file the user may only read): appends raise
        :class:`DatabaseError`. Raises :class:`DatabaseError` (:class:`SchemaOutdated` when
        ``readonly`` meets a database an older eventstore wrote: a writable open upgrades it,
        unless ``upgrade`` is false, for a reader that writes only what is derived, such as
        ``eventstore search`` and its index: an upgrade would lock out the older eventstore's
        processes that still use the database).

        With ``redact_secrets``, secrets never land: an appended event (and an imported one)
        whose payload holds a secret that ``eventstore scan`` finds is stored with each
        secret-bearing field replaced by ``[redacted: secret: KIND]``, followed in the same
        transaction by a ``redaction`` event naming its seq and paths (``"before_storing":
        true``); a secret in a new session's meta is replaced by its marker too (no redaction
        event: the meta is no event). :meth:`Session.append` returns the stored (redacted) event, and
        :meth:`Session.append_many` one stored event per item, as without the flag; the
        redaction events are not returned, so the session's next seq is not always the last
        returned seq + 1: :meth:`Session.next_seq` says it (a :class:`SeqConflict` whose
        ``expected_seq`` holds such a redaction event says so).
        """
        return cls(open_backend(target, busy_timeout=busy_timeout, durability=durability,
                                write_queue=write_queue, readonly=readonly, upgrade=upgrade),
                   redact_secrets=redact_secrets)

    def close(self) -> None:
        """Close the connection. The store cannot be used afterwards."""
        self._backend.close()

    @property
    def display(self) -> str:
        """What messages call the database: a file path, ``:memory:``, or the URL without
        its password."""
        return self._backend.display

    @property
    def secret_filter(self):
        """The :class:`eventstore.audit.secrets.SecretFilter` appends and imports go through
        (``open(..., redact_secrets=True)``), or None."""
        return self._secrets

    @property
    def upgraded_from(self) -> str | None:
        """The schema revision :meth:`open` upgraded from (an older eventstore's database);
        None when the database was current, new, or opened read-only."""
        return self._backend.upgraded_from

    def database_files(self) -> list[str]:
        """The real paths of the database's own files (none for a server or ``:memory:``):
        what an export must not overwrite."""
        return self._backend.files()

    def capability(self, kind: type[_C]) -> _C:
        """The optional capability ``kind`` of the backend (one of
        :data:`eventstore.backends.capabilities.CAPABILITIES`: ``SearchIndex``,
        ``AuditReads``, ``SessionIndex``, ``LogViews``, ``SqlSandbox``, ``Roles``): its own
        when it has one, else the generic fallback over the core contract
        (:mod:`eventstore.backends.fallbacks`). What it returns also answers the core
        contract's reads (``imports``, ``session_meta``, ...), for the code that receives it
        (``verify``, search, the viewer's index)."""
        if isinstance(self._backend, kind):  # its own (the fallbacks are imported when one is needed)
            return self._backend
        from eventstore.backends.fallbacks import capability

        return capability(self._backend, kind)

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- live tailing --------------------------------------------------------------------

    def follow(self, after_position: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> Iterator[Event]:
        """Yield every event with ``position > after_position`` (all when None), of every
        session, in position (= commit) order, then each new one as any process commits it:
        each exactly once, in order.

        Waits ``poll_interval`` seconds between looks when nothing changed; stops after
        ``idle_timeout`` seconds without a new event (None: follows until the caller stops
        iterating). Holds no read transaction between looks (see :mod:`eventstore.live.follow`).
        Raises :class:`DatabaseError` when the database cannot be read.
        """
        after = 0 if after_position is None else _check_seq(after_position, "after_position")
        return _follow.follow_store(self._backend, after, poll_interval=poll_interval, idle_timeout=idle_timeout,
                                    make_event=event_from_row)

    def last_position(self) -> int:
        """The global position of the newest event (0 when the store is empty): pass it to
        :meth:`follow` to see only events committed from now on. While a large import
        runs, that is the position before its first event (see :mod:`eventstore.live.follow`)."""
        return self._backend.last_position(_follow.DeadOwners(self._backend)())

    def follower(self, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL) -> Follower:
        """A reader on a connection of its own that waits for commits (see
        :class:`eventstore.backends.base.Follower`): for a loop that follows the log itself
        (the viewer, the async store). Close it when done."""
        return self._backend.follower(poll_interval)

    def imports(self) -> list[tuple[str, int, str, float]]:
        """``(session_id, first_position, owner, started_at)`` of every unfinished import
        (hidden sessions: see :mod:`eventstore.io.bulk`)."""
        return self._backend.imports()

    def import_owner_alive(self, owner: str) -> bool:
        """Whether the importer ``owner`` (of :meth:`imports`) still holds its import lock."""
        return self._backend.import_owner_alive(owner)

    def wait_for_session(self, session_id: str, *, timeout: float | None = None,
                         poll_interval: float = _follow.DEFAULT_POLL_INTERVAL) -> bool:
        """Block until ``session_id`` is stored (by any process) and return True, or False
        after ``timeout`` seconds (None: no limit). See :func:`eventstore.live.follow.wait_for_session`."""
        return _follow.wait_for_session(self._backend, session_id, timeout=timeout, poll_interval=poll_interval)

    # --- sessions ----------------------------------------------------------------------

    def create_session(self, session_id: str | None = None, *, meta: dict | None = None) -> Session:
        """Create a session and return its handle.

        ``session_id`` defaults to 12 characters of a random UUID, like the reference
        (``5a1b896f-beb``); ``meta`` holds extra keys for the ``session/meta`` line.
        Raises :class:`SessionExists` if the id is taken, :class:`InvalidEvent` for a bad id
        or meta.
        """
        import uuid  # (imported when used: eventstore's start-up)

        sid = str(uuid.uuid4())[:12] if session_id is None else _check_session_id(session_id)
        meta_json = "{}"
        if meta:
            if not isinstance(meta, dict) or "type" in meta or "id" in meta:
                raise InvalidEvent("meta must be a dict without the keys 'type' and 'id'")
            meta_json = dumps(meta)
            if self._secrets is not None:  # (the meta is no event: its markers have no redaction event)
                meta_json = self._secrets.meta_json(meta_json)
        self._backend.create_session(sid, time.time(), meta_json)
        return Session(self, sid)

    def session(self, session_id: str, *, create: bool = False) -> Session:
        """The handle of a stored session. Raises :class:`SessionNotFound`.

        With ``create=True``, a session that is not stored yet is created (get-or-create):
        race-free across processes and on every backend, since the database refuses a second
        row for the id (:class:`SessionExists`) and whichever caller loses the race gets
        the winner's session. Raises :class:`InvalidEvent` for an id that cannot be stored.
        A session whose import is unfinished (see :mod:`eventstore.io.bulk`) is not there for
        either: :class:`SessionNotFound`."""
        if not encodable(session_id) or self._backend.session_meta(session_id) is None:
            if not create:
                raise SessionNotFound(session_id)
            try:
                return self.create_session(session_id)
            except SessionExists:  # another process created it between the look and the insert
                if self._backend.session_meta(session_id) is None:  # ... or is importing it
                    raise SessionNotFound(session_id) from None
        return Session(self, session_id)

    def sessions(self) -> list[SessionInfo]:
        """The registry: every stored session, oldest first."""
        return [SessionInfo(*r) for r in self._backend.sessions()]

    def session_meta_json(self, session_id: str) -> str | None:
        """The stored meta JSON object text of ``session_id`` (the keys of its
        ``session/meta`` line besides type and id), or None when it is not stored (or its
        import is unfinished)."""
        return self._backend.session_meta(session_id) if encodable(session_id) else None

    def session_payloads(self, session_id: str, types: list[str], limit: int | None = None,
                         last: bool = False, from_seq: int = 0) -> tuple[int, list[tuple[int, str, str]]]:
        """``(head, rows)``: the session's next seq and ``(seq, type, payload JSON text)`` of
        its events of ``types`` with ``seq >= from_seq``, all or at most ``limit`` (the first
        ones, or with ``last`` the last ones), read together: what a reader of items needs
        (the Agents SDK session)."""
        return self._backend.session_payloads(session_id, types, limit, last, from_seq)

    # --- redaction -----------------------------------------------------------------------

    def redact(self, session_id: str, seq: int, paths: list | None = None, *, reason: str,
               by: str | None = None, erase: bool = True) -> Redaction:
        """Redact event ``seq`` of ``session_id``: the values at ``paths`` (each a list like
        ``["tool_calls", 0, "function", "arguments"]`` or its string form
        ``"tool_calls[0].function.arguments"``; None: every top-level key) become the string
        ``"[redacted: REASON]"``, and a ``redaction`` event appended to the session records
        which seq and paths, why (``reason``), by whom (``by``; default the OS user, and on
        PostgreSQL the database role too) and what
        keeps the rest provable (docs/redaction.md). Both in one transaction; then the old
        bytes are erased from the database's storage where the backend can
        (:attr:`Redaction.erasure` says what is left when it cannot).

        With ``erase=False`` nothing is erased: :attr:`Redaction.erasure` is
        :data:`eventstore.log.redaction.NOT_ERASED`, and the caller calls
        :meth:`erase_redacted` once after its redactions (an erasure rewrites the table on
        PostgreSQL and checkpoints the WAL on SQLite: once for many redactions, not per event).

        A path an earlier redaction of the event already covers is left as it is
        (:attr:`Redaction.already` lists it); when every path is, or when nothing would
        change (each value already reads as this marker), the redaction is refused.

        Raises :class:`SessionNotFound`, :class:`InvalidEvent` (no such path, a bad reason or
        path, every path already redacted, naming session and seq), :class:`ConflictError`
        (no event at ``seq``, or it changed meanwhile), :class:`DatabaseError` (a backend
        that cannot redact, a read-only store, a database that stayed busy: naming session
        and seq)."""
        from eventstore.backends.capabilities import AuditReads, Redactor
        from eventstore.errors import ConflictError
        from eventstore.log import redaction as _r
        from eventstore.log.commit import commit_json

        where = f"session {session_id!r}, seq {seq}"
        _r.check_reason(reason, where)
        redactor = self.capability(Redactor)
        if by is None:
            role = redactor.actor()
            by = _os_user() if role is None else f"database role {role} (OS user {_os_user()})"
        if not isinstance(by, str) or not by:
            raise InvalidEvent(f"by must be a non-empty string, not {by!r}")
        if type(seq) is not int or seq < 0:
            raise InvalidEvent(f"session {session_id!r}: seq must be an integer >= 0, not {seq!r}")
        if self.session_meta_json(session_id) is None:
            raise SessionNotFound(session_id)
        target, earlier = None, []
        for row in self.capability(AuditReads).verify_rows(session_id):
            if row[0] == seq:
                target = row
            elif row[0] > seq and row[2] == _r.REDACTION and isinstance(row[4], str):
                try:
                    rec = loads(row[4])
                except ValueError:
                    continue
                if rec.get(_r.TARGET_SEQ) == seq:
                    earlier.append(rec)
        if target is None:
            raise ConflictError(session_id, seq, "no such event")
        _seq, _position, type_, _ts, payload_text, stored_hash, salt = target
        if type_ == _r.REDACTION:
            raise InvalidEvent(f"session {session_id!r}, seq {seq}: a redaction event is the proof of another "
                               f"event's redaction and cannot be redacted itself")
        payload = loads(payload_text)
        done = [p for rec in earlier if isinstance(rec.get("paths"), list) for p in rec["paths"]]
        kept, new_payload, already = _r.redacted_payload(session_id, seq, payload, paths, reason, done)
        record, new_salt = _r.redaction_record(seq, kept, reason, by, stored_hash, payload,
                                               None if salt is None else bytes(salt), earlier)
        record_json = dumps(record)
        rsalt = _commit.new_salts(1)[0]
        ts = time.time()
        try:
            rseq = redactor.redact_event(session_id, seq, stored_hash, dumps(new_payload), new_salt, ts, record_json,
                                         rsalt, commit_json(rsalt, loads(record_json)))
        except DatabaseError as e:  # (busy, read-only, no privilege: the backend's words, which name no event)
            if type(e) is not DatabaseError:
                raise
            raise DatabaseError(f"{where}: {e}") from None
        erasure = self.erase_redacted() if erase else _r.NOT_ERASED
        return _r.Redaction(session_id, seq, rseq, kept, reason, by, erasure, already)

    def erase_redacted(self) -> str | None:
        """Erase from the database's storage the old bytes that earlier redactions left
        (those made with ``redact(..., erase=False)``; harmless when there are none): SQLite
        merges the search index and empties the WAL, PostgreSQL rewrites the tables
        (docs/redaction.md, docs/redaction-postgres.md). Returns None when done, else a
        sentence saying what is left and how to finish it (another connection holds the WAL,
        the role may not VACUUM, the lock was not free in time); an erasure that fails (a
        database that stayed busy, a disk error) is such a sentence too, since the
        redactions before it are committed whatever it does.

        Raises :class:`DatabaseError` for a backend that cannot redact."""
        from eventstore.backends.capabilities import Redactor

        redactor = self.capability(Redactor)
        try:
            return redactor.erase_old_versions()
        except DatabaseError as e:
            return f"the old bytes could not be erased: {e}"


    # --- JSONL ---------------------------------------------------------------------------

    def import_jsonl(self, source: str | os.PathLike | IO[bytes], *, name: str | None = None,
                     session_id: str | None = None, append: bool = False, salvage: bool = False,
                     created_at: float | None = None) -> str:
        """Import one JSONL session file atomically and return its session id.

        ``source`` is a path or a binary file object (``name`` is what errors call it).
        The format is the reference's (``shared/spec/session-log.md``); ``session_id`` is
        the id of a file that has no ``session/meta`` line. A session already stored with
        the same events is left as it is; ``append`` adds the file's events past a stored
        session's head; ``salvage`` keeps the valid prefix of a file with a bad tail.
        ``created_at`` is the creation time of a session the import creates (default: now;
        the file carries none). For what happened (skipped, appended, dropped lines), call
        :func:`eventstore.io.bulk.import_jsonl`, which this wraps and which documents the rules.

        Raises :class:`InvalidJSONL` (``FILE:LINE: reason``; nothing of the file is
        stored), :class:`ImportConflict` (stored with other events, or continued without
        ``append``), :class:`InvalidEvent`, :class:`DatabaseError`, ``OSError``.
        """
        from eventstore.io.bulk import import_jsonl  # (imported when used: eventstore's start-up)

        return import_jsonl(self, source, name=name, session_id=session_id, append=append,
                            salvage=salvage, created_at=created_at).session_id

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        """``(type, seq, ts, payload JSON text)`` of the session's events past ``after_seq``,
        at most ``limit`` and, past the first, about ``max_bytes`` of payload (a page for
        :func:`eventstore.log.line.row_pages`)."""
        return self._backend.export_rows(session_id, after_seq, limit, max_bytes)

    def export_chunks(self, session_id: str) -> Iterator[tuple[list, int, int]]:
        """The session's JSONL, ``(pieces, bytes, events)`` at a time (see
        :meth:`eventstore.backends.base.Backend.export_chunks`). Raises
        :class:`SessionNotFound`; a payload export cannot write raises
        :class:`DatabaseError` as its page is read."""
        meta_json = self.session_meta_json(session_id)
        if meta_json is None:
            raise SessionNotFound(session_id)
        return self._backend.export_chunks(session_id, meta_json)

    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], _C]) -> _C:
        """For the importer (:mod:`eventstore.io.bulk`): ``body(tx)`` inside one write
        transaction of the import of ``session_id``, committed when it returns."""
        return self._backend.import_transaction(session_id, body)

    def import_lock(self, session_id: str) -> ImportLock | None:
        """For the importer: the import lock of ``session_id``, or None when another
        importer holds it (see :meth:`eventstore.backends.base.Backend.import_lock`)."""
        return self._backend.import_lock(session_id)

    def export_jsonl(self, session_id: str, dest: str | os.PathLike | IO) -> int:
        """Write one session as JSONL, byte-identical to what the reference ``save()``
        writes, and return the number of events written.

        ``dest`` is a path (written to a temporary file, then renamed into place) or a file
        object (binary, or text). Streams: memory does not grow with the session.
        Raises :class:`SessionNotFound`, ``OSError`` (``IsADirectoryError`` for a folder, or a
        path ending in a slash).
        """
        from eventstore.io.export import export_session  # (imported when used: eventstore's start-up)

        return export_session(self, session_id, dest)
