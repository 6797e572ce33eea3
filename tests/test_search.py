"""The usage view, token totals, and full-text search (migrations 0100, 0200), on every
backend (the ``store`` fixture): the index's catch-up by the searcher, concurrent searchers,
a reader that may not write the index; the PostgreSQL roles; SQLite's own cases."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS, db_rows

from eventstore import DatabaseError, EventStore, QueryError, SessionNotFound
from eventstore.backends.sqlite.search import fts_query
from eventstore.io.transcripts.importer import import_transcript
from eventstore.search import MARK_END, MARK_START, catch_up, search, usage_totals
from eventstore.search import count as es_count

DATA = TESTS / "transcripts_data"
ROOT = TESTS.parent
CODEX = "019aeb31-58f2-7a44-b1c9-d03e6f7a8b92"
CLAUDE = "5a9d17e2-c3b0-4f4e-a812-6b2f09d8c1a4"


@pytest.fixture
def loaded(store):
    """The store with a Codex rollout and a Claude Code transcript imported."""
    import_transcript(store, str(DATA / "codex/rollout-0.66-apply-patch.jsonl"), "codex")
    import_transcript(store, str(DATA / "claude-code/v2.0-snapshots-rewind.jsonl"), "claude-code")
    return store


def indexed_through(store) -> int:
    return db_rows(store, "SELECT indexed_through FROM events_search_state")[0][0]


def indexed_rows(store) -> int:
    """Documents in the index (SQLite: the FTS5 table's own row per document, its
    ``count(*)`` would read the external content view; PostgreSQL: events_search)."""
    table = "events_search_docsize" if store._backend.name == "sqlite" else "events_search"
    return db_rows(store, f"SELECT count(*) FROM {table}")[0][0]


def test_a_tool_call_is_found_by_a_word_of_its_output(loaded):
    store = loaded
    # rollout 0.66: the checker's output names docs/index.md's stale link
    (hit,) = search(store, "urlopen", type="tool/result", limit=1)
    assert hit.session_id == CODEX and hit.type == "tool/result"
    result = next(store.session(CODEX).events(after_seq=hit.seq - 1))
    assert "urlopen" in result.payload["content"]
    assert f"{MARK_START}urlopen{MARK_END}" in hit.snippet
    call_id = result.payload["tool_call_id"]
    calls = [e for e in store.session(CODEX).events(types="assistant/message")
             if any(c["id"] == call_id for c in e.payload.get("tool_calls", []))]
    assert calls and calls[0].seq < hit.seq


def test_tool_call_arguments_and_message_content_are_searched(loaded):
    store = loaded
    hits = search(store, "check_links.py", type="assistant/message")
    assert hits and all(h.type == "assistant/message" for h in hits)
    assert any("tool_calls" in next(store.session(h.session_id).events(after_seq=h.seq - 1)).payload for h in hits)
    assert search(store, "multer", session_id=CODEX) == []
    assert {h.session_id.split(":")[0] for h in search(store, "multer")} == {CLAUDE}  # (and its /rewind fork)


def test_hits_are_ranked_and_limited(loaded):
    store = loaded
    hits = search(store, "upload", limit=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted(h.score for h in hits)
    assert len(search(store, "upload", limit=1000)) > 3


def test_every_word_must_occur_and_operators_are_text(loaded):
    store = loaded
    assert search(store, "multer LIMIT_FILE_SIZE")
    assert search(store, "multer zzzznotthere") == []
    assert search(store, "AND OR NOT") == []
    assert search(store, "a&b | !c:*") == []  # tsquery operators are punctuation: words a, b, c
    with pytest.raises(QueryError):
        search(store, "  ")
    with pytest.raises(QueryError, match="^search '.*': (fts5: )?(syntax error|no operand)"):
        search(store, "AND" if store._backend.name == "sqlite" else "a &", raw=True)


def test_a_users_words_as_an_fts5_query():
    assert fts_query('a"b OR c*') == '"a""b" "OR" "c"*'


def test_raw_queries_use_the_databases_syntax(loaded):
    raw = '"LIMIT_FILE_SIZE" OR zzzznotthere' if loaded._backend.name == "sqlite" else "limit & (file | zzzz:*)"
    assert search(loaded, raw, raw=True)


def test_appends_are_indexed_whatever_the_payload_shape(store):
    s = store.create_session("s")
    s.append("user/message", {"content": "the quick brown fox"})
    s.append("assistant/message", {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "grep_tool", "arguments": '{"pattern": "lazy dog"}'}}]})
    s.append("tool/result", {"tool_call_id": "c1", "content": [{"type": "text", "text": "jumped over"}, 7, None]})
    # shapes no chat API sends must still be appended (and simply not searched)
    s.append("tool/result", {"tool_call_id": "c2", "content": {"text": 5}, "tool_calls": "x"})
    s.append("assistant/message", {"tool_calls": [1, "two", {"function": 3}]})
    s.append("note/other", {"content": "quick"})
    assert [h.seq for h in search(store, "quick")] == [0]
    assert [h.seq for h in search(store, "lazy dog")] == [1]
    assert [h.seq for h in search(store, "grep_tool")] == [1]
    assert [h.seq for h in search(store, "jumped")] == [2]


#: An SQLite store taken back from revision 0320 to 0300: the UPDATE guard refuses every
#: UPDATE again (0320) and the salt column goes (0310).
SQLITE_BEFORE_0310 = ("DROP TRIGGER events_guard_update; CREATE TRIGGER events_guard_update BEFORE UPDATE ON events "
                      "BEGIN SELECT RAISE(ABORT, 'ES004: events are append-only: UPDATE refused'); END; "
                      "ALTER TABLE events DROP COLUMN salt")


@pytest.mark.sqlite_only
def test_events_stored_before_the_migration_are_found(tmp_path):
    db = tmp_path / "t.db"
    with EventStore.open(db) as store:
        store.create_session("old").append("user/message", {"content": "ancient scroll"})
    # Take the database back to the baseline 0008 as it was: no index, no views of 0100, no
    # meta_hash of 0210, no importing table of 0220, no salt of 0310.
    con = sqlite3.connect(db)
    con.executescript(SQLITE_BEFORE_0310 + """; DROP TABLE events_search; DROP TABLE events_search_state;
                         DROP VIEW events_search_text; DROP VIEW usage; DROP TABLE importing;
                         ALTER TABLE sessions DROP COLUMN meta_hash;
                         UPDATE alembic_version SET version_num = '0008';""")
    con.close()
    with pytest.raises(DatabaseError, match="open it once for writing"):  # behind: a read-only open refuses
        EventStore.open(db, readonly=True)
    with EventStore.open(db) as store:  # upgrades
        assert [(h.session_id, h.seq) for h in search(store, "scroll")] == [("old", 0)]


def test_appends_cost_nothing_and_the_next_search_indexes_them(store):
    s = store.create_session("s")
    s.append("user/message", {"content": "first words"})
    assert search(store, "first")[0].seq == 0
    through, rows = indexed_through(store), indexed_rows(store)
    assert (through, rows) == (store._backend.last_position(), 1)
    s.append("tool/result", {"tool_call_id": "c", "content": "second words"})
    s.append("turn/end", {})
    assert (indexed_through(store), indexed_rows(store)) == (through, rows)  # the appends did not touch it
    assert sorted(h.seq for h in search(store, "words", update_index=False)) == [0, 1]  # (past the index)
    assert catch_up(store) == 1 and catch_up(store) == 0
    assert (indexed_through(store), indexed_rows(store)) == (store._backend.last_position(), 2)
    assert sorted(h.seq for h in search(store, "words")) == [0, 1]


def test_catch_up_goes_in_batches_and_reports_progress(store, monkeypatch):
    import eventstore.backends.postgres.search as pg
    import eventstore.backends.sqlite.search as ss
    monkeypatch.setattr(ss, "CATCH_UP_BATCH", 7)
    monkeypatch.setattr(pg, "CATCH_UP_BATCH", 7)
    s = store.create_session("s")
    s.append_many([("user/message" if i % 2 else "step/start", {"content": f"batch word{i}"}) for i in range(40)])
    seen = []
    assert catch_up(store, lambda done, total: seen.append((done, total))) == 20
    assert seen == [(p, 40) for p in range(7, 40, 7)]
    assert indexed_rows(store) == 20 and [h.seq for h in search(store, "word39")] == [39]


_SEARCHER = """
import sys, time, os
sys.path.insert(0, {root!r})
import eventstore.backends.postgres.search as pg, eventstore.backends.sqlite.search as ss
pg.CATCH_UP_BATCH = ss.CATCH_UP_BATCH = 50
from eventstore import EventStore
from eventstore.search import catch_up, search
store = EventStore.open(sys.argv[1])
open(sys.argv[2] + ".ready", "w").close()
while not os.path.exists(sys.argv[2] + ".go"):
    time.sleep(0.005)
