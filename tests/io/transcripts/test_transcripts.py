"""Importing Claude Code and Codex transcripts (tests/transcripts_data, copied from
shared/transcripts; expected.json holds the counts its facts.py computes). The tests that
store something run on every backend (the ``store`` and ``backend_url`` fixtures)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TESTS, db_rows, new_sqlite_store, wait_until

from eventstore import DatabaseError, EventStore, ImportConflict, InvalidJSONL
from eventstore.cli import cli
from eventstore.io.transcripts import claude_code, codex
from eventstore.io.transcripts.common import effective_meta, read_lines
from eventstore.io.transcripts.detect import detect_file
from eventstore.io.transcripts.importer import convert_file, import_transcript

# Not under tests/data: the tests that import that whole folder expect eventstore files only.
DATA = TESTS / "transcripts_data"
EXPECTED = json.loads((DATA / "expected.json").read_text())
ROOT = TESTS.parent


def convert(rel: str):
    path = str(DATA / rel)
    return convert_file(path, EXPECTED[rel]["format"] if rel in EXPECTED else detect_file(path))[0]


def conversation(convs) -> list:
    """The converted sessions but the one of a file's leading summary lines (``:titles``)."""
    return [c for c in convs if c.meta.get("relation") != "titles"]


def counts(sessions) -> dict:
    """The facts.py numbers, counted on converted (or stored) sessions."""
    c = {"user_prompts": 0, "subagent_prompts": 0, "tool_call_ids": [], "results": set(), "errors": set(),
         "output_tokens": 0}
    for meta, events in sessions:
        sub = meta.get("relation") == "subagent"
        for t, p in events:
            if t == "user/message" and "kind" not in p:
                c["subagent_prompts" if sub else "user_prompts"] += 1
            elif t in ("assistant/message", "assistant/part"):
                c["tool_call_ids"] += [call["id"] for call in p.get("tool_calls", [])]
            elif t == "tool/result" and not p.get("synthetic"):
                c["results"].add(p["tool_call_id"])
                if p["is_error"]:
                    c["errors"].add(p["tool_call_id"])
            if isinstance(p.get("usage"), dict):
                c["output_tokens"] += p["usage"]["output_tokens"]
    return c


def stored(store: EventStore):
    out = []
    for info in store.sessions():
        s = store.session(info.id)
        meta = json.loads(db_rows(store, "SELECT meta FROM sessions WHERE id = ?", (info.id,))[0][0])
        out.append((meta, [(e.type, e.payload) for e in s.events()]))
    return out


def check_counts(c: dict, e: dict) -> None:
    assert c["user_prompts"] == e["user_prompts"]
    assert c["subagent_prompts"] == e.get("subagent_prompts", 0)
    assert sorted(c["tool_call_ids"]) == e["tool_call_ids"]
    assert len(c["results"] & set(c["tool_call_ids"])) == e["tool_calls_with_result"]
    assert len(c["errors"]) == e["tool_results_error"]
    assert c["output_tokens"] == e["output_tokens"]


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_counts_equal_expected(rel):
    convs = convert(rel)
    check_counts(counts([(c.meta, [(t, p) for t, p, _ts in c.events]) for c in convs]), EXPECTED[rel])


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_counts_equal_expected_once_stored(rel, store):
    rep = import_transcript(store, str(DATA / rel), EXPECTED[rel]["format"])
    assert all(r.status == "imported" for r in rep.sessions)
    check_counts(counts(stored(store)), EXPECTED[rel])
    # (the summary lines before the conversation are a session of their own, listed first)
    main = [i.id for i in store.sessions() if not i.id.endswith(":titles")]
    assert main[0].startswith(EXPECTED[rel]["session_ids"][0])


def test_main_with_its_subagent_file_equals_expected(store):
    e = EXPECTED["claude-code/v2.1-main.jsonl"]["with_subagents"]
    for rel in ["claude-code/v2.1-main.jsonl", *EXPECTED["claude-code/v2.1-main.jsonl"]["subagent_files"]]:
        import_transcript(store, str(DATA / rel), "claude-code")
    c = counts(stored(store))
    check_counts(c, e)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_every_event_has_a_unique_key_and_a_time(rel):
    for conv in convert(rel):
        keys = [p["event_id"] for _t, p, _ts in conv.events]
        assert len(keys) == len(set(keys))
        # (a summary line has no time: the events of the leading ones have ts 0)
        titles = conv.meta.get("relation") == "titles"
        assert all(ts == 0 if titles else ts > 1.7e9 for _t, _p, ts in conv.events)


