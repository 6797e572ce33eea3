"""Auditing: read-only SQL, verifying a log, repairing it by appending.

* :func:`connect_readonly` opens a database file so that nothing can be written through the
  connection (a ``mode=ro`` URI, ``PRAGMA query_only``, and an authorizer that lets through
  reads only: no INSERT/UPDATE/DELETE, no DDL, no ATTACH, no ``VACUUM INTO``, no PRAGMA that
  sets anything). :func:`query` runs one statement on it; ``eventstore sql`` prints the rows.
* :func:`verify` checks a database: seqs gapless, the hash chain, the append-only triggers,
  streamed chunks against their message, and the projection's validity for a chat API.
  Each :class:`Finding` names the session and the seq.
* :func:`repair` (``Session.repair()``, ``eventstore repair``) appends the events that make an
  interrupted session valid again: a ``tool/result`` for each dangling tool call, a
  ``step/end`` for an open step, a ``turn/end`` for an open turn. History is never changed.

The rules shared by :func:`verify`, :func:`repair` and the ``tool_calls`` view (see
``docs/schema.md``): the calls of an ``assistant/message`` are the elements of its
``tool_calls`` when that is a JSON array; the ``tool/result`` answering a call is the first
one after it with the call's id, before the next ``user/message`` or ``assistant/message``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .engine import open_read_only
from .errors import DatabaseError, QueryError, SeqConflict, SessionNotFound
from .jsonl import _SHA256, event_line, genesis_hash
from .schema import GUARDS
from .walcheck import check_wal

if TYPE_CHECKING:  # pragma: no cover
    from .store import Event, Session

__all__ = [
    "Finding",
    "VerifyReport",
    "connect_readonly",
    "database_path",
    "query",
    "repair",
    "repair_plan",
    "verify",
]

# --- read-only connections -------------------------------------------------------------

#: PRAGMAs whose argument only names a table or index (or a row limit): reads, always allowed.
_INTROSPECTION_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
})
#: PRAGMAs allowed without an argument (with one, most of them would set something).
_READ_PRAGMAS = frozenset({
    "database_list", "collation_list", "function_list", "module_list", "pragma_list",
    "compile_options", "encoding", "page_count", "page_size", "freelist_count", "schema_version",
    "user_version", "application_id", "journal_mode", "data_version", "foreign_keys", "query_only",
    "auto_vacuum", "busy_timeout", "max_page_count",
})
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_ACTION_NAMES = {getattr(sqlite3, "SQLITE_" + n): n.replace("_", " ") for n in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE",
    "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER",
    "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH",
    "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT",
    "RECURSIVE")}


class _ReadOnlyGuard:
    """The authorizer of a read-only connection; remembers why it refused the last statement."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_temp_master"):
            # SQLite asks this while it sets up a table-valued function such as
            # pragma_table_info('events'): an internal step, not a write. A real UPDATE of the
            # schema table still fails (read-only file, query_only, writable_schema refused).
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() not in _DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            what = f"the function {arg2}()"
        elif action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _INTROSPECTION_PRAGMAS or (arg2 is None and name in _READ_PRAGMAS):
                return sqlite3.SQLITE_OK
            what = f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}")
        elif action == sqlite3.SQLITE_ATTACH:
            # VACUUM attaches a temporary database (an empty file name) to rebuild the file.
            what = ("VACUUM (it rewrites the file)" if arg1 == ""
                    else "ATTACH (and VACUUM INTO, which attaches its target file)")
        else:
            what = _ACTION_NAMES.get(action, f"authorizer action {action}")
            if arg1:
                what += f" {arg1}"
        self.refused = what
        return sqlite3.SQLITE_DENY


