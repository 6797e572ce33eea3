"""A backend of dicts and lists in memory, implementing the core contract only
(:class:`eventstore.backends.base.Backend`): no capability of its own, so search, audit,
the viewer's index and the log's views go through :mod:`eventstore.backends.fallbacks`.
It exists to prove that a new backend works with the core alone (tests/backends/test_contract.py).

One process, one store: every call takes one lock; an import transaction works on the
live structures and puts back a copy taken at its start when its body raises.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from eventstore.backends import base
from eventstore.backends.base import Backend, Follower, ImportLock, ImportTransaction, Refusal
from eventstore.errors import AppendOnlyViolation, SeqConflict, SessionExists, SessionNotFound
from eventstore.log.chain import chain_rows, genesis_hash
from eventstore.log.codec import dumps
from eventstore.log.context import chat_message

_MESSAGE_TYPES = ("user/message", "assistant/message", "tool/result")
_owners = itertools.count(1)


def _event_id(payload: str) -> str | None:
    key = json.loads(payload).get("event_id") if '"event_id"' in payload else None
    return key if isinstance(key, str) else None


class DictBackend(Backend):
    """The core contract over dicts (see the module docstring)."""

    name = "dict"

    def __init__(self, display: str):
        self.display = display
        self._cond = threading.Condition(threading.RLock())
        self._version = 0  # grows at each commit (the followers wait on it)
        self._state: dict[str, Any] = {
            "sessions": {},  # id -> (created_at, meta_json), in creation order
            "events": {},  # id -> [(seq, position, type, ts, payload, hash), ...]
            "positions": [],  # (position, session_id, seq) in position order
            "importing": {},  # id -> (first_position, owner, started_at)
        }
        self._locks: dict[str, str] = {}  # session id -> owner of its import lock
        self._closed = False

    @classmethod
    def open(cls, url: str, *, busy_timeout: float = 5.0, durability: str = "normal", write_queue: bool = True,
             readonly: bool = False, upgrade: bool = True) -> DictBackend:
        return cls(url)

    def close(self) -> None:
        self._closed = True

    # --- helpers ------------------------------------------------------------------------

    def _visible(self, sid: str) -> bool:
        return sid in self._state["sessions"] and sid not in self._state["importing"]

    def _committed(self) -> None:
        self._version += 1
        self._cond.notify_all()

    def _row(self, sid: str, seq: int) -> tuple:
        return self._state["events"][sid][seq]

    def _next_position(self) -> int:
        return len(self._state["positions"]) + 1

    # --- sessions -------------------------------------------------------------------------

    def create_session(self, session_id: str, created_at: float, meta_json: str) -> None:
        with self._cond:
            if session_id in self._state["sessions"]:
                raise SessionExists(session_id)
            self._state["sessions"][session_id] = (created_at, meta_json)
            self._state["events"][session_id] = []
            self._committed()

    def session_meta(self, session_id: str) -> str | None:
        with self._cond:
            return self._state["sessions"][session_id][1] if self._visible(session_id) else None

    def sessions(self) -> list[tuple[str, float, int, float | None]]:
        with self._cond:
            out = []
            for sid, (created_at, _meta) in self._state["sessions"].items():
                if self._visible(sid):
                    rows = self._state["events"][sid]
                    out.append((sid, created_at, len(rows), rows[-1][3] if rows else None))
            return sorted(out, key=lambda r: (r[1], r[0]))

    # --- appends ----------------------------------------------------------------------------

    def append(self, session_id: str, types: list[str], tss: list[float], payloads: list[str],
               expected_seq: int | None, *, salts=None, commits=None) -> tuple[int, int, str]:
        # no salt column: the events are stored unsalted (hashed from their payloads)
        with self._cond:
            if session_id not in self._state["sessions"]:
                raise SessionNotFound(session_id)
            rows = self._state["events"][session_id]
            seq0 = len(rows)
            if expected_seq is not None and expected_seq != seq0:
                raise SeqConflict(session_id, expected_seq, seq0)
            keys = [_event_id(p) for p in payloads]
            taken = {_event_id(r[4]) for r in rows} - {None}
            fresh = [k for k in keys if k is not None]
            if taken.intersection(fresh) or len(set(fresh)) < len(fresh):
                raise AppendOnlyViolation(f"session {session_id!r}: {base.CODES[base.EVENT_ID_TAKEN]}")
            flat = chain_rows(rows[-1][5] if rows else genesis_hash(session_id), seq0, types, tss, payloads)
            pos0 = self._next_position()
            for i in range(len(types)):
                type_, ts, payload, hash_ = flat[5 * i:5 * i + 4]
                rows.append((seq0 + i, pos0 + i, type_, ts, payload, hash_))
                self._state["positions"].append((pos0 + i, session_id, seq0 + i))
            self._committed()
            return seq0, pos0, rows[-1][5]

    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        with self._cond:
            for seq, position, type_, ts, payload, _h in self._state["events"].get(session_id, ()):
                if _event_id(payload) == event_id:
                    return seq, position, type_, ts, payload
            return None

    # --- reads ------------------------------------------------------------------------------

    def session_events(self, session_id: str, after_seq: int = -1, types: list[str] | None = None,
                       limit: int = base.PAGE, last: bool = False) -> list[tuple[int, int, str, float, str]]:
        with self._cond:
            rows = [r[:5] for r in self._state["events"].get(session_id, ())[after_seq + 1:]
                    if not types or r[2] in types]
            return (rows[-limit:] if limit else []) if last else rows[:limit]

    def _barrier(self, dead_owners: Collection[str]) -> int | None:
        firsts = [first for first, owner, _s in self._state["importing"].values() if owner not in dead_owners]
        return min(firsts) if firsts else None

    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        with self._cond:
            barrier = self._barrier(dead_owners)
            out = []
            for position, sid, seq in self._state["positions"][after_position:]:
                if barrier is not None and position >= barrier:
                    break
                if sid in self._state["importing"]:
                    continue
                _s, _p, type_, ts, payload, _h = self._row(sid, seq)
                out.append((position, sid, seq, type_, ts, payload))
                if len(out) >= limit:
                    break
            return out

    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        with self._cond:
            barrier = self._barrier(dead_owners)
            return len(self._state["positions"]) if barrier is None else barrier - 1

    def follower(self, poll_interval: float) -> Follower:
        return _DictFollower(self)

    # --- imports -----------------------------------------------------------------------------

    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], Any]) -> Any:
        with self._cond:
            saved = copy.deepcopy(self._state)
            try:
                out = body(_DictImport(self, session_id))
            except BaseException:
                self._state = saved
                raise
            self._committed()
            return out

    def import_lock(self, session_id: str) -> ImportLock | None:
        with self._cond:
            if session_id in self._locks:
                return None
            owner = f"dict:{next(_owners)}"
            self._locks[session_id] = owner
            return _DictLock(self, session_id, owner)

    def import_owner_alive(self, owner: str) -> bool:
        with self._cond:
            return owner in self._locks.values()

    def imports(self) -> list[tuple[str, int, str, float]]:
        with self._cond:
            return sorted(((sid, *row) for sid, row in self._state["importing"].items()), key=lambda r: r[1])

    # --- the projection -----------------------------------------------------------------------

    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        with self._cond:
            rows = [r for r in self._state["events"].get(session_id, ())
                    if r[2] in _MESSAGE_TYPES and (upto_seq is None or r[0] <= upto_seq)]
        return "[" + ",".join(dumps(chat_message(r[2], json.loads(r[4]))) for r in rows) + "]"


class _DictLock(ImportLock):
    def __init__(self, backend: DictBackend, session_id: str, owner: str):
        self._backend, self._sid, self.owner = backend, session_id, owner

    def release(self, unlink: bool) -> None:
        with self._backend._cond:
            if self._backend._locks.get(self._sid) == self.owner:
                del self._backend._locks[self._sid]


class _DictImport(ImportTransaction):
    def __init__(self, backend: DictBackend, session_id: str):
        self._b, self._sid = backend, session_id

    @property
    def _st(self) -> dict:
        return self._b._state

    def session_meta(self) -> str | None:
        row = self._st["sessions"].get(self._sid)
        return None if row is None else row[1]

    def importing(self) -> tuple[int, str] | None:
        row = self._st["importing"].get(self._sid)
        return None if row is None else (row[0], row[1])

    def begin_import(self, first_position: int, owner: str, started_at: float) -> None:
        self._st["importing"][self._sid] = (first_position, owner, started_at)

    def take_over(self, owner: str) -> None:
        first, _old, started = self._st["importing"][self._sid]
        self._st["importing"][self._sid] = (first, owner, started)

    def end_import(self) -> None:
        self._st["importing"].pop(self._sid, None)

    def create_session(self, created_at: float, meta_json: str) -> Refusal | None:
        if self._sid in self._st["sessions"]:
            return Refusal(base.SESSION_EXISTS, f"session {self._sid!r} already exists")
        self._st["sessions"][self._sid] = (created_at, meta_json)
        self._st["events"][self._sid] = []
        return None

    def next_seq(self) -> int:
        return len(self._st["events"].get(self._sid, ()))

    def next_position(self) -> int:
        return self._b._next_position()

    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        rows = self._st["events"].get(self._sid, [])[max(0, first_seq):last_seq + 1]
        return [(seq, type_, ts, payload, hash_) for seq, _p, type_, ts, payload, hash_ in rows]

    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        events = self._st["events"][self._sid]
        taken = {_event_id(r[4]) for r in events} - {None}
        for i, (seq, type_, ts, payload, hash_) in enumerate(rows):
            payload = payload.decode() if isinstance(payload, bytes) else payload
            hash_ = hash_.decode() if isinstance(hash_, bytes) else hash_
            if seq != len(events) or position0 + seq != self._b._next_position():
                return i, Refusal(base.SEQ_NOT_NEXT, f"seq {seq} is not the next")
            key = _event_id(payload)
            if key is not None and key in taken:
                return i, Refusal(base.EVENT_ID_TAKEN, f"event_id {key!r} is already stored")
            taken.add(key)
            events.append((seq, position0 + seq, type_, ts, payload, hash_))
            self._st["positions"].append((position0 + seq, self._sid, seq))
        return None

    def event_id_seq(self, event_id: str) -> int | None:
        for seq, _p, _t, _ts, payload, _h in self._st["events"].get(self._sid, ()):
            if _event_id(payload) == event_id:
                return seq
        return None


class _DictFollower(Follower):
    def __init__(self, backend: DictBackend):
        self._b = backend
        self._seen = backend._version

    def events_after(self, after_position: int, limit: int, dead_owners: Collection[str] = ()) -> list:
        with self._b._cond:
            self._seen = self._b._version
            return self._b.events_after(after_position, limit, dead_owners)

    def imports(self) -> list[tuple[str, int, str, float]]:
        return self._b.imports()

    def session_events_after(self, session_id: str, after_seq: int, limit: int) -> list:
        with self._b._cond:
            self._seen = self._b._version
            if not self._b._visible(session_id):
                return []
            return [(position, session_id, seq, type_, ts, payload) for seq, position, type_, ts, payload
                    in self._b.session_events(session_id, after_seq, None, limit)]

    def wait_for_commit(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._b._cond:
            while self._b._version == self._seen:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._b._cond.wait(left)
            return True

    def close(self) -> None:
        pass
