"""SQLite connections: pragmas, read-only opens, the schema version check, and migrating.

Connections are plain ``sqlite3`` connections in autocommit mode (the store emits its own
``BEGIN IMMEDIATE``, so the busy timeout applies when a write transaction starts instead
of failing with ``database is locked`` when a read is upgraded to a write). Opening a
database whose schema is current imports neither SQLAlchemy nor Alembic: a cheap look at
``alembic_version`` comes first, and only a database that needs migrating loads them.

Defaults (documented in the README and docs/concurrency.md): WAL journal,
``synchronous=NORMAL`` (an acknowledged append survives a crash of the process;
``durability="full"`` also survives power loss), ``journal_size_limit`` 64 MiB, busy
timeout 5 seconds. A store also queues its writers on a lock file and checkpoints the WAL
itself (see :mod:`eventstore.backends.sqlite.writelock` and the constants below).
"""

from __future__ import annotations

import os
import sqlite3
import struct
import time
from collections import namedtuple

from ...errors import DatabaseError, WalMismatch
from ...lazy import LazyPattern
from ...schema import LEGACY_REVISIONS, READ_COMPATIBLE_REVISIONS, SCHEMA_REVISION, outdated
from ...schema import migrations_path as schema_migrations_path
from .walcheck import APPLICATION_ID, MARK_MAX, next_mark, wal_commits

DEFAULT_BUSY_TIMEOUT = 5.0  # seconds
#: How long a store's first write waits for readers to let its new mark into the file
#: (:class:`WalMarks`), in seconds: other writers wait as long.
SETTLE_WAIT = 0.2
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024  # bytes
# WAL checkpoints with the write queue (see SQLiteBackend._wrote and .checkpoint):
CHECKPOINT_FRAMES = 1000  # WAL frames (pages, estimated) one store writes between two checkpoints
WAL_RESET_FRAMES = 4000  # WAL frames (pages) past which a checkpoint makes sure the WAL starts over
RESTART_WAIT = 0.05  # seconds a RESTART waits, holding the write lock, for readers or another checkpoint
DURABILITY = {"normal": "NORMAL", "full": "FULL"}
# Page cache per connection, KiB (SQLite's default is 2 MiB; it grows only as pages are read).
# The message rows of a session with many chunks lie on table pages shared with the chunks,
# more pages than 2 MiB holds for a long session, so every projection would read them again
# one by one. 8 MiB keeps them; a write by another process still empties the cache.
CACHE_SIZE_KIB = 8192


def wal_frames(events: int, payload_bytes: int) -> float:
    """About how many WAL frames (pages) one commit of ``events`` events holding
    ``payload_bytes`` of payload writes: 2.5 (the table's last page, the key index's, now
    and then a parent page) plus one per 2,800 bytes of rows (a row is its payload and
    about 200 bytes more). A test keeps the estimate within a factor of 1.6 of what SQLite
    writes with 4 KiB pages."""
    return 2.5 + (payload_bytes + 200 * events) / 2800


def database_url(target: str | os.PathLike) -> str:
    """Turn a path (``agent.db``) or an SQLAlchemy URL (``sqlite:///agent.db``) into a URL."""
    text = os.fspath(target)
    if "://" in text:
        return text
    if not text:  # Path("") is the current folder: say what is wrong instead
        raise DatabaseError("the database path is empty (give a file, an sqlite:// URL or :memory:)")
    if text == ":memory:":
        return "sqlite://"
    return "sqlite:///" + _absolute(text)


def _absolute(text: str) -> str:
    """``str(Path(text).expanduser().absolute())``: without importing pathlib (a fifth of
    a small command's start-up) for a plain path, whose text Path would not change: no
    ``~``, no empty or ``.`` part, not ``//`` (Path keeps ``..``, as this does)."""
    parts = text.split("/")
    if os.sep == "/" and not text.startswith(("~", "//")) and "" not in parts[1:] and "." not in parts:
        return text if text.startswith("/") else os.path.join(os.getcwd(), text)
    from pathlib import Path

    return str(Path(text).expanduser().absolute())


