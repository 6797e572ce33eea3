"""Secrets streamed in pieces: an ``assistant/chunk`` run holds a key no one chunk holds.

``scan`` joins each run's deltas and names every chunk that holds a piece of a secret;
``redact --found`` and redaction before storing (``import --redact-secrets``,
``redact_secrets=True``) redact those chunks with the message; verify's chunks-vs-message
check then passes over the run, and still reports a run that differs for no redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_secrets import SAMPLES, _check_redacted_before_storing, _database_bytes, _write_session

from eventstore import EventStore
from eventstore.audit.secrets import chunk_secrets, scan_store
from eventstore.audit.verify import verify
from eventstore.backends.capabilities import AuditReads
from eventstore.cli import cli

KEY = SAMPLES["OpenAI Token"][0][1]  # sk-proj-..., 76 characters
TEXT = "Here is the key you asked for: " + KEY + " (keep it out of git)."
PIECES = [TEXT[i:i + 8] for i in range(0, len(TEXT), 8)]
#: the chunks that hold a piece of KEY (indexes into PIECES)
HOLDING = [i for i in range(len(PIECES)) if 8 * i < TEXT.index(KEY) + len(KEY) and 8 * i + 8 > TEXT.index(KEY)]


def _streamed(pieces: list[str] = PIECES, text: str = TEXT) -> list[tuple[str, dict]]:
    """A turn whose assistant streams ``text`` as ``pieces`` (seq 3.. the chunks)."""
    return ([("turn/start", {}), ("user/message", {"content": "give me the key"}), ("step/start", {"step": 0})]
            + [("assistant/chunk", {"delta": {"content": p}}) for p in pieces]
            + [("assistant/message", {"content": text, "tool_calls": []}), ("step/end", {"step": 0, "tool_calls": 0}),
               ("turn/end", {})])


def _findings(report) -> list[str]:
    return [f"{f.kind} {f.seq}" for f in report.findings]


def test_scan_joins_a_run_of_chunks_and_names_each_chunk_of_the_secret(store):
    assert all(KEY not in p for p in PIECES) and len(HOLDING) > 8
    store.create_session("s").append_many(_streamed())
    found = [(f.seq, f.field, f.kind) for f in scan_store(store)]
    assert found == [(3 + i, "delta.content", "OpenAI Token") for i in HOLDING] + [
        (3 + len(PIECES), "content", "OpenAI Token")]
    # a run still streaming (no message yet) is scanned too
    store.create_session("live").append_many(_streamed()[:3 + len(PIECES)])
    assert [f.seq for f in scan_store(store, ["live"])] == [3 + i for i in HOLDING]


def test_chunk_secrets_of_other_delta_texts():
    """Any text a chunk's delta carries is joined per path (reasoning, tool call arguments),
    and a run ends at its message, a new step or a new turn."""
    args = json.dumps({"command": "curl -H 'Authorization: Bearer 7hT2kLm9Qx4Vb8Nc3Zr6Wy1P' x"})
    parts = [args[i:i + 5] for i in range(0, len(args), 5)]
    types = ["assistant/chunk"] * len(parts) + ["step/start"] + ["assistant/chunk"] * 2
    texts = [json.dumps({"delta": {"tool_calls": [{"function": {"arguments": p}}]}}) for p in parts]
    texts += ["{}", json.dumps({"delta": {"reasoning": KEY[:40]}}), json.dumps({"delta": {"reasoning": KEY[40:]}})]
    found = chunk_secrets(types, texts)
    args_path = ("delta", "tool_calls", 0, "function", "arguments")
    start = args.index("7hT2")
    assert sorted(found) == [i for i in range(len(parts)) if 5 * i < start + 24 and 5 * i + 5 > start] + [
        len(parts) + 1, len(parts) + 2]
    assert found[len(parts) + 1] == [(("delta", "reasoning"), "OpenAI Token", KEY)]
    assert all(v == [(args_path, "Secret Assignment", "7hT2kLm9Qx4Vb8Nc3Zr6Wy1P")]
               for k, v in found.items() if k < len(parts))
    # the two halves in two runs (a step between them) make no secret
    assert chunk_secrets(["assistant/chunk", "step/start", "assistant/chunk"],
                         [texts[-2], "{}", texts[-1]]) == {}


def test_redact_found_redacts_the_chunks_and_verify_passes(backend_url: str, db_path: Path):
    with EventStore.open(backend_url) as store:
        store.create_session("s").append_many(_streamed())
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", backend_url, "redact", "--found"])
    assert r.exit_code == 0, r.output
    assert f"redacted session 's' seq {3 + HOLDING[0]}: delta.content (secret: OpenAI Token)" in r.stdout
    assert f"{len(HOLDING) + 1} events redacted" in r.stdout
    with EventStore.open(backend_url) as store:
        report = verify(store.capability(AuditReads))
        assert _findings(report) == [] and len(report.redactions) == len(HOLDING) + 1
        events = {e.seq: e for e in store.session("s").events()}
        assert [events[3 + i].payload["delta"]["content"] for i in HOLDING] == (
            ["[redacted: secret: OpenAI Token]"] * len(HOLDING))
        assert list(scan_store(store)) == []
    for args in (["tail", "s"], ["events", "s"], ["scan"]):
        r = runner.invoke(cli, ["--db", backend_url, *args])
        assert KEY[8:24] not in r.output and r.exit_code == 0, (args, r.output)
    r = runner.invoke(cli, ["--db", backend_url, "verify"])
    assert r.exit_code == 0, r.output
    if backend_url == str(db_path):
        assert KEY[8:24].encode() not in _database_bytes(db_path)


def test_verify_still_reports_a_run_that_differs_without_a_redaction(store):
    s = store.create_session("s")
    s.append_many(_streamed(pieces=["Hello, ", "world"], text="Hello, there"))
    s.append("user/message", {"content": "secret: " + KEY})
    store.redact("s", s.next_seq() - 1, ["content"], reason="key")  # a redaction of another event
    assert _findings(verify(store.capability(AuditReads))) == ["chunks 5"]
    store.redact("s", 4, None, reason="gdpr")  # one chunk of the run: the run differs by design now
    assert _findings(verify(store.capability(AuditReads))) == []


def test_redact_secrets_on_append_of_a_batch_of_chunks(backend_url: str, db_path: Path):
    with EventStore.open(backend_url, redact_secrets=True) as store:
        s = store.create_session("s")
        events = _streamed()
        s.append_many(events[:3])
        s.append_many(events[3:])  # the chunks and their message in one batch
        _check_redacted_before_storing(store, "s")
        stored = [e for e in s.events()]
        chunks = [e.payload["delta"]["content"] for e in stored if e.type == "assistant/chunk"]
        assert "".join(chunks).count("[redacted: secret: OpenAI Token]") == len(HOLDING)
        assert _findings(verify(store.capability(AuditReads))) == []
    if backend_url == str(db_path):
        assert KEY[8:24].encode() not in _database_bytes(db_path)


@pytest.mark.parametrize("batch_rows", [5000, 7])
def test_import_redact_secrets_of_chunks_across_batches(backend_url: str, db_path: Path, tmp_path: Path,
                                                       monkeypatch, batch_rows: int):
    """The chunks of one message in several of the importer's batches are scanned as one run."""
    from eventstore.io import bulk

    monkeypatch.setattr(bulk, "BATCH_ROWS", batch_rows)
    src = tmp_path / "c.jsonl"
    _write_session(src, "imp", _streamed() * 3)
    r = CliRunner().invoke(cli, ["--db", backend_url, "import", "--redact-secrets", str(src)])
    n = 3 * (len(_streamed()) + len(HOLDING) + 1)
    assert r.exit_code == 0 and f"events: {n}," in r.stdout, r.output
    with EventStore.open(backend_url) as store:
        assert len(_check_redacted_before_storing(store, "imp")) == 3 * (len(HOLDING) + 1)
        assert _findings(verify(store.capability(AuditReads))) == []
    r = CliRunner().invoke(cli, ["--db", backend_url, "import", "--redact-secrets", str(src)])
    assert r.exit_code == 0 and "skipped: 1" in r.stdout, r.output  # the same rows again
    if backend_url == str(db_path):
        assert KEY[8:24].encode() not in _database_bytes(db_path)
