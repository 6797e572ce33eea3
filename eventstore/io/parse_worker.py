"""A second process that parses JSONL files while the store inserts: bulk import on two cores.

Importing a file is two jobs of about the same size: parsing and checking its lines
(:class:`~eventstore.io.jsonl.JsonlReader`, Python) and salting each event and building the
line its hash covers (:func:`salted_lines`); and chaining and inserting the rows (SQLite, the
guard trigger; PostgreSQL, COPY). In one process they take turns, and a thread does not
help: the parser needs the GIL all the time, and the inserter needs it between statements. So an import of a file of at
least :data:`PARALLEL_MIN_BYTES` reads it through a worker process (:func:`acquire`: one per
importing process, started at the first such import, serving every later one): the worker
runs the same ``JsonlReader`` (and, when asked, :func:`salted_lines`) and sends each
batch of rows as it is ready, while the store inserts the batch before it.

Protocol (stdin/stdout of ``python -c "from eventstore.io.parse_worker import serve; serve()"``):
each message is an 8-byte little-endian length and a :mod:`marshal` text. The worker first
sends ``(HELLO, its eventstore.io.parse_worker.__file__)``; the store checks that it runs the
same code. A request is ``(path, name, session_id, max_rows, max_bytes, (st_dev, st_ino), salted)``
(the file the importer opened; ``salted``: whether to salt the rows); the answer is
``(OTHER_FILE,)`` when the path opens another file in the worker (``/dev/stdin``,
``/dev/fd/N``, a file replaced since), or a ``(BATCH, rows, batch_lines, batch_offsets, state,
salted)`` message per batch (``salted``: :func:`salted_lines` of the rows, or None), then ``(END, state,
lines, bytes)`` (``lines``/``bytes`` as after :meth:`JsonlReader.drain`), or ``(FAILED,
errno, message)`` when the file cannot be read. ``state`` is the reader's attributes after
the batch (:func:`_state`). Nothing but eventstore's own parent writes to a worker.

The worker ignores SIGINT (Ctrl-C stops the importing process, which rolls back, and the
worker ends with its pipe) and ends when its stdin closes (at the latest when the importing
process exits). An import that stops reading a file early (an error, a conflict) kills the
worker, and the next large import starts another; when a worker cannot start, imports
parse in their own process, as small files always do. Imports from several threads at once:
one uses the worker, the others parse in their own thread.
"""

from __future__ import annotations

import atexit
import marshal
import os
import signal
import struct
import subprocess
import sys
import threading
from typing import IO, Any

import orjson as _orjson

from eventstore.errors import DatabaseError, InvalidJSONL
from eventstore.io.jsonl import JsonlReader
from eventstore.log.codec import loads
from eventstore.log.commit import commit_jsons, new_salts
from eventstore.log.line import event_lines

#: Files at least this large (bytes) are parsed by the worker process; smaller ones in the
#: importing process (a worker costs about half a second to start).
PARALLEL_MIN_BYTES = 1 << 20

#: Rows per batch from the worker (fewer than an in-process import's): the store waits for
#: the first batch of each file, and then inserts one batch while the worker parses the next.
WORKER_BATCH_ROWS = 1000

HELLO, BATCH, END, FAILED, OTHER_FILE = 0, 1, 2, 3, 4
_LEN = struct.Struct("<Q")


def _write(out: IO[bytes], obj: Any) -> None:
    data = marshal.dumps(obj)
    out.write(_LEN.pack(len(data)))
    out.write(data)
    out.flush()


def _read(inp: IO[bytes]) -> Any:
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError
    n = _LEN.unpack(head)[0]
    data = inp.read(n)
    if len(data) < n:
        raise EOFError
    return marshal.loads(data)


def payload_value(text: str) -> Any:
    """A payload as stored, read from its canonical text: by orjson, unless orjson refuses it
    (a lone surrogate escape, a number beyond a double) where
    :func:`~eventstore.log.codec.loads` reads it. An integer past 64 bits comes back as a
    float, which encodes to the same canonical text (such an integer is canonical only as
    JavaScript writes the double)."""
    try:
        return _orjson.loads(text)
    except _orjson.JSONDecodeError:
        return loads(text)


