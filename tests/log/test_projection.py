"""Each projection rule of the spec, through the SQL view and the Python API."""

from __future__ import annotations

import json

import pytest


def project(store, *events):
    s = store.create_session()
    s.append_many(events)
    return s.derive_messages()


def test_non_message_events_are_skipped(store):
    assert project(store, ("turn/start", {"agent": "x"}), ("step/start", {"step": 0}),
                   ("assistant/chunk", {"delta": {"content": "hi"}}), ("step/end", {"step": 0}),
                   ("skill/inject", {"content": "ignored"}), ("turn/end", {})) == []


@pytest.mark.parametrize("payload, message", [
    ({"content": "hi"}, {"role": "user", "content": "hi"}),
    ({"content": [{"type": "text", "text": "a"}]}, {"role": "user", "content": [{"type": "text", "text": "a"}]}),
    ({"content": None}, {"role": "user", "content": None}),
    ({}, {"role": "user"}),  # JSON.stringify drops an undefined content
    ({"content": "x", "extra": 1}, {"role": "user", "content": "x"}),
])
def test_user_message(store, payload, message):
    assert project(store, ("user/message", payload)) == [message]


CALL = {"id": "call_1", "type": "function", "function": {"name": "run_bash", "arguments": "{}"}}


@pytest.mark.parametrize("payload, message", [
    ({"content": "a"}, {"role": "assistant", "content": "a"}),
    ({"content": None}, {"role": "assistant", "content": ""}),
    ({}, {"role": "assistant", "content": ""}),
    ({"content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "content": [{"type": "text", "text": "a"}]}),
    ({"content": "a", "tool_calls": [CALL]}, {"role": "assistant", "content": "a", "tool_calls": [CALL]}),
    ({"content": None, "tool_calls": [CALL]}, {"role": "assistant", "content": "", "tool_calls": [CALL]}),
    ({"content": "a", "tool_calls": []}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": None}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": False}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": 0}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": ""}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": 0.0}, {"role": "assistant", "content": "a"}),
    ({"content": "a", "tool_calls": "\x00"}, {"role": "assistant", "content": "a", "tool_calls": "\x00"}),  # truthy in JS
    ({"content": "a", "tool_calls": {}}, {"role": "assistant", "content": "a", "tool_calls": {}}),
    ({"content": 0}, {"role": "assistant", "content": 0}),  # ?? keeps 0 and "" (only null/undefined become "")
    ({"content": ""}, {"role": "assistant", "content": ""}),
])
def test_assistant_message(store, payload, message):
    assert project(store, ("assistant/message", payload)) == [message]


@pytest.mark.parametrize("payload, message", [
    ({"tool_call_id": "c", "content": "2"}, {"role": "tool", "tool_call_id": "c", "content": "2"}),
    ({"tool_call_id": "c", "content": {"rows": [1, 2.5]}}, {"role": "tool", "tool_call_id": "c", "content": {"rows": [1, 2.5]}}),
    ({"tool_call_id": "c"}, {"role": "tool", "tool_call_id": "c"}),
    ({"content": "x"}, {"role": "tool", "content": "x"}),
    ({"tool_call_id": None, "content": None}, {"role": "tool", "tool_call_id": None, "content": None}),
])
def test_tool_result(store, payload, message):
    assert project(store, ("tool/result", payload)) == [message]


def test_order_follows_seq_and_sessions_do_not_mix(store):
    a = store.create_session("a")
    b = store.create_session("b")
    a.append("user/message", {"content": "a1"})
    b.append("user/message", {"content": "b1"})
    a.append("assistant/message", {"content": "a2", "tool_calls": [CALL]})
    a.append("tool/result", {"tool_call_id": "call_1", "content": "r"})
    assert [m.get("content") for m in a.derive_messages()] == ["a1", "a2", "r"]
    assert b.derive_messages() == [{"role": "user", "content": "b1"}]


def test_values_come_out_as_stored(store):
    s = store.create_session()
    s.append("tool/result", {"tool_call_id": "c", "content": ["ab\ud83d", 1e21, 1e-7, 0.1, "\u2028\x00"]})
    text = s.messages_json()
    assert text == '[{"role":"tool","tool_call_id":"c","content":["ab\\ud83d",1e+21,1e-7,0.1,"\u2028\\u0000"]}]'
    assert json.loads(text) == s.derive_messages()


def test_the_view_answers_plain_sql(store, raw):
    s = store.create_session("a")
    s.append_many([("user/message", {"content": "q"}), ("assistant/chunk", {"delta": {"content": "x"}}),
                   ("assistant/message", {"content": "x", "tool_calls": []})])
    rows = raw.execute("SELECT session_id, seq, role, message FROM messages ORDER BY seq").fetchall()
    assert rows == [("a", 0, "user", '{"role":"user","content":"q"}'),
                    ("a", 2, "assistant", '{"role":"assistant","content":"x"}')]


def test_projection_reads_only_message_events(store, raw):
    """The partial index makes the projection's cost independent of the chunk count."""
    plan = " ".join(r[3] for r in raw.execute(
        "EXPLAIN QUERY PLAN SELECT message FROM messages WHERE session_id = 'a' ORDER BY seq"))
    assert "events_messages" in plan and "TEMP B-TREE" not in plan


def test_an_insert_builds_no_temporary_b_tree_for_the_messages_index(store, raw):
    """The index predicate is an OR of three comparisons (migration 0005): an IN list of
    three constants made every INSERT build a temporary b-tree to test it. Only the guard
    trigger's JSON branch (run for payloads that could hold a reserved key) may build one."""
    program = list(raw.execute("EXPLAIN INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                               "VALUES (1, 'a', 0, 'user/message', 1, '{}', 'h')"))
    main = program[:next(i for i, r in enumerate(program) if i and r[1] == "Init")]
    assert "OpenEphemeral" not in [r[1] for r in main]
