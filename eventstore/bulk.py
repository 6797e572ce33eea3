"""Bulk JSONL import and export: whole files in, whole sessions out, streaming.

Import (:func:`import_jsonl`) reads a file with :class:`~eventstore.jsonl.JsonlReader`
and stores it in one ``BEGIN IMMEDIATE`` transaction: all of its events or none (with
``salvage``, all of its valid prefix). A file naming a session that is already stored is
compared event by event with it: identical means skipped, different is an
:class:`~eventstore.errors.ImportConflict` naming the first line that differs, and events
past the stored head are added only with ``append``. Export (:func:`export_session`,
:func:`export_sessions`) writes sessions as the reference ``save()`` does, byte for byte,
reading the database page by page and writing as it goes.

Memory is bounded by the longest line (a few copies of it), never by the file: rows go to
the database in batches (:data:`BATCH_ROWS` rows or :data:`BATCH_BYTES` bytes of lines).
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import secrets
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import truediv
from pathlib import Path
from typing import IO, TYPE_CHECKING

from . import parse_worker
from .errors import DatabaseError, ImportConflict, InvalidEvent, InvalidJSONL, SessionNotFound
from .jsonl import JsonlReader, _js_float, _orjson, dumps, encodable, event_line, file_name_for, loads, meta_line
from .parse_worker import WorkerReader
from .store import _check_session_id

if TYPE_CHECKING:  # pragma: no cover
    from .store import EventStore

__all__ = ["Dropped", "ImportReport", "export_session", "export_sessions", "import_jsonl"]

BATCH_ROWS = 5000  # rows per batch (several multi-row INSERTs)
BATCH_BYTES = 4 << 20  # bytes of lines per batch
EXPORT_PAGE = 500  # events per read query of an export (one short read transaction each)
EXPORT_BUFFER = 1 << 20  # bytes gathered before each write

GROUP = 50  # rows per INSERT statement (multi-row VALUES)

# The session id and the first position go into the statement as constants (a hex blob
# literal holds any id, NUL included), so each row binds only its own five values; payload
# and hash may come as UTF-8 bytes (the reader's fast path), CAST keeps them TEXT. One
# statement inserts GROUP rows: SQLite's per-statement work (the guard trigger's setup,
# the partial indexes' WHERE) is then paid once per GROUP rows instead of once per row.
_VALUES = "(?{a} + {base}, {sid}, ?{a}, ?{b}, ?{c}, CAST(?{d} AS TEXT), CAST(?{e} AS TEXT))"
_INSERT_HEAD = "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "


def _insert_sql(base: int, sid: str, rows: int) -> str:
    sid_sql = f"CAST(x'{sid.encode('utf-8').hex()}' AS TEXT)"
    return _INSERT_HEAD + ",".join(_VALUES.format(a=5 * i + 1, b=5 * i + 2, c=5 * i + 3, d=5 * i + 4, e=5 * i + 5,
                                                  base=base, sid=sid_sql) for i in range(rows))


class _Inserter:
    """Insert reader rows ``(seq, type, ts, payload, hash)`` of one session, GROUP at a time."""

    def __init__(self, cur: sqlite3.Cursor, sid: str, base: int):
        self.cur = cur
        self.sid = sid
        self.one = _insert_sql(base, sid, 1)
        self.many = _insert_sql(base, sid, GROUP)

    def insert(self, rows: list[tuple]) -> tuple[int, sqlite3.IntegrityError] | None:
        """Insert ``rows``; on a refused row, return ``(its index, the error)`` with the rows
        before it stored and none after it."""
        cur = self.cur
        full = len(rows) - len(rows) % GROUP
        start = 0
        try:
            stored = 0
            if full:
                flat = itertools.chain.from_iterable
                cur.executemany(self.many, [tuple(flat(rows[i:i + GROUP])) for i in range(0, full, GROUP)])
                stored = cur.rowcount
            start = full
            cur.executemany(self.one, rows[full:])
            if stored + max(cur.rowcount, 0) != len(rows):  # a trigger's RAISE(IGNORE) drops rows silently
                raise DatabaseError(f"session {self.sid!r} seqs {rows[0][0]}..{rows[-1][0]}: the database reported "
                                    f"the insert done but stored {stored + max(cur.rowcount, 0)} of {len(rows)} "
                                    f"events (a trigger ignores them: run eventstore verify); nothing was imported")
            return None
        except sqlite3.IntegrityError as e:
            stored = self._head() - rows[0][0]
            if start:  # a single row failed: it is the next one
                return stored, e
        for i in range(stored, len(rows)):  # a group failed: find the row one at a time
            try:
                cur.execute(self.one, rows[i])
            except sqlite3.IntegrityError as e:
                return i, e
        raise AssertionError("a refused group of rows was accepted row by row")  # pragma: no cover

    def _head(self) -> int:
        return self.cur.execute("SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?",
                                (self.sid,)).fetchone()[0]
_STORED = ("SELECT seq, type, ts, payload, hash FROM events "
           "WHERE session_id = ? AND seq >= ? AND seq <= ? ORDER BY seq")

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
    session_id = reader.session_id
    batches = reader.batches(BATCH_ROWS, BATCH_BYTES)

    def in_transaction(cur: sqlite3.Cursor) -> tuple:
        batch = next(batches, None)
        if reader.session_id is None or (reader.error is not None and not salvage):
            raise reader.error
        sid = reader.session_id
        stored = cur.execute("SELECT meta FROM sessions WHERE id = ?", (sid,)).fetchone()
        if stored is None:
            try:
                cur.execute("INSERT INTO sessions (id, created_at, meta) VALUES (?, ?, ?)",
                            (sid, time.time(), reader.meta_json))
            except sqlite3.IntegrityError as e:
                reason = f"the database refused session id {dumps(sid)}: {e}"
                raise InvalidJSONL(name, reader.meta_line, reason) from None
            head = 0
        else:
            if reader.meta_line and stored[0] != reader.meta_json:
                raise ImportConflict(name, reader.meta_line, f"session {dumps(sid)} is already stored with other "
                                     f"session/meta keys ({stored[0]})", sid)
            head = cur.execute("SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?",
                               (sid,)).fetchone()[0]
        position = cur.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()[0]
        inserter = _Inserter(cur, sid, position - head)
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
                _compare(cur, name, sid, rows[:k], lines)
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
                refused = inserter.insert(rows)
                if refused is not None:
                    i, e = refused
                    err = _refused(cur, name, lines[i], sid, rows[i], e)
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
        return sid, stored, head, position, added, dropped

    sid, stored, head, position, added, dropped = store._transact(in_transaction, session_id)
    if added:  # let the write queue checkpoint the WAL (see EventStore._wrote)
        store._wrote(position, position + added - 1, reader.bytes)
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


def _compare(cur: sqlite3.Cursor, name: str, sid: str, rows: list[tuple], lines: list[int]) -> None:
    """Check that ``rows`` (file rows of a stored session) equal the stored events."""
    stored = cur.execute(_STORED, (sid, rows[0][0], rows[-1][0])).fetchall()
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


def _refused(cur: sqlite3.Cursor, name: str, line: int, sid: str, row: tuple,
             e: sqlite3.IntegrityError) -> InvalidJSONL:
    """Explain why the database refused the file's row ``row`` at ``line``."""
    payload = row[3].decode("utf-8") if type(row[3]) is bytes else row[3]
    if "non-string event_id" in str(e):
        return InvalidJSONL(name, line, "event_id must be a string (it is the event's idempotency key)")
    if "events_event_id" in str(e) or "event_id" in str(e):
        key = cur.execute("SELECT ? ->> '$.event_id'", (payload,)).fetchone()[0]
        other = cur.execute("SELECT seq FROM events WHERE session_id = ? AND event_id = ?", (sid, key)).fetchone()
        where = f"seq {other[0]}" if other else "another event"
        return InvalidJSONL(name, line, f"event_id {dumps(key)} is already used by {where} of session {dumps(sid)} "
                                        f"(event_id is an idempotency key, unique per session)")
    return InvalidJSONL(name, line, f"the database refused this event: {e}")


