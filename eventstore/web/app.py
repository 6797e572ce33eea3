"""The viewer's ASGI application: pages, static assets and the JSON API (docs/web.md).

Read-only by construction: every route is GET (and HEAD); any other method gets 405 from
:class:`Guard` before routing. Every response carries a strict Content-Security-Policy
(scripts and styles only from this server's ``/static/``, no inline script, no other
origin), and the pages put every stored string into the page as text (``textContent``),
never as HTML.
"""

from __future__ import annotations

import contextlib
import inspect
import ipaddress
import itertools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from eventstore.io.transcripts.common import INFO, current_meta, effective_meta
from eventstore.log.line import row_pages

from .. import __version__
from ..errors import EventStoreError, QueryError, SessionNotFound
from ..search import search as run_search
from ..search import snippet_ranges
from .facts import FACT_KEYS, STATES, SessionFacts
from .hub import ALL, Hub
from .index import SORT_KEYS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from eventstore.core.store import EventStore

__all__ = ["create_app", "Guard", "CSP"]

STATIC = Path(__file__).parent / "static"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

MAX_HITS = 200  # hits per /api/search answer
MAX_EVENTS = 200_000  # events per /api/events answer (a 100,000-event session in one)
SSE_BATCH = 5_000  # events per server-sent event
# Bytes of stored payload text per /api/events answer and per server-sent event: the
# request's memory is a few times this, whatever the session holds (one event is always
# sent whole, however large).
MAX_ANSWER_BYTES = 16 << 20
# Bytes of message text per /api/messages answer: the projection is one JSON array the page
# takes whole, so a larger one is refused (413) before it is read, not built in memory.
MAX_MESSAGES_BYTES = 32 << 20
# Bytes of session/info payload one /api/session answer merges into the session's meta (its
# own and, for a subagent's session, its parent's; a session holds a few small ones): they
# are counted, INFO_PAGE events a read, before any is merged, and past this the answer is
# 413, so the request's memory stays a few times this plus one such page.
MAX_INFO_BYTES = 4 << 20
INFO_PAGE = 8
KEEPALIVE_S = 15.0


