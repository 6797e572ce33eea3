"""WAL checkpoints on a background thread, so that no append waits for them.

With the write queue (:mod:`.writelock`) an :class:`~eventstore.EventStore` switches
SQLite's automatic checkpoint off: it would run inside ``COMMIT``, holding the write lock
(and every queued writer) through its fsyncs. The store checkpoints itself instead, each
time its commits have written about ``CHECKPOINT_FRAMES`` WAL frames (see
``SQLiteBackend._wrote``). A checkpoint costs two fsyncs; run inline, it would hold up the
append that made it due. So a :class:`Checkpointer` runs it on a thread of its own, with
its own connection: the append that made it due returns at once, and the checkpoint
(which blocks no writer: ``PASSIVE``) overlaps the appends that follow.

What a checkpoint does is :func:`checkpoint`: ``PASSIVE`` (after another connection's
checkpoint, if one is running), then, when the WAL holds ``WAL_RESET_FRAMES`` frames or
more, ``RESTART`` under the write lock, so the WAL starts over and stays bounded under
steady writing from several processes and a reader.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from ...errors import DatabaseError
from . import engine as _engine
from .writelock import WriteLock, open_write_lock

__all__ = ["Checkpointer", "checkpoint"]


def checkpoint(conn: sqlite3.Connection, wlock: WriteLock | None, busy_timeout: float,
               database: str | None = None) -> None:
    """Copy the WAL into the database file, and make sure it starts over when it is long.

    ``PRAGMA wal_checkpoint(PASSIVE)`` waits for no one and no one waits for it, but while
    other processes keep committing it never copies the frames they commit meanwhile, and
    the WAL only starts over from its beginning when a writer finds it all copied and no
    reader still in it: under steady writing from several processes (and a follower
    reading all the time) it would grow without end. So when the WAL holds
    ``WAL_RESET_FRAMES`` frames or more, a ``RESTART`` checkpoint runs while holding the
    write lock ``wlock``: it copies the frames committed during the passive one, then
    waits (at most ``RESTART_WAIT`` seconds) for readers still in the WAL to finish; the
    next writer then starts the WAL over, and it is truncated to ``journal_size_limit``.

    SQLite lets one connection checkpoint at a time and refuses the others at once, busy
    handler or not. Each writer process has a checkpointer, and writers that write alike
    ask at about the same moment: so a refused checkpoint (or ``RESTART``) is tried again
    once the other one is done. Dropped, it would leave the WAL to grow by every
    process's ``CHECKPOINT_FRAMES`` again before the next requests. And a passive
    checkpoint holds no writer back: while one that began on a short WAL is slow (its
    fsyncs on a busy disk), writers can add many times ``WAL_RESET_FRAMES``. So a refused
    checkpoint that finds the WAL of the file ``database`` (its ``-shm`` index) that long
    already takes the write lock, waits there for the running one at most ``RESTART_WAIT``
    seconds at a time (so that no append waits much longer than with a ``RESTART`` alone),
    and then runs the ``RESTART``. ``busy_timeout`` (seconds) bounds all of it and the wait
    for the lock. Errors and a wait that ran out are ignored: the next checkpoint tries again.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    try:
        while True:
            busy, log, _done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
            refused = _refused(busy, log)
            if refused:  # another connection is checkpointing
                log = _engine.wal_index_frames(database) if database is not None else 0
            if log < _engine.WAL_RESET_FRAMES or wlock is None:
                if not refused:
                    return
            else:
                wlock.acquire(busy_timeout)
                try:
                    conn.execute(f"PRAGMA busy_timeout = {int(_engine.RESTART_WAIT * 1000)}")
                    try:
                        busy, log = _restart(conn, min(deadline, time.monotonic() + _engine.RESTART_WAIT))
                    finally:
                        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                finally:
                    wlock.release()
                if not _refused(busy, log):
                    return  # done, or readers stayed in the WAL: the next checkpoint tries again
            # another connection is checkpointing: once it is done, copy what it did not
            # (with the write lock let go meanwhile)
            if time.monotonic() >= deadline:
                return
            time.sleep(pause)
            pause = min(2 * pause, 0.02)
    except (sqlite3.Error, DatabaseError):
        pass


