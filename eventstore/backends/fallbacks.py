"""Generic fallbacks of the optional capabilities (:mod:`.capabilities`), built on the core
contract (:class:`~.base.Backend`) alone, and :func:`capability`, which picks the backend's
own implementation or the fallback.

A fallback is correct but slow (it reads the events through the core, a page at a time)
and, where the core cannot say, weaker: :class:`ScanAudit` reads no guards or storage
check (it reports a ``note``) and reads a session's heads one read after another, not in
one snapshot (the log is append-only, so rows never change under it); :class:`NoSandbox`
and :class:`NoRoles` refuse. Each fallback also answers the core contract, forwarded to
its backend, so a caller handed a capability needs nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from eventstore.errors import DatabaseError, QueryError
from eventstore.log.chain import session_hash
from eventstore.log.codec import dumps

from ..lazy import LazyModule
from .base import PAGE, Backend
from .capabilities import (
    AuditReads,
    LogViews,
    QueryConnection,
    Redactor,
    Roles,
    SearchIndex,
    SessionIndex,
    SqlSandbox,
)
from .search_terms import TOKEN, query_terms

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any, TypeVar
    C = TypeVar("C")

__all__ = ["capability", "search_text", "ScanSearch", "ScanAudit", "ScanSessionIndex", "ScanLogViews",
           "NoSandbox", "NoRoles", "NoRedactor", "FALLBACKS"]

json = LazyModule("json")  # imported at the first payload read (its import compiles its patterns)


#: The event types whose text is searchable (the ``events_search_text`` view's).
SEARCHABLE = ("user/message", "assistant/message", "tool/result", "assistant/part", "assistant/thinking")
#: The event types that decide a session's state in the viewer (:meth:`SessionIndex.state_rows`).
STATE_TYPES = ("turn/start", "turn/end", "user/message", "assistant/message", "tool/result")


class _OnCore:
    """A capability over ``core``: the core contract's methods are ``core``'s own."""

    def __init__(self, core: Backend):
        self.core = core

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)

    def _all_events(self, after: int = 0, upto: int | None = None) -> Iterator[tuple]:
        """``EventRow`` of every visible session with ``after < position <= upto``, in
        position order, a page at a time."""
        while True:
            rows = self.core.events_after(after, PAGE)
            for row in rows:
                if upto is not None and row[0] > upto:
                    return
                yield row
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def _session_events(self, session_id: str, types: list[str] | None = None) -> Iterator[tuple]:
        """``SessionEventRow`` of every event of ``session_id`` (of ``types``), a page at a time."""
        after = -1
        while True:
            rows = self.core.session_events(session_id, after, types, PAGE)
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][0]


def search_text(type_: str, payload: dict) -> str:
    """The searchable text of an event, as the ``events_search_text`` view gives it: a
    thinking event's ``thinking``; else its content (a string, or the ``text`` of its
    parts), then each tool call's name and arguments."""
    if type_ == "assistant/thinking":
        return payload["thinking"] if isinstance(payload.get("thinking"), str) else ""
    content = payload.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [c if isinstance(c, str) else c["text"] for c in content
                 if isinstance(c, str) or (isinstance(c, dict) and isinstance(c.get("text"), str))]
    else:
        parts = []
    text = " ".join(parts)
    calls = payload.get("tool_calls")
    if isinstance(calls, list):
        named = []
        for call in calls:
            if isinstance(call, dict):
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                name, args = fn.get("name"), fn.get("arguments")
                named.append(f"{name if isinstance(name, str) else ''} {args if isinstance(args, str) else ''}")
        if named:
            text += " " + " ".join(named)
    return text


