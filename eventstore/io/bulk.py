"""Bulk JSONL import: whole files in, streaming (export is :mod:`eventstore.io.export`).

Import (:func:`import_jsonl`) reads a file with :class:`~eventstore.io.jsonl.JsonlReader`
and stores it atomically: all of its events or none (with ``salvage``, all of its valid
prefix). A file of one batch, or one that adds to a stored session, goes in one write
transaction of the backend (:meth:`~eventstore.backends.base.Backend.import_transaction`).
A longer new session goes in transactions of at most :data:`CHUNK_ROWS` rows, each
ended early when another writer waits for the write lock (the backend tells,
:meth:`~eventstore.backends.base.ImportTransaction.writers_waiting`), and stays hidden from
every reader until the last one commits (the ``importing`` table; docs/concurrency.md, "Large imports"). A file naming
a session that is already stored is compared event by event with it: identical means skipped, different is an
:class:`~eventstore.errors.ImportConflict` naming the first line that differs, and events
past the stored head are added only with ``append``. A stream that holds only the rest of
a stored session (``continues``, what :mod:`eventstore.core.copy` sends) is chained to the
stored head instead: its hash there is the one check of what is stored.

Memory is bounded by the longest line (a few copies of it), never by the file: rows go to
the database in batches (:data:`BATCH_ROWS` rows or :data:`BATCH_BYTES` bytes of lines).
"""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any

from eventstore.backends import base
from eventstore.backends.base import ImportTransaction, Refusal
from eventstore.errors import DatabaseError, ImportConflict, InvalidEvent, InvalidJSONL
from eventstore.io import parse_worker
from eventstore.io.jsonl import MAX_LINE_BYTES, JsonlReader
from eventstore.io.parse_worker import WorkerReader, payload_value, salted_lines
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.codec import dumps, loads, meta_difference
from eventstore.log.commit import commit_jsons, is_event_salt
from eventstore.log.line import event_lines
from eventstore.log.validate import check_session_id as _check_session_id

__all__ = ["Dropped", "ImportReport", "import_jsonl"]

BATCH_ROWS = 5000  # rows per batch (the backend's fastest bulk insert: multi-row INSERTs, COPY)
BATCH_BYTES = 4 << 20  # bytes of lines per batch
CHUNK_ROWS = 5000  # rows of each write transaction of a chunked import, at most
CHUNK_BYTES = 16 << 20  # bytes of lines of each, about, at most (the WAL a transaction holds)
#: A redacting store's batch ending in a run of streamed chunks takes the next batches in,
#: up to this many rows, so that the run is scanned whole.
MERGE_ROWS = 100_000
CHUNK_SLICE = 250  # rows inserted between two looks for a waiting writer: a waiter waits about this long

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