n = catch_up(store)
print(n, sorted(h.seq for h in search(store, "needle", limit=1000)))
"""


def test_concurrent_searchers_index_each_event_once(store, backend_url, tmp_path):
    """Four processes catch up the same 600 unindexed events at once, in batches of 50:
    each event is indexed by exactly one of them, and all find the same hits."""
    s = store.create_session("s")
    s.append_many([("tool/result", {"tool_call_id": "c", "content": f"needle {i}" if i % 10 == 0 else f"hay {i}"})
                   for i in range(600)])
    script = tmp_path / "searcher.py"
    script.write_text(_SEARCHER.format(root=str(ROOT)))
    flags = [tmp_path / f"w{k}" for k in range(4)]
    procs = [subprocess.Popen([sys.executable, str(script), backend_url, str(f)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in flags]
    try:
        deadline = time.monotonic() + 60
        while not all(Path(str(f) + ".ready").exists() for f in flags):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.01)
        for f in flags:
            Path(str(f) + ".go").touch()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    counts = [int(out.split(" ", 1)[0]) for out, _ in outs]
    hits = {out.split(" ", 1)[1] for out, _ in outs}
    assert sum(counts) == 600 and indexed_rows(store) == 600
    assert hits == {str(list(range(0, 600, 10))) + "\n"}


@pytest.mark.sqlite_only
def test_a_read_only_store_scans_what_is_not_indexed(tmp_path):
    db = tmp_path / "t.db"
    with EventStore.open(db) as store:
        s = store.create_session("s")
        s.append("user/message", {"content": "indexed needle"})
        search(store, "needle")
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "Bash", "arguments": '{"cmd": "find Needle"}'}}]})
        s.append("tool/result", {"tool_call_id": "c", "content": "no match here"})
    with EventStore.open(db, readonly=True) as store:
        hits = search(store, "needle")
        assert [h.seq for h in hits] == [0, 1]
        assert hits[1].score == 0.0 and f"{MARK_START}Needle{MARK_END}" in hits[1].snippet
        assert search(store, "needle", type="tool/result") == []


def test_a_common_word_is_ranked_among_the_newest_matches(store, monkeypatch):
    import eventstore.search as es
    monkeypatch.setattr(es, "RANK_WINDOW", 10)
    s = store.create_session("s")
    s.append_many([("user/message", {"content": "common " * (1 if i else 30) + f"n{i}"}) for i in range(40)])
    hits = search(store, "common", limit=5)
    assert len(hits) == 5 and all(h.seq >= 30 for h in hits)  # seq 0 matches best but is old
    assert es.count(store, "common") == 40
    monkeypatch.setattr(es, "RANK_WINDOW", 1000)
    assert search(store, "common", limit=1)[0].seq == 0


def test_a_count_stops_at_its_bound_and_the_command_says_more_than_the_window(store, backend_url, monkeypatch):
    """count(at_most=N) is min(matches, N) on every database (indexed, and past the index);
    the command counts up to the ranking's window only and says "more than" past it."""
    import eventstore.search as search_module

    s = store.create_session("many")
    s.append_many([("user/message", {"content": f"wombat number {k}"}) for k in range(30)])
    catch_up(store)
    s.append_many([("user/message", {"content": f"wombat again {k}"}) for k in range(5)])  # past the index
    for indexed in (False, True):  # (PostgreSQL counts the events past the index too)
        if indexed:
            catch_up(store)
        n = es_count(store, "wombat")
        assert n == 35 or (n == 30 and store._backend.name == "sqlite" and not indexed)
        for at_most in (0, 1, 20, 29, 30, 31, 34, 35, 36, 10**6):
            assert es_count(store, "wombat", at_most=at_most) == min(n, at_most), (indexed, at_most)
    assert es_count(store, "wombat again", at_most=3) == 3 and es_count(store, "number 7", at_most=99) == 1
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "eventstore", "--db", backend_url, "search", "wombat", "--limit", "5"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "35 matches; the best 5 shown\n", r.stderr
    # a window smaller than the matches (in process: the command's own code, with RANK_WINDOW at 20)
    monkeypatch.setattr(search_module, "RANK_WINDOW", 20)
    from click.testing import CliRunner

    from eventstore.cli import cli

    r = CliRunner().invoke(cli, ["--db", backend_url, "search", "wombat", "--limit", "5"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "more than 20 matches; the best 5 shown (ranked among the newest 20)\n"


@pytest.mark.sqlite_only
def test_a_search_of_an_up_to_date_index_writes_nothing(tmp_path):
    """No write transaction (nor a new store's first settling of the WAL) when there is
    nothing to index: another connection sees no commit."""
    db = tmp_path / "s.db"
    with EventStore.open(db) as store:
        store.create_session("s").append("user/message", {"content": "quiet words"})
        catch_up(store)
    watcher = sqlite3.connect(db)
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    with EventStore.open(db) as store:
        assert catch_up(store) == 0 and [h.seq for h in search(store, "quiet")] == [0]
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == version
    watcher.close()


def test_a_postgres_search_of_an_up_to_date_index_takes_no_lock(pg_url):
    """With nothing to index, the catch-up each search makes is one read: no transaction
    locks the state row (it would write, and wait for a WAL flush at its commit), so a
    search goes on while a catch-up holds that lock."""
    import psycopg

    with EventStore.open(pg_url, busy_timeout=1.0) as store:
        store.create_session("s").append("user/message", {"content": "quiet words"})
        assert catch_up(store) == 1
        lockers = db_rows(store, "SELECT xmax::text FROM events_search_state")
        assert [h.seq for h in search(store, "quiet")] == [0] and es_count(store, "quiet") == 1
        assert db_rows(store, "SELECT xmax::text FROM events_search_state") == lockers  # (FOR UPDATE sets it)
        with psycopg.connect(pg_url) as holder:  # (a transaction, open until the block ends)
            holder.execute("SELECT 1 FROM events_search_state FOR UPDATE")
            assert catch_up(store) == 0  # (a wait for the lock would end in DatabaseError after 1 s)
            assert [h.seq for h in search(store, "quiet")] == [0]


def test_a_big_catch_up_takes_the_index_statistics_where_the_role_may(pg_server, pg_url, monkeypatch):
    """A catch-up that indexed at least ANALYZE_AFTER events, more than a tenth of the rows
    the statistics last counted, analyzes the index (right after a big import autovacuum has
    not yet, and the planner takes a common word for a rare one) when the role owns it; a
    smaller one leaves it to autovacuum; the writer role, not the owner, searches all the same."""
    import eventstore.backends.postgres.search as pg
    monkeypatch.setattr(pg, "ANALYZE_AFTER", 30)

    def counted(store) -> float:  # (set by ANALYZE; the migration analyzed the empty table: 0)
        return db_rows(store, "SELECT reltuples FROM pg_class WHERE oid = 'events_search'::regclass")[0][0]

    def add(store, n: int) -> None:
        store.session("s").append_many([("user/message", {"content": f"common word {k}"}) for k in range(n)])

    with EventStore.open(pg_url) as store:
        store.create_session("s")
        add(store, 29)
        assert catch_up(store) == 29 and counted(store) == 0
        add(store, 40)
        assert catch_up(store) == 40 and counted(store) == 69
        monkeypatch.setattr(pg, "ANALYZE_AFTER", 3)
        add(store, 6)  # 6 is less than a tenth of 69
        assert catch_up(store) == 6 and counted(store) == 69
        add(store, 8)
        assert catch_up(store) == 8 and counted(store) == 83
    writer = _pg_role(pg_server, pg_url, "analyzing_writer", "eventstore_writer")
    with EventStore.open(writer) as store:
        add(store, 40)
        assert len(search(store, "common", limit=200)) == 123 and counted(store) == 83


def test_usage_view_has_one_row_per_model_response(loaded):
    store = loaded
    rows = db_rows(store, "SELECT session_id, turn, step, model, input_tokens, output_tokens, cache_read_tokens "
                          "FROM usage WHERE session_id = ? ORDER BY seq", (CLAUDE,))
    messages = [e for e in store.session(CLAUDE).events(types="assistant/message")]
    assert len(rows) == len(messages)
    assert all(r[3] == "claude-sonnet-4-5-20250929" for r in rows)
    assert [(r[1], r[2]) for r in rows] == [(e.payload["usage"]["turn"], e.payload["usage"]["step"]) for e in messages]
    assert len({(r[1], r[2]) for r in rows}) == len(rows)
    codex = db_rows(store, "SELECT sum(output_tokens), sum(input_tokens + cache_read_tokens) FROM usage "
                           "WHERE session_id = ?", (CODEX,))[0]
    assert codex == (674, 35507)  # the rollout's last cumulative totals


def test_sessions_shows_the_totals(loaded, backend_url):
    totals = usage_totals(loaded)
    assert totals[CODEX].output_tokens == 674
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", backend_url, "sessions", "--json"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    rows = {x["id"]: x for x in json.loads(r.stdout)}
    assert rows[CODEX]["output_tokens"] == 674 and rows[CODEX]["cache_read_tokens"] == totals[CODEX].cache_read_tokens


def test_sessions_table_fits_its_token_columns_to_their_cells(loaded, backend_url):
    """Each token column is as wide as its widest cell (the header at least), right-aligned,
    two spaces apart; a session without usage shows dashes."""
    loaded.create_session("no-usage").append("user/message", {"content": "hi"})
    loaded.create_session("big").append("assistant/message", {"content": "x", "usage": {
        "input_tokens": 12_345_678_901, "output_tokens": 1, "cache_read_tokens": 0, "cache_creation_tokens": 0}})
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", backend_url, "sessions"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    totals = usage_totals(loaded)
    cells = {sid: [f"{t.input_tokens:,}", f"{t.output_tokens:,}", f"{t.cache_read_tokens:,}",
                   f"{t.cache_creation_tokens:,}"] for sid, t in totals.items()}
    assert "no-usage" not in cells
    names = ["IN TOKENS", "OUT TOKENS", "CACHE READ", "CACHE WRITE"]
    widths = [max(len(n), *(len(c[k]) for c in cells.values())) for k, n in enumerate(names)]
    assert widths[0] == len("12,345,678,901") > len("IN TOKENS")
    assert header.endswith("  " + "  ".join(n.rjust(w) for n, w in zip(names, widths, strict=True)))
    assert len(rows) == len(loaded.sessions())
    for row in rows:
        sid = row.split()[0]
        assert len(row) == len(header), row
        assert row.endswith("  " + "  ".join(c.rjust(w) for c, w in zip(cells.get(sid, ("-",) * 4), widths, strict=True))), row


def test_cli_search(loaded, backend_url):
    """The command's output: the first search as a real process (``python -m eventstore``,
    stdout a pipe), the rest through click in this process (stdout no terminal either;
    $COLUMNS set or unset for each)."""
    from click.testing import CliRunner

    from eventstore.cli import cli

    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "eventstore", "--db", backend_url, "search"]
    r = subprocess.run([*cmd, "urlopen", "--json", "--limit", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    (hit,) = json.loads(r.stdout)
    assert hit["session_id"] == CODEX and "**urlopen**" in hit["snippet"] and isinstance(hit["seq"], int)

    def run(*args, columns=None):
        return CliRunner().invoke(cli, ["--db", backend_url, "search", *args], env={"COLUMNS": columns})

    r = run("urlopen", "--session", CLAUDE)
    assert r.exit_code == 0 and r.stdout == "no match\n"
    r = run("multer", "--type", "tool/result")
    assert r.exit_code == 0 and "tool/result" in r.stdout and "SNIPPET" in r.stdout
    r = run("urlopen", "--limit", "3", columns="80")
    assert r.exit_code == 0 and r.stdout.startswith(f"{CODEX}  seq ")  # an id stays whole on its line
    lines = r.stdout.splitlines()  # too narrow for a column: each snippet below its hit, indented, all of it shown
    assert sum(line.startswith(f"{CODEX}  seq ") for line in lines) == 3 and r.stdout.count("urlopen") == 3
    assert all(line.startswith(("    ", CODEX)) and len(line) <= 80 for line in lines), r.stdout
    r = run("urlopen", "--limit", "3", columns="100")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) > 4  # the snippets wrap to $COLUMNS
    r = run("urlopen", "--limit", "3")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 4  # into a pipe: a hit a line
    bad = "AND" if loaded._backend.name == "sqlite" else "a &"
    r = run(bad, "--raw")
    assert r.exit_code == 1 and r.stderr.startswith(f"error: search '{bad}'") and "Traceback" not in r.stderr
    r = run("urlopen", "--session", "nope")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "error: session 'nope' not found\n")
    for odd in ['"', "*", "_ -- ::"]:  # no letter or digit: the same error on every database
        r = run(odd)
        assert r.exit_code == 1 and r.stderr == f"error: the search query {odd!r} has no word to look for " \
                                                f"(words are letters and digits)\n", r.stderr


def test_a_nul_in_a_query_and_a_limit_past_sqls_are_the_same_answer_on_every_database(loaded):
    """A query holding NUL is the same QueryError on both databases (PostgreSQL refused it as
    bad event data, and SQLite as an unterminated string the user never typed, or searched
    only up to it with raw); a limit past SQL's 64-bit LIMIT asks for no more than all."""
    for raw in (False, True):
        for query in ("upload\x00", "a\x00b"):
            with pytest.raises(QueryError, match="^the search query holds a NUL character"):
                search(loaded, query, raw=raw)
            with pytest.raises(QueryError, match="^the search query holds a NUL character"):
                es_count(loaded, query, raw=raw)
    assert len(search(loaded, "upload", limit=2**63)) == len(search(loaded, "upload", limit=1000)) > 3


def test_odd_queries_and_unknown_sessions_are_errors_on_every_database(loaded):
    for odd in ['"', "*", '"*"', "'", "&|!"]:
        with pytest.raises(QueryError, match="has no word to look for"):
            search(loaded, odd)
        with pytest.raises(QueryError, match="has no word to look for"):
            es_count(loaded, odd)
    assert search(loaded, '"urlopen"') and search(loaded, "urlop*")  # quotes and a star around a word are fine
    with pytest.raises(SessionNotFound):
        search(loaded, "urlopen", session_id="nope")
    with pytest.raises(SessionNotFound):
        es_count(loaded, "urlopen", session_id="nope")
    assert search(loaded, "urlopen", session_id=CLAUDE) == []


def _pg_role(pg_server, pg_url: str, name: str, group: str) -> str:
    """The URL of a new login role ``name`` in ``group`` (``eventstore roles`` run first)."""
    import psycopg
    from click.testing import CliRunner

    from eventstore.cli import cli

    assert CliRunner().invoke(cli, ["--db", pg_url, "roles"]).exit_code == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DO $$ BEGIN CREATE ROLE {name} LOGIN IN ROLE {group}; "
                     f"EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    return pg_server.url(pg_url.rsplit("/", 1)[1], name)


def test_search_and_totals_work_as_the_postgres_writer_role(pg_server, pg_url):
    """The least-privilege writer imports, searches (catching the index up: its grants on
    the derived table) and reads the token totals."""
    EventStore.open(pg_url).close()
    writer = _pg_role(pg_server, pg_url, "searcher", "eventstore_writer")
    with EventStore.open(writer) as store:
        import_transcript(store, str(DATA / "codex/rollout-0.66-apply-patch.jsonl"), "codex")
        assert indexed_through(store) == 0
        (hit,) = search(store, "urlopen", type="tool/result", limit=1)
        assert hit.session_id == CODEX
        assert indexed_through(store) == store._backend.last_position() and indexed_rows(store) > 0
        assert usage_totals(store)[CODEX].output_tokens == 674


def test_search_as_the_postgres_auditor_role(pg_server, pg_url):
    """The auditor may only read: its search leaves the index as it is and still finds the
    events past it (their vectors computed on the fly), ranked with the indexed ones; the
    CLI works the same; the auditor cannot write the index."""
    import psycopg

    with EventStore.open(pg_url) as owner:
        s = owner.create_session("s")
        s.append("user/message", {"content": "indexed needle needle"})
        assert search(owner, "needle")
        s.append_many([("tool/result", {"tool_call_id": "c", "content": "late needle"}),
                       ("assistant/message", {"content": "needle needle needle"})])
        through = indexed_through(owner)
    auditor = _pg_role(pg_server, pg_url, "searching_auditor", "eventstore_auditor")
    with EventStore.open(auditor) as store:
        with pytest.raises(DatabaseError, match="may not write the search index"):
            catch_up(store)
        hits = search(store, "needle")
        assert [h.seq for h in hits] == [2, 0, 1]  # by ts_rank: the unindexed ones too
        assert all(h.score < 0 for h in hits) and f"{MARK_START}needle{MARK_END}" in hits[1].snippet
        assert es_count(store, "needle") == 3 and es_count(store, "late", type="tool/result") == 1
        assert search(store, "needle", type="tool/result")[0].seq == 1
        assert indexed_through(store) == through
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", auditor, "search", "late", "--json"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and [h["seq"] for h in json.loads(r.stdout)] == [1], r.stderr
    with psycopg.connect(auditor, autocommit=True) as conn:
        for sql in ["INSERT INTO events_search VALUES (99, 's', 'user/message', 'x')",
                    "UPDATE events_search_state SET indexed_through = 0", "DELETE FROM events_search"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
    with EventStore.open(pg_url, readonly=True) as ro:  # the same for a store opened read-only
        assert [h.seq for h in search(ro, "needle")] == [2, 0, 1] and indexed_through(ro) == through


#: A PostgreSQL store taken back from revision 0320 to 0300: the redaction's functions and
#: trigger (0320) and the salt column (0310) go, the UPDATE guard refuses every UPDATE again.
PG_BEFORE_0310 = ("DROP TRIGGER events_guard_update ON events; DROP FUNCTION es_redaction_guard(), "
                  "es_redact_head(text), es_redact(text, bigint, text, text, bytea, bigint, double precision, text, "
                  "bytea, text); CREATE TRIGGER events_guard_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION "
                  "events_refuse_change(); ALTER TABLE events DROP COLUMN salt")


def test_postgres_upgrade_fills_the_index_and_carries_the_grants(pg_server, pg_url):
    """A database at revision 0150 (the GIN expression index on events), with the roles set
    up: the upgrade drops that index, indexes the stored events, and lets the roles read
    (and the writer catch up) the new tables."""
    import psycopg

    EventStore.open(pg_url).close()
    writer = _pg_role(pg_server, pg_url, "old_writer", "eventstore_writer")
    with EventStore.open(writer) as store:
        store.create_session("old").append_many([("user/message", {"content": "ancient scroll"}),
                                                  ("turn/end", {})])
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to 0150 as it was
        conn.execute(PG_BEFORE_0310)
        conn.execute("DROP TABLE events_search, events_search_state")
        conn.execute("CREATE INDEX events_search ON events USING gin (es_search_vector(payload)) "
                     "WHERE type IN ('user/message', 'assistant/message', 'tool/result')")
        conn.execute("DROP TRIGGER events_guard_check ON events; DROP FUNCTION events_guard_check(); "  # (0240)
                     "ALTER TABLE events ADD CONSTRAINT events_session_fkey FOREIGN KEY (session_id) "
                     "REFERENCES sessions (id); ALTER TABLE events ALTER COLUMN position DROP DEFAULT; "
                     "CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN PERFORM pg_notify('eventstore_events', ''); RETURN NULL; END $$; "
                     "CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT "
                     "EXECUTE FUNCTION events_notify()")
        conn.execute("DROP TABLE importing; DROP FUNCTION es_importing_guard()")  # (revision 0220)
        conn.execute("ALTER TABLE sessions DROP COLUMN meta_hash")  # (revision 0210)
        conn.execute("DROP TABLE events_position_lock; DROP FUNCTION es_try_position_lock(); "  # (revision 0250)
                     "DROP FUNCTION es_search_guard()")
        conn.execute("CREATE OR REPLACE VIEW events_search_text AS SELECT position, session_id, seq, type, "  # (0280)
                     "es_search_text(payload) AS text FROM events "
                     "WHERE type IN ('user/message', 'assistant/message', 'tool/result'); "
                     "DROP FUNCTION es_event_vector(text, text), es_event_text(text, text)")
        conn.execute("UPDATE alembic_version SET version_num = '0150'")
    with EventStore.open(pg_url) as store:  # upgrades
        assert indexed_through(store) == 2 and indexed_rows(store) == 1
        assert db_rows(store, "SELECT count(*) FROM pg_indexes WHERE tablename = 'events' "
                              "AND indexname LIKE ?", ("events_search%",)) == [(0,)]
        rights = db_rows(store, "SELECT r, has_table_privilege(r, 'events_search', 'SELECT'), "
                                "has_table_privilege(r, 'events_search', 'INSERT'), "
                                "has_table_privilege(r, 'events_search_state', 'UPDATE') "
                                "FROM unnest(ARRAY['eventstore_writer', 'eventstore_auditor']) AS r")
        assert rights == [("eventstore_writer", True, True, True), ("eventstore_auditor", True, False, False)]
        rights = db_rows(store, "SELECT r, has_table_privilege(r, 'importing', 'SELECT'), "  # (revision 0220)
                                "has_table_privilege(r, 'importing', 'DELETE') "
                                "FROM unnest(ARRAY['eventstore_writer', 'eventstore_auditor']) AS r")
        assert rights == [("eventstore_writer", True, True), ("eventstore_auditor", True, False)]
    with EventStore.open(writer) as store:
        store.session("old").append("tool/result", {"tool_call_id": "c", "content": "new scroll"})
        assert [(h.session_id, h.seq) for h in search(store, "scroll")] == [("old", 2), ("old", 0)]
        assert indexed_through(store) == 3


def test_text_with_a_lone_surrogate_or_marker_characters_is_found(tmp_path):
    """A payload's lone surrogate (valid JSON, not UTF-8 once SQLite extracts it) and the
    snippet's own marker characters in stored text: found, read and marked correctly, by the
    index and by the read-only scan past it."""
    from eventstore.search import snippet_ranges

    path = tmp_path / "s.db"
    with EventStore.open(path) as st:
        st.create_session("s").append_many([("user/message", {"content": "\ud83d lone wombat"}),
                                            ("tool/result", {"tool_call_id": "c", "content": f"{MARK_START}x{MARK_END} wombat"})])
    with EventStore.open(path, readonly=True) as st:  # scans: nothing indexed
        scanned = search(st, "wombat", update_index=False)
    with EventStore.open(path) as st:
        indexed = search(st, "wombat")
        assert indexed_through(st) > 0
    for hits in (scanned, indexed):
        by_seq = {h.seq: h for h in hits}
        assert set(by_seq) == {0, 1}
        assert snippet_ranges(by_seq[0].snippet) == ("\ud83d lone wombat", [(7, 13)])
        assert snippet_ranges(by_seq[1].snippet) == ("\ufffdx\ufffd wombat", [(4, 10)])


def test_thinking_is_searched(store):
    """Claude Code's thinking blocks and Codex's reasoning summaries (``assistant/thinking``)
    are found, past the index (a search that does not catch it up) and in it."""
    import_transcript(store, str(DATA / "codex/rollout-0.40-shell.jsonl"), "codex")
    import_transcript(store, str(DATA / "claude-code/v1.0-split-blocks.jsonl"), "claude-code")
    for update_index in (False, True):
        (hit,) = search(store, "Locating", update_index=update_index)  # only a reasoning summary says it
        assert hit.type == "assistant/thinking" and f"{MARK_START}Locating{MARK_END}" in hit.snippet
        assert next(store.session(hit.session_id).events(after_seq=hit.seq - 1)).payload["thinking"] == (
            "**Locating parse_duration**")
        hits = search(store, "indentation mismatch", update_index=update_index)
        assert [h.type for h in hits] == ["assistant/thinking"]
        assert search(store, "Locating", type="assistant/message", update_index=update_index) == []
    assert es_count(store, "Locating") == 1 and es_count(store, "Locating", type="assistant/thinking") == 1
    assert not [m for _kind, m in store._backend.integrity_findings(full=True) if "search index" in m]


def test_the_parts_of_a_message_are_searched(store):
    """A message written over many lines (an ``assistant/message``, then ``assistant/part``
    events of its ``message_id``): each part's text and tool calls are found."""
    s = store.create_session("split")
    s.append("assistant/message", {"content": "first words", "message_id": "m1"})
    s.append("assistant/part", {"message_id": "m1", "content": [{"type": "text", "text": "zebra crossing"}]})
    s.append("assistant/part", {"message_id": "m1", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "look_up", "arguments": '{"animal": "giraffe"}'}}]})
    for update_index in (False, True):
        assert [(h.seq, h.type) for h in search(store, "zebra", update_index=update_index)] == [(1, "assistant/part")]
        (hit,) = search(store, "giraffe", update_index=update_index)
        assert hit.seq == 2 and f"{MARK_START}giraffe{MARK_END}" in hit.snippet and "look_up" in hit.snippet
    assert es_count(store, "look_up") == 1
    assert not [m for _kind, m in store._backend.integrity_findings(full=True) if "search index" in m]


