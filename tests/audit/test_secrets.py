"""Secret scanning (``eventstore scan``, :mod:`eventstore.audit.secrets`) and redaction before
storing (``EventStore.open(..., redact_secrets=True)``, ``eventstore import --redact-secrets``).

Every kind the scanner claims is tried with a fake secret of the right shape; the repository's
sample transcripts scan clean; no output ever holds a secret; a secret redacted before storing
is in no byte of the database, and verify passes."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SHARED, TESTS

from eventstore import EventStore, SeqConflict
from eventstore.audit.secrets import PLUGINS, candidates, kinds, mask, path_text, scan_payload, scan_store, secrets_in
from eventstore.audit.verify import verify
from eventstore.backends.capabilities import AuditReads
from eventstore.cli import cli

ROOT = TESTS.parent


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


JWT = (_b64({"alg": "HS256", "typ": "JWT"}) + "." + _b64({"sub": "user-4821", "exp": 1767225600})
       + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

#: kind -> [(text an agent might log, the secret in it)]: fake secrets of each kind's shape.
SAMPLES: dict[str, list[tuple[str, str]]] = {
    "AWS Access Key": [("export AWS_ACCESS_KEY_ID=AKIAQ3EGRT7XZJ4KPL2M\n", "AKIAQ3EGRT7XZJ4KPL2M"),
                       ('boto3.client("s3", aws_secret_access_key="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")',
                        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lm3KdQ1")],
    "GitHub Token": [("remote: https://x-access-token:ghp_R4nd0mT0kenValue1234567890abcdEFGHij@github.com/o/r",
                      "ghp_R4nd0mT0kenValue1234567890abcdEFGHij"),
                     ("GH_TOKEN=github_pat_11ABCDEFG0Qz8x7Yw6Vu5T_" + "Ts4Rq3Po2Nm1Lk0Jh9Gf8Ed7Cb6Az5Yx4Wv3Ut2Sr1Qp0On9Ml8Kj7",
                      "github_pat_11ABCDEFG0Qz8x7Yw6Vu5T_Ts4Rq3Po2Nm1Lk0Jh9Gf8Ed7Cb6Az5Yx4Wv3Ut2Sr1Qp0On9Ml8Kj7")],
    "GitLab Token": [("glab auth login --token glpat-xY7zW3vU9tS1rQ5pO2nM", "glpat-xY7zW3vU9tS1rQ5pO2nM")],
    "OpenAI Token": [("OPENAI_API_KEY=sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5oQ7sT3BlbkFJu9wY1aC3eG5iK7mO9qS1",
                      "sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5oQ7sT3BlbkFJu9wY1aC3eG5iK7mO9qS1"),
                     ("client = OpenAI(api_key='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')",
                      "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")],
    "Anthropic API Key": [("ANTHROPIC_API_KEY=sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed" * 3 + "AA",
                           "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed" * 3 + "AA")],
    "Slack Token": [("SLACK_BOT_TOKEN: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                     "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
                    ("curl -X POST https://hooks.slack.com/services/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",
                     "https://hooks.slack.com/services/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")],
    "Stripe Access Key": [("stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'", "sk_live_4eC39HqLyjWDarjtT1zdp7dc")],
    "SendGrid API Key": [("SENDGRID=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\n",
                          "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")],
    "PyPI Token": [("password = pypi-AgEIcHlwaS5vcmc" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed" * 3,
                    "pypi-AgEIcHlwaS5vcmc" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed" * 3)],
    "Google API Key": [("GEMINI_API_KEY=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY")],
    "Private Key": [("$ cat ~/.ssh/id_rsa\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx8Zq2mT9vLk3Qw\n"
                     "-----END RSA PRIVATE KEY-----\n", "BEGIN RSA PRIVATE KEY"),
                    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n",
                     "BEGIN OPENSSH PRIVATE KEY")],
    "JSON Web Token": [(f"the session cookie is {JWT}; it expires tomorrow", JWT.rsplit(".", 1)[0] + ".")],
    "Basic Auth Credentials": [("DATABASE_URL=postgres://admin:Xq7Lm2Vz9RtK@db.internal:5432/app", "Xq7Lm2Vz9RtK")],
    "Secret Assignment": [('client_secret = "q8Zr2mKx7VbN4cLp9TyW3sDf"', "q8Zr2mKx7VbN4cLp9TyW3sDf"),
                          ('{"api_key": "9fK2mZq7Xv4Bn8Lc3Pw6Ty1R"}', "9fK2mZq7Xv4Bn8Lc3Pw6Ty1R"),
                          ("curl -H 'Authorization: Bearer 7hT2kLm9Qx4Vb8Nc3Zr6Wy1P' https://api.example.com",
                           "7hT2kLm9Qx4Vb8Nc3Zr6Wy1P")],
}

#: Ordinary agent content that names keys, tokens, passwords and URLs without holding one.
ORDINARY = [
    'api_key = os.environ["OPENAI_API_KEY"]\nclient = OpenAI(api_key=api_key)',
    "usage: input_tokens: 1520, output_tokens: 311, cache_read_tokens: 0",
    'password: "${DB_PASSWORD}"\nhost: db.internal',
    "engine = create_engine('postgresql://scott:tiger@localhost/test')",
    "url = f'postgresql://{user}:{password}@{host}/{db}'",
    "Set AWS credentials with `aws configure`; the secret key is read from ~/.aws/credentials",
    "def get_token(self) -> str:\n    return self._token_cache.get(self.scope)",
    "private_key: Ed25519PrivateKey = load_key(path)",
    "The PRIVATE KEY header says which algorithm; never paste one here.",
    "git log --oneline\n3f2a9c1 fix: token refresh\nsha256: 9f86d081884c7d659a2f",
    "token = secrets.token_urlsafe(32)",
    "secret_key_base = Rails.application.credentials.secret_key_base",
    "SELECT id, token_hash FROM api_tokens WHERE user_id = 42",
    "token_hash: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "AWS_ACCESS_KEY_ID_FILE=/run/secrets/aws_key_2024_rotated_v3",
    "def load(self, private_key: ed25519.Ed25519PrivateKey, f_priv: _FragList):",
    'e = create_engine("mssql+pyodbc://u:p@dsn")',
]


def test_every_kind_claimed_has_samples_and_each_is_found_masked():
    assert set(kinds()) == set(SAMPLES)
    for kind, samples in SAMPLES.items():
        for text, secret in samples:
            found = secrets_in(text)
            assert (kind, secret) in found, (kind, text, found)
            shown = mask(secret)
            assert secret not in shown and len(shown.split("…")[0]) <= 4


def test_ordinary_agent_content_holds_no_secret():
    assert [(t, secrets_in(t)) for t in ORDINARY if secrets_in(t)] == []


def test_every_secret_holds_a_needle_of_its_plugin():
    """The prefilter's promise: a text without any of a plugin's needles is not given to it;
    each sample holds one of its own kind's needles (ignoring case)."""
    for plugin in PLUGINS:
        for text, _secret in SAMPLES[plugin.kind]:
            if plugin.detector.analyze_string(text) and any(True for _ in plugin.detector.analyze_string(text)):
                assert any(n in text.lower() for n in plugin.needles), (plugin.kind, text)
    texts = ["nothing here", SAMPLES["JSON Web Token"][0][0], "x" * 10, SAMPLES["Slack Token"][1][0]]
    assert candidates(texts) == [1, 3]
    assert candidates([]) == []