def import_jsonl(store: Any, source: str | os.PathLike | IO[bytes], *, name: str | None = None,
                 session_id: str | None = None, append: bool = False, salvage: bool = False,
                 progress: Progress | None = None, created_at: float | None = None,
                 continues: tuple[int, str] | None = None, max_line: int | None = MAX_LINE_BYTES,
                 source_rows: Callable[[int], tuple[bytes | None, str] | None] | None = None) -> ImportReport:
    """Import one JSONL session file (the reference format) into ``store``, atomically.

    ``source`` is a path or a binary file object (``name`` is what messages call it; a
    path's own name by default). ``session_id`` gives the id of a file that has no
    ``session/meta`` line (a meta line naming another id is an error). ``append`` lets a
    file whose first events equal a stored session's add the events past the stored head;
    ``salvage`` keeps the valid prefix of a file whose tail is bad (truncated by a crash,
    corrupt) and reports what was dropped in :attr:`ImportReport.dropped`.

    ``created_at`` (seconds since the epoch, a finite number) is the ``sessions.created_at``
    of a session this import creates; by default the time of the import (the JSONL format
    carries no creation time: a ``created_at`` key of a ``session/meta`` line is a meta key
    like any other). A session already stored keeps its own. :func:`eventstore.core.copy.copy_sessions`
    passes the source's, so that a copied session keeps its row (and its ``meta_hash``).

    ``continues`` ``(seq, hash)`` says that ``source`` holds a stored session's events from
    ``seq`` on (its ``session/meta`` line, then seqs ``seq``, ``seq + 1``, ...), chained to
    ``hash``, the hash of its event ``seq - 1`` (:func:`~eventstore.log.chain.genesis_hash` of
    the id for 0): the stored session must hold at least ``seq`` events, the one at ``seq -
    1`` with that hash (which the chain makes equal to the stored events before it; they are
    not read), and the same meta. The events past the stored head are added (as with
    ``append``), in one transaction; those the store already holds are compared.

    ``max_line`` is the longest line read (64 MiB: a longer one is an ``InvalidJSONL``, so
    that no input grows memory past a few copies of it); None reads any line, for a stream
    of a store's own export (:mod:`eventstore.core.copy`).

    ``source_rows`` (seq -> ``(salt or None, stored hash)`` in the store the stream was
    exported from, or None) gives the events their salts and the hashes that store gave
    them (what :mod:`eventstore.core.copy` passes: the JSONL format carries no salts;
    docs/redaction.md): a salted event is hashed from its commit payload, and a redacted one
    keeps its source hash (its redaction events prove it, as in the source). Without it each
    event gets a fresh salt (a new chain: the hashes are not the file's lines').

    Returns an :class:`ImportReport`. Raises :class:`~eventstore.errors.InvalidJSONL`
    (``FILE:LINE: reason``; nothing of the file is stored), its subclass
    :class:`~eventstore.errors.ImportConflict` (the session is stored with other events, or
    the file continues it and ``append`` is off; with ``continues``: the session is not
    stored, holds fewer than ``seq`` events or another hash at ``seq - 1``; ``seq`` names
    the event), :class:`~eventstore.errors.InvalidEvent`
    for a bad ``session_id`` or ``created_at``, :class:`~eventstore.errors.DatabaseError`, ``OSError``.
    """
    if session_id is not None:
        _check_session_id(session_id)
    if created_at is not None:
        created_at = _check_created_at(created_at)
    if continues is not None:  # one transaction, chained to the stored head: read in this process
        with ExitStack() as opened:
            if isinstance(source, (str, os.PathLike)):
                name = name or os.fspath(source)
                source = opened.enter_context(open(source, "rb"))
            name = name or str(getattr(source, "name", "<stream>"))
            reader = JsonlReader(source, name, session_id, continues, max_line)
            batches, sid = _first(reader, salvage, store, continues)
            batches.salts = source_rows
            return _import_one(store, reader, batches, name, sid, True, salvage, progress, None, continues)
    if isinstance(source, (str, os.PathLike)):
        name = name or os.fspath(source)
        with open(source, "rb") as f:
            st = os.fstat(f.fileno())
            # (the worker reads with the default line limit)
            worker = (parse_worker.acquire(st.st_size) if stat.S_ISREG(st.st_mode) and max_line == MAX_LINE_BYTES
                      else None)
            if worker is None:
                return _import(store, JsonlReader(f, name, session_id, max_line=max_line), name, append, salvage,
                               progress, created_at, source_rows)
            try:
                reader = WorkerReader(worker, os.path.abspath(source), name, session_id, st)
                try:
                    # the worker salts the rows too, unless a copy's source salts them or the
                    # store rewrites them first (it redacts secrets)
                    fresh = source_rows is None and getattr(store, "secret_filter", None) is None
                    if reader.start(BATCH_ROWS, BATCH_BYTES, fresh):
                        return _import(store, reader, name, append, salvage, progress, created_at, source_rows)
                finally:
                    reader.close()
            finally:
                worker.lock.release()
            # the worker opened another file by that path (/dev/stdin, /dev/fd/N: its own)
            return _import(store, JsonlReader(f, name, session_id, max_line=max_line), name, append, salvage,
                           progress, created_at, source_rows)
    name = name or str(getattr(source, "name", "<stream>"))
    return _import(store, JsonlReader(source, name, session_id, max_line=max_line), name, append, salvage,
                   progress, created_at, source_rows)


def _check_created_at(created_at) -> float:
    try:
        value = float(created_at) if type(created_at) in (int, float) else math.nan
    except OverflowError:
        value = math.nan
    if not math.isfinite(value):
        raise InvalidEvent(f"created_at must be a finite number of seconds since the epoch, not {created_at!r}")
    return value


