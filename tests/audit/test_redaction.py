"""Redaction (#35, docs/redaction.md): a field forgotten, the proof of the rest kept.

On every backend whose store has the Redactor capability (the others skip by that check):
the marker in the projection, verify listing the redaction and still passing, an older
checkpoint still passing, tampering still found, export and import of a redacted session.
On SQLite: the trigger's one exception and everything else refused, the secret's bytes gone
from the file, its -wal and -shm, a legacy database's events redacted.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import DATA, ROOT, db_rows

from eventstore import ConflictError, EventStore, InvalidEvent
from eventstore.audit import anchor
from eventstore.audit import verify as audit
from eventstore.backends.capabilities import Redactor, SearchIndex
from eventstore.backends.fallbacks import NoRedactor
from eventstore.cli import cli
from eventstore.log.codec import dumps, loads
from eventstore.log.commit import key_salts_of, value_digest

# long and unique: found in the raw bytes only if it is really there
SECRET = "sk-proj-QzX7redactTESTsecret9f3b2c41d8e6a0775e"
CALL = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"cat .env"}'}}


def _can_redact(store: EventStore) -> None:
    if isinstance(store.capability(Redactor), NoRedactor):
        pytest.skip(f"the {store._backend.name} backend has no Redactor capability yet")


def _session(store: EventStore, sid: str = "s") -> None:
    s = store.create_session(sid)
    s.append("user/message", {"content": "show me the env"})
    s.append("assistant/message", {"content": None, "tool_calls": [CALL]})
    s.append("tool/result", {"tool_call_id": "call_1", "content": f"OPENAI_API_KEY={SECRET}\nDEBUG=1"})
    s.append("assistant/message", {"content": "done"})


def test_a_redacted_field_reads_as_its_marker_and_verify_lists_it(store):
    _can_redact(store)
    _session(store)
    before = anchor.make_checkpoint(store.capability(audit.AuditReads))
    done = store.redact("s", 2, ["content"], reason="api key", by="alice")
    assert (done.seq, done.redaction_seq, done.paths, done.by) == (2, 4, [["content"]], "alice")
    msgs = store.session("s").derive_messages()
    assert msgs[2] == {"role": "tool", "tool_call_id": "call_1", "content": "[redacted: api key]"}
    assert SECRET not in store.session("s").messages_json()
    [event] = [e for e in store.session("s").events() if e.seq == 4]
    assert event.type == "redaction" and event.payload["event_seq"] == 2 and event.payload["by"] == "alice"
    assert set(event.payload["digests"]) == {"content"} and "salts" not in event.payload
    [(salt,)] = db_rows(store, "SELECT salt FROM events WHERE session_id = 's' AND seq = 2")
    assert set(key_salts_of(bytes(salt))) == {"tool_call_id"}  # kept with the content, not in the log
    report = audit.verify(store._backend)
    assert report.ok, report.findings
    [r] = report.redactions
    assert (r.session_id, r.seq, r.redaction_seq, r.paths, r.reason, r.by, r.kind) == \
        ("s", 2, 4, [["content"]], "api key", "alice", "salted")
    assert "untouched top-level key" in r.proven and "api key" in str(r)
    # a checkpoint taken before the redaction still verifies: no stored hash changed
    assert anchor.check_checkpoint(store.capability(audit.AuditReads), before) == []


def test_a_deep_tool_call_path_keeps_the_pairing_and_a_whole_tool_calls_keeps_an_array(store):
    _can_redact(store)
    _session(store)
    store.redact("s", 1, ["tool_calls[0].function.arguments"], reason="cmd")
    call = store.session("s").derive_messages()[1]["tool_calls"][0]
    assert call == {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "[redacted: cmd]"}}
    done = store.redact("s", 1, None, reason="all")  # the whole payload: each call keeps its id and shape
    # (the arguments, redacted already, keep their marker)
    assert done.paths == [["content"], ["tool_calls", 0, "function", "name"]]
    assert done.already == [["tool_calls", 0, "function", "arguments"]]
    msg = store.session("s").derive_messages()[1]
    assert isinstance(msg["tool_calls"], list) and msg["tool_calls"][0]["id"] == "call_1"
    assert msg["tool_calls"][0]["function"] == {"name": "[redacted: all]", "arguments": "[redacted: cmd]"}
    report = audit.verify(store._backend)
    assert report.ok, report.findings
    assert [(r.seq, r.kind) for r in report.redactions] == [(1, "salted"), (1, "salted")]


@pytest.mark.parametrize("sql, seq", [
    ("UPDATE events SET payload = json_set(payload, '$.tool_call_id', 'call_2') WHERE seq = 2", 2),  # a kept key
    ("UPDATE events SET payload = json_set(payload, '$.content', 'other') WHERE seq = 2", 2),  # the marker
    ("UPDATE events SET payload = json_set(payload, '$.reason', 'other') WHERE seq = 4", 4),  # its record
    ("UPDATE events SET salt = CAST('{\"tool_call_id\":\"00112233445566778899aabbccddeeff\"}' AS BLOB) "
     "WHERE seq = 2", 2),  # a kept key's salt
    ("UPDATE events SET salt = x'00112233445566778899aabbccddeeff' WHERE seq = 0", 0),  # a salt
    ("UPDATE events SET salt = NULL WHERE seq = 3", 3),  # a salt removed
])
def test_tampering_after_a_redaction_is_still_found(tmp_path, sql, seq):
    db = tmp_path / "t.db"
    with EventStore.open(db) as store:
        _session(store)
        store.redact("s", 2, ["content"], reason="api key")
        assert audit.verify(store._backend).ok
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute(sql)
    raw.close()
    with EventStore.open(db, readonly=True) as store:
        found = [(f.kind, f.seq) for f in audit.verify(store._backend).findings]
    assert ("hash", seq) in found and ("trigger", None) in found, found


def test_the_trigger_accepts_only_the_redactions_update(sqlite_store, db_path):
    """Every other UPDATE stays refused (ES004), also right after a redaction event."""
    store = sqlite_store
    _session(store)
    store.redact("s", 2, ["content"], reason="key")  # the redaction event is the session's last
    raw = sqlite3.connect(db_path, isolation_level=None)
    marked = raw.execute("SELECT payload FROM events WHERE seq = 2").fetchone()[0]
    for sql in [
        "UPDATE events SET payload = '{}' WHERE seq = 2",
        "UPDATE events SET ts = ts + 1 WHERE seq = 2",
        "UPDATE events SET hash = 'x' WHERE seq = 2",
        "UPDATE events SET type = 'note' WHERE seq = 2",
        "UPDATE events SET salt = x'00' WHERE seq = 2",
        "UPDATE events SET payload = json_set(payload, '$.tool_call_id', '[redacted: key]') WHERE seq = 2",
        "UPDATE events SET payload = json_set(payload, '$.content', '[redacted: key]') WHERE seq = 3",  # not named
        "UPDATE events SET payload = json_set(payload, '$.content', '[redacted: key]'), salt = NULL WHERE seq = 0",
        "DELETE FROM events WHERE seq = 2",
        # the committed redaction's UPDATE replayed by another connection: same markers, its
        # key salts dropped (verify would find the hash no longer chains); revision 0340
        "UPDATE events SET salt = NULL WHERE session_id = 's' AND seq = 2",
        "UPDATE events SET payload = payload WHERE seq = 2",
    ]:
        with pytest.raises(sqlite3.IntegrityError, match="ES004"):
            raw.execute(sql)
    # a redaction event that is not the last one allows nothing
    store.session("s").append("note", {"n": 1})
    with pytest.raises(sqlite3.IntegrityError, match="ES004"):
        raw.execute("UPDATE events SET payload = ?, salt = NULL WHERE seq = 2", (marked,))
    # a forged redaction event appended without the update, naming a salted event by its hash
    h = raw.execute("SELECT hash FROM events WHERE seq = 1").fetchone()[0]
    store.session("s").append("redaction", {"event_seq": 1, "paths": [["content"]], "reason": "x", "hash": h})
    with pytest.raises(sqlite3.IntegrityError, match="ES004"):  # a salted event needs its digests recorded
        raw.execute("UPDATE events SET payload = json_set(payload, '$.content', '[redacted: x]'), salt = NULL "
                    "WHERE seq = 1")
    raw.close()


def test_the_secrets_bytes_leave_the_file_its_wal_and_the_search_index(tmp_path):
    db = tmp_path / "agent.db"
    with EventStore.open(db) as store:
        _session(store)
        for i in range(200):  # pages around it, and a WAL with history
            store.session("s").append("user/message", {"content": f"filler {i} " * 20})
        store.capability(SearchIndex).search_catch_up()
        assert store.capability(SearchIndex).search(SECRET.split("-")[-1], raw=False, session_id=None, type_=None,
                                                    limit=5, rank_window=100)
        store._backend._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

        def holders() -> list[str]:
            out = []
            for f in sorted(tmp_path.iterdir()):
                data = f.read_bytes()
                if SECRET.encode() in data or SECRET.lower().encode() in data or SECRET.split("-")[-1].lower().encode() in data:
                    out.append(f.name)
            return out

        assert "agent.db" in holders()  # the test can see it where it is
        done = store.redact("s", 2, ["content"], reason="api key")
        assert done.erasure is None
        assert holders() == []
        assert not store.capability(SearchIndex).search(SECRET.split("-")[-1], raw=False, session_id=None,
                                                        type_=None, limit=5, rank_window=100)
        assert store.capability(SearchIndex).search("DEBUG", raw=False, session_id=None, type_=None, limit=5,
                                                    rank_window=100) == []  # the whole content was redacted
    assert [f.name for f in tmp_path.iterdir() if SECRET.encode() in f.read_bytes()] == []
    with EventStore.open(db, readonly=True) as store:
        assert audit.verify(store._backend).ok


def test_a_redacted_session_exports_imports_and_verifies(store, tmp_path):
    _can_redact(store)
    _session(store)
    store.redact("s", 2, ["content"], reason="api key")
    buf = io.BytesIO()
    store.export_jsonl("s", buf)
    data = buf.getvalue()
    assert SECRET.encode() not in data and b'"[redacted: api key]"' in data and b'"type":"redaction"' in data
    with EventStore.open(tmp_path / "copy.db") as other:
        other.import_jsonl(io.BytesIO(data))
        report = audit.verify(other._backend)
        assert report.ok, report.findings
        assert [(r.seq, r.kind) for r in report.redactions] == [(2, "as_stored")]
        out = io.BytesIO()
        other.export_jsonl("s", out)
        assert out.getvalue() == data


def test_copy_of_a_redacted_session_keeps_its_hashes(store, tmp_path):
    from eventstore.core.copy import copy_sessions

    _can_redact(store)
    _session(store)
    store.redact("s", 2, ["content"], reason="api key")
    with EventStore.open(tmp_path / "copy.db") as other:
        [result] = copy_sessions(store, other)
        assert result.status == "copied" and result.error is None
        report = audit.verify(other._backend)
        assert report.ok, report.findings
        assert report.heads == audit.verify(store._backend).heads
        assert [(r.seq, r.kind) for r in report.redactions] == [(2, "salted")]


def test_a_legacy_event_is_redacted_and_verify_says_what_is_proven(tmp_path):
    db = tmp_path / "old.db"
    shutil.copyfile(DATA / "schema-0290.db", db)
    with EventStore.open(db) as store:
        sid = store.sessions()[0].id
        seq = next(e.seq for e in store.session(sid).events() if e.payload)
        store.redact(sid, seq, None, reason="gdpr")
        report = audit.verify(store._backend)
        assert report.ok, report.findings
        [r] = report.redactions
        assert (r.seq, r.kind) == (seq, "legacy") and "position and stored hash" in r.proven
        rec = [e for e in store.session(sid).events() if e.type == "redaction"][0].payload
        assert "digests" not in rec and "salts" not in rec and rec["hash"]


def test_bad_redactions_say_which_session_and_seq(store):
    _can_redact(store)
    _session(store)
    with pytest.raises(ConflictError, match="session 's', seq 9: no such event"):
        store.redact("s", 9, reason="x")
    with pytest.raises(InvalidEvent, match="session 's', seq 2: the payload has no nothere"):
        store.redact("s", 2, ["nothere"], reason="x")
    with pytest.raises(InvalidEvent, match="event_id"):
        store.session("s").append("note", {"a": 1}, event_id="k")
        store.redact("s", 4, ["event_id"], reason="x")
    with pytest.raises(InvalidEvent, match="reason"):
        store.redact("s", 2, reason="")
    with pytest.raises(InvalidEvent, match="control character"):
        store.redact("s", 2, reason="two\nlines")
    backend = store.capability(Redactor)
    with pytest.raises(ConflictError, match="session 's', seq 2"):  # the event changed since it was read
        backend.redact_event("s", 2, "0" * 64, "{}", None, 1.0, dumps({"event_seq": 2}), b"\0" * 16, "{}")
    assert audit.verify(store._backend).ok


def test_a_backend_without_the_capability_refuses():
    from dict_backend import DictBackend

    with EventStore(DictBackend.open("dict:redact")) as store:
        store.create_session("s").append("user/message", {"content": "x"})
        with pytest.raises(Exception, match="cannot redact"):
            store.redact("s", 0, reason="x")


def test_the_cli_redacts_and_verify_lists_it(db_path):
    with EventStore.open(db_path) as store:
        _session(store)
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", str(db_path), "redact", "s", "2", "--path", "content", "--reason", "api key"])
    assert r.exit_code == 0, r.output
    assert "redacted session 's' seq 2: content (api key)" in r.output and "at seq 4" in r.output
    r = runner.invoke(cli, ["--db", str(db_path), "verify"])
    assert r.exit_code == 0 and "redaction: session s seq 2: redacted content" in r.output
    for args, words in [(["s", "7", "--reason", "x"], "session 's', seq 7: no such event"),
                        (["s", "2", "--path", "x.y", "--reason", "x"], "session 's', seq 2: the payload has no x.y"),
                        (["nope", "0", "--reason", "x"], "session 'nope' not found")]:
        p = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db_path), "redact", *args],
                           capture_output=True, text=True, cwd=ROOT)
        assert p.returncode == 1 and words in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_redaction_record_rebuilds_the_commit_payload():
    """The record's digests and key salts give back the commit payload the hash covers."""
    from eventstore.log.commit import commit_json, key_salts_of, new_salts, rebuilt_commit_json
    from eventstore.log.redaction import redacted_payload, redaction_record

    salt = new_salts(1)[0]
    payload = loads(dumps({"content": SECRET, "tool_calls": [CALL], "n": 1}))
    paths, new, _ = redacted_payload("s", 0, payload, ["content", "tool_calls[0].function.arguments"], "k")
    rec, kept = redaction_record(0, paths, "k", "me", "h", payload, salt, [])
    assert set(rec["digests"]) == {"content", "tool_calls"} and "salts" not in rec
    salts = key_salts_of(kept)
    assert set(salts) == {"n"}
    assert rebuilt_commit_json(new, rec["digests"], salts) == commit_json(salt, payload)
    assert SECRET not in dumps(rec) and SECRET not in dumps(new)


