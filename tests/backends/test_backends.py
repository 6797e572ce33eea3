"""The seam: which backend a target opens, and that nothing above the backends imports a
database driver."""

from __future__ import annotations

import ast
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS

from eventstore import DatabaseError, EventStore
from eventstore.backends import backend_class, base
from eventstore.backends.sqlite import SQLiteBackend, error_code

PACKAGE = TESTS.parent / "eventstore"
DRIVERS = {"sqlite3", "psycopg", "psycopg2", "sqlalchemy", "alembic"}


@pytest.mark.parametrize("target", ["agent.db", "/tmp/x/agent.db", ":memory:", "sqlite://", "sqlite:///agent.db",
                                    "sqlite:////tmp/agent.db", Path("agent.db")])
def test_paths_and_sqlite_urls_open_sqlite(target):
    assert backend_class(target) is SQLiteBackend


def test_another_database_url_is_refused_in_one_sentence():
    with pytest.raises(DatabaseError, match=r"^mysql:// databases are not supported"):
        backend_class("mysql://u@h/db")


@pytest.mark.parametrize("url", ["postgresql://u@localhost:5432/db", "postgresql+psycopg://u@localhost/db"])
def test_postgresql_without_its_driver_says_which_install_fixes_it(url, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(DatabaseError, match=r"pip install 'psycopg\[binary\]>=3.2' \(in the checkout of eventstore: pip install '\.\[postgres\]'\)"):
        EventStore.open(url)


def _modules(below: Path = PACKAGE):
    """Every module of the package below ``below`` (sub-packages included), parsed."""
    for path in sorted(below.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def driver_imports(modules) -> list[str]:
    """``module: driver`` for each import of a database driver in ``modules``."""
    offenders = []
    for name, tree in modules:
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{name}: {n}" for n in names if n.split(".")[0] in DRIVERS]
    return offenders


def private_imports(modules) -> list[str]:
    """``module: from X import _name`` for each private name of the package imported by
    another module (``from eventstore.x import _y``, ``from .x import _y``)."""
    offenders = []
    for name, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "eventstore"):
                offenders += [f"{name}: from {'.' * node.level}{node.module or ''} import {a.name}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return offenders


def test_no_module_above_the_backends_imports_a_driver():
    """validation, codec, chain, store, import/export, follow, verify, the CLI, the viewer,
    the transcript importers, the integrations: database-neutral, in every sub-package."""
    above = [(name, tree) for name, tree in _modules() if not name.startswith("eventstore/backends/")]
    assert {name.split("/")[1] for name, _ in above} >= {"web", "io", "integrations", "log", "audit"}
    assert driver_imports(above) == []


def test_the_checks_see_into_sub_packages():
    """The two checks above and below would fail on a sub-package's module that did it."""
    bad = ast.parse("import sqlite3\nfrom eventstore.log.codec import _secret\nfrom .x import _y\n")
    assert driver_imports([("eventstore/io/transcripts/x.py", bad)]) == ["eventstore/io/transcripts/x.py: sqlite3"]
    assert len(private_imports([("eventstore/web/x.py", bad)])) == 2


def test_no_private_name_is_imported_across_modules():
    """A name that starts with an underscore stays in its module: what another module needs
    is public there (or lives where it is used)."""
    assert private_imports(_modules()) == []


def test_importing_the_package_loads_no_driver():
    code = f"import sys, eventstore, eventstore.cli; print(sorted({{m.split('.')[0] for m in sys.modules}} & {DRIVERS!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout
    assert out.strip() == "[]"


def test_sqlite_refusals_are_read_by_their_code_not_their_words(db_path):
    """error_code() takes the leading ES code of a trigger's RAISE, and nothing else."""
    with EventStore.open(db_path) as store:
        store.create_session("s").append("x", {})
    conn = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError) as refused:
        conn.execute("DELETE FROM events")
    assert error_code(refused.value) == base.EVENTS_APPEND_ONLY
    with pytest.raises(sqlite3.IntegrityError) as refused:
        conn.execute("INSERT INTO sessions (id, created_at) VALUES ('a', 1), ('a', 2)")
    assert error_code(refused.value) == base.SESSION_EXISTS
    conn.execute("CREATE TEMP TABLE t (x)")
    conn.execute("CREATE TEMP TRIGGER t_guard BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, 'seq is not the next seq'); END")
    with pytest.raises(sqlite3.IntegrityError) as other:
        conn.execute("INSERT INTO t VALUES (1)")
    assert error_code(other.value) is None  # the words alone are no code
    with pytest.raises(sqlite3.IntegrityError) as check:
        conn.execute("INSERT INTO sessions (id, created_at) VALUES ('', 1)")
    assert error_code(check.value) is None  # a CHECK constraint, not a trigger
    conn.close()


def test_every_code_is_documented():
    """Every ES code a migration raises is in ``CODES`` and in docs/schema.md's table."""
    raised = set()
    for path in [*(PACKAGE.parent / "migrations").rglob("*.py"), *(PACKAGE / "backends").rglob("*.py")]:
        raised |= set(re.findall(r"\bES0[0-9][0-9]\b", path.read_text(encoding="utf-8")))
    assert raised and raised <= set(base.CODES), sorted(raised - set(base.CODES))
    schema_md = (PACKAGE.parent / "docs" / "schema.md").read_text(encoding="utf-8")
    for code in base.CODES:
        assert f"| `{code}` |" in schema_md, code


def test_session_payloads_are_the_columns_of_session_events_and_the_head(store):
    """Both backends' one-statement read and the base class's (``next_seq``, then
    ``session_events``) agree."""
    s = store.create_session("p")
    for i in range(7):
        s.append("user/message" if i % 3 else "note/x", {"content": str(i), "n": i})
    store.create_session("other").append("user/message", {"content": "not mine"})
    store.create_session("empty")
    b = store._backend
    for types in (["user/message"], ["user/message", "note/x"], ["nothing/here"]):
        for limit, last in ((None, False), (100, False), (3, False), (3, True), (0, True)):
            got = b.session_payloads("p", types, limit, last)
            assert got == base.Backend.session_payloads(b, "p", types, limit, last)
            rows = b.session_events("p", -1, types, 2**62 if limit is None else limit, last)
            assert got == (7, [(r[0], r[2], r[4]) for r in rows])
    assert [seq for seq, _, _ in b.session_payloads("p", ["user/message"], 3, last=True)[1]] == [2, 4, 5]
    assert b.session_payloads("p", ["user/message"], 2)[1][0] == (1, "user/message", '{"content":"1","n":1}')
    assert b.session_payloads("empty", ["user/message"]) == (0, [])
    assert b.session_payloads("nobody", ["user/message"], 5, last=True) == (0, [])