def database_path(target: str | os.PathLike) -> str | None:
    """The file of ``target`` (a path or an ``sqlite://`` URL, read as SQLAlchemy reads one:
    ``sqlite:///relative.db``, ``sqlite:////absolute.db``); None for an in-memory database.
    Raises :class:`DatabaseError` for another URL or one with options."""
    url = database_url(target)
    if not url.lower().startswith("sqlite:"):
        raise DatabaseError(f"{url.split('://', 1)[0]} is not an SQLite URL")
    rest = url.split("://", 1)[1]
    if "?" in rest:
        raise DatabaseError(f"{url}: URL options are not supported (give the file's path)")
    if rest in ("", "/", "/:memory:"):
        return None
    if not rest.startswith("/"):
        raise DatabaseError(f"{url}: an SQLite URL has three slashes before the path (sqlite:///PATH)")
    return rest[1:]


def configure_connection(conn: sqlite3.Connection, busy_timeout: float, durability: str) -> None:
    """Apply the store's per-connection pragmas to a fresh ``sqlite3`` connection (autocommit
    mode). Nothing here writes to the file: the journal mode is set by :func:`ensure_wal`,
    once the file is known to be an eventstore database."""
    conn.isolation_level = None  # the store emits BEGIN itself
    cur = conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    if cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        cur.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    cur.execute(f"PRAGMA synchronous = {DURABILITY[durability]}")
    # events.session_id -> sessions.id is declared (readers and tools see it) but not
    # enforced here: the guard trigger refuses an unknown session on every connection,
    # whatever its pragmas, and checking it twice would cost every insert a second lookup.
    cur.execute("PRAGMA foreign_keys = OFF")
    cur.execute(f"PRAGMA cache_size = -{CACHE_SIZE_KIB}")
    cur.close()


def connect(path: str | None, busy_timeout: float, durability: str = "normal") -> sqlite3.Connection:
    """A configured read-write connection to the file ``path`` (None: a new in-memory
    database). Raises ``sqlite3.Error``."""
    conn = sqlite3.connect(":memory:" if path is None else path, timeout=busy_timeout,
                           isolation_level=None, check_same_thread=False)
    configure_connection(conn, busy_timeout, durability)
    return conn


