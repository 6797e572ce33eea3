"""The write queue: writers wait for each other in the kernel, not in SQLite's busy handler.

SQLite makes a writer that finds the database locked sleep and retry, in growing steps
(1, 2, 5, 10, ... up to 100 ms a sleep). Under contention a writer can keep losing the
race to writers that come back sooner, and single appends stall for hundreds of
milliseconds (see docs/concurrency.md for the figures). So every write transaction of an
:class:`~eventstore.EventStore` first takes an exclusive ``flock`` on a sidecar file beside
the database (``DB-lock``, like SQLite's ``DB-wal`` and ``DB-shm``), and only then runs
``BEGIN IMMEDIATE``. Waiters block in the kernel, which wakes them the moment the holder
releases the lock; no one sleeps past that moment.

The lock is advisory and only between eventstore writers: other programs writing the file
(``sqlite3`` shell) are still kept out by SQLite's own lock and busy timeout. The kernel
releases the lock when its holder dies (even by ``SIGKILL``), so a crash never wedges the
queue.

The uncontended path costs two ``flock`` system calls per write transaction (about 2
microseconds). A contended wait is bounded by the busy timeout: ``flock`` itself has no
timeout, so the blocking call runs on a helper thread (one per lock, started on first
contention) while the writer waits on an event with the timeout; a wait that times out is
abandoned, and the helper releases the lock as soon as it gets it.

A holder can ask whether anyone waits (:meth:`WriteLock.others_waiting`; a long import ends
its chunk then and lets them in): a waiter holds a shared byte-range lock (an open file
description lock, Linux's ``F_OFD_SETLK``, which is independent of ``flock``) on the same
file while it waits, and the holder tests for one with ``F_OFD_GETLK``, one system call.
"""

from __future__ import annotations

import _thread  # threading's own locks, without importing threading (eventstore's start-up)
import os
import struct
import sys
import time
from collections.abc import Callable
from functools import partial

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: SQLite's busy handler only
    fcntl = None

from ...errors import DatabaseError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from queue import SimpleQueue

# Open file description locks (Linux 3.15+): owned by the open file, so two stores in one
# process see each other's; ``struct flock`` is (type, whence, start, len, pid) with a
# 64-bit off_t, padded to its C size.
_OFD = fcntl is not None and sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_GETLK")
_FLOCK = struct.Struct("hhqqi")
_FLOCK_SIZE = _FLOCK.size + 8


def _ofd(fd: int, cmd: int, kind: int) -> int:
    """``fcntl(fd, cmd)`` on byte 0 of the file with a lock of ``kind``; the ``l_type`` it returns."""
    arg = _FLOCK.pack(kind, os.SEEK_SET, 0, 1, 0).ljust(_FLOCK_SIZE, b"\0")
    return _FLOCK.unpack_from(fcntl.fcntl(fd, cmd, arg))[0]

__all__ = ["WriteLock", "lock_path", "open_write_lock"]

WAITER_POLL = 0.0002  # seconds between two looks of let_waiters_in


def lock_path(database: str) -> str:
    """The sidecar lock file of the database file ``database``: ``database + "-lock"``."""
    return database + "-lock"


def open_write_lock(database: str) -> WriteLock | None:
    """The write lock of the database file ``database``, or None where there can be none:
    no ``fcntl`` (not POSIX), or the lock file cannot be created (a read-only folder).
    Without one, writers wait with SQLite's busy handler alone."""
    if fcntl is None:
        return None
    try:
        return WriteLock(lock_path(database))
    except OSError:
        return None


class _Request:
    __slots__ = ("done", "granted", "abandoned", "error")

    def __init__(self):
        self.done = _thread.allocate_lock()  # held until the helper thread is done with the request
        self.done.acquire()
        self.granted = False
        self.abandoned = False
        self.error: str | None = None