def _decode_text(data: bytes) -> str:
    """Text from SQLite; tolerant of what SQLite's JSON functions make of a lone surrogate
    escape (its 3-byte CESU form, kept as the lone surrogate) and of other invalid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "backslashreplace")


def database_path(target: str | os.PathLike) -> str:
    """The file path of ``target`` (a path or an ``sqlite:///`` URL, as ``--db`` takes).

    Raises :class:`DatabaseError` for an in-memory database or a file that does not exist
    (a read-only connection never creates one).
    """
    from sqlalchemy.engine import make_url

    from .engine import database_url

    path = make_url(database_url(target)).database
    if path in (None, "", ":memory:"):
        raise DatabaseError("an in-memory database cannot be opened read-only: give a file")
    if not os.path.isfile(path):
        raise DatabaseError(f"cannot open {path}: no such database file")
    return path


def connect_readonly(target: str | os.PathLike, *, authorizer: bool = True,
                     busy_timeout: float = 5.0, max_memory: int | None = None) -> sqlite3.Connection:
    """Open the database file ``target`` (path or ``sqlite:///`` URL) read-only.

    The file is opened with a ``file:...?mode=ro`` URI and ``PRAGMA query_only = ON``; with
    ``authorizer`` (the default) an SQLite authorizer also refuses, at prepare time, every
    statement that is not a read: writes, DDL (temporary objects too), ATTACH and
    ``VACUUM INTO`` (both can create a file even on a read-only connection), transactions,
    PRAGMAs that set a value, ``load_extension()``. ``busy_timeout`` is in seconds;
    ``max_memory`` (bytes) caps what SQLite may allocate (``PRAGMA hard_heap_limit``, for
    the whole process): past it a statement fails with ``MemoryError``.
    The connection is in autocommit mode. Raises :class:`DatabaseError`.
    """
    path = database_path(target)
    check_wal(path)  # a -wal written for another file is refused, not read through
    try:
        conn = open_read_only(path, busy_timeout, isolation_level=None, factory=_ReadOnlyConnection)
        conn.text_factory = _decode_text
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA query_only = ON")
        if max_memory is not None:
            conn.execute(f"PRAGMA hard_heap_limit = {int(max_memory)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # is it a database?
    except sqlite3.Error as e:
        raise DatabaseError(f"cannot open {path}: {e}") from None
    if authorizer:
        conn.guard = _ReadOnlyGuard()
        conn.set_authorizer(conn.guard)
    # SQLite runs a statement without returning to Python, so Ctrl-C (SIGINT) would wait for
    # the query to end, and an endless one never does. A Python callback every 100,000
    # virtual-machine steps lets the interpreter run its signal handler; the
    # KeyboardInterrupt it raises there makes SQLite stop the statement ("interrupted").
    conn.set_progress_handler(_let_signals_in, 100_000)
    return conn


def _let_signals_in() -> int:
    return 0


class _ReadOnlyConnection(sqlite3.Connection):
    """A connection that carries its authorizer, so :func:`query` can say what it refused."""

    guard: _ReadOnlyGuard | None = None


def query(conn: sqlite3.Connection, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
    """Run one SQL statement and return ``(column names, row iterator)``.

    Meant for a :func:`connect_readonly` connection: a statement it refuses raises
    :class:`QueryError` whose message starts with ``refused:`` and says what was refused.
    Any other SQL error (syntax, unknown table, several statements) raises
    :class:`QueryError` too, while preparing or while iterating the rows.
    """
    guard = getattr(conn, "guard", None)
    if guard is not None:
        guard.refused = None
    if not _SQL_COMMENTS.sub("", sql).strip(" \t\n\r\f;"):
        raise QueryError("the query is empty" if not sql.strip()
                         else "the query holds no statement (only comments or ';')")
    try:
        cur = conn.execute(sql, tuple(params))
    except (sqlite3.Error, sqlite3.Warning) as e:
        if guard is not None and guard.refused:
            raise QueryError(f"refused: the database is open read-only ({guard.refused} is not allowed)") from None
        raise QueryError(_query_error(e)) from None
    columns = [d[0] for d in cur.description or ()]

    def rows() -> Iterator[tuple]:
        try:
            while True:
                batch = cur.fetchmany(500)
                if not batch:
                    return
                yield from batch
        except sqlite3.Error as e:
            raise QueryError(_query_error(e)) from None
        finally:
            try:
                cur.close()
            except sqlite3.ProgrammingError:  # the connection went first (the reader of | head left)
                pass

    return columns, rows()


# SQL comments, to tell a query of comments alone (SQLite runs nothing and says nothing).
# A "--" or "/*" inside a string literal makes this strip too much, but the literal's
# opening quote and the keyword before it stay: only a query of comments, ';' and
# whitespace strips to nothing.
_SQL_COMMENTS = re.compile(r"--[^\n]*|/\*.*?(\*/|$)", re.S)


def _query_error(e: Exception) -> str:
    msg = str(e)
    if msg == "interrupted":
        return "interrupted (Ctrl-C): the query was stopped"
    if "readonly" in msg or "read-only" in msg:
        return f"refused: the database is open read-only ({msg})"
    if "one statement at a time" in msg:  # sqlite3's ProgrammingError for "SELECT 1; SELECT 2"
        return "the query holds more than one SQL statement: run them one at a time"
    return msg


# --- the walk over one session ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by :func:`verify`.

    ``kind`` is one of :data:`KINDS`; ``session_id`` and ``seq`` say where (None for a
    database-wide finding such as a missing trigger); ``message`` says what, in a sentence.
    """

    kind: str
    session_id: str | None
    seq: int | None
    message: str

    def __str__(self) -> str:
        where = "database" if self.session_id is None else f"session {self.session_id}"
        if self.seq is not None:
            where += f" seq {self.seq}"
        return f"{where}: {self.kind}: {self.message}"


#: The kinds of :class:`Finding`, in the order :func:`verify` looks for them.
KINDS = (
    "trigger",       # an append-only guard trigger is missing or altered
    "session",       # events whose session row is missing
    "seq",           # a gap in the seqs, or events out of commit (position) order
    "hash",          # the stored hash does not chain: an edit, a removed or reordered event
    "chunks",        # an assistant/message differs from the deltas streamed before it
    "tool_calls",    # tool_calls that a chat API rejects (not an array, no id, a repeated id)
    "dangling_call",  # a tool call with no tool/result before the next user/assistant message
    "orphan_result",  # a tool/result that answers no call (or one already answered)
)

_PARSED = frozenset({"assistant/message", "assistant/chunk", "tool/result", "step/start"})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_string(s: str) -> str:
    """``s`` as a JavaScript (UTF-16) string would be after concatenation: a high and a low
    surrogate that end up side by side are one character."""
    if _SURROGATE.search(s):
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return s


def _truthy(v: Any) -> bool:
    """JavaScript truthiness of a JSON value."""
    return not (v is None or v is False or (v == 0 and not isinstance(v, bool)) or v == "")


class _Walk:
    """The state of one session read in seq order: what verify reports, what repair needs."""

    def __init__(self, session_id: str):
        self.sid = session_id
        self.findings: list[Finding] = []
        self.pending: dict[Any, tuple[int, Any]] = {}  # call id -> (call seq, tool name), unanswered
        self.answered: dict[Any, int] = {}  # call id -> result seq, since the last message
        self.chunks: list[str] = []
        self.chunk_seqs: list[int] = []
        self.turn_open = False
        self.step_open: dict | None = None  # the open step/start's payload
        self.step_calls = 0
        self.last_seq = -1

    def _add(self, kind: str, seq: int | None, message: str) -> None:
        self.findings.append(Finding(kind, self.sid, seq, message))

    def _close_calls(self, at_seq: int | None, what: str) -> None:
        for cid, (seq, name) in self.pending.items():
            label = f"{cid!r}" + (f" ({name})" if isinstance(name, str) else "")
            where = f"before the next {what} at seq {at_seq}" if at_seq is not None else "(the log ends here)"
            self._add("dangling_call", seq, f"tool call {label} has no tool/result {where}")
        self.pending = {}
        self.answered = {}

    def feed(self, seq: int, type_: str, payload: Any) -> None:
        """Take the next event; ``payload`` is the JSON text or the parsed dict."""
        self.last_seq = seq
        if type_ in _PARSED and isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError:
                payload = {}
        if type_ == "assistant/chunk":
            delta = payload.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            self.chunks.append(text if isinstance(text, str) else "")
            self.chunk_seqs.append(seq)
        elif type_ == "assistant/message":
            self._check_chunks(seq, payload)
            self._close_calls(seq, "assistant/message")
            self._take_calls(seq, payload)
        elif type_ == "user/message":
            self._close_calls(seq, "user/message")
        elif type_ == "tool/result":
            cid = payload.get("tool_call_id")
            if not isinstance(cid, str):  # call ids are strings: nothing else answers a call
                self._add("orphan_result", seq, f"tool/result has no tool_call_id string ({json.dumps(cid)})")
            elif cid in self.pending:
                del self.pending[cid]
                self.answered[cid] = seq
            elif cid in self.answered:
                self._add("orphan_result", seq, f"tool/result for {cid!r} repeats the answer already given "
                                                f"at seq {self.answered[cid]}")
            else:
                self._add("orphan_result", seq, f"tool/result answers no call: no tool call {cid!r} since the "
                                                f"last user or assistant message")
        elif type_ == "step/start":
            self.step_open = payload if isinstance(payload, dict) else {}
            self.step_calls = 0
            self._reset_chunks()
        elif type_ == "step/end":
            self.step_open = None
        elif type_ == "turn/start":
            self.turn_open = True
            self._reset_chunks()
        elif type_ == "turn/end":
            self.turn_open = False
            self.step_open = None

    def _reset_chunks(self) -> None:
        self.chunks = []
        self.chunk_seqs = []

    def _check_chunks(self, seq: int, payload: dict) -> None:
        if not self.chunk_seqs:
            return
        streamed = _js_string("".join(self.chunks))
        content = payload.get("content")
        span = (f"the {len(self.chunk_seqs)} assistant/chunk deltas at seq {self.chunk_seqs[0]}"
                + (f"..{self.chunk_seqs[-1]}" if len(self.chunk_seqs) > 1 else ""))
        if content is None:
            content = ""
        if not isinstance(content, str):
            self._add("chunks", seq, f"content is a {type(content).__name__}, not the text streamed by {span}")
        else:
            content = _js_string(content)
            if content != streamed:
                at = next((i for i, (a, b) in enumerate(zip(content, streamed, strict=False)) if a != b),
                          min(len(content), len(streamed)))
                self._add("chunks", seq, f"content ({len(content)} characters) differs from the concatenation "
                                         f"of {span} ({len(streamed)} characters) at character {at}")
        self._reset_chunks()

    def _take_calls(self, seq: int, payload: dict) -> None:
        calls = payload.get("tool_calls")
        if isinstance(calls, list):
            for i, call in enumerate(calls):
                cid = call.get("id") if isinstance(call, dict) else None
                if not isinstance(cid, str) or not cid:
                    self._add("tool_calls", seq, f"tool call #{i} has no id (a string), so no result can answer it")
                    continue
                if cid in self.pending:
                    self._add("tool_calls", seq, f"tool call id {cid!r} appears twice in this message")
                    continue
                fn = call.get("function")
                self.pending[cid] = (seq, fn.get("name") if isinstance(fn, dict) else None)
            self.step_calls += len(calls)
        elif _truthy(calls):
            self._add("tool_calls", seq, f"tool_calls is a JSON {type(calls).__name__}, not an array: "
                                         f"the projection passes it on and a chat API rejects it")

    def finish(self) -> None:
        """The log ends: calls still waiting for a result are dangling."""
        self._close_calls(None, "")


# --- verify ---------------------------------------------------------------------------------

@dataclass
class VerifyReport:
    """What :func:`verify` found.

    ``findings`` (empty when the database is clean), ``sessions`` and ``events`` (how many
    were checked), ``heads``: session id -> ``(events, head hash)``, the stored hash of the
    session's last event (the genesis hash for an empty session).
    """

    findings: list[Finding] = field(default_factory=list)
    sessions: int = 0
    events: int = 0
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings


_NORMALIZE = re.compile(r"\s+")
_PAGE = 5000


def _check_triggers(conn: sqlite3.Connection) -> list[Finding]:
    stored = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
    out = []
    for name, ddl in GUARDS.items():
        if name not in stored:
            out.append(Finding("trigger", None, None, f"append-only trigger {name} is missing"))
        elif _NORMALIZE.sub(" ", stored[name] or "").strip() != _NORMALIZE.sub(" ", ddl).strip():
            out.append(Finding("trigger", None, None, f"append-only trigger {name} differs from its definition"))
    return out


def _verify_session(conn: sqlite3.Connection, sid: str, report: VerifyReport) -> None:
    # Stored text is canonical JSON (valid UTF-8), so the C decoder reads it fastest; text
    # that is not UTF-8 (only a hand edit could put it there) is read again tolerantly.
    saved = conn.text_factory
    try:
        conn.text_factory = str
        try:
            _verify_rows(conn, sid, report)
        except sqlite3.OperationalError as e:
            if "decode" not in str(e):
                raise
            conn.text_factory = _decode_text
            _verify_rows(conn, sid, report)
    finally:
        conn.text_factory = saved


def _verify_rows(conn: sqlite3.Connection, sid: str, report: VerifyReport) -> None:
    walk = _Walk(sid)
    feed = walk.feed
    add = walk.findings.append
    new_sha256 = _SHA256.copy  # quicker than hashlib.sha256() (see jsonl.chain_hash)
    genesis = genesis_hash(sid)
    prev_hash = genesis
    expected = 0
    prev_position = -1
    n = 0
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")  # one snapshot per session
    try:
        cur = conn.execute("SELECT seq, position, type, ts, payload, hash FROM events "
                           "WHERE session_id = ? ORDER BY seq", (sid,))
        while rows := cur.fetchmany(_PAGE):
            n += len(rows)
            for seq, position, type_, ts, payload, stored in rows:
                if seq != expected:
                    gap = f"seq {expected}" if seq - expected == 1 else f"seqs {expected}..{seq - 1}"
                    add(Finding("seq", sid, seq, f"seq {seq} follows seq {expected - 1}: {gap} missing"))
                expected = seq + 1
                if position <= prev_position:
                    add(Finding("seq", sid, seq, f"position {position} is not after the previous event's "
                                                 f"position {prev_position}: events out of commit order"))
                prev_position = position
                try:  # chain_hash(prev_hash, event_line(...)), inlined
                    h = new_sha256()
                    h.update((prev_hash + "\n" + event_line(type_, seq, ts, payload)).encode())
                    want = h.hexdigest()
                except Exception as e:  # a value that the append path could never have written
                    want = f"(no canonical line: {e})"
                if stored != want:
                    add(Finding("hash", sid, seq, "stored hash does not chain from the previous event: this "
                                                  "event was edited, or one before it removed or reordered"))
                prev_hash = stored if isinstance(stored, str) else ""
                feed(seq, type_, payload)
    finally:
        if own:
            conn.execute("COMMIT")
    walk.finish()
    report.findings.extend(walk.findings)
    report.events += n
    report.heads[sid] = (n, prev_hash if n else genesis)


def verify(conn: sqlite3.Connection, session_ids: Iterable[str] | None = None) -> VerifyReport:
    """Check the database behind ``conn`` (any ``sqlite3`` connection in autocommit mode,
    e.g. :func:`connect_readonly` with ``authorizer=False``) and return a :class:`VerifyReport`.

    Checks the append-only triggers (every one of ``schema.GUARDS``, with its definition);
    then each session (all of them, or ``session_ids``), read in one snapshot in seq order:
    seqs 0, 1, 2, ... with no gap and in commit order; each stored hash equal to
    ``chain_hash(previous stored hash, event line)`` (so a finding points at the edited,
    or first displaced, event); each ``assistant/message`` equal to the concatenation of
    the ``assistant/chunk`` deltas before it in the same step, when there are any;
    the projection valid for a chat API (every tool call answered before the next user or
    assistant message; every tool result answering a call). Checking all sessions also
    reports events whose session row is missing.

    A tool call still waiting for its result at the end of the log is reported too: verify
    cannot tell a running tool from a crashed agent. Removing the last events of a session
    leaves a valid chain: compare the heads (``report.heads``) with ones kept elsewhere.
    Raises :class:`SessionNotFound` for an unknown id in ``session_ids``.
    """
    report = VerifyReport()
    report.findings.extend(_check_triggers(conn))
    if session_ids is None:
        ids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY created_at, id")]
        for (sid,) in conn.execute("SELECT DISTINCT session_id FROM events "
                                   "WHERE session_id NOT IN (SELECT id FROM sessions) ORDER BY session_id"):
            report.findings.append(Finding("session", sid, None, "events of a session whose sessions row is "
                                                                  "missing (removed, or never created)"))
    else:
        ids = list(dict.fromkeys(session_ids))
        for sid in ids:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is None:
                raise SessionNotFound(sid)
    for sid in ids:
        _verify_session(conn, sid, report)
        report.sessions += 1
    return report


# --- repair ---------------------------------------------------------------------------------

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
    walk = _Walk("")
    for seq, type_, payload in events:
        walk.feed(seq, type_, payload)
    plan: list[tuple[str, dict]] = [
        ("tool/result", {"tool_call_id": cid, "content": INTERRUPTED, "repair": True}) for cid in walk.pending
    ]
    if walk.step_open is not None:
        end: dict = {"step": walk.step_open["step"]} if "step" in walk.step_open else {}
        end.update({"tool_calls": walk.step_calls, "repair": True})
        plan.append(("step/end", end))
    if walk.turn_open:
        plan.append(("turn/end", {"reason": "interrupted", "repair": True}))
    return plan


def repair(session: Session, *, attempts: int = 3) -> list[Event]:
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
