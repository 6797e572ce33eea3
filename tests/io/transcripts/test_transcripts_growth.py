"""Claude Code transcripts as they are written (issue 32): any cut, then the whole, equals the
whole; nothing waits for a later line; facts learned later are new events; the projection
is what the model was sent; a finished session reads as finished.

The samples are tests/transcripts_data/claude-code (README.md there says what each covers);
every line boundary of every sample is a cut."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.cli import cli
from eventstore.io.transcripts.common import effective_meta, read_lines
from eventstore.io.transcripts.importer import convert_file, import_transcript
from eventstore.web.index import Summary

DATA = TESTS / "transcripts_data"
ROOT = TESTS.parent
SAMPLES = sorted(str(p.relative_to(DATA)) for p in (DATA / "claude-code").rglob("*.jsonl"))


def talk(sessions) -> list:
    """Sessions (converted, or ``SessionInfo``s, or ids) but the one of a file's leading
    summary lines (``<file>:titles``)."""
    def sid(x):
        return x if isinstance(x, str) else getattr(x, "session_id", None) or x.id
    return [x for x in sessions if not sid(x).endswith(":titles")]


def line_cuts(data: bytes) -> list[int]:
    """Every line boundary of ``data`` (the byte offsets after each newline), and 0."""
    return [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]


def converted(data: bytes, name: str = "x.jsonl") -> dict:
    convs, _dropped, _waiting = convert_file(name, "claude-code", data=data)
    return {c.session_id: c for c in convs}


@pytest.mark.parametrize("rel", SAMPLES)
def test_every_prefix_converts_to_a_beginning_of_the_whole(rel):
    # The converter's side of "any cut, then the whole, equals the whole": each session of a
    # prefix is a beginning of the same session of the whole file (events and meta), and the
    # sessions come in the same order.
    data = (DATA / rel).read_bytes()
    whole = converted(data)
    for cut in line_cuts(data):
        part = converted(data[:cut])
        assert list(part) == list(whole)[:len(part)], cut
        for sid, conv in part.items():
            assert conv.events == whole[sid].events[:len(conv.events)], (cut, sid)
            assert conv.meta == whole[sid].meta, (cut, sid)


@pytest.mark.parametrize("rel", SAMPLES)
def test_each_line_is_stored_by_the_first_import_that_sees_it(rel):
    # Nothing waits: the events of the first n lines hold every tree line of them (by its
    # uuid), the last line included.
    data = (DATA / rel).read_bytes()
    lines = read_lines(rel, data).lines
    cuts = line_cuts(data)[1:]
    for n, cut in enumerate(cuts, 1):
        keys = {p["event_id"].split(":")[0].split("#")[0].split("@")[0]
                for c in converted(data[:cut]).values() for _t, p, _ts in c.events}
        last = lines[n - 1][1]
        if isinstance(last.get("uuid"), str):
            assert last["uuid"] in keys, (n, last["type"])
        elif last.get("type") == "summary":  # (a title before the conversation too)
            assert f"L{n}" in keys


def fresh(path: Path) -> EventStore:
    """An empty SQLite store at ``path``, copied from the once-migrated template (a test that
    makes one per cut would otherwise spend most of its time migrating)."""
    return EventStore.open(new_sqlite_store(path))


def stored(store: EventStore) -> list:
    out = []
    for info in store.sessions():
        evs = [(e.type, e.ts, e.payload) for e in store.session(info.id).events()]
        out.append((info.id, evs))
    return out


def every_cut_then_the_whole_stores_what_one_import_stores(f: Path, data: bytes) -> None:
    """Assert that importing ``data`` cut at any line (written to ``f``), then whole, stores
    what one import of the whole stores, and that a third import skips every session."""
    f.write_bytes(data)
    with fresh(f.with_name("once.db")) as store:
        import_transcript(store, str(f), "claude-code")
        once = stored(store)
    for k, cut in enumerate(line_cuts(data)):
        f.write_bytes(data[:cut])
        with fresh(f.with_name(f"cut{k}.db")) as store:
            import_transcript(store, str(f), "claude-code")
            f.write_bytes(data)
            import_transcript(store, str(f), "claude-code")
            assert stored(store) == once, cut
            again = import_transcript(store, str(f), "claude-code")
            assert {r.status for r in again.sessions} == {"skipped"} and stored(store) == once
        os.remove(f.with_name(f"cut{k}.db"))


@pytest.mark.parametrize("rel", SAMPLES)
def test_importing_any_cut_then_the_whole_stores_what_one_import_stores(rel, tmp_path):
    data = (DATA / rel).read_bytes()
    every_cut_then_the_whole_stores_what_one_import_stores(tmp_path / Path(rel).name, data)


def test_a_last_line_cut_inside_a_character_waits(tmp_path, store):
    data = (DATA / "claude-code/v2.1-interleaved-progress.jsonl").read_bytes()
    body = data.rstrip(b"\n")
    start = body.rfind(b"\n") + 1
    # inside each multi-byte character of the last line (after its first byte)
    inside = [i for i in range(start, len(body)) if 0x80 <= body[i] < 0xC0]
    assert len(inside) > 10
    f = tmp_path / "s.jsonl"
    for at in inside:
        f.write_bytes(data[:at])
        rep = import_transcript(store, str(f), "claude-code")
        assert rep.waiting
    f.write_bytes(data)
    rep = import_transcript(store, str(f), "claude-code")
    assert not rep.waiting
    with fresh(tmp_path / "once.db") as once:
        import_transcript(once, str(f), "claude-code")
        assert stored(once) == stored(store)


def test_the_2_1_interleaved_message_is_one_assistant_message_in_source_order(store):
    rel = "claude-code/v2.1-interleaved-progress.jsonl"
    import_transcript(store, str(DATA / rel), "claude-code")
    (info,) = talk(store.sessions())
    s = store.session(info.id)
    msgs = s.derive_messages()
    # (the task notification and the skill body are sent to the model: user messages with a kind)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user", "user", "assistant"]
    assert msgs[1]["content"] == "I'll list both directories."
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["toolu_01ListA", "toolu_01ListB"]
    assert msgs == s.context_at()["messages"]
    types = [e.type for e in s.events() if e.payload.get("message_id") == "msg_01Inter"]
    # the thinking block stays where it was written, before the text
    assert types == ["assistant/thinking", "assistant/message", "assistant/part", "assistant/part"]
    # one usage per API message: the largest of its lines
    from eventstore.search import usage_totals
    assert usage_totals(store)[info.id].output_tokens == 58 + 25
    assert [(r[0], r[1]) for r in _rows(store, "SELECT call_id, is_error FROM tool_calls ORDER BY call_id")] == [
        ("toolu_01ListA", 0), ("toolu_01ListB", 0)]


def _rows(store, sql):
    from conftest import db_rows
    return db_rows(store, sql)


def test_text_no_human_typed_has_a_kind_and_opens_no_turn():
    (conv,) = talk(converted((DATA / "claude-code/v2.1-interleaved-progress.jsonl").read_bytes()).values())
    users = [(p.get("kind"), p["content"] if isinstance(p["content"], str) else "")
             for t, p, _ts in conv.events if t == "user/message"]
    assert [k for k, _c in users] == [None, "task_notification", "meta"]
    assert [t for t, _p, _ts in conv.events].count("turn/start") == 1
    compact = DATA / "claude-code/v2.1-agents/subagents/agent-acompact-9f8e7d.jsonl"
    (sub,) = talk(converted(compact.read_bytes()).values())
    assert [p.get("kind") for t, p, _ts in sub.events if t == "user/message"] == ["compact_instruction"]
    assert "turn/start" not in [t for t, _p, _ts in sub.events]


def test_a_compaction_starts_the_projection_again(store):
    rel = "claude-code/v2.1-agents.jsonl"
    import_transcript(store, str(DATA / rel), "claude-code")
    s = store.session(talk(store.sessions())[0].id)
    msgs = s.derive_messages()
    assert msgs[0]["role"] == "user" and msgs[0]["content"].startswith("This session is being continued")
    assert [m["role"] for m in msgs] == ["user", "user", "assistant"]
    assert msgs == s.context_at()["messages"]
    # before the boundary, the model saw the earlier conversation; it stays in the log
    boundary = next(e.seq for e in s.events() if e.type == "compaction/boundary")
    before = s.context_at(boundary)["messages"]
    assert before[0]["content"] == "Review the parser" and len(before) == 4
    assert sum(1 for e in s.events() if e.type == "user/message") == 3


def test_late_facts_are_new_events_that_the_effective_meta_shows():
    # model: learned from the first reply; title: from a summary line whose leaf comes later;
    # rewind: the branch left behind names where the user went on.
    (main, fork) = talk(converted((DATA / "claude-code/v2.1-rewind.jsonl").read_bytes()).values())
    assert "model" not in main.meta and effective_meta(main.meta, main.events)["model"] == "claude-opus-4-6"
    assert effective_meta(main.meta, main.events)["continued_in"] == fork.session_id
    assert effective_meta(fork.meta, fork.events)["title"] == "Rename the --dry flag"
    assert fork.meta["relation"] == "fork" and main.events[fork.meta["parent_seq"]][0] == "turn/end"
    # the Task call a subagent answers: inline sidechain (both directions), agent file (parent side)
    (m, side) = talk(converted((DATA / "claude-code/v1.0-sidechain-report-last.jsonl").read_bytes()).values())
    assert side.meta["tool_call_id"] == "toolu_01Task"
    assert effective_meta(m.meta, m.events)["subagent/toolu_01Task"] == side.session_id
    assert side.events[-1][1]["content"].startswith("Report:")  # the report, the sidechain's last line
    (a,) = talk(converted((DATA / "claude-code/v2.1-agents.jsonl").read_bytes()).values())
    (sub,) = converted((DATA / "claude-code/v2.1-agents/subagents/agent-a1b2c3d4.jsonl").read_bytes(),
                       "agent-a1b2c3d4.jsonl").values()
    assert effective_meta(a.meta, a.events)["subagent/toolu_01Agent"] == sub.session_id
    assert sub.meta["parent_session"] == a.session_id


def test_after_a_rewind_the_moment_of_the_import_does_not_decide_the_branches(tmp_path):
    data = (DATA / "claude-code/v2.1-rewind.jsonl").read_bytes()
    f = tmp_path / "s.jsonl"
    results = []
    for k, cut in enumerate(line_cuts(data)):
        f.write_bytes(data[:cut])
        with fresh(tmp_path / f"{k}.db") as store:
            import_transcript(store, str(f), "claude-code")
            f.write_bytes(data)
            import_transcript(store, str(f), "claude-code")
            results.append({i.id: effective_meta({}, [(e.type, e.payload) for e in store.session(i.id).events()])
                            for i in store.sessions()})
    assert all(r == results[0] for r in results)
    (main_id, fork_id) = talk(results[0])
    assert results[0][main_id]["continued_in"] == fork_id


def summary_of(conv) -> Summary:
    s = Summary(conv.session_id, 0)
    for t, p, _ts in conv.events:
        extra = p.get("tool_call_id") if t == "tool/result" else p.get("tool_calls")
        s.state(t, extra)
    return s


@pytest.mark.parametrize("rel", SAMPLES)
def test_a_finished_session_reads_as_finished(rel):
    data = (DATA / rel).read_bytes()
    for conv in converted(data).values():  # every sample's sessions end with an answer
        assert summary_of(conv).complete, conv.session_id
    # cut after a call with no result yet: not complete (the agent is working or stopped)
    lines = data.splitlines(keepends=True)
    for n in range(1, len(lines)):
        last = json.loads(lines[n - 1])
        blocks = (last.get("message") or {}).get("content")
        if last.get("type") == "assistant" and isinstance(blocks, list) and blocks[-1].get("type") == "tool_use":
            conv = converted(b"".join(lines[:n]))
            holder = next(c for c in conv.values() if any(p.get("event_id") == last["uuid"] for _t, p, _ts in c.events))
            assert not summary_of(holder).complete


def test_repair_of_an_imported_session_does_not_fail_the_next_import(tmp_path, store):
    data = (DATA / "claude-code/v2.1-interleaved-progress.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(lines[:6]))  # tool_use A written, no result yet
    import_transcript(store, str(f), "claude-code")
    (info,) = talk(store.sessions())
    assert store.session(info.id).repair()
    f.write_bytes(data)
    rep = import_transcript(store, str(f), "claude-code")
    assert talk(rep.sessions)[0].status == "appended"
    assert {r.status for r in import_transcript(store, str(f), "claude-code").sessions} == {"skipped"}


@pytest.mark.parametrize("rel", ["claude-code/v2.1-interleaved-progress.jsonl", "claude-code/v2.1-rewind-interrupt.jsonl",
                                 "claude-code/v1.0-parallel-sidechains.jsonl"])
def test_watch_on_a_file_written_line_by_line_ends_as_one_import(tmp_path, rel):
    # Claude Code 2.1's interleaved layout (a /rewind after an interrupt too; 1.0's parallel
    # sidechains), written a line at a time with pauses while `import --watch` looks: no
    # conflict, and the log equals one import of the whole file.
    src = DATA / rel
    lines = src.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "projects"
    folder.mkdir()
    f = folder / "s.jsonl"
    f.write_bytes(b"")
    db = new_sqlite_store(tmp_path / "w.db")  # (migrated already: the watching is the point)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), "import", "--watch",
                             "--interval", "0.05", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)

    def count() -> int:
        try:
            with EventStore.open(db, readonly=True) as s:
                return sum(i.events for i in s.sessions())
        except Exception:  # noqa: BLE001 (not created yet)
            return 0

    try:
        seen = 0
        started = False  # (a snapshot before the first line naming the session waits for it)
        for line in lines:
            with open(f, "ab") as out:
                out.write(line)
            started = started or "sessionId" in json.loads(line)
            if not started and json.loads(line).get("type") != "summary":  # (a title is stored at once)
                continue
            deadline = time.monotonic() + 20
            while count() <= seen and time.monotonic() < deadline:
                time.sleep(0.02)
            now = count()
            assert now > seen  # every line is stored by the look that sees it
            seen = now
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "conflict" not in err.lower() and "differs" not in err
    with fresh(tmp_path / "once.db") as once:
        import_transcript(once, str(f), "claude-code")
        want = stored(once)
    with EventStore.open(db) as store:
        assert stored(store) == want


def test_cli_shows_the_latest_facts_and_where_the_lines_went(tmp_path):
    src = DATA / "claude-code/v2.1-rewind.jsonl"
    db = str(tmp_path / "c.db")

    def run(*args):  # in process: what the command prints is the point, not its process
        return CliRunner().invoke(cli, ["--db", db, *args])

    r = run("import", "-v", str(src))
    assert r.exit_code == 0, r.output
    went = r.stderr + r.stdout
    assert "where its lines went: assistant lines: 3 assistant/message" in went
    assert "summary lines: 1 claude/summary" in went and "user lines:" in went
    rows = {x["id"]: x["info"] for x in json.loads(run("sessions", "--json").stdout)}
    (main_id, fork_id) = talk(rows)
    assert rows[main_id]["continued_in"] == fork_id and rows[main_id]["model"] == "claude-opus-4-6"
    assert rows[fork_id]["title"] == "Rename the --dry flag" and "relation" not in rows[fork_id]


def test_the_viewer_shows_the_latest_facts_and_a_finished_session_as_complete(tmp_path):
    from starlette.testclient import TestClient

    from eventstore.web.app import create_app

    with fresh(tmp_path / "v.db") as store:
        import_transcript(store, str(DATA / "claude-code/v2.1-rewind.jsonl"), "claude-code")
        (main_id, fork_id) = [i.id for i in talk(store.sessions())]
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            deadline = time.monotonic() + 20
            while not client.get("/api/info").json()["ready"] and time.monotonic() < deadline:
                time.sleep(0.05)
            fork = client.get("/api/session", params={"session": fork_id}).json()
            main = client.get("/api/session", params={"session": main_id}).json()
    assert fork["meta"]["title"] == "Rename the --dry flag" and main["meta"]["continued_in"] == fork_id
    assert "loading" not in fork and fork["events"] > 0  # (the index's summary, not the placeholder)
    assert fork["complete"] is True and main["complete"] is True


def test_a_session_an_older_version_stored_is_a_clear_conflict(tmp_path):
    # The events of an earlier conversion (one merged assistant/message, no message_id):
    # importing the file again names the session and the seq, stores nothing, no traceback.
    src = DATA / "claude-code/v1.0-split-blocks.jsonl"
    (conv,) = talk(converted(src.read_bytes(), str(src)).values())
    old = []
    for t, p, ts in conv.events:
        if t == "assistant/part":
            continue
        old.append((t, {k: v for k, v in p.items() if k != "message_id"}, ts))
    db = tmp_path / "old.db"
    with fresh(db) as store:
        store.create_session(conv.session_id, meta=conv.meta).append_many(old)
    r = CliRunner().invoke(cli, ["--db", str(db), "import", str(src)])
    # (a clean exit: an exception the command let through would be r.exception, not SystemExit)
    assert r.exit_code != 0 and isinstance(r.exception, SystemExit) and "Traceback" not in r.stderr
    first = next(k for k, (_t, p, _ts) in enumerate(conv.events) if "message_id" in p)
    assert f"session {conv.session_id!r} is already stored with other events: seq {first} differs (payload)" in r.stderr
    with EventStore.open(db) as store:
        assert store.session(conv.session_id).next_seq() == len(old)


def test_an_agent_file_shows_the_task_call_it_answers_in_either_import_order(tmp_path):
    main = DATA / "claude-code/v2.1-agents.jsonl"
    sub = DATA / "claude-code/v2.1-agents/subagents/agent-a1b2c3d4.jsonl"
    from eventstore.io.transcripts.common import current_meta
    for k, order in enumerate([(main, sub), (sub, main)]):
        with fresh(tmp_path / f"{k}.db") as store:
            for f in order:
                import_transcript(store, str(f), "claude-code")
            ids = [i.id for i in store.sessions()]
            (agent,) = [i for i in ids if ":agent:" in i]
            (parent,) = [i for i in ids if ":" not in i]
            assert current_meta(store, agent)["tool_call_id"] == "toolu_01Agent"
            assert current_meta(store, parent)["subagent/toolu_01Agent"] == agent


@pytest.mark.parametrize("rel", ["claude-code/v2.1-agents.jsonl", "claude-code/v2.1-interleaved-progress.jsonl",
                                 "claude-code/v1.0-split-blocks.jsonl"])
def test_what_the_model_saw_before_each_request_is_the_same_in_the_viewer_and_context_at(rel, store):
    # The viewer asks the backend for the projection up to a seq (messages_json): before a
    # compaction it shows what came before it, after it only the summary and what follows.
    import_transcript(store, str(DATA / rel), "claude-code")
    s = store.session(talk(store.sessions())[0].id)
    starts = [e.seq for e in s.events() if e.type in ("step/start", "turn/start", "compaction/boundary")]
    assert len(starts) >= 3
    for seq in starts + [s.next_seq()]:
        assert json.loads(store._backend.messages_json(s.id, seq - 1)) == s.context_at(seq)["messages"], seq


def _claude_lines(sid: str, prefix: str, ts: str, summaries=()) -> bytes:
    """A small Claude Code file: ``summaries`` (``(title, leafUuid)``) first, then a prompt
    and its answer (uuids ``<prefix>1``, ``<prefix>2``) of session ``sid``."""
    common = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": sid, "version": "2.1.39"}
    lines = [{"type": "summary", "summary": title, "leafUuid": leaf} for title, leaf in summaries]
    lines.append({**common, "parentUuid": None, "type": "user", "message": {"role": "user", "content": "hi"},
                  "uuid": f"{prefix}1", "timestamp": f"{ts}:00.000Z"})
    lines.append({**common, "parentUuid": f"{prefix}1", "type": "assistant",
                  "message": {"id": f"msg_{prefix}", "role": "assistant", "model": "claude-opus-4-6",
                              "content": [{"type": "text", "text": "hello"}]},
                  "uuid": f"{prefix}2", "timestamp": f"{ts}:01.000Z"})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


@pytest.mark.parametrize("titles_first", [True, False], ids=["titles-file-first", "target-file-first"])
def test_a_summary_in_another_file_titles_the_session_of_its_leaf_in_either_import_order(
        tmp_path, backend_url, titles_first):
    # Claude Code writes a conversation's title (a summary line) at the top of a LATER
    # session's file: the session holding its leafUuid line shows it, whatever was imported
    # first; the stored events are each file's own (nothing edited, nothing added).
    from starlette.testclient import TestClient

    from eventstore.io.transcripts.common import all_info, current_meta
    from eventstore.web.app import create_app

    target = tmp_path / "target.jsonl"
    target.write_bytes(_claude_lines("target-s", "t-", "2026-03-06T10:00"))
    own = tmp_path / "own.jsonl"  # a session with a title of its own (its file's summary line)
    own.write_bytes(_claude_lines("own-s", "o-", "2026-03-06T10:30") + b'{"type":"summary","summary":"Own",'
                    b'"leafUuid":"o-2"}\n')
    titles = tmp_path / "titles.jsonl"
    titles.write_bytes(_claude_lines("titles-s", "n-", "2026-03-06T11:00", [
        ("Older title", "t-1"), ("Fix the login bug", "t-2"), ("Not this one", "o-2"),
        ("Nowhere", "not-stored-anywhere")]))
    order = [titles, target, own] if titles_first else [target, own, titles]
    with EventStore.open(backend_url) as store:
        for f in order:
            import_transcript(store, str(f), "claude-code")
        for f in order:  # again: nothing to add
            assert sum(r.events for r in import_transcript(store, str(f), "claude-code").sessions) == 0
        for f in order:  # each session holds exactly its own file's events
            for conv in convert_file(str(f), "claude-code")[0]:
                assert [(e.type, e.payload) for e in store.session(conv.session_id).events()] == \
                    [(t, p) for t, p, _ts in conv.events]
        assert current_meta(store, "target-s")["title"] == "Fix the login bug"  # the latest summary
        assert current_meta(store, "own-s")["title"] == "Own"  # its own session/info wins
        assert "title" not in current_meta(store, "titles-s")  # ("Nowhere" names no stored line)
        assert all_info(store)["target-s"]["title"] == "Fix the login bug"
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            got = {sid: client.get("/api/session", params={"session": sid}).json()["meta"]
                   for sid in ("target-s", "own-s", "titles-s")}
    assert got["target-s"]["title"] == "Fix the login bug" and got["own-s"]["title"] == "Own"
    assert "title" not in got["titles-s"] and got["target-s"]["cwd"] == "/w"
    r = CliRunner().invoke(cli, ["--db", backend_url, "sessions", "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["id"]: x["info"] for x in json.loads(r.stdout)}
    assert rows["target-s"]["title"] == "Fix the login bug" and rows["own-s"]["title"] == "Own"
    assert "title" not in rows["titles-s"]


def _leaf_kinds(sid: str) -> bytes:
    """A Claude Code file whose lines are of every kind a summary's leafUuid can name: a
    prompt (``k-1``), a thinking-only line (``k-2``), a tool_use line (``k-3``), a tool
    result (``k-4``), an answer (``k-5``) and a system line (``k-6``)."""
    common = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": sid, "version": "2.1.39"}
    msg = {"id": "msg_k1", "role": "assistant", "model": "claude-opus-4-6", "stop_reason": None}
    lines = [
        {"type": "user", "message": {"role": "user", "content": "list it"}},
        {"type": "assistant", "message": {**msg, "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]}},
        {"type": "assistant", "message": {**msg, "content": [{"type": "tool_use", "id": "toolu_k", "name": "Bash",
                                                               "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_k",
                                                                   "content": "a b"}]}},
        {"type": "assistant", "message": {**msg, "id": "msg_k2", "content": [{"type": "text", "text": "a and b"}]}},
        {"type": "system", "subtype": "stop_hook_summary", "hookCount": 0},
    ]
    out = []
    for n, x in enumerate(lines, 1):
        out.append({**common, "parentUuid": f"k-{n - 1}" if n > 1 else None, **x, "uuid": f"k-{n}",
                    "timestamp": f"2026-03-06T10:00:0{n}.000Z"})
    return b"".join(json.dumps(x).encode() + b"\n" for x in out)


@pytest.mark.parametrize("titles_first", [True, False], ids=["titles-file-first", "target-file-first"])
def test_a_file_of_summary_lines_only_is_stored_and_titles_its_leaves(tmp_path, backend_url, titles_first):
    # Claude Code writes files holding only summary lines (titles of earlier conversations):
    # they are a session of their own (<file name>:titles), `import -v` counts them, and
    # each title reaches the session holding its leaf line.
    from eventstore.io.transcripts.common import current_meta

    target = tmp_path / "target.jsonl"
    target.write_bytes(_leaf_kinds("target-s"))
    kinds = ["prompt", "thinking", "tool_use", "result", "answer", "system"]
    titles = tmp_path / "4a1d2c3b-0000-4000-8000-00000000cafe.jsonl"
    titles.write_bytes(b"".join(json.dumps({"type": "summary", "summary": f"on the {k}", "leafUuid": f"k-{n}"}).encode()
                                + b"\n" for n, k in enumerate(kinds, 1)))
    outs = []
    for f in ([titles, target] if titles_first else [target, titles]):
        r = CliRunner().invoke(cli, ["--db", backend_url, "import", "-v", str(f)])
        assert r.exit_code == 0, r.output
        outs.append(r.stdout + r.stderr)
    said = outs[0] if titles_first else outs[1]
    assert "summary lines: 6 claude/summary" in said
    with EventStore.open(backend_url) as store:
        tid = "4a1d2c3b-0000-4000-8000-00000000cafe:titles"
        evs = list(store.session(tid).events())
        assert [e.type for e in evs] == ["claude/summary"] * 6 and {e.ts for e in evs} == {0}
        assert current_meta(store, tid)["relation"] == "titles"
        got = [t for _sid, t in store._backend.summary_titles("target-s")]
        # A thinking-only line's and a tool-result line's events have suffixed keys (their
        # event ids predate titles and stay as stored): a title naming them is not matched.
        assert got == [f"on the {k}" for k in kinds if k not in ("thinking", "result")]
        assert current_meta(store, "target-s")["title"] == "on the system"
        for f in (titles, target):  # again: nothing to add
            assert sum(r.events for r in import_transcript(store, str(f), "claude-code").sessions) == 0


def _parallel_same_prompt() -> bytes:
    """A 1.0 file: a WebFetch call whose prompt is the Task prompt, then two parallel Task calls
    with the same prompt, their inline sidechains (interleaved) and the Task results."""
    common = {"userType": "external", "cwd": "/w", "sessionId": "same-p", "version": "1.0.98"}
    prompt = "Run the flaky test ten times and report"
    out = []

    def add(n, parent, type_, side=False, **kw):
        out.append({**common, "parentUuid": parent, "isSidechain": side, "type": type_, **kw, "uuid": f"p-{n}",
                    "timestamp": f"2026-03-09T08:00:{n:02d}.000Z"})

    def call(tid, name, inp):
        return {"type": "tool_use", "id": tid, "name": name, "input": inp}

    def asst(mid, *blocks):
        return {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": None,
                "content": list(blocks)}

    def res(tid, text):
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text}]}

    add(1, None, "user", message={"role": "user", "content": "check the flaky test"})
    add(2, "p-1", "assistant", message=asst("m1", call("t-web", "WebFetch", {"url": "https://x", "prompt": prompt})))
    add(3, "p-2", "user", message=res("t-web", "page"))
    add(4, "p-3", "assistant", message=asst("m2", call("t-1", "Task", {"description": "a", "prompt": prompt})))
    add(5, "p-4", "assistant", message=asst("m2", call("t-2", "Task", {"description": "b", "prompt": prompt})))
    add(6, None, "user", side=True, message={"role": "user", "content": prompt})
    add(7, None, "user", side=True, message={"role": "user", "content": prompt})
    add(8, "p-7", "assistant", side=True, message=asst("m3", {"type": "text", "text": "Report two: 10/10 passed"}))
    add(9, "p-6", "assistant", side=True, message=asst("m4", {"type": "text", "text": "Report one: 9/10 passed"}))
    add(10, "p-5", "user", message=res("t-1", "Report one: 9/10 passed"))
    add(11, "p-10", "user", message=res("t-2", "Report two: 10/10 passed"))
    add(12, "p-11", "assistant", message=asst("m5", {"type": "text", "text": "One run failed once."}))
    return b"".join(json.dumps(x).encode() + b"\n" for x in out)


def test_parallel_tasks_with_one_prompt_link_each_sidechain_to_its_own_call(tmp_path):
    # Each sidechain answers the first Task call of its prompt not answered yet (a WebFetch's
    # prompt is no Task's), at every cut as in the whole file.
    data = _parallel_same_prompt()
    whole = converted(data)
    (main, one, two) = whole.values()
    assert (one.meta["tool_call_id"], two.meta["tool_call_id"]) == ("t-1", "t-2")
    links = effective_meta(main.meta, main.events)
    assert (links["subagent/t-1"], links["subagent/t-2"]) == (one.session_id, two.session_id)
    for cut in line_cuts(data):
        for sid, conv in converted(data[:cut]).items():
            assert conv.events == whole[sid].events[:len(conv.events)] and conv.meta == whole[sid].meta, (cut, sid)
    every_cut_then_the_whole_stores_what_one_import_stores(tmp_path / "s.jsonl", data)