def salted_lines(rows: list[tuple]) -> tuple[list[bytes], list[str]]:
    """Fresh salts for ``rows`` (a reader's ``(seq, type, ts, payload, hash)`` of consecutive
    seqs) and each event's line built from its commit payload under its salt: what the hash
    chain covers for an imported event (docs/redaction.md). The importer chains them; the
    worker makes them for its batches, so that this work is done beside the inserts."""
    salts = new_salts(len(rows))
    commits = commit_jsons(salts, [payload_value(p.decode("utf-8") if type(p) is bytes else p)
                                   for _s, _t, _ts, p, _h in rows])
    # (the reader's rows come with consecutive seqs, so their lines are built as one run)
    return salts, list(event_lines([r[1] for r in rows], rows[0][0], [float(r[2]) for r in rows], commits))


def _salted(batch: list[tuple]) -> tuple[list[bytes], list[str]] | None:
    """:func:`salted_lines` of ``batch``, or None when it fails (a value nested too deeply for
    the encoder): the importing process then salts the batch itself and reports the error as
    it reports any."""
    try:
        return salted_lines(batch)
    except Exception:
        return None


def _state(reader: JsonlReader) -> tuple:
    """The reader's attributes an importer reads between batches."""
    err = reader.error
    return (reader.session_id, reader.meta_json, reader.meta_line, reader.lines, reader.events,
            reader.normalized, reader.bytes, None if err is None else err.line,
            None if err is None else err.reason, reader.error_offset)


