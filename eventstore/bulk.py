"""Bulk JSONL import: whole files in, streaming (export is :mod:`eventstore.export`).

Import (:func:`import_jsonl`) reads a file with :class:`~eventstore.jsonl.JsonlReader`
and stores it in one write transaction of the backend
(:meth:`~eventstore.backends.base.Backend.import_transaction`): all of its events or none
(with ``salvage``, all of its valid prefix). A file naming a session that is already stored is
compared event by event with it: identical means skipped, different is an
:class:`~eventstore.errors.ImportConflict` naming the first line that differs, and events
past the stored head are added only with ``append``.

Memory is bounded by the longest line (a few copies of it), never by the file: rows go to
the database in batches (:data:`BATCH_ROWS` rows or :data:`BATCH_BYTES` bytes of lines).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from . import parse_worker
from .backends import base
from .backends.base import ImportTransaction, Refusal
from .codec import dumps, loads
from .errors import ImportConflict, InvalidJSONL
from .jsonl import JsonlReader
from .parse_worker import WorkerReader
from .validate import _check_session_id

if TYPE_CHECKING:  # pragma: no cover
    from .store import EventStore

__all__ = ["Dropped", "ImportReport", "import_jsonl"]

BATCH_ROWS = 5000  # rows per batch (the backend's fastest bulk insert: multi-row INSERTs, COPY)
BATCH_BYTES = 4 << 20  # bytes of lines per batch

Progress = Callable[[int, int], None]
"""``progress(bytes, events)``: called as an import or export goes, with the bytes read
(or written) and events stored (or written) since the previous call."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """What ``salvage`` left out of a file: lines ``first_line`` to ``last_line`` (1-based,
    ``lines`` of them, ``bytes`` bytes, from the first bad line to the end of the file)
    and ``reason``, the ``FILE:LINE: reason`` of the first bad line."""

    first_line: int
    last_line: int
    lines: int
    bytes: int
    reason: str

    def __str__(self) -> str:
        span = f"line {self.first_line}" if self.lines == 1 else f"lines {self.first_line}-{self.last_line}"
        return f"dropped {span} ({self.lines} line{'s' if self.lines != 1 else ''}, {self.bytes} bytes): {self.reason}"


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What one import did.

    ``status`` is ``"imported"`` (a new session), ``"appended"`` (events added past the
    head of a stored session) or ``"skipped"`` (the stored session already holds every
    event of the file); ``events`` is the number of events this import stored, ``total``
    the session's number of events afterwards, ``lines``/``bytes`` what was read,
    ``normalized`` the number of event lines stored in a canonical form that differs from
    their bytes in the file (export writes the canonical form), ``dropped`` what
    ``salvage`` left out (None when nothing was), ``note`` a remark (empty or one sentence).
    """

    name: str
    session_id: str
    status: str
    events: int
    total: int
    lines: int
    bytes: int
    normalized: int = 0
    dropped: Dropped | None = None
    note: str = ""



def import_jsonl(store: EventStore, source: str | os.PathLike | IO[bytes], *, name: str | None = None,
                 session_id: str | None = None, append: bool = False, salvage: bool = False,
                 progress: Progress | None = None) -> ImportReport:
    """Import one JSONL session file (the reference format) into ``store``, atomically.

    ``source`` is a path or a binary file object (``name`` is what messages call it; a
    path's own name by default). ``session_id`` gives the id of a file that has no
    ``session/meta`` line (a meta line naming another id is an error). ``append`` lets a
    file whose first events equal a stored session's add the events past the stored head;
    ``salvage`` keeps the valid prefix of a file whose tail is bad (truncated by a crash,
    corrupt) and reports what was dropped in :attr:`ImportReport.dropped`.

    Returns an :class:`ImportReport`. Raises :class:`~eventstore.errors.InvalidJSONL`
    (``FILE:LINE: reason``; nothing of the file is stored), its subclass
    :class:`~eventstore.errors.ImportConflict` (the session is stored with other events, or
    the file continues it and ``append`` is off), :class:`~eventstore.errors.InvalidEvent`
    for a bad ``session_id``, :class:`~eventstore.errors.DatabaseError`, ``OSError``.
    """
    if session_id is not None:
        _check_session_id(session_id)
    if isinstance(source, (str, os.PathLike)):
        name = name or os.fspath(source)
        with open(source, "rb") as f:
            st = os.fstat(f.fileno())
            worker = parse_worker.acquire(st.st_size) if stat.S_ISREG(st.st_mode) else None
            if worker is None:
                return _import(store, JsonlReader(f, name, session_id), name, append, salvage, progress)
            try:
                reader = WorkerReader(worker, os.path.abspath(source), name, session_id, st)
                try:
                    if reader.start(BATCH_ROWS, BATCH_BYTES):
                        return _import(store, reader, name, append, salvage, progress)
                finally:
                    reader.close()
            finally:
                worker.lock.release()
            # the worker opened another file by that path (/dev/stdin, /dev/fd/N: its own)
            return _import(store, JsonlReader(f, name, session_id), name, append, salvage, progress)
    name = name or str(getattr(source, "name", "<stream>"))
    return _import(store, JsonlReader(source, name, session_id), name, append, salvage, progress)


