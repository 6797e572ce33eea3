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
