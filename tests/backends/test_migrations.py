"""The schema's history: one Alembic history per database (migrations/sqlite,
migrations/postgres), with the same revision ids and chain, no revision that asks which
database it runs on, and no released revision that ever changes again; and databases an
earlier eventstore wrote (tests/data/schema-*, made by main ccb5db7: see
schema-fixtures.note.txt) open with today's code and upgrade in place, their log and
every read of it unchanged, on SQLite and on PostgreSQL."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, TESTS

from eventstore import EventStore, SchemaOutdated
from eventstore.schema import SCHEMA_REVISION, migrations_path

ROOT = TESTS.parent
MIGRATIONS = ROOT / "migrations"
#: Each database's folder under migrations/, and its SQLAlchemy dialect name.
DATABASES = {"sqlite": "sqlite", "postgres": "postgresql"}

#: sha256 of every released revision file. A released revision never changes: a database
#: migrated by it must mean the same thing to every later eventstore. A change of the schema
#: is a new revision (in both folders, down_revision the current head); a new revision is
#: pinned here when it is released (merged).
RELEASED = {
    "postgres/versions/0008_baseline.py": "76c5830256dfa0986b8d32bdece36f2922a28e88f1dc5dc9ddbe4121ed618e96",
    "postgres/versions/0100_usage_and_search.py": "844c392390b2971ab8397258055dada972c8a0e33c640301601297d97f86ce78",
    "postgres/versions/0150_tool_calls_is_error.py": "a3afb4f08feddee1d649c06e50bb37dbb620d9e98bcd278a5ae82b29d3b43146",
    "postgres/versions/0200_pg_search_table.py": "1d8b9f8363df3d935ca35a59817d518295495a48a16bd77bb903610fdf172734",
    "postgres/versions/0210_sessions_meta_hash.py": "5f2945493ab291b2c8defa357ae57cd1d1228257faef2dde72babf786d6bfb54",
    "postgres/versions/0220_importing.py": "c1add8f77afd1d2966cd55a26ef46e1d0337d50c16ed08fd27b525b38e009317",
    "postgres/versions/0230_guard_one_head_read.py": "2b49f0df4e6e91f6d0cece8619e4b9f8152860dcc031891d921a42140d77a372",
    "postgres/versions/0240_pg_statement_guard.py": "ad1b74bd735f8bb50d1cf5d59dd8e9ea643c0449f0f0ebdf8a032156ded84de2",
    "postgres/versions/0250_guards_no_role_can_shadow.py": "732ae5b6b88e7e4f3ce5c876798e6a9a043da47689e78eb4b152d5bd71057e2f",
    "postgres/versions/0260_sqlite_mark.py": "1237b6f545b78ca48ce9b5787890cad9dc63ef8f4b762c899e248e2d60fabbef",
    "postgres/versions/0270_split_messages_and_compaction.py": "446732413d6a1b7bcb3f928af067200bca16de32d2dae97da23ad6273526027c",
    "postgres/versions/0280_search_thinking_and_parts.py": "341a4e44695caaa361bef7ed0dac917ebb20d9b7e8381b8e181b0bc3e0fe438b",
    "postgres/versions/0290_summary_titles.py": "b1af57a619bf99be0278bc06e4e3a28a6b22f8e45b2a76cada15fa370565dca4",
    "postgres/versions/0300_turns_answered.py": "0fb070ab47011757df0e889f0e654a0d876abeccd4df043364c6e48191a195df",
    "postgres/versions/0310_event_salt.py": "72f1d996195add289b5fd47c5e9725e955c6f1046240fc59970cfe08df33d6d5",
    "postgres/versions/0320_redaction.py": "eb533bd932d532f631109fe2cc4d08651306a8bbdc0507edfd319677c9b6eae2",
    "postgres/versions/0340_redaction_changes_payload.py": "36cef9a2b97f6396f768e127bda5b86c54231c086e9a052c84ca437037124326",
    "postgres/versions/0350_messages_fewer_calls.py": "77de3629f58ef0ba9d57500e8108de2c93e57f09d2bb5685b5193e1fc373a301",
    "postgres/versions/0370_fold_keeps_escapes.py": "8f7b14254964ee91d3a1254ccc0ba017d835f7b7517f55695005d8aa2167954a",
    "sqlite/versions/0008_baseline.py": "d06bdb291441b929fcdfbb561f993d8fbf7a242def540d92fe222894d8684ea9",
    "sqlite/versions/0100_usage_and_search.py": "c39869f20c21ce9fb16774620657f6566a5351843f485c84793363e4eb12b924",
    "sqlite/versions/0150_tool_calls_is_error.py": "c06f21375b5662823dc17f0cc68c795e9a54727e33f70490b4afbb807b71dbed",
    "sqlite/versions/0200_pg_search_table.py": "dfa721d9eee32105272a2327e966105b34f1775edb02a7b43e7bb10ea8d60c12",
    "sqlite/versions/0210_sessions_meta_hash.py": "b0b305838161270c7fd1718e8694b916e241f71686f10486a8c3ccd65bcb2459",
    "sqlite/versions/0220_importing.py": "71badf8028ab2a515a7c9b8a0e8451e14fab50280e2830adafab9c757d6df0a9",
    "sqlite/versions/0230_guard_one_head_read.py": "330d7c0e058380011d26758fa035074b5cbf8b41a643f6032981bf54ea155e32",
    "sqlite/versions/0240_pg_statement_guard.py": "7432ec9af16dc644c6f61e2fe55b08f225054436357049e1a59efaf11b32dae2",
    "sqlite/versions/0250_guards_no_role_can_shadow.py": "9bda105a4582d520675826da6bf7d1412de70d773c244a6b182a6a1060bdfc57",
    "sqlite/versions/0260_sqlite_mark.py": "e1f703429a97ecde420fcb344ba98b70db55add4cc907bf340ee531e8cd92a09",
    "sqlite/versions/0270_split_messages_and_compaction.py": "a2da34cae4282b8e64c4fa05db1cf52bc9df5bb663a297c451613574072b469c",
    "sqlite/versions/0280_search_thinking_and_parts.py": "641a2ed75566fff0af533c48384e13dab9489bfc828695d87238b875109baa71",
    "sqlite/versions/0290_summary_titles.py": "26c817f52537c21510e4aeb1b45a42974c332e52b4306db134e693e8f9031e13",
    "sqlite/versions/0300_turns_answered.py": "41f4cf59caf8d0f984b2203a97a85057db6d7564efab789f1adee016c25213e0",
    "sqlite/versions/0310_event_salt.py": "ea91c804e9bac17cab07246478e13cd699bcb036099815b797cde4a44979f7d4",
    "sqlite/versions/0320_redaction.py": "e4fe76a6e399c46e09d9f006581c9fb9382cb79672449eb6b48e67bde31cc284",
    "sqlite/versions/0340_redaction_changes_payload.py": "bdcc2978bbd224b303f1da062ba0c24aff7d97b238e57ed1dcb4567879d42a00",
    "sqlite/versions/0350_messages_fewer_calls.py": "e952aae940f2116880b0ea21881ab374bb8a5c547a5c9603a1f1eb1b9c8f450a",
    "sqlite/versions/0370_fold_keeps_escapes.py": "172a20c79f2ba9a2435cd1d22572e6e2811a0c17571d53a62b0dcbad4ff70b74",
}

EVENTS = "SELECT position, session_id, seq, type, ts, payload, hash FROM events ORDER BY position"
SESSIONS = "SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY id"


def revision_files() -> list[Path]:
    return sorted(MIGRATIONS.glob("*/versions/*.py"))


# --- the history -------------------------------------------------------------------------------

def test_released_revisions_never_change():
    # (line endings as committed: a checkout that writes CRLF changes no revision)
    files = {p.relative_to(MIGRATIONS).as_posix(): hashlib.sha256(p.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
             for p in revision_files()}
    changed = sorted(name for name, digest in RELEASED.items() if name in files and files[name] != digest)
    assert not changed, (f"released revisions are frozen, and these changed: {changed}. Restore them, and put the "
                         f"change in a new revision (in migrations/sqlite/versions and migrations/postgres/versions, "
                         f"down_revision the current head)")
    gone = sorted(set(RELEASED) - set(files))
    assert not gone, f"released revisions are never removed or renamed: {gone} are missing"
    new = {name: digest for name, digest in files.items() if name not in RELEASED}
    assert not new, ("revisions not pinned in RELEASED (tests/backends/test_migrations.py); pin each when it is released:\n"
                     + "\n".join(f'    "{name}": "{digest}",' for name, digest in sorted(new.items())))


def test_every_revision_lives_in_one_database_folder():
    """migrations/ holds one folder per database and nothing shared: the old single
    history (migrations/versions) is gone, so a revision written there is caught."""
    assert not (MIGRATIONS / "versions").exists(), "revisions go in migrations/sqlite/versions and migrations/postgres/versions"
    assert sorted(p.parent.name for p in MIGRATIONS.glob("*/env.py")) == sorted(DATABASES)


def _history(database: str) -> list[tuple[str, str | None, str]]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", migrations_path(DATABASES[database]))
    script = ScriptDirectory.from_config(cfg)
    assert script.get_heads() == [SCHEMA_REVISION], database
    return [(s.revision, s.down_revision, Path(s.path).name) for s in script.walk_revisions()]


def test_both_databases_have_one_history_of_the_same_revisions():
    """The same ids, files and down_revision chain on both (a database of either kind is
    at one revision of one history), ending at SCHEMA_REVISION."""
    histories = {database: _history(database) for database in DATABASES}
    assert histories["sqlite"] == histories["postgres"]
    assert histories["sqlite"][-1][:2] == ("0008", None)


def test_each_revision_names_its_parent_in_its_docstring():
    """The docstring's "Revises:" line is the down_revision (0150 once said 0008)."""
    for path in revision_files():
        tree = ast.parse(path.read_text())
        ids = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
        said = re.search(r"^Revises: (\S+)", ast.get_docstring(tree), re.M).group(1)
        assert said == (ids["down_revision"] or "(none:"), path