def ensure_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL (persistent) unless it is already there or in memory."""
    cur = conn.cursor()
    if cur.execute("PRAGMA journal_mode").fetchone()[0] not in ("wal", "memory"):
        deadline = time.monotonic() + busy_timeout
        while True:  # switching to WAL needs a moment alone with the file
            try:
                cur.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except sqlite3.OperationalError as e:
                if e.sqlite_errorname not in ("SQLITE_BUSY", "SQLITE_LOCKED") or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        cur.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    cur.close()


# mxFrame and nBackfill, from offset 16 of the -shm file (the WAL index's header).
_SHM_FRAMES = struct.Struct("=I76xI").unpack


def wal_index_frames(path: str) -> int:
    """The frames in the WAL of the database file ``path`` now: ``mxFrame`` in its ``-shm``
    index (https://www.sqlite.org/walformat.html); 0 when there is none to read."""
    try:
        with open(os.path.realpath(path) + "-shm", "rb") as f:
            head = f.read(100)
    except OSError:
        return 0
    return _SHM_FRAMES(head[16:])[0] if len(head) == 100 else 0


class WalMarks:
    """Keeps an eventstore database's mark (``PRAGMA user_version``) naming both the copy of
    the file and the WAL generation, so that a WAL's page-1 images name the database file it
    was started against (see :mod:`.walcheck`).

    *The copy*: before a store's first write, :meth:`settle` gives the database a fresh
    random mark in a transaction of its own and checkpoints it into the file, with a
    ``RESTART`` checkpoint (which also makes the next writer start the WAL over). Two
    copies of one file (``cp a.db b.db``) hold the same mark; every store that writes to
    either gives it a mark of its own first, so no WAL holding content of one copy is ever
    started against a state of the file that the other copy holds too, and the other
    copy's file refuses it (:mod:`.walcheck`). Until the new mark is in the file
    the store writes nothing else: a WAL cut off before (its writer killed) holds only
    mark changes, which change nothing else whatever file they are applied to. The
    checkpoint waits at most :data:`SETTLE_WAIT` for readers of older states (while it waits,
    other writers wait too): past that the store writes anyway, its fresh mark in the WAL
    but not yet in the file, and that WAL generation is told from another copy's only by
    its pages, as a database from before this rule is.

    *The generation*: the first transaction of each WAL generation moves the mark on by
    one. A writer starts the WAL over (new salts, from its first frame) only when every
    frame of it was copied into the database file: the ``-shm`` index says so, its
    ``mxFrame`` (offset 16) equal to ``nBackfill`` (offset 96), both in the machine's byte
    order (https://www.sqlite.org/walformat.html). Read inside the write transaction (the
    write lock held, so ``mxFrame`` cannot change), equal values mean this transaction may
    start a generation, unequal ones that it will not: a transaction that might is marked
    (one page more to write, about once per checkpoint), and one that will not costs an
    84-byte ``pread`` of the ``-shm``."""

    def __init__(self, path: str):
        self._shm = os.path.realpath(path) + "-shm"
        self._fd: int | None = None
        self.settled = False  # this store gave the database a mark of its own

    def settle(self, conn: sqlite3.Connection, busy_timeout: float) -> None:
        """Before this store's first write (outside a transaction, the write queue held):
        give the database a fresh mark and checkpoint it into the file (:func:`new_mark`),
        once per store. Raises ``sqlite3.Error``."""
        if not self.settled:
            new_mark(conn, busy_timeout)
            self.settled = True

    def _starts_over(self) -> bool:
        if self._fd is None:
            try:
                self._fd = os.open(self._shm, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return False  # not (yet) a WAL database: no generation to mark
        head = os.pread(self._fd, 84, 16)
        if len(head) < 84:
            return True  # an index not built yet: the WAL is new
        max_frame, backfill = _SHM_FRAMES(head)
        return max_frame == backfill

    def mark(self, cur: sqlite3.Cursor) -> None:
        """In a write transaction on ``cur``: move the mark on when it may start a WAL generation."""
        if self._starts_over():
            move_mark(cur)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _random_below(n: int) -> int:
    """``secrets.randbelow(n)`` (the same draw: ``n.bit_length()`` random bits from
    ``os.urandom`` until below ``n``), without importing secrets (and with it random,
    hashlib, hmac and base64) into every command that writes."""
    bits = n.bit_length()
    size = (bits + 7) // 8
    while True:
        r = int.from_bytes(os.urandom(size), "big") >> (8 * size - bits)
        if r < n:
            return r


def new_mark(conn: sqlite3.Connection, busy_timeout: float) -> bool:
    """On ``conn`` (autocommit, outside a transaction): give an eventstore database a mark
    of its own (see :class:`WalMarks`) and copy it into the file. Two transactions: the
    first moves the mark on by one, so that when it starts a WAL generation that
    generation's first transaction is the usual one (it names the file it was started
    against); the second sets a fresh random mark. Then a ``RESTART`` checkpoint copies the
    WAL into the file so that the next writer starts the WAL over; it is tried again while
    readers of older states hold it back or another connection checkpoints, for at most
    :data:`SETTLE_WAIT` seconds (each try returns at once: other writers wait for it).
    Returns whether the checkpoint completed (True at once for a database without marks:
    from before revision 0260, or not eventstore's). Raises ``sqlite3.Error``."""
    cur = conn.cursor()
    try:
        for fresh in (False, True):
            cur.execute("BEGIN IMMEDIATE")
            if cur.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                cur.execute("ROLLBACK")
                return True
            if fresh:
                cur.execute(f"PRAGMA user_version = {1 + _random_below(MARK_MAX)}")
            else:
                move_mark(cur)
            cur.execute("COMMIT")
        deadline = time.monotonic() + min(SETTLE_WAIT, busy_timeout)
        pause = 0.001
        cur.execute("PRAGMA busy_timeout = 0")
        try:
            while cur.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0]:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
            return True
        finally:
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        cur.close()


def move_mark(cur: sqlite3.Cursor) -> None:
    """In a write transaction: move an eventstore database's mark on by one (nothing for a
    database from before revision 0260, which has none yet)."""
    if cur.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
        mark = cur.execute("PRAGMA user_version").fetchone()[0]
        cur.execute(f"PRAGMA user_version = {next_mark(mark) if 0 < mark <= MARK_MAX else 1}")


def open_read_only(path: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, **connect_args) -> sqlite3.Connection:
    """Open the database file ``path`` read-only (``mode=ro``). In a folder the user may
    not write, where SQLite cannot create the ``-shm`` file a WAL database needs, the file
    is opened ``immutable`` when no ``-wal`` beside it holds a committed transaction (none,
    empty, or only frames SQLite ignores): the file alone is then the whole database.
    ``connect_args`` go to ``sqlite3.connect``. Raises ``sqlite3.Error``, or
    :class:`DatabaseError` saying why a ``-wal`` that is there cannot be read."""
    # The path's bytes, percent-encoded: a file name that is not UTF-8 (Python holds its
    # bytes as surrogate escapes) opens as the same file, as the read-write open does.
    uri = "file:" + _quote(os.fsencode(os.path.abspath(path))) + "?mode=ro"
    args = {"timeout": busy_timeout, "check_same_thread": False, **connect_args}
    conn = sqlite3.connect(uri, uri=True, **args)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as e:
        conn.close()
        # SQLITE_READONLY_DIRECTORY, SQLITE_CANTOPEN: no -shm, and none can be created
        if not (e.sqlite_errorname or "").startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
            raise
        if os.path.exists(os.path.realpath(path) + "-journal"):
            raise  # a transaction cut off before WAL mode: only a writer can roll it back
        if not os.access(path, os.R_OK):
            raise DatabaseError(f"cannot open {path}: permission denied (you may not read the file)") from None
        _refuse_unreadable_wal(path)
        conn = sqlite3.connect(uri + "&immutable=1", uri=True, **args)
    return conn


# SQLite copies the WAL into the file and removes it when the last connection closes.
_OWNER_FIX = ("Ask the owner to open it once for writing ('eventstore --db {path} init'), which copies the WAL "
              "into the file and removes it")


def _refuse_unreadable_wal(path: str) -> None:
    """Raise :class:`DatabaseError` when the ``-wal`` beside ``path`` (which SQLite cannot
    open read-only: no ``-shm`` can be created) holds transactions, or cannot be read."""
    real = os.path.realpath(path)
    wal = real + "-wal"
    folder = os.path.dirname(real)
    try:
        commits = wal_commits(wal)
    except FileNotFoundError:
        return
    except OSError as e:
        raise DatabaseError(
            f"cannot read {path}: {wal} is there but cannot be read ({e.strerror}), and it may hold "
            f"transactions the file does not. {_OWNER_FIX.format(path=path)}, or to let you read {wal}") from None
    if commits:
        raise DatabaseError(
            f"cannot read {path}: {wal} holds {commits} transaction(s) not yet copied into the file, and "
            f"SQLite reads a WAL only through a {real}-shm file, which it cannot create in {folder} (you "
            f"may not write there). {_OWNER_FIX.format(path=path)}, or copy {path} and {wal} together into "
            f"a folder you can write and read the copy")


def current_revision(conn: sqlite3.Connection) -> str | None:
    """The Alembic revision stamped in the database, or None for an empty file."""
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def migrations_path(dialect: str = "sqlite") -> str:
    """Where the Alembic scripts of ``dialect``'s databases are (:func:`eventstore.schema.migrations_path`)."""
    return schema_migrations_path(dialect)


def no_database(path: str | None) -> DatabaseError:
    """The error of a read-only open where there is no database file (reads never create one)."""
    return DatabaseError(f"no database at {path or ':memory:'} (create one with 'eventstore init', 'import' or 'demo')")


def _refuse_foreign(conn: sqlite3.Connection, revision: str | None, known: list[str], name: str) -> None:
    """Raise :class:`DatabaseError` unless the file is empty or an eventstore database at a
    revision this package knows: another application's file is never changed."""
    if revision is None:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY name LIMIT 6")]
        if tables:
            raise DatabaseError(f"{name} is not an eventstore database (it holds {', '.join(tables)} but no "
                                f"eventstore schema version); eventstore leaves it unchanged")
    elif revision not in known and revision not in LEGACY_REVISIONS:
        if revision < min(LEGACY_REVISIONS):  # the first release's revisions were numbered 0001, 0002, ...
            raise DatabaseError(f"{name} is at schema revision {revision!r} of the first eventstore release: open "
                                f"it once with that release (0.1) to bring it to 0007, which this eventstore upgrades")
        raise DatabaseError(f"{name} is at schema revision {revision!r}, which this eventstore does not know "
                            f"(its latest is {SCHEMA_REVISION!r}): it was written by a newer eventstore, "
                            f"or it is another application's database; eventstore leaves it unchanged")


def check_writable(conn: sqlite3.Connection, name: str, upgrade: bool = True) -> None:
    """For a read-write open, on a read-only connection to the file (before any read-write
    one exists): raise :class:`DatabaseError` unless the file is empty or an eventstore
    database at a revision this package can upgrade (only with ``upgrade``: else
    :class:`SchemaOutdated`) or use, so that a file that is refused is never written to,
    nor its ``-wal`` checkpointed."""
    revision = current_revision(conn)
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if application_id not in (0, APPLICATION_ID):
        raise DatabaseError(f"{name} is not an eventstore database (it is another application's: its "
                            f"application_id is {application_id:#x}); eventstore leaves it unchanged")
    if revision is None or not min(LEGACY_REVISIONS) <= revision <= SCHEMA_REVISION:
        _refuse_foreign(conn, revision, [], name)
    elif not upgrade and revision != SCHEMA_REVISION:
        raise outdated(name, revision)


# What a WAL without a mark must leave as the file alone holds it (the log is append-only):
# the last rows of each table, by their key ({} a condition on it, or nothing).
_TAIL = {
    "events": "SELECT position, session_id, seq, hash FROM events {} ORDER BY position DESC LIMIT 1000",
    "sessions": "SELECT rowid, id, created_at FROM sessions {} ORDER BY rowid DESC LIMIT 1000",
}
_KEY = {"events": "position", "sessions": "rowid"}


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _quote(path: bytes) -> str:
    """``urllib.parse.quote(path)``: each byte but letters, digits and ``_.-~/`` as ``%XX``
    (without importing urllib, a tenth of a small command's start-up)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in path)


def _file_alone(path: str) -> dict[str, list] | None:
    """The last rows of the log as the database file alone holds them (its WAL ignored), or
    None when they cannot be read so (an empty file, a schema that only the WAL holds)."""
    uri = "file:" + _quote(os.fsencode(os.path.abspath(path))) + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        return {table: conn.execute(sql.format("")).fetchall() for table, sql in _TAIL.items()}
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def check_unconfirmed_wal(conn: sqlite3.Connection, path: str) -> None:
    """Before a read-write open of ``path`` whose ``-wal`` fits the file but was not proved
    to belong to it (:func:`.walcheck.wal_verdict`: a WAL started by another program
    than eventstore, or by one before revision 0260), on a read-only connection ``conn``:
    raise :class:`WalMismatch` unless the database read through the WAL passes SQLite's
    ``quick_check`` and still holds the last 1,000 events and sessions of the file alone,
    as the file holds them (a WAL of this database only adds to the log). The checks read
    the whole file (quick_check): they run only for such a WAL."""
    why = None
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if rows != ["ok"]:
            why = f"fails SQLite's quick_check ({rows[0]})"
    except sqlite3.DatabaseError as e:  # a page that is no b-tree page at all
        why = f"fails SQLite's quick_check ({e})"
    alone = _file_alone(path) if why is None else None
    if alone is not None:
        for table, tail in alone.items():
            if not tail:
                continue
            try:
                through = conn.execute(_TAIL[table].format(f"WHERE {_KEY[table]} BETWEEN ? AND ?"),
                                       (tail[-1][0], tail[0][0])).fetchall()
            except sqlite3.Error as e:
                why = f"cannot be read ({e})"
                break
            if through != tail:
                why = (f"no longer holds the last {table} of the file alone as the file holds them (a WAL "
                       f"of this database only adds to them)")
                break
    if why is not None:
        real = os.path.realpath(path)
        raise WalMismatch(
            f"{real}-wal does not belong to {path}, or the database is damaged: the WAL was not started by "
            f"this eventstore, so nothing proves that it belongs to the file, and the database read through "
            f"it {why}. Refused before anything was written; move {real}-wal (and {real}-shm) aside and run "
            f"'eventstore verify' on the file as it is")


def refuse_hard_links(path: str) -> None:
    """Raise :class:`DatabaseError` when the database file ``path`` has another name (a
    hard link): SQLite keeps a ``-wal`` and ``-shm`` beside each name, so two writers, one
    per name, would each see only their own WAL and corrupt the file. A symbolic link is
    fine (SQLite opens the file it points to, and the files beside that)."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return  # no file yet, or one SQLite's own open reports
    if links > 1:
        raise DatabaseError(
            f"{path} has {links} names (hard links to one file): SQLite keeps a -wal file beside each "
            f"name, so writers using different names would corrupt the database, and readers could miss "
            f"what was written; eventstore refuses it. Keep one name (remove the other links), or make "
            f"a real copy ('cp') or a symbolic link ('ln -s') instead")


def check_revision(conn: sqlite3.Connection, name: str) -> None:
    """For a read-only open: raise :class:`DatabaseError` unless the database is at
    :data:`SCHEMA_REVISION` or one of the :data:`READ_COMPATIBLE_REVISIONS`
    (:class:`SchemaOutdated` for an older one, which a writable open upgrades)."""
    revision = current_revision(conn)
    if revision == SCHEMA_REVISION or revision in READ_COMPATIBLE_REVISIONS:
        return
    if revision is not None and min(LEGACY_REVISIONS) <= revision < SCHEMA_REVISION:  # numbered 0007, 0008, ...
        raise outdated(name, revision)
    _refuse_foreign(conn, revision, [], name)
    raise DatabaseError(f"{name} is empty: not an eventstore database yet")


def _alembic():
    """Alembic's config and script directory for the package's migrations (imported only
    when a database needs migrating)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", migrations_path())
    return cfg, ScriptDirectory.from_config(cfg)


class _Borrowed:
    """The store's own connection lent to SQLAlchemy for a migration: everything passes
    through, but closing it is left to the store."""

    def __init__(self, conn: sqlite3.Connection):
        object.__setattr__(self, "_conn", conn)

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def __setattr__(self, name, value):
        setattr(self._conn, name, value)

    def close(self) -> None:
        pass


class Upgrade(namedtuple("Upgrade", ["migrated", "found"])):
    """What :func:`upgrade` did: ``migrated`` (by this call), and the revision it ``found``
    (None: a new, empty database). (collections' namedtuple: typing's costs its import.)"""

    __slots__ = ()
    migrated: bool
    found: str | None


def upgrade(conn: sqlite3.Connection, name: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> Upgrade:
    """Bring the database behind ``conn`` (autocommit mode) to :data:`SCHEMA_REVISION`;
    return whether this call migrated, and from which revision (None: a new database).

    Cheap when the schema is current (one query; SQLAlchemy and Alembic are not imported).
    Safe when several processes open a new file at once: the upgrade runs inside one
    ``BEGIN IMMEDIATE`` transaction (SQLite DDL is transactional), so one process migrates
    while the others wait on the lock, then find the database at head and do nothing.
    A database of the first release (at its last revision, 0007) is upgraded by
    :func:`upgrade_legacy` in the same transaction. Raises :class:`DatabaseError`, changing
    nothing, for a file that holds tables but no eventstore schema version, or a revision
    this package does not know (a newer one).
    """
    if current_revision(conn) == SCHEMA_REVISION:
        ensure_wal(conn, busy_timeout)
        return Upgrade(False, SCHEMA_REVISION)
    from alembic import command
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import StaticPool

    # A marked database gets a mark of its own before the migration writes (see WalMarks).
    if current_revision(conn) is not None:
        new_mark(conn, busy_timeout)
    cfg, script = _alembic()
    known = [s.revision for s in script.walk_revisions()]
    engine = create_engine("sqlite://", creator=lambda: _Borrowed(conn), poolclass=StaticPool)

    @event.listens_for(engine, "begin")
    def _on_begin(c):
        c.exec_driver_sql("BEGIN IMMEDIATE")

    migrated = False
    try:
        with engine.connect() as sa_conn:
            with sa_conn.begin():  # BEGIN IMMEDIATE: one migrator at a time
                revision = current_revision(conn)
                if revision != SCHEMA_REVISION:
                    _refuse_foreign(conn, revision, known, name)
                    if revision in LEGACY_REVISIONS:
                        upgrade_legacy(conn, name, script)
                    cfg.attributes["connection"] = sa_conn
                    command.upgrade(cfg, "head")
                    move_mark(conn.cursor())  # (this may be the first transaction of a WAL generation)
                    migrated = True
    finally:
        engine.dispose()
    ensure_wal(conn, busy_timeout)
    return Upgrade(migrated, revision)


_SPACE = LazyPattern(r"\s+")  # (compiled at first use: not at start-up)


def _normal(sql: str | None) -> str:
    return _SPACE.sub(" ", sql or "").strip()


def upgrade_legacy(conn: sqlite3.Connection, name: str, script) -> None:
    """Bring a database of the first release (stamped ``0007``) to the baseline revision,
    inside the caller's write transaction: check that its tables are the baseline's (they
    were created by the same DDL), then drop its indexes, triggers and views and create the
    baseline's (plain DROP and CREATE: the stored rows are not touched), and stamp the
    baseline. Raises :class:`DatabaseError` if the tables differ (changing nothing)."""
    base = script.get_revision(script.get_base()).module
    stored = {n: s for n, s in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")}
    for table, ddl in base.SQLITE_TABLES.items():
        if _normal(stored.get(table)) != _normal(ddl):
            raise DatabaseError(f"{name}: table {table} is not the one the first eventstore release created "
                                f"(edited by hand?); eventstore leaves the file unchanged")
    objects = conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger', 'view') "
                           "AND name NOT LIKE 'sqlite_autoindex%'").fetchall()
    for kind, obj in objects:
        conn.execute(f'DROP {kind.upper()} "{obj}"')
    for group in (base.SQLITE_INDEXES, base.SQLITE_TRIGGERS, base.SQLITE_VIEWS):
        for ddl in group.values():
            conn.execute(ddl)
    conn.execute("UPDATE alembic_version SET version_num = ?", (script.get_base(),))
