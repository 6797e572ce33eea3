"""Shared fixtures: a fresh store in a temporary folder, the conformance fixtures, and
helpers to reach the reference implementation when it is beside the checkout."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import settings

from eventstore import EventStore

# Local runs draw new examples every time (that is how they find bugs); CI draws the same
# ones on every run, so that a landing never depends on the luck of the draw.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

DATA = Path(__file__).parent / "data"
FIXTURES = sorted(p.stem for p in DATA.glob("*.jsonl"))
# The project's shared folder (spec, reference implementation) sits beside the checkout;
# EVENTSTORE_SHARED points elsewhere. Tests that need it skip when it is absent.
SHARED = Path(os.environ.get("EVENTSTORE_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
REFERENCE = SHARED / "reference" / "ref.mjs"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "events.db"


@pytest.fixture
def store(db_path: Path):
    with EventStore.open(db_path) as s:
        yield s


@pytest.fixture
def raw(db_path: Path, store):
    """A separate plain sqlite3 connection to the store's file (as an auditor would open it)."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    yield conn
    conn.close()


def export_bytes(store: EventStore, sid: str) -> bytes:
    """Session ``sid`` exported as the reference writes it, as bytes."""
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


def reference_available() -> bool:
    return shutil.which("node") is not None and REFERENCE.is_file()


needs_reference = pytest.mark.skipif(not reference_available(),
                                     reason="node or the shared folder is absent (set EVENTSTORE_SHARED)")


@pytest.fixture
def migrate_to():
    """``migrate_to(db_path, revision)``: create or upgrade the file to an older schema
    revision with the project's own migrations (to test upgrades from it)."""
    from alembic import command
    from alembic.config import Config

    from eventstore.engine import make_engine, migrations_path

    def migrate(db_path, revision: str) -> None:
        engine = make_engine(db_path)
        try:
            with engine.begin() as conn:
                cfg = Config()
                cfg.set_main_option("script_location", migrations_path())
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
        finally:
            engine.dispose()

    return migrate


# -- PostgreSQL: one throwaway server for the whole run (tests/pgserver.py) -------------------
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
        pytest.skip("psycopg is not installed (pip install 'eventstore[postgres]')")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A libpq URL (as the superuser) of a new empty database of its own for one test."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)