def serve() -> None:  # pragma: no cover - runs in the worker process (tests drive it through imports)
    """The worker's main loop: answer requests on stdin until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = os.fdopen(0, "rb", buffering=1 << 16)
    out = os.fdopen(1, "wb", buffering=1 << 16)
    try:
        _write(out, (HELLO, __file__))
        while True:
            try:
                path, name, session_id, max_rows, max_bytes, file_id, salted = _read(inp)
            except EOFError:
                return
            try:
                f = open(path, "rb")
            except OSError as e:
                _write(out, (FAILED, e.errno or 0, e.strerror or str(e)))
                continue
            with f:
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != tuple(file_id):  # /dev/stdin, /dev/fd/N, or replaced
                    _write(out, (OTHER_FILE,))
                    continue
                reader = JsonlReader(f, name, session_id)
                for batch in reader.batches(max_rows, max_bytes):
                    _write(out, (BATCH, batch, reader.batch_lines, reader.batch_offsets, _state(reader),
                                 _salted(batch) if salted and batch else None))
                state = _state(reader)
                reader.drain()
                _write(out, (END, state, reader.lines, reader.bytes))
    except (BrokenPipeError, ConnectionResetError):
        return


class ParseWorker:
    """One worker process (see the module docstring). ``ParseWorker.start()`` returns one,
    or None when it cannot start (no ``sys.executable``, or the child runs other code)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.pid = os.getpid()  # a forked child of the store's process must not use it
        self.lock = threading.Lock()  # one import at a time
        self.broken = False

    @classmethod
    def start(cls) -> ParseWorker | None:
        if not os.path.basename(sys.executable or "").lower().startswith("python"):
            return None  # an embedding program, not an interpreter to run -c with
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.Popen([sys.executable, "-c", "from eventstore.io.parse_worker import serve; serve()"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=env, close_fds=True)
        except OSError:
            return None
        worker = cls(proc)
        try:
            hello = _read(proc.stdout)
        except (EOFError, ValueError, OSError):
            hello = None
        if hello != (HELLO, __file__):
            worker.kill()
            return None
        return worker

    def usable(self) -> bool:
        return not self.broken and self.pid == os.getpid() and self.proc.poll() is None

    def kill(self) -> None:
        """Stop the process now (it may be in the middle of a file)."""
        self.broken = True
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:  # pragma: no cover - already reaped
            pass

    def close(self) -> None:
        """End the process after its current request (its stdin closes)."""
        if self.broken or self.pid != os.getpid():
            return
        self.broken = True
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self.proc.stdout.close()


_worker: ParseWorker | None = None
_cannot_start = False
_manage = threading.Lock()


def acquire(size: int) -> ParseWorker | None:
    """The worker for reading a regular file of ``size`` bytes, its lock held (release it
    with ``worker.lock.release()``), or None: the file is small, another thread's import
    has the worker, or no worker can start."""
    global _worker, _cannot_start
    if size < PARALLEL_MIN_BYTES or _cannot_start:
        return None
    with _manage:
        worker = _worker
        if worker is None or not worker.usable():
            if worker is not None and worker.pid == os.getpid():
                worker.kill()  # (a forked child leaves its parent's worker alone)
            worker = _worker = ParseWorker.start()
            if worker is None:
                _cannot_start = True
                return None
    return worker if worker.lock.acquire(blocking=False) else None


@atexit.register
def _close_at_exit() -> None:
    if _worker is not None:
        _worker.close()


class WorkerReader:
    """A :class:`~eventstore.io.jsonl.JsonlReader` whose parsing runs in a :class:`ParseWorker`:
    the same attributes, :meth:`batches` and :meth:`drain`, for a file given by path. Hold
    the worker's lock while using it; call :meth:`close` when done (it kills the worker if
    the file was not read to its end)."""

    def __init__(self, worker: ParseWorker, path: str, name: str, session_id: str | None,
                 opened: os.stat_result):
        self.worker = worker
        self._file_id = (opened.st_dev, opened.st_ino)
        self._first: tuple | None = None
        self.path = path
        self.name = name
        self._forced_id = session_id
        self.session_id = session_id
        self.meta_json = "{}"
        self.meta_line = 0
        self.lines = self.events = self.normalized = self.bytes = 0
        self.error: InvalidJSONL | None = None
        self.error_offset = 0
        self.batch_lines: list[int] = []
        self.batch_offsets: list[int] = []
        self.batch_salted: tuple[list[bytes], list[str]] | None = None  # salted_lines of the batch
        self._end: tuple[int, int] | None = None  # (lines, bytes) after drain, once the worker said END
        self._started = False

    def _set(self, state: tuple) -> None:
        (self.session_id, self.meta_json, self.meta_line, self.lines, self.events, self.normalized,
         self.bytes, line, reason, self.error_offset) = state
        if line is not None and (self.error is None or self.error.line != line):
            self.error = InvalidJSONL(self.name, line, reason)

    def _next(self) -> tuple:
        try:
            msg = _read(self.worker.proc.stdout)
        except (EOFError, ValueError, OSError):
            self.worker.kill()
            raise self._died() from None
        kind = msg[0]
        if kind == OTHER_FILE:
            return msg
        if kind == FAILED:
            self._end = (0, 0)
            raise OSError(msg[1], msg[2], self.path)
        if kind == END:
            self._set(msg[1])
            self._end = (msg[2], msg[3])
        else:
            self._set(msg[4])
        return msg

    def start(self, max_rows: int, max_bytes: int, salted: bool = False) -> bool:
        """Ask the worker for the file (batches of at most ``max_rows`` rows, or about
        ``max_bytes`` bytes; with ``salted``, each with its :func:`salted_lines` in
        :attr:`batch_salted`); False when the path opens another file there than here."""
        self._started = True
        try:
            _write(self.worker.proc.stdin, (self.path, self.name, self._forced_id,
                                            min(max_rows, WORKER_BATCH_ROWS), max_bytes, self._file_id, salted))
        except OSError:
            self.worker.kill()
            raise self._died() from None
        self._first = self._next()
        if self._first[0] == OTHER_FILE:
            self._started = False
            return False
        return True

    def _died(self) -> DatabaseError:
        return DatabaseError(f"the JSONL parse worker (pid {self.worker.proc.pid}) ended unexpectedly while "
                             f"reading {self.name}; nothing of the file is stored")

    def batches(self, max_rows: int = 20000, max_bytes: int = 16 << 20):
        """Yield the file's rows in batches, as :meth:`JsonlReader.batches` does (after
        :meth:`start`, which set the batch size)."""
        msg, self._first = self._first, None
        while msg is not None:
            if msg[0] == BATCH:
                self.batch_lines, self.batch_offsets, self.batch_salted = msg[2], msg[3], msg[5]
                yield msg[1]
            msg = self._next() if self._end is None else None

    def drain(self) -> None:
        """Read the rest of the file, only counting it (see :meth:`JsonlReader.drain`)."""
        while self._end is None:
            self._next()
        self.lines, self.bytes = self._end

    def close(self) -> None:
        """Leave the worker ready for the next file, or kill it if this file is unfinished."""
        if self._started and self._end is None:
            self.worker.kill()