def test_split_lines_of_one_api_message_are_one_message(store):
    # v1.0: message ...MZDYOi is written as three lines (thinking, text, tool_use): a
    # thinking event, the message (its text), a part (its tool call), stored as they come;
    # the projection folds them into one assistant message.
    rel = "claude-code/v1.0-split-blocks.jsonl"
    lines = read_lines(str(DATA / rel)).lines
    ids = [d["message"]["id"] for _n, d in lines if d.get("type") == "assistant"]
    (main,) = conversation(convert(rel))
    messages = [p for t, p, _ts in main.events if t == "assistant/message"]
    assert len(messages) == len(set(ids)) == EXPECTED[rel]["assistant_messages"]
    first = messages[0]
    of_first = [(t, p) for t, p, _ts in main.events if p.get("message_id") == ids[0]]
    assert [t for t, _p in of_first] == ["assistant/thinking", "assistant/message", "assistant/part"]
    assert first["content"] and "tool_calls" not in first and len(of_first[2][1]["tool_calls"]) == 1
    # each line's source is kept with its own event
    assert [p["source"]["uuid"] if "uuid" in p.get("source", {}) else p["source"]["line"]["uuid"]
            for _t, p in of_first] == [d["uuid"] for _n, d in lines if d.get("message", {}).get("id") == ids[0]]
    # usage: the per-line rises add up to the largest line's (the larger final output_tokens)
    outs = [d["message"]["usage"]["output_tokens"] for _n, d in lines
            if d.get("type") == "assistant" and d["message"]["id"] == ids[0]]
    assert sum(p["usage"]["output_tokens"] for _t, p in of_first if "usage" in p) == max(outs)
    assert len(set(outs)) > 1
    args = json.loads(of_first[2][1]["tool_calls"][0]["function"]["arguments"])
    assert isinstance(args, dict) and args
    # folded: one assistant message with the text and the call, then its result
    import_transcript(store, str(DATA / rel), "claude-code")
    projected = store.session(main.session_id).derive_messages()
    folded = [m for m in projected if m["role"] == "assistant"]
    assert len(folded) == len(set(ids))
    assert folded[0]["content"] == first["content"] and folded[0]["tool_calls"] == of_first[2][1]["tool_calls"]
    assert projected == store.session(main.session_id).context_at()["messages"]


def test_a_rewind_is_a_fork_session_naming_its_parent():
    # The branch written first keeps the session (its events are stored as they come); the
    # prompt written later under the same node starts the fork, where the user went on, and
    # the first branch is told so by a session/info event.
    rel = "claude-code/v2.0-snapshots-rewind.jsonl"
    e = EXPECTED[rel]
    main, fork = convert(rel)
    assert main.session_id == e["session_ids"][0]
    assert fork.session_id.startswith(main.session_id + ":fork:")
    fork_prompts = [p for t, p, _ts in fork.events if t == "user/message" and "kind" not in p]
    main_prompts = [p for t, p, _ts in main.events if t == "user/message" and "kind" not in p]
    assert fork.events[-1][1]["event_id"] == e["active_leaf_uuid"]  # the newest leaf ends the fork
    assert len(main_prompts) + len(fork_prompts) > e["active_branch_user_prompts"] >= len(fork_prompts)
    assert fork.meta["relation"] == "fork" and fork.meta["parent_session"] == main.session_id
    at = main.events[fork.meta["parent_seq"]][1]
    assert at["event_id"] == fork.meta["parent_uuid"]  # the node both prompts answer
    assert fork.events[1][0] == "user/message" and "kind" not in fork.events[1][1]
    assert effective_meta(main.meta, main.events)["continued_in"] == fork.session_id


