"""JSONL export: whole sessions out, byte for byte as the reference ``save()`` writes them.

:func:`export_session` and :func:`export_sessions` write files (atomically, beside the
target) or file objects; the lines come from the backend
(:meth:`~eventstore.backends.base.Backend.export_chunks`), page by page, so memory does not
grow with the session (:mod:`eventstore.log.line` builds the lines from stored rows).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from eventstore.errors import InvalidEvent, SessionNotFound
from eventstore.io.jsonl import file_name_for

__all__ = ["check_not_the_store", "export_session", "export_sessions"]


Progress = Callable[[int, int], None]
"""``progress(bytes, events)``: called as an export goes, with the bytes and events written
since the previous call."""


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



def check_not_the_store(store: Any, text: str, what: str = "export") -> None:
    """Raise ``OSError`` (EINVAL) if ``text`` names one of the store's own files (by any
    path, a link included): writing ``what`` there would replace the database (or its WAL,
    its lock) with another file."""
    real = os.path.realpath(text)
    for f in store.database_files():
        if real == f or (os.path.exists(f) and os.path.exists(text) and os.path.samefile(text, f)):
            raise OSError(errno.EINVAL, f"is this store's own database file ({what} would overwrite it)", text)



def export_session(store: Any, session_id: str, dest: str | os.PathLike | IO,
                   progress: Progress | None = None) -> int:
    """Write one session as JSONL, byte-identical to what the reference ``save()`` writes
    for it, and return the number of events written.

    ``dest`` is a path or a file object (binary, or text with an ``encoding``). A path to
    a regular file (or to none yet) is written to a temporary file beside it, then renamed
    into place, so a reader never sees half a file; through a symbolic link, the link's
    target is replaced and the link kept. A path to something else (a FIFO, a device,
    ``/dev/stdout``) is written straight through, as the reference's ``writeFileSync``
    does. Reads a page of about a megabyte per query (a backend's own ``export_chunks``, or
    :func:`eventstore.log.line.row_pages`) and writes about every
    :data:`eventstore.log.line.EXPORT_BUFFER` bytes: memory does not grow with the
    session.
    Raises :class:`~eventstore.errors.SessionNotFound`, ``OSError`` (``IsADirectoryError``
    for a folder, or a path ending in a slash, ``FileNotFoundError`` for an empty path,
    ``NotADirectoryError`` when a folder of the path is a file, ``PermissionError`` for a
    file the user may not write, ``EINVAL`` for one of the store's own database files; all
    before anything is created).
    """
    if isinstance(dest, (str, os.PathLike)):
        if store.session_meta_json(session_id) is None:
            raise SessionNotFound(session_id)  # before creating anything
        text = os.fspath(dest)
        if not text:  # Path("") is the current folder; open("") fails so, as the reference save("") does
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
        # A folder is no file to write ("." would fail only at the rename, as EBUSY), nor is a
        # path ending in a slash, which Path() would drop ("out/" would overwrite the file
        # "out"). Nor is one ending in "/." or "/..", which Path() would also drop.
        if os.path.isdir(text) or text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), text)
        check_not_the_store(store, text)
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
    for pieces, nbytes, events in store.export_chunks(session_id):
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


def export_sessions(store: Any, folder: str | os.PathLike, session_ids: Iterable[str] | None = None,
                    progress: Progress | None = None,
                    done: Callable[[str, Path, int], None] | None = None) -> list[tuple[str, Path, int]]:
    """Export sessions to ``folder`` (created if missing), one file each, and return
    ``(session_id, path, events)`` per session.

    ``session_ids`` selects sessions (default: every stored one). File names come from
    :func:`~eventstore.io.jsonl.file_name_for`: whatever an id holds (``/``, ``..``, NUL, a
    drive letter, upper case), its file lands inside ``folder`` under a name that maps back
    to it alone; an existing file of that name is replaced. ``done(session_id, path,
    events)`` is called after each file. Raises :class:`~eventstore.errors.SessionNotFound`
    and ``OSError`` (``EINVAL`` when a file would land on the store's own database), both
    before writing anything, and ``OSError`` for a file that cannot be written.
    """
    base = Path(folder)
    ids = [i.id for i in store.sessions()] if session_ids is None else list(dict.fromkeys(session_ids))
    for sid in ids:
        if store.session_meta_json(sid) is None:
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
        check_not_the_store(store, os.fspath(paths[-1]))  # before writing any file
    result = []
    for sid, path in zip(ids, paths, strict=True):
        n = export_session(store, sid, path, progress)
        result.append((sid, path, n))
        if done is not None:
            done(sid, path, n)
    return result

