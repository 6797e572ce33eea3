"""Refuse a ``-wal`` file that does not belong to its database, before SQLite uses it.

SQLite trusts the ``-wal`` file beside a database: every frame whose salts match the WAL
header and whose checksums chain is copied into the database at the next checkpoint. A
WAL left beside *another* file (a backup restored with ``cp`` next to a live WAL, a file
copied without its WAL) is applied all the same: the database reads as "malformed", and the
checkpoint that follows writes the foreign pages into it and truncates it to the foreign
database's size. :func:`check_wal` finds such a WAL from the two files alone, without
opening them with SQLite, so that nothing is read through it or checkpointed.

How (formats: https://www.sqlite.org/fileformat2.html, sections 1.3 and 4.1): a WAL
holds *frames*, each a page image with a header naming the page and, on the last frame of
a transaction (a *commit frame*), the database's size in pages after it. A WAL starts over
(new salts in its header) only after every frame was copied into the database, so the
frames of the current generation were written against the database as it was then, size
``S0``, and later commits only add pages to it unless one shrinks it (VACUUM). The database
file's size (page 1's in-header size, offset 28) is ``S0`` or the size of a commit already
copied into it. So a database file *larger than every commit in its WAL* is not the file
that WAL was written against, unless some commit rewrote the whole database (VACUUM writes
every page to the WAL): then nothing of the file is used. The same holds for a WAL whose
page size differs from the database's. This catches another database's WAL (the case
above: a 1.9 MB database beside the WAL of a 53 KB one); an *older copy of the same
database* that is smaller than its WAL's commits cannot be told from the files alone
(SQLite's ``PRAGMA quick_check`` then reports the damage; ``eventstore verify`` runs it).

The check reads the WAL header before and after the frames and looks again when a writer
started the WAL over meanwhile, so a live database is never refused for a race. Frames are
first taken by their salts alone (fast); only when that finds a mismatch are the frame
checksums verified too (frames torn by a crash do not count: SQLite ignores them).
"""

from __future__ import annotations

import mmap
import os
import struct

from ..errors import WalMismatch

__all__ = ["WalMismatch", "check_wal", "wal_mismatch"]

_DB_MAGIC = b"SQLite format 3\x00"
_WAL_MAGICS = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32
_FRAME_HEADER = 24


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    m = 0xFFFFFFFF
    it = iter(words)
    for a in it:
        b = next(it)
        s0 = (s0 + a + s1) & m
        s1 = (s1 + b + s0) & m
    return s0, s1


def _read_header(f) -> tuple | None:
    f.seek(0)
    raw = f.read(_WAL_HEADER)
    if len(raw) < _WAL_HEADER:
        return None
    magic, _version, page_size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", raw)
    if magic not in _WAL_MAGICS:
        return None
    big = bool(magic & 1)
    if _checksum(raw[:24], big, 0, 0) != (c1, c2):
        return None  # SQLite ignores such a WAL
    return raw, page_size, salt1, salt2, big, (c1, c2)


def _commits(f, page_size: int, salts: tuple[int, int], big: bool, seed: tuple[int, int] | None
             ) -> tuple[int, bool]:
    """``(largest database size of a committed frame, whether one commit rewrote every page
    up to its size)`` over the WAL's current generation; ``(0, False)`` when it holds no
    commit. With ``seed`` (the header checksum), frames count only while their checksums chain."""
    largest = 0
    whole = False
    pages: set[int] = set()
    s = seed
    size = f.seek(0, 2)
    frame = _FRAME_HEADER + page_size
    if size < _WAL_HEADER + frame:
        return 0, False
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:  # frame headers read in place, not copied
        unpack = struct.Struct(">6I").unpack_from
        size = min(size, len(m))
        for off in range(_WAL_HEADER, size - frame + 1, frame):
            pgno, commit, salt1, salt2, c1, c2 = unpack(m, off)
            if (salt1, salt2) != salts:
                break
            if s is not None:
                s = _checksum(m[off:off + 8], big, *s)
                s = _checksum(m[off + _FRAME_HEADER:off + frame], big, *s)
                if s != (c1, c2):
                    break
            pages.add(pgno)
            if commit:
                largest = max(largest, commit)
                if not whole and len(pages) >= commit and all(p in pages for p in range(1, commit + 1)):
                    whole = True
    return largest, whole


def wal_mismatch(db_path: str) -> str | None:
    """Why the ``-wal`` beside the database file ``db_path`` does not belong to it, or None
    when it does or when the files cannot tell (no WAL, an empty database file, a WAL with
    no commit). Reads only. Raises ``OSError`` when a file cannot be read."""
    wal = db_path + "-wal"
    try:
        if os.path.getsize(wal) <= _WAL_HEADER:
            return None
    except FileNotFoundError:
        return None
    with open(wal, "rb") as f:
        for _attempt in range(5):
            header = _read_header(f)
            if header is None:
                return None
            raw, page_size, salt1, salt2, big, seed = header
            with open(db_path, "rb") as db:  # after the WAL header: see the module docstring
                db_head = db.read(100)
                db_file_pages = db.seek(0, 2)
            if len(db_head) < 100 or not db_head.startswith(_DB_MAGIC):
                return None  # empty (the WAL holds the whole database), or no SQLite file: SQLite says so
            db_page_size = struct.unpack(">H", db_head[16:18])[0]
            db_page_size = 65536 if db_page_size == 1 else db_page_size
            if page_size != db_page_size:
                return f"its pages are {page_size} bytes, the database's {db_page_size}"
            counter, size = struct.unpack(">I", db_head[24:28])[0], struct.unpack(">I", db_head[28:32])[0]
            valid_for = struct.unpack(">I", db_head[92:96])[0]
            db_pages = size if size and valid_for == counter else db_file_pages // page_size
            for s in (None, seed):  # salts alone, then (to confirm a mismatch) checksums too
                largest, whole = _commits(f, page_size, (salt1, salt2), big, s)
                again = _read_header(f)
                if again is None or again[0] != raw:
                    break  # a writer started the WAL over meanwhile: look again
                if not largest or whole or db_pages <= largest:
                    return None
            else:
                return (f"the database file holds {db_pages} pages, more than any transaction in the WAL "
                        f"left (at most {largest}): the WAL was written against another database (a file "
                        f"restored or copied beside a WAL it did not write)")
    return None  # the WAL kept starting over: a busy live database, whose WAL is its own


def check_wal(db_path: str | os.PathLike) -> None:
    """Raise :class:`WalMismatch`, naming both files, when the ``-wal`` beside the database
    file ``db_path`` does not belong to it (see :func:`wal_mismatch`). Call it before any
    SQLite connection opens the file: nothing is read through the WAL or checkpointed."""
    path = os.fspath(db_path)
    try:
        why = wal_mismatch(path)
    except OSError:
        return  # an unreadable file: SQLite's own open says why
    if why is not None:
        raise WalMismatch(f"{path}-wal does not belong to {path}: {why}. Refused before anything was read "
                          f"through it or written; move {path}-wal (and {path}-shm) aside to open the "
                          f"database file as it is, or put the database file that WAL belongs to back")
