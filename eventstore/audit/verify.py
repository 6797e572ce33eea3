"""Auditing: verifying a log (database-neutral; the read-only SQL sandbox of ``eventstore
sql`` is the backend's, :meth:`~eventstore.backends.base.Backend.query_connection`).

* :func:`verify` checks a database: seqs gapless, the hash chain, the append-only triggers,
  streamed chunks against their message, and the projection's validity for a chat API.
  Each :class:`Finding` names the session and the seq.

The rules shared by :func:`verify`, :func:`eventstore.audit.repair.repair` and the ``tool_calls`` view (see
``docs/schema.md``): the calls of an ``assistant/message`` are the elements of its
``tool_calls`` when that is a JSON array; the ``tool/result`` answering a call is the first
one after it with the call's id, before the next ``user/message`` or ``assistant/message``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from eventstore.backends.capabilities import AuditReads
from eventstore.backends.fallbacks import capability
from eventstore.errors import SessionNotFound
from eventstore.log.chain import _SHA256, genesis_hash
from eventstore.log.codec import event_line

__all__ = ["Finding", "VerifyReport", "verify"]


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
    "storage",       # the database cannot be opened or read, or its storage check reports damage
    "schema",        # a table, index, trigger, view or function differs from what the migrations create
    "trigger",       # an append-only guard trigger is missing or altered
    "session",       # events whose session row is missing
    "seq",           # a gap in the seqs, or events out of commit (position) order
    "hash",          # the stored hash does not chain: an edit, a removed or reordered event
    "chunks",        # an assistant/message differs from the deltas streamed before it
    "tool_calls",    # tool_calls that a chat API rejects (not an array, no id, a repeated id)
    "dangling_call",  # a tool call with no tool/result before the next user/assistant message
    "orphan_result",  # a tool/result that answers no call (or one already answered)
    "checkpoint",    # the log does not extend a kept checkpoint (eventstore.audit.anchor)
)

_PARSED = frozenset({"assistant/message", "assistant/part", "assistant/chunk", "tool/result", "step/start"})
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
        elif type_ == "assistant/part":  # more calls of the same API message (an imported transcript's)
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
    session's last event (the genesis hash for an empty session); ``notes``: checks that
    could not run (not findings: e.g. the schema check as a role that may not create a
    scratch schema); ``opened``: False when the database could not be opened at all (its
    findings say why), so that nothing of its log was checked.
    """

    findings: list[Finding] = field(default_factory=list)
    sessions: int = 0
    events: int = 0
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    opened: bool = True

    @property
    def ok(self) -> bool:
        """True when nothing was found (a database that could not be opened is a finding)."""
        return not self.findings


def _verify_session(backend: AuditReads, sid: str, report: VerifyReport) -> None:
    walk = _Walk(sid)
    feed = walk.feed
    add = walk.findings.append
    new_sha256 = _SHA256.copy  # quicker than hashlib.sha256() (see chain.chain_hash)
    genesis = genesis_hash(sid)
    prev_hash = genesis
    expected = 0
    prev_position = -1
    n = 0
    for seq, position, type_, ts, payload, stored in backend.verify_rows(sid):
        n += 1
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
    walk.finish()
    report.findings.extend(walk.findings)
    report.events += n
    report.heads[sid] = (n, prev_hash if n else genesis)


def verify(backend: AuditReads, session_ids: Iterable[str] | None = None) -> VerifyReport:
    """Check the database behind ``backend`` (opened read-only is enough) and return a
    :class:`VerifyReport`.

    Checks the append-only guards (every trigger, with its definition:
    :meth:`~eventstore.backends.base.Backend.guard_problems`); then each session (all of
    them, or ``session_ids``), read in one snapshot in seq order: seqs 0, 1, 2, ... with no
    gap and in commit order; each stored hash equal to ``chain_hash(previous stored hash,
    event line)`` (so a finding points at the edited, or first displaced, event); each
    ``assistant/message`` equal to the concatenation of the ``assistant/chunk`` deltas
    before it in the same step, when there are any; the projection valid for a chat API
    (every tool call answered before the next user or assistant message; every tool result
    answering a call). Checking all sessions also reports events whose session row is
    missing.

    An unfinished import (:mod:`eventstore.io.bulk`) is a note while its importer runs, and a
    finding once it does not (its session stays hidden), or when its row hides events
    stored before the import's first position; plus findings for what breaks its stored
    prefix's seqs or hash chain.

    A tool call still waiting for its result at the end of the log is reported too: verify
    cannot tell a running tool from a crashed agent. Removing the last events of a session
    leaves a valid chain: compare the heads (``report.heads``) with ones kept elsewhere.
    Raises :class:`SessionNotFound` for an unknown id in ``session_ids``,
    :class:`DatabaseError` when the database cannot be read.
    """
    report = VerifyReport()
    backend = capability(backend, AuditReads)  # a bare core backend gets the generic reads
    report.findings.extend(Finding("trigger", None, None, problem) for problem in backend.guard_problems())
    if session_ids is None:
        ids = [row[0] for row in backend.sessions()]
        for sid in backend.orphan_session_ids():
            report.findings.append(Finding("session", sid, None, "events of a session whose sessions row is "
                                                                  "missing (removed, or never created)"))
    else:
        ids = list(dict.fromkeys(session_ids))
        for sid in ids:
            if backend.session_meta(sid) is None:
                raise SessionNotFound(sid)
    for sid in ids:
        _verify_session(backend, sid, report)
        report.sessions += 1
    if session_ids is None:
        _unfinished_imports(backend, report)
    return report


def _unfinished_imports(backend: AuditReads, report: VerifyReport) -> None:
    """For each unfinished import (an ``importing`` row: its session is hidden from readers;
    see eventstore.io.bulk): a note while its importer runs, else a finding (nobody will finish
    it, so a stored session stays hidden: an importer that stopped, or a row made to hide a
    session); a finding too when the session has events before the row's first position
    (an import's events start there: the row hides a session stored before it), and for
    what its stored prefix breaks (seqs, hash chain); what a cut-off log may lack (a tool
    call still waiting for its result) is no finding there."""
    for sid, first, owner, _started in backend.imports():
        part = VerifyReport()
        _verify_session(backend, sid, part)
        report.findings.extend(f for f in part.findings if f.kind in ("seq", "hash"))
        n = part.heads[sid][0]
        rows = backend.verify_rows(sid)
        try:
            earliest = next(rows, None)
        finally:
            rows.close()
        if earliest is not None and earliest[1] < first:
            report.findings.append(Finding("session", sid, earliest[0], f"hidden from readers by an importing row "
                                           f"whose first position ({first}) is after its stored event at position "
                                           f"{earliest[1]}: no import made that row"))
        elif backend.import_owner_alive(owner):
            report.notes.append(f"session {sid!r}: unfinished import, {n} events stored from position {first}, "
                                f"hidden from readers; its importer is still running")
        else:
            report.findings.append(Finding("session", sid, None, f"unfinished import, {n} events stored from "
                                           f"position {first}, hidden from readers, and its importer is not "
                                           f"running: import the file again to complete it"))
