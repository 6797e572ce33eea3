"""Auditing: the views (in a plain sqlite3 connection), read-only SQL, verify, repair."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, FIXTURES, TESTS, hashed_line

from eventstore import AppendOnlyViolation, DatabaseError, EventStore, QueryError, SessionNotFound
from eventstore.audit import repair as repair_mod
from eventstore.audit import verify as audit
from eventstore.backends.sqlite import sandbox
from eventstore.backends.sqlite.schema import GUARDS
from eventstore.cli import cli
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.schema import SCHEMA_REVISION

DOCS = TESTS.parent / "docs" / "schema.md"

VIEW_COLUMNS = {
    "messages": ["session_id", "seq", "role", "message"],
    "tool_calls": ["session_id", "call_seq", "call_id", "name", "arguments", "result_seq", "result", "latency_s",
                   "is_error"],
    "turns": ["session_id", "start_seq", "end_seq", "started_at", "ended_at", "duration_s", "steps", "tool_calls",
              "complete"],
    "session_summary": ["session_id", "events", "messages", "tool_calls", "first_ts", "last_ts"],
    "usage": ["session_id", "seq", "ts", "type", "turn", "step", "model", "input_tokens", "output_tokens",
              "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"],
}


def call(cid: str, name: str = "run_bash", args: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def imported(store: EventStore, *names: str) -> list[str]:
    return [store.import_jsonl(DATA / f"{n}.jsonl") for n in names]


def kinds(report: audit.VerifyReport) -> list[tuple[str, str | None, int | None]]:
    return [(f.kind, f.session_id, f.seq) for f in report.findings]


def run(db: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


def check(db: Path | str, session_ids=None) -> audit.VerifyReport:
    with EventStore.open(db, readonly=True) as store:
        return audit.verify(store._backend, session_ids)


# --- the views -----------------------------------------------------------------------------

def test_views_exist_at_head_with_their_documented_columns(store, raw):
    assert raw.execute("SELECT version_num FROM alembic_version").fetchone()[0] == SCHEMA_REVISION == "0370"
    doc = DOCS.read_text(encoding="utf-8")
    for view, columns in VIEW_COLUMNS.items():
        assert [r[1] for r in raw.execute(f"PRAGMA table_info({view})")] == columns
        section = doc.split(f"### `{view}`", 1)[1].split("\n### ", 1)[0]
        for c in columns:
            assert f"`{c}`" in section, f"docs/schema.md does not describe {view}.{c}"


def test_tool_calls_parallel_tools_two_calls_each_joined_to_its_result(store, raw):
    imported(store, "parallel_tools")
    rows = raw.execute("SELECT * FROM tool_calls ORDER BY call_seq, result_seq").fetchall()
    assert rows == [
        ("a0c1e2f3-111", 3, "call_a", "run_bash", '{"command":"ls"}', 4, "README.md\nsrc\n", 0.12, 0),
        ("a0c1e2f3-111", 3, "call_b", "read_file", '{"path":"README.md"}', 5, "# Demo\n", 0.24, 0),
    ]


def test_tool_calls_interrupted_dangling_call_has_null_result(store, raw):
    imported(store, "interrupted")
    assert raw.execute("SELECT * FROM tool_calls").fetchall() == [
        ("crash-0001", 3, "call_long", "run_bash", '{"command":"sleep 999"}', None, None, None, None)]


def test_tool_calls_is_error_says_which_results_report_a_failed_tool(store, raw):
    s = store.create_session("err")
    s.append_many([
        ("assistant/message", {"tool_calls": [call("a"), call("b"), call("c"), call("d")]}),
        ("tool/result", {"tool_call_id": "a", "content": "boom", "is_error": True}),
        ("tool/result", {"tool_call_id": "b", "content": "ok", "is_error": False}),
        ("tool/result", {"tool_call_id": "c", "content": "ok"}),
    ])
    assert raw.execute("SELECT call_id, is_error FROM tool_calls ORDER BY call_id").fetchall() == [
        ("a", 1), ("b", 0), ("c", 0), ("d", None)]


def test_tool_calls_answer_must_come_before_the_next_message(store, raw):
    s = store.create_session("late")
    s.append_many([
        ("assistant/message", {"content": "", "tool_calls": [call("c")]}, 10.0),
        ("tool/result", {"tool_call_id": "c", "content": "first"}, 11.5),
        ("assistant/message", {"content": "", "tool_calls": [call("c")]}, 12.0),  # id reused
        ("user/message", {"content": "stop"}, 13.0),
        ("tool/result", {"tool_call_id": "c", "content": "too late"}, 14.0),
        ("assistant/message", {"content": "x", "tool_calls": []}, 15.0),
        ("assistant/message", {"content": "y", "tool_calls": None}, 16.0),
        ("assistant/message", {"content": "z", "tool_calls": {"id": "c"}}, 17.0),
    ])
    assert raw.execute("SELECT call_seq, call_id, result_seq, result, latency_s FROM tool_calls "
                       "ORDER BY call_seq").fetchall() == [(0, "c", 1, "first", 1.5), (2, "c", None, None, None)]


def test_turns_on_fixtures(store, raw):
    imported(store, "parallel_tools", "interrupted")
    rows = raw.execute("SELECT * FROM turns ORDER BY session_id, start_seq").fetchall()
    assert rows == [
        ("a0c1e2f3-111", 0, 14, 1764460800.638, 1764460801.194, 0.556, 2, 2, 1),
        ("a0c1e2f3-111", 15, 22, 1764460801.231, 1764460801.426, 0.195, 1, 0, 1),
        ("crash-0001", 0, 3, 1764460802.479, 1764460802.59, 0.111, 1, 1, 0),
    ]


def test_turns_a_turn_cut_by_the_next_turn_start_is_incomplete(store, raw):
    s = store.create_session("cut")
    s.append_many([("user/message", {"content": "before any turn"}, 1.0),
                   ("turn/start", {}, 2.0), ("step/start", {"step": 0}, 2.5),
                   ("turn/start", {}, 3.0), ("turn/end", {}, 4.0), ("turn/end", {}, 5.0),
                   ("turn/start", {}, 6.0), ("assistant/chunk", {"delta": {"content": "a"}}, 7.0)])
    assert raw.execute("SELECT start_seq, end_seq, ended_at, duration_s, steps, complete FROM turns "
                       "ORDER BY start_seq").fetchall() == [(1, 2, 2.5, 0.5, 1, 0), (3, 4, 4.0, 1.0, 0, 1),
                                                            (6, 7, 7.0, 1.0, 0, 0)]


def test_session_summary_matches_the_fixture_files(store, raw):
    imported(store, *FIXTURES)
    got = {r[0]: r[1:] for r in raw.execute("SELECT * FROM session_summary")}
    for name in FIXTURES:
        lines = (DATA / f"{name}.jsonl").read_text(encoding="utf-8").rstrip("\n").split("\n")
        sid = json.loads(lines[0])["id"]
        evs = [json.loads(line) for line in lines[1:]]
        calls = sum(len(e["tool_calls"]) for e in evs
                    if e["type"] == "assistant/message" and isinstance(e.get("tool_calls"), list))
        msgs = sum(e["type"] in ("user/message", "assistant/message", "tool/result") for e in evs)
        assert got[sid] == (len(evs), msgs, calls, evs[0]["ts"], evs[-1]["ts"]), name
    empty = store.create_session("empty")
    assert raw.execute("SELECT * FROM session_summary WHERE session_id = ?", (empty.id,)).fetchone() == \
        ("empty", 0, 0, 0, None, None)


def test_tool_calls_view_agrees_with_session_summary_counts(store, raw):
    imported(store, *FIXTURES)
    per_view = dict(raw.execute("SELECT session_id, count(*) FROM tool_calls GROUP BY session_id").fetchall())
    for sid, n in raw.execute("SELECT session_id, tool_calls FROM session_summary"):
        assert per_view.get(sid, 0) == n


def test_views_use_the_indexes_for_one_session(store, raw):
    # A full scan of events (or of one of its indexes) for one session's rows would make the
    # views slow on a big database; scanning a subquery or json_each is per session already.
    for view in ("tool_calls", "turns", "session_summary", "messages"):
        for row in raw.execute(f"EXPLAIN QUERY PLAN SELECT * FROM {view} WHERE session_id = 'x'"):
            detail = row[3]
            assert not detail.startswith("SCAN ") or detail.startswith(("SCAN (subquery", "SCAN j VIRTUAL",
                                                                         "SCAN w")), (view, detail)


def test_nul_in_a_string_is_kept_by_the_json_text_column(store, raw):
    # SQLite's ->> stops text at an embedded U+0000 (docs/schema.md says so); -> keeps it.
    imported(store, "unicode")
    text = raw.execute("SELECT payload -> '$.content' FROM events WHERE type = 'tool/result'").fetchone()[0]
    assert "\x00" in json.loads(text)


@pytest.mark.sqlite_only
@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
def test_views_work_in_the_sqlite3_shell(store, backend_url):
    imported(store, "parallel_tools", "interrupted")

    def shell(sql: str):
        done = subprocess.run(["sqlite3", "-readonly", "-json", str(backend_url), sql], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert shell("SELECT call_id, result_seq FROM tool_calls ORDER BY call_id") == [
        {"call_id": "call_a", "result_seq": 4}, {"call_id": "call_b", "result_seq": 5},
        {"call_id": "call_long", "result_seq": None}]
    assert shell("SELECT session_id, complete FROM turns WHERE NOT complete") == [
        {"session_id": "crash-0001", "complete": 0}]
    assert shell("SELECT events, tool_calls FROM session_summary ORDER BY session_id") == [
        {"events": 23, "tool_calls": 2}, {"events": 4, "tool_calls": 1}]
    assert len(shell("SELECT * FROM messages")) == 9


def test_a_database_of_the_first_release_is_upgraded_with_its_views(tmp_path):
    """A file written by the first release (at its last revision, 0007): `sql` reads it as
    it is and says it needs an upgrade; a writable open upgrades it in place (the guards
    now carry their error codes), with every row and view kept."""
    db = tmp_path / "old.db"
    shutil.copyfile(DATA / "legacy-0007.db", db)
    conn = sqlite3.connect(db)
    old_views = [v for v in VIEW_COLUMNS if v != "usage"]  # usage came after the first release (0100)
    before = {v: conn.execute(f"SELECT * FROM {v} ORDER BY 1, 2").fetchall() for v in old_views}
    events = conn.execute("SELECT * FROM events ORDER BY position").fetchall()
    r = run(db, "sql", "SELECT count(*) AS n FROM messages")  # reads, does not upgrade, says so
    assert r.exit_code == 0 and f"schema revision 0007, not {SCHEMA_REVISION}" in r.stderr
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0007",)
    EventStore.open(db).close()
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (SCHEMA_REVISION,)
    after = {v: conn.execute(f"SELECT * FROM {v} ORDER BY 1, 2").fetchall() for v in old_views}
    # 0150 added tool_calls.is_error (0: no result here says the tool failed); the rest is as it was
    assert [row[-1] for row in after["tool_calls"]] == [0] * len(before["tool_calls"])
    after["tool_calls"] = [row[:-1] for row in after["tool_calls"]]
    assert after == before
    # 0310 added events.salt: NULL (unsalted) for every event written before it
    assert conn.execute("SELECT * FROM events ORDER BY position").fetchall() == [(*e, None) for e in events]
    with EventStore.open(db) as store:
        assert [(i.id, i.events) for i in store.sessions()] == [("5a1b896f-beb", 15), ("second", 1)]
        store.session("second").append("user/message", {"content": "after the upgrade"})
        with pytest.raises(AppendOnlyViolation, match="^ES007: "):
            store._backend._transact(lambda cur: cur.execute(
                "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
                "(18, 'second', 2, 'x', 1, '{\"event_id\":\"k1\"}', ?)", ("0" * 64,)))
    installed = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
    assert installed == {name: ddl.strip() for name, ddl in GUARDS.items()}
    assert run(db, "verify").exit_code == 0
    conn.close()


# --- read-only SQL -------------------------------------------------------------------------

REFUSED = [
    "INSERT INTO sessions (id, created_at) VALUES ('x', 0)",
    "UPDATE events SET type = 'x'",
    "DELETE FROM events",
    "WITH d AS (SELECT 1) DELETE FROM sessions",
    "REPLACE INTO sessions (id, created_at) VALUES ('x', 0)",
    "DROP TRIGGER events_guard_update",
    "DROP VIEW tool_calls",
    "CREATE TABLE t (x)",
    "CREATE TEMP TABLE t (x)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE INDEX i ON events (ts)",
    "ALTER TABLE events ADD COLUMN x",
    "PRAGMA query_only = OFF",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA user_version = 7",
    "PRAGMA wal_checkpoint",
    "BEGIN IMMEDIATE",
    "ANALYZE",
    "REINDEX",
    "SELECT load_extension('x')",
    "SELECT 1; DELETE FROM events",
    "UPDATE sqlite_master SET sql = 'x' WHERE name = 'events'",
]


@pytest.fixture
def ro(sqlite_store, db_path):
    """SQLite's sandbox (eventstore sql) on a file holding parallel_tools."""
    imported(sqlite_store, "parallel_tools")
    conn = sandbox.connect_readonly(db_path)
    yield conn
    conn.close()