# --- export ------------------------------------------------------------------------------

# The fast export of a page: one query gathers the page's lines in SQLite, type and payload
# of each (``TYPE \x02 PAYLOAD``, joined by ``\n\x02{``: a control character never stands
# unescaped in a JSON text, so splitting at ``\x02{`` gives types and payloads without their
# "{"), and the exact bits of each ts (ts * 2**22 is an integer below 2**63 for
# 2**30 <= ts < 2**41, that is from 2004 on); Python then writes seqs and ts with orjson
# and puts the pieces together (_fast_page). A page holding anything else (an older or odd
# ts, a payload of FAST_PAYLOAD bytes or more, a type that needs escapes, an array-index
# key) goes row by row (_EXPORT), which streams long payloads.
#
# The query does as little per row as it can (callgrind, on the bench corpus): the payload's
# size is its byte length (length() of TEXT counts characters, after copying the text to
# NUL-terminate it; the CAST to BLOB only relabels the value), a long payload's line is a
# lone \x01 that _fast_page looks for in the page (count(line) would copy every line once
# more through the subquery; and a missing line could be made up for, in the split, by a
# type holding \x02{), and the ts range is checked in Python on the page's doubles rather
# than by a CASE per row.
FAST_PAYLOAD = 8192  # bytes: a longer payload goes row by row (memory: EXPORT_PAGE of these)
_FAST_OK = f"length(CAST(payload AS BLOB)) < {FAST_PAYLOAD}"
_EXPORT_FAST = (f"SELECT CAST(group_concat(line, char(10, 2, 123)) AS BLOB), group_concat(m), count(*) "
                f"FROM (SELECT CASE WHEN {_FAST_OK} THEN type || char(2) || payload ELSE char(1) END AS line, "
                f"CAST(ts * 4194304.0 AS INTEGER) AS m "
                f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq)")