def _store_with_secrets(store: EventStore) -> list[str]:
    """Sessions holding a secret in each place a payload can: content, tool call arguments
    (a JSON text), a tool result, a nested part, the meta. Returns the secrets."""
    s = store.create_session("leaky", meta={"env": {"GITHUB_TOKEN": SAMPLES["GitHub Token"][0][1]}})
    s.append("user/message", {"content": "deploy it; the key is " + SAMPLES["AWS Access Key"][0][1]})
    args = json.dumps({"command": "psql " + "postgres://admin:Xq7Lm2Vz9RtK@db.internal:5432/app"})
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}]})
    s.append("tool/result", {"tool_call_id": "c1", "content": "$ cat .env\n" + SAMPLES["OpenAI Token"][0][0]})
    s.append("user/message", {"content": [{"type": "text", "text": "look"},
                                          {"type": "text", "text": SAMPLES["Private Key"][0][0]}]})
    clean = store.create_session("clean")
    clean.append("user/message", {"content": ORDINARY[0]})
    return [SAMPLES["GitHub Token"][0][1], SAMPLES["AWS Access Key"][0][1], "Xq7Lm2Vz9RtK",
            SAMPLES["OpenAI Token"][0][1], "MIIEowIBAAKCAQEAx8Zq2mT9vLk3Qw"]