def test_cli_search_escapes_control_characters_of_a_session_id(db_path):
    with EventStore.open(db_path) as st:
        st.create_session("esc\x1b]0;TITLE\x07").append("user/message", {"content": "the red door"})
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db_path), "search", "red"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "esc\\x1b]0;TITLE\\x07" in r.stdout


def _quokka_events(s) -> None:
    """A message, a thinking event (and one whose ``thinking`` is no string), a part."""
    s.append_many([("assistant/message", {"content": "first words", "message_id": "m1"}),
                   ("assistant/thinking", {"thinking": "pondering the quokka"}),
                   ("assistant/thinking", {"thinking": 5}),
                   ("assistant/part", {"message_id": "m1", "content": [{"type": "text", "text": "quokka crossing"}]}),
                   ("turn/end", {})])


def test_thinking_and_parts_are_indexed_as_they_come(store):
    """Thinking events and message parts go into the index itself (revision 0280), at each
    catch-up: a count reads the index, which holds one row per searchable event."""
    s = store.create_session("q")
    _quokka_events(s)
    assert sorted(h.seq for h in search(store, "quokka")) == [1, 3]  # (indexes)
    assert (indexed_through(store), indexed_rows(store)) == (store._backend.last_position(), 4)
    s.append_many([("assistant/thinking", {"thinking": "the quokka again"}),
                   ("assistant/part", {"message_id": "m1", "tool_calls": [
                       {"id": "c", "type": "function", "function": {"name": "find_quokka", "arguments": "{}"}}]})])
    # (catches up, then reads the index; "_" separates words: find_quokka has quokka)
    assert sorted(h.seq for h in search(store, "quokka")) == [1, 3, 5, 6]
    assert (indexed_through(store), indexed_rows(store)) == (store._backend.last_position(), 6)
    assert es_count(store, "quokka") == 4 and es_count(store, "find_quokka") == 1
    assert es_count(store, "quokka", type="assistant/thinking") == 2
    assert not [m for _kind, m in store._backend.integrity_findings(full=True) if "search index" in m]


