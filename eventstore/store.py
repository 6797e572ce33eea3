"""The store: sessions, the append path, reads, and JSONL import/export.

The hot paths (append, reads, import, export) run plain SQL on one held ``sqlite3``
connection, inside transactions that start with ``BEGIN IMMEDIATE``; SQLAlchemy sets the
connection up and Alembic migrates the file (see :mod:`eventstore.engine`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import IO, Any

from . import engine as _engine
from . import follow as _follow
from . import projection
from .checkpoint import Checkpointer, checkpoint
from .errors import (
    AppendOnlyViolation,
    DatabaseError,
    IdempotencyConflict,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from .jsonl import (
    chain_hash,
    chain_rows,
    dumps,
    encodable,
    event_line,
    genesis_hash,
    good_event_id,
    loads,
    payload_json,
    payload_json_stored,
    payload_jsons,
)
from .writelock import open_write_lock

__all__ = ["EventStore", "Session", "Event", "SessionInfo"]

# Appends read the session's head (next seq, next position, last hash) and insert with
# plain VALUES, inside one BEGIN IMMEDIATE transaction; the guard trigger re-checks seq and
# position. (An INSERT ... SELECT ... RETURNING that computed all three in SQL cost a third
# more instructions: temporary b-trees and a Python SQL-function call per append.)
_INSERT = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"
_HEAD = """SELECT coalesce(max(seq) + 1, 0), (SELECT coalesce(max(position), 0) + 1 FROM events),
                  (SELECT hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)
           FROM events WHERE session_id = ?1"""
_BY_EVENT_ID = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND event_id = ?"
_NEXT_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?"
_PAGE = 1000  # events per read query: reads never hold a transaction across pages


@dataclass(frozen=True, slots=True)
class Event:
    """One stored event.

    ``seq`` is its position in the session (0, 1, 2, ...), ``position`` its global position
    across all sessions (grows in commit order), ``ts`` seconds since the epoch, ``payload``
    every key besides ``type``, ``seq`` and ``ts``.
    """

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


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A row of the session registry: ``events`` is the count, ``last_ts`` None when empty."""

    id: str
    created_at: float
    events: int
    last_ts: float | None


def _check_type(type_: Any) -> None:
    if type(type_) is not str or not type_:
        if isinstance(type_, str) and type_:  # a StrEnum member, say: stored types are plain text
            raise InvalidEvent(f"event type must be a plain str, not a {type(type_).__name__} "
                               f"(a str subclass): pass str.__str__ of it, {str.__str__(type_)!r}")
        raise InvalidEvent(f"event type must be a non-empty string, not {type_!r}")
    if type_ == "session/meta":
        raise InvalidEvent("event type 'session/meta' is reserved for the first line of a JSONL file")
    if not type_.isascii():
        try:
            type_.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidEvent(f"event type {type_!r} holds a lone UTF-16 surrogate") from None


def _check_ts(ts: Any) -> float:
    try:  # an int past a double's range raises OverflowError in float() and isfinite()
        ok = not isinstance(ts, bool) and isinstance(ts, (int, float)) and math.isfinite(ts)
    except OverflowError:
        ok = False
    if not ok:
        raise InvalidEvent(f"ts must be a finite number of seconds since the epoch, not {ts!r:.80}")
    return float(ts) + 0.0  # -0.0 is stored (and read back) as 0.0


def _check_seq(seq: Any, what: str = "expected_seq") -> int:
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidEvent(f"{what} must be an integer >= 0, not {seq!r}")
    return seq