_TS_SCALE = 4194304.0  # 2**22
_TS_MIN, _TS_MAX = 1073741824.0, 2199023255552.0  # 2**30, 2**41
_LINE_FMT = b'{"type":"%s","seq":%s,"ts":%s%s'
_EMPTY = b"}\n"  # what is left of "{}"
# A payload the row-by-row path must write: a first key that may be an array index
# (JavaScript writes those first), or whitespace after the "{", which plain SQL could store
# before revision 0006 ("{ }", '{ "a":1}'; a line break or \r sends the page row by row
# anyway). A false hit, a type starting with '"' and a digit, a space or a tab, only costs speed.
_ROW_BY_ROW = re.compile(rb'\x02\{(?:"[0-9]|[ \t])').search


def _fast_page(blob: bytes, mtext: str, first: int, n: int, plain_types: set[bytes]) -> bytes | None:
    """The JSONL text of ``n`` events from seq ``first`` (see _EXPORT_FAST), or None when
    the row-by-row path must write them."""
    if b"\x01" in blob:  # a long payload (or a type holding \x01, which needs an escape anyway)
        return None
    if blob.count(b"\n") != n - 1 or b"\r" in blob:  # a line break in a payload (or a type): row by row
        return None
    ts = list(map(truediv, _orjson.loads("[" + mtext + "]"), itertools.repeat(_TS_SCALE)))  # exact: a power of 2
    # ts * 2**22 was exact only in that range: below it, CAST dropped bits; above it, CAST
    # stopped at 2**63 - 1, which comes back as 2**41
    if len(ts) != n or min(ts) < _TS_MIN or max(ts) >= _TS_MAX:
        return None
    ts_text = _orjson.dumps(ts)
    # orjson writes a finite double as JavaScript does, but for integer values (5.0) and
    # exponents (1e+16); JSON.stringify writes 1764460800 for 1764460800.0
    if b"e" in ts_text or b".0," in ts_text or ts_text.endswith(b".0]"):
        return None
    parts = blob.split(b"\x02{")
    if len(parts) != 2 * n or _ROW_BY_ROW(blob) is not None:
        return None
    parts[-1] += b"\n"
    types = parts[0::2]
    for t in set(types).difference(plain_types):
        text = t.decode("utf-8", "surrogatepass")
        if not encodable(text) or dumps(text) != '"' + text + '"':
            return None  # a type that JSON writes with escapes (and \x02 in a type)
        plain_types.add(t)
    rests = parts[1::2]
    flat: list = [None] * (4 * n)
    flat[0::4] = types
    flat[1::4] = _orjson.dumps(list(range(first, first + n)))[1:-1].split(b",")
    flat[2::4] = (ts_text[1:-1] + b",").replace(b",", b",\x00").split(b"\x00")[:-1]  # "ts,": the payload's comma
    flat[3::4] = rests
    i = -1
    try:
        while True:  # an empty payload: no comma after ts
            i = rests.index(_EMPTY, i + 1)
            flat[4 * i + 2] = flat[4 * i + 2][:-1]
    except ValueError:
        pass
    return (_LINE_FMT * n) % tuple(flat)