@pytest.mark.parametrize("sql", REFUSED)
def test_query_refuses_writes_and_ddl(ro, db_path, sql):
    raw = sqlite3.connect(db_path, isolation_level=None)
    state = "SELECT count(*), (SELECT group_concat(name || sql) FROM sqlite_master) FROM events"
    before = raw.execute(state).fetchone()
    with pytest.raises(QueryError):
        sandbox.query(ro, sql)
    assert raw.execute(state).fetchone() == before
    assert ro.execute("PRAGMA query_only").fetchone() == (1,)


def test_query_without_its_authorizer_is_still_read_only(ro, db_path):
    """Behind the authorizer, the connection itself (mode=ro, query_only) refuses a write,
    and the refusal says so (SQLite's SQLITE_READONLY)."""
    ro.set_authorizer(None)
    ro.guard = None
    with pytest.raises(QueryError) as e:
        sandbox.query(ro, "DELETE FROM events")
    assert str(e.value) == "refused: the database is open read-only (attempt to write a readonly database)"
    raw = sqlite3.connect(db_path)
    assert raw.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    raw.close()


@pytest.mark.parametrize("sql", ["ATTACH '{p}' AS x", "ATTACH 'file:{p}?mode=rwc' AS x", "VACUUM INTO '{p}'"])
def test_query_refuses_attach_and_creates_no_file(ro, tmp_path, sql):
    target = tmp_path / "created.db"
    with pytest.raises(QueryError, match="refused: .*ATTACH"):
        sandbox.query(ro, sql.format(p=target))
    assert not target.exists()