def _import(store: Any, reader: JsonlReader | WorkerReader, name: str, append: bool, salvage: bool,
            progress: Progress | None, created_at: float | None,
            source_rows: Callable[[int], tuple[bytes | None, str] | None] | None = None) -> ImportReport:
    """import_jsonl's work, reading rows from ``reader`` (in this process or a worker's).

    A file of one batch, or one that adds to a session already stored (``append``), goes in
    one write transaction. A longer new session goes in chunks (:func:`_import_chunked`)."""
    batches, sid = _first(reader, salvage, store)
    batches.salts = source_rows
    if batches.more():
        report = _import_chunked(store, reader, batches, name, sid, salvage, progress, created_at)
        if report is not None:
            return report
    return _import_one(store, reader, batches, name, sid, append, salvage, progress, created_at)


def _first(reader: JsonlReader | WorkerReader, salvage: bool = False, store: Any = None,
           continues: tuple[int, str] | None = None) -> tuple[_Batches, str]:
    """``(reader's batches, the session id)`` once the first batch is read; raises the
    reader's error when the file names no session or (without salvage) fails there. A
    store that redacts secrets before storing gets its rows rewritten (``batches.redactor``)."""
    batches = _Batches(reader)
    if reader.session_id is None or (reader.error is not None and not salvage):
        raise reader.error
    secrets = getattr(store, "secret_filter", None)
    if secrets is not None:
        from eventstore.audit.secrets import RowRedactor

        batches.redactor = RowRedactor(secrets, reader.session_id, continues)
    return batches, reader.session_id


class _Batches:
    """The reader's batches with their lines, offsets and bytes read, parsed one ahead (the
    reader reuses its line lists; the first batch is parsed before any transaction)."""

    def __init__(self, reader: JsonlReader | WorkerReader):
        self.reader = reader
        self._it = reader.batches(BATCH_ROWS, BATCH_BYTES)
        self._ahead: list[tuple] = []
        self.pending: tuple | None = None  # the rest of a batch split between two transactions
        self.finished = False  # the file is stored (or, with salvage, its valid prefix)
        self.done_bytes = 0  # bytes reported to progress
        self.salts: Callable[[int], tuple | None] | None = None  # a copy's source rows by seq (import_jsonl)
        self.prev: str | None = None  # with salts: the hash the next inserted row chains from
        self.redactor = None  # rewrites the rows of a store that redacts secrets before storing
        self._salted: list[tuple[int, list[bytes], list[str]]] = []  # the worker's salted_lines by first seq
        self._fill(2 if self._fill(1) else 1)

    def _fill(self, n: int) -> bool:
        r = self.reader
        while len(self._ahead) < n:
            rows = next(self._it, None)
            if rows is None:
                return False
            self._ahead.append((rows, list(r.batch_lines), list(r.batch_offsets), r.bytes))
            salted = getattr(r, "batch_salted", None)
            if salted is not None and rows:
                self._salted.append((rows[0][0], *salted))
        return True

    def _salted_from(self, seq: int) -> None:
        """Drop the worker's salted lines of the events before ``seq`` (compared with stored
        ones, or inserted): they stay only for the batches read ahead."""
        done = self._salted
        while done and done[0][0] + len(done[0][1]) <= seq:
            done.pop(0)

    def salted(self, rows: list[tuple]) -> tuple[list[bytes], list[str]] | None:
        """:func:`~eventstore.io.parse_worker.salted_lines` of ``rows`` (consecutive seqs of
        one batch, in the order they are inserted) as the worker made them, or None when it
        did not; those of the rows before them are dropped."""
        seq0, n = rows[0][0], len(rows)
        self._salted_from(seq0)
        done = self._salted
        if not done or not done[0][0] <= seq0 or seq0 + n > done[0][0] + len(done[0][1]):
            return None
        first, salts, lines = done[0]
        return salts[seq0 - first:seq0 - first + n], lines[seq0 - first:seq0 - first + n]

    def meta_json(self) -> str:
        """The file's session/meta keys as stored (a redacting store's markers in place of secrets)."""
        meta = self.reader.meta_json
        return meta if self.redactor is None else self.redactor.meta_json(meta)

    def more(self) -> bool:
        """Whether more than one batch is left."""
        return len(self._ahead) > 1

    def more_left(self) -> bool:
        """Whether a batch is left."""
        return bool(self._ahead)

    def next(self) -> tuple | None:
        """``(rows, lines, offsets, bytes read after them)``, or None at the end."""
        if not self._ahead:
            return None
        batch = self._ahead.pop(0)
        if batch[0]:  # (what the worker salted for the batches before it is not needed now)
            self._salted_from(batch[0][0][0])
        self._fill(1)
        # a redacting store sees a run of streamed chunks whole: a secret split across its
        # chunks is found only in their joined deltas (eventstore.audit.secrets.ChunkRuns)
        while (self.redactor is not None and batch[0] and batch[0][-1][1] == "assistant/chunk" and self._ahead
               and len(batch[0]) < MERGE_ROWS):
            more = self._ahead.pop(0)
            self._fill(1)
            batch = (batch[0] + more[0], batch[1] + more[1], batch[2] + more[2], more[3])
        return batch