class ScanSearch(_OnCore, SearchIndex):
    """Search without an index: every searchable event is read and its tokens matched (all
    terms, a ``*`` word as a prefix), newest first, each hit scored 0.0."""

    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        return 0  # nothing to keep up to date

    def _matches(self, query: str, raw: bool, session_id: str | None, type_: str | None) -> Iterator[tuple]:
        if raw:
            raise QueryError(f"search {query!r}: the {self.core.name} backend has no query syntax of its own "
                             f"(search without raw)")
        terms = query_terms(query, False)
        if not terms:
            raise QueryError(f"the search query {query!r} has no word to look for (words are letters and digits)")
        types = [t for t in SEARCHABLE if type_ is None or t == type_]
        if session_id is None:
            rows = ((sid, seq, t, ts, p) for _pos, sid, seq, t, ts, p in self._all_events() if t in types)
        else:
            rows = ((session_id, seq, t, ts, p) for seq, _pos, t, ts, p in self._session_events(session_id, types))
        for sid, seq, t, ts, payload in rows:
            text = search_text(t, json.loads(payload))
            tokens = {m.group().lower() for m in TOKEN.finditer(text)}
            if all(any(tok.startswith(w) for tok in tokens) if prefix else w in tokens for w, prefix in terms):
                yield sid, seq, t, ts, text

    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        hits = list(self._matches(query, raw, session_id, type_))
        return [(*hit, 0.0) for hit in reversed(hits[-limit:])] if limit > 0 else []

    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None,
                     at_most: int | None = None) -> int:
        from itertools import islice

        return sum(1 for _ in islice(self._matches(query, raw, session_id, type_), at_most))


class ScanAudit(_OnCore, AuditReads):
    """The auditing reads through the core: the rows and hashes as stored (read in the import
    transaction, which reads them), no guards and no storage or schema check to report."""

    def guard_problems(self) -> list[str]:
        return []  # the core has no guards to inspect; the chain check still runs

    def orphan_session_ids(self) -> list[str]:
        return []  # the core stores events only for stored sessions

    def _stored(self, session_id: str, first: int, last: int) -> list[tuple]:
        """``StoredRow`` of seqs ``first..last`` (None for ``last``: to the head), as stored."""
        def read(tx):
            return tx.stored(first, tx.next_seq() - 1 if last is None else last)

        return self.core.import_transaction(session_id, read)

    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any, Any]]:
        stored = self._stored(session_id, 0, None)
        positions = {seq: pos for seq, pos, *_ in self._session_events(session_id)}
        for seq, type_, ts, payload, hash_ in stored:  # the core keeps no salts: events are unsalted
            yield seq, positions.get(seq), type_, ts, payload, hash_, None

    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        return [("note", f"{self.core.display}: the {self.core.name} backend has no storage or schema check")]

    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        out = []
        for sid, created_at, _n, _last in self.core.sessions():
            meta = self.core.session_meta(sid)
            out.append((sid, created_at, meta, session_hash(sid, created_at, meta)))
        return out

    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        out: dict = {"position": self.core.last_position(), "sessions": [], "at": {}}
        for sid, created_at, n, _last in self.core.sessions():
            last = self._stored(sid, n - 1, n - 1) if n else []
            out["sessions"].append((sid, created_at, self.core.session_meta(sid), n, last[0][4] if last else None))
        for sid, seq in (at or {}).items():
            row = self._stored(sid, seq, seq) if self.core.session_meta(sid) is not None else []
            ev = self.core.session_events(sid, seq - 1, None, 1)
            if row and ev:
                out["at"][sid] = (row[0][4], ev[0][1])
        out["counted"] = sum(1 for _ in self._all_events(0, position)) if position > 0 else 0
        return out


class ScanSessionIndex(_OnCore, SessionIndex):
    """The viewer's index read event by event, in position order."""

    def session_rows(self) -> list[tuple[str, float]]:
        return [(sid, created_at) for sid, created_at, _n, _last in self.core.sessions()]

    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        counts: dict[str, list] = {}
        for position, sid, seq, _t, ts, _p in self._all_events(0, upto_position):
            c = counts.get(sid)
            if c is None:
                counts[sid] = c = [sid, 0, 0, ts if seq == 0 else None, ts]
            c[1] += 1
            c[2] = position
            c[4] = ts
            if seq == 0:
                c[3] = ts
        return [tuple(c) for c in counts.values()]

    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        out = []
        for position, sid, _seq, t, _ts, payload in self._all_events(after_position, upto_position):
            if t not in STATE_TYPES:
                continue
            extra = None
            if t in ("assistant/message", "tool/result"):
                p = json.loads(payload)
                if t == "assistant/message":
                    extra = dumps(p["tool_calls"]) if "tool_calls" in p else None
                elif isinstance(p.get("tool_call_id"), str):
                    extra = p["tool_call_id"]
            out.append((position, sid, t, extra))
            if len(out) >= limit:
                break
        return out