#: What a revision of one database must not mention in its code (docstrings and comments
#: may compare the two).
OTHER_DATABASE = {"sqlite": re.compile(r"postgres|plpgsql|psycopg|pg_", re.I), "postgres": re.compile(r"sqlite", re.I)}


def _code_words(tree: ast.Module) -> list[str]:
    """The names, attributes and string constants of a module's code, docstrings left out."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            words.append(n.id)
        elif isinstance(n, ast.Attribute):
            words.append(n.attr)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            words.append(n.name)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            words.append(n.value)
    return words


def test_no_revision_asks_which_database_it_runs_on():
    """A revision is one database's: it never looks at the connection's dialect, and its
    code (SQL included) never names the other database."""
    for path in revision_files():
        database = path.parent.parent.name
        words = _code_words(ast.parse(path.read_text()))
        assert "dialect" not in words, f"{path.relative_to(ROOT)} branches on the dialect"
        other = sorted({m.group(0) for w in words for m in OTHER_DATABASE[database].finditer(w)})
        assert not other, f"{path.relative_to(ROOT)} (a {database} revision) mentions {other}"


def test_a_history_refuses_the_other_database(tmp_path):
    """Each env.py checks the connection: PostgreSQL's revisions never run on an SQLite file
    (which stays empty)."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    db = tmp_path / "x.db"
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", migrations_path("postgresql"))
        cfg.attributes["connection"] = conn
        with pytest.raises(RuntimeError, match="^these are the migrations of postgresql databases, not of sqlite ones$"):
            command.upgrade(cfg, "head")
    engine.dispose()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


