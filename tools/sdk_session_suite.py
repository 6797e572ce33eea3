"""Run the OpenAI Agents SDK's own session tests against EventStoreSession (issue 37).

Usage (needs a clone of github.com/openai/openai-agents-python; its test code is read from
there and never copied into this repository)::

    python tools/sdk_session_suite.py /path/to/openai-agents-python [--rev v0.24.0] [--postgres]

It writes the SDK's tests/memory/test_session.py and test_session_limit.py (and the
tests/test_responses.py helpers they import) at ``--rev`` (default: the tag of the installed
openai-agents, else HEAD) into a temporary folder, beside a conftest.py shim that makes every
``SQLiteSession(session_id, db_path, ...)`` an ``EventStoreSession(session_id,
EventStore.open(db_path), ...)`` (``--postgres``: a fresh database per db_path on a
throwaway server, tests/pgserver.py), leaves out the tests of SQLiteSession's internals, and
runs pytest there. Prints pytest's summary line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_responses.py", "tests/memory/test_session.py", "tests/memory/test_session_limit.py"]

# The conftest.py written beside the SDK's tests.
SHIM = r'''"""Shim: run the Agents SDK's own session tests against eventstore's EventStoreSession.

Every ``SQLiteSession(session_id, db_path, ..., session_settings=...)`` the tests build is an
``EventStoreSession(session_id, EventStore.open(db_path), session_settings=...)``
(``:memory:`` -> a fresh temporary file; with EVENTSTORE_SDK_PG=postgresql://.../ each
db_path gets a fresh PostgreSQL database on that server). The tests of SQLiteSession's
internals (its tables, connections, locks, corrupt rows, the SDK's _await_mutation) are
left out. ``@pytest.mark.asyncio`` tests run with asyncio.run (pytest-asyncio is not
installed)."""

import asyncio
import inspect
import os
import tempfile
import uuid

import agents
import pytest

from eventstore import EventStore
from eventstore.integrations.openai_agents import EventStoreSession

INTERNALS = {
    "test_await_mutation_cancellation_hides_later_failure_without_loop_error",
    "test_sqlite_session_close_closes_worker_thread_connections",
    "test_sqlite_session_closed_rejects_empty_add_items",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent",
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",
    "test_sqlite_session_file_lock_is_shared_across_instances",
    "test_sqlite_session_failed_add_items_releases_write_lock",
    "test_sqlite_session_failed_clear_session_rolls_back",
    "test_sqlite_session_failed_pop_item_releases_write_lock",
    "test_sqlite_session_rollback_failure_evicts_connection",
    "test_sqlite_session_close_retries_quarantined_connection",
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",
}

_stores: dict[str, EventStore] = {}
_PG = None
if os.environ.get("EVENTSTORE_SDK_PG"):  # a throwaway server of eventstore's tests (tests/pgserver.py)
    import sys
    sys.path.insert(0, os.environ["EVENTSTORE_TESTS"])
    import atexit

    from pgserver import PgServer
    _PG = PgServer().start()
    atexit.register(_PG.stop)


def _target(db_path) -> str:
    if _PG is not None:
        return _PG.url(_PG.create_database())
    if str(db_path) == ":memory:":
        db_path = os.path.join(tempfile.mkdtemp(), "memory.db")
    return str(db_path)


def SQLiteSession(session_id, db_path=":memory:", sessions_table="agent_sessions",
                  messages_table="agent_messages", session_settings=None):
    key = str(db_path) if str(db_path) != ":memory:" else uuid.uuid4().hex
    if key not in _stores:
        _stores[key] = EventStore.open(_target(db_path))
    return EventStoreSession(session_id, _stores[key], session_settings=session_settings)


agents.SQLiteSession = SQLiteSession


def pytest_collection_modifyitems(config, items):
    keep = [i for i in items if i.originalname not in INTERNALS]
    config.hook.pytest_deselected(items=[i for i in items if i.originalname in INTERNALS])
    items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {k: pyfuncitem.funcargs[k] for k in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(asyncio.wait_for(pyfuncitem.obj(**args), 60))
        return True
    return None


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    for store in _stores.values():
        store.close()
    _stores.clear()


def pytest_configure(config):
    config.addinivalue_line("markers", "asyncio: run with asyncio.run")
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sdk", help="a clone (or bare git directory) of openai-agents-python")
    parser.add_argument("--rev", help="the revision to read the tests at")
    parser.add_argument("--postgres", action="store_true", help="run on PostgreSQL instead of SQLite")
    args = parser.parse_args()
    git = ["git", "-C", args.sdk]
    rev = args.rev
    if rev is None:
        tag = "v" + importlib.metadata.version("openai-agents")
        known = subprocess.run([*git, "rev-parse", "-q", "--verify", f"refs/tags/{tag}"], capture_output=True)
        rev = tag if known.returncode == 0 else "HEAD"
        if rev == "HEAD":
            print(f"note: {args.sdk} has no tag {tag} (the installed version): using HEAD", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tests" / "memory").mkdir(parents=True)
        for init in ("tests/__init__.py", "tests/memory/__init__.py"):
            (work / init).touch()
        for name in FILES:
            text = subprocess.run([*git, "show", f"{rev}:{name}"], capture_output=True, check=True).stdout
            (work / name).write_bytes(text)
        (work / "conftest.py").write_text(SHIM)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(work), str(ROOT)]),
                   EVENTSTORE_TESTS=str(ROOT / "tests"))
        if args.postgres:
            env["EVENTSTORE_SDK_PG"] = "1"
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                              *FILES[1:]], cwd=work, env=env, capture_output=True, text=True)
        lines = [line for line in run.stdout.splitlines() if line.strip()]
        print("\n".join(lines[-1:] if run.returncode == 0 else lines[-40:]))
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