def test_query_reads(ro):
    cols, rows = sandbox.query(ro, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
                                 "SELECT i, (SELECT count(*) FROM tool_calls) AS calls FROM n")
    assert cols == ["i", "calls"] and list(rows) == [(1, 2), (2, 2), (3, 2)]
    cols, rows = sandbox.query(ro, "PRAGMA table_info(turns)")
    assert [r[1] for r in rows] == VIEW_COLUMNS["turns"]
    cols, rows = sandbox.query(ro, "SELECT name FROM pragma_table_info('events') WHERE pk")
    assert list(rows) == [("position",)]
    with pytest.raises(QueryError, match="no such table"):
        sandbox.query(ro, "SELECT * FROM nope")


def test_readonly_connection_never_creates_a_database(tmp_path):
    with pytest.raises(DatabaseError, match=r"^no database at .* \(create one with 'eventstore init'"):
        sandbox.connect_readonly(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "notes.txt").write_text("not a database\n" * 100)
    with pytest.raises(DatabaseError, match="notes.txt: file is not a database"):
        sandbox.connect_readonly(tmp_path / "notes.txt")
    r = run(tmp_path / "missing.db", "sql", "SELECT 1")
    assert r.exit_code == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.output
    assert not (tmp_path / "missing.db").exists()