def _import_one(store: Any, reader: JsonlReader | WorkerReader, batches: _Batches, name: str, sid: str,
                append: bool, salvage: bool, progress: Progress | None, created_at: float | None,
                continues: tuple[int, str] | None = None) -> ImportReport:
    """The whole file in one write transaction."""
    def in_transaction(tx: ImportTransaction) -> tuple:
        stored = tx.session_meta()
        if stored is None and continues is not None:
            state = "has an unfinished import" if tx.importing() is not None else "is not stored"
            raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} {state}: there is nothing "
                                 f"this rest of it continues", sid)
        if stored is None:
            _create(tx, reader, name, sid, created_at, batches.meta_json())
            head = 0
        else:
            if tx.importing() is not None:
                raise _unfinished(name, reader, sid)
            if reader.meta_line and stored != batches.meta_json():
                differ = meta_difference(stored, batches.meta_json(), "stored", "here")
                raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} is already stored with other "
                                     f"session/meta keys: {differ}", sid)
            head = tx.next_seq()
            if continues is not None:
                _check_continues(tx, reader, name, sid, head, *continues)
        added, dropped = _store_batches(tx, reader, batches, name, sid, head, stored is None or append, salvage,
                                        progress, None)
        return stored, head, added, dropped

    stored, head, added, dropped = store.import_transaction(sid, in_transaction)
    return _report(reader, name, sid, "imported" if stored is None else None, head, added, dropped)


def _import_chunked(store: Any, reader: JsonlReader | WorkerReader, batches: _Batches, name: str, sid: str,
                    salvage: bool, progress: Progress | None, created_at: float | None) -> ImportReport | None:
    """A new session (or the rest of an unfinished import of it) in transactions of at most
    :data:`CHUNK_ROWS` rows (:data:`CHUNK_BYTES` of payload), each ended after the slice of
    :data:`CHUNK_SLICE` rows during which another writer came to wait for the lock; the
    session hidden until the last one commits. None when the session is stored and complete
    (the caller imports in one transaction).

    The first transaction stores the sessions row, an ``importing`` row naming this
    process's import lock and the first chunk; the last deletes the ``importing`` row. An
    import that fails in its first transaction stores nothing; one that fails or dies later
    leaves its rows stored and hidden, and the next import of the file resumes it (its
    stored events are compared with the file's, as for any stored session)."""
    lock = store.import_lock(sid)
    if lock is None:
        raise ImportConflict(name, reader.meta_line or 1, f"session {dumps(sid)} is being imported by another "
                             f"process right now", sid)
    unfinished = False  # an importing row of ours is stored: keep the lock file for the next importer
    try:
        def begin(tx: ImportTransaction) -> int | None:
            stored = tx.session_meta()
            if stored is None:
                _create(tx, reader, name, sid, created_at, batches.meta_json())
                tx.begin_import(tx.next_position(), lock.owner, time.time())
                return 0
            if tx.importing() is None:
                return None
            if stored != batches.meta_json():
                raise ImportConflict(name, reader.meta_line or 1, f"session {dumps(sid)} has an unfinished import "
                                     f"with other session/meta keys: "
                                     f"{meta_difference(stored, batches.meta_json(), 'stored', 'here')}", sid)
            tx.take_over(lock.owner)
            return tx.next_seq()

        head: int | None = None

        def chunk(tx: ImportTransaction) -> tuple | None:
            nonlocal head
            if head is None:  # the first transaction: begin or resume, and store the first chunk
                head = begin(tx)
                if head is None:
                    return None
            done, dropped = _store_batches(tx, reader, batches, name, sid, head, True, salvage, progress, CHUNK_ROWS)
            if batches.finished:
                tx.end_import()
            return done, dropped

        added = 0
        try:
            while True:
                # (a transaction that ended for waiting writers lets them in before it returns)
                result = store.import_transaction(sid, chunk)
                if result is None:
                    return None
                unfinished = True
                n, dropped = result
                added += n
                if batches.finished:
                    break
        except (InvalidJSONL, DatabaseError) as e:
            if not unfinished:  # the first transaction failed: nothing is stored
                raise
            raise _left_hidden(e, reader, name, sid, head + added) from None
        unfinished = False
    finally:
        lock.release(unlink=not unfinished)
    # a resumed import makes the stored prefix visible with the rest: it imported them all
    return _report(reader, name, sid, "imported", 0, head + added, dropped,
                   f"completed an unfinished import that had stored {head} events" if head else "")