def test_side_branches_that_are_not_forks_stay_in_the_conversation():
    # 2.1: each tool result hangs off the assistant line holding its tool_use, progress lines
    # too; parallel calls make side branches. None of them is a fork.
    rel = "claude-code/v2.1-main/subagents/agent-0a1b2c3.jsonl"
    (conv,) = convert(rel)
    calls = [c["id"] for t, p, _ts in conv.events if t in ("assistant/message", "assistant/part")
             for c in p.get("tool_calls", [])]
    results = [p["tool_call_id"] for t, p, _ts in conv.events if t == "tool/result"]
    assert sorted(calls) == sorted(results) == EXPECTED[rel]["tool_call_ids"]
    # every result after its call, before the next model response
    seen = set()
    for t, p, _ts in conv.events:
        if t in ("assistant/message", "assistant/part"):
            assert not (set(c["id"] for c in p.get("tool_calls", [])) & seen)
            seen |= {c["id"] for c in p.get("tool_calls", [])}
        if t == "tool/result":
            assert p["tool_call_id"] in seen
    lines = read_lines(str(DATA / rel)).lines
    assert len([1 for t, _p, _ts in conv.events if t == "claude/progress"]) == EXPECTED[rel]["line_types"]["progress"]
    assert len(lines) == EXPECTED[rel]["lines"]


def test_compaction_continues_the_session_across_the_boundary():
    rel = "claude-code/v2.1-main.jsonl"
    (main,) = conversation(convert(rel))
    types = [t for t, _p, _ts in main.events]
    systems = [p["source"].get("subtype") for t, p, _ts in main.events if t == "claude/system"]
    assert "compact_boundary" in systems
    kinds = [p.get("kind") for t, p, _ts in main.events if t == "user/message"]
    assert "compact_summary" in kinds
    assert types.count("turn/start") == EXPECTED[rel]["user_prompts"]
    # turn_duration closes the turn: each turn/start has its turn/end
    assert types.count("turn/end") == 3 and types[-1] == "turn/end"


def test_inline_sidechain_is_a_session_of_its_own():
    rel = "claude-code/v1.0-inline-sidechain.jsonl"
    main, side = convert(rel)
    assert side.session_id.startswith(main.session_id + ":sidechain:")
    assert side.meta["relation"] == "subagent" and side.meta["parent_session"] == main.session_id
    call = main.events[side.meta["parent_seq"]][1]
    assert side.meta["tool_call_id"] in [c["id"] for c in call["tool_calls"]]
    assert call["tool_calls"][0]["function"]["name"] == "Task"
    assert not any(p.get("source", {}).get("isSidechain") for _t, p, _ts in main.events if isinstance(p.get("source"), dict))


def test_subagent_file_is_a_session_naming_its_parent():
    (conv,) = convert("claude-code/v2.1-main/subagents/agent-0a1b2c3.jsonl")
    assert conv.session_id == "e2c84b1f-6d3a-4a07-b5e9-93f1c0a7d258:agent:0a1b2c3"
    assert conv.meta["parent_session"] == "e2c84b1f-6d3a-4a07-b5e9-93f1c0a7d258"
    assert conv.meta["agent_id"] == "0a1b2c3"


def test_meta_holds_cwd_branch_model_version():
    (conv,) = convert("claude-code/v2.1-main.jsonl")
    assert "model" not in conv.meta  # the first line is a prompt: the model is learned later
    m = effective_meta(conv.meta, conv.events)
    assert m["source"] == "claude-code" and m["git_branch"] == "dry-run-flag" and m["model"] == "claude-opus-4-6"
    assert m["cwd"] and m["version"] == "2.1.39"
    (conv,) = convert("codex/rollout-0.66-apply-patch.jsonl")
    # Codex names the model in turn_context lines only: a session/info says it (Codex's meta is the first line's)
    assert [p["info"] for t, p, _ts in conv.events if t == "session/info"][0] == {"model": "gpt-5.1-codex"}
    assert conv.meta["version"] == "0.66.0" and "model" not in conv.meta
    assert conv.meta["git_branch"] == "docs-links" and conv.meta["agent_source"] == "cli"
    (conv,) = conversation(convert("claude-code/v1.0-split-blocks.jsonl"))
    assert "git_branch" not in conv.meta  # 1.0.51 wrote none