def _import(store: EventStore, reader: JsonlReader | WorkerReader, name: str, append: bool, salvage: bool,
            progress: Progress | None) -> ImportReport:
    """import_jsonl's work, reading rows from ``reader`` (in this process or a worker's)."""
    batches = reader.batches(BATCH_ROWS, BATCH_BYTES)
    first_batch = next(batches, None)  # parsed before the write transaction starts
    if reader.session_id is None or (reader.error is not None and not salvage):
        raise reader.error
    sid = reader.session_id

    def in_transaction(tx: ImportTransaction) -> tuple:
        batch = first_batch
        stored = tx.session_meta()
        if stored is None:
            refusal = tx.create_session(time.time(), reader.meta_json)
            if refusal is not None:
                reason = f"the database refused session id {dumps(sid)}: {refusal.message}"
                raise InvalidJSONL(name, reader.meta_line, reason) from None
            head = 0
        else:
            if reader.meta_line and stored != reader.meta_json:
                raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} is already stored with other "
                                     f"session/meta keys ({stored})", sid)
            head = tx.next_seq()
        position = tx.next_position()
        added = 0
        failed: tuple[InvalidJSONL, int] | None = None
        done_bytes = 0
        while batch is not None:
            if reader.error is not None and not salvage:
                raise reader.error
            rows = batch
            lines = reader.batch_lines
            if rows[0][0] < head:  # these events are stored: they must be the same
                k = min(len(rows), head - rows[0][0])
                _compare(tx, name, sid, rows[:k], lines)
                if k < len(rows) and not append:
                    raise _continues(name, lines[k], sid, head)
                rows = rows[k:]
                lines = lines[k:]
                offsets = reader.batch_offsets[k:]
            else:
                offsets = reader.batch_offsets
            if rows:
                if stored is not None and not append:
                    raise _continues(name, lines[0], sid, head)
                refused = tx.insert(rows, position - head)
                if refused is not None:
                    i, refusal = refused
                    err = _refused(tx, name, lines[i], sid, rows[i], refusal)
                    if not salvage:
                        raise err from None
                    added += i
                    failed = (err, offsets[i])
                    break
                added += len(rows)
            if progress is not None:
                progress(reader.bytes - done_bytes, len(rows))
                done_bytes = reader.bytes
            batch = next(batches, None)
        if failed is None and reader.error is not None and not salvage:
            raise reader.error  # the bad line came right after a full batch
        dropped = None
        error = failed or ((reader.error, reader.error_offset) if reader.error is not None else None)
        if error is not None:  # salvage: keep what came before the first bad line
            err, offset = error
            reader.drain()
            first = err.line
            dropped = Dropped(first, reader.lines, reader.lines - first + 1, reader.bytes - offset, str(err))
        elif progress is not None and reader.bytes > done_bytes:
            progress(reader.bytes - done_bytes, 0)
        return stored, head, position, added, dropped

    stored, head, position, added, dropped = store.backend.import_transaction(sid, in_transaction)
    note = ""
    if stored is None:
        status = "imported"
    elif added:
        status = "appended"
    else:
        status = "skipped"
        seen = reader.events
        note = ("the stored session holds the same events" if seen == head else
                f"the stored session holds the file's {seen} events and {head - seen} more")
    return ImportReport(name, sid, status, added, head + added, reader.lines, reader.bytes,
                        reader.normalized, dropped, note)


def _continues(name: str, line: int, sid: str, head: int) -> ImportConflict:
    return ImportConflict(name, line, f"session {dumps(sid)} is already stored with {head} events; this file "
                          f"continues it from seq {head} (use --append to add the rest)", sid)


def _compare(tx: ImportTransaction, name: str, sid: str, rows: list[tuple], lines: list[int]) -> None:
    """Check that ``rows`` (file rows of a stored session) equal the stored events."""
    stored = tx.stored(rows[0][0], rows[-1][0])
    for (seq, t, ts, payload, h), (_s, st, sts, sp, sh), line in zip(rows, stored, lines, strict=False):
        if type(payload) is bytes:
            payload = payload.decode("utf-8")
        what = ("type" if t != st else "ts" if float(ts) != sts else "payload" if payload != sp else
                "hash" if (h.decode() if type(h) is bytes else h) != sh else None)
        if what == "hash":
            raise ImportConflict(name, line, f"session {dumps(sid)} is already stored with the same event at seq "
                                 f"{seq} but another hash: the stored hash chain is broken (run verify)", sid)
        if what is not None:
            raise ImportConflict(name, line, f"session {dumps(sid)} is already stored with other events: "
                                 f"seq {seq} differs ({what})", sid)


def _refused(tx: ImportTransaction, name: str, line: int, sid: str, row: tuple, refusal: Refusal) -> InvalidJSONL:
    """Explain why the database refused the file's row ``row`` at ``line``."""
    if refusal.code == base.PAYLOAD_RESERVED_KEY:  # the reader refuses type/seq/ts keys: an event_id that is no string
        return InvalidJSONL(name, line, "event_id must be a string (it is the event's idempotency key)")
    if refusal.code == base.EVENT_ID_TAKEN:
        payload = row[3].decode("utf-8") if type(row[3]) is bytes else row[3]
        key = loads(payload).get("event_id")
        other = tx.event_id_seq(key) if isinstance(key, str) else None
        where = f"seq {other}" if other is not None else "another event"
        return InvalidJSONL(name, line, f"event_id {dumps(key)} is already used by {where} of session {dumps(sid)} "
                                        f"(event_id is an idempotency key, unique per session)")
    return InvalidJSONL(name, line, f"the database refused this event: {refusal.message}")