def test_scan_store_names_session_seq_path_and_kind(store):
    _store_with_secrets(store)
    found = [(f.session_id, f.seq, f.field, f.kind) for f in scan_store(store)]
    assert found == [("leaky", None, "env.GITHUB_TOKEN", "GitHub Token"),
                     ("leaky", 0, "content", "AWS Access Key"),
                     ("leaky", 1, "tool_calls[0].function.arguments", "Basic Auth Credentials"),
                     ("leaky", 2, "content", "OpenAI Token"),
                     ("leaky", 3, "content[1].text", "Private Key")]
    assert list(scan_store(store, ["clean"])) == []


def test_scan_command_table_json_and_exit_status(db_path: Path):
    with EventStore.open(db_path) as store:
        secrets = _store_with_secrets(store)
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "scan"])
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["SESSION", "SEQ", "FIELD", "KIND", "PREVIEW"]
    assert lines[1].split()[:3] == ["leaky", "meta", "env.GITHUB_TOKEN"]
    assert lines[3].split()[:3] == ["leaky", "1", "tool_calls[0].function.arguments"]
    assert ("5 secrets in 4 events and 1 meta of 1 session; `eventstore redact --found` redacts those in events; "
            "a secret in a session's meta cannot be redacted (no event records it)") in r.stderr, r.stderr
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "--json", "leaky"])
    assert r.exit_code == 1
    found = json.loads(r.stdout)
    assert found[2] == {"session_id": "leaky", "seq": 1, "path": "tool_calls[0].function.arguments",
                        "kind": "Basic Auth Credentials", "preview": "Xq7…(12 chars)"}
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "clean"])
    assert (r.exit_code, r.stdout) == (0, "no secrets found\n")
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "--json", "clean"])
    assert (r.exit_code, r.stdout) == (0, "[]\n")
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "nope"])
    assert (r.exit_code, r.stderr) == (2, "error: session 'nope' not found\n")  # an error, not a finding
    for args in (["scan"], ["scan", "--json"]):
        out = runner.invoke(cli, ["--db", str(db_path), *args]).output
        assert not [s for s in secrets if s in out]


def test_scan_of_the_sample_transcripts_is_clean(tmp_path: Path):
    """The repository's transcripts (Claude Code, Codex: code, diffs, shell output, thinking
    signatures) and JSONL fixtures: real agent content, no secret in it."""
    folders = [ROOT / "tests" / "transcripts_data" / d for d in ("claude-code", "codex", "codex-cases")]
    folders += [SHARED / "transcripts" / d for d in ("claude-code", "codex") if (SHARED / "transcripts" / d).is_dir()]
    folders.append(ROOT / "tests" / "data")
    db = str(tmp_path / "corpus.db")
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", db, "import", *map(str, folders)])
    assert "failed: 0" in r.stdout, r.output
    with EventStore.open(db) as store:
        assert sum(i.events for i in store.sessions()) > 3000
    r = runner.invoke(cli, ["--db", db, "scan"])
    assert (r.exit_code, r.stdout) == (0, "no secrets found\n"), r.output


# --- secrets never land ---------------------------------------------------------------------------

def _database_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file())


def _log_problems(store: EventStore) -> list:
    """What verify finds wrong with the log itself (the chain, the seqs, the guards), leaving
    out what it says of the conversations (an orphan tool result of a hand-made session)."""
    report = verify(store.capability(AuditReads))
    return [str(f) for f in report.findings if f.kind not in ("dangling_call", "orphan_result")]


def _check_redacted_before_storing(store: EventStore, sid: str) -> list:
    """Each redaction event names the event before it, which holds its markers; verify passes."""
    events = list(store.session(sid).events())
    redactions = [e for e in events if e.type == "redaction"]
    for r in redactions:
        target = events[r.payload["event_seq"]]
        assert target.seq == r.seq - 1 and r.ts == target.ts
        assert r.payload["before_storing"] is True and r.payload["by"]
        for path in r.payload["paths"]:
            value = target.payload
            for k in path:
                value = value[k]
            assert value == f"[redacted: {r.payload['reason']}]"
    assert _log_problems(store) == []
    assert [f for f in scan_store(store, [sid]) if f.seq is not None] == []  # (the meta is no event)
    return redactions