def test_each_event_keeps_what_the_mapping_did_not_use():
    (conv,) = conversation(convert("claude-code/v1.0-split-blocks.jsonl"))
    lines = {d.get("uuid"): d for _n, d in read_lines(str(DATA / "claude-code/v1.0-split-blocks.jsonl")).lines}
    failed = [p for t, p, _ts in conv.events if t == "tool/result" and p["is_error"] and not p.get("synthetic")][0]
    src_line = lines[failed["event_id"].split(":")[0]]
    assert failed["source"]["toolUseResult"] == src_line["toolUseResult"]
    assert failed["source"]["parentUuid"] == src_line["parentUuid"]
    msg = [p for t, p, _ts in conv.events if t == "assistant/message"][0]
    assert msg["source"]["requestId"] and msg["source"]["uuid"]
    part = [p for t, p, _ts in conv.events if t == "assistant/part"][0]
    assert part["source"]["message"]["stop_reason"] == "tool_use"
    assert part["source"]["message"]["usage"]["output_tokens"]  # each line's own usage
    (cx,) = convert("codex/rollout-0.40-shell.jsonl")
    ctx = [p for t, p, _ts in cx.events if t == "codex/turn_context"][0]
    assert ctx["source"]["approval_policy"] == "on-request"
    meta = [p for t, p, _ts in cx.events if t == "codex/session_meta"][0]
    assert "instructions" in meta["source"]
    thinking = [p for t, p, _ts in cx.events if t == "assistant/thinking"][0]
    assert thinking["thinking"] and thinking["source"]["encrypted_content"]


def test_interrupted_tool_call_gets_the_result_claude_code_sends():
    (conv,) = conversation(convert("claude-code/v1.0-split-blocks.jsonl"))
    (missing,) = EXPECTED["claude-code/v1.0-split-blocks.jsonl"]["tool_calls_without_result"]
    (synthetic,) = [p for t, p, _ts in conv.events if t == "tool/result" and p.get("synthetic")]
    assert synthetic["tool_call_id"] == missing and synthetic["is_error"]
    assert synthetic["content"].startswith("[Request interrupted by user")


def test_unknown_line_types_become_events_of_their_own():
    (conv,) = convert("bad/codex-unknown-type.jsonl")
    future = [p for t, p, _ts in conv.events if t == "codex/future_thing"]
    assert len(future) == 2 and all(p["source"] for p in future)
    types = {t for t, _p, _ts in conv.events}
    assert {"codex/task_started", "codex/task_complete"} <= types
    lines = [d for _n, d in read_lines(str(DATA / "claude-code/v2.1-main.jsonl")).lines]
    lines.insert(3, {"type": "worktree-state", "sessionId": lines[2]["sessionId"], "state": {"x": 1}})
    (conv,) = conversation(claude_code.convert(list(enumerate(lines, 1)), "x.jsonl"))
    (ev,) = [p for t, p, _ts in conv.events if t == "claude/worktree-state"]
    assert ev["source"]["state"] == {"x": 1}


def test_codex_cumulative_token_counts_become_per_response_deltas():
    rel = "codex/rollout-0.66-apply-patch.jsonl"
    (conv,) = convert(rel)
    counts_ = [p for t, p, _ts in conv.events if t == "codex/token_count"]
    assert len(counts_) == EXPECTED[rel]["payload_types"]["event_msg:token_count"]
    with_usage = [p["usage"] for p in counts_ if "usage" in p]
    assert len(with_usage) < len(counts_)  # info null and repeated totals carry none
    assert all(u["output_tokens"] > 0 or u["input_tokens"] > 0 for u in with_usage)
    last = [d for _n, d in read_lines(str(DATA / rel)).lines
            if d.get("type") == "event_msg" and d["payload"].get("type") == "token_count" and d["payload"]["info"]][-1]
    total = last["payload"]["info"]["total_token_usage"]
    assert sum(u["output_tokens"] for u in with_usage) == total["output_tokens"]
    assert sum(u["input_tokens"] + u["cache_read_tokens"] for u in with_usage) == total["input_tokens"]
    steps = {(u["turn"], u["step"]) for u in with_usage}
    assert len(steps) == len(with_usage)  # one usage per model response


