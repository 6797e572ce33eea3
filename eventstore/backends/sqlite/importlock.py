"""The import lock of the SQLite backend: a ``flock`` on a file beside the database.

A chunked import (:mod:`eventstore.io.bulk`) holds it from its first chunk to its last, and
names it in its ``importing`` row (the *owner*: the lock file's path and a random tag), so
that a follower can tell a running import, whose events it must wait for, from one whose
process died or gave up (the kernel releases a ``flock`` when its holder dies, even by
``SIGKILL``). One file per session, ``DB-import-HASH``, removed when the import completes;
the file of an unfinished import stays until an import of the same session completes it.
"""

from __future__ import annotations

import _thread  # threading's own lock, without importing threading (eventstore's start-up)
import errno
import os
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

from ...errors import DatabaseError
from ..base import ImportLock

__all__ = ["FileImportLock", "MemoryImportLock", "file_lock", "file_owner_alive", "memory_lock"]

TAKE_WAIT = 1.0  # seconds a taker retries while a reader tests the lock (a few microseconds each)


def lock_file(database: str, session_id: str) -> str:
    """The lock file of ``session_id``'s import into the database file ``database``."""
    import hashlib  # (imported when used: eventstore's start-up)

    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{database}-import-{digest}"


class FileImportLock(ImportLock):
    """A held ``flock`` on an import lock file."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self.fd = fd
        import uuid  # (imported when used: eventstore's start-up)

        self.owner = f"{path}#{uuid.uuid4().hex[:12]}"

    def release(self, unlink: bool) -> None:
        if self.fd < 0:
            return
        try:
            if unlink:
                try:
                    os.unlink(self.path)  # still locked: a waiter that opened it sees a finished import
                except FileNotFoundError:
                    pass
        finally:
            os.close(self.fd)  # releases the flock
            self.fd = -1


def file_lock(database: str, session_id: str) -> FileImportLock | None:
    """Take the import lock of ``session_id`` (see :meth:`Backend.import_lock`). Raises
    :class:`DatabaseError` when the lock file cannot be made (a read-only folder)."""
    if fcntl is None:  # pragma: no cover - not POSIX: imports go in one transaction
        raise DatabaseError("chunked imports need flock (POSIX)")
    path = lock_file(database, session_id)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise DatabaseError(f"cannot create the import lock file {path}: {e.strerror}") from None
    deadline = time.monotonic() + TAKE_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return FileImportLock(path, fd)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() > deadline:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return None
                raise DatabaseError(f"cannot lock {path}: {e.strerror}") from None
            time.sleep(0.01)


def file_owner_alive(owner: str) -> bool:
    """Whether the lock named ``owner`` is held: a shared ``flock`` without waiting fails
    while an importer holds it. A missing file is a dead owner."""
    if fcntl is None:  # pragma: no cover
        return True
    path = owner.rpartition("#")[0]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # (a FIFO must not block)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: wait for it rather than skip its events
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


class MemoryImportLock(ImportLock):
    """The import lock of an in-memory database (one process: a set of held owners)."""

    def __init__(self, held: dict[str, str], session_id: str):
        self.held = held
        self.session_id = session_id
        import uuid

        self.owner = f"memory#{uuid.uuid4().hex[:12]}"
        held[session_id] = self.owner

    def release(self, unlink: bool) -> None:
        if self.held.get(self.session_id) == self.owner:
            del self.held[self.session_id]


_memory_guard = _thread.allocate_lock()


def memory_lock(held: dict[str, str], session_id: str) -> MemoryImportLock | None:
    with _memory_guard:
        if session_id in held:
            return None
        return MemoryImportLock(held, session_id)