# --- databases an earlier eventstore wrote -----------------------------------------------------

#: What main ccb5db7 read from schema-0290.db: each session's export and messages.
EXPECTED_READS = json.loads((DATA / "schema-0290.reads.json").read_text())


def reads(store: EventStore) -> dict:
    """Every session's export (JSONL), event count and messages, as the library reads them."""
    import io

    out = {}
    for info in store.sessions():
        buf = io.BytesIO()
        store.export_jsonl(info.id, buf)
        out[info.id] = {"export": buf.getvalue().decode(), "events": info.events,
                        "messages": json.loads(store.session(info.id).messages_json())}
    return out


def verify(target: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "eventstore", "--db", target, "verify"], capture_output=True,
                          text=True, env=env, timeout=300)


def head_rows() -> tuple[list, list]:
    """The events and sessions rows of schema-0290.db (read from a copy: opening a WAL
    database writes its -shm beside it)."""
    return _sqlite_rows(DATA / "schema-0290.db")


def _sqlite_rows(path: Path) -> tuple[list, list]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        sessions_sql = SESSIONS if "meta_hash" in [c[1] for c in conn.execute("PRAGMA table_info(sessions)")] \
            else SESSIONS.replace("meta_hash", "NULL")
        return conn.execute(EVENTS).fetchall(), conn.execute(sessions_sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("revision", ["0290", "0220", "0100"])
def test_an_sqlite_file_an_earlier_eventstore_wrote_upgrades_in_place(tmp_path, revision):
    """A copy of the file opens for writing (upgrading it to SCHEMA_REVISION in place); its
    events are the same rows, its sessions those of the 0290 file (0210 computed the 0100
    file's meta_hash as the store writes it), every read is what ccb5db7 read, and verify
    finds nothing (the schema is what today's SQLite history creates)."""
    db = tmp_path / f"schema-{revision}.db"
    shutil.copyfile(DATA / db.name, db)
    events, sessions = _sqlite_rows(db)
    head_events, head_sessions = head_rows()
    assert events == head_events and len(events) == 77
    with EventStore.open(db) as store:
        got = reads(store)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_REVISION,)]
    assert conn.execute(EVENTS).fetchall() == events
    assert conn.execute(SESSIONS).fetchall() == head_sessions
    if revision != "0100":
        assert sessions == head_sessions
    conn.close()
    assert got == EXPECTED_READS
    result = verify(str(db))
    assert result.returncode == 0 and "5 sessions, 77 events: OK" in result.stdout + result.stderr, result.stderr