def test_codex_turns_and_steps():
    (conv,) = convert("codex/rollout-0.40-shell.jsonl")
    types = [t for t, _p, _ts in conv.events]
    assert types.count("turn/start") == 2
    assert types.count("step/start") == EXPECTED["codex/rollout-0.40-shell.jsonl"]["line_types"]["turn_context"]
    aborted = [p for t, p, _ts in conv.events if t == "turn/end"]
    assert aborted[0]["aborted"] == "interrupted"
    ctx = [p for t, p, _ts in conv.events if t == "user/message" and p.get("kind") == "environment"]
    assert ctx and ctx[0]["content"].startswith("<environment_context>")


def test_non_json_line_names_file_and_line_and_stores_nothing(store):
    path = str(DATA / "bad/claude-nonjson-line.jsonl")
    with pytest.raises(InvalidJSONL) as e:
        import_transcript(store, path, "claude-code")
    assert str(e.value).startswith(f"{path}:8: ")
    assert store.sessions() == []
    rep = import_transcript(store, path, "claude-code", salvage=True)
    assert rep.dropped and rep.dropped[0].startswith(f"{path}:8: ")
    (info,) = store.sessions()
    assert info.events == rep.sessions[0].total > 0


def test_truncated_last_line_waits_for_the_next_run(tmp_path, store):
    src = DATA / "bad/claude-truncated-last-line.jsonl"
    f = tmp_path / "s.jsonl"
    f.write_bytes(src.read_bytes())
    rep = import_transcript(store, str(f), "claude-code")
    assert rep.waiting and rep.sessions[0].status == "imported"
    n = rep.sessions[0].total
    # the agent finishes the line (here: replaces the cut line by a whole one) and goes on
    whole = (DATA / "claude-code/v2.1-main.jsonl").read_bytes().splitlines(keepends=True)
    cut = f.read_bytes().splitlines(keepends=True)
    extra = json.loads(whole[-1])
    extra["sessionId"] = json.loads(cut[0])["sessionId"] if "sessionId" in json.loads(cut[0]) else extra["sessionId"]
    f.write_bytes(b"".join(cut[:-1]) + json.dumps(extra).encode() + b"\n")
    rep = import_transcript(store, str(f), "claude-code")
    assert not rep.waiting and rep.sessions[0].status == "appended" and rep.sessions[0].total > n


def grow(src: bytes, step: int):
    """Prefixes of ``src``: every ``step`` bytes, plus each whole line, plus all of it."""
    cuts = set(range(0, len(src), step)) | {i + 1 for i, b in enumerate(src) if b == 0x0A} | {len(src)}
    return [src[:c] for c in sorted(cuts)]


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_importing_a_growing_file_again_and_again_stores_what_one_import_stores(rel, tmp_path, store):
    src = (DATA / rel).read_bytes()
    f = tmp_path / Path(rel).name
    fmt = EXPECTED[rel]["format"]
    for prefix in grow(src, 997):
        f.write_bytes(prefix)
        import_transcript(store, str(f), fmt)  # never a conflict, never a duplicate
    grown = stored(store)
    shutil.copy(DATA / rel, f)
    with EventStore.open(new_sqlite_store(tmp_path / "once.db")) as store:
        import_transcript(store, str(f), fmt)
        once = stored(store)
    # Whatever the moments of the imports, the same sessions with the same events (a
    # /rewind included: the branch written first keeps the session); a Claude Code
    # session's meta is its first line's (what comes later comes as session/info events).
    assert [evs for _m, evs in grown] == [evs for _m, evs in once]
    for (g, _), (o, _) in zip(grown, once, strict=True):
        assert g == o if fmt == "claude-code" else g.items() <= o.items()


def test_rewind_after_an_import_keeps_the_stored_branch(tmp_path, store):
    rel = "claude-code/v2.0-snapshots-rewind.jsonl"
    src = (DATA / rel).read_bytes().splitlines(keepends=True)
    fork_at = next(i for i, line in enumerate(src) if b"780bee9f-e746-4f1e-a49c-6d0fdecbf318" in line
                   and b'"type":"user"' in line.replace(b" ", b""))
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(src[:fork_at]))
    import_transcript(store, str(f), "claude-code")
    f.write_bytes(b"".join(src))
    rep = import_transcript(store, str(f), "claude-code")
    main = [r for r in rep.sessions if r.session_id == EXPECTED[rel]["session_ids"][0]][0]
    assert main.status in ("appended", "skipped")
    assert {r.status for r in rep.sessions if r.session_id != main.session_id} == {"imported"}


