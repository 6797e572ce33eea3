"""Redaction keeps what pairs a tool call with its result: ``tool_call_id`` and
``tool_calls[i].id`` are never redacted (kept by a whole-payload redaction, refused when
named), and a call's ``function`` keeps its shape; the projection's messages stay valid for a
chat API and verify reports no dangling call or orphan result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_redaction import CALL, SECRET, _can_redact, _session

from eventstore import EventStore, InvalidEvent
from eventstore.audit import verify as audit
from eventstore.log.redaction import pairing_id, parse_path, redacted_payload


def _valid_chat_messages(msgs: list[dict]) -> None:
    """What a chat API checks of the pairing: each call an object with a string id and a
    function object of strings; each tool message answers a call of the message before it."""
    open_ids: set[str] = set()
    for m in msgs:
        if m["role"] == "assistant":
            open_ids = set()
            for c in m.get("tool_calls", []):
                assert isinstance(c["id"], str) and c["type"] == "function", c
                assert isinstance(c["function"], dict) and all(isinstance(c["function"][k], str)
                                                               for k in ("name", "arguments")), c
                open_ids.add(c["id"])
        elif m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, m


def test_a_whole_tool_result_keeps_its_tool_call_id(store):
    _can_redact(store)
    _session(store)
    done = store.redact("s", 2, None, reason="gdpr")
    assert done.paths == [["content"]]
    msgs = store.session("s").derive_messages()
    assert msgs[2] == {"role": "tool", "tool_call_id": "call_1", "content": "[redacted: gdpr]"}
    _valid_chat_messages(msgs)
    assert SECRET not in store.session("s").messages_json()
    report = audit.verify(store._backend)
    assert report.ok, report.findings


def test_a_path_naming_a_pairing_id_is_refused(store):
    _can_redact(store)
    _session(store)
    with pytest.raises(InvalidEvent, match=r"session 's', seq 2: tool_call_id pairs a tool call with its result"):
        store.redact("s", 2, ["tool_call_id"], reason="x")
    with pytest.raises(InvalidEvent, match=r"session 's', seq 1: tool_calls\[0\]\.id pairs a tool call"):
        store.redact("s", 1, ["tool_calls[0].id"], reason="x")
    s = store.session("s")
    s.append("tool/result", {"tool_call_id": "call_9"})
    with pytest.raises(InvalidEvent, match="holds only tool_call_id, which pairs messages and is kept"):
        store.redact("s", s.next_seq() - 1, None, reason="x")
    assert [e.type for e in s.events()].count("redaction") == 0


def test_a_calls_function_keeps_its_shape(store):
    _can_redact(store)
    _session(store)
    done = store.redact("s", 1, ["tool_calls[0].function"], reason="cmd")
    assert done.paths == [["tool_calls", 0, "function", "name"], ["tool_calls", 0, "function", "arguments"]]
    msgs = store.session("s").derive_messages()
    assert msgs[1]["tool_calls"] == [{"id": "call_1", "type": "function",
                                      "function": {"name": "[redacted: cmd]", "arguments": "[redacted: cmd]"}}]
    _valid_chat_messages(msgs)
    assert audit.verify(store._backend).ok


def test_the_cli_refuses_a_pairing_id_with_one_line(db_path: Path):
    with EventStore.open(db_path) as store:
        _session(store)
    p = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db_path), "redact", "s", "1", "--path",
                        "tool_calls[0].id", "--reason", "x"], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("error: session 's', seq 1: tool_calls[0].id pairs a tool call with its result")
    p = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db_path), "redact", "s", "2", "--reason",
                        "gdpr"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db_path), "verify"], capture_output=True,
                       text=True, cwd=ROOT)
    assert p.returncode == 0 and "orphan_result" not in p.stderr + p.stdout, p.stderr


def test_pairing_ids_by_path():
    assert pairing_id(["tool_call_id"]) and pairing_id(parse_path("tool_calls[3].id"))
    assert not pairing_id(["tool_calls", 0, "function", "name"]) and not pairing_id(["id"])
    paths, new, _ = redacted_payload("s", 0, {"content": "x", "tool_calls": [CALL]}, None, "k")
    assert new["tool_calls"][0]["id"] == "call_1" and ["tool_calls", 0, "id"] not in paths