def test_cli_sql_formats(store, backend_url):
    imported(store, "parallel_tools", "lone_surrogate")
    q = "SELECT call_id, result_seq, result, latency_s FROM tool_calls ORDER BY call_id"
    r = run(backend_url, "sql", "--json", q)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [
        {"call_id": "call_a", "result_seq": 4, "result": "README.md\nsrc\n", "latency_s": 0.12},
        {"call_id": "call_b", "result_seq": 5, "result": "# Demo\n", "latency_s": 0.24}]
    r = run(backend_url, "sql", "--csv", q)
    assert list(csv.reader(io.StringIO(r.stdout))) == [
        ["call_id", "result_seq", "result", "latency_s"],
        ["call_a", "4", "README.md\nsrc\n", "0.12"], ["call_b", "5", "# Demo\n", "0.24"]]
    r = run(backend_url, "sql", "SELECT call_id, result_seq, NULL AS n FROM tool_calls ORDER BY call_id")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["call_id", "result_seq", "n"] and lines[1].split() == ["call_a", "4", "NULL"]
    if store._backend.name == "sqlite":  # (SQLite's JSON path syntax; PostgreSQL's text holds no lone surrogate)
        r = run(backend_url, "sql", "--json", "-", input="SELECT payload ->> '$.content' AS c FROM events "
                                                     "WHERE session_id = 'surr-0001' ORDER BY seq")
        assert json.loads(r.stdout) == [{"c": "show the first 3 code units"}, {"c": "ab\ud83d"},
                                        {"c": "\ude00 low first"}]
    assert run(backend_url, "sql", "--json", "SELECT 1 WHERE 1 = 0").stdout == "[]\n"


@pytest.mark.parametrize("query, message", [
    ("SELECT 1; SELECT 2", "error: the query holds more than one SQL statement: run them one at a time\n"),
    ("SELECT 1;; SELECT 2;", "error: the query holds more than one SQL statement: run them one at a time\n"),
    ("SELECT ';'; SELECT 2", "error: the query holds more than one SQL statement: run them one at a time\n"),
    ("SELECT 1 -- ;\n; SELECT 2", "error: the query holds more than one SQL statement: run them one at a time\n"),
    ("SELEC 1", 'error: near "SELEC": syntax error\n'),
    ("  \n", "error: the query is empty\n"),
    (";", "error: the query holds no statement (only comments or ';')\n"),
    ("/* c */ ; -- d", "error: the query holds no statement (only comments or ';')\n"),
    ("VACUUM", "error: refused: the database is open read-only (VACUUM (it rewrites the file) is not allowed)\n"),
    ("DROP TABLE events", "error: refused: the database is open read-only (changing the schema is not allowed)\n"),
    ("ALTER TABLE events RENAME TO e2", "error: refused: the database is open read-only (ALTER TABLE events is not allowed)\n"),
])
def test_cli_sql_explains_a_query_it_cannot_run(store, backend_url, query, message):
    if store._backend.name == "postgresql":  # PostgreSQL's own words
        message = PG_MESSAGES.get(query, message)
    r = run(backend_url, "sql", query)
    assert (r.exit_code, r.stderr) == (1, message)


@pytest.mark.parametrize("query, value", [
    ("SELECT 1 AS a;;", 1),
    ("; SELECT 2 AS a", 2),
    ("SELECT ';' AS a; -- the end", ";"),
    ("SELECT 'x;y' AS a /* ; */ ;\n", "x;y"),
])
def test_cli_sql_runs_one_statement_whatever_its_semicolons(store, backend_url, query, value):
    """Empty statements, and a ';' in a literal or a comment, make no second statement
    (the database's tokenizer decides where a statement ends)."""
    r = run(backend_url, "sql", "--json", query)
    assert (r.exit_code, json.loads(r.stdout)) == (0, [{"a": value}]), r.stderr


