"""Engine setup: connection pragmas, write transactions, and migrating on open.

Every connection gets SQLAlchemy's recipe for SQLite transactions (the driver's implicit
``BEGIN`` is switched off and the store emits its own): a write transaction always starts
with ``BEGIN IMMEDIATE``, so the busy timeout applies when it starts instead of failing
with ``database is locked`` when a read is upgraded to a write.

Defaults (documented in the README and docs/concurrency.md): WAL journal,
``synchronous=NORMAL`` (an acknowledged append survives a crash of the process;
``durability="full"`` also survives power loss), ``journal_size_limit`` 64 MiB, busy
timeout 5 seconds. An :class:`~eventstore.EventStore` also queues its writers on a lock
file and checkpoints the WAL itself (see :mod:`eventstore.writelock` and the constants
below).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool, StaticPool

from .errors import DatabaseError
from .schema import READ_COMPATIBLE_REVISIONS, SCHEMA_REVISION
from .walcheck import check_wal

DEFAULT_BUSY_TIMEOUT = 5.0  # seconds
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024  # bytes
# WAL checkpoints with the write queue (see EventStore._wrote and eventstore.checkpoint):
CHECKPOINT_FRAMES = 1000  # WAL frames (pages, estimated) one store writes between two checkpoints
WAL_RESET_FRAMES = 4000  # WAL frames (pages) past which a checkpoint makes sure the WAL starts over
RESTART_WAIT = 0.05  # seconds that checkpoint waits, holding the write lock, for readers to leave the WAL
DURABILITY = {"normal": "NORMAL", "full": "FULL"}
# Page cache per connection, KiB (SQLite's default is 2 MiB; it grows only as pages are read).
# The message rows of a session with many chunks lie on table pages shared with the chunks:
# 100,000 chunks spread 1,000 messages over ~550 pages, more than 2 MiB holds, so every
# projection read them all again with a pread each (1.5x the time of a session without
# chunks). 8 MiB keeps them; a write by another process still empties the cache.
CACHE_SIZE_KIB = 8192


def wal_frames(events: int, payload_bytes: int) -> float:
    """About how many WAL frames (pages) one commit of ``events`` events holding
    ``payload_bytes`` of payload writes: 2.5 (the table's last page, the key index's, now
    and then a parent page) plus one per 2,800 bytes of rows (a row is its payload and
    about 200 bytes more). SQLite wrote, with 4 KiB pages: 2.1 frames for a single small
    append, 3.6 for a batch of 10 and 10.1 for a batch of 100 chunk events, 5.3 for one
    5,000-byte payload (a test keeps the estimate within a factor of 1.6)."""
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
    return "sqlite:///" + str(Path(text).expanduser().absolute())


def configure_connection(dbapi_conn: sqlite3.Connection, busy_timeout: float, durability: str) -> None:
    """Apply the store's per-connection pragmas to a fresh ``sqlite3`` connection (autocommit
    mode). Nothing here writes to the file: the journal mode is set by :func:`upgrade`, once
    the file is known to be an eventstore database."""
    dbapi_conn.isolation_level = None  # the store emits BEGIN itself
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    if cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        cur.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    cur.execute(f"PRAGMA synchronous = {DURABILITY[durability]}")
    # events.session_id -> sessions.id is declared (readers and tools see it) but not
    # enforced here: the guard trigger refuses an unknown session on every connection,
    # whatever its pragmas, and checking it twice cost 1,500 CPU instructions a row.
    cur.execute("PRAGMA foreign_keys = OFF")
    cur.execute(f"PRAGMA cache_size = -{CACHE_SIZE_KIB}")
    cur.close()


def ensure_wal(dbapi_conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL (persistent) unless it is already there or in memory."""
    cur = dbapi_conn.cursor()
    if cur.execute("PRAGMA journal_mode").fetchone()[0] not in ("wal", "memory"):
        deadline = time.monotonic() + busy_timeout
        while True:  # switching to WAL needs a moment alone with the file
            try:
                cur.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        cur.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    cur.close()


def open_read_only(path: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, **connect_args) -> sqlite3.Connection:
    """Open the database file ``path`` read-only (``mode=ro``), falling back to
    ``immutable=1`` when SQLite cannot create the ``-shm`` file beside a WAL database (a
    folder the user may only read) and no ``-wal`` file shows a writer at work.
    ``connect_args`` go to ``sqlite3.connect``. Raises ``sqlite3.Error``."""
    uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
    args = {"timeout": busy_timeout, "check_same_thread": False, **connect_args}
    conn = sqlite3.connect(uri, uri=True, **args)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as e:
        conn.close()
        if not ("unable to open" in str(e) or "readonly" in str(e)) or os.path.exists(path + "-wal"):
            raise
        conn = sqlite3.connect(uri + "&immutable=1", uri=True, **args)
    return conn