def _int(value: Any) -> int:
    """A usage count as the ``usage`` view reads it (a number, else 0)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


class ScanLogViews(_OnCore, LogViews):
    """The log's views computed from the events."""

    def usage_totals(self) -> list[tuple[str, int, int, int, int, int]]:
        out = []
        for sid, _c, _n, _last in sorted(self.core.sessions()):
            totals = [0, 0, 0, 0, 0]
            for _seq, _pos, _t, _ts, payload in self._session_events(sid):
                if '"usage":{' not in payload:
                    continue
                u = json.loads(payload).get("usage")
                if isinstance(u, dict):
                    totals[0] += 1
                    totals[1] += _int(u.get("input_tokens", u.get("prompt_tokens", 0)))
                    totals[2] += _int(u.get("output_tokens", u.get("completion_tokens", 0)))
                    totals[3] += _int(u.get("cache_read_tokens", 0))
                    totals[4] += _int(u.get("cache_creation_tokens", 0))
            if totals[0]:
                out.append((sid, *totals))
        return out

    def info_rows(self) -> list[tuple[str, str]]:
        return [(sid, row[4]) for sid, *_ in sorted(self.core.sessions())
                for row in self._session_events(sid, ["session/info"])]

    def summary_titles(self, session_id: str | None = None) -> list[tuple[str, str]]:
        summaries = []  # (ts, position, leaf, title)
        for position, _sid, _seq, t, ts, payload in self._all_events():
            if t == "claude/summary":
                source = json.loads(payload).get("source")
                if isinstance(source, dict) and isinstance(source.get("summary"), str) \
                        and isinstance(source.get("leafUuid"), str):
                    summaries.append((ts, position, source["leafUuid"], source["summary"]))
        summaries.sort()
        sids = [session_id] if session_id is not None else [r[0] for r in self.core.sessions()]
        out = []
        for _ts, _pos, leaf, title in summaries:
            if any(c in leaf for c in ":#@"):
                continue
            out += [(sid, title) for sid in sorted(sids) if self.core.event_by_id(sid, leaf) is not None]
        return out


class NoSandbox(_OnCore, SqlSandbox):
    """A backend without SQL: ``eventstore sql`` is refused."""

    @classmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = 30.0,
                         max_memory: int | None = None) -> QueryConnection:
        raise QueryError(f"{url}: this backend has no SQL sandbox")


class NoRoles(_OnCore, Roles):
    """A backend without database roles: ``eventstore roles`` is refused."""

    def _refuse(self) -> DatabaseError:
        return DatabaseError(f"{self.core.display}: the {self.core.name} backend has no roles")

    def check_role_names(self, writer: str, auditor: str, redactor: str | None = None) -> None:
        raise self._refuse()

    def roles_sql(self, writer: str, auditor: str, redactor: str | None = None) -> str:
        raise self._refuse()

    def apply_roles(self, text: str) -> list[str]:
        raise self._refuse()


class NoRedactor(_OnCore, Redactor):
    """A backend without a redaction rule of its own: ``redact`` is refused (an in-place
    change needs the database to enforce its one allowed form)."""

    def redact_event(self, session_id: str, seq: int, old_hash: str, new_payload_json: str,
                     new_salt: bytes | None, redaction_ts: float, redaction_payload_json: str,
                     redaction_salt: bytes, redaction_commit_json: str) -> int:
        raise DatabaseError(f"{self.core.display}: the {self.core.name} backend cannot redact "
                            f"(session {session_id!r}, seq {seq}): its log has no in-place change")

    def erase_old_versions(self) -> str | None:
        raise DatabaseError(f"{self.core.display}: the {self.core.name} backend cannot redact")


#: The fallback of each capability.
FALLBACKS: dict[type, type[_OnCore]] = {
    SearchIndex: ScanSearch, AuditReads: ScanAudit, SessionIndex: ScanSessionIndex, LogViews: ScanLogViews,
    SqlSandbox: NoSandbox, Roles: NoRoles, Redactor: NoRedactor,
}


def capability(backend: Backend, kind: type[C]) -> C:
    """``backend`` itself when it implements the capability ``kind`` (one of
    :data:`~.capabilities.CAPABILITIES`), else its generic fallback over ``backend``'s core.
    Either answers the core contract too."""
    if isinstance(backend, kind):
        return backend
    try:
        return FALLBACKS[kind](backend)  # type: ignore[return-value]
    except KeyError:
        raise TypeError(f"{kind!r} is not a backend capability") from None