PG_MESSAGES = {
    "SELEC 1": 'error: syntax error at or near "SELEC"\n',  # (the same SQLSTATE as two statements)
    "VACUUM": "error: refused: VACUUM cannot run inside a transaction block (eventstore sql only reads)\n",
    "DROP TABLE events": "error: refused: the query writes, and eventstore sql only reads (cannot execute DROP TABLE "
                         "in a read-only transaction)\n",
    "ALTER TABLE events RENAME TO e2": "error: refused: the query writes, and eventstore sql only reads (cannot "
                                       "execute ALTER TABLE in a read-only transaction)\n",
}


def test_cli_sql_json_writes_infinity_as_null(store, backend_url):
    """JSON has no Infinity: a REAL that overflowed is null, as JSON.stringify writes it."""
    inf = "'Infinity'::float8" if store._backend.name == "postgresql" else "1e400"
    r = run(backend_url, "sql", "--json", f"SELECT {inf} AS a, -{inf} AS b, 1.5 AS c")
    assert r.exit_code == 0
    assert r.stdout == '[\n{"a": null, "b": null, "c": 1.5}\n]\n'
    assert json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} is not JSON")) == [
        {"a": None, "b": None, "c": 1.5}]


def test_cli_sql_refusal_is_one_line(store, backend_url):
    r = run(backend_url, "sql", "DELETE FROM events")
    assert r.exit_code == 1
    assert r.stderr == ("error: refused: the query writes, and eventstore sql only reads (cannot execute DELETE in "
                        "a read-only transaction)\n" if store._backend.name == "postgresql" else
                        "error: refused: the database is open read-only (DELETE events is not allowed)\n")


def test_cli_sql_refuses_a_write_inside_a_select(store, backend_url):
    """A data-modifying WITH (PostgreSQL's; SQLite has none) is refused as a write, though
    the server names the statement's command, SELECT; nothing changes."""
    imported(store, "demo")
    count = "SELECT count(*) AS n FROM events"
    before = run(backend_url, "sql", "--csv", count).stdout
    assert before != "n\n0\n"
    query = "WITH gone AS (DELETE FROM events RETURNING seq) SELECT count(*) FROM gone"
    r = run(backend_url, "sql", query)
    assert r.exit_code == 1
    assert r.stderr == ("error: refused: the query writes, and eventstore sql only reads (cannot execute SELECT in "
                        "a read-only transaction)\n" if store._backend.name == "postgresql" else
                        'error: near "DELETE": syntax error\n')
    assert run(backend_url, "sql", "--csv", count).stdout == before


# --- verify --------------------------------------------------------------------------------

def test_verify_clean_fixtures(store, backend_url):
    sids = imported(store, "demo", "parallel_tools", "unicode", "null_content", "extra_fields", "big")
    report = check(backend_url)
    assert report.ok, [str(f) for f in report.findings]
    assert report.sessions == 6 and report.events == sum(store.session(s).next_seq() for s in sids)
    r = run(backend_url, "verify")
    assert r.exit_code == 0 and r.stdout == "" and "6 sessions" in r.stderr and "OK" in r.stderr


def test_verify_reports_the_fixtures_invalid_projections(store, backend_url):
    imported(store, "interrupted", "lone_surrogate", "numbers")
    assert sorted(kinds(check(backend_url))) == [
        ("dangling_call", "crash-0001", 3), ("orphan_result", "num-0001", 1),
        ("orphan_result", "surr-0001", 1), ("orphan_result", "surr-0001", 2)]


CONTENT_KINDS = ["--ignore", "chunks,tool_calls", "--ignore", "dangling_call,orphan_result"]


def test_verify_ignores_the_kinds_given(store, backend_url):
    """``verify --ignore`` leaves out the findings of the kinds named (an interrupted agent's
    dangling call, say) and counts them; an unknown kind is a usage error that lists them."""
    imported(store, "parallel_tools", "interrupted", "lone_surrogate", "numbers")
    r = run(backend_url, "verify", *CONTENT_KINDS)
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr.splitlines()[-1].endswith(": OK (4 of the ignored kinds not shown)")
    r = run(backend_url, "verify", "--ignore", "orphan_result")
    assert r.exit_code == 1 and [line.split(": ")[1] for line in r.stdout.splitlines()] == ["dangling_call"]
    r = run(backend_url, "verify", "--ignore", "dangling,hash")
    assert r.exit_code == 2 and "no finding kind dangling (the kinds: storage, schema" in r.stderr