def test_redact_secrets_on_append(backend_url: str, db_path: Path):
    with EventStore.open(backend_url, redact_secrets=True) as store:
        secrets = _store_with_secrets(store)
        s = store.session("leaky")
        e = s.append("tool/result", {"tool_call_id": "c9", "content": "key: " + SAMPLES["Anthropic API Key"][0][1]})
        assert e.payload["content"] == "[redacted: secret: Anthropic API Key]" and e.seq == 8
        batch = s.append_many([("user/message", {"content": "ok"}),
                               ("user/message", {"content": SAMPLES["Stripe Access Key"][0][0]})])
        # one event per item, as append returns its one: the redaction event at 12 is the store's
        assert [(x.seq, x.type) for x in batch] == [(10, "user/message"), (11, "user/message")]
        assert batch[1].payload == {"content": "[redacted: secret: Stripe Access Key]"}
        assert s.append("user/message", {"content": "nothing secret"}).seq == 13
        redactions = _check_redacted_before_storing(store, "leaky")
        assert [(r.payload["event_seq"], r.payload["paths"], r.payload["reason"]) for r in redactions] == [
            (0, [["content"]], "secret: AWS Access Key"),
            (2, [["tool_calls", 0, "function", "arguments"]], "secret: Basic Auth Credentials"),
            (4, [["content"]], "secret: OpenAI Token"),
            (6, [["content", 1, "text"]], "secret: Private Key"),
            (8, [["content"]], "secret: Anthropic API Key"),
            (11, [["content"]], "secret: Stripe Access Key")]
        # the meta is no event: its secret is replaced by the marker, with no redaction event
        assert json.loads(store.session_meta_json("leaky")) == {"env": {"GITHUB_TOKEN": "[redacted: secret: GitHub Token]"}}
        assert list(scan_store(store)) == []
    if backend_url == str(db_path):
        data = _database_bytes(db_path)
        assert [s for s in secrets if s.encode() in data] == []


def test_redact_secrets_and_expected_seq(backend_url: str):
    """With redact_secrets, an event that held a secret is followed by its redaction event:
    append and append_many return the items' own events (one per item), and an append that
    expected the seq after its own event is told what holds that seq."""
    key = SAMPLES["OpenAI Token"][0][0]
    with EventStore.open(backend_url, redact_secrets=True) as store:
        s = store.create_session("s")
        e0 = s.append("user/message", {"content": key}, expected_seq=0)
        assert (e0.seq, s.next_seq()) == (0, 2)
        with pytest.raises(SeqConflict, match=r"^session 's': expected seq 1, but the next seq is 2: seq 1 is the "
                                              r"redaction event of seq 0, which held a secret \(redact_secrets=True"):
            s.append("user/message", {"content": "hi"}, expected_seq=e0.seq + 1)
        with pytest.raises(SeqConflict, match="seq 1 is the redaction event of seq 0"):
            s.append_many([("user/message", {"content": key})], expected_seq=1)
        batch = s.append_many([("user/message", {"content": key}), ("user/message", {"content": "x"}),
                               ("user/message", {"content": key})], expected_seq=s.next_seq())
        assert [(x.seq, x.type) for x in batch] == [(2, "user/message"), (4, "user/message"), (5, "user/message")]
        assert "".join(x.type[0] for x in s.events()) == "ururuur"  # (u: user/message, r: redaction)
        with pytest.raises(SeqConflict) as plain:  # a seq no redaction event holds: the plain message
            s.append("user/message", {"content": "y"}, expected_seq=4)
        assert str(plain.value) == "session 's': expected seq 4, but the next seq is 7"


def test_redact_secrets_through_the_async_store(db_path: Path):
    from eventstore.core.aio import AsyncEventStore

    async def main():
        async with AsyncEventStore.open(db_path, redact_secrets=True) as store:
            s = await store.create_session("a")
            e = await s.append("user/message", {"content": SAMPLES["Slack Token"][0][0]})
            return e.payload

    assert asyncio.run(main()) == {"content": "[redacted: secret: Slack Token]"}
    assert b"xoxb-" not in _database_bytes(db_path)


