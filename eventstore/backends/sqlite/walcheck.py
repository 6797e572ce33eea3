"""Refuse a ``-wal`` file that does not belong to its database, before SQLite uses it.

SQLite trusts the ``-wal`` file beside a database: every frame of it that is valid is
read in place of the database's page and copied into the file at the next checkpoint. A
WAL left beside *another* file (a backup restored with ``cp`` next to a live WAL, a copy
of the database taken earlier or later than its WAL) is applied all the same: the database
reads as "malformed", and the checkpoint that follows writes the foreign pages into it.
:func:`check_wal` tells such a pair from the two files alone, without opening them with
SQLite, so that nothing is read through the WAL or checkpointed.

The WAL (https://www.sqlite.org/fileformat2.html#walformat) is read as SQLite reads it: a
32-byte header (magic ``0x377f0682``/``0x377f0683`` choosing the checksum's byte order,
version 3007000, page size, checkpoint sequence, two salts, a checksum of the first 24
bytes), then frames of a 24-byte header (page number; for a *commit frame* the database's
size in pages after the transaction, else 0; the two salts; a checksum) and a page. A frame
counts while its salts are the header's and its checksum, computed over its first 8 header
bytes and its page starting from the previous frame's (the header's for the first),
matches; the WAL's content is the frames up to the last commit frame that counts. A WAL
starts over (new salts) only once every frame of it was copied into the database, so the
frames of one generation were written against the database as it was then (``D0``), and
the database file is ``D0`` with the frames of some first commits copied in (a checkpoint
copies the newest image of each page up to a commit, page 1 first).

The rule, over the database file's page 1 (its header: size in pages, offset 28) and the
WAL's frames, by transaction (the frames up to a commit frame):

1. The page sizes agree.
2. If the file's page 1 is byte for byte the image of page 1 in some frame, a checkpoint
   copied the WAL up to there: the pair belongs together.
3. Otherwise the file's page 1 is ``D0``'s, and with it the file's size ``N``. SQLite
   writes page 1 whenever the database changes size (the header holds the size), so every
   transaction before the first one that writes page 1 must leave the database at ``N``
   pages. The first one that does either rewrites every page up to its size (VACUUM: it
   fits any file) or grows the database from ``N``: then ``N`` is at most its size, and
   every page up to its size that no transaction so far wrote was already in ``D0``, so
   ``N`` is at least the largest such page. (SQLite shrinks a file without rewriting
   every page only with ``auto_vacuum``, which eventstore databases do not use.) A WAL
   without a commit is ignored by SQLite.

Before these rules, the marks (revision 0260 on): an eventstore database holds
``application_id`` :data:`APPLICATION_ID` and a *mark* in ``user_version`` (offsets 68 and
60 of page 1), which names both the copy of the file and the WAL generation
(:class:`eventstore.backends.sqlite.engine.WalMarks`). The first transaction of every WAL
generation an eventstore writer starts moves it on by one; and before a store's first
write, it gives the database a fresh random mark in a transaction of its own and
checkpoints it into the file (``RESTART``: the next writer starts the WAL over), writing
nothing else until the file holds it. So two copies of one file (``cp a.db b.db``, the
same mark), each written to, hold marks of their own before either's WAL holds anything
else, and no WAL with content of one is started against a state of the file the other
copy holds too. SQLite writes both fields in every page-1 image. So, when the database
file has a mark:

- a page-1 image of the WAL without a mark (a plain SQLite file's) refuses the WAL, and so
  does one far from the file's, the first transaction's, and every mark a transaction
  writing page 1 alone set before it (another database's: marks are random);
- a page-1 image equal to the file's page 1 (rule 2) confirms it;
- a first transaction that moves the mark on from the file's, to the next, confirms it
  (the WAL was started against the file as it is); to one far from it refuses it (another
  database's WAL, or another copy's: a copy's WAL was started against a file holding that
  copy's own mark); to one near it refuses it too: it was started against an older state
  of the database (the file is newer) or a newer one (the file is an older copy). A store
  that gives the database its new mark first moves the mark on by one in a transaction of
  its own, so a new mark is never a generation's first transaction.

A WAL whose first transaction leaves the mark alone (one not started by this eventstore:
an older one, the ``sqlite3`` shell), or a database file without a mark, is left to the
rules below and is not *confirmed*: a read-write open then checks the database read
through it first (``engine.check_unconfirmed_wal``: quick_check, and the file's last
events and sessions still there). What the marks cannot tell apart is a WAL cut from the
same generation as the file's (a copy of a live WAL restored later, while the generation
went on).

Anything else is a WAL written against another file, and refused; the message names both
files and what disagrees. This refuses a copy older and smaller than the database its WAL
was written against, and one newer and larger; what the files
cannot show is a copy whose page 1 and size are those of the WAL's own database (a copy
taken between two writes that left page 1 alone, or beside a WAL that begins with a
VACUUM): ``eventstore verify`` (quick_check, the hash chain, a checkpoint) finds the damage
then. The database's change counter (offset 24) is no help: in WAL mode SQLite leaves it
alone unless a connection re-reads page 1.

Live databases: the check reads the WAL header before and after reading the database file
and the frames, and looks again when a writer started the WAL over meanwhile; a checkpoint
copying frames meanwhile only moves the file along the WAL (rule 2 or 3 still holds). A
refusal is confirmed by a second look with every frame checksum verified (the first look
takes frames by their salts alone: the checksums are slow to compute in Python, and a
frame whose salts match but whose checksum does not is one torn by a crash, at the end).
"""