def test_a_file_rewritten_with_other_content_is_a_conflict(tmp_path, store):
    f = tmp_path / "s.jsonl"
    lines = (DATA / "codex/rollout-0.40-shell.jsonl").read_bytes().splitlines(keepends=True)
    f.write_bytes(b"".join(lines))
    import_transcript(store, str(f), "codex")
    n = store.sessions()[0].events
    f.write_bytes(b"".join(lines[:1] + lines[3:]))
    with pytest.raises(ImportConflict):
        import_transcript(store, str(f), "codex")
    assert store.sessions()[0].events == n


@pytest.mark.parametrize("order", ["shorter first", "longer first"])
def test_another_rollout_under_the_same_session_id_is_a_conflict(tmp_path, store, order):
    """Codex keys events by line number: two rollouts that share a session id (a copied
    session_meta line, or two files named alike without one) share their keys too. Only
    their content tells them apart, and nothing of the second may be appended."""
    short = (DATA / "codex/rollout-0.40-shell.jsonl").read_bytes().splitlines(keepends=True)
    long_ = (DATA / "codex/rollout-0.66-apply-patch.jsonl").read_bytes().splitlines(keepends=True)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"".join(short))
    b.write_bytes(b"".join(short[:1] + long_[1:]))  # the other conversation, under the first one's id
    first, second = (a, b) if order == "shorter first" else (b, a)
    import_transcript(store, str(first), "codex")
    (info,) = store.sessions()
    before = [e.to_jsonl() for e in store.session(info.id).events()]
    with pytest.raises(ImportConflict) as e:
        import_transcript(store, str(second), "codex")
    assert str(e.value).startswith(f"{second}: session {info.id!r} is already stored with other events: ")
    assert re.search(r"seq \d+ differs \((type|ts|payload)\)$", str(e.value)), str(e.value)
    assert [e.to_jsonl() for e in store.session(info.id).events()] == before


def test_an_older_copy_of_a_stored_transcript_is_skipped_and_an_edited_one_names_its_seq(tmp_path, store):
    """A backup, or a synced folder that is behind: the file's events are stored, and more."""
    lines = (DATA / "codex/rollout-0.40-shell.jsonl").read_bytes().splitlines(keepends=True)
    whole, old, edited = tmp_path / "whole.jsonl", tmp_path / "old.jsonl", tmp_path / "edited.jsonl"
    whole.write_bytes(b"".join(lines))
    old.write_bytes(b"".join(lines[:20]))
    edited.write_bytes(b"".join(lines[:3] + [lines[3].replace(b"90s", b"95s")] + lines[4:20]))
    assert b"90s" in lines[3]
    (info_whole,) = import_transcript(store, str(whole), "codex").sessions
    stored_before = [e.to_jsonl() for e in store.session(info_whole.session_id).events()]
    (r,) = import_transcript(store, str(old), "codex").sessions
    assert (r.status, r.events, r.total) == ("skipped", 0, info_whole.total) and 0 < r.ahead < r.total
    with pytest.raises(ImportConflict) as e:
        import_transcript(store, str(edited), "codex")
    assert re.search(r"already stored with other events: seq \d+ differs \(payload\)$", str(e.value)), str(e.value)
    assert [e.to_jsonl() for e in store.session(info_whole.session_id).events()] == stored_before


@pytest.mark.parametrize("rel", sorted(EXPECTED) + ["bad/codex-unknown-type.jsonl"])
def test_format_is_detected(rel):
    want = EXPECTED[rel]["format"] if rel in EXPECTED else "codex"
    assert detect_file(str(DATA / rel)) == want


def test_codex_exit_codes_mark_errors():
    assert codex.exit_code('{"output":"x","metadata":{"exit_code":1}}') == 1
    assert codex.exit_code("Exit code: 2\nWall time: 0 seconds\nOutput:\n") == 2
    assert codex.exit_code("Plan updated") is None