def test_a_second_redaction_of_one_event_leaves_no_digest_a_guess_can_be_tested_against(store):
    """Redacting one key, then another of the same event: the second key's salt stayed in
    the event's row (not in the first record), so it goes with its value; nothing kept in
    the database lets anyone test the 10,000 PINs against the second digest; verify passes,
    listing both."""
    _can_redact(store)
    s = store.create_session("pin")
    s.append("user/message", {"content": "my PIN is 4821", "note": "call me"})
    store.redact("pin", 0, ["note"], reason="private")
    store.redact("pin", 0, ["content"], reason="pin")
    texts = [t for (t,) in db_rows(store, "SELECT payload FROM events WHERE session_id = 'pin' ORDER BY seq")]
    [(salt,)] = db_rows(store, "SELECT salt FROM events WHERE session_id = 'pin' AND seq = 0")
    assert salt is None  # no key is left unredacted: no key salt either
    second = loads(texts[2])["digests"]["content"]
    published = [bytes.fromhex(v) for t in texts for v in (loads(t).get("salts") or {}).values()]
    assert not published
    guesses = {value_digest(ks, f"my PIN is {pin:04d}") for ks in published for pin in range(10_000)}
    assert second not in guesses and all("4821" not in t for t in texts)
    report = audit.verify(store._backend)
    assert report.ok, report.findings
    assert [(r.seq, r.paths, r.kind) for r in report.redactions] == [(0, [["note"]], "salted"),
                                                                      (0, [["content"]], "salted")]


