"""Store converted transcripts through the store's public API, appending only what is new.

A transcript file grows while its agent runs. Every import converts the whole file again
(the converters are deterministic, and what they make of a file's first lines does not
change when lines are added after them), then compares the stored events with the first
converted ones, every field of each: the events past the stored head are appended in one
``append_many`` with ``expected_seq`` (all or none), so running the import again, or from two
places at once, never stores an event twice.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO

from eventstore.errors import ImportConflict, SessionExists, SessionNotFound
from eventstore.io.transcripts import get
from eventstore.io.transcripts.common import Converted, read_lines


@dataclass
class SessionResult:
    """What an import did to one session: ``status`` is ``imported`` (new), ``appended`` or
    ``skipped`` (nothing new); ``events`` stored now, ``total`` afterwards, ``held`` source
    lines left for the next run (an API message not yet complete), ``ahead`` the stored
    events past the file's last (an older copy of the file: skipped)."""

    session_id: str
    status: str
    events: int
    total: int
    held: int = 0
    ahead: int = 0


@dataclass
class TranscriptReport:
    """What importing one transcript file did: a :class:`SessionResult` per session,
    ``dropped`` the ``FILE:LINE: reason`` of lines ``salvage`` skipped, ``waiting`` True when
    an incomplete last line was left for the next run."""

    path: str
    format: str
    sessions: list[SessionResult] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    waiting: bool = False
    #: ``{(line type, event type): count}`` over the file's sessions: where its lines went.
    folded: dict = field(default_factory=dict)

    def folded_text(self) -> str:
        """``folded`` in a line: ``assistant lines: 3 assistant/message, 2 assistant/part;
        ...`` (every line of the file is in one or more events)."""
        by_line: dict[str, list[str]] = {}
        for (line, event), n in sorted(self.folded.items()):
            by_line.setdefault(line, []).append(f"{n} {event}")
        return "; ".join(f"{line} lines: {', '.join(v)}" for line, v in by_line.items())


def convert_file(path: str, fmt: str, *, salvage: bool = False,
                 data: bytes | None = None, stream: IO[bytes] | None = None,
                 ) -> tuple[list[Converted], list[str], bool]:
    """Convert one transcript file without a database: ``(sessions, dropped, waiting)``.

    ``fmt`` names a registered transcript format (``claude-code``, ``codex``: see
    :mod:`eventstore.io.transcripts`); ``stream`` is a pipe or stdin to read (or
    ``data`` its bytes, read already): then no ``source_file`` is recorded. Raises
    :class:`~eventstore.errors.InvalidJSONL` (``FILE:LINE: reason``) for a line that is not
    JSON, nested too deeply or too long (unless ``salvage``), ``OSError``, ``ValueError``
    for another ``fmt``.
    """
    convert = get(fmt).convert
    if convert is None:
        raise ValueError(f"no transcript converter for format {fmt!r}")
    parsed = read_lines(path, data, salvage=salvage, stream=stream)
    convs = convert(parsed.lines, path, stream=data is not None or stream is not None)
    return convs, parsed.dropped, parsed.waiting


def _head(store, session_id: str):
    """``(session handle, next seq)`` or ``(None, 0)``."""
    try:
        s = store.session(session_id)
    except SessionNotFound:
        return None, 0
    return s, s.next_seq()


def _is_repair(payload: dict) -> bool:
    """An event ``eventstore repair`` appended (it has no source key): not of the file."""
    return payload.get("repair") is True and "event_id" not in payload


def _added(type_: str, payload: dict) -> bool:
    """An event the store added, not of the file: one ``eventstore repair`` appended, or the
    ``redaction`` event of a secret redacted before storing (``--redact-secrets``)."""
    return _is_repair(payload) or (type_ == "redaction" and payload.get("before_storing") is True)


def _same_payload(stored: dict, converted: dict) -> bool:
    """Whether a stored payload is the converted one: equal, or equal once its secrets are
    redacted as a store that redacts before storing did."""
    if stored == converted:
        return True
    from eventstore.audit.secrets import redacted

    r = redacted(converted)
    return r is not None and r[0] == stored