from __future__ import annotations

import mmap
import os
import struct

from ...errors import WalMismatch

__all__ = ["APPLICATION_ID", "MARK_MAX", "WalMismatch", "check_wal", "page_mark", "next_mark", "wal_commits",
           "wal_mismatch", "wal_verdict"]

#: ``PRAGMA application_id`` of an eventstore database ("EVST"; set by migration 0260).
APPLICATION_ID = 0x45565354
#: Marks (``PRAGMA user_version``) run from 1 to this, then start at 1 again.
MARK_MAX = 2**31 - 1
# Marks further than this from the file's belong to another database: each starts at a
# random mark, and one WAL generation moves it on by one. (Two databases' marks are this
# close once in 1,000 pairs: a WAL of the other one is still refused, as of another state.)
_LINEAGE = 2**20

_DB_MAGIC = b"SQLite format 3\x00"
_WAL_MAGICS = (0x377F0682, 0x377F0683)
_WAL_VERSION = 3007000
_WAL_HEADER = 32
_FRAME_HEADER = 24
_PENDING_BYTE = 0x40000000  # the page holding this offset is never written (sqlite3PendingByte)
_ATTEMPTS = 5


def _checksum(data, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes) continued from ``(s0, s1)``."""
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    m = 0xFFFFFFFF
    it = iter(words)
    for a in it:
        b = next(it)
        s0 = (s0 + a + s1) & m
        s1 = (s1 + b + s0) & m
    return s0, s1


def _read_header(f) -> tuple | None:
    """``(raw 32 bytes, page size, salts, big endian, header checksum)``, or None when SQLite
    would ignore the WAL (too short, bad magic, version, page size or checksum)."""
    f.seek(0)
    raw = f.read(_WAL_HEADER)
    if len(raw) < _WAL_HEADER:
        return None
    magic, version, page_size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", raw)
    if magic not in _WAL_MAGICS or version != _WAL_VERSION:
        return None
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        return None
    big = bool(magic & 1)
    if _checksum(raw[:24], big, 0, 0) != (c1, c2):
        return None
    return raw, page_size, (salt1, salt2), big, (c1, c2)


def _transactions(m, page_size: int, salts: tuple[int, int], big: bool, seed: tuple[int, int] | None
                  ) -> list[tuple[list[int], int, list[int]]]:
    """The WAL's committed transactions, in order: ``(page numbers, database size in pages
    after it, offsets of its page-1 frames)``. Frames count while their salts are the
    header's and, with ``seed`` (the header checksum), while their checksums chain."""
    frame = _FRAME_HEADER + page_size
    unpack = struct.Struct(">6I").unpack_from
    done: list[tuple[list[int], int, list[int]]] = []
    pages: list[int] = []
    page1: list[int] = []
    s = seed
    for off in range(_WAL_HEADER, len(m) - frame + 1, frame):
        pgno, commit, salt1, salt2, c1, c2 = unpack(m, off)
        if (salt1, salt2) != salts or pgno == 0:
            break
        if s is not None:
            s = _checksum(m[off:off + 8], big, *s)
            s = _checksum(m[off + _FRAME_HEADER:off + frame], big, *s)
            if s != (c1, c2):
                break
        pages.append(pgno)
        if pgno == 1:
            page1.append(off + _FRAME_HEADER)
        if commit:
            done.append((pages, commit, page1))
            pages, page1 = [], []
    return done


def page_mark(page1: bytes) -> int | None:
    """The mark an eventstore database's page 1 (its first 100 bytes at least) holds in
    ``user_version``, or None when it holds none (not an eventstore database, or one from
    before revision 0260): see the module docstring."""
    application_id, = struct.unpack_from(">I", page1, 68)
    user_version, = struct.unpack_from(">I", page1, 60)
    return user_version if application_id == APPLICATION_ID and 0 < user_version <= MARK_MAX else None