def test_verify_ignoring_content_kinds_still_reports_tampering(store, backend_url, raw):
    sid, *_ = imported(store, "parallel_tools", "interrupted", "lone_surrogate", "numbers")
    content = CONTENT_KINDS
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET payload = json_set(payload, '$.content', '# Evil\n') "
                f"WHERE session_id = '{sid}' AND seq = 5")
    r = run(backend_url, "verify", *content)
    assert r.exit_code == 1
    assert r.stdout.splitlines() == ["database: trigger: append-only trigger events_guard_update is missing",
                                     f"session {sid} seq 5: hash: stored hash does not chain from the previous "
                                     "event: this event was edited, or one before it removed or reordered"]
    assert r.stderr.splitlines()[-1].endswith(": 2 findings (trigger 1, hash 1; 4 of the ignored kinds not shown)")


def test_verify_catches_an_edit_made_after_dropping_the_triggers(store, backend_url, raw):
    sid, = imported(store, "parallel_tools")
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET payload = json_set(payload, '$.content', '# Evil\n') WHERE seq = 5")
    report = check(backend_url)
    assert kinds(report) == [("trigger", None, None), ("hash", sid, 5)]
    assert "events_guard_update is missing" in str(report.findings[0])
    r = run(backend_url, "verify")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == ["database: trigger: append-only trigger events_guard_update is missing",
                                     f"session {sid} seq 5: hash: stored hash does not chain from the previous "
                                     "event: this event was edited, or one before it removed or reordered"]


def test_verify_catches_an_edit_whose_hash_was_recomputed(store, backend_url, raw):
    sid, = imported(store, "parallel_tools")
    prev, = raw.execute("SELECT hash FROM events WHERE session_id = ? AND seq = 4", (sid,)).fetchone()
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET payload = '{\"tool_call_id\":\"call_b\",\"content\":\"x\"}' WHERE seq = 5")
    t, ts, p, salt = raw.execute("SELECT type, ts, payload, salt FROM events WHERE seq = 5").fetchone()
    raw.execute("UPDATE events SET hash = ? WHERE seq = 5", (chain_hash(prev, hashed_line(t, 5, ts, p, salt)),))
    assert kinds(check(backend_url, [sid])) == [("trigger", None, None), ("hash", sid, 6)]


def test_verify_rewritten_chain_is_caught_by_a_kept_head(store, backend_url, raw):
    sid, = imported(store, "parallel_tools")
    kept = run(backend_url, "verify", "--head").stdout
    assert kept == f"{sid}\t23\t{check(backend_url).heads[sid][1]}\n"
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET payload = '{\"tool_call_id\":\"call_b\",\"content\":\"x\"}' WHERE seq = 5")
    prev = raw.execute("SELECT hash FROM events WHERE seq = 4").fetchone()[0]
    rows = raw.execute("SELECT seq, type, ts, payload, salt FROM events WHERE seq >= 5 ORDER BY seq").fetchall()
    for seq, t, ts, p, salt in rows:
        prev = chain_hash(prev, hashed_line(t, seq, ts, p, salt))
        raw.execute("UPDATE events SET hash = ? WHERE seq = ?", (prev, seq))
    raw.execute(GUARDS["events_guard_update"])
    assert check(backend_url).ok  # a consistent rewrite of the whole chain ...
    assert run(backend_url, "verify", "--head").stdout != kept  # ... changes the head kept elsewhere


def test_verify_reads_values_only_a_hand_edit_can_store(store, backend_url, raw):
    sid, = imported(store, "demo")
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET payload = CAST(x'7b2261223a2280227d' AS TEXT) WHERE seq = 7")  # not UTF-8
    with pytest.raises(sqlite3.IntegrityError):  # the CHECK stays when the triggers are gone
        raw.execute("UPDATE events SET ts = 'noon' WHERE seq = 8")
    raw.execute(GUARDS["events_guard_update"])
    assert kinds(check(backend_url)) == [("hash", sid, 7)]


def test_verify_catches_a_deleted_row(store, backend_url, raw):
    sid, = imported(store, "demo")
    raw.execute("DROP TRIGGER events_guard_delete")
    raw.execute("DELETE FROM events WHERE session_id = ? AND seq = 3", (sid,))
    raw.execute(GUARDS["events_guard_delete"])
    report = check(backend_url)
    # the removed chunk also leaves the next message longer than what was streamed
    assert kinds(report) == [("seq", sid, 4), ("hash", sid, 4), ("chunks", sid, 5)]
    assert "seq 3 missing" in report.findings[0].message


def test_verify_catches_reordered_rows(store, backend_url, raw):
    sid, = imported(store, "parallel_tools")
    raw.execute("DROP TRIGGER events_guard_update")
    raw.executescript("""UPDATE events SET seq = 1000 WHERE seq = 4;
                         UPDATE events SET seq = 4 WHERE seq = 5;
                         UPDATE events SET seq = 5 WHERE seq = 1000;""")
    raw.execute(GUARDS["events_guard_update"])
    report = check(backend_url)
    assert kinds(report) == [("hash", sid, 4), ("seq", sid, 5), ("hash", sid, 5), ("hash", sid, 6)]
    assert "commit order" in report.findings[1].message