def _left_hidden(e: InvalidJSONL | DatabaseError, reader, name: str, sid: str, stored: int) -> Exception:
    """``e`` (which stopped a chunked import after some chunks were committed) saying what
    is stored: the ``stored`` events of the session, hidden (an unfinished import) until an
    import of the whole file completes it; and, when the file is longer now than what was
    read, that it grew meanwhile (its last line was cut where its writer was)."""
    grew = e is reader.error and _grew_past(name, reader.error_offset, reader.bytes)
    why = " (the file grew while it was read: another process is writing it)" if grew else ""
    if grew:
        how = f"once its writer is done, importing {name} again completes it"
    elif e is reader.error:  # a bad line: the same file stops there again
        how = f"importing {name} again once that line is mended, or with --salvage (the lines before it), completes it"
    else:
        how = f"importing {name} again completes it"
    kept = (f"the {stored} events of session {dumps(sid)} that its earlier chunks stored stay stored and hidden "
            f"(an unfinished import): {how}")
    if isinstance(e, ImportConflict):
        return ImportConflict(e.path, e.line, f"{e.reason}{why}; {kept}", e.session_id, e.seq)
    if isinstance(e, InvalidJSONL):
        return InvalidJSONL(e.path, e.line, f"{e.reason}{why}; {kept}", e.seq)
    return DatabaseError(f"{e}. That was one chunk of a longer import: {kept}")