@pytest.mark.parametrize("revision", ["0290", "0220", "0100"])
def test_a_read_only_open_of_an_earlier_file_asks_for_the_upgrade_and_changes_nothing(tmp_path, revision):
    """Every read of today's code selects what the older schema lacks (the salt column, the
    views of 0270), so a read-only open refuses the file with SchemaOutdated, naming both
    revisions and the command that upgrades it, and leaves its bytes as they were."""
    db = tmp_path / f"schema-{revision}.db"
    shutil.copyfile(DATA / db.name, db)
    before = db.read_bytes()
    with pytest.raises(SchemaOutdated) as err:
        EventStore.open(db, readonly=True)
    assert f"'{revision}'" in str(err.value) and f"'{SCHEMA_REVISION}'" in str(err.value)
    assert "eventstore init" in str(err.value)
    assert db.read_bytes() == before


def test_a_search_leaves_a_postgres_database_an_earlier_eventstore_wrote_as_it_is(pg_server, pg_url):
    """``eventstore search`` writes only its index: on a database at an older revision it
    refuses (SchemaOutdated, naming who upgrades it) and migrates nothing, as the other
    reading commands do; so does ``EventStore.open(..., upgrade=False)``."""
    import psycopg
    from click.testing import CliRunner

    from eventstore.cli import cli

    restore = subprocess.run([str(pg_server.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg_url,
                              "-f", str(DATA / "schema-0290.pg.sql")], capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    with pytest.raises(SchemaOutdated, match="as the database's owner"):
        EventStore.open(pg_url, upgrade=False)
    for args in (["search", "README"], ["search", "--raw", "README"], ["sessions"]):
        r = CliRunner().invoke(cli, ["--db", pg_url, *args])
        assert r.exit_code == 1 and r.stderr.endswith(
            "is at schema revision '0290', older than this eventstore's "
            f"'{SCHEMA_REVISION}': open it once for writing ('eventstore init' as the database's owner) to "
            "upgrade it\n"), (args, r.output)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0290",)]


@pytest.mark.parametrize("revision", ["0290", "0220"])
def test_a_postgres_dump_an_earlier_eventstore_wrote_upgrades_in_place(pg_server, pg_url, revision):
    """The pg_dump restored into a new database opens (upgrading it to SCHEMA_REVISION in
    place); its events are the same rows, every read is what ccb5db7 read from the SQLite
    file of the same sessions, and verify finds nothing: the schema (functions, triggers,
    views) is what today's PostgreSQL history creates."""
    import psycopg

    restore = subprocess.run([str(pg_server.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg_url,
                              "-f", str(DATA / f"schema-{revision}.pg.sql")], capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    with psycopg.connect(pg_url) as conn:
        events = conn.execute(EVENTS).fetchall()
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(revision,)]
    head_events, _ = head_rows()
    assert [e[1:4] + e[5:6] for e in events] == [e[1:4] + e[5:6] for e in head_events]
    with EventStore.open(pg_url) as store:
        got = reads(store)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_REVISION,)]
        assert conn.execute(EVENTS).fetchall() == events
    assert got.keys() == EXPECTED_READS.keys()
    for sid, read in got.items():
        assert read["events"] == EXPECTED_READS[sid]["events"] and read["messages"] == EXPECTED_READS[sid]["messages"]
    if revision == "0220":  # the same rows as the SQLite file (the 0290 dump is an import of its own)
        assert got == EXPECTED_READS
    result = verify(pg_url)
    assert result.returncode == 0 and "5 sessions, 77 events: OK" in result.stdout + result.stderr, result.stderr


# --- a database today's main made (revision 0350) --------------------------------------------

def _at_revision(url: str, dialect: str, revision: str):
    """An SQLAlchemy engine on ``url`` (an SQLite path or a libpq URL), migrated by Alembic up
    to ``revision`` only, as the eventstore of that revision left it."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    if dialect == "sqlite":
        engine = create_engine(f"sqlite:///{url}", poolclass=NullPool)
    else:
        import psycopg

        engine = create_engine("postgresql+psycopg://", poolclass=NullPool, creator=lambda: psycopg.connect(url))
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", migrations_path(dialect))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    return engine


def test_a_database_main_made_at_0350_upgrades_and_its_folds_keep_their_escapes(store, request, tmp_path):
    """The rows of a session whose fold and tool calls hold lone surrogates and U+0000, in a
    database migrated to 0350 (today's main), read wrong there (the fold's content cut or
    spelled /u..., a result of another id answering a call); opened by today's code the
    database upgrades in place to SCHEMA_REVISION, its rows unchanged, and reads right."""
    from conftest import db_rows

    from eventstore.log import codec

    dialect = "sqlite" if store._backend.name == "sqlite" else "postgresql"
    s = "a\ud83d\x00"
    # An id 0350 confused with s: decoded by es_json (PostgreSQL), cut at U+0000 by ->> (SQLite).
    other = "a/ud83d/u0000" if dialect == "postgresql" else s + "b"
    call = {"id": s, "type": "function", "function": {"name": "f", "arguments": s}}
    more = {"id": "c2", "type": "function", "function": {"name": "g", "arguments": s}}
    session = store.create_session()
    session.append_many([("turn/start", {}),
                         ("assistant/message", {"message_id": "m", "content": s, "tool_calls": [call]}),
                         ("assistant/part", {"message_id": "m", "content": s, "tool_calls": [more]}),
                         ("tool/result", {"tool_call_id": other, "content": "r"}),
                         ("assistant/message", {"content": "ok"})])
    expected = [{"role": "assistant", "content": f"{s}\n\n{s}", "tool_calls": [call, more]},
                {"role": "tool", "tool_call_id": other, "content": "r"},
                {"role": "assistant", "content": "ok"}]
    assert session.derive_messages() == expected
    sessions = db_rows(store, "SELECT id, created_at, meta, meta_hash FROM sessions")
    columns = "position, session_id, seq, type, ts, payload, hash, salt"
    events = db_rows(store, f"SELECT {columns} FROM events ORDER BY position")

    if dialect == "sqlite":
        url, mark = str(tmp_path / "main-0350.db"), "?"
    else:
        pg = request.getfixturevalue("pg_server")
        url, mark = pg.url(pg.create_database()), "%s"
    engine = _at_revision(url, dialect, "0350")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES ({mark}, {mark}, "
                             f"{mark}, {mark})", tuple(sessions[0]))
        for row in events:
            conn.exec_driver_sql(f"INSERT INTO events ({columns}) VALUES ({', '.join([mark] * 8)})", tuple(row))
        as_bytes = "CAST(message AS BLOB)" if dialect == "sqlite" else "convert_to(message, 'UTF8')"
        folded = conn.exec_driver_sql(f"SELECT {as_bytes} FROM messages WHERE seq = 1").scalar()
        assert bytes(folded) != codec.dumps(expected[0]).encode("utf-8", "surrogatepass")
        assert conn.exec_driver_sql("SELECT result_seq FROM tool_calls ORDER BY call_seq").fetchall() \
            == [(3,), (None,)]
    engine.dispose()

    with EventStore.open(url) as upgraded:
        assert upgraded.session(session.id).derive_messages() == expected
        assert upgraded.session(session.id).messages_json() == codec.dumps(expected)
        assert db_rows(upgraded, "SELECT version_num FROM alembic_version") == [(SCHEMA_REVISION,)]
        assert db_rows(upgraded, f"SELECT {columns} FROM events ORDER BY position") == events
        assert db_rows(upgraded, "SELECT call_seq, result_seq FROM tool_calls ORDER BY call_seq") \
            == [(1, None), (2, None)]
    # The schema is what today's history creates; the log's own findings are the unanswered calls.
    result = verify(url)
    assert "3 findings (dangling_call 2, orphan_result 1)" in result.stderr, result.stdout + result.stderr
