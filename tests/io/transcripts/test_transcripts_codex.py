"""Codex rollouts as they are written (issue 32): any cut of a file, then the whole, stores
what one import of the whole stores; usage never goes negative; failures without an exit
code are errors; a review session's prompt reaches the projection; a finished session says
so; text no human typed has a ``kind``. The samples are tests/transcripts_data/codex, and
tests/transcripts_data/codex-cases (made for these tests: their counts are asserted here,
facts.py counts an error by exit code only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS, db_rows, new_sqlite_store

from eventstore import DatabaseError, EventStore
from eventstore.io.transcripts import codex
from eventstore.io.transcripts.common import read_lines
from eventstore.io.transcripts.importer import convert_file, import_transcript
from eventstore.search import usage_totals
from eventstore.web.index import Summary

DATA = TESTS / "transcripts_data"
ROOT = TESTS.parent
SAMPLES = (sorted((DATA / "codex").glob("*.jsonl")) + sorted((DATA / "codex-cases").glob("*.jsonl"))
           + [DATA / "bad/codex-unknown-type.jsonl"])
IDS = [p.name for p in SAMPLES]


def sample(name: str) -> Path:
    (path,) = [p for p in SAMPLES if p.name == name]
    return path


def convert(path: Path):
    (conv,) = convert_file(str(path), "codex")[0]
    return conv


def effective(meta: dict, events) -> dict:
    """The meta as the session/info events leave it (the latest value wins, null removes)."""
    out = dict(meta)
    for t, p, *_ in events:
        if t == "session/info":
            for k, v in p["info"].items():
                if v is None:
                    out.pop(k, None)
                else:
                    out[k] = v
    return out


def file_lines(path: Path) -> list[dict]:
    return [d for _n, d in read_lines(str(path)).lines]


def cuts(src: bytes) -> list[bytes]:
    """Every line boundary of ``src``, and a cut inside the first multi-byte character of
    its last line (when it has one)."""
    out = [src[:i + 1] for i, b in enumerate(src) if b == 0x0A]
    out.insert(0, b"")
    if not src.endswith(b"\n"):
        out.append(src)
    last = src.rstrip(b"\n").rfind(b"\n") + 1
    lead = next((i for i in range(last, len(src)) if src[i] >= 0xC0), None)
    if lead is not None:
        out.append(src[:lead + 1])  # the lead byte without its continuation
    return out


def stored(store: EventStore) -> list[tuple]:
    out = []
    for info in store.sessions():
        meta = json.loads(db_rows(store, "SELECT meta FROM sessions WHERE id = ?", (info.id,))[0][0])
        out.append((info.id, meta, [(e.seq, e.type, e.payload, e.ts) for e in store.session(info.id).events()]))
    return out


# --- any cut, then the whole ---------------------------------------------------------------

@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_a_prefix_converts_to_a_prefix_of_the_events(path):
    src = path.read_bytes()
    whole = convert(path)
    assert whole.held == 0
    for prefix in cuts(src):
        convs, _dropped, waiting = _convert_bytes(path, prefix)
        if not convs:
            assert not prefix.strip(b"\n") or waiting
            continue
        (conv,) = convs
        assert conv.session_id == whole.session_id and conv.meta == whole.meta
        assert conv.events == whole.events[:len(conv.events)]


def _convert_bytes(path: Path, data: bytes):
    """Convert ``data`` as the file at ``path`` would be (its name gives the id, no pipe)."""
    parsed = read_lines(str(path), data)
    return codex.convert(parsed.lines, str(path)), parsed.dropped, parsed.waiting


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_every_cut_then_the_whole_stores_what_one_whole_import_stores(path, tmp_path):
    """SQLite, every line boundary and a cut inside a multi-byte character of the last line:
    import the prefix, then the whole file, into one database: the same sessions, meta and
    events (seq, type, payload, ts) as one import of the whole file; once more adds nothing."""
    f = tmp_path / path.name
    src = path.read_bytes()
    f.write_bytes(src)
    with EventStore.open(new_sqlite_store(tmp_path / "once.db")) as s:
        import_transcript(s, str(f), "codex")
        once = stored(s)
    assert once and once[0][2]
    for k, prefix in enumerate(cuts(src)):
        with EventStore.open(new_sqlite_store(tmp_path / f"cut{k}.db")) as s:
            f.write_bytes(prefix)
            rep = import_transcript(s, str(f), "codex")
            assert rep.waiting == (prefix != b"" and not prefix.endswith(b"\n"))
            f.write_bytes(src)
            import_transcript(s, str(f), "codex")
            assert stored(s) == once, f"cut after {len(prefix)} bytes"
            (again,) = import_transcript(s, str(f), "codex").sessions
            assert (again.status, again.events) == ("skipped", 0)


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_importing_every_line_as_it_is_written_stores_one_whole_import(path, tmp_path, store):
    """Both backends: the file written line by line (and the last line in two pieces cut
    inside a character), imported after each write, never conflicts and ends with the
    events of one whole import."""
    src = path.read_bytes()
    f = tmp_path / path.name
    for prefix in sorted(set(cuts(src)), key=len):
        f.write_bytes(prefix)
        import_transcript(store, str(f), "codex")
    f.write_bytes(src)
    import_transcript(store, str(f), "codex")
    grown = stored(store)
    with EventStore.open(new_sqlite_store(tmp_path / "once.db")) as once:
        import_transcript(once, str(f), "codex")
        assert grown == stored(once)


def test_watch_of_a_rollout_written_line_by_line_ends_as_one_whole_import(tmp_path, backend_url):
    """A real ``import --watch`` process while the rollout is written line by line (each
    line once the watcher stored the one before; the last line in two pieces cut inside a
    character): no conflict, and the events of one whole import."""
    path = sample("rollout-0.120-aborted-turn.jsonl")
    src = path.read_bytes()
    folder = tmp_path / "sessions"
    folder.mkdir()
    f = folder / path.name
    f.write_bytes(b"")
    sid = convert(path).session_id
    EventStore.open(backend_url).close()  # migrated here, where Alembic is loaded already: the watching is the point
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", backend_url, "import", "--watch",
                             "--interval", "0.05", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def stored_events() -> int:
        try:
            with EventStore.open(backend_url, readonly=True) as s:
                return next((i.events for i in s.sessions() if i.id == sid), 0)
        except DatabaseError:  # not created yet
            return 0

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 30
        while stored_events() != n:
            assert time.monotonic() < deadline and proc.poll() is None, (n, stored_events())
            time.sleep(0.02)

    try:
        for prefix in sorted(set(cuts(src)), key=len)[1:]:
            with open(f, "ab") as out:
                out.write(prefix[f.stat().st_size:])
            if prefix.endswith(b"\n"):
                wait_for(len(_convert_bytes(path, prefix)[0][0].events))
        with open(f, "ab") as out:
            out.write(src[f.stat().st_size:])
        wait_for(len(convert(path).events))
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "conflict" not in err and "differs" not in err, err
    assert "sessions: 1 (1 new, 0 appended)" in out, out
    with EventStore.open(backend_url, readonly=True) as s:
        watched = [(e.type, e.payload, e.ts) for e in s.session(sid).events()]
    assert watched == convert(path).events


# --- usage ---------------------------------------------------------------------------------

def real_totals(path: Path) -> dict:
    """The sum of the real increases of the cumulative token counters: each total minus the
    one before, a total lower than the one before being a counter started again at zero."""
    keys = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
    base, last = dict.fromkeys(keys, 0), None
    for d in file_lines(path):
        p = d.get("payload") or {}
        if d.get("type") == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            now = {k: p["info"]["total_token_usage"].get(k, 0) for k in keys}
            if last is not None and any(now[k] < last[k] for k in keys):
                base = {k: base[k] + last[k] for k in keys}
            last = now
    return {k: base[k] + (last or dict.fromkeys(keys, 0))[k] for k in keys}


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_usage_is_never_negative_and_sums_to_the_real_increases(path):
    usages = [p["usage"] for t, p, _ts in convert(path).events if "usage" in p]
    for u in usages:
        assert all(v >= 0 for k, v in u.items() if k.endswith("_tokens")), u
    want = real_totals(path)
    assert sum(u["output_tokens"] for u in usages) == want["output_tokens"]
    assert sum(u["input_tokens"] + u["cache_read_tokens"] for u in usages) == want["input_tokens"]
    assert sum(u["cache_read_tokens"] for u in usages) == want["cached_input_tokens"]
    assert sum(u["reasoning_tokens"] for u in usages) == want["reasoning_output_tokens"]


def test_a_counter_that_starts_again_from_zero_is_a_new_base(store):
    path = sample("rollout-0.40-counter-reset.jsonl")
    counts = [p for t, p, _ts in convert(path).events if t == "codex/token_count"]
    assert [p["usage"]["output_tokens"] for p in counts] == [50, 10]
    assert [p["usage"]["input_tokens"] for p in counts] == [200, 200]  # uncached: 1000 - 800, 300 - 100
    assert [p.get("counter_restart", False) for p in counts] == [False, True]
    import_transcript(store, str(path), "codex")
    (totals,) = usage_totals(store).values()
    assert (totals.responses, totals.output_tokens, totals.input_tokens, totals.cache_read_tokens) == (2, 60, 400, 900)


def test_a_counter_a_line_leaves_out_is_not_a_restart():
    def count(**total):
        return {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": total}}}
    (conv,) = codex.convert(lines_of(
        META, count(input_tokens=100, cached_input_tokens=60, output_tokens=10),
        count(input_tokens=150, output_tokens=12),  # no cached_input_tokens: unchanged, not zero
        count(input_tokens=20, cached_input_tokens=0, output_tokens=2),  # started again
    ), "x.jsonl")
    usages = [p["usage"] for t, p, _ts in conv.events if "usage" in p]
    assert [(u["input_tokens"], u["cache_read_tokens"], u["output_tokens"]) for u in usages] == [
        (40, 60, 10), (50, 0, 2), (20, 0, 2)]
    assert [p.get("counter_restart", False) for t, p, _ts in conv.events if t == "codex/token_count"] == [
        False, False, True]


# --- failures without an exit code -------------------------------------------------------------

ERRORS = {
    "rollout-0.40-failures-without-exit-code.jsonl": {
        "call_SbxDeny0000000000000001": True,  # "failed in sandbox ..."
        "call_Reject00000000000000002": True,  # "exec command rejected by user"
        "call_PatchNo0000000000000003": True,  # "patch rejected by user"
        "call_PatchBad000000000000004": True,  # "apply_patch verification failed: ..."
        "call_HeadOk0000000000000005": False,  # exit code 0 in the JSON metadata
    },
    "rollout-0.120-failed-calls-telemetry.jsonl": {
        "call_Lint000000000000000001": True,  # "Process exited with code 2" in the header
        "call_Patch00000000000000002": True,  # no exit code; patch_apply_end said success: false
        "call_Head000000000000000003": False,  # no exit code; exec_command_end said 0
    },
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_failures_without_an_exit_code_are_errors(name, store):
    path = sample(name)
    results = {p["tool_call_id"]: p["is_error"] for t, p, _ts in convert(path).events if t == "tool/result"}
    assert results == ERRORS[name]
    (r,) = import_transcript(store, str(path), "codex").sessions
    rows = db_rows(store, "SELECT call_id, is_error FROM tool_calls WHERE session_id = ?", (r.session_id,))
    assert {c: bool(e) for c, e in rows} == ERRORS[name]


@pytest.mark.parametrize("output, code, failed", [
    ('{"output":"x","metadata":{"exit_code":1}}', 1, False),
    ("Exit code: 2\nWall time: 0 seconds\nOutput:\n", 2, False),
    ("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 3\nOutput:\nok\n", 3, False),
    # the words in the command's own output are not the header's
    ("Chunk ID: 1\nWall time: 0.1 seconds\nOutput:\nProcess exited with code 3\n", None, False),
    ("Plan updated", None, False),
    ("failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, exit code: 1", None, True),
    ("exec command rejected by user", None, True),
    ("patch rejected: writing outside of the project; rejected by user approval settings", None, True),
    ("apply_patch verification failed: invalid hunk at line 3", None, True),
    ("execution error: Io(Os { code: 2 })", None, True),
    ("failed to parse function arguments: missing field `command`", None, True),
    ("aborted", None, True),
    ("the tests aborted at test_x; the patch rejected by user earlier was re-applied", None, False),
    ({"content": "denied", "success": False}, None, True),
    ({"content": "fine", "success": True}, None, False),
    ([{"type": "input_text", "text": "aborted"}], None, False),
])
def test_exit_codes_and_failure_texts(output, code, failed):
    assert codex.exit_code(output) == code
    assert codex.failure(output) is failed


# --- prompts: the review session, and no prompt counted twice -----------------------------------

def prompts(events) -> list[str]:
    return [p["content"] for t, p, *_ in events if t == "user/message" and "kind" not in p]


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_each_prompt_is_one_user_message_and_opens_one_turn(path):
    events = convert(path).events
    said = [d["payload"]["message"] for d in file_lines(path)
            if d.get("type") == "event_msg" and d["payload"].get("type") == "user_message"]
    assert prompts(events) == said  # one per event_msg user_message, which Codex writes once per prompt
    assert [t for t, _p, _ts in events].count("turn/start") == len(said)


def test_a_review_sessions_prompt_is_in_the_projection(store):
    path = sample("rollout-0.120-review.jsonl")
    (r,) = import_transcript(store, str(path), "codex").sessions
    messages = store.session(r.session_id).derive_messages()
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[0].startswith("<environment_context>")
    assert users[1:] == ["Review the current code changes (staged, unstaged, and untracked files) and provide "
                         "prioritized findings."]
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "tool", "assistant"]
    assert json.loads(messages[-1]["content"])["overall_correctness"] == "patch is correct"


@pytest.mark.parametrize("name", ["rollout-0.40-shell.jsonl", "rollout-0.66-apply-patch.jsonl"])
def test_a_prompt_written_twice_is_projected_once(name, store):
    (r,) = import_transcript(store, str(sample(name)), "codex").sessions
    users = [m["content"] for m in store.session(r.session_id).derive_messages() if m["role"] == "user"]
    assert len(users) == len(set(users)) == 3  # the environment and two prompts


def lines_of(*objs: dict) -> list[tuple[int, dict]]:
    return list(enumerate(objs, 1))


META = {"type": "session_meta", "payload": {"id": "0199aaaa-0000-7000-8000-000000000001", "cwd": "/w",
                                            "cli_version": "0.120.0"}}


ITEM = {"type": "response_item", "payload": {"type": "message", "role": "user",
                                             "content": [{"type": "input_text", "text": "hi"}]}}
EVENT = {"type": "event_msg", "payload": {"type": "user_message", "message": "hi"}}
CONTEXT = {"type": "turn_context", "payload": {"model": "m1"}}


@pytest.mark.parametrize("order", [(ITEM, EVENT, CONTEXT), (EVENT, ITEM, CONTEXT), (ITEM, CONTEXT, EVENT),
                                   (CONTEXT, EVENT, ITEM)], ids=["item-event", "event-item", "item-context-event",
                                                                  "context-event-item"])
def test_a_prompt_is_one_prompt_whichever_of_its_two_lines_comes_first(order):
    (conv,) = codex.convert(lines_of(
        META, *order,
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": "hello"}]}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "again"}},
    ), "x.jsonl")
    types = [t for t, _p, _ts in conv.events]
    assert prompts(conv.events) == ["hi", "again"] and types.count("turn/start") == 2
    # the other line of the prompt is kept, not projected again
    assert types.count("codex/message") + types.count("codex/user_message") == 1


# --- a finished session, an interrupted one -----------------------------------------------------

def state(events) -> tuple[str | None, bool]:
    """(the ``ended`` the session/info events leave, the sessions page's ``complete``)."""
    s = Summary("x", 0.0)
    for t, p, _ts in events:
        s.state(t, p.get("tool_calls") if t in ("assistant/message", "assistant/part") else p.get("tool_call_id"))
    return effective({}, events).get("ended"), s.complete


@pytest.mark.parametrize("name", ["rollout-0.120-review.jsonl", "rollout-0.120-compaction.jsonl",
                                  "rollout-0.120-failed-calls-telemetry.jsonl", "rollout-0.120-aborted-turn.jsonl"])
def test_a_session_whose_task_completed_reads_complete(name):
    events = convert(sample(name)).events
    assert state(events) == ("complete", True)
    assert events[-2][0] == "turn/end" and "aborted" not in events[-2][1]


def test_an_aborted_turn_reads_interrupted_until_the_next_prompt():
    path = sample("rollout-0.120-aborted-turn.jsonl")
    src = path.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(src) if b'"turn_aborted"' in line)
    for upto in (at + 1, at + 2, at + 3):  # the abort; the <turn_aborted> marker; the next task_started
        conv = _convert_bytes(path, b"".join(src[:upto]))[0][0]
        assert state(conv.events) == ("interrupted", False), upto
    events = convert(path).events
    # The call the abort cut off is answered "aborted" before the next user text, as Codex
    # answers it in its next request; the turn ends with the abort's time.
    (cut,) = [p for t, p, _ts in events if t == "tool/result" and p.get("synthetic")]
    assert (cut["tool_call_id"], cut["content"], cut["is_error"]) == ("call_Slow000000000000000001", "aborted", True)
    (end, ts) = [(p, ts) for t, p, ts in events if t == "turn/end"][0]
    assert end == {"turn": 1, "aborted": "interrupted", "event_id": f"L{at + 1}:turn-end"}
    assert ts == [ts_ for t, _p, ts_ in events if t == "codex/turn_aborted"][0]
    marker = [p for t, p, _ts in events if t == "user/message" and p.get("kind") == "interrupt"]
    assert marker and marker[0]["content"].startswith("<turn_aborted>")