def make_engine(target: str | os.PathLike, busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
                durability: str = "normal", readonly: bool = False) -> Engine:
    """Create the SQLAlchemy engine for ``target`` (a path or an ``sqlite://`` URL).

    ``busy_timeout`` is in seconds; ``durability`` is ``"normal"`` or ``"full"``; with
    ``readonly`` the file must exist and is opened read-only (``mode=ro``): nothing can be
    written, not even by SQLite itself. Raises :class:`DatabaseError` for an unsupported URL
    or option, an empty path, a missing folder, a folder where the file should be, or
    (read-only) a missing file.
    """
    if durability not in DURABILITY:
        raise DatabaseError(f"durability must be one of {sorted(DURABILITY)}, not {durability!r}")
    if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or not 0 <= busy_timeout < 1e6:
        raise DatabaseError(f"busy_timeout must be a number of seconds >= 0, not {busy_timeout!r}")
    url = make_url(database_url(target))
    if url.get_backend_name() != "sqlite":
        raise DatabaseError(f"{url.get_backend_name()} is not supported yet: eventstore runs on SQLite")
    memory = url.database in (None, "", ":memory:")
    if not memory:
        parent = Path(url.database).parent
        if not parent.is_dir():
            raise DatabaseError(f"cannot open database {url.database}: folder {parent} does not exist")
        if os.path.isdir(url.database):
            raise DatabaseError(f"cannot open database {url.database}: it is a folder, not a database file")
        check_wal(url.database)  # before any connection: a foreign -wal is never read or checkpointed
    extra = {}
    if readonly:
        if memory or not os.path.isfile(url.database):
            raise DatabaseError(f"no database at {url.database or ':memory:'} "
                                f"(create one with 'eventstore init', 'import' or 'demo')")
        extra["creator"] = functools.partial(open_read_only, url.database, busy_timeout)
    engine = create_engine(
        url,
        poolclass=StaticPool if memory else NullPool,
        connect_args={"timeout": busy_timeout, "check_same_thread": False},
        **extra,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        configure_connection(dbapi_conn, busy_timeout, durability)

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def current_revision(conn: sqlite3.Connection) -> str | None:
    """The Alembic revision stamped in the database, or None for an empty file."""
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def migrations_path() -> str:
    """Where the Alembic scripts are: the installed ``eventstore/migrations`` (built from
    the repository's top-level ``migrations/``), or that folder in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return str(candidate)
    raise DatabaseError(f"the migration scripts are missing (looked in {here / 'migrations'})")


def _refuse_foreign(conn: sqlite3.Connection, revision: str | None, known: list[str], name: str) -> None:
    """Raise :class:`DatabaseError` unless the file is empty or an eventstore database at a
    revision this package knows: another application's file is never changed."""
    if revision is None:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY name LIMIT 6")]
        if tables:
            raise DatabaseError(f"{name} is not an eventstore database (it holds {', '.join(tables)} but no "
                                f"eventstore schema version); eventstore leaves it unchanged")
    elif revision not in known:
        raise DatabaseError(f"{name} is at schema revision {revision!r}, which this eventstore does not know "
                            f"(its latest is {SCHEMA_REVISION!r}): it was written by a newer eventstore, "
                            f"or it is another application's database; eventstore leaves it unchanged")


def check_revision(engine: Engine) -> None:
    """For a read-only open: raise :class:`DatabaseError` unless the database is at
    :data:`SCHEMA_REVISION` or one of the :data:`READ_COMPATIBLE_REVISIONS` (an older one
    needs a writable open to be upgraded)."""
    name = engine.url.database
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        revision = current_revision(raw)
        if revision == SCHEMA_REVISION or revision in READ_COMPATIBLE_REVISIONS:
            return
        if revision is not None and revision < SCHEMA_REVISION:  # revisions are numbered 0001, 0002, ...
            raise DatabaseError(f"{name} is at schema revision {revision!r}: open it once for writing "
                                f"('eventstore init') to upgrade it to {SCHEMA_REVISION!r}")
        _refuse_foreign(raw, revision, [], name)
        raise DatabaseError(f"{name} is empty: not an eventstore database yet")


def upgrade(engine: Engine, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> bool:
    """Bring the database to :data:`SCHEMA_REVISION`; return True if this call migrated.

    Safe when several processes open a new file at once: the upgrade runs inside one
    ``BEGIN IMMEDIATE`` transaction (SQLite DDL is transactional), so one process migrates
    while the others wait on the lock, then find the database at head and do nothing.
    Raises :class:`DatabaseError`, changing nothing, for a file that holds tables but no
    eventstore schema version, or a revision this package does not know (a newer one).
    """
    name = engine.url.database or ":memory:"
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        if current_revision(raw) == SCHEMA_REVISION:
            ensure_wal(raw, busy_timeout)
            return False
        from alembic import command
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        cfg = Config()
        cfg.set_main_option("script_location", migrations_path())
        known = [s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()]
        migrated = False
        with conn.begin():  # BEGIN IMMEDIATE: one migrator at a time
            revision = current_revision(raw)
            if revision != SCHEMA_REVISION:
                _refuse_foreign(raw, revision, known, name)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                migrated = True
        ensure_wal(raw, busy_timeout)
        return migrated