# --- the command line -------------------------------------------------------------------

def run(db, *args) -> subprocess.CompletedProcess:
    """``eventstore --db DB ARGS`` in process (click's CliRunner): what the command prints and
    its exit status are the point here, not its process. An exception it lets through (a
    traceback from the real command) is raised, not taken for a status."""
    r = CliRunner().invoke(cli, ["--db", str(db), *args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def test_cli_imports_a_folder_of_both_formats_and_again_adds_nothing(tmp_path, backend_url):
    folder = tmp_path / "logs"
    shutil.copytree(DATA / "claude-code", folder / "claude")
    shutil.copytree(DATA / "codex", folder / "codex")
    db = backend_url
    r = run(db, "import", str(folder))
    assert r.returncode == 0, r.stderr
    n = sum(len(convert(rel)) for rel in EXPECTED)
    assert r.stdout.startswith(f"files: {len(EXPECTED)}, sessions: {n} ({n} new, 0 appended)")
    r = run(db, "import", str(folder))
    assert r.returncode == 0 and f"sessions: 0 (0 new, 0 appended), events: 0, skipped: {n}" in r.stdout
    r = run(db, "verify")
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_session_id_is_refused_for_a_transcript(tmp_path):
    src = DATA / "claude-code/v2.1-main.jsonl"
    r = run(tmp_path / "t.db", "import", "--session-id", "mine", str(src))
    assert r.returncode == 1 and "sessions: 0" in r.stdout + r.stderr
    assert (f"{src}: --session-id is for an eventstore file without a session/meta line: a claude-code "
            "transcript names its sessions itself") in r.stderr


def test_cli_unknown_format_names_the_formats(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"hello": 1}\n')
    r = run(tmp_path / "t.db", "import", str(f))
    assert r.returncode == 1
    assert f"{f}: not in a known format (the formats are claude-code, codex, eventstore" in r.stderr
    r = run(tmp_path / "t.db", "import", "--format", "claude-code", str(DATA / "bad/claude-nonjson-line.jsonl"))
    assert r.returncode == 1 and ":8: not JSON" in r.stderr


@pytest.mark.parametrize("content, line, reason", [
    (b"", 0, "the file is empty"),
    (b"\n  \n\t\n", 0, "the file holds only blank lines"),
    (b"\n\xff\xfe{}\n", 2, "invalid UTF-8 at byte 1 of the line"),
    (b'{"a": "\xc3"}\n', 1, "invalid UTF-8 at byte 8 of the line"),
])
def test_cli_a_file_detection_cannot_read_says_why(tmp_path, content, line, reason):
    """An empty file, one of blank lines, or one whose first line is not UTF-8 is not a
    question of format: without --format the import says what is wrong, as with it."""
    f = tmp_path / "x.jsonl"
    f.write_bytes(content)
    r = run(tmp_path / "t.db", "import", str(f))
    assert r.returncode == 1
    where = f"{f}:{line}" if line else str(f)
    assert r.stderr == f"{where}: {reason}\n"
    assert "not in a known format" not in r.stderr


def test_cli_a_file_of_blank_lines_then_an_unknown_line_is_of_no_known_format(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b"\n" * 30 + b'{"hello": 1}\n')
    r = run(tmp_path / "t.db", "import", str(f))
    assert r.returncode == 1 and f"{f}: not in a known format (the formats are" in r.stderr


def test_cli_a_format_the_file_contradicts_is_refused(tmp_path):
    src = DATA / "claude-code/v2.1-main.jsonl"
    r = run(tmp_path / "t.db", "import", "--format", "codex", str(src))
    assert r.returncode == 1
    assert f"{src}: this is a claude-code file, not codex: give --format claude-code" in r.stderr
    assert "sessions: 0" in r.stdout + r.stderr
    es = tmp_path / "es.jsonl"
    es.write_bytes((ROOT / "tests/data/demo.jsonl").read_bytes())
    r = run(tmp_path / "t.db", "import", "--format", "codex", str(es))
    assert r.returncode == 1
    assert f"{es}: this is an eventstore file, not codex: give --format eventstore" in r.stderr


def test_cli_watch_imports_as_the_file_grows(tmp_path, backend_url):
    lines = (DATA / "codex/rollout-0.66-apply-patch.jsonl").read_bytes().splitlines(keepends=True)
    folder = tmp_path / "sessions"
    folder.mkdir()
    f = folder / "rollout.jsonl"
    f.write_bytes(b"".join(lines[:10]))
    db = backend_url
    EventStore.open(db).close()  # migrated here, where Alembic is loaded already: the watching is the point
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), "import", "--watch",
                             "--interval", "0.1", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        def stored_counts() -> dict:
            try:
                with EventStore.open(db, readonly=True) as s:
                    return {i.id: i.events for i in s.sessions()}
            except DatabaseError:  # not created yet
                return {}

        def events() -> int:
            return sum(stored_counts().values()) if stored_counts() else -1

        assert wait_until(lambda: events() > 0, 30)
        first = events()
        with open(f, "ab") as out:
            out.writelines(lines[10:])
        (f2 := folder / "more.jsonl").write_bytes((DATA / "codex/rollout-0.40-shell.jsonl").read_bytes())
        grown = EXPECTED["codex/rollout-0.66-apply-patch.jsonl"]["session_ids"][0]
        other = EXPECTED["codex/rollout-0.40-shell.jsonl"]["session_ids"][0]
        assert wait_until(lambda: stored_counts().get(grown, 0) > first and other in stored_counts(), 30)
        assert wait_until(lambda: stored_counts()[grown] == 77 and stored_counts()[other] == 73, 30)
        assert f2.exists()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    # 2 sessions, both new in this run, however many looks appended to the grown one
    assert "sessions: 2 (2 new, 0 appended), events: 150," in out, out
    shutil.copy(DATA / "codex/rollout-0.66-apply-patch.jsonl", tmp_path / "x.jsonl")
    with EventStore.open(new_sqlite_store(tmp_path / "once.db")) as other:
        import_transcript(other, str(tmp_path / "x.jsonl"), "codex")
        sid = other.sessions()[0].id
        want = [(e.type, e.payload) for e in other.session(sid).events()]
    with EventStore.open(db) as store:
        assert [(e.type, e.payload) for e in store.session(sid).events()] == want


def test_a_repeated_line_is_kept_under_its_line_number(tmp_path, store):
    src = (DATA / "claude-code/v1.0-split-blocks.jsonl").read_bytes().splitlines(keepends=True)
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(src + [src[5]]))  # a resumed session can write a line again
    rep = import_transcript(store, str(f), "claude-code")
    events = list(store.session(rep.sessions[1].session_id).events())  # ([0]: the leading title)
    assert events[-1].type == "tool/result" and events[-1].payload["event_id"].startswith(f"L{len(src) + 1}:")
    assert events[-1].payload["source"]["uuid"] == json.loads(src[5])["uuid"]