def test_a_pending_call_at_the_end_reads_interrupted():
    path = sample("rollout-0.120-failed-calls-telemetry.jsonl")
    src = path.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(src) if b'"function_call"' in line)
    conv = _convert_bytes(path, b"".join(src[:at + 1]))[0][0]
    assert state(conv.events) == (None, False)


def test_a_0_40_abort_ends_its_turn_at_the_next_prompt():
    events = convert(sample("rollout-0.40-shell.jsonl")).events
    ends = [p for t, p, _ts in events if t == "turn/end"]
    assert ends == [{"turn": 1, "aborted": "interrupted", "event_id": "L38:turn-end"}]
    assert effective({}, events).get("ended") is None  # 0.40 writes no task_complete: the reader decides


# --- the model, and text no human typed ---------------------------------------------------------------

def test_the_model_is_a_session_info_whenever_it_changes():
    (conv,) = codex.convert(lines_of(
        META,
        {"type": "turn_context", "payload": {"model": "m1"}},
        {"type": "turn_context", "payload": {"model": "m1"}},
        {"type": "turn_context", "payload": {"model": "m2"}},
    ), "x.jsonl")
    assert "model" not in conv.meta
    assert [p["info"] for t, p, _ts in conv.events if t == "session/info"] == [{"model": "m1"}, {"model": "m2"}]
    assert effective(conv.meta, conv.events)["model"] == "m2"


