"""What ``eventstore redact`` (plain and ``--found``) says and refuses (#35, a new user's
findings): one way of reporting a redaction, its erasure warning included, for both; a
database that is not there (or holds no eventstore schema) refused and left unchanged; a
field redacted twice refused; the store's errors naming the session and seq."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import db_rows
from test_secrets import SAMPLES

from eventstore import EventStore, InvalidEvent
from eventstore.audit import verify as audit
from eventstore.cli import cli
from eventstore.errors import DatabaseError

GITHUB = SAMPLES["GitHub Token"][0][1]
OPENAI = SAMPLES["OpenAI Token"][0][1]


def _leaky(store: EventStore, sid: str = "s") -> None:
    """Session ``sid``: secrets in seq 1 and 2, and a tool result whose ``tool_call_id`` (which
    is never redacted: it pairs the call with its result) holds two kinds at seq 3."""
    s = store.create_session(sid)
    s.append("user/message", {"content": "hi"})
    s.append("user/message", {"content": f"my token is {GITHUB}", "note": "kept"})
    s.append("user/message", {"content": f"OPENAI_API_KEY={OPENAI}"})
    s.append("tool/result", {"tool_call_id": f"{GITHUB} {OPENAI}", "content": "ok"})


def _events(store: EventStore, sid: str = "s") -> list:
    return db_rows(store, f"SELECT seq, type, payload, hash, salt FROM events WHERE session_id = '{sid}' ORDER BY seq")


# --- a field already redacted -----------------------------------------------------------------

def test_a_field_already_redacted_is_refused_and_nothing_changes(store):
    _leaky(store)
    store.redact("s", 1, ["content"], reason="token")
    before = _events(store)
    for paths, reason in [(["content"], "again"), (["content"], "token"), (["content", "content"], "x")]:
        with pytest.raises(InvalidEvent, match=r"^session 's', seq 1: content already redacted$"):
            store.redact("s", 1, paths, reason=reason)
        assert _events(store) == before, (paths, reason)
    assert store.session("s").derive_messages()[1]["content"] == "[redacted: token]"
    # some named paths redacted already, others not: the others are redacted, the first kept as they were
    done = store.redact("s", 1, ["content", "note"], reason="more")
    assert (done.paths, done.already) == ([["note"]], [["content"]])
    assert [e.payload for e in store.session("s").events() if e.seq == 1] == \
        [{"content": "[redacted: token]", "note": "[redacted: more]"}]
    with pytest.raises(InvalidEvent, match=r"^session 's', seq 1: content, note already redacted$"):
        store.redact("s", 1, None, reason="all")
    assert [f.kind for f in audit.verify(store._backend).findings] == ["orphan_result"]  # (seq 3: no call)


def test_a_value_that_already_reads_as_the_marker_is_refused_before_the_database(store):
    """An UPDATE that changes nothing proves nothing (SQLite's trigger refuses it): the store
    says so first, naming session, seq and path."""
    s = store.create_session("s")
    s.append("user/message", {"content": "[redacted: again]"})
    before = _events(store)
    with pytest.raises(InvalidEvent, match=r"^session 's', seq 0: content already reads \[redacted: again\]: "
                                           r"there is nothing to redact$"):
        store.redact("s", 0, ["content"], reason="again")
    assert _events(store) == before
    assert store.redact("s", 0, ["content"], reason="other").paths == [["content"]]


def test_the_cli_refuses_a_second_redaction_in_one_line(backend_url):
    with EventStore.open(backend_url) as store:
        _leaky(store)
    runner = CliRunner()
    args = ["--db", backend_url, "redact", "s", "1", "--path", "content"]
    assert runner.invoke(cli, [*args, "--reason", "token"]).exit_code == 0
    r = runner.invoke(cli, [*args, "--reason", "again"])
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "error: session 's', seq 1: content already redacted\n")
    # --found does not name a redacted field again: a second run finds nothing to do
    assert runner.invoke(cli, ["--db", backend_url, "redact", "--found", "s"]).exit_code == 1  # (seq 3's id)
    r = runner.invoke(cli, ["--db", backend_url, "redact", "--found", "s", "--json"])
    out = json.loads(r.stdout)
    assert out["redacted"] == [] and [d["seq"] for d in out["not_redacted"]] == [3], out


# --- what redact says -------------------------------------------------------------------------

def test_found_and_plain_redact_report_alike(backend_url):
    """One quoting style (the CLI's: 'session'), each failed field once, --json for both in
    one shape."""
    with EventStore.open(backend_url) as store:
        _leaky(store)
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", backend_url, "redact", "--found"])
    assert r.exit_code == 1, r.output
    assert "redacted session 's' seq 1: content (secret: GitHub Token), by " in r.stdout
    assert "redacted session 's' seq 2: content (secret: OpenAI Token), by " in r.stdout
    [line] = r.stderr.splitlines()
    assert line.startswith("not redacted: session 's' seq 3: tool_call_id (GitHub Token, OpenAI Token): "), line
    assert "pairs a tool call with its result" in line
    with EventStore.open(backend_url) as store:
        store.session("s").append("user/message", {"content": "x", "more": "y"})
        seq = store.session("s").next_seq() - 1
    r = runner.invoke(cli, ["--db", backend_url, "redact", "s", str(seq), "--path", "more", "--reason", "r", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    [d] = out["redacted"]
    assert d == {"session_id": "s", "seq": seq, "paths": ["more"], "already_redacted": [], "kind": None,
                 "reason": "r", "by": d["by"], "redaction_seq": seq + 1}
    assert out["not_redacted"] == [] and isinstance(out["warnings"], list)
    r = runner.invoke(cli, ["--db", backend_url, "redact", "s", str(seq), "--reason", "all"])
    assert r.exit_code == 0 and r.stdout.endswith(f"at seq {seq + 2}; already redacted: more\n"), r.output


def test_an_empty_reason_and_a_busy_database_name_the_session_and_seq(db_path: Path):
    with EventStore.open(db_path) as store:
        _leaky(store)
    r = CliRunner().invoke(cli, ["--db", str(db_path), "redact", "s", "1", "--reason", " "])
    assert (r.exit_code, r.stderr) == (1, "error: session 's', seq 1: a redaction needs a reason: a non-empty "
                                          "string, not ' '\n")
    r = CliRunner().invoke(cli, ["--db", str(db_path), "redact", "--found", "--reason", " "])
    assert r.exit_code == 1 and "a redaction needs a reason" in r.stderr and r.stderr.count("\n") == 1
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        with EventStore.open(db_path, busy_timeout=0.2) as store, \
                pytest.raises(DatabaseError, match=r"^session 's', seq 1: database is busy"):
            store.redact("s", 1, ["content"], reason="token")
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_found_says_the_erasure_warning_once_and_in_its_json(db_path: Path, monkeypatch):
    """SQLite: a reader holding the WAL keeps it from being emptied: the erasure says so
    (--found's one erasure, after all its redactions, waits once); --found says it once, on stderr and in --json's warnings, as a plain redact
    says it."""
    # The erasure's TRUNCATE checkpoint waits the busy timeout for a reader that never lets go:
    # 0.2 s, not the default five, for each of the two commands.
    opener = EventStore.open.__func__
    monkeypatch.setattr(EventStore, "open", classmethod(lambda cls, *a, **kw: opener(cls, *a, **{"busy_timeout": 0.2, **kw})))
    with EventStore.open(db_path) as store:
        _leaky(store)
        store.session("s").append("user/message", {"content": "x"})
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()  # a read transaction pins the WAL
    try:
        runner = CliRunner()
        r = runner.invoke(cli, ["--db", str(db_path), "redact", "--found", "--json"])
        out = json.loads(r.stdout)
        [warning] = out["warnings"]
        assert "the WAL could not be emptied" in warning and [d["seq"] for d in out["redacted"]] == [1, 2]
        assert [w for w in r.stderr.splitlines() if w.startswith("warning:")] == [f"warning: {warning}"]
        r = runner.invoke(cli, ["--db", str(db_path), "redact", "s", "4", "--reason", "x"])
        assert r.exit_code == 0 and r.stderr == f"warning: {warning}\n", r.output
    finally:
        reader.execute("ROLLBACK")
        reader.close()


def _holders(backend_url: str, request, secrets: list[str]) -> list[str]:
    """The database's files that hold any of ``secrets``' bytes: SQLite's file, ``-wal`` and
    ``-shm``; PostgreSQL's files of events, events_search and their TOAST tables (after a
    CHECKPOINT)."""
    if not backend_url.startswith("postgres"):
        files = sorted(Path(backend_url).parent.glob(Path(backend_url).name + "*"))
        assert files
    else:
        import psycopg

        datadir = Path(request.getfixturevalue("pg_server").folder) / "data"
        with psycopg.connect(backend_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            rels = conn.execute("SELECT pg_relation_filepath(c.oid) FROM pg_class AS c "
                                "WHERE c.relname IN ('events', 'events_search') UNION ALL "
                                "SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class AS c "
                                "WHERE c.relname IN ('events', 'events_search') AND c.reltoastrelid <> 0").fetchall()
        files = [f for (rel,) in rels for f in sorted(datadir.glob(rel + "*"))]
        assert len(files) >= 3
    return [f.name for f in files if any(s.encode() in f.read_bytes() for s in secrets)]


def test_found_erases_once_for_all_its_redactions(backend_url, request, monkeypatch):
    """An erasure rewrites the table (PostgreSQL's VACUUM FULL) or waits for the WAL
    (SQLite's checkpoint): `redact --found` erases once after redacting every event, not once
    per event, and the secrets' bytes are gone from the database's files all the same. A
    plain `redact` still erases after its one redaction. (seq 3's secrets stay: tool_call_id
    is never redacted.)"""
    from eventstore.backends.capabilities import Redactor

    with EventStore.open(backend_url) as store:
        _leaky(store)
        keys = [f"{OPENAI[:-6]}{i:06d}" for i in range(4)]
        for key in keys:
            store.session("s").append("user/message", {"content": f"OPENAI_API_KEY={key}"})
        kind = type(store.capability(Redactor))
    assert _holders(backend_url, request, keys) != []  # (the test sees them where they are)
    calls = []
    erase = kind.erase_old_versions
    monkeypatch.setattr(kind, "erase_old_versions", lambda self: calls.append(1) or erase(self))
    r = CliRunner().invoke(cli, ["--db", backend_url, "redact", "--found", "--json"])
    out = json.loads(r.stdout)
    assert [d["seq"] for d in out["redacted"]] == [1, 2, 4, 5, 6, 7] and out["warnings"] == [], r.output
    assert len(calls) == 1
    assert _holders(backend_url, request, keys) == []
    with EventStore.open(backend_url) as store:
        store.session("s").append("user/message", {"content": "x", "more": "y"})
        seq = store.session("s").next_seq() - 1
    r = CliRunner().invoke(cli, ["--db", backend_url, "redact", "s", str(seq), "--path", "more", "--reason", "r"])
    assert r.exit_code == 0 and len(calls) == 2, r.output


def test_found_whose_erasure_fails_reports_its_redactions_and_warns(db_path: Path, monkeypatch):
    """The redactions are committed before the one erasure: an erasure that raises is a
    warning beside them, not an error that hides them."""
    from eventstore.backends.capabilities import Redactor

    with EventStore.open(db_path) as store:
        _leaky(store)
        kind = type(store.capability(Redactor))

    def fails(self):
        raise DatabaseError("disk I/O error")
    monkeypatch.setattr(kind, "erase_old_versions", fails)
    r = CliRunner().invoke(cli, ["--db", str(db_path), "redact", "--found", "--json"])
    out = json.loads(r.stdout)
    assert [d["seq"] for d in out["redacted"]] == [1, 2], r.output
    assert out["warnings"] == ["the old bytes could not be erased: disk I/O error"]
    assert "warning: the old bytes could not be erased: disk I/O error\n" in r.stderr



def test_a_redaction_whose_erasure_fails_is_reported_done_with_a_warning(db_path: Path, monkeypatch):
    """Plain ``redact``: the redaction commits before its erasure, so an erasure that raises
    (busy, a disk error) is a warning beside it (exit 0), in the library as on the command
    line, not an error that says the redaction failed."""
    from eventstore.backends.capabilities import Redactor

    with EventStore.open(db_path) as store:
        store.create_session("s").append("user/message", {"content": "key sk-a"})
        store.session("s").append("user/message", {"content": "key sk-b"})
        kind = type(store.capability(Redactor))

    def fails(self):
        raise DatabaseError("database is busy")
    monkeypatch.setattr(kind, "erase_old_versions", fails)
    with EventStore.open(db_path) as store:
        done = store.redact("s", 0, ["content"], reason="token")
        assert done.erasure == "the old bytes could not be erased: database is busy"
    r = CliRunner().invoke(cli, ["--db", str(db_path), "redact", "s", "1", "--path", "content", "--reason", "token"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "warning: the old bytes could not be erased: database is busy\n"
    with EventStore.open(db_path, readonly=True) as store:
        assert [e.payload.get("content") for e in store.session("s").events(types="user/message")] == [
            "[redacted: token]", "[redacted: token]"]

def test_redact_without_erasure_says_so_and_erase_redacted_erases(db_path: Path):
    """``redact(erase=False)`` leaves the bytes and says so (``NOT_ERASED``);
    ``erase_redacted()`` then erases them and returns None."""
    from eventstore.log.redaction import NOT_ERASED

    with EventStore.open(db_path) as store:
        secret = "unique-secret-3f9a1c7e5b2d"
        store.create_session("s").append("user/message", {"content": f"key {secret}"})
        done = store.redact("s", 0, ["content"], reason="token", erase=False)
        assert done.erasure == NOT_ERASED
        assert _holders(str(db_path), None, [secret]) != []
        assert store.erase_redacted() is None
        assert _holders(str(db_path), None, [secret]) == []
        assert store.erase_redacted() is None  # nothing left: harmless


# --- no database there ------------------------------------------------------------------------

def test_redact_refuses_a_postgres_database_without_eventstore_schema(pg_url):
    """As scan refuses it: nothing is installed in someone else's database."""
    psycopg = pytest.importorskip("psycopg")
    runner = CliRunner()
    scan = runner.invoke(cli, ["--db", pg_url, "scan"])
    assert scan.exit_code == 2 and "not an eventstore database" in scan.stderr, scan.output
    for args in (["redact", "--found"], ["redact", "s", "1", "--reason", "y"]):
        r = runner.invoke(cli, ["--db", pg_url, *args])
        assert (r.exit_code, r.stdout, r.stderr) == (1, "", scan.stderr), args
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