class WriteLock:
    """An exclusive lock between processes, on the file ``path`` (created if missing).

    :meth:`acquire` waits (at most ``timeout`` seconds) and ``release()`` lets the next
    waiter in. Not reentrant, and not for two threads at once: the store calls it under
    its own thread lock. Each ``WriteLock`` is its own open file, so two stores in one
    process exclude each other too.
    """

    def __init__(self, path: str):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        #: ``release()`` lets the next writer in. A C call (no Python frame): an interrupt
        #: (Ctrl-C) cannot land between the call and the unlock, and leave the lock held.
        self.release: Callable[[], None] = partial(fcntl.flock, self.fd, fcntl.LOCK_UN)
        self._mutex = _thread.allocate_lock()
        self._queue: SimpleQueue | None = None
        self._pending = 0  # requests handed to the helper thread and not finished by it
        self._waiting = False  # the helper thread is inside a blocking flock()
        self._closed = False
        self._signals = 0  # requests this lock is waiting on: its "a writer waits" lock is held while > 0

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting at most ``timeout`` seconds.

        Raises :class:`DatabaseError` when the timeout passes (the lock stays with whoever
        holds it), when the lock is closed, or when the system refuses the lock.
        """
        if self._closed:
            raise DatabaseError(f"{self.path}: the store is closed")
        if not self._pending:  # nothing abandoned is still waiting on our open file
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as e:
                raise DatabaseError(f"cannot lock {self.path}: {e.strerror}") from None
        req = _Request()
        with self._mutex:
            if self._queue is None:
                from queue import SimpleQueue  # (imported when used: eventstore's start-up)

                self._queue = SimpleQueue()
                import threading

                threading.Thread(target=self._serve, args=(self._queue,), name="eventstore-write-lock",
                                 daemon=True).start()
            self._pending += 1
            self._signal(+1)
            self._queue.put(req)
        try:
            req.done.acquire(timeout=timeout)
        except BaseException:  # KeyboardInterrupt while waiting: give the place up
            with self._mutex:
                if req.granted:
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                req.abandoned = True
            raise
        with self._mutex:
            if req.granted:  # (possibly just as the wait timed out)
                return
            req.abandoned = True
        if req.error:
            raise DatabaseError(f"cannot lock {self.path}: {req.error}")
        raise DatabaseError(f"database is busy: another writer held it longer than the busy timeout ({timeout:g} s)")

    def _serve(self, queue: SimpleQueue) -> None:
        """The helper thread: block in flock() for one request at a time."""
        while True:
            req = queue.get()
            if req is None:
                return
            with self._mutex:
                if req.abandoned:  # (signal first: acquire() reads _pending unlocked, and a
                    self._signal(-1)  # zero must mean this request's signal is gone too)
                    self._pending -= 1
                    continue
                self._waiting = True
            error = None
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except OSError as e:
                error = e.strerror or str(e)
            with self._mutex:
                self._waiting = False
                self._signal(-1)
                self._pending -= 1
                if self._closed:  # close() left the file to us; closing it drops the lock
                    os.close(self.fd)
                    return
                if error is not None:
                    req.error = error
                elif req.abandoned:
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                else:
                    req.granted = True
                req.done.release()

    def _signal(self, change: int) -> None:
        """Count a request that starts (+1) or stops (-1) waiting, and hold the "a writer
        waits" lock while any does (call under ``_mutex``). Best effort: without it a
        holder only misses a waiter."""
        self._signals += change
        if _OFD and self._signals == (1 if change > 0 else 0) and not self._closed:
            try:
                _ofd(self.fd, fcntl.F_OFD_SETLK, fcntl.F_RDLCK if change > 0 else fcntl.F_UNLCK)
            except OSError:
                pass

    def others_waiting(self) -> bool | None:
        """Whether another writer (another process, or another store in this one) waits for
        this lock right now; None where that cannot be told (not Linux). For the holder:
        one system call."""
        if not _OFD:
            return None
        try:
            return _ofd(self.fd, fcntl.F_OFD_GETLK, fcntl.F_WRLCK) != fcntl.F_UNLCK
        except OSError:
            return None

    def let_waiters_in(self, timeout: float) -> None:
        """After a release: wait until the writers that wait now have the lock (each drops
        its signal once it has it), at most ``timeout`` seconds. ``flock`` is not FIFO: a
        holder that asks again at once usually takes the lock before the waiters it woke."""
        deadline = time.monotonic() + timeout
        while self.others_waiting() and time.monotonic() < deadline:
            time.sleep(WAITER_POLL)

    def close(self) -> None:
        """Release the file (and the lock, if held). Idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            if self._queue is not None:
                self._queue.put(None)
            if not self._waiting:
                os.close(self.fd)

    def forget(self) -> None:
        """In a forked child: drop this inherited lock without touching the parent's.

        The child's descriptor shares the parent's open file (and so its lock): closing the
        child's copy leaves the parent's lock alone, while keeping it open would keep the
        lock alive after the parent dies. The parent's helper thread does not exist here.
        """
        self._mutex = _thread.allocate_lock()
        self._queue = None
        self._waiting = False
        if not self._closed:
            self._closed = True
            try:
                os.close(self.fd)
            except OSError:
                pass