def _write_session(path: Path, sid: str, payloads: list[tuple[str, dict]], meta: dict | None = None) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({"type": "session/meta", "id": sid, **(meta or {})}) + "\n")
        for seq, (t, p) in enumerate(payloads):
            f.write(json.dumps({"type": t, "seq": seq, "ts": 1700000000 + seq, **p}) + "\n")


def test_import_redact_secrets_jsonl(backend_url: str, db_path: Path, tmp_path: Path):
    src = tmp_path / "s.jsonl"
    secret = SAMPLES["Google API Key"][0][1]
    _write_session(src, "imp", meta={"gh": SAMPLES["GitHub Token"][0][0]}, payloads=[("user/message", {"content": "hi"}),
                                ("tool/result", {"tool_call_id": "c", "content": SAMPLES["Google API Key"][0][0]}),
                                ("user/message", {"content": "and " + SAMPLES["AWS Access Key"][0][0]}),
                                ("assistant/message", {"content": "done"})])
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", backend_url, "import", "--redact-secrets", str(src)])
    assert r.exit_code == 0 and "events: 6" in r.stdout, r.output
    with EventStore.open(backend_url) as store:
        assert [(e.seq, e.type) for e in store.session("imp").events()] == [
            (0, "user/message"), (1, "tool/result"), (2, "redaction"), (3, "user/message"), (4, "redaction"),
            (5, "assistant/message")]
        _check_redacted_before_storing(store, "imp")
        assert json.loads(store.session_meta_json("imp")) == {"gh": "[redacted: secret: GitHub Token, Basic Auth Credentials]"}
    # verify gives the redaction event's ts (the event's own, from the file) as that, not as a time of redaction
    r = runner.invoke(cli, ["--db", backend_url, "verify", "--ignore", "orphan_result"])
    assert r.exit_code == 0 and "seq 1: redacted content by " in r.stdout, r.output
    assert "recorded at seq 2 with the event's time, 2023-11-14 22:13:21 UTC); redacted before it was stored" \
        in r.stdout and " on 2023" not in r.stdout
    # the same file again: the same rows, skipped; without the flag it would store the secret: refused
    r = runner.invoke(cli, ["--db", backend_url, "import", "--redact-secrets", str(src)])
    assert r.exit_code == 0 and "skipped: 1" in r.stdout, r.output
    r = runner.invoke(cli, ["--db", backend_url, "import", str(src)])
    assert r.exit_code == 1 and "is already stored with other" in r.stderr
    if backend_url == str(db_path):
        data = _database_bytes(db_path)
        assert secret.encode() not in data and b"ghp_R4nd0m" not in data


def test_import_redact_secrets_over_many_batches(db_path: Path, tmp_path: Path):
    """A file longer than one batch and one chunk: the rows after each secret move on and are
    chained again across batches and transactions."""
    from eventstore.io import bulk

    n = bulk.BATCH_ROWS * 2 + 500
    secret_at = {7, bulk.BATCH_ROWS - 1, bulk.BATCH_ROWS, bulk.BATCH_ROWS + 3, n - 1}
    src = tmp_path / "long.jsonl"
    _write_session(src, "long", [("user/message", {"content": SAMPLES["GitLab Token"][0][0] if i in secret_at
                                                    else f"line {i}"}) for i in range(n)])
    r = CliRunner().invoke(cli, ["--db", str(db_path), "import", "--redact-secrets", str(src)])
    assert r.exit_code == 0 and f"events: {n + len(secret_at)}" in r.stdout, r.output
    with EventStore.open(db_path) as store:
        redactions = _check_redacted_before_storing(store, "long")
        assert len(redactions) == len(secret_at)
        texts = [e.payload["content"] for e in store.session("long").events() if e.type == "user/message"]
        assert texts == [("[redacted: secret: GitLab Token]" if i in secret_at else f"line {i}") for i in range(n)]
    assert b"glpat-xY7z" not in _database_bytes(db_path)
    r = CliRunner().invoke(cli, ["--db", str(db_path), "verify"])
    assert r.exit_code == 0 and "OK" in r.output, r.output