def _check_session_id(session_id: Any) -> str:
    if type(session_id) is not str or not session_id:
        raise InvalidEvent(f"session id must be a non-empty string, not {session_id!r}")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEvent(f"session id {session_id!r} holds a lone UTF-16 surrogate") from None
    return session_id


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
    a field at a time over the whole batch: a C loop per field (``map`` over the slot's
    setter) instead of a Python call per event."""
    n = len(types)
    events = list(map(object.__new__, repeat(Event, n)))
    for setter, values in zip(_set, (repeat(session_id, n), range(seq0, seq0 + n), range(position0, position0 + n),
                                     types, tss, payloads), strict=True):
        deque(map(setter, events, values), 0)
    return events


def _event_from_row(row: tuple) -> Event:
    position, session_id, seq, type_, ts, payload = row
    return _new_event(session_id, seq, position, type_, ts, json.loads(payload))


# append_many inserts up to _GROUP rows per statement (sizes 1, 2, 4, ..., _GROUP: a few
# statements to prepare once, whatever the batch sizes). SQLite's per-statement work (a
# statement journal for the guard trigger's ABORT, the program's setup) is then paid once
# per group instead of once per event. Position and seq are the first row's plus a
# constant; each row binds its type, ts, payload and hash.
_GROUP = 64
_INSERT_ROWS = {
    n: "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
       + ",".join(f"(?1 + {k}, ?2, ?3 + {k}, ?{4 * k + 4}, ?{4 * k + 5}, ?{4 * k + 6}, ?{4 * k + 7})"
                  for k in range(n))
    for n in (1 << i for i in range(_GROUP.bit_length()))
}


class _StaleHead(Exception):
    """An append's first statement was refused: maybe because the cached head was stale
    (see :meth:`Session._at_head`)."""

    def __init__(self, error: sqlite3.IntegrityError):
        self.error = error


def _insert_rows(cur: sqlite3.Cursor, sid: str, seq0: int, pos0: int, rows: list) -> None:
    """Insert ``rows`` (the flat ``[type, ts, payload_json, hash, ...]`` of
    :func:`eventstore.jsonl.chain_rows`) at seqs ``seq0...`` and positions ``pos0...``.
    Raises :class:`_StaleHead` when the first statement is refused (nothing of the batch is
    stored then), sqlite3 errors for any later one."""
    done = 0
    total = len(rows) // 4
    while done < total:
        n = min(_GROUP, 1 << ((total - done).bit_length() - 1))
        params = [pos0 + done, sid, seq0 + done]
        params += rows[4 * done:4 * (done + n)]
        try:
            cur.execute(_INSERT_ROWS[n], params)
        except sqlite3.IntegrityError as e:
            if done == 0:
                raise _StaleHead(e) from None
            raise
        done += n


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
    caller encodes the payloads as one batch (:func:`eventstore.jsonl.payload_jsons`); one
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
        store = self._store
        sid = self.id

        def insert(cur: sqlite3.Cursor, seq: int, position: int, prev: str) -> str:
            hash_ = chain_hash(prev, event_line(type, seq, ts, pj))
            try:
                cur.execute(_INSERT, (position, sid, seq, type, ts, pj, hash_))
            except sqlite3.IntegrityError as e:
                raise _StaleHead(e) from None
            return hash_

        try:
            hash_, seq, position, cached = self._at_head(expected_seq, insert)
        except (SeqConflict, AppendOnlyViolation):
            # A retry of an append that did land (its answer was lost) meets its own event.
            key = (payload or {}).get("event_id")
            stored = None if key is None else self._stored_for_key(key, type, pj)
            if stored is None:
                raise
            return stored
        store._remember(sid, seq + 1, position + 1, hash_, optimistic=cached)
        store._wrote(position, position, len(pj))
        return _new_event(sid, seq, position, type, ts, stored)

    def _stored_for_key(self, key: Any, type_: str, pj: str) -> Event | None:
        """The event stored under idempotency key ``key`` (None if there is none).
        Raises :class:`IdempotencyConflict` if it holds another type or payload."""
        rows = self._store._read(_BY_EVENT_ID, (self.id, key))
        if not rows:
            return None
        seq, position, stored_type, ts, stored_pj = rows[0]
        if stored_type != type_ or stored_pj != pj:
            raise IdempotencyConflict(self.id, key, seq)
        return Event(self.id, seq, position, stored_type, ts, json.loads(stored_pj))

    def append_many(self, events: Iterable[tuple], *, expected_seq: int | None = None) -> list[Event]:
        """Append several events atomically (all or none), with consecutive seqs.

        ``events`` holds ``(type, payload)`` or ``(type, payload, ts)`` tuples. With
        ``expected_seq``, the first event must get that seq. Returns the events as stored
        (as :meth:`append` does: each payload is its stored JSON read back). Raises what
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
        store = self._store
        sid = self.id

        def insert(cur: sqlite3.Cursor, seq0: int, pos0: int, prev: str) -> str:
            rows = chain_rows(prev, seq0, types, tss, pjs)
            _insert_rows(cur, sid, seq0, pos0, rows)
            return rows[-1]

        try:
            last_hash, seq0, pos0, cached = self._at_head(expected_seq, insert)
        except (SeqConflict, AppendOnlyViolation):
            found = self._stored_batch(list(zip(types, tss, pjs, strict=True)), stored)
            if found is None:
                raise
            return found
        n = len(pjs)
        store._remember(sid, seq0 + n, pos0 + n, last_hash, optimistic=cached)
        store._wrote(pos0, pos0 + n - 1, sum(map(len, pjs)))
        return _new_events(sid, seq0, pos0, types, tss, stored)

    def _at_head(self, expected_seq: int | None, insert: Callable) -> tuple:
        """In one write transaction, call ``insert(cursor, seq, position, prev_hash)`` with the
        session's head: the next seq, the next global position and the last hash (the
        genesis hash for an empty session). Returns ``(insert's result, seq, position,
        whether the head came from the cache)``.

        The head comes from the store's cache when it has one (see
        :meth:`EventStore._cached_head`). ``insert`` raises :class:`_StaleHead` when its
        first statement is refused; if the guard trigger refused a cached seq or position,
        the head is read from the database and ``insert`` runs again, in the same
        transaction. Raises :class:`SeqConflict` when ``expected_seq`` is not the stored
        head, and the store's translation of any other refusal.
        """
        store = self._store
        sid = self.id

        def at_head(cur: sqlite3.Cursor) -> tuple:
            head = store._cached_head(sid)
            while True:
                seq, position, prev = head if head is not None else cur.execute(_HEAD, (sid,)).fetchone()
                if expected_seq is not None and expected_seq != seq:
                    if head is None:
                        raise SeqConflict(sid, expected_seq, seq)
                    head = None  # the cache may be behind: read the head
                    continue
                try:
                    result = insert(cur, seq, position, genesis_hash(sid) if prev is None else prev)
                except _StaleHead as e:
                    if head is None or not store._head_was_stale(e.error):
                        raise e.error from None
                    head = None  # another writer appended since: read the head
                    continue
                return result, seq, position, head is not None

        return store._transact(at_head, sid, expected_seq)

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
        return self._store._read(_NEXT_SEQ, (self.id,))[0][0]

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
        if last is not None:
            return iter(self._last_events(_check_seq(last, "last"), after_seq, types))
        return self._events(after_seq, types)

    def _last_events(self, n: int, after_seq: int | None, types: Iterable[str] | str | None) -> list[Event]:
        if isinstance(types, str):
            types = [types]
        types = list(types) if types is not None else None
        if after_seq is not None and (isinstance(after_seq, bool) or not isinstance(after_seq, int)):
            raise InvalidEvent(f"after_seq must be an integer, not {after_seq!r}")
        last = -1 if after_seq is None else max(-1, min(after_seq, _follow.MAX_CURSOR))
        sql = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND seq > ?"
        if types:
            sql += " AND type IN (" + ",".join("?" * len(types)) + ")"
        rows = self._store._read(sql + " ORDER BY seq DESC LIMIT ?", (self.id, last, *(types or ()), n))
        loads = projection.loads
        return [_new_event(self.id, seq, position, type_, ts, loads(payload))
                for seq, position, type_, ts, payload in reversed(rows)]

    def _events(self, after_seq: int | None, types: Iterable[str] | str | None) -> Iterator[Event]:
        if after_seq is not None and (isinstance(after_seq, bool) or not isinstance(after_seq, int)):
            raise InvalidEvent(f"after_seq must be an integer, not {after_seq!r}")
        if after_seq is not None:  # past what SQLite can bind there is nothing, as at its limit
            after_seq = max(-1, min(after_seq, _follow.MAX_CURSOR))
        if isinstance(types, str):
            types = [types]
        types = list(types) if types is not None else None
        sql = "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? AND seq > ?"
        if types:
            sql += " AND type IN (" + ",".join("?" * len(types)) + ")"
        sql += f" ORDER BY seq LIMIT {_PAGE}"
        last = -1 if after_seq is None else after_seq
        sid = self.id
        loads = projection.loads  # json.loads's result, through orjson where that gives the same
        while True:
            rows = self._store._read(sql, (sid, last, *(types or ())))
            for seq, position, type_, ts, payload in rows:
                yield _new_event(sid, seq, position, type_, ts, loads(payload))
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    def follow(self, after_seq: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> Iterator[Event]:
        """Yield the session's events with ``seq > after_seq`` (all when None) in seq order,
        then each new one as it is committed, by any process: each exactly once, in order.

        Waits ``poll_interval`` seconds between looks when nothing changed; stops after
        ``idle_timeout`` seconds without a new event (None: follows until the caller stops
        iterating). Holds no read transaction between looks (see :mod:`eventstore.follow`).
        Raises :class:`DatabaseError` when the database cannot be read.
        """
        after = -1 if after_seq is None else _check_seq(after_seq, "after_seq")
        return _follow.follow_rows(self._store, _follow.SESSION_SQL, (self.id,), after, 2,
                                   poll_interval=poll_interval, idle_timeout=idle_timeout,
                                   make_event=_event_from_row)

    def derive_messages(self) -> list[dict]:
        """The projection: the chat ``messages`` array (list of dicts) for this session,
        read from the ``messages`` view (see :mod:`eventstore.projection`)."""
        with self._store._lock:
            return projection.derive_messages(self._store._connection(), self.id)

    def messages_json(self) -> str:
        """The projection as JSON array text, as ``JSON.stringify`` would write it."""
        with self._store._lock:
            return projection.messages_json(self._store._connection(), self.id)

    def context_at(self, seq: int | None = None) -> dict:
        """What the model was sent just before the event at ``seq`` (at the head when None):
        ``{"messages": [...], "tools": [...]}`` in the chat-completions request shape, the
        instructions as a leading system message, retractions honoured. See
        :func:`eventstore.context.context_at`; raises :class:`InvalidEvent`."""
        from .context import context_at

        return context_at(self, seq)

    def repair(self) -> list[Event]:
        """Append what an interrupted session needs for its projection to be valid for a
        chat API, and return the appended events (``[]`` when it needs nothing).

        Appends, in one atomic :meth:`append_many`: a ``tool/result`` saying the call was
        interrupted for each tool call still waiting for its result at the end of the log,
        a ``step/end`` for an open step, a ``turn/end`` for an open turn; each payload has
        ``"repair": true``. History is never changed. Run it when the agent that owns the
        session is not running. See :func:`eventstore.audit.repair`; raises
        :class:`SeqConflict` if other writers keep appending.
        """
        from .audit import repair

        return repair(self)


class EventStore:
    """An append-only store of agent sessions in one SQLite database.

    Open with :meth:`open`. One ``EventStore`` holds one connection; it may be shared by
    threads (calls are serialized). Several processes may open the same file at once (see
    docs/concurrency.md). After ``os.fork()`` the child does not share the parent's
    connection: its first call opens a connection of its own.
    """

    def __init__(self, engine, busy_timeout: float, write_queue: bool = True):
        self.engine = engine
        self.busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._forked = False
        self._fairy = None
        self._wlock = None
        self._checkpointer: Checkpointer | None = None
        # The head of each session this store appended to: {session id: (next seq, last
        # hash)}, and the next position; see _cached_head.
        self._heads: dict[str, tuple[int, str]] = {}
        self._next_position: int | None = None
        self._stale_backoff = 0  # appends that read the head after the cache was found stale
        self._stale_skip = 0
        database = engine.url.database
        self._file = None if database in (None, "", ":memory:") else database
        self._write_queue = write_queue
        self._connect()
        _live_stores.add(self)

    def _connect(self) -> None:
        try:
            self._fairy = self.engine.raw_connection()
        except Exception as e:  # pragma: no cover - reported with the file name
            raise DatabaseError(f"cannot open {self.engine.url.database}: {e}") from None
        self._conn: sqlite3.Connection = self._fairy.driver_connection
        self._cur = self._conn.cursor()
        self._unchecked_frames = 0  # WAL frames (estimated) this store wrote since its last checkpoint
        if self._write_queue and self._file is not None:
            self._wlock = open_write_lock(self._file)
            if self._wlock is not None:  # a store dropped without close() frees its lock file
                weakref.finalize(self, self._wlock.close)
        if self._wlock is not None:
            # SQLite's automatic checkpoint runs inside COMMIT, so it would keep the write
            # lock held (and every queued writer waiting) through its fsyncs; the store
            # checkpoints on a thread of its own instead (see _wrote).
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            # The thread must not keep the store alive: it gets a plain function, and a
            # store dropped without close() stops it.
            self._checkpointer = Checkpointer(
                self._file, functools.partial(_checkpoint_connection, self._file, self.busy_timeout),
                self.busy_timeout)
            weakref.finalize(self, self._checkpointer.close, False)

    def _reopen_after_fork(self) -> None:
        """In a forked child: leave the parent's connection alone (closing it here could
        disturb the parent's locks and WAL) and open one for this process."""
        _inherited.append((self._fairy, self._conn, self._cur))
        self._fairy = None
        self._forked = False
        self.engine.dispose(close=False)
        self._connect()

    def _connection(self) -> sqlite3.Connection:
        """The connection of this process (reopened after a fork). Call under ``_lock``."""
        if self._forked:
            self._reopen_after_fork()
        if self._fairy is None:
            raise DatabaseError("the store is closed")
        return self._conn

    @classmethod
    def open(cls, target: str | os.PathLike = "eventstore.db", *,
             busy_timeout: float = _engine.DEFAULT_BUSY_TIMEOUT, durability: str = "normal",
             write_queue: bool = True, readonly: bool = False) -> EventStore:
        """Open (creating and migrating if needed) the database at ``target``.

        ``target`` is a file path or an SQLAlchemy ``sqlite://`` URL; ``busy_timeout`` is how
        long (seconds) a write waits for another writer; ``durability`` is ``"normal"``
        (WAL + ``synchronous=NORMAL``: an acknowledged append survives a process crash) or
        ``"full"`` (also survives power loss). With ``write_queue`` (the default) writers
        wait for each other on a lock file beside the database (``FILE-lock``, see
        :mod:`eventstore.writelock`) instead of in SQLite's sleep-and-retry busy handler.
        With ``readonly``, the file must exist at the latest schema (or at one that reads the
        same, :data:`eventstore.schema.READ_COMPATIBLE_REVISIONS`) and is opened read-only
        (for auditors, or a file the user may only read): appends raise :class:`DatabaseError`.
        Raises :class:`DatabaseError`.
        """
        if _forked_mid_write and not readonly:
            path = _engine.database_url(target).removeprefix("sqlite:///")
            if path in _forked_mid_write:
                raise _forked_mid_write_error(path)
        try:
            engine = _engine.make_engine(target, busy_timeout=busy_timeout, durability=durability,
                                         readonly=readonly)
            if readonly:
                _engine.check_revision(engine)
                write_queue = False
            else:
                _engine.upgrade(engine, busy_timeout)
        except DatabaseError:
            raise
        except Exception as e:
            orig = e if isinstance(e, sqlite3.DatabaseError) else getattr(e, "orig", None)
            if not isinstance(orig, sqlite3.DatabaseError):
                raise
            if "locked" in str(orig) or "busy" in str(orig):  # another process creating or migrating it
                raise DatabaseError(f"cannot open {os.fspath(target)}: database is busy: another process held it "
                                    f"longer than the busy timeout ({busy_timeout:g} s)") from None
            raise DatabaseError(f"cannot open {os.fspath(target)}: {orig}") from None
        return cls(engine, busy_timeout, write_queue)

    def close(self) -> None:
        """Close the connection. The store cannot be used afterwards."""
        with self._lock:
            if self._forked:  # the connection is the parent's: leave it open
                _inherited.append((self._fairy, self._conn, self._cur))
                self._fairy = None
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
            if self._fairy is not None and self._wlock is not None and self._unchecked_frames:
                checkpoint(self._conn, self._wlock, self.busy_timeout)  # what this store wrote since
            if self._wlock is not None:
                self._wlock.close()
                self._wlock = None
            if self._fairy is not None:
                self._cur.close()
                self._fairy.close()
                self._fairy = None
                self.engine.dispose()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- transactions ------------------------------------------------------------------

    def _cached_head(self, session_id: str) -> tuple[int, int, str] | None:
        """``(next seq, next position, last hash)`` of ``session_id`` as this store left it
        after its own last append, or None (unknown, or backing off). Call in a write
        transaction.

        Reading the head costs a query per append; a process that appends alone can skip
        it. The cache is never trusted: the guard trigger refuses an INSERT whose seq is
        not its session's next or whose position is not above every stored one, which is
        exactly what happens when another writer appended since (to this session, or to
        any session). The caller then reads the head and tries again
        (:meth:`_head_was_stale`). A seq and position that pass both checks prove that
        nothing was appended since this store's own last event, so its hash is the last.
        Where other processes keep writing, the cache would be stale nearly every time:
        after each stale find, it sits out twice as many appends as before (up to 64).
        """
        if self._stale_skip:
            self._stale_skip -= 1
            return None
        head = self._heads.get(session_id)
        if head is None or self._next_position is None:
            return None
        return head[0], self._next_position, head[1]

    def _head_was_stale(self, e: sqlite3.IntegrityError) -> bool:
        """Whether ``e`` is the guard trigger refusing a seq or position from the cache."""
        message = str(e)
        if "seq is not the next seq" in message or "position must be" in message:
            self._stale_backoff = min(64, 2 * self._stale_backoff or 1)
            self._stale_skip = self._stale_backoff
            return True
        return False

    def _remember(self, session_id: str, next_seq: int, next_position: int, last_hash: str,
                  optimistic: bool = False) -> None:
        """After a commit: the session's new head, for :meth:`_cached_head`."""
        if len(self._heads) >= 4096 and session_id not in self._heads:
            self._heads.clear()
        self._heads[session_id] = (next_seq, last_hash)
        self._next_position = next_position
        if optimistic:
            self._stale_backoff = 0

    def _transact(self, body: Callable[[sqlite3.Cursor], Any], session_id: str | None = None,
                  expected_seq: int | None = None) -> Any:
        """Call ``body(cursor)`` in a write transaction and return what it returns:
        ``BEGIN IMMEDIATE`` ... ``COMMIT`` under the store's thread lock and the write
        queue; rolled back on any error, with sqlite3 errors translated to the store's
        exceptions (``session_id`` and ``expected_seq`` say what about).

        A function rather than a ``@contextmanager`` generator, which cost three times as
        much per append. Written so that an interrupt (Ctrl-C) landing anywhere leaves
        nothing held: the thread lock is a ``with``; the write queue's lock and ``BEGIN``
        come inside the ``try`` whose cleanup rolls back whatever transaction is open and
        releases the queue's lock even when the interrupt came between taking it and
        noting it."""
        with self._lock:
            if self._forked or self._fairy is None:
                self._connection()  # reopened after a fork
            if self._file in _forked_mid_write:
                raise _forked_mid_write_error(self._file)
            wlock = self._wlock
            try:
                if wlock is not None:
                    try:
                        wlock.acquire(self.busy_timeout)
                    except DatabaseError:
                        wlock = None  # not ours to release
                        raise
                cur = self._cur
                cur.execute("BEGIN IMMEDIATE")
                result = body(cur)
                cur.execute("COMMIT")
                return result
            except BaseException as e:
                error = self._rolled_back(e, session_id, expected_seq)
                if error is None:
                    raise
                raise error from None
            finally:
                if wlock is not None:
                    wlock.release()

    def _rolled_back(self, error: BaseException, session_id: str | None,
                     expected_seq: int | None) -> Exception | None:
        """After ``error`` in a write transaction (in ``BEGIN``, the block or ``COMMIT``):
        roll back what is open, and return the store's exception for ``error``, or None to
        raise it as it is."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")
        if isinstance(error, sqlite3.Error):
            return self._translate(error, session_id, expected_seq)
        if isinstance(error, UnicodeEncodeError):
            return InvalidEvent(f"text holds a lone UTF-16 surrogate outside a payload: {error.reason}")
        return None

    def _wrote(self, first_position: int, last_position: int, payload_bytes: int) -> None:
        """After committing the events at positions ``first_position..last_position``
        (``payload_bytes`` of payload): ask the background checkpointer for a checkpoint of
        the WAL when one is due (see :mod:`eventstore.checkpoint`).

        Due when this store's commits since its last checkpoint wrote about
        ``CHECKPOINT_FRAMES`` WAL frames (:func:`eventstore.engine.wal_frames` estimates a
        commit's), SQLite's own cadence: about every 400 single appends, every 95 batches
        of 100 small events. (A count of events checkpointed batches 30 times as often for
        the same WAL growth: each checkpoint copies the same last pages again and costs two
        fsyncs.) Only with the write queue: otherwise SQLite checkpoints by itself.
        """
        if self._wlock is None:
            return
        self._unchecked_frames += _engine.wal_frames(last_position - first_position + 1, payload_bytes)
        if self._unchecked_frames >= _engine.CHECKPOINT_FRAMES:
            self._unchecked_frames = 0
            self._checkpointer.request()

    def _read(self, sql: str, params: tuple = ()) -> list:
        with self._lock:
            if self._forked or self._fairy is None:
                self._connection()
            try:
                return self._cur.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise self._translate(e) from None
            except UnicodeEncodeError:
                raise InvalidEvent("text holds a lone UTF-16 surrogate, which no stored value can") from None

    def _translate(self, e: sqlite3.Error, session_id: str | None = None,
                   expected_seq: int | None = None) -> Exception:
        msg = str(e)
        if isinstance(e, sqlite3.IntegrityError):
            if "unknown session" in msg and session_id is not None:
                return SessionNotFound(session_id)
            if "not the next seq" in msg and expected_seq is not None and session_id is not None:
                actual = self._cur.execute(_NEXT_SEQ, (session_id,)).fetchone()[0]
                return SeqConflict(session_id, expected_seq, actual)
            if "session already exists" in msg and session_id is not None:
                return SessionExists(session_id)
            return AppendOnlyViolation(msg)
        if "readonly" in msg:
            return DatabaseError(f"{self._file or 'the database'} is open read-only: {msg}")
        if "locked" in msg or "busy" in msg:
            return DatabaseError(f"database is busy: another writer held it longer than the busy "
                                 f"timeout ({self.busy_timeout:g} s)")
        return DatabaseError(msg)

    # --- live tailing --------------------------------------------------------------------

    def follow(self, after_position: int | None = None, *, poll_interval: float = _follow.DEFAULT_POLL_INTERVAL,
               idle_timeout: float | None = None) -> Iterator[Event]:
        """Yield every event with ``position > after_position`` (all when None), of every
        session, in position (= commit) order, then each new one as any process commits it:
        each exactly once, in order.

        Waits ``poll_interval`` seconds between looks when nothing changed; stops after
        ``idle_timeout`` seconds without a new event (None: follows until the caller stops
        iterating). Holds no read transaction between looks (see :mod:`eventstore.follow`).
        Raises :class:`DatabaseError` when the database cannot be read.
        """
        after = 0 if after_position is None else _check_seq(after_position, "after_position")
        return _follow.follow_rows(self, _follow.STORE_SQL, (), after, 0, poll_interval=poll_interval,
                                   idle_timeout=idle_timeout, make_event=_event_from_row)

    def last_position(self) -> int:
        """The global position of the newest event (0 when the store is empty): pass it to
        :meth:`follow` to see only events committed from now on."""
        return self._read("SELECT coalesce(max(position), 0) FROM events")[0][0]

    # --- sessions ----------------------------------------------------------------------

    def create_session(self, session_id: str | None = None, *, meta: dict | None = None) -> Session:
        """Create a session and return its handle.

        ``session_id`` defaults to 12 characters of a random UUID, like the reference
        (``5a1b896f-beb``); ``meta`` holds extra keys for the ``session/meta`` line.
        Raises :class:`SessionExists` if the id is taken, :class:`InvalidEvent` for a bad id
        or meta.
        """
        sid = str(uuid.uuid4())[:12] if session_id is None else _check_session_id(session_id)
        meta_json = "{}"
        if meta:
            if not isinstance(meta, dict) or "type" in meta or "id" in meta:
                raise InvalidEvent("meta must be a dict without the keys 'type' and 'id'")
            meta_json = dumps(meta)
        self._transact(lambda cur: cur.execute("INSERT INTO sessions (id, created_at, meta) VALUES (?, ?, ?)",
                                               (sid, time.time(), meta_json)), sid)
        return Session(self, sid)

    def session(self, session_id: str, *, create: bool = False) -> Session:
        """The handle of a stored session. Raises :class:`SessionNotFound`.

        With ``create=True``, a session that is not stored yet is created (get-or-create):
        race-free across processes, since the insert and the uniqueness check are one write
        transaction; whichever process loses the race gets the winner's session."""
        if not encodable(session_id) or not self._read("SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
            if not create:
                raise SessionNotFound(session_id)
            try:
                return self.create_session(session_id)
            except SessionExists:  # another process created it between the look and the insert
                pass
        return Session(self, session_id)

    def sessions(self) -> list[SessionInfo]:
        """The registry: every stored session, oldest first."""
        rows = self._read("""
            SELECT s.id, s.created_at,
                   coalesce((SELECT max(seq) + 1 FROM events WHERE session_id = s.id), 0),
                   (SELECT ts FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
            FROM sessions AS s ORDER BY s.created_at, s.id""")
        return [SessionInfo(*r) for r in rows]

    # --- JSONL ---------------------------------------------------------------------------

    def import_jsonl(self, source: str | os.PathLike | IO[bytes], *, name: str | None = None,
                     session_id: str | None = None, append: bool = False, salvage: bool = False) -> str:
        """Import one JSONL session file atomically and return its session id.

        ``source`` is a path or a binary file object (``name`` is what errors call it).
        The format is the reference's (``shared/spec/session-log.md``); ``session_id`` is
        the id of a file that has no ``session/meta`` line. A session already stored with
        the same events is left as it is; ``append`` adds the file's events past a stored
        session's head; ``salvage`` keeps the valid prefix of a file with a bad tail.
        For what happened (skipped, appended, dropped lines), call
        :func:`eventstore.bulk.import_jsonl`, which this wraps and which documents the rules.

        Raises :class:`InvalidJSONL` (``FILE:LINE: reason``; nothing of the file is
        stored), :class:`ImportConflict` (stored with other events, or continued without
        ``append``), :class:`InvalidEvent`, :class:`DatabaseError`, ``OSError``.
        """
        from .bulk import import_jsonl

        return import_jsonl(self, source, name=name, session_id=session_id, append=append,
                            salvage=salvage).session_id

    def export_jsonl(self, session_id: str, dest: str | os.PathLike | IO) -> int:
        """Write one session as JSONL, byte-identical to what the reference ``save()``
        writes, and return the number of events written.

        ``dest`` is a path (written to a temporary file, then renamed into place) or a file
        object (binary, or text). Streams: memory does not grow with the session.
        Raises :class:`SessionNotFound`, ``OSError`` (``IsADirectoryError`` for a folder, or a
        path ending in a slash).
        """
        from .bulk import export_session

        return export_session(self, session_id, dest)


def _checkpoint_connection(database: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection for a store's checkpointer (opened on its thread)."""
    conn = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    _engine.configure_connection(conn, busy_timeout, "normal")
    return conn


# Stores alive in this process, and connections inherited from a parent process that must
# stay open (unused) in a forked child: see EventStore._reopen_after_fork.
_live_stores: weakref.WeakSet[EventStore] = weakref.WeakSet()
_inherited: list = []


# Database files that a thread of the parent was writing to (in a transaction) when this
# process was forked from it. SQLite keeps its file locks per process, in memory shared by
# all connections to a file; the child inherits that memory with the parent's write lock
# counted as held, though the child holds no lock: no connection of the child can ever
# write to the file (it would wait for its busy timeout, every time). Writes to them are
# refused at once instead.
_forked_mid_write: set[str] = set()


def _forked_mid_write_error(path: str) -> DatabaseError:
    return DatabaseError(
        f"{path}: this process was forked while another thread of its parent was writing to this "
        "database; SQLite's locks in this process still count that write, so no connection of this "
        "process can write to the file. Fork before starting threads that write, or write from a "
        "process started without fork (multiprocessing's 'spawn' or 'forkserver')")


def _after_fork_in_child() -> None:
    for store in list(_live_stores):
        if store._fairy is not None and store._file is not None:
            try:
                if store._conn.in_transaction:  # only reads the inherited handle's state
                    _forked_mid_write.add(store._file)
            except Exception:  # pragma: no cover - a closed handle
                pass
        store._lock = threading.RLock()  # another thread may have held it at the fork
        if store._fairy is not None:
            store._forked = True
        if store._wlock is not None:
            store._wlock.forget()
            store._wlock = None
        if store._checkpointer is not None:
            store._checkpointer.forget()
            store._checkpointer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