def test_verify_catches_events_moved_to_another_session(store, backend_url, raw):
    a, b = store.create_session("a"), store.create_session("b")
    a.append("user/message", {"content": "a0"})
    b.append("user/message", {"content": "b0"})
    b.append("user/message", {"content": "b1"})
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET session_id = 'a', seq = 1 WHERE session_id = 'b' AND seq = 1")
    raw.execute(GUARDS["events_guard_update"])
    assert kinds(check(backend_url)) == [("hash", "a", 1)]


def test_verify_catches_altered_triggers_and_a_removed_session_row(store, backend_url, raw):
    store.create_session("s").append("user/message", {"content": "x"})
    raw.execute("DROP TRIGGER events_guard_delete")
    raw.execute("CREATE TRIGGER events_guard_delete BEFORE DELETE ON events BEGIN SELECT 1; END")
    raw.execute("DROP TRIGGER sessions_guard_delete")
    raw.execute("DELETE FROM sessions WHERE id = 's'")
    report = check(backend_url)
    assert kinds(report) == [("trigger", None, None), ("trigger", None, None), ("session", "s", None)]
    assert "events_guard_delete differs" in report.findings[0].message
    assert "sessions_guard_delete is missing" in report.findings[1].message


def test_verify_checks_streamed_chunks_against_the_message(store, backend_url):
    s = store.create_session("chunks")
    s.append_many([
        ("step/start", {"step": 0}), ("assistant/chunk", {"delta": {"content": "ab"}}),
        ("assistant/chunk", {"delta": {"content": "c"}}), ("assistant/message", {"content": "abd"}),
        # a surrogate pair split across two chunks is one character once concatenated
        ("step/start", {"step": 1}), ("assistant/chunk", {"delta": {"content": "\ud83d"}}),
        ("assistant/chunk", {"delta": {"content": "\ude00!"}}), ("assistant/message", {"content": "😀!"}),
        # chunks of a step cut short do not count against the next step's message
        ("step/start", {"step": 2}), ("assistant/chunk", {"delta": {"content": "lost"}}),
        ("step/start", {"step": 3}), ("assistant/message", {"content": "not streamed"}),
        ("step/start", {"step": 4}), ("assistant/chunk", {"delta": {"content": "x"}}),
        ("assistant/message", {"content": None, "tool_calls": []}),
        ("step/start", {"step": 5}), ("assistant/chunk", {"delta": {}}),
        ("assistant/message", {"content": None}),
    ])
    report = check(backend_url)
    assert kinds(report) == [("chunks", "chunks", 3), ("chunks", "chunks", 14)]
    assert "at character 2" in report.findings[0].message and "seq 1..2" in report.findings[0].message


def test_verify_checks_the_projection_for_a_chat_api(store, backend_url):
    s = store.create_session("p")
    s.append_many([
        ("user/message", {"content": "go"}),
        ("assistant/message", {"content": "", "tool_calls": [call("a"), call("b", "read_file")]}),  # 1
        ("tool/result", {"tool_call_id": "a", "content": "ok"}),
        ("tool/result", {"tool_call_id": "a", "content": "again"}),  # 3: answers a call already answered
        ("user/message", {"content": "b never answered"}),  # 4
        ("tool/result", {"tool_call_id": "b", "content": "late"}),  # 5: after the next message
        ("assistant/message", {"content": "done", "tool_calls": []}),  # empty: dropped by the projection
        ("assistant/message", {"content": "", "tool_calls": {"id": "x"}}),  # 7: not an array
        ("assistant/message", {"content": "", "tool_calls": [{"type": "function"}, call("c"), call("c")]}),  # 8
        ("tool/result", {"tool_call_id": "c", "content": "ok"}),
    ])
    report = check(backend_url)
    assert kinds(report) == [("orphan_result", "p", 3), ("dangling_call", "p", 1), ("orphan_result", "p", 5),
                             ("tool_calls", "p", 7), ("tool_calls", "p", 8), ("tool_calls", "p", 8)]
    assert "'b' (read_file) has no tool/result before the next user/message at seq 4" in report.findings[1].message


def test_verify_selected_sessions_and_heads(store, backend_url, raw):
    imported(store, "demo", "interrupted")
    empty = store.create_session("empty")
    report = check(backend_url, ["5a1b896f-beb", empty.id])
    assert report.ok and report.sessions == 2
    assert report.heads[empty.id] == (0, genesis_hash(empty.id))
    r = run(backend_url, "verify", "--head")
    assert r.exit_code == 1  # the interrupted session's dangling call
    assert "session crash-0001 seq 3: dangling_call" in r.stderr
    heads = dict((line.split("\t")[0], line.split("\t")[1:]) for line in r.stdout.splitlines())
    assert heads["crash-0001"] == ["4", raw.execute("SELECT hash FROM events WHERE seq = 3 AND "
                                                    "session_id = 'crash-0001'").fetchone()[0]]
    assert heads["empty"] == ["0", genesis_hash("empty")]
    with pytest.raises(SessionNotFound):
        check(backend_url, ["nope"])
    r = run(backend_url, "verify", "nope")
    assert r.exit_code == 1 and r.stderr == "error: session 'nope' not found\n"