def test_import_redact_secrets_transcript_and_its_growth(db_path: Path, tmp_path: Path):
    """A Claude Code transcript whose agent read a .env file: imported with --redact-secrets,
    imported again (nothing new), then grown (only the new lines are appended)."""
    original = ROOT / "tests" / "transcripts_data" / "claude-code" / "v1.0-split-blocks.jsonl"
    lines = original.read_text().splitlines(keepends=True)
    first = json.loads(lines[1])
    assert first["type"] == "user"
    secret = SAMPLES["OpenAI Token"][0][1]
    first["message"]["content"][0]["text"] += "\nmy key: " + secret
    path = tmp_path / "t.jsonl"
    half = len(lines) // 2
    path.write_text(lines[0] + json.dumps(first) + "\n" + "".join(lines[2:half]))
    runner = CliRunner()
    args = ["--db", str(db_path), "import", "--redact-secrets", str(path)]
    r = runner.invoke(cli, args)
    assert r.exit_code == 0 and "0 appended), events: 21," in r.stdout, r.output
    r = runner.invoke(cli, args)  # nothing new: no conflict with the stored (redacted) events
    assert r.exit_code == 0 and "(0 new, 0 appended), events: 0," in r.stdout, r.output
    with open(path, "a") as f:
        f.write("".join(lines[half:]))
    r = runner.invoke(cli, args)
    assert r.exit_code == 0 and " appended), events: " in r.stdout and "(0 new, 0 appended)" not in r.stdout, r.output
    assert runner.invoke(cli, ["--db", str(db_path), "scan"]).exit_code == 0
    with EventStore.open(db_path) as store:
        found = [len(_check_redacted_before_storing(store, i.id)) for i in store.sessions()]
        assert sorted(found) == [0, 1]
    assert secret.encode() not in _database_bytes(db_path)


# --- redact --found ----------------------------------------------------------------------------

def test_redact_usage_errors(db_path: Path):
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "--found", "s", "3"])
    assert r.exit_code == 2 and "--found redacts what scan finds" in r.output
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "s"])
    assert r.exit_code == 2 and "give SESSION_ID and SEQ" in r.output
    # a mistyped path: refused as scan refuses it, and no new database (nor its lock file) is left
    said = f"error: no database at {db_path} (create one with 'eventstore init', 'import' or 'demo')\n"
    for args in (["redact", "--found"], ["redact", "x", "1", "--reason", "y"], ["scan"]):
        r = runner.invoke(cli, ["--db", str(db_path), *args])
        assert (r.exit_code, r.stderr) == (2 if args == ["scan"] else 1, said), args
        assert list(db_path.parent.iterdir()) == [], args


@pytest.mark.skipif(not hasattr(EventStore, "redact"), reason="EventStore.redact is not on this branch yet")
def test_redact_found_redacts_what_scan_finds(db_path: Path):
    with EventStore.open(db_path) as store:
        secrets = _store_with_secrets(store)
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "--found"])
    assert r.exit_code == 1, r.output  # the meta's secret cannot be redacted: said, and the status is 1
    assert "redacted session 'leaky' seq 1: tool_calls[0].function.arguments (secret: Basic Auth Credentials)" \
        in r.stdout
    assert "not redacted: session 'leaky' meta: env.GITHUB_TOKEN" in r.stderr
    r = runner.invoke(cli, ["--db", str(db_path), "scan", "--json"])
    assert [f["seq"] for f in json.loads(r.stdout)] == [None]
    with EventStore.open(db_path) as store:
        assert _log_problems(store) == []
    data = _database_bytes(db_path)
    assert [s for s in secrets[1:] if s.encode() in data] == []


def test_redact_secrets_idempotent_retry_of_an_append(db_path: Path):
    """An append retried with its event_id (its first answer lost) gets the stored, redacted
    event back; the same key with other content is still refused."""
    from eventstore.errors import IdempotencyConflict

    with EventStore.open(db_path, redact_secrets=True) as store:
        s = store.create_session("r")
        payload = {"content": SAMPLES["Stripe Access Key"][0][0]}
        first = s.append("user/message", payload, event_id="k1")
        again = s.append("user/message", payload, event_id="k1")
        assert again == first and first.payload["content"] == "[redacted: secret: Stripe Access Key]"
        assert s.next_seq() == 2
        with pytest.raises(IdempotencyConflict):
            s.append("user/message", {"content": "other"}, event_id="k1")