def host_allowed(host: str, names: frozenset[str]) -> bool:
    """Whether a request's ``Host`` header (``name``, ``name:port``, ``[v6]:port``) may be
    answered: an IP address (v4, or v6 in brackets) always, for no page elsewhere can make a
    browser send one as its own origin; a name only if it is in ``names`` (lower case),
    so a page whose DNS name is pointed at this server (DNS rebinding) gets 421."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return False
        try:
            ipaddress.IPv6Address(host[1:end])
        except ValueError:
            return False
        return True
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return False
    name = name.removesuffix(".")
    try:
        ipaddress.IPv4Address(name)
        return True
    except ValueError:
        return bool(name) and name in names


class Guard:
    """ASGI middleware: 405 for any method but GET and HEAD; the security headers on every
    response; 421 for a request whose ``Host`` is a name not in ``allowed_hosts`` (an IP
    address is always answered, see :func:`host_allowed`): a page of another site that
    points its DNS name at this server cannot read the log through a visitor's browser."""

    def __init__(self, app, allowed_hosts: Iterable[str] = ()):
        self.app = app
        self.allowed_hosts = frozenset({"localhost", *(h.lower().removesuffix(".") for h in allowed_hosts)})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                   *(h for h in _HEADERS if h[0] not in names)]}
            await send(message)

        if scope["method"] not in ("GET", "HEAD"):
            response = Response("read-only: only GET and HEAD\n", status_code=405,
                                headers={"Allow": "GET, HEAD"}, media_type="text/plain")
            return await response(scope, receive, send_with_headers)
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.allowed_hosts):
            names = ", ".join(sorted(self.allowed_hosts))
            response = Response(f"this viewer answers only to an IP address or to the names {names} "
                                f"(serve --allow-host NAME adds one), not to {host!r}\n",
                                status_code=421, media_type="text/plain")
            return await response(scope, receive, send_with_headers)
        await self.app(scope, receive, send_with_headers)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _int(request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadRequest(f"{name} must be an integer, not {raw!r}") from None
    return max(lo, min(hi, value))


class _BadRequest(Exception):
    pass


_TYPE_JSON: dict[str, str] = {}


def events_json(rows: list[tuple]) -> str:
    """``(type, seq, ts, payload text)`` rows (:meth:`Backend.export_rows`) as a JSON array
    of ``{"seq", "type", "ts", "payload"}`` objects; the payload is the stored text as it is."""
    parts = []
    type_json = _TYPE_JSON
    for type_, seq, ts, payload in rows:
        t = type_json.get(type_)
        if t is None:
            t = json.dumps(type_)
            if len(type_json) < 1000:
                type_json[type_] = t
        parts.append(f'{{"seq":{seq},"type":{t},"ts":{float(ts)!r},"payload":{payload}}}')
    return "[" + ",".join(parts) + "]"


class EventPages:
    """The session's events after seq ``after`` as JSON text (the items of
    :func:`events_json`'s array, comma-separated), one UTF-8 ``bytes`` piece per page read:
    at most ``limit`` events and, past the first, about ``max_bytes`` of payload text.
    Afterwards ``more`` says whether events follow and ``last`` is the last seq given.

    Pages come from :func:`eventstore.log.line.row_pages` as the pieces are taken (at most
    about a megabyte of payload each, cut by the database's read), so memory holds one
    page, not the answer: more than that only where one event is larger."""

    def __init__(self, store, session_id: str, after: int, limit: int, max_bytes: int = MAX_ANSWER_BYTES):
        self.store = store
        self.session_id = session_id
        self.last = after
        self.limit = limit
        self.max_bytes = max_bytes
        self.count = 0
        self.more = False

    def __iter__(self):
        size = 0
        for rows in row_pages(self.store, self.session_id, self.last, self.limit):
            taken = []
            full = False
            for row in rows:
                n = len(row[3])
                if (self.count or taken) and size + n > self.max_bytes:
                    full = True
                    break
                taken.append(row)
                size += n
            if taken:
                text = events_json(taken)[1:-1]
                yield ((b"," if self.count else b"") + text.encode("utf-8", "surrogatepass"))
                self.count += len(taken)
                self.last = taken[-1][1]
            del rows, taken
            if full:
                self.more = True
                return
        self.more = self.count >= self.limit and bool(self.store.export_rows(self.session_id, self.last, 1))


def info_bytes(store, session_id: str, bound: int) -> int:
    """The UTF-8 bytes of the payloads of the session's ``session/info`` events, read
    :data:`INFO_PAGE` events at a time (one page in memory), counting stopped once past
    ``bound`` (the result is then more than ``bound``, not the whole)."""
    total, last = 0, -1
    while total <= bound:
        _head, rows = store.session_payloads(session_id, [INFO], INFO_PAGE, from_seq=last + 1)
        total += sum(len(p.encode("utf-8", "surrogatepass")) if isinstance(p, str) else len(p)
                     for *_, p in rows)
        if len(rows) < INFO_PAGE:
            break
        last = rows[-1][0]
        del rows
    return total


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def hit_json(hit) -> dict:
    """A :class:`~eventstore.search.Hit` for the browser: the snippet as plain text and the
    matched parts as ``[start, end)`` offsets in UTF-16 code units (JavaScript's string
    indices), so that the page builds the highlight from text nodes."""
    text, ranges = snippet_ranges(hit.snippet)
    marks = [[_utf16_len(text[:a]), _utf16_len(text[:b])] for a, b in ranges]
    return {"session_id": hit.session_id, "seq": hit.seq, "type": hit.type, "ts": float(hit.ts),
            "snippet": text, "marks": marks}


def _download_name(session_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", session_id).strip("._") or "session"
    return safe[:100] + ".jsonl"


def create_app(store: EventStore, *, db_label: str = "", allowed_hosts: Iterable[str] = (),
               on_ready: Callable[[], None] | None = None, poll_interval: float = 0.05) -> Guard:
    """The viewer as an ASGI application over ``store`` (open it read-only).

    At start-up it reads the log into the sessions index on a thread (seconds per million
    events: the sessions page says it is reading meanwhile; session pages work at once),
    then follows new commits every ``poll_interval`` seconds; ``on_ready`` is called when
    it serves. ``db_label`` is what the pages call the database. ``allowed_hosts`` are the
    names (besides ``localhost``) a request's ``Host`` may give (:class:`Guard`).
    """
    hub = Hub(store, poll_interval=poll_interval)
    facts = SessionFacts(store, hub.index)  # titles, projects, models, tokens, relations

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import asyncio

        hub.start(asyncio.get_running_loop())  # reads the log into the index, then follows it
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            await run_in_threadpool(hub.stop)

    def session_or_404(request):
        sid = request.query_params.get("session")
        if sid is None:
            raise _BadRequest("the query needs session=ID")
        return store.session(sid)  # SessionNotFound -> 404

    def page(name: str):
        async def endpoint(request):
            return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})
        return endpoint

    async def info(request):
        return JSONResponse({"version": __version__, "database": db_label, "ready": hub.ready,
                             "sessions": len(hub.index) if hub.ready else None, "position": hub.position,
                             "follow_error": hub.error})

    def sessions(request):
        sort = request.query_params.get("sort", "last_ts")
        order = request.query_params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise _BadRequest("order must be asc or desc")
        offset = _int(request, "offset", 0, 0, 2**62)
        limit = _int(request, "limit", 50, 1, 1000)
        if sort not in SORT_KEYS and sort not in FACT_KEYS:
            raise _BadRequest(f"sort must be one of {', '.join(SORT_KEYS + FACT_KEYS)}")
        state = request.query_params.get("state", "")
        if state and state not in STATES:
            raise _BadRequest(f"state must be one of {', '.join(STATES)}")
        if not hub.ready:
            return JSONResponse({"loading": True, "total": 0, "matching": 0, "offset": offset, "limit": limit,
                                 "sort": sort, "order": order, "position": 0, "sessions": [], "error": hub.error})
        matching, rows = facts.page(sort=sort, descending=order == "desc", query=request.query_params.get("q", ""),
                                    state=state, offset=offset, limit=limit)
        return JSONResponse({"total": len(hub.index), "matching": matching, "offset": offset, "limit": limit,
                             "sort": sort, "order": order, "position": hub.position, "sessions": rows})

    def search(request):
        query = request.query_params.get("q", "")
        limit = _int(request, "limit", 50, 1, MAX_HITS)
        try:
            # update_index=False: the viewer never writes; the events past the index are scanned
            hits = run_search(store, query, limit=limit, update_index=False,
                              session_id=request.query_params.get("session") or None,
                              type=request.query_params.get("type") or None)
        except QueryError as e:
            raise _BadRequest(str(e)) from None
        return JSONResponse({"query": query, "hits": [hit_json(h) for h in hits]})

    def session_summary(request):
        s = session_or_404(request)
        # The meta merges the session's session/info events (and its parent's, for a
        # subagent): counted first, by bytes, so a session holding many is refused (413)
        # instead of being read into memory.
        size = info_bytes(store, s.id, MAX_INFO_BYTES)
        parent = None
        holder = s.id  # the session whose events passed the limit
        if size <= MAX_INFO_BYTES:
            own = json.loads(store.session_meta_json(s.id) or "{}")
            own = effective_meta(own if isinstance(own, dict) else {},
                                 ((e.type, e.payload) for e in s.events(types=INFO)))
            parent = own.get("parent_session") if own.get("relation") == "subagent" else None
            if isinstance(parent, str) and parent != s.id:
                size += info_bytes(store, parent, MAX_INFO_BYTES - size)
                holder = parent
        if size > MAX_INFO_BYTES:
            whose = f"session {s.id!r}" + (f" and its parent {parent!r}" if isinstance(parent, str) else "")
            return _error(413, f"the session/info events of {whose} hold more than {MAX_INFO_BYTES:,} bytes, more "
                               f"than the viewer merges into one answer; `eventstore events {holder} --type "
                               f"session/info` prints them")
        summary = hub.index.get(s.id) if hub.ready else None
        body = summary.to_dict() if summary is not None else {
            "id": s.id, "created_at": None, "events": 0, "messages": 0, "tool_calls": 0, "first_ts": None,
            "last_ts": None, "complete": True, "open_turn": False, "dangling_calls": 0, "loading": not hub.ready}
        body["meta"] = current_meta(store, s.id)  # with what session/info events learned later
        body["first_prompt"] = facts.first_prompt(s.id, body["events"])  # the page's title where meta has none
        return JSONResponse(body)

    def events(request):
        s = session_or_404(request)
        after = _int(request, "after", -1, -1, 2**63 - 1)
        limit = _int(request, "limit", 10_000, 1, MAX_EVENTS)
        pages = EventPages(store, s.id, after, limit)

        def body():  # streamed a page at a time; "more" is known at the end
            yield b'{"session":' + json.dumps(s.id).encode() + b',"events":['
            yield from pages
            yield b'],"more":' + (b"true" if pages.more else b"false") + b"}"

        return StreamingResponse(body(), media_type="application/json")

    def messages(request):
        s = session_or_404(request)
        upto = _int(request, "upto", 2**63 - 1, -1, 2**63 - 1)
        size = s.messages_size(upto)
        if size > MAX_MESSAGES_BYTES:
            return _error(413, f"the projection of session {s.id!r} up to seq {upto} holds {size:,} bytes of "
                               f"messages, more than the viewer answers at once ({MAX_MESSAGES_BYTES:,}); "
                               f"`eventstore messages` prints it")
        return Response(s.messages_json(upto), media_type="application/json")

    def export(request):
        s = session_or_404(request)
        chunks = store.export_chunks(s.id)
        first = next(chunks)  # a payload export cannot write is an error before the answer starts

        def body():  # streamed: about EXPORT_BUFFER bytes at a time, whatever the session holds
            for pieces, _n, _events in itertools.chain([first], chunks):
                yield b"".join(pieces)

        return StreamingResponse(body(), media_type="application/x-ndjson", headers={
            "Content-Disposition": f'attachment; filename="{_download_name(s.id)}"'})

    async def stream_session(request):
        s = await run_in_threadpool(session_or_404, request)
        after = _int(request, "after", -1, -1, 2**63 - 1)
        resumed = request.headers.get("last-event-id", "")
        if resumed.isdigit():  # the browser reconnecting: go on after the last event it got
            after = max(after, min(int(resumed), 2**63 - 1))
        sid = s.id

        async def gen():
            sub = hub.subscribe(sid)
            last = after
            caught_up = False
            try:
                yield "retry: 1000\n\n"
                while True:
                    # one message of at most SSE_BATCH events (MAX_ANSWER_BYTES), sent a page at a
                    # time; its id (the last seq) comes after the data, once known
                    pages = EventPages(store, sid, last, SSE_BATCH)
                    it = iter(pages)
                    piece = await run_in_threadpool(next, it, None)
                    if piece is not None:
                        yield b"event: events\ndata: [" + piece
                        while (piece := await run_in_threadpool(next, it, None)) is not None:
                            yield piece
                        last = pages.last
                        yield f"]\nid: {last}\n\n"
                        if pages.more:
                            continue
                    if not caught_up:  # every stored event sent: from now on, only new ones
                        caught_up = True
                        yield f"event: caught-up\ndata: {{\"seq\":{last}}}\n\n"
                    woken = await sub.wait(KEEPALIVE_S)
                    if sub.closing:
                        return
                    if not woken:
                        yield ": keep-alive\n\n"
            finally:
                sub.close()

        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def stream_sessions(request):
        async def gen():
            sub = hub.subscribe(ALL)
            try:
                yield "retry: 1000\n\n"
                while True:
                    woken = await sub.wait(KEEPALIVE_S)
                    if sub.closing:
                        return
                    if woken:
                        yield f"event: changed\ndata: {json.dumps({'position': hub.position})}\n\n"
                    else:
                        yield ": keep-alive\n\n"
            finally:
                sub.close()

        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def api(endpoint):
        is_async = inspect.iscoroutinefunction(endpoint)

        async def wrapped(request):
            try:
                if is_async:
                    return await endpoint(request)
                return await run_in_threadpool(endpoint, request)
            except SessionNotFound as e:
                return _error(404, str(e))
            except _BadRequest as e:
                return _error(400, str(e))
            except EventStoreError as e:
                return _error(500, str(e))
        return wrapped

    routes = [
        Route("/", page("sessions.html")),
        Route("/session", page("session.html")),
        Route("/api/info", api(info)),
        Route("/api/sessions", api(sessions)),
        Route("/api/sessions/stream", api(stream_sessions)),
        Route("/api/search", api(search)),
        Route("/api/session", api(session_summary)),
        Route("/api/events", api(events)),
        Route("/api/messages", api(messages)),
        Route("/api/export", api(export)),
        Route("/api/stream", api(stream_session)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.hub = hub
    return Guard(app, allowed_hosts)