def _migration(name: str, database: str):
    """A migration script of ``database``'s history (migrations/sqlite or postgres), as a module."""
    import importlib.util

    path = next((ROOT / "migrations" / database / "versions").glob(f"{name}_*.py"))
    spec = importlib.util.spec_from_file_location(f"_migration_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_store_indexed_at_0270_gets_its_thinking_and_parts_indexed_by_the_upgrade(backend_url):
    """A store at revision 0270 whose index went past its thinking events and parts (which
    that index left out): the upgrade indexes them, and a search finds them in the index."""
    with EventStore.open(backend_url) as store:
        _quokka_events(store.create_session("q"))
        last = store._backend.last_position()
    messages = "('user/message', 'assistant/message', 'tool/result')"
    if backend_url.startswith("postgresql"):  # back to 0270 as it was, its index caught up
        import psycopg

        guard = next(d for d in _migration("0250", "postgres").postgresql("public") if "FUNCTION es_search_guard()" in d)
        with psycopg.connect(backend_url, autocommit=True) as conn:
            conn.execute(PG_BEFORE_0310)
            conn.execute(guard.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
            conn.execute("CREATE OR REPLACE VIEW events_search_text AS SELECT position, session_id, seq, type, "
                         f"es_search_text(payload) AS text FROM events WHERE type IN {messages}")
            conn.execute("DROP FUNCTION es_event_vector(text, text), es_event_text(text, text)")
            conn.execute("INSERT INTO events_search (position, session_id, type, tsv) SELECT position, session_id, "
                         f"type, ''::tsvector FROM events WHERE type IN {messages}")
            conn.execute(f"UPDATE events_search_state SET indexed_through = {last}")
            conn.execute("UPDATE alembic_version SET version_num = '0270'")
    else:
        con = sqlite3.connect(backend_url)
        with con:
            con.executescript(SQLITE_BEFORE_0310)
            con.execute("DROP VIEW events_search_text")
            con.execute(_migration("0100", "sqlite").SEARCH_TEXT)
            con.execute("INSERT INTO events_search (rowid, text) SELECT position, text FROM events_search_text")
            con.execute("UPDATE events_search_state SET indexed_through = ?", (last,))
            con.execute("UPDATE alembic_version SET version_num = '0270'")
        con.close()
    with EventStore.open(backend_url) as store:  # upgrades
        assert (indexed_through(store), indexed_rows(store)) == (last, 4)
        assert es_count(store, "quokka") == 2 and es_count(store, "pondering", type="assistant/thinking") == 1
        assert sorted((h.seq, h.type) for h in search(store, "quokka", update_index=False)) == [
            (1, "assistant/thinking"), (3, "assistant/part")]
        assert not [m for _kind, m in store._backend.integrity_findings(full=True) if "search index" in m]


def _snippet_reading_every_token(text, terms, context=16):
    """:func:`eventstore.search.snippet` as it was written first, reading every token of the
    text: what the snippet must still be."""
    from eventstore.search import SNIPPET_GAP, SNIPPET_TOKEN, TOKEN, _clip

    if MARK_START in text or MARK_END in text:
        text = text.replace(MARK_START, "\ufffd").replace(MARK_END, "\ufffd")
    tokens = list(TOKEN.finditer(text))

    def hit(tok):
        tok = tok.lower()
        return any(tok.startswith(t) if p else tok == t for t, p in terms)

    first = next((k for k, m in enumerate(tokens) if hit(m.group())), 0)
    lo = max(0, min(first - context // 4, len(tokens) - context))
    hi = min(len(tokens), lo + context)
    if not tokens:
        return text[:200] + ("…" if len(text) > 200 else "")
    start = tokens[lo].start() if lo else 0
    end = tokens[hi - 1].end() if hi < len(tokens) else len(text)
    if start == 0 and tokens[0].start() > SNIPPET_GAP:
        start = tokens[0].start() - SNIPPET_GAP // 2
    if end == len(text) and len(text) - tokens[hi - 1].end() > SNIPPET_GAP:
        end = tokens[hi - 1].end() + SNIPPET_GAP // 2
    out, at = [], start
    for m in tokens[lo:hi]:
        out.append(_clip(text[at:m.start()], SNIPPET_GAP))
        word = m.group()
        shown = word if len(word) <= SNIPPET_TOKEN else word[:SNIPPET_TOKEN] + "…"
        out += [MARK_START, shown, MARK_END] if hit(word) else [shown]
        at = m.end()
    out.append(_clip(text[at:end], SNIPPET_GAP))
    return ("…" if start else "") + "".join(out) + ("…" if end < len(text) else "")


def test_a_snippet_reads_only_the_tokens_it_shows_and_is_what_reading_all_made():
    """A snippet stops reading the text past its window (a match at the start of a long tool
    output costs what a short one does), and is what reading every token made: matches at
    the start, middle and end, none, several, prefixes, long gaps and tokens, every context."""
    import random

    from eventstore.search import query_terms, snippet

    rng = random.Random(11)
    words = ["wombat", "Wombats", "a", "bb", "ccc", "x" * 90, "é", "漢字", "_", "...", " " * 100, "\n", "wom",
             MARK_START, "42"]
    for _ in range(3000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 80)))
        terms = query_terms(rng.choice(["wombat", "wom*", "bb wombat", "zzz", "ccc x*"]), False)
        context = rng.choice([1, 2, 3, 5, 16, 40])
        assert snippet(text, terms, context) == _snippet_reading_every_token(text, terms, context), (text, terms)
    long = "wombat " + "lorem ipsum dolor " * 100_000
    terms = query_terms("wombat", False)
    t0 = time.perf_counter()
    assert snippet(long, terms) == _snippet_reading_every_token(long, terms)
    t1 = time.perf_counter()
    snippet(long, terms)
    assert time.perf_counter() - t1 < (t1 - t0) / 20  # (reading all 300,001 tokens: most of t1 - t0)