def next_mark(mark: int) -> int:
    """The mark after ``mark`` (1 follows :data:`MARK_MAX`)."""
    return mark % MARK_MAX + 1


def _distance(mark: int, base: int) -> int:
    """How many steps of :func:`next_mark` lead from ``base`` to ``mark`` (negative: back)."""
    d = (mark - base) % MARK_MAX
    return d - MARK_MAX if d > MARK_MAX // 2 else d


def _marks(m, transactions, db_page1: bytes) -> tuple[str | None, bool | None]:
    """The rule of marks: ``(why the WAL was written for another database, another copy of
    this one or another state of it, None)``, ``(None, True)`` when its first transaction's
    mark proves it was started against the database file, or ``(None, None)`` when the
    marks cannot tell (the other rules decide then)."""
    db_mark = page_mark(db_page1)
    if db_mark is None:
        return None, None
    first_mark = None
    known = {db_mark}  # marks a page 1 of the WAL may hold (near one of these)
    for number, (pages, _size, page1) in enumerate(transactions, 1):
        for off in page1:
            mark = page_mark(m[off:off + 100])
            if mark is None:
                return (f"its transaction {number} writes a page 1 with no eventstore mark (another "
                        f"application's database): it was written for another database"), None
            if number == 1 and first_mark is None:
                first_mark = mark
                known.add(mark)
            if m[off:off + len(db_page1)] == db_page1:
                return None, first_mark is not None  # checkpointed up to there
            if set(pages) == {1}:
                known.add(mark)  # a transaction that writes page 1 alone: a store's new mark
            elif all(abs(_distance(mark, k)) > _LINEAGE for k in known):
                return (f"its transaction {number} writes a page 1 with the mark {mark}, far from the file's "
                        f"{db_mark}: it was written for another database"), None
    if first_mark is None or first_mark == db_mark:
        return None, None  # not started by eventstore (or not since 0260): the marks cannot tell
    d = _distance(first_mark, db_mark)
    if d == 1:
        return None, True
    if abs(d) > _LINEAGE:
        return (f"its transaction 1 writes a page 1 with the mark {first_mark}, far from the file's {db_mark}: "
                f"it was written for another database, or for another copy of this database (each copy gets "
                f"a mark of its own before it is written to)"), None
    if d < 1:
        return (f"it was started against an older state of this database (its first transaction moved the "
                f"mark to {first_mark}; the file's is {db_mark}, past it): the database file is newer than "
                f"the WAL"), None
    return (f"it was started against a newer state of this database (its first transaction moved the "
            f"mark to {first_mark}, from {first_mark - 1 or MARK_MAX}; the file's is {db_mark}): the "
            f"database file is an older copy"), None


def _verdict(m, page_size: int, transactions, db_page1: bytes, db_pages: int) -> tuple[str | None, bool]:
    """``(why, confirmed)``: why the frames ``transactions`` were not written against a
    database file whose page 1 is ``db_page1`` and whose size is ``db_pages`` pages, or
    None; and whether its marks prove that they were (see the module docstring)."""
    if not transactions:
        return None, True  # SQLite ignores a WAL without a commit
    why, confirmed = _marks(m, transactions, db_page1)
    if why is None:
        why = _inferred(page_size, transactions, db_page1, db_pages, m)
    return why, why is None and bool(confirmed)


def _inferred(page_size: int, transactions, db_page1: bytes, db_pages: int, m) -> str | None:
    """Why the frames ``transactions`` cannot have been written against a database file
    whose page 1 is ``db_page1`` and whose size is ``db_pages`` pages, from page images and
    sizes alone, or None (rules 2 and 3 of the module docstring)."""
    for _pages, _size, page1 in transactions:
        for off in page1:
            if m[off:off + page_size] == db_page1:
                return None  # checkpointed up to there
    pending = _PENDING_BYTE // page_size + 1
    written: set[int] = set()
    for number, (pages, size, page1) in enumerate(transactions, 1):
        written.update(pages)
        if not page1:
            if size != db_pages:
                return (f"its transaction {number} leaves the database at {size} pages without writing "
                        f"page 1, so the database it was written against held {size} pages; the database "
                        f"file holds {db_pages}")
            continue
        kept = next((p for p in range(size, 0, -1) if p not in written and p != pending), None)
        if kept is None:
            return None  # a transaction rewrote every page (VACUUM): it fits any file
        if db_pages > size:
            return (f"the database it was written against held at most {size} pages (its transaction "
                    f"{number} grows it to that); the database file holds {db_pages}")
        if kept > db_pages:
            return (f"its first {number} transaction(s) leave page {kept} as it was in the database they "
                    f"were written against, which held {kept} pages or more; the database file holds only "
                    f"{db_pages}")
        return None
    return None