def test_a_redaction_event_cannot_be_redacted(store, backend_url):
    """A redaction event is the proof of another one: the store refuses it, naming the
    session and seq, and nothing changes; verify still passes."""
    _can_redact(store)
    _session(store)
    done = store.redact("s", 2, ["content"], reason="api key")
    before = db_rows(store, "SELECT seq, payload, hash, salt FROM events WHERE session_id = 's' ORDER BY seq")
    for paths in (None, ["reason"], ["digests"]):
        with pytest.raises(InvalidEvent, match=f"session 's', seq {done.redaction_seq}: a redaction event"):
            store.redact("s", done.redaction_seq, paths, reason="hide it")
    assert db_rows(store, "SELECT seq, payload, hash, salt FROM events WHERE session_id = 's' ORDER BY seq") == before
    r = CliRunner().invoke(cli, ["--db", backend_url, "redact", "s", str(done.redaction_seq), "--reason", "x"])
    assert r.exit_code == 1 and "a redaction event is the proof" in r.output and "Traceback" not in r.output
    assert audit.verify(store._backend).ok


def test_the_sqlite_trigger_refuses_to_redact_a_redaction_event(sqlite_store):
    """Below the store: an UPDATE of a redaction event in the redaction's form, right after
    a redaction event naming it, is refused by the trigger (ES004)."""
    _session(sqlite_store)
    done = sqlite_store.redact("s", 2, ["content"], reason="api key")
    conn = sqlite3.connect(sqlite_store._backend._file, isolation_level=None)
    try:
        seq, h, ts = conn.execute("SELECT seq, hash, ts FROM events WHERE session_id = 's' AND seq = ?",
                                  (done.redaction_seq,)).fetchone()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                     "SELECT max(position) + 1, 's', ?, 'redaction', ?, ?, ? FROM events",
                     (seq + 1, ts + 1, dumps({"event_seq": seq, "paths": [["reason"]], "reason": "x", "by": "me",
                                              "hash": h}), "0" * 64))
        with pytest.raises(sqlite3.IntegrityError, match="ES004"):
            conn.execute("UPDATE events SET payload = json_set(payload, '$.reason', '[redacted: x]') "
                         "WHERE session_id = 's' AND seq = ?", (seq,))
        conn.execute("ROLLBACK")
    finally:
        conn.close()
