"""The usage view, token totals, and full-text search (migration 0100), on every backend
(the ``store`` fixture); the SQLite index's catch-up and read-only scan on SQLite only."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import db_rows

from eventstore import DatabaseError, EventStore, QueryError
from eventstore.backends.sqlite_search import _indexed_through, fts_query
from eventstore.search import MARK_END, MARK_START, catch_up, search, usage_totals
from eventstore.transcripts.importer import import_transcript

DATA = Path(__file__).parent / "transcripts_data"
ROOT = Path(__file__).resolve().parent.parent
CODEX = "019aeb31-58f2-7a44-b1c9-d03e6f7a8b92"
CLAUDE = "5a9d17e2-c3b0-4f4e-a812-6b2f09d8c1a4"


@pytest.fixture
def loaded(store):
    """The store with a Codex rollout and a Claude Code transcript imported."""
    import_transcript(store, str(DATA / "codex/rollout-0.66-apply-patch.jsonl"), "codex")
    import_transcript(store, str(DATA / "claude-code/v2.0-snapshots-rewind.jsonl"), "claude-code")
    return store


def indexed_through(store) -> int:
    return _indexed_through(store.backend)


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
    assert {h.session_id for h in search(store, "multer")} == {CLAUDE}


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
        search(store, "AND" if store.backend.name == "sqlite" else "a &", raw=True)


def test_a_users_words_as_an_fts5_query():
    assert fts_query('a"b OR c*') == '"a""b" "OR" "c"*'


def test_raw_queries_use_the_databases_syntax(loaded):
    raw = '"LIMIT_FILE_SIZE" OR zzzznotthere' if loaded.backend.name == "sqlite" else "limit & (file | zzzz:*)"
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


@pytest.mark.sqlite_only
def test_events_stored_before_the_migration_are_found(tmp_path):
    db = tmp_path / "t.db"
    with EventStore.open(db) as store:
        store.create_session("old").append("user/message", {"content": "ancient scroll"})
    # Take the database back to the baseline 0008 as it was: no index, no views of 0100, no meta_hash (0210).
    con = sqlite3.connect(db)
    con.executescript("""DROP TABLE events_search; DROP TABLE events_search_state;
                         DROP VIEW events_search_text; DROP VIEW usage;
                         ALTER TABLE sessions DROP COLUMN meta_hash;
                         UPDATE alembic_version SET version_num = '0008';""")
    con.close()
    with pytest.raises(DatabaseError, match="open it once for writing"):  # behind: a read-only open refuses
        EventStore.open(db, readonly=True)
    with EventStore.open(db) as store:  # upgrades
        assert [(h.session_id, h.seq) for h in search(store, "scroll")] == [("old", 0)]


@pytest.mark.sqlite_only
def test_appends_cost_nothing_and_the_next_search_indexes_them(tmp_path):
    with EventStore.open(tmp_path / "t.db") as store:
        s = store.create_session("s")
        s.append("user/message", {"content": "first words"})
        assert search(store, "first")[0].seq == 0
        through = indexed_through(store)
        s.append("tool/result", {"tool_call_id": "c", "content": "second words"})
        assert indexed_through(store) == through  # the append did not touch the index
        assert catch_up(store) == 1 and catch_up(store) == 0
        assert sorted(h.seq for h in search(store, "words")) == [0, 1]


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


def test_cli_search(loaded, backend_url):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "eventstore", "--db", backend_url, "search"]
    r = subprocess.run([*cmd, "urlopen", "--json", "--limit", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    (hit,) = json.loads(r.stdout)
    assert hit["session_id"] == CODEX and "**urlopen**" in hit["snippet"] and isinstance(hit["seq"], int)
    r = subprocess.run([*cmd, "urlopen", "--session", CLAUDE], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout == "no match\n"
    r = subprocess.run([*cmd, "multer", "--type", "tool/result"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "tool/result" in r.stdout and "SNIPPET" in r.stdout
    r = subprocess.run([*cmd, "urlopen", "--limit", "3"], capture_output=True, text=True, env={**env, "COLUMNS": "60"})
    assert r.returncode == 0 and f"\n{CODEX} " in r.stdout  # an id stays whole on its line, however narrow
    bad = "AND" if loaded.backend.name == "sqlite" else "a &"
    r = subprocess.run([*cmd, bad, "--raw"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and r.stderr.startswith(f"error: search '{bad}'") and "Traceback" not in r.stderr


def test_search_and_totals_work_as_the_postgres_writer_role(pg_server, pg_url):
    """The least-privilege writer (INSERT and SELECT only) imports, searches and reads the
    token totals: the index is kept on insert, nothing else is written."""
    from click.testing import CliRunner

    from eventstore.cli import cli

    assert CliRunner().invoke(cli, ["--db", pg_url, "roles"]).exit_code == 0
    import psycopg
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE searcher LOGIN IN ROLE eventstore_writer; "
                     "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    writer = pg_server.url(pg_url.rsplit("/", 1)[1], "searcher")
    with EventStore.open(writer) as store:
        import_transcript(store, str(DATA / "codex/rollout-0.66-apply-patch.jsonl"), "codex")
        (hit,) = search(store, "urlopen", type="tool/result", limit=1)
        assert hit.session_id == CODEX
        assert usage_totals(store)[CODEX].output_tokens == 674


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