def _first_difference(s, events: list[tuple[str, dict, float]], n: int) -> tuple[tuple[int, str] | None, int]:
    """Compare the ``n`` stored events of session ``s`` with the converted ``events``
    (``(type, payload, ts)``): ``(difference, matched)``, where ``difference`` is ``(seq,
    "seq S differs (payload)")`` at the first stored event that differs (None when one is
    the beginning of the other) and ``matched`` the converted events found stored. Every
    event is compared, not only the head's key: two rollouts can share a session id and
    their line numbers. Events ``repair`` appended are passed over: the file goes on after
    them."""
    k = 0
    for e in s.events():  # (more may be stored by now than n)
        if e.seq >= n:
            break
        if _added(e.type, e.payload):
            continue
        if k >= len(events):
            k += 1
            continue
        type_, payload, ts = events[k]
        what = ("type" if e.type != type_ else "ts" if e.ts != ts else
                "payload" if not _same_payload(e.payload, payload) else None)
        if what is not None:
            return (e.seq, f"seq {e.seq} differs ({what})"), k
        k += 1
    return None, k


def store_converted(store, conv: Converted, path: str) -> SessionResult:
    """Store one converted session: create it (with its meta) if it is new, then append the
    events past the stored head in one atomic ``append_many``.

    Raises :class:`~eventstore.errors.ImportConflict` when the stored session is not a
    beginning of the converted one (another file, or a file that was rewritten), and what
    ``append_many`` raises (``SeqConflict`` when another import got there first: nothing
    is stored, run again).
    """
    s, n = _head(store, conv.session_id)
    matched = 0
    if n:
        differs, matched = _first_difference(s, conv.events, n)
        if differs is not None:
            seq, what = differs
            raise ImportConflict(path, 0, f"session {conv.session_id!r} is already stored with other events: "
                                          f"{what}", conv.session_id, seq)
        if matched > len(conv.events):  # an older copy of the file: what it holds is stored, and more
            return SessionResult(conv.session_id, "skipped", 0, n, conv.held, ahead=matched - len(conv.events))
    created = False
    if s is None:
        try:
            s = store.create_session(conv.session_id, meta=conv.meta)
            created = True
        except SessionExists:  # another import created it a moment ago
            s = store.session(conv.session_id)
    new = conv.events[matched:]
    if new:
        s.append_many(new, expected_seq=n)
    status = "imported" if created else ("appended" if new else "skipped")
    return SessionResult(conv.session_id, status, len(new), n + len(new), conv.held)


def import_transcript(store, path: str, fmt: str, *, salvage: bool = False,
                      data: bytes | None = None, stream: IO[bytes] | None = None) -> TranscriptReport:
    """Import (or bring up to date) every session of one transcript file (Claude Code, Codex,
    or another registered format).

    ``stream`` is a binary stream to read (a pipe cannot be opened again) and ``data`` the
    file's bytes, already read; by default the file at ``path`` is read. ``path`` names the
    file in messages either way.

    Returns a :class:`TranscriptReport`. Raises :class:`~eventstore.errors.InvalidJSONL`
    (``FILE:LINE: reason``: nothing of the file is stored), :class:`ImportConflict`,
    :class:`~eventstore.errors.DatabaseError`, ``OSError``. Each session is written
    atomically; the sessions of one file (a conversation, its forks and subagents) one
    after the other.
    """
    convs, dropped, waiting = convert_file(path, fmt, salvage=salvage, data=data, stream=stream)
    rep = TranscriptReport(path, fmt, dropped=dropped, waiting=waiting)
    for conv in convs:
        rep.sessions.append(store_converted(store, conv, path))
        for k, n in conv.folded.items():
            rep.folded[k] = rep.folded.get(k, 0) + n
    return rep


class Watcher:
    """Which files changed since the last look: a file is due when its size or mtime moved
    (or it is new). Holds one ``(size, mtime_ns)`` per file. Only regular files are ever
    due: a pipe or device can be read only once (and opening a pipe waits for a writer)."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int]] = {}

    def due(self, files: Iterable[str]) -> Iterator[str]:
        """The files of ``files`` that are new or changed; remembers them as seen."""
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                self.seen.pop(f, None)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            sig = (st.st_size, st.st_mtime_ns)
            if self.seen.get(f) != sig:
                self.seen[f] = sig
                yield f

    def forget(self, f: str) -> None:
        """Make ``f`` due at the next look whether or not it changes (its import failed for
        a reason other than its content)."""
        self.seen.pop(f, None)
