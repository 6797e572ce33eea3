"""The whole model request: system/message, model/tools, context/retract, is_error;
Session.context_at and `eventstore context`."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner
from conftest import DATA, FIXTURES, REFERENCE, db_rows, needs_reference

from eventstore import InvalidEvent
from eventstore.cli import cli

TOOLS = [{"type": "function", "function": {"name": "sh", "description": "Run a command",
                                           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]


def call(cid, name="sh"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


@pytest.mark.parametrize("name", FIXTURES)
def test_without_extension_events_the_context_is_the_projection(store, name):
    sid = store.import_jsonl(DATA / f"{name}.jsonl")
    s = store.session(sid)
    assert s.context_at() == {"messages": s.derive_messages()}
    assert s.derive_messages() == json.loads((DATA / f"{name}.messages.json").read_text())
    messages = s.derive_messages()
    seqs = [seq for seq, in db_rows(store, "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (sid,))]
    n = s.next_seq()
    for at in sorted({0, 1, n // 3, n // 2, n - 1, n}):   # at a point: the messages of the events before it
        assert s.context_at(at) == {"messages": [m for m, seq in zip(messages, seqs, strict=True) if seq < at]}


def _agent_session(store):
    s = store.create_session("ag")
    s.append_many([
        ("turn/start", {}),                                               # 0
        ("system/message", {"content": "You are terse."}),                # 1
        ("model/tools", {"tools": TOOLS}),                                 # 2
        ("user/message", {"content": "list files"}),                      # 3
        ("step/start", {"step": 0}),                                       # 4
        ("assistant/message", {"content": "", "tool_calls": [call("c1"), call("c2")]}),  # 5
        ("tool/result", {"tool_call_id": "c1", "content": "a b"}),        # 6
        ("tool/result", {"tool_call_id": "c2", "content": "boom", "is_error": True}),  # 7
        ("step/end", {"step": 0, "tool_calls": 2}),                        # 8
        ("system/message", {"content": "You are verbose."}),              # 9
        ("model/tools", {"tools": []}),                                    # 10
        ("assistant/message", {"content": "a and b"}),                     # 11
        ("turn/end", {}),                                                  # 12
    ])
    return s


def test_context_at_shows_instructions_tools_and_messages_as_they_stood(store):
    s = _agent_session(store)
    assert s.context_at(5) == {
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "list files"}],
        "tools": TOOLS}
    assert s.context_at(4) == s.context_at(5)            # the step's request is the message's
    before_answer = s.context_at(11)
    assert before_answer["messages"][0] == {"role": "system", "content": "You are verbose."}
    assert [m["role"] for m in before_answer["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert "tools" not in before_answer                  # model/tools [] took them away
    assert s.context_at(0) == {"messages": []}
    assert s.context_at(3) == {"messages": [{"role": "system", "content": "You are terse."}], "tools": TOOLS}
    assert s.context_at(s.next_seq()) == s.context_at()  # the head is the next request; past it is refused
    # the reference projection does not change: extension events are not messages
    assert [m["role"] for m in s.derive_messages()] == ["user", "assistant", "tool", "tool", "assistant"]
    with pytest.raises(InvalidEvent):
        s.context_at(-1)


def test_retractions_take_messages_out_of_later_requests_only(store):
    s = _agent_session(store)
    s.append("context/retract", {"target_seq": 7, "reason": "test"})            # 13
    s.append("context/retract", {"target_seq": 5, "index": 1})                   # 14: the call c2
    after = s.context_at()
    assert after["messages"][2]["tool_calls"] == [call("c1")]
    assert [m.get("tool_call_id") for m in after["messages"] if m["role"] == "tool"] == ["c1"]
    assert len(s.context_at(13)["messages"]) == 6        # before the retraction: everything
    s.append("context/retract", {"target_seq": 5, "index": 0})                   # 15: no call, no content left
    assert [m["role"] for m in s.context_at()["messages"]] == ["system", "user", "tool", "assistant"]
    s.append("user/message", {"content": "again"})                               # 16
    s.append("context/retract", {"before_seq": 16})                              # 17: clear
    assert s.context_at()["messages"] == [{"role": "system", "content": "You are verbose."},
                                          {"role": "user", "content": "again"}]
    s.append("context/retract", {"reason": "names nothing"})
    with pytest.raises(InvalidEvent, match="names neither"):
        s.context_at()
    assert len(s.derive_messages()) == 6                 # nothing deleted, the projection as it was


@needs_reference
def test_the_reference_projects_a_log_with_extension_events_as_the_store_does(store, tmp_path):
    s = _agent_session(store)
    s.append("context/retract", {"before_seq": 5})
    path = tmp_path / "ag.jsonl"
    store.export_jsonl("ag", path)
    out = subprocess.run(["node", str(REFERENCE), "derive", str(path)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == s.derive_messages()


def test_cli_context(store, backend_url):
    s = _agent_session(store)
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(backend_url), "context", "ag", "--at", "11"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == s.context_at(11)
    r = runner.invoke(cli, ["--db", str(backend_url), "context", "ag", "--pretty"], catch_exceptions=False)
    assert r.exit_code == 0 and json.loads(r.stdout) == s.context_at() and "\n  " in r.stdout
    r = runner.invoke(cli, ["--db", str(backend_url), "context", "nope"])
    assert r.exit_code == 1 and r.stderr == "error: session 'nope' not found\n"
    r = runner.invoke(cli, ["--db", str(backend_url), "context", "ag", "--at", "-2"])
    assert r.exit_code == 2


def test_context_past_the_end_of_the_session_is_refused(store, backend_url):
    s = _agent_session(store)
    head = s.next_seq()
    assert s.context_at(head) == s.context_at()  # the next request
    with pytest.raises(InvalidEvent, match=f"session 'ag' has no event {head + 1}: its events are 0..{head - 1}"):
        s.context_at(head + 1)
    r = CliRunner().invoke(cli, ["--db", str(backend_url), "context", "ag", "--at", str(head + 98)])
    assert r.exit_code == 1 and f"has no event {head + 98}" in r.stderr
