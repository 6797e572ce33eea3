"""Shared fixtures: a fresh store (on each backend), the conformance fixtures, and helpers
to reach the reference implementation when it is beside the checkout.

``store`` is parametrized by ``backend_url``: every test that only needs "a store" runs on
each backend listed in ``BACKENDS`` (SQLite, and PostgreSQL on a throwaway server). Tests about
SQLite itself (WAL, checkpoints, the lock file, fork, attacks through sqlite3) take
``sqlite_store`` (or ``db_path``) instead, or carry ``@pytest.mark.sqlite_only``."""

from __future__ import annotations

import atexit
import io
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import settings

from eventstore import EventStore

# Local runs draw new examples every time (that is how they find bugs); CI draws the same
# ones on every run, so that a landing never depends on the luck of the draw.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

#: This folder (the tests' helpers and data; the tests themselves sit in folders below it,
#: mirroring the package) and the checkout above it.
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
# A test module may import another's helpers by its name (from test_postgres import
# owned_database) from whichever folder either sits in.
sys.path[1:1] = sorted({str(p.parent) for p in TESTS.glob("*/**/test_*.py")})
FIXTURES = sorted(p.stem for p in DATA.glob("*.jsonl"))
# The project's shared folder (spec, reference implementation) sits beside the checkout;
# EVENTSTORE_SHARED points elsewhere. Tests that need it skip when it is absent.
SHARED = Path(os.environ.get("EVENTSTORE_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
REFERENCE = SHARED / "reference" / "ref.mjs"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "events.db"


#: The backends the parametrized ``store`` fixture runs on.
BACKENDS = ["sqlite", "postgres"]


_TEMPLATE: list[Path] = []


def _sqlite_template() -> Path:
    """An SQLite file migrated to the head revision once per test process."""
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="eventstore-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "events.db"
        EventStore.open(path).close()
        assert not Path(f"{path}-wal").exists()  # closed cleanly: the file alone is the store
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def new_sqlite_store(path: Path) -> Path:
    """``path`` made an empty store at the head revision, a copy of one migrated once per
    process (copying takes a hundredth of a second, where migrating a new file takes a fifth,
    and half a second in a new process that must import Alembic): for a test that hands a
    database to a real process when migrating it is not what the test is about."""
    shutil.copyfile(_sqlite_template(), path)
    return path


@pytest.fixture(scope="session")
def sqlite_store_template() -> Path:
    """An SQLite file migrated to the head revision once per run (see new_sqlite_store)."""
    return _sqlite_template()


@pytest.fixture(params=BACKENDS)
def backend_url(request, db_path: Path) -> str:
    """What ``EventStore.open`` takes for a fresh, empty database of each backend (SQLite: the
    file ``db_path``, not there yet; PostgreSQL: a new database, ``pg_url``).

    For a test that takes ``store`` (which opens it, migrating it, before the test begins),
    it holds that store already: a copy of ``sqlite_store_template`` or of
    ``pg_store_template``, made in a hundredth of the time migrating takes."""
    migrated = "store" in request.fixturenames
    if request.param == "sqlite":
        if migrated:
            shutil.copyfile(request.getfixturevalue("sqlite_store_template"), db_path)
        return str(db_path)
    if request.param == "postgres":
        return request.getfixturevalue("pg_store_url" if migrated else "pg_url")
    raise AssertionError(f"no database for backend {request.param!r}")  # pragma: no cover


@pytest.fixture
def store(backend_url: str):
    with EventStore.open(backend_url) as s:
        yield s


@pytest.fixture
def sqlite_store(db_path: Path):
    """A store in an SQLite file (``db_path``), for tests about SQLite itself."""
    with EventStore.open(db_path) as s:
        yield s


def hashed_line(type_: str, seq: int, ts: float, payload: str, salt: bytes | None) -> str:
    """The line an event's chain hash covers (docs/redaction.md): its JSONL line, with the
    payload's salted commitments in place of the payload when ``salt`` is stored."""
    from eventstore.log.codec import loads
    from eventstore.log.commit import commit_json
    from eventstore.log.line import event_line

    return event_line(type_, seq, ts, payload if salt is None else commit_json(bytes(salt), loads(payload)))


def db_rows(store: EventStore, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of a plain SQL read (``?`` placeholders) on ``store``'s own database, for tests
    that look at what is stored."""
    if store._backend.name == "sqlite":
        return store._backend._read(sql, params)
    if store._backend.name == "postgresql":
        return [tuple(r) for r in store._backend._read(sql.replace("?", "%s"), params)]
    raise AssertionError(f"db_rows: no reader for backend {store._backend.name!r}")  # pragma: no cover


def pytest_configure(config):
    """Where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``), compile the package,
    its migrations and these helpers once before the run: the tests start ``python -m
    eventstore`` hundreds of times, and each start compiled the package again (half again the
    CPU time of a short command). Python reads the files even where it writes none. (Done in
    the controlling process only, before any xdist worker starts.)"""
    if not sys.dont_write_bytecode or hasattr(config, "workerinput"):
        return
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder, depth in ((root / "eventstore", 20), (root / "migrations", 20), (Path(__file__).parent, 20)):
        compileall.compile_dir(folder, maxlevels=depth, quiet=2)  # (a read-only checkout: nothing written, no harm)


#: The files that take longest, longest first (tests/ paths): under ``-n`` each file runs on
#: one worker (``--dist loadfile``), so these are handed out first and none is left running
#: alone at the end (a file not listed keeps its place after them).
LONGEST_FILES = ("web/test_web.py", "io/test_bounds.py", "backends/postgres/test_pg_verify_sql.py",
                 "backends/postgres/test_postgres.py", "io/test_copy.py", "io/test_import_chunked.py",
                 "io/transcripts/test_transcripts_growth.py", "cli/test_install.py",
                 "io/transcripts/test_transcripts_codex.py", "test_bench_smoke.py")


def pytest_collection_modifyitems(config, items):
    """A test marked ``sqlite_only`` (about SQLite) or ``one_backend`` (its outcome does not
    depend on the database) runs only with the SQLite store (deselected otherwise). The
    files of :data:`LONGEST_FILES` come first."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend_url", "sqlite") if callspec is not None else "sqlite"
        once = item.get_closest_marker("sqlite_only") or item.get_closest_marker("one_backend")
        (drop if backend != "sqlite" and once else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    rank = {TESTS / name: i for i, name in enumerate(LONGEST_FILES)}
    keep.sort(key=lambda item: rank.get(item.path, len(rank)))  # (stable: the rest as collected)
    items[:] = keep


@pytest.fixture
def raw(db_path: Path, store):
    """A separate plain sqlite3 connection to the store's file (as an auditor would open it);
    a test that takes it is about SQLite, and skips with another backend's store."""
    if store._backend.name != "sqlite":
        pytest.skip("a plain sqlite3 connection: about SQLite itself")
    conn = sqlite3.connect(db_path, isolation_level=None)
    yield conn
    conn.close()


def export_bytes(store: EventStore, sid: str) -> bytes:
    """Session ``sid`` exported as the reference writes it, as bytes."""
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


def importing_sessions(db: Path) -> list[str]:
    """The sessions of the SQLite file ``db``'s ``importing`` table (unfinished imports),
    read with a plain read-only connection; [] while the file or the table is not there."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:  # not created yet
        return []
    try:
        return [r[0] for r in conn.execute("SELECT session_id FROM importing")]
    except sqlite3.Error:  # not migrated yet
        return []
    finally:
        conn.close()


def interrupt_mid_import(argv: list[str], db: Path, first: str) -> tuple[subprocess.Popen, str, str]:
    """Run the CLI ``argv`` in a real process, send it a real SIGINT once ``db`` holds an
    unfinished import of a session other than ``first`` (past the first, in the middle of
    another), and return the process and its stdout and stderr."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not [s for s in importing_sessions(db) if s != first]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc, out, err


def wait_until(cond, timeout: float = 60.0) -> bool:
    """Whether ``cond()`` became true within ``timeout`` seconds (looked at every 0.05 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def reference_available() -> bool:
    return shutil.which("node") is not None and REFERENCE.is_file()


needs_reference = pytest.mark.skipif(not reference_available(),
                                     reason="node or the shared folder is absent (set EVENTSTORE_SHARED)")


# -- PostgreSQL: one throwaway server per test process (tests/pgserver.py) --------------------
# (Under pytest-xdist each worker is a process of its own, with its own server.)
# Without PostgreSQL the tests that need it skip, with a reason that says how to install it;
# EVENTSTORE_REQUIRE_POSTGRES=1 (set by .ci/run) makes a missing or broken server a failure.
REQUIRE_POSTGRES = os.environ.get("EVENTSTORE_REQUIRE_POSTGRES") == "1"


@pytest.fixture(scope="session")
def pg_server():
    """The running :class:`pgserver.PgServer` (stopped, and its folder removed, at the end)."""
    from pgserver import PgServer, PostgresMissing

    try:
        server = PgServer().start()
    except (PostgresMissing, RuntimeError) as e:
        if REQUIRE_POSTGRES:
            pytest.fail(f"EVENTSTORE_REQUIRE_POSTGRES=1 but no PostgreSQL server: {e}", pytrace=False)
        pytest.skip(str(e).splitlines()[0])
    try:
        import psycopg  # noqa: F401
    except ImportError:
        server.stop()
        if REQUIRE_POSTGRES:
            pytest.fail("EVENTSTORE_REQUIRE_POSTGRES=1 but psycopg is missing: pip install -e '.[test]'",
                        pytrace=False)
        pytest.skip("psycopg is not installed (pip install '.[postgres]')")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A libpq URL (as the superuser) of a new empty database of its own for one test (no
    tables: for tests of what opening, migrating or granting does to a bare database)."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="session")
def pg_store_template(pg_server) -> str:
    """The name of a database migrated to the head revision once per run, never opened by a
    test: ``CREATE DATABASE ... TEMPLATE`` copies it in a hundredth of a second, where
    migrating a new database takes a tenth."""
    name = pg_server.create_database("eventstore_template")
    EventStore.open(pg_server.url(name)).close()
    return name


@pytest.fixture
def pg_store_url(pg_server, pg_store_template: str) -> str:
    """A libpq URL (as the superuser) of a new database of its own for one test, holding an
    empty store at the head revision (a copy of ``pg_store_template``): what the first
    ``EventStore.open`` of an empty database leaves."""
    name = pg_server.create_database(template=pg_store_template)
    yield pg_server.url(name)
    pg_server.drop_database(name)


#: ``python -c PEAK ARGV...`` runs ARGV and prints its peak RSS (``peak-kb N``) as the last
#: line of stderr: measured from a small fresh process, since a child forked from the test
#: process starts out counting the test process's pages.
PEAK = ("import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:])\n"
        "print('peak-kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(r.returncode)\n")
