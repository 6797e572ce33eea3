"""Auditing: verifying a log (database-neutral; the read-only SQL sandbox of ``eventstore
sql`` is the backend's, :meth:`~eventstore.backends.capabilities.SqlSandbox.query_connection`).

* :func:`verify` checks a database: seqs gapless, the hash chain, the append-only triggers,
  streamed chunks against their message, and the projection's validity for a chat API.
  Each :class:`Finding` names the session and the seq.

The tool-call rules are :mod:`eventstore.log.toolcalls`' (the ``tool_calls`` view's), shared
with :func:`eventstore.audit.repair.repair` and the viewer's sessions index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import orjson as _orjson

from eventstore.backends.capabilities import AuditReads
from eventstore.backends.fallbacks import capability
from eventstore.errors import SessionNotFound
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.codec import loads
from eventstore.log.commit import (
    SALT_BYTES,
    commit_json,
    commit_jsons,
    is_event_salt,
    key_salts_of,
    rebuilt_commit_json,
)
from eventstore.log.line import event_line, event_lines
from eventstore.log.projection import no_long_digit_run
from eventstore.log.redaction import REDACTION, TARGET_SEQ, path_text
from eventstore.log.toolcalls import Call, ToolCallTracker
from eventstore.log.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    ASSISTANT_PART,
    STEP_START,
    TOOL_RESULT,
    TURN_START,
)

__all__ = ["Finding", "RedactionInfo", "VerifyReport", "verify"]


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

_PARSED = frozenset({ASSISTANT_MESSAGE, ASSISTANT_PART, ASSISTANT_CHUNK, TOOL_RESULT, STEP_START})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_string(s: str) -> str:
    """``s`` as a JavaScript (UTF-16) string would be after concatenation: a high and a low
    surrogate that end up side by side are one character."""
    if _SURROGATE.search(s):
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return s


class _Walk(ToolCallTracker):
    """One session read in seq order: the tool-call rules' problems and the streamed chunks
    checked against their message, as findings."""

    __slots__ = ("sid", "findings", "chunks", "chunk_seqs", "chunk_findings", "redacted")

    def __init__(self, session_id: str):
        super().__init__()
        self.sid = session_id
        self.findings: list[Finding] = []
        self.chunks: list[str] = []
        self.chunk_seqs: list[int] = []
        # each chunks finding with the seqs it compares: dropped at the end when a redaction
        # event names one of them (a redacted piece or message differs by design)
        self.chunk_findings: list[tuple[Finding, list[int]]] = []
        self.redacted: set[int] = set()  # the seqs the session's redaction events name

    def _add(self, kind: str, seq: int | None, message: str) -> None:
        self.findings.append(Finding(kind, self.sid, seq, message))

    def on_dangling(self, calls: list[Call], at_seq: int | None, what: str) -> None:
        seen = set()
        for c in calls:
            if not c.id or c.id in seen:  # reported as a tool_calls finding already
                continue
            seen.add(c.id)
            label = f"{c.id!r}" + (f" ({c.name})" if isinstance(c.name, str) else "")
            where = f"before the next {what} at seq {at_seq}" if at_seq is not None else "(the log ends here)"
            self._add("dangling_call", c.seq, f"tool call {label} has no tool/result {where}")

    def on_orphan(self, seq: int, call_id: Any, answered_at: int | None) -> None:
        if not isinstance(call_id, str):  # call ids are strings: nothing else answers a call
            self._add("orphan_result", seq, f"tool/result has no tool_call_id string ({json.dumps(call_id)})")
        elif answered_at is not None:
            self._add("orphan_result", seq, f"tool/result for {call_id!r} repeats the answer already given "
                                            f"at seq {answered_at}")
        else:
            self._add("orphan_result", seq, f"tool/result answers no call: no tool call {call_id!r} since the "
                                            f"last user or assistant message")

    def on_bad_calls(self, seq: int, problem: str) -> None:
        self._add("tool_calls", seq, problem)

    def feed(self, seq: int, type_: str, payload: Any) -> None:
        """Take the next event; ``payload`` is the JSON text or the parsed dict."""
        if type_ in _PARSED and isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except (ValueError, RecursionError):
                payload = {}
        if type_ in _PARSED and type(payload) is not dict:  # (a tampered '[1]': read as {}, as the tool-call rules do)
            payload = {}
        if type_ == ASSISTANT_CHUNK:
            delta = payload.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            self.chunks.append(text if isinstance(text, str) else "")
            self.chunk_seqs.append(seq)
        elif type_ == ASSISTANT_MESSAGE:
            self._check_chunks(seq, payload)
        elif type_ == STEP_START or type_ == TURN_START:
            self._reset_chunks()
        elif type_ == REDACTION:
            try:
                target = (loads(payload) if isinstance(payload, str) else payload).get(TARGET_SEQ)
            except (ValueError, AttributeError):
                target = None
            if isinstance(target, int):
                self.redacted.add(target)
        super().feed(seq, type_, payload)

    def finish(self) -> None:
        """The log ends here: the tool-call rules' last findings; a chunks finding of a run
        whose message or any chunk was redacted is no finding."""
        super().finish()
        drop = {id(f) for f, seqs in self.chunk_findings if self.redacted.intersection(seqs)}
        if drop:
            self.findings = [f for f in self.findings if id(f) not in drop]

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
        before = len(self.findings)
        if not isinstance(content, str):
            self._add("chunks", seq, f"content is a {type(content).__name__}, not the text streamed by {span}")
        else:
            content = _js_string(content)
            if content != streamed:
                at = next((i for i, (a, b) in enumerate(zip(content, streamed, strict=False)) if a != b),
                          min(len(content), len(streamed)))
                self._add("chunks", seq, f"content ({len(content)} characters) differs from the concatenation "
                                         f"of {span} ({len(streamed)} characters) at character {at}")
        if len(self.findings) > before:
            self.chunk_findings.append((self.findings[-1], [seq, *self.chunk_seqs]))
        self._reset_chunks()


# --- verify ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RedactionInfo:
    """One redaction found by :func:`verify`: event ``seq`` of ``session_id`` had ``paths``
    replaced by a marker, recorded by the ``redaction`` event at ``redaction_seq`` (``when``
    its ts: for a redaction before storing, the event's own ts), with ``reason`` and ``by``.
    ``kind`` is ``"salted"`` (the event was salted: its type, seq, ts and untouched top-level
    keys are proven, the touched keys proven to have been committed), ``"legacy"`` (an event
    from before salts: only its position and hash are proven), ``"before_storing"``
    (redacted before it was stored: nothing of the secret was ever written) or
    ``"as_stored"`` (the event verifies as it is stored, e.g. a session imported from an
    export: the record came with it). ``proven`` says it in a sentence."""

    session_id: str
    seq: Any
    redaction_seq: int
    paths: Any
    reason: Any
    by: Any
    when: float
    kind: str
    proven: str

    def __str__(self) -> str:
        paths = ", ".join(_path_text(p) for p in self.paths) if isinstance(self.paths, list) else repr(self.paths)
        try:
            when = datetime.fromtimestamp(self.when, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):
            when = f"ts {self.when}"
        if self.kind == "before_storing":  # its redaction event carries the event's ts (a re-import stores the same)
            return (f"session {self.session_id} seq {self.seq}: redacted {paths or '(nothing)'} by {self.by} "
                    f"(reason: {self.reason}; recorded at seq {self.redaction_seq} with the event's time, {when}); "
                    f"{self.proven}")
        return (f"session {self.session_id} seq {self.seq}: redacted {paths or '(nothing)'} on {when} by "
                f"{self.by} (reason: {self.reason}; recorded at seq {self.redaction_seq}); {self.proven}")


def _path_text(path: Any) -> str:
    """A path ``["tool_calls", 0, "function"]`` as ``tool_calls[0].function``."""
    return path_text(path) if isinstance(path, list) and path else repr(path)


def _proven(kind: str, paths: Any) -> str:
    """What verify proves of a redacted event of ``kind`` (see :class:`RedactionInfo`)."""
    if kind == "legacy":
        return ("proven: its position and stored hash; its type, ts and other fields are kept but not proven "
                "(written before salted commitments)")
    if kind == "before_storing":
        return "redacted before it was stored: the event verifies as stored; the secret was never written"
    if kind == "as_stored":
        return "the event verifies as stored (the record came with it, e.g. from an export)"
    deep = isinstance(paths, list) and any(isinstance(p, list) and len(p) > 1 for p in paths)
    return ("proven: type, seq, ts and every untouched top-level key; each touched key proven to have been "
            "committed, its content gone" + ("; the parts kept inside a touched key are kept, not proven"
                                              if deep else ""))


def _unmarked(payload: Any, paths: list) -> str | None:
    """The first of ``paths`` whose value in ``payload`` (JSON text) is no redaction marker
    (a marker on the way to it covers it), or None."""
    try:
        node0 = loads(payload)
    except ValueError:
        return "(the payload)"
    for path in paths:
        node = node0
        for step in path if isinstance(path, list) else []:
            if isinstance(node, str) and node.startswith("[redacted: "):
                break
            if isinstance(node, dict) and isinstance(step, str) and step in node:
                node = node[step]
            elif isinstance(node, list) and type(step) is int and 0 <= step < len(node):
                node = node[step]
            else:
                return _path_text(path)
        if not (isinstance(node, str) and node.startswith("[redacted: ")):
            return _path_text(path)
    return None


class _Redactions:
    """A session's redacted events while verify walks it: an unsalted event whose hash does
    not chain waits here for the ``redaction`` events after it that name it."""

    __slots__ = ("pending", "records", "infos", "unmarked")

    def __init__(self):
        self.unmarked: list[tuple[int, Finding]] = []  # (finding index, finding)
        # seq -> (prev_hash, type, ts, payload, stored hash, key salts column, finding index)
        self.pending: dict[int, tuple] = {}
        self.records: dict[int, dict] = {}  # seq -> merged {"digests", "hashes"}
        self.infos: list[RedactionInfo] = []

    def mismatch(self, seq: int, prev: str, type_: str, ts: float, payload: Any, stored: Any, key_salts: Any,
                 at: int) -> None:
        """Event ``seq`` did not chain (``key_salts``: its salt column, the salts of the keys a
        redaction kept, or None); ``at`` is where its finding goes if nothing proves it."""
        self.pending[seq] = (prev, type_, ts, payload, stored, key_salts, at)

    def record(self, sid: str, seq: int, ts: float, payload: Any) -> None:
        """Take the ``redaction`` event at ``seq`` and resolve the event it names, if waiting."""
        try:
            body = loads(payload) if isinstance(payload, str) else {}
        except (ValueError, RecursionError):
            body = {}
        if type(body) is not dict:  # a tampered record ('[1]'): it names no event
            body = {}
        target = body.get(TARGET_SEQ)
        if not isinstance(target, int) or isinstance(target, bool):
            self.infos.append(RedactionInfo(sid, target, seq, body.get("paths"), body.get("reason"), body.get("by"),
                                            ts, "invalid", "names no event (its seq is not an integer)"))
            return
        rec = self.records.setdefault(target, {"digests": {}, "hashes": set()})
        digests = body.get("digests")
        if isinstance(digests, dict):
            for k, v in digests.items():
                rec["digests"].setdefault(k, v)
        if isinstance(body.get("hash"), str):
            rec["hashes"].add(body["hash"])
        if isinstance(body.get("paths"), list):
            rec.setdefault("paths", []).extend(body["paths"])
        kind = "before_storing" if body.get("before_storing") is True else "as_stored"
        waiting = self.pending.get(target)
        if waiting is not None:
            resolved = self._resolve(target, waiting, rec)
            if resolved is not None:
                del self.pending[target]
                unmarked = _unmarked(waiting[3], rec.get("paths", []))
                if unmarked:  # a touched key's digest proves nothing of what it holds now: the marker must
                    self.unmarked.append((waiting[-1], Finding(
                        "hash", sid, target, f"redacted field {unmarked} does not hold a redaction marker: "
                                             f"edited after its redaction")))
                kind = resolved
                # an earlier redaction of the same event is proven with this one's record
                self.infos = [RedactionInfo(*[getattr(i, f) for f in RedactionInfo.__slots__[:7]], kind,
                                            _proven(kind, i.paths))
                              if i.seq == target and i.kind == "unproven" else i for i in self.infos]
            else:
                kind = "unproven"
        elif target in self.records and any(i.seq == target and i.kind in ("salted", "legacy") for i in self.infos):
            kind = next(i.kind for i in self.infos if i.seq == target and i.kind in ("salted", "legacy"))
        proven = _proven(kind, body.get("paths")) if kind != "unproven" else \
            "not proven: the stored event does not match this record (see the hash finding)"
        self.infos.append(RedactionInfo(sid, target, seq, body.get("paths"), body.get("reason"), body.get("by"),
                                        ts, kind, proven))

    @staticmethod
    def _resolve(seq: int, waiting: tuple, rec: dict) -> str | None:
        """``"salted"`` or ``"legacy"`` when the waiting event's stored hash is proven by the
        records of its redactions, else None."""
        prev, type_, ts, payload, stored, key_salts, _at = waiting
        if stored not in rec["hashes"]:
            return None
        if rec["digests"] or key_salts is not None:
            try:
                commit = rebuilt_commit_json(loads(payload), rec["digests"], key_salts_of(key_salts))
                if chain_hash(prev, event_line(type_, seq, ts, commit)) == stored:
                    return "salted"
            except Exception:  # noqa: BLE001 - a payload or record no append could write: not proven
                return None
            return None
        return "legacy"


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
    redactions: list[RedactionInfo] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was found (a database that could not be opened is a finding)."""
        return not self.findings


def _hash_finding(sid: str, seq: int) -> Finding:
    return Finding("hash", sid, seq, "stored hash does not chain from the previous event: this "
                                     "event was edited, or one before it removed or reordered")


#: Rows re-hashed together by :func:`_wants`: the batch paths' setup is paid once a page,
#: and a page is what one session's walk holds at a time.
PAGE = 1000


def _want_one(prev_hash: str, seq: int, type_: Any, ts: Any, payload: Any, salt: Any) -> str:
    """The hash event ``seq`` must have (:func:`chain_hash` of its line, from ``prev_hash``),
    or ``"(no canonical line: ...)"`` for a value the append path could never have written:
    the rule, one event at a time (what :func:`_wants` gives for a page)."""
    try:
        if is_event_salt(salt):  # a salted event: its line holds the commit payload (docs/redaction.md)
            return chain_hash(prev_hash, event_line(type_, seq, ts, commit_json(bytes(salt), loads(payload))))
        # unsalted, or redacted (the salt column then holds the kept keys' salts)
        return chain_hash(prev_hash, event_line(type_, seq, ts, payload))
    except Exception as e:  # noqa: BLE001 - a value that the append path could never have written
        return f"(no canonical line: {e})"


# orjson reads a payload as loads() does except where it cannot: it raises for a lone
# surrogate escape or a number beyond a double, and reads a long integer as a float
# (eventstore.log.projection explains the screen for that).
def _parsed(payload: Any) -> Any:
    """``loads(payload)`` when orjson reads it the same, else None (the row then takes the
    per-event rule, :func:`_want_one`, and the walk parses its text itself)."""
    if type(payload) is not str:
        return None
    data = payload.encode("utf-8", "surrogatepass")
    if not no_long_digit_run(data):
        return None
    try:
        return _orjson.loads(data)
    except _orjson.JSONDecodeError:
        return None


def _parsed_page(payloads: list[Any]) -> list[Any]:
    """:func:`_parsed` of each of ``payloads``: one screen for long digit runs over the page
    joined (an object ends in ``}``, so joining makes no run) and one C loop of orjson when
    the whole page passes, else payload by payload."""
    try:
        joined = "".join(payloads).encode("utf-8", "surrogatepass")  # (TypeError: a BLOB or NULL)
        if no_long_digit_run(joined):
            return list(map(_orjson.loads, payloads))
    except (TypeError, _orjson.JSONDecodeError):  # a lone surrogate, no JSON: each payload's own way
        pass
    return list(map(_parsed, payloads))


def _wants(prev_hash: str, rows: list[tuple], parsed: list[Any]) -> list[str]:
    """:func:`_want_one` of each of ``rows`` (``verify_rows`` tuples; ``parsed`` their
    :func:`_parsed` payloads), each chained from the stored hash of the row before it
    (``prev_hash`` before the first): the salted ones' commitments by
    :func:`~eventstore.log.commit.commit_jsons` and the lines by
    :func:`~eventstore.log.line.event_lines`, the shared batch paths. A row they cannot
    take (a payload orjson does not read as loads() does, an odd type or ts) gets the
    per-event rule, as does every row of a run whose batch raises."""
    n = len(rows)
    seqs, _positions, types, tss, payloads, stored, salts = map(list, zip(*rows, strict=True))
    # what each row's line holds after type, seq and ts: a salted row's commit payload, an
    # unsalted (or redacted) row's payload text; None: the row's own rule decides
    event = [s is not None and len(s) == SALT_BYTES for s in salts]
    texts: list[Any] = [None if e or type(p) is not str else p for e, p in zip(event, payloads, strict=True)]
    salted = [i for i in range(n) if event[i] and type(parsed[i]) is dict]
    if salted:
        try:
            commits = commit_jsons([bytes(salts[i]) for i in salted], [parsed[i] for i in salted])
        except Exception:  # noqa: BLE001 - a payload no append wrote: each row's own rule says what
            commits = [None] * len(salted)
        for i, c in zip(salted, commits, strict=True):
            texts[i] = c
    lines: list[Any] = [None] * n
    if (None not in texts and seqs == list(range(seqs[0], seqs[0] + n)) and set(map(type, types)) == {str}
            and set(map(type, tss)) == {float}):
        runs = [(0, n)]  # (most pages: one run)
    else:
        runs = []
        i = 0
        while i < n:  # runs of consecutive seqs whose line the batch can spell
            if texts[i] is None or type(types[i]) is not str or type(tss[i]) is not float:
                i += 1
                continue
            j = i + 1
            while (j < n and texts[j] is not None and seqs[j] == seqs[j - 1] + 1
                   and type(types[j]) is str and type(tss[j]) is float):
                j += 1
            runs.append((i, j))
            i = j
    for i, j in runs:
        try:
            lines[i:j] = event_lines(types[i:j], seqs[i], tss[i:j], texts[i:j])
        except Exception:  # noqa: BLE001 - (a ts no append wrote): each row's own rule
            pass
    prevs = [prev_hash, *(h if isinstance(h, str) else "" for h in stored[:-1])]
    out = []
    for k, line in enumerate(lines):
        want = None
        if line is not None:
            try:
                want = chain_hash(prevs[k], line)
            except Exception:  # noqa: BLE001 - (a lone surrogate in the line): the rule's own text
                want = None
        out.append(_want_one(prevs[k], seqs[k], types[k], tss[k], payloads[k], salts[k]) if want is None else want)
    return out


def _verify_session(backend: AuditReads, sid: str, report: VerifyReport) -> None:
    walk = _Walk(sid)
    feed = walk.feed
    add = walk.findings.append
    genesis = genesis_hash(sid)
    prev_hash = genesis
    expected = 0
    prev_position = -1
    n = 0
    redactions = _Redactions()
    rows_iter = backend.verify_rows(sid)
    while page := list(islice(rows_iter, PAGE)):
        parsed = _parsed_page([r[4] for r in page])
        wants = _wants(prev_hash, page, parsed)
        for (seq, position, type_, ts, payload, stored, salt), want, obj in zip(page, wants, parsed, strict=True):
            n += 1
            if seq != expected:
                gap = f"seq {expected}" if seq - expected == 1 else f"seqs {expected}..{seq - 1}"
                add(Finding("seq", sid, seq, f"seq {seq} follows seq {expected - 1}: {gap} missing"))
            expected = seq + 1
            if position <= prev_position:
                add(Finding("seq", sid, seq, f"position {position} is not after the previous event's "
                                             f"position {prev_position}: events out of commit order"))
            prev_position = position
            if stored != want:
                if not is_event_salt(salt) and isinstance(payload, str):  # maybe redacted: a later record may prove it
                    redactions.mismatch(seq, prev_hash, type_, ts, payload, stored,
                                        None if salt is None else bytes(salt), len(walk.findings))
                else:
                    add(_hash_finding(sid, seq))
            if type_ == REDACTION:
                redactions.record(sid, seq, ts, payload)
            prev_hash = stored if isinstance(stored, str) else ""
            # the walk reads what orjson read (json.loads' result too), else parses the text itself
            feed(seq, type_, obj if type(obj) is dict and type_ in _PARSED else payload)
    late = [(waiting[-1], _hash_finding(sid, seq)) for seq, waiting in redactions.pending.items()]
    for at, finding in sorted(late + redactions.unmarked, key=lambda x: x[0], reverse=True):
        walk.findings.insert(at, finding)  # in place, as if found in the walk
    report.redactions.extend(redactions.infos)
    walk.finish()
    report.findings.extend(walk.findings)
    report.events += n
    report.heads[sid] = (n, prev_hash if n else genesis)


def verify(backend: AuditReads, session_ids: Iterable[str] | None = None) -> VerifyReport:
    """Check the database behind ``backend`` (opened read-only is enough) and return a
    :class:`VerifyReport`.

    Checks the append-only guards (every trigger, with its definition:
    :meth:`~eventstore.backends.capabilities.AuditReads.guard_problems`); then each session (all of
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