def _grew_past(path: str, offset: int, end: int) -> bool:
    """Whether the file ``path`` is longer now than the ``end`` bytes a reader read, and
    its line at ``offset`` (the bad one) ran to that end: the reader met the file's end in
    the middle of a line that its writer was still writing."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode) or os.fstat(f.fileno()).st_size <= end:
                return False
            f.seek(offset)
            left = end - offset
            while left > 0:  # a piece at a time: the line may be long
                piece = f.read(min(left, 1 << 20))
                if not piece or b"\n" in piece:
                    return False
                left -= len(piece)
            return True
    except OSError:
        return False


def _create(tx: ImportTransaction, reader, name: str, sid: str, created_at: float | None, meta_json: str) -> None:
    refusal = tx.create_session(time.time() if created_at is None else created_at, meta_json)
    if refusal is not None:
        reason = f"the database refused session id {dumps(sid)}: {refusal.message}"
        raise InvalidJSONL(name, reader.meta_line, reason) from None


def _unfinished(name: str, reader, sid: str) -> ImportConflict:
    return ImportConflict(name, reader.meta_line or 1, f"session {dumps(sid)} has an unfinished import (another "
                          f"process is importing it, or an import of it failed): import its whole file again to "
                          f"complete it", sid)


def _store_batches(tx: ImportTransaction, reader, batches: _Batches, name: str, sid: str, head: int, may_add: bool,
                   salvage: bool, progress: Progress | None, max_rows: int | None) -> tuple[int, Dropped | None]:
    """Store the file's rows from ``batches`` in ``tx`` (all of them; or, when ``max_rows``
    is given, slices of :data:`CHUNK_SLICE` rows up to ``max_rows`` rows or :data:`CHUNK_BYTES`,
    stopping early after a slice during which a writer came to wait, the rest of a batch
    left in ``batches.pending``; the file's last slice ends it in this transaction): rows below
    ``head`` (stored already) are compared, the rest inserted. Returns ``(rows inserted,
    what salvage dropped or None)``; ``batches.pending`` is None when the file is done.
    Raises InvalidJSONL, ImportConflict."""
    position0 = None
    added = taken = size = 0
    failed: tuple[InvalidJSONL, int] | None = None
    first = True  # the first rows this transaction inserts chain from the stored event before them
    while True:
        fresh = batches.pending is None
        item = batches.next() if fresh else batches.pending
        batches.pending = None
        if item is None:
            break
        if reader.error is not None and not salvage:
            raise reader.error
        rows, lines, offsets, nbytes = item
        if fresh and batches.redactor is not None:  # the whole batch, before slicing: a run of chunks is in one
            rows, lines, offsets = batches.redactor.rows(rows, lines, offsets)
        if max_rows is not None and len(rows) > min(CHUNK_SLICE, max_rows - taken):
            k = max(1, min(CHUNK_SLICE, max_rows - taken))
            while k < len(rows) and rows[k][1] == "redaction" and batches.redactor is not None:
                k += 1  # an event redacted before storing goes with its redaction event
            if k < len(rows):
                batches.pending = (rows[k:], lines[k:], offsets[k:], nbytes)
                rows, lines, offsets, nbytes = rows[:k], lines[:k], offsets[:k], None
        taken += len(rows)
        if rows and rows[0][0] < head:  # these events are stored: they must be the same
            k = min(len(rows), head - rows[0][0])
            _compare(tx, name, sid, rows[:k], lines)
            if k < len(rows) and not may_add:
                raise _continues(name, lines[k], sid, head)
            rows, lines, offsets = rows[k:], lines[k:], offsets[k:]
        if rows:
            if not may_add:
                raise _continues(name, lines[0], sid, head)
            if position0 is None:
                position0 = tx.next_position() - rows[0][0]
            rows = _salted(tx, batches, sid, rows, first)
            first = False
            refused = tx.insert(rows, position0)
            if refused is not None:
                i, refusal = refused
                err = _refused(tx, name, lines[i], sid, rows[i], refusal)
                if not salvage:
                    raise err from None
                added += i
                failed = (err, offsets[i])
                batches.pending = None
                break
            added += len(rows)
        if progress is not None:
            progress(0 if nbytes is None else nbytes - batches.done_bytes, len(rows))
            if nbytes is not None:
                batches.done_bytes = nbytes
        if max_rows is not None:
            if rows:  # the lines' bytes (the last one's payload for its line)
                size += offsets[-1] - offsets[0] + len(rows[-1][3])
            if taken >= max_rows or size >= CHUNK_BYTES or tx.writers_waiting():
                if batches.pending is None and not batches.more_left():
                    continue  # the file's end: finish it in this transaction
                return added, None
    if failed is None and reader.error is not None and not salvage:
        raise reader.error  # the bad line came right after a full batch
    dropped = None
    error = failed or ((reader.error, reader.error_offset) if reader.error is not None else None)
    if error is not None:  # salvage: keep what came before the first bad line
        err, offset = error
        reader.drain()
        first = err.line
        dropped = Dropped(first, reader.lines, reader.lines - first + 1, reader.bytes - offset, str(err))
    elif progress is not None and reader.bytes > batches.done_bytes:
        progress(reader.bytes - batches.done_bytes, 0)
        batches.done_bytes = reader.bytes
    batches.finished = True
    return added, dropped


def _report(reader, name: str, sid: str, status: str | None, head: int, added: int, dropped: Dropped | None,
            note: str = "") -> ImportReport:
    if status is None:
        if added:
            status = "appended"
        else:
            status = "skipped"
            seen = reader.events
            note = note or ("the stored session holds the same events" if seen == head else
                            f"the stored session holds the file's {seen} events and {head - seen} more")
    return ImportReport(name, sid, status, added, head + added, reader.lines, reader.bytes,
                        reader.normalized, dropped, note)


def _salted(tx: ImportTransaction, batches: _Batches, sid: str, rows: list[tuple], first: bool) -> list[tuple]:
    """``rows`` as they are stored: each with a salt, hashed from its commit payload
    (docs/redaction.md), chained from the stored event before the first row when ``first``,
    else from the last row this transaction inserted. A fresh salt for each event, or, for a
    copy (``batches.salts``: the source's ``(salt, hash)`` by seq), the source's salt, and
    for an event the source holds without one (unsalted, or redacted: its salt column then
    holds the kept keys' salts, carried as they are), its source hash (its redaction events
    prove it, as in the source)."""
    prev = batches.prev
    if first or prev is None:
        seq0 = rows[0][0]
        prev = genesis_hash(sid) if seq0 == 0 else tx.stored(seq0 - 1, seq0 - 1)[0][4]
        prev = prev.decode() if type(prev) is bytes else prev
    source = batches.salts
    if tx.stores_salts and source is None:  # an import's fresh salts: every event salted
        salted = batches.salted(rows) if batches.redactor is None else None  # (the worker's, made beside the inserts)
        salts, lines = salted if salted is not None else salted_lines(rows)
        hashes: list = [None] * len(rows)
    else:
        texts = [p.decode("utf-8") if type(p) is bytes else p for _s, _t, _ts, p, _h in rows]
        if not tx.stores_salts:  # a backend without salts: the events chain as their lines
            salts, hashes = [None] * len(rows), [None] * len(rows)
        else:
            salts, hashes = zip(*[source(r[0]) or (None, None) for r in rows], strict=True)
        # each salted event by its commit payload, the others by their own
        commits = commit_jsons([s for s in salts if is_event_salt(s)],
                               [payload_value(t) for t, s in zip(texts, salts, strict=True) if is_event_salt(s)])
        commits.reverse()
        hashed = [commits.pop() if is_event_salt(s) else text for text, s in zip(texts, salts, strict=True)]
        # (the reader's rows come with consecutive seqs, so their lines are built as one run)
        lines = event_lines([r[1] for r in rows], rows[0][0], [float(r[2]) for r in rows], hashed)
    out = []
    for (seq, t, ts, payload, _h), line, salt, source_hash in zip(rows, lines, salts, hashes, strict=True):
        prev = chain_hash(prev, line)
        if source_hash is not None and not is_event_salt(salt):
            prev = source_hash
        out.append((seq, t, ts, payload, prev, salt) if tx.stores_salts else (seq, t, ts, payload, prev))
    batches.prev = prev
    return out


def _check_continues(tx: ImportTransaction, reader, name: str, sid: str, head: int, seq: int, hash_: str) -> None:
    """Check that the stored session holds ``seq`` events, the last of them (seq - 1) with
    ``hash_``: then, by the hash chain, they are the events the file continues."""
    if head < seq:
        raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} is stored with {head} events, but this "
                             f"rest of it starts at seq {seq}", sid, head)
    if seq > 0:
        stored = tx.stored(seq - 1, seq - 1)[0][4]
        if (stored.decode() if type(stored) is bytes else stored) != hash_:
            raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} is stored with other events: the "
                                 f"hash of seq {seq - 1} differs", sid, seq - 1)


def _continues(name: str, line: int, sid: str, head: int) -> ImportConflict:
    return ImportConflict(name, line, f"session {dumps(sid)} is already stored with {head} events; this file "
                          f"continues it from seq {head} (use --append to add the rest)", sid, head)


def _compare(tx: ImportTransaction, name: str, sid: str, rows: list[tuple], lines: list[int]) -> None:
    """Check that ``rows`` (file rows of a stored session) equal the stored events."""
    stored = tx.stored(rows[0][0], rows[-1][0])
    for (seq, t, ts, payload, _h), (_s, st, sts, sp, _sh), line in zip(rows, stored, lines, strict=False):
        if type(payload) is bytes:
            payload = payload.decode("utf-8")
        # (not the hash: a stored event is salted, so the file's line does not give its hash;
        # verify checks the stored chain)
        what = "type" if t != st else "ts" if float(ts) != sts else "payload" if payload != sp else None
        if what is not None:
            raise ImportConflict(name, line, f"session {dumps(sid)} is already stored with other events: "
                                 f"seq {seq} differs ({what})", sid, seq)


def _refused(tx: ImportTransaction, name: str, line: int, sid: str, row: tuple, refusal: Refusal) -> InvalidJSONL:
    """Explain why the database refused the file's row ``row`` at ``line``."""
    seq = row[0]
    if refusal.code == base.PAYLOAD_RESERVED_KEY:  # the reader refuses type/seq/ts keys: an event_id that is no string
        return InvalidJSONL(name, line, "event_id must be a string (it is the event's idempotency key)", seq)
    if refusal.code == base.EVENT_ID_TAKEN:
        payload = row[3].decode("utf-8") if type(row[3]) is bytes else row[3]
        key = loads(payload).get("event_id")
        other = tx.event_id_seq(key) if isinstance(key, str) else None
        where = f"seq {other}" if other is not None else "another event"
        return InvalidJSONL(name, line, f"event_id {dumps(key)} is already used by {where} of session {dumps(sid)} "
                                        f"(event_id is an idempotency key, unique per session)", seq)
    return InvalidJSONL(name, line, f"the database refused this event: {refusal.message}", seq)