def test_a_thread_name_is_the_sessions_title():
    (conv,) = codex.convert(lines_of(
        META,
        {"type": "event_msg", "payload": {"type": "thread_name_updated", "thread_id": "t", "thread_name": " Parser "}},
        {"type": "event_msg", "payload": {"type": "thread_name_updated", "thread_name": "Refactor the parser"}},
    ), "x.jsonl")
    assert effective(conv.meta, conv.events)["title"] == "Refactor the parser"
    assert [t for t, _p, _ts in conv.events].count("codex/thread_name_updated") == 2  # the lines kept


@pytest.mark.parametrize("text, kind", [
    ("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", "environment"),
    ("<user_instructions>\nbe brief\n</user_instructions>", "environment"),
    ("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nx\n</INSTRUCTIONS>", "environment"),
    ("<turn_aborted>\n  <reason>interrupted</reason>\n</turn_aborted>", "interrupt"),
    ("<user_shell_command>\n<command>ls</command>\n<result>a</result>\n</user_shell_command>", "command_output"),
    ("<user_action>\n  <action>review</action>\n</user_action>", "review"),
    ("Another language model started to solve this problem and produced a summary of its thinking process. "
     "...\nsummary", "compact_summary"),
    ("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary", "compact_instruction"),
    ("please read the <environment_context> docs", None),
])
def test_text_no_human_typed_has_a_kind_and_opens_no_turn(text, kind):
    (conv,) = codex.convert(lines_of(META, {"type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}), "x.jsonl")
    (msg,) = [p for t, p, _ts in conv.events if t == "user/message"]
    assert msg.get("kind") == kind
    assert [t for t, _p, _ts in conv.events].count("turn/start") == (kind is None)


def test_a_compaction_is_a_boundary_then_what_replaced_the_history():
    events = convert(sample("rollout-0.120-compaction.jsonl")).events
    at = [t for t, _p, _ts in events].index("compaction/boundary")
    assert events[at][1]["reason"] == "compaction" and events[at][1]["source"]["replacement_items"] == 4
    after = [(t, p.get("kind")) for t, p, _ts in events[at + 1:at + 5]]
    assert after == [("user/message", "developer"), ("user/message", "environment"),
                     ("user/message", "compact_history"), ("user/message", "compact_summary")]
    assert [t for t, _p, _ts in events].count("turn/start") == 1  # the compaction opens no turn
    # Older versions write the summary alone.
    (conv,) = codex.convert(lines_of(META, {"type": "compacted", "payload": {"message": "the summary"}}), "x.jsonl")
    assert [(t, p.get("kind"), p.get("content")) for t, p, _ts in conv.events[1:]] == [
        ("compaction/boundary", None, None), ("user/message", "compact_summary", "the summary")]


def test_the_items_of_one_model_response_are_a_message_and_its_parts():
    """Reasoning, a text and two parallel calls, written one after the other, are one
    response: one assistant/message and parts of its message_id (the projection folds
    them); the next input (a tool output) ends it."""
    item = {"type": "response_item"}
    (conv,) = codex.convert(lines_of(
        META,
        {"type": "turn_context", "payload": {"model": "m1"}},
        {**item, "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}},
        {**item, "payload": {"type": "message", "role": "assistant",
                             "content": [{"type": "output_text", "text": "I'll look."}]}},
        {**item, "payload": {"type": "function_call", "name": "a", "arguments": "{}", "call_id": "A"}},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "think"}},
        {**item, "payload": {"type": "custom_tool_call", "name": "b", "input": "x", "call_id": "B"}},
        {**item, "payload": {"type": "function_call_output", "call_id": "A", "output": "Exit code: 0\nOutput:\n"}},
        {**item, "payload": {"type": "custom_tool_call_output", "call_id": "B", "output": "aborted"}},
        {**item, "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}},
    ), "x.jsonl")
    got = [(t, p.get("message_id"), p.get("content"), [c["id"] for c in p.get("tool_calls", [])])
           for t, p, _ts in conv.events if t.startswith("assistant/") or t == "tool/result"]
    assert got == [("assistant/thinking", "L3", None, []), ("assistant/message", "L3", "I'll look.", []),
                   ("assistant/part", "L3", None, ["A"]), ("assistant/part", "L3", None, ["B"]),
                   ("tool/result", None, "Exit code: 0\nOutput:\n", []), ("tool/result", None, "aborted", []),
                   ("assistant/message", "L10", "ok", [])]


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_every_line_is_an_event_of_its_own_key_and_keys_are_unique(path):
    """Nothing is dropped without a trace: line N is the event keyed ``LN`` (what the mapping
    did not use of it in that event's ``source``); the events a line adds have keys of it."""
    events = convert(path).events
    keys = [p["event_id"] for _t, p, _ts in events]
    assert len(keys) == len(set(keys))
    numbers = [n for n, _d in read_lines(str(path)).lines]
    assert {f"L{n}" for n in numbers} <= set(keys)
    assert all(k.split(":")[0].split("#")[0] in {f"L{n}" for n in numbers} for k in keys)