def _look(f, db_path: str, verify: bool) -> tuple[bool, str | None, bool]:
    """One look at the pair: ``(settled, why, confirmed)``; not settled when a writer
    started the WAL over meanwhile (look again)."""
    header = _read_header(f)
    if header is None:
        return True, None, True
    raw, page_size, salts, big, seed = header
    with open(db_path, "rb") as db:  # after the WAL header: see the module docstring
        db_page1 = db.read(page_size)
        db_file_size = db.seek(0, 2)
    if len(db_page1) < 100 or not db_page1.startswith(_DB_MAGIC):
        return True, None, False  # empty (the WAL holds the whole database), or no SQLite file: SQLite says so
    db_page_size = struct.unpack(">H", db_page1[16:18])[0]
    db_page_size = 65536 if db_page_size == 1 else db_page_size
    if page_size != db_page_size:
        return True, f"its pages are {page_size} bytes, the database file's {db_page_size}", False
    counter, size = struct.unpack(">II", db_page1[24:32])
    valid_for = struct.unpack(">I", db_page1[92:96])[0]
    db_pages = size if size and valid_for == counter else db_file_size // page_size
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        why, confirmed = _verdict(m, page_size, _transactions(m, page_size, salts, big, seed if verify else None),
                                  db_page1, db_pages)
    again = _read_header(f)
    return again is not None and again[0] == raw, why, confirmed


def wal_verdict(db_path: str) -> tuple[str | None, bool]:
    """``(why, confirmed)`` of the ``-wal`` beside the database file ``db_path``: why it
    was not written against the file, or None; and, when not refused, whether its marks
    prove that it was (True too when SQLite would not use it: none, empty, not a WAL, no
    commit). ``(None, False)``: the page images and sizes fit, but nothing proves the pair
    (a WAL started by another program than eventstore, or by one before 0260). Reads only;
    see the module docstring for the rules. Raises ``OSError`` when a file cannot be read."""
    wal = db_path + "-wal"
    try:
        if os.path.getsize(wal) <= _WAL_HEADER:
            return None, True
    except FileNotFoundError:
        return None, True
    with open(wal, "rb") as f:
        for _attempt in range(_ATTEMPTS):
            settled, why, confirmed = _look(f, db_path, verify=False)
            if not settled:
                continue  # a writer started the WAL over meanwhile
            if why is None:
                return None, confirmed
            settled, why, confirmed = _look(f, db_path, verify=True)  # confirm, every checksum verified
            if settled:
                return why, confirmed
    return None, True  # the WAL kept starting over: a busy live database, whose WAL is its own


def wal_commits(wal_path: str) -> int:
    """How many committed transactions the WAL file ``wal_path`` holds that SQLite would
    read (every frame checksum verified; 0 for an empty file or one SQLite ignores).
    Raises ``OSError`` when it cannot be read."""
    with open(wal_path, "rb") as f:
        header = _read_header(f)
        if header is None or os.fstat(f.fileno()).st_size < _WAL_HEADER + _FRAME_HEADER + header[1]:
            return 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return len(_transactions(m, *header[1:]))


def wal_mismatch(db_path: str) -> str | None:
    """Why the ``-wal`` beside the database file ``db_path`` was not written against it,
    or None (see :func:`wal_verdict`)."""
    return wal_verdict(db_path)[0]


def check_wal(db_path: str | os.PathLike) -> bool:
    """Raise :class:`WalMismatch`, naming both files, when the ``-wal`` beside the database
    file ``db_path`` was not written against it (see :func:`wal_verdict`); else return
    whether the pair is confirmed (False: the caller must check the database read through
    the WAL before writing to it). Call it before any SQLite connection opens the file:
    nothing is read through the WAL or checkpointed."""
    # SQLite follows a symbolic link and uses the -wal beside the file it points to.
    path = os.fspath(db_path)
    real = os.path.realpath(path)
    try:
        why, confirmed = wal_verdict(real)
    except OSError:
        return False  # an unreadable file: SQLite's own open says why
    if why is not None:
        raise WalMismatch(f"{real}-wal does not belong to {path}: {why}. Refused before anything was read "
                          f"through it or written; move {real}-wal (and {real}-shm) aside to open the "
                          f"database file as it is, or put the database file that WAL belongs to back")
    return confirmed
