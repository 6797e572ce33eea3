"""The path ``scan`` prints is the path ``redact --path`` reads: one pair,
:func:`eventstore.log.redaction.path_text` and :func:`~eventstore.log.redaction.parse_path`,
round-tripped over any keys (dots, brackets, quotes, digits, unicode); and a key holding
``"`` in an event does not stop ``redact --found`` from redacting that event's secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_secrets import SAMPLES, _database_bytes

from eventstore import EventStore
from eventstore.audit.secrets import scan_store
from eventstore.audit.verify import verify
from eventstore.backends.capabilities import AuditReads
from eventstore.cli import cli
from eventstore.log.redaction import parse_path, path_text

KEYS = st.one_of(st.text(), st.text(alphabet='.[]"\\ 0123456789aé_-', max_size=8),
                 st.sampled_from(["GITHUB.TOKEN", "0", "", "a b", '["x"]', "[0]", "é", "𝔘", "\ud800"]))
PATHS = st.tuples(KEYS, st.lists(st.one_of(KEYS, st.integers(min_value=0, max_value=10**6)), max_size=5)).map(
    lambda t: [t[0], *t[1]])


@given(PATHS)
def test_path_text_and_parse_path_round_trip(path: list):
    text = path_text(path)
    assert parse_path(text) == path
    assert parse_path(json.dumps(path)) == path  # a JSON array text too


def test_plain_paths_read_as_before():
    assert path_text(["tool_calls", 0, "function", "arguments"]) == "tool_calls[0].function.arguments"
    assert parse_path("tool_calls[0].function.arguments") == ["tool_calls", 0, "function", "arguments"]
    assert path_text(["env", "GITHUB.TOKEN"]) == 'env["GITHUB.TOKEN"]'
    assert parse_path('env["GITHUB.TOKEN"]') == ["env", "GITHUB.TOKEN"]


def test_a_scanned_path_is_given_back_to_redact(db_path: Path):
    token = SAMPLES["GitHub Token"][0][1]
    with EventStore.open(db_path) as store:
        store.create_session("s").append("user/message", {"content": "ok",
                                                         "env": {"GITHUB.TOKEN": token, "a b": "x"}})
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "--json"])
    [finding] = json.loads(r.stdout)
    assert finding["path"] == 'env["GITHUB.TOKEN"]'
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "s", "0", "--path", finding["path"], "--reason", "tok"])
    assert r.exit_code == 0, r.output
    with EventStore.open(db_path) as store:
        [event] = [e for e in store.session("s").events() if e.seq == 0]
        assert event.payload["env"] == {"GITHUB.TOKEN": "[redacted: tok]", "a b": "x"}
        assert verify(store.capability(AuditReads)).ok
    assert token.encode() not in _database_bytes(db_path)


@pytest.mark.parametrize("odd", ['"', "\\", "\t", "\n"], ids=["quote", "backslash", "tab", "newline"])
def test_redact_found_redacts_an_event_with_a_key_json_escapes(db_path: Path, odd: str):
    """A key that JSON writes with an escape ('"', a backslash, a control character) cannot be
    named in a redaction's path (SQLite's JSON paths): its parent is redacted, and the
    event's other secrets are redacted all the same; a top-level one is said."""
    aws, slack, google = SAMPLES["AWS Access Key"][0][1], SAMPLES["Slack Token"][0][0], SAMPLES["Google API Key"][0][1]
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        s.append("user/message", {"content": "key " + aws, "env": {f"say {odd}hi": slack, "other": "kept"}})
        s.append("user/message", {"content": "key " + google, f"top{odd}key": slack})
    top = path_text([f"top{odd}key"])
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "--found"])
    assert "redacted session 's' seq 0: content, env (secret: AWS Access Key, Slack Token)" in r.stdout, r.output
    assert "redacted session 's' seq 1: content" in r.stdout
    assert "not redacted: session 's' seq 1:" in r.stderr and "cannot be redacted" in r.stderr, r.stderr
    assert r.exit_code == 1
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "s", "1", "--path", top, "--reason", "x"])
    assert r.exit_code == 1 and "cannot be redacted by path" in r.output and "ES004" not in r.output, r.output
    with EventStore.open(db_path) as store:
        assert [(f.seq, f.field) for f in scan_store(store)] == [(1, top)]
        events = {e.seq: e for e in store.session("s").events()}
        assert events[0].payload["env"] == "[redacted: secret: AWS Access Key, Slack Token]"
        assert verify(store.capability(AuditReads)).ok
    data = _database_bytes(db_path)
    assert aws.encode() not in data and google.encode() not in data