def test_a_parent_loop_loses_no_line():
    lines = [d for _n, d in read_lines(str(DATA / "claude-code/v1.0-split-blocks.jsonl")).lines]
    a, b = lines[3], lines[4]
    a["parentUuid"], b["parentUuid"] = b["uuid"], a["uuid"]
    (conv,) = conversation(claude_code.convert(list(enumerate(lines, 1)), "x.jsonl"))
    seen = set()
    for _t, p, _ts in conv.events:
        seen.add(p["event_id"].split(":")[0].split("#")[0])
        src = p.get("source")
        for part in src if isinstance(src, list) else [src] if isinstance(src, dict) else []:
            seen.add(part.get("uuid"))
    assert {d["uuid"] for d in lines if "uuid" in d} <= seen


def test_import_totals_count_a_session_once_however_many_files_add_to_it(tmp_path):
    from click.testing import CliRunner

    from eventstore.cli import cli

    lines = (DATA / "codex/rollout-0.40-shell.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "r.jsonl").write_bytes(b"".join(lines[:20]))
    (tmp_path / "b" / "r.jsonl").write_bytes(b"".join(lines))  # the same rollout, further on
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "x.db"), "import", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    with EventStore.open(tmp_path / "x.db", readonly=True) as store:
        (info,) = store.sessions()
    assert r.stdout == f"files: 2, sessions: 1 (1 new, 0 appended), events: {info.events}, skipped: 0, failed: 0\n"