def _restart(conn: sqlite3.Connection, until: float) -> tuple[int, int]:
    """``wal_checkpoint(RESTART)`` (the write lock held), tried again until the monotonic
    time ``until`` while another connection's checkpoint refuses it: that one waits for no
    one, so it ends soon, and meanwhile no writer adds to the WAL (letting the lock go
    between tries, checkpointers of several processes would refuse each other in turn).
    Returns ``(busy, log)``."""
    while True:
        busy, log, _done = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()[0]
        if not _refused(busy, log) or time.monotonic() >= until:
            return busy, log
        time.sleep(0.001)


def _refused(busy: int, log: int) -> bool:
    """Whether a ``wal_checkpoint`` result says that another connection was checkpointing
    (busy, and no frame count: it did nothing)."""
    return busy == 1 and log < 0


class Checkpointer:
    """A daemon thread that runs :func:`checkpoint` on the database file ``database``
    whenever :meth:`request` is called (requests that arrive while one runs are merged).

    The thread starts on the first request and opens its own connection with ``connect``
    (a callable returning a ``sqlite3.Connection``) and its own write lock, so it excludes
    this process's writers the same way it excludes other processes'. :meth:`close` stops
    it and waits for a checkpoint in progress. A ``SIGKILL`` in the middle of a checkpoint
    is harmless (SQLite redoes it). Not inherited by a forked child: the store forgets it
    there (:meth:`forget`) and starts its own.
    """

    def __init__(self, database: str, connect: Callable[[], sqlite3.Connection], busy_timeout: float):
        self.database = database
        self._connect = connect
        self.busy_timeout = busy_timeout
        import threading  # (imported by a store that writes: not at eventstore's start-up)

        self._wanted = threading.Condition()
        self._pending = False
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.done = 0  # checkpoints run (for tests and tools)

    def request(self) -> None:
        """Ask for a checkpoint soon; returns at once."""
        with self._wanted:
            if self._closed:
                return
            if self._thread is None or not self._thread.is_alive():
                import threading

                # (kept once started: a Ctrl-C inside start() must not leave a thread that
                # never runs, which every later request would take for the running one)
                thread = threading.Thread(target=self._run, name="eventstore-checkpoint", daemon=True)
                thread.start()
                self._thread = thread
            # (the wake-up first: a Ctrl-C between the two then loses this request, rather
            # than leaving it asked for while the thread sleeps)
            self._wanted.notify()
            self._pending = True

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) until no checkpoint is asked for or running.
        Returns False if the time ran out."""
        with self._wanted:
            return self._wanted.wait_for(lambda: not (self._pending or self._running), timeout)

    def _run(self) -> None:
        conn = None
        wlock = None
        try:
            conn = self._connect()
            wlock = open_write_lock(self.database)
            while True:
                with self._wanted:
                    self._wanted.wait_for(lambda: self._pending or self._closed)
                    if self._closed and not self._pending:  # a checkpoint asked for runs first
                        return
                    self._pending = False
                    self._running = True
                try:
                    checkpoint(conn, wlock, self.busy_timeout, self.database)
                finally:
                    with self._wanted:
                        self._running = False
                        self.done += 1
                        self._wanted.notify_all()
        except Exception:  # pragma: no cover - cannot open: the store's close() checkpoints
            pass
        finally:
            with self._wanted:
                self._pending = self._running = False
                self._wanted.notify_all()
            if wlock is not None:
                wlock.close()
            if conn is not None:
                conn.close()

    def close(self, wait: bool = True) -> None:
        """Stop the thread, after the checkpoint it is running or was asked for (if any);
        with ``wait``, return once it has stopped. Idempotent."""
        with self._wanted:
            self._closed = True
            self._wanted.notify_all()
            thread = self._thread
        import threading

        # (is_alive: a Ctrl-C inside request's thread.start() can leave a thread never started,
        # which join refuses, and the interrupt would be reported as that RuntimeError)
        if wait and thread is not None and thread is not threading.current_thread() and thread.is_alive():
            thread.join()

    def forget(self) -> None:
        """In a forked child: the thread does not exist here, and its connection and lock
        file are the parent's; drop them without touching them."""
        import threading

        self._wanted = threading.Condition()
        self._closed = True
        self._thread = None