# --- repair --------------------------------------------------------------------------------

def test_repair_interrupted_appends_and_verify_passes(store, backend_url, raw):
    sid, = imported(store, "interrupted")
    s = store.session(sid)
    appended = s.repair()
    assert [(e.seq, e.type) for e in appended] == [(4, "tool/result"), (5, "step/end"), (6, "turn/end")]
    assert appended[0].payload == {"tool_call_id": "call_long", "content": repair_mod.INTERRUPTED, "repair": True}
    assert appended[1].payload == {"step": 0, "tool_calls": 1, "repair": True}
    assert check(backend_url).ok
    assert s.derive_messages()[-1] == {"role": "tool", "tool_call_id": "call_long", "content": repair_mod.INTERRUPTED}
    assert raw.execute("SELECT result_seq FROM tool_calls").fetchall() == [(4,)]
    assert raw.execute("SELECT end_seq, complete FROM turns").fetchall() == [(6, 1)]
    assert s.repair() == [] and s.next_seq() == 7  # a repaired session is clean


def test_repair_is_a_noop_on_clean_sessions(store):
    for sid in imported(store, "parallel_tools", "demo", "extra_fields"):
        s = store.session(sid)
        n = s.next_seq()
        assert s.repair() == [] and s.next_seq() == n


def test_repair_answers_only_the_missing_call_and_leaves_what_appending_cannot_fix(store, backend_url):
    s = store.create_session("half")
    s.append_many([("turn/start", {}), ("user/message", {"content": "x"}),
                   ("assistant/message", {"content": "", "tool_calls": [call("old")]}),
                   ("user/message", {"content": "moved on"}),  # 'old' can never be answered now
                   ("step/start", {}),
                   ("assistant/message", {"content": "", "tool_calls": [call("a"), call("b")]}),
                   ("tool/result", {"tool_call_id": "a", "content": "ok"})])
    appended = s.repair()
    assert [(e.type, e.payload.get("tool_call_id")) for e in appended] == [
        ("tool/result", "b"), ("step/end", None), ("turn/end", None)]
    assert appended[1].payload == {"tool_calls": 2, "repair": True}  # the open step/start had no step number
    assert kinds(check(backend_url)) == [("dangling_call", "half", 2)]
    r = run(backend_url, "repair", "half")
    assert r.exit_code == 1 and "nothing to repair" in r.stdout
    assert "cannot repair" in r.stderr and "session half seq 2: dangling_call" in r.stderr


def test_repair_retries_when_another_writer_appends_first(store, backend_url, monkeypatch):
    sid, = imported(store, "interrupted")
    plans = []
    real_plan = repair_mod.repair_plan

    def plan_then_race(events):
        plan = real_plan(events)
        if not plans:  # another process appends between repair's read and its write
            with EventStore.open(backend_url) as other:
                other.session(sid).append("tool/result", {"tool_call_id": "call_long", "content": "done"})
        plans.append(plan)
        return plan

    monkeypatch.setattr(repair_mod, "repair_plan", plan_then_race)
    appended = store.session(sid).repair()
    assert len(plans) == 2 and [e.type for e in appended] == ["step/end", "turn/end"]
    assert check(backend_url).ok


def test_cli_repair_then_verify(store, backend_url):
    imported(store, "interrupted", "demo")
    r = run(backend_url, "repair", "crash-0001")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["appended seq 4: tool/result for 'call_long'", "appended seq 5: step/end",
                                     "appended seq 6: turn/end"]
    assert run(backend_url, "verify").exit_code == 0
    assert run(backend_url, "repair", "5a1b896f-beb").stdout == "session 5a1b896f-beb: nothing to repair\n"


def test_every_sql_example_in_the_docs_runs_read_only(store, backend_url):
    if store._backend.name != "sqlite":
        pytest.skip("docs/schema.md's examples are SQLite SQL")
    imported(store, *FIXTURES)
    examples = re.findall(r"```sql\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert len(examples) >= 8
    conn = store._backend.query_connection(backend_url)
    try:
        for sql in examples:
            columns, rows = conn.query(sql)
            assert columns, sql
            list(rows)
    finally:
        conn.close()


def test_cli_sql_table_shows_bidirectional_controls_as_escapes(store, backend_url):
    """A table cell never carries U+202E to the terminal (it would reorder what is shown)."""
    text = ("chr(97) || chr(8238) || chr(98) || chr(1) || chr(155) || chr(8232) || chr(65279)"
            if store._backend.name == "postgresql" else "char(97, 8238, 98, 1, 155, 8232, 65279)")
    r = run(backend_url, "sql", f"SELECT {text} AS x")
    assert r.exit_code == 0 and "\u202e" not in r.stdout
    assert r.stdout.splitlines()[1].strip() == "a\\u202eb\\x01\\x9b\\u2028\\ufeff"