def test_import_redact_secrets_append_to_a_grown_file(db_path: Path, tmp_path: Path):
    """--append past a stored head: the file's stored part is rewritten as before (and
    compares equal), its new events land at the seqs after the redaction events."""
    src = tmp_path / "g.jsonl"
    events = [("user/message", {"content": "a"}), ("tool/result", {"tool_call_id": "c", "content":
                                                                   SAMPLES["Slack Token"][0][0]})]
    _write_session(src, "grow", events)
    runner = CliRunner()
    args = ["--db", str(db_path), "import", "--redact-secrets", "--append", str(src)]
    assert runner.invoke(cli, args).exit_code == 0
    events += [("user/message", {"content": "b " + SAMPLES["Google API Key"][0][0]}), ("user/message", {"content": "c"})]
    _write_session(src, "grow", events)
    r = runner.invoke(cli, args)
    assert r.exit_code == 0 and "(0 new, 1 appended), events: 3," in r.stdout, r.output
    with EventStore.open(db_path) as store:
        assert [e.type for e in store.session("grow").events()] == [
            "user/message", "tool/result", "redaction", "user/message", "redaction", "user/message"]
        _check_redacted_before_storing(store, "grow")
    assert b"xoxb-" not in _database_bytes(db_path) and b"AIzaSy" not in _database_bytes(db_path)


def test_non_ascii_text_around_secrets():
    """lower() may lengthen a text (İ is two characters lower-cased): the page search maps
    each needle to its own text all the same, and the detectors see the original."""
    texts = ["İ" * 30 + " AKIAQ3EGRT7XZJ4KPL2M", "ordinary 文字", 'İstanbul: client_secret = "q8Zr2mKx7VbN4cLp9TyW3sDf"',
             "İİ", "token"]
    assert candidates(texts) == [0, 2, 4]
    assert scan_payload({"a b": texts[0], "x": [1, None, {"y": texts[2]}]}) == [
        (("a b",), "AWS Access Key", "AKIAQ3EGRT7XZJ4KPL2M"),
        (("x", 2, "y"), "Secret Assignment", "q8Zr2mKx7VbN4cLp9TyW3sDf")]
    assert path_text(("a b", 0, "c")) == '["a b"][0].c'


def test_scan_and_redact_secrets_as_the_postgres_roles(pg_server):
    """The writer role appends through the secret filter; the auditor (who may only read)
    scans, and so does the owner: each sees the one secret written without the filter."""
    from test_pg_attacks import as_readme

    with as_readme(pg_server) as (url, _tag):
        with EventStore.open(url["writer"], redact_secrets=True) as store:
            e = store.session("s").append("user/message", {"content": SAMPLES["Anthropic API Key"][0][0]})
            assert e.payload == {"content": "[redacted: secret: Anthropic API Key]"}
        with EventStore.open(url["writer"]) as store:
            store.session("s").append("user/message", {"content": SAMPLES["Slack Token"][0][0]})
        for role in ("auditor", "owner"):
            r = CliRunner().invoke(cli, ["--db", url[role], "scan", "--json"])
            assert r.exit_code == 1, (role, r.output)
            assert [(f["seq"], f["kind"]) for f in json.loads(r.stdout)] == [(5, "Slack Token")]
            assert "xoxb-1234" not in r.output


def test_scan_exit_status_tells_findings_from_errors(db_path: Path, tmp_path: Path):
    """0 clean, 1 secrets found, 2 nothing could be scanned (one line, no traceback)."""
    import subprocess
    import sys

    with EventStore.open(db_path) as store:
        _store_with_secrets(store)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)

    def scan(db, *args):
        return subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db), "scan", *args],
                              capture_output=True, text=True, cwd=ROOT)

    assert scan(db_path, "clean").returncode == 0
    assert scan(db_path, "leaky").returncode == 1
    for db, args, words in [(db_path, ["nope"], "session 'nope' not found"),
                            (db_path, ["clean", "nope"], "session 'nope' not found"),
                            (tmp_path / "missing.db", [], "missing.db"),
                            (junk, [], "junk.db")]:
        p = scan(db, *args)
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "2 when it cannot" in CliRunner().invoke(cli, ["scan", "--help"]).output