# SQLite writes the end of each line (payload minus its "{", newline) as bytes, in C; a
# long payload (BIG_PAYLOAD characters and more) comes whole instead, and Python writes a
# view of it, so that no line is copied more than it must be.
BIG_PAYLOAD = 1 << 16
# A payload that does not start as JSON.stringify starts an object ('{"' or exactly '{}':
# whitespace before or just after the "{", or a BLOB, which plain SQL could store before
# revision 0006) comes whole too, and is written anew.
_CANONICAL_START = "typeof(payload) = 'text' AND (payload GLOB '{\"*' OR payload = '{}')"
_EXPORT = (f"SELECT type, seq, ts, "
           f"CASE WHEN length(payload) < {BIG_PAYLOAD} AND {_CANONICAL_START} THEN CAST(CASE payload "
           f"WHEN '{{}}' THEN '}}' ELSE ',' || substr(payload, 2) END || char(10) AS BLOB) END, "
           f"CASE WHEN length(payload) >= {BIG_PAYLOAD} OR NOT ({_CANONICAL_START}) THEN CAST(payload AS BLOB) END "
           f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq")


def _create_beside(path: Path) -> tuple[int, str]:
    """Create an empty temporary file in ``path``'s folder, for writing, with the mode a new
    file gets there (0666 less the umask, as the reference's writeFileSync gives it), or
    ``path``'s own mode when it exists. ``tempfile.mkstemp`` would make it 0600: an export
    that other users (auditors) could not read. Returns ``(fd, name)``."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = None
    while True:
        tmp = str(path.parent / f".export-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp


def _store_files(store: EventStore) -> list[str]:
    """The files of ``store``'s database (the file, its WAL, shared-memory, journal and
    lock files), as real paths; none for an in-memory store."""
    if store._file is None:
        return []
    base = os.path.realpath(store._file)
    return [base + suffix for suffix in ("", "-wal", "-shm", "-journal", "-lock")]


def _check_not_the_store(store: EventStore, text: str) -> None:
    """Raise ``OSError`` (EINVAL) if ``text`` names one of the store's own files (by any
    path, a link included): an export there would replace the database with JSONL."""
    real = os.path.realpath(text)
    for f in _store_files(store):
        if real == f or (os.path.exists(f) and os.path.exists(text) and os.path.samefile(text, f)):
            raise OSError(errno.EINVAL, "is this store's own database file (export would overwrite it)", text)


def export_session(store: EventStore, session_id: str, dest: str | os.PathLike | IO,
                   progress: Progress | None = None) -> int:
    """Write one session as JSONL, byte-identical to what the reference ``save()`` writes
    for it, and return the number of events written.

    ``dest`` is a path or a file object (binary, or text with an ``encoding``). A path to
    a regular file (or to none yet) is written to a temporary file beside it, then renamed
    into place, so a reader never sees half a file; through a symbolic link, the link's
    target is replaced and the link kept. A path to something else (a FIFO, a device,
    ``/dev/stdout``) is written straight through, as the reference's ``writeFileSync``
    does. Reads :data:`EXPORT_PAGE` events per query and writes about every
    :data:`EXPORT_BUFFER` bytes: memory does not grow with the session.
    Raises :class:`~eventstore.errors.SessionNotFound`, ``OSError`` (``IsADirectoryError``
    for a folder, or a path ending in a slash, ``FileNotFoundError`` for an empty path,
    ``NotADirectoryError`` when a folder of the path is a file, ``PermissionError`` for a
    file the user may not write, ``EINVAL`` for one of the store's own database files; all
    before anything is created).
    """
    if isinstance(dest, (str, os.PathLike)):
        if not encodable(session_id) or not store._read("SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
            raise SessionNotFound(session_id)  # before creating anything
        text = os.fspath(dest)
        if not text:  # Path("") is the current folder; open("") fails so, as the reference save("") does
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
        # A folder is no file to write ("." failed only at the rename, as EBUSY), nor is a
        # path ending in a slash, which Path() would drop ("out/" overwrote the file "out").
        # Nor is one ending in "/." or "/..", which Path() would also drop ("f/." overwrote f).
        if os.path.isdir(text) or text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), text)
        _check_not_the_store(store, text)
        try:
            mode = os.stat(text).st_mode  # through a link, its target
        except FileNotFoundError:  # nothing there yet (or a link to nothing: its target is created)
            mode = None
        except OSError as e:  # ENOTDIR, ENAMETOOLONG, EACCES, ELOOP: as open() would say
            raise OSError(e.errno, e.strerror, text) from None
        if mode is not None:
            if not os.access(text, os.W_OK):  # a read-only file is not replaced
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), text)
            if not stat.S_ISREG(mode):
                try:
                    with open(text, "wb") as f:
                        return export_session(store, session_id, f, progress)
                except OSError as e:  # a write's error (ENOSPC, EPIPE) names no file: this one
                    if e.filename is None:
                        raise OSError(e.errno, e.strerror, text) from None
                    raise
        # A link is followed, not replaced: the rename lands on what it points to.
        path = Path(os.path.realpath(text)) if os.path.islink(text) else Path(text)
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)  # as the reference save() does
            except FileExistsError:  # a folder of the path is a file: say so, as open() would
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), text) from None
            fd, tmp = _create_beside(path)
        except OSError as e:  # named after the file asked for, not the temporary one
            raise OSError(e.errno, e.strerror, text) from None
        try:
            with os.fdopen(fd, "wb") as f:
                n = export_session(store, session_id, f, progress)
                f.flush()
                os.fsync(f.fileno())  # the data is on disk before the rename makes it the file
            os.replace(tmp, path)
            _fsync_folder(path.parent)  # and the rename itself survives a crash
        except BaseException as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            if isinstance(e, OSError) and e.filename in (tmp, None):  # a write's error (ENOSPC) names no file
                raise OSError(e.errno, e.strerror, text) from None
            raise
        return n
    binary = not hasattr(dest, "encoding")
    write = dest.write
    n = 0
    for pieces, nbytes, events in _export_chunks(store, session_id):
        chunk = b"".join(pieces)
        write(chunk if binary else chunk.decode("utf-8"))
        n += events
        if progress is not None:
            progress(nbytes, events)
    return n


def _fsync_folder(folder: Path) -> None:
    """fsync a folder, so that a rename in it is durable (where the system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder: nothing more to do there
        pass
    finally:
        os.close(fd)


def _export_chunks(store: EventStore, session_id: str):
    """Yield ``(pieces, bytes, events)``: the session's lines as a list of byte strings (and
    memoryviews of stored payloads, not copied), about EXPORT_BUFFER bytes at a time.

    Pages of EXPORT_PAGE events, each one short read transaction: _fast_page writes a page in
    one piece when it can, else the page goes row by row."""
    rows = store._read("SELECT meta FROM sessions WHERE id = ?", (session_id,))
    if not rows:
        raise SessionNotFound(session_id)
    out: list = [(meta_line(session_id, rows[0][0]) + "\n").encode("utf-8")]
    size = len(out[0])
    pending = 0  # events in out
    heads: dict[str, str] = {}
    plain_types: set[bytes] = set()
    js_float = _js_float
    fast = _orjson is not None
    last = -1
    while True:
        got = 0
        with store._lock:  # one short read transaction per page
            cur = store._conn.cursor()
            try:
                data = None
                if fast:
                    blob, mtext, n = cur.execute(_EXPORT_FAST, (session_id, last, last + EXPORT_PAGE)).fetchone()
                    if n == 0:
                        break
                    data = _fast_page(blob, mtext, last + 1, n, plain_types)
                if data is not None:
                    got = n
                    out.append(data)
                    size += len(data)
                    pending += n
                else:
                    cur.execute(_EXPORT, (session_id, last, last + EXPORT_PAGE))
                    app = out.append
                    for t, seq, ts, tail, big in cur:
                        payload_head = tail if tail is not None else big
                        # A raw line break can stand in a stored payload only as whitespace
                        # between tokens (plain SQL wrote it): the line is written anew, not
                        # split in two.
                        broken = (b"\r" in tail or tail.find(b"\n", 0, len(tail) - 1) >= 0 if tail is not None
                                  else b"\n" in big or b"\r" in big or big[:2] != b'{"')
                        if payload_head[2:3].isdigit() or broken:  # an array-index key: JavaScript writes it first
                            raw = b"{" + bytes(tail[1:-1]) if tail is not None else bytes(big)
                            text = _rewritten_payload(raw, session_id, seq) if broken else raw.decode()
                            line = (event_line(t, seq, ts, text) + "\n").encode("utf-8")
                            app(line)
                            size += len(line)
                            got += 1
                            pending += 1
                            continue
                        try:
                            head = heads[t]
                        except KeyError:
                            head = heads[t] = '{"type":' + dumps(t) + ',"seq":'
                        r = repr(ts)  # JavaScript's text too, but for 1e+16, 5.0 and the like
                        if "e" in r or r[-2:] == ".0":
                            r = js_float(ts)
                        app(f'{head}{seq},"ts":{r}'.encode())
                        if tail is not None:
                            app(tail)
                            size += len(tail) + 40
                        else:
                            app(b",")
                            app(memoryview(big)[1:])
                            app(b"\n")
                            size += len(big) + 40
                        got += 1
                        pending += 1
                        if size >= EXPORT_BUFFER:
                            yield out, size, pending
                            out = []
                            app = out.append
                            size = pending = 0
            finally:
                cur.close()
        last += EXPORT_PAGE
        if size >= EXPORT_BUFFER:
            yield out, size, pending
            out = []
            size = pending = 0
        if got < EXPORT_PAGE:
            break
    yield out, size, pending


def _rewritten_payload(raw: bytes, session_id: str, seq: int) -> str:
    """The canonical text of a stored payload (UTF-8 ``raw``) that export cannot write as
    it stands: a line break, whitespace before or just after the ``{``, or a BLOB, which
    plain SQL could store (the last two only before revision 0006). Raises
    :class:`DatabaseError` naming the event if it is not a JSON object after all."""
    try:
        payload = loads(raw.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        payload = e
    if not isinstance(payload, dict):
        raise DatabaseError(f"session {session_id!r} seq {seq}: the stored payload is not a JSON object "
                            f"that export can write ({str(payload)[:80] or type(payload).__name__})")
    return dumps(payload)


def export_sessions(store: EventStore, folder: str | os.PathLike, session_ids: Iterable[str] | None = None,
                    progress: Progress | None = None,
                    done: Callable[[str, Path, int], None] | None = None) -> list[tuple[str, Path, int]]:
    """Export sessions to ``folder`` (created if missing), one file each, and return
    ``(session_id, path, events)`` per session.

    ``session_ids`` selects sessions (default: every stored one). File names come from
    :func:`~eventstore.jsonl.file_name_for`: whatever an id holds (``/``, ``..``, NUL, a
    drive letter, upper case), its file lands inside ``folder`` under a name that maps back
    to it alone; an existing file of that name is replaced. ``done(session_id, path,
    events)`` is called after each file. Raises :class:`~eventstore.errors.SessionNotFound`
    and ``OSError`` (``EINVAL`` when a file would land on the store's own database), both
    before writing anything, and ``OSError`` for a file that cannot be written.
    """
    base = Path(folder)
    ids = [i.id for i in store.sessions()] if session_ids is None else list(dict.fromkeys(session_ids))
    for sid in ids:
        if not store._read("SELECT 1 FROM sessions WHERE id = ?", (sid,)):
            raise SessionNotFound(sid)
    base.mkdir(parents=True, exist_ok=True)
    taken: dict[str, str] = {}
    paths = []
    for sid in ids:
        name = file_name_for(sid)
        key = name.lower()
        if key in taken or os.path.basename(name) != name or name in (".", ".."):  # pragma: no cover - by design
            raise InvalidEvent(f"session {sid!r}: export name {name!r} is not unique or not a plain file name")
        taken[key] = sid
        paths.append(base / name)
        _check_not_the_store(store, os.fspath(paths[-1]))  # before writing any file
    result = []
    for sid, path in zip(ids, paths, strict=True):
        n = export_session(store, sid, path, progress)
        result.append((sid, path, n))
        if done is not None:
            done(sid, path, n)
    return result
