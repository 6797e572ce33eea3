"""Verifying the whole database: checkpoints kept outside the log, the schema, storage
damage, the sessions table, and appends that a trigger silently dropped."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, db_rows, hashed_line

from eventstore import DatabaseError, EventStore, SchemaOutdated
from eventstore.audit import anchor, integrity
from eventstore.backends.sqlite.schema import GUARDS
from eventstore.cli import cli
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.schema import SCHEMA_REVISION


def run(db, *args: str):
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


def findings(db, **kw) -> list[tuple[str, str | None, int | None, str]]:
    return [(f.kind, f.session_id, f.seq, f.message) for f in integrity.verify_database(db, **kw).findings]


@pytest.fixture
def loaded(tmp_path: Path) -> Path:
    """A database holding three clean conformance sessions, closed (its WAL checkpointed)."""
    db = tmp_path / "events.db"
    with EventStore.open(db) as store:
        for name in ("demo", "parallel_tools", "unicode"):
            store.import_jsonl(DATA / f"{name}.jsonl")
    return db


@pytest.fixture
def any_loaded(backend_url: str) -> str:
    """``loaded`` on each backend: the database's URL (an SQLite path as text)."""
    with EventStore.open(backend_url) as store:
        for name in ("demo", "parallel_tools", "unicode"):
            store.import_jsonl(DATA / f"{name}.jsonl")
    return backend_url


def is_pg(db) -> bool:
    return str(db).startswith("postgresql")


class Attacker:
    """A plain DB-API connection with write access and the append-only guards off: SQLite
    drops the triggers (and puts them back on close); on PostgreSQL a superuser sets
    ``session_replication_role = replica``. ``ph`` is the placeholder (``?`` or ``%s``)."""

    def __init__(self, db, guards_off: bool = True):
        self.db = db
        self.guards_off = guards_off
        if is_pg(db):
            import psycopg

            self.conn = psycopg.connect(str(db), autocommit=True)
            self.ph = "%s"
            if guards_off:
                self.conn.execute("SET session_replication_role = replica")
        else:
            self.conn = sqlite3.connect(db, isolation_level=None)
            self.ph = "?"
            if guards_off:
                for name in GUARDS:
                    self.conn.execute(f"DROP TRIGGER {name}")

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql.replace("?", self.ph), params)

    def close(self) -> None:
        if self.guards_off and not is_pg(self.db):
            for ddl in GUARDS.values():
                self.conn.execute(ddl)
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def tamper(db, *statements: str, params=()) -> None:
    """Run SQL as an attacker with write access would: guards off, then back on."""
    with Attacker(db) as conn:
        for st in statements:
            conn.execute(st, params)


def edit_payload(conn: Attacker, sid: str, seq: int, **changes) -> None:
    """Rewrite one stored payload (canonical JSON, as the append path writes it)."""
    from eventstore.log.codec import dumps

    payload = json.loads(conn.execute("SELECT payload FROM events WHERE session_id = ? AND seq = ?",
                                      (sid, seq)).fetchone()[0])
    payload.update(changes)
    conn.execute("UPDATE events SET payload = ? WHERE session_id = ? AND seq = ?", (dumps(payload), sid, seq))


def rechain(conn, sid: str) -> None:
    """Recompute a session's whole hash chain in place (what a careful forger does);
    ``conn`` an :class:`Attacker` or a plain sqlite3 connection."""
    prev = genesis_hash(sid)
    for position, seq, type_, ts, payload, salt in conn.execute(
            "SELECT position, seq, type, ts, payload, salt FROM events WHERE session_id = ? ORDER BY seq",
            (sid,)).fetchall():
        prev = chain_hash(prev, hashed_line(type_, seq, ts, payload, salt))
        conn.execute("UPDATE events SET hash = ? WHERE position = ?", (prev, position))


def take_checkpoint(db, out: Path, *extra: str) -> dict:
    r = run(db, "checkpoint", "-o", str(out), *extra)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def verify_cli(db, *args: str):
    return run(db, "verify", *args)


# --- checkpoints ---------------------------------------------------------------------------

def test_checkpoint_document_has_position_heads_and_a_root_over_them(any_loaded, tmp_path):
    doc = take_checkpoint(any_loaded, tmp_path / "cp.json")
    assert doc["format"] == "eventstore-checkpoint/1"
    assert doc["position"] == 15 + 23 + sum(1 for _ in open(DATA / "unicode.jsonl")) - 1
    assert [e["id"] for e in doc["sessions"]] == sorted(e["id"] for e in doc["sessions"])
    with EventStore.open(any_loaded, readonly=True) as store:
        for e in doc["sessions"]:
            head = db_rows(store, "SELECT hash FROM events WHERE session_id = ? AND seq = ?",
                           (e["id"], e["events"] - 1))[0][0]
            assert e["head"] == head
    assert doc["root"] == anchor.merkle_root(doc["sessions"])
    assert verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json")).exit_code == 0


def test_a_checkpoint_never_overwrites_the_database_it_reads(loaded, tmp_path):
    """-o naming the database, its WAL or a link to it is refused before anything is written."""
    before = loaded.read_bytes()
    (tmp_path / "link.db").symlink_to(loaded)
    for target in (loaded, f"{loaded}-wal", tmp_path / "link.db", f"{tmp_path}/./{loaded.name}"):
        r = run(loaded, "checkpoint", "-o", str(target))
        assert (r.exit_code, r.stderr) == (1, f"error: {target}: is this store's own database file (the checkpoint "
                                              f"would overwrite it)\n")
    assert loaded.read_bytes() == before
    assert findings(loaded) == []


def test_merkle_root_follows_rfc6962():
    import hashlib

    entries = [{"id": f"s{i}", "events": i, "head": "0" * 64, "row": "1" * 64} for i in range(3)]
    leaf = [hashlib.sha256(b"\x00" + json.dumps([e["id"], e["events"], e["head"], e["row"]],
                                                 separators=(",", ":")).encode()).digest() for e in entries]
    left = hashlib.sha256(b"\x01" + leaf[0] + leaf[1]).digest()
    assert anchor.merkle_root(entries) == hashlib.sha256(b"\x01" + left + leaf[2]).hexdigest()
    assert anchor.merkle_root([]) == hashlib.sha256(b"").hexdigest()


def test_log_that_grew_after_the_checkpoint_still_extends_it(any_loaded, tmp_path):
    take_checkpoint(any_loaded, tmp_path / "cp.json")
    with EventStore.open(any_loaded) as store:
        store.session("5a1b896f-beb").append("user/message", {"content": "more"})
        store.create_session("later")
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 0, r.output


def test_truncated_tail_is_caught_against_an_earlier_checkpoint(any_loaded, tmp_path):
    take_checkpoint(any_loaded, tmp_path / "cp.json")
    tamper(any_loaded, "DELETE FROM events WHERE session_id = 'a0c1e2f3-111' AND seq >= 20")
    assert verify_cli(any_loaded).exit_code == 0  # the shorter chain is valid: only the checkpoint shows it
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 1
    assert "session a0c1e2f3-111 seq 20: checkpoint: " in r.output and "cut off: 23 events" in r.output


def test_edited_event_with_recomputed_chain_is_caught(any_loaded, tmp_path):
    take_checkpoint(any_loaded, tmp_path / "cp.json")
    with Attacker(any_loaded) as conn:
        seq = conn.execute("SELECT min(seq) FROM events WHERE session_id = 'a0c1e2f3-111' "
                           "AND type = 'tool/result'").fetchone()[0]
        edit_payload(conn, "a0c1e2f3-111", seq, content="rm -rf /")
        rechain(conn, "a0c1e2f3-111")
    assert verify_cli(any_loaded).exit_code == 0  # the forged chain is valid on its own
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 1
    assert "session a0c1e2f3-111 seq 22: checkpoint:" in r.output and "history was rewritten" in r.output


def test_file_swapped_in_with_vacuum_into_is_caught(loaded, tmp_path):
    take_checkpoint(loaded, tmp_path / "cp.json")
    forged = tmp_path / "forged.db"
    conn = sqlite3.connect(loaded, isolation_level=None)
    conn.execute("VACUUM INTO ?", (str(forged),))
    conn.close()
    conn = sqlite3.connect(forged, isolation_level=None)
    for name in GUARDS:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE events SET ts = ts + 3600 WHERE session_id = '5a1b896f-beb'")
    rechain(conn, "5a1b896f-beb")
    for ddl in GUARDS.values():
        conn.execute(ddl)
    conn.close()
    os.replace(forged, loaded)
    assert verify_cli(loaded).exit_code == 0
    r = verify_cli(loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 1 and "session 5a1b896f-beb seq 14: checkpoint:" in r.output


def test_removed_session_is_caught(any_loaded, tmp_path):
    take_checkpoint(any_loaded, tmp_path / "cp.json")
    tamper(any_loaded, "DELETE FROM events WHERE session_id = '5a1b896f-beb'",
           "DELETE FROM sessions WHERE id = '5a1b896f-beb'")
    assert verify_cli(any_loaded).exit_code == 0
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 1
    assert "session 5a1b896f-beb: checkpoint:" in r.output and "the session is gone (it had 15 events" in r.output


def test_edited_meta_and_backdated_ghost_session_are_caught(any_loaded, tmp_path):
    take_checkpoint(any_loaded, tmp_path / "cp.json")
    tamper(any_loaded, """UPDATE sessions SET meta = '{"owner":"mallory"}' WHERE id = 'a0c1e2f3-111'""",
           "INSERT INTO sessions (id, created_at, meta) VALUES ('ghost', 1000000000, '{}')")
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"))
    assert r.exit_code == 1
    assert "session a0c1e2f3-111: checkpoint:" in r.output and "sessions row (created_at or meta) changed" in r.output
    assert "session ghost: checkpoint:" in r.output and "dated before the checkpoint but is not in it" in r.output
    # without a checkpoint, the ghost's date still contradicts its place in the table
    assert ("session", "ghost") in [(k, s) for k, s, _q, _m in findings(any_loaded)]


def test_a_sessions_own_hash_names_an_edited_meta_or_created_at(any_loaded):
    assert findings(any_loaded) == []  # a fresh store: every session's meta_hash matches
    tamper(any_loaded, """UPDATE sessions SET meta = '{"owner":"mallory"}' WHERE id = 'a0c1e2f3-111'""",
           "UPDATE sessions SET created_at = created_at - 0.5 WHERE id = '5a1b896f-beb'")
    got = sorted((kind, sid, message) for kind, sid, _seq, message in findings(any_loaded))
    assert got == [
        ("session", "5a1b896f-beb", "created_at changed since the session was created (they no longer match its "
                                    "meta_hash)"),
        ("session", "a0c1e2f3-111", "meta changed since the session was created (they no longer match its "
                                    "meta_hash)")]
    r = verify_cli(any_loaded)
    assert r.exit_code == 1
    assert "session a0c1e2f3-111: session: meta changed since the session was created" in r.output
    assert "session 5a1b896f-beb: session: created_at changed since the session was created" in r.output


def test_a_session_row_inserted_by_hand_has_no_meta_hash(any_loaded):
    tamper(any_loaded, "INSERT INTO sessions (id, created_at, meta) VALUES ('ghost', ?, '{}')",
           params=(time.time(),))  # dated now: only its missing hash gives it away
    assert [(k, s, m) for k, s, _q, m in findings(any_loaded)] == [
        ("session", "ghost", "meta_hash is missing: the row was not written by eventstore (added by hand), "
                             "or its hash removed")]


def test_copy_import_and_export_carry_meta_hash(any_loaded, tmp_path):
    from eventstore.core.copy import CopyError, copy_sessions

    with EventStore.open(any_loaded) as store:
        store.create_session("with-meta", meta={"owner": "ada", "n": 1.5, "s": "\u00e9\u2028"})
    copied, imported = tmp_path / "copied.db", tmp_path / "imported.db"
    with EventStore.open(any_loaded) as src, EventStore.open(copied) as dst:
        copy_sessions(src, dst)
    assert run(any_loaded, "export", "with-meta", "-o", str(tmp_path / "m.jsonl")).exit_code == 0
    assert b"meta_hash" not in (tmp_path / "m.jsonl").read_bytes()  # not part of our JSONL format
    assert run(imported, "import", str(tmp_path / "m.jsonl")).exit_code == 0
    for db, n in ((copied, 4), (imported, 1)):
        assert findings(db) == []
        raw = sqlite3.connect(db)
        assert raw.execute("SELECT count(*) FROM sessions WHERE length(meta_hash) = 64").fetchone() == (n,)
        raw.close()
    # a session whose row was edited is not copied: the copy would hide the edit behind a fresh hash
    tamper(any_loaded, """UPDATE sessions SET meta = '{"owner":"eve"}' WHERE id = 'with-meta'""")
    with EventStore.open(any_loaded) as src, EventStore.open(tmp_path / "again.db") as dst:
        [result] = copy_sessions(src, dst, ["with-meta"])
        assert result.status == "failed" and isinstance(result.error, CopyError)
        assert re.match(r"^session 'with-meta': its sessions row does not verify \(meta ", str(result.error))
        assert dst.sessions() == []


def at_revision(url: str, revision: str, *statements: str) -> None:
    """Make the empty database ``url`` as eventstore left it at schema ``revision`` (the
    package's own migrations, up to that one), then run ``statements`` on it."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from eventstore.backends.sqlite.engine import migrations_path

    url = url if is_pg(url) else f"sqlite:///{url}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", migrations_path("postgresql" if is_pg(url) else "sqlite"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def test_a_0150_database_gets_meta_hash_on_upgrade(backend_url):
    from eventstore.log.chain import session_hash

    at_revision(backend_url, "0150", "INSERT INTO sessions (id, created_at, meta) VALUES ('old', 1700000000.25, "
                                     "'{\"owner\":\"ada\"}'), ('older', 1700000001, '{}')")
    with EventStore.open(backend_url) as store:  # upgrades to 0210
        store.session("old").append("user/message", {"content": "after the upgrade"})
    with Attacker(backend_url, guards_off=False) as conn:
        rows = conn.execute("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY id").fetchall()
    assert [(sid, h) for sid, _c, _m, h in rows] == [(sid, session_hash(sid, c, m)) for sid, c, m, _h in rows]
    assert findings(backend_url) == []
    tamper(backend_url, """UPDATE sessions SET meta = '{"owner":"eve"}' WHERE id = 'old'""")
    assert [(k, s) for k, s, _q, _m in findings(backend_url)] == [("session", "old")]


def test_an_older_revision_is_one_finding_that_says_how_to_upgrade(backend_url):
    """Read-only opens do not upgrade: verify says what does, and compares nothing with
    the current schema (an older revision's tables and views are not findings)."""
    at_revision(backend_url, "0210")
    with pytest.raises(SchemaOutdated) as e:
        integrity.open_backend(backend_url, readonly=True)
    assert (e.value.revision, e.value.head) == ("0210", SCHEMA_REVISION)
    who = " as the database's owner" if is_pg(backend_url) else ""
    upgrade = (f" is at schema revision '0210', older than this eventstore's '{SCHEMA_REVISION}': open it once "
               f"for writing ('eventstore init'{who}) to upgrade it")
    for ignored in ([], ["--ignore", "schema"], ["--ignore", "storage"]):  # what was not checked is not OK
        r = verify_cli(backend_url, *ignored)
        assert (r.exit_code, r.stdout.count("\n")) == (1, 1) and r.stdout.startswith("database: schema: "), r.output
        assert r.stdout.endswith(upgrade + "\n"), r.stdout
        assert r.stderr == "not verified: the database could not be opened\n"
    r = run(backend_url, "init")  # a writable open upgrades, and says so once
    assert r.exit_code == 0 and r.stderr.endswith(
        f": upgraded from schema revision 0210 to {SCHEMA_REVISION} (an older eventstore wrote it)\n"), r.output
    r = run(backend_url, "init")
    assert (r.exit_code, r.stderr) == (0, "")
    assert findings(backend_url) == []


def test_signed_checkpoint_and_a_tampered_or_foreign_one(any_loaded, tmp_path):
    key = tmp_path / "key.pem"
    assert run(any_loaded, "keygen", str(key)).exit_code == 0
    assert (key.stat().st_mode & 0o777) == 0o600 and Path(str(key) + ".pub").is_file()
    doc = take_checkpoint(any_loaded, tmp_path / "cp.json", "--key", str(key))
    assert doc["signature"]["algorithm"] == "ed25519"
    pub = str(key) + ".pub"
    assert verify_cli(any_loaded, "--checkpoint", str(tmp_path / "cp.json"), "--public-key", pub).exit_code == 0
    # someone who rewrote the log rewrites the checkpoint too: the signature no longer verifies
    doc["position"] -= 1
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "bad.json"), "--public-key", pub)
    assert r.exit_code == 1 and "the signature does not verify" in r.output
    # ... or signs it with a key of their own
    other = tmp_path / "other.pem"
    run(any_loaded, "keygen", str(other))
    take_checkpoint(any_loaded, tmp_path / "own.json", "--key", str(other))
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "own.json"), "--public-key", pub)
    assert r.exit_code == 1 and "not by the trusted key" in r.output
    # an entry edited to match a forged log: no longer hashes to the root
    doc = json.loads((tmp_path / "cp.json").read_text())
    doc["sessions"][0]["events"] -= 1
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "edited.json"))
    assert r.exit_code == 1 and "do not hash to its root" in r.output
    assert run(any_loaded, "keygen", str(key)).exit_code == 1  # never replaces a key


def test_checkpoint_file_that_is_not_one_is_an_error(any_loaded, tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    r = verify_cli(any_loaded, "--checkpoint", str(tmp_path / "x.json"))
    assert r.exit_code == 1 and "not a checkpoint" in r.output and "unexpected" not in r.output


# --- the schema ------------------------------------------------------------------------------

def test_clean_database_has_no_schema_or_storage_findings(any_loaded):
    assert findings(any_loaded) == []
    assert findings(any_loaded, full=True) == []


def swallow(db, table: str) -> None:
    """An extra trigger that silently drops every row inserted into ``table``: SQLite's
    ``RAISE(IGNORE)``; on PostgreSQL a BEFORE INSERT trigger returning NULL."""
    with Attacker(db, guards_off=False) as conn:
        if is_pg(db):
            conn.execute("CREATE OR REPLACE FUNCTION swallow() RETURNS trigger LANGUAGE plpgsql "
                         "AS $$ BEGIN RETURN NULL; END $$")
            conn.execute(f"CREATE TRIGGER swallow BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION swallow()")
        else:
            conn.execute(f"CREATE TRIGGER swallow BEFORE INSERT ON {table} BEGIN SELECT RAISE(IGNORE); END")


def test_extra_ignore_trigger_is_a_finding_and_an_append_under_it_fails(any_loaded):
    swallow(any_loaded, "events")
    found = [(k, m.split(",")[0]) for k, _s, _q, m in findings(any_loaded)]
    extra = [("schema", "extra trigger swallow on events")]
    if is_pg(any_loaded):
        extra.append(("schema", "extra function swallow()"))
    assert sorted(found) == sorted(extra)
    with EventStore.open(any_loaded) as store:
        s = store.session("5a1b896f-beb")
        with pytest.raises(DatabaseError, match=r"session '5a1b896f-beb' seq 15: .*stored 0 of 1"):
            s.append("user/message", {"content": "lost?"})
        with pytest.raises(DatabaseError, match=r"session '5a1b896f-beb' seqs 15..16: .*stored 0 of 2"):
            s.append_many([("user/message", {"content": "a"}), ("user/message", {"content": "b"})])
        assert s.next_seq() == 15


def test_redefined_messages_view_is_a_finding(any_loaded):
    with Attacker(any_loaded, guards_off=False) as conn:
        if is_pg(any_loaded):
            ddl = conn.execute("SELECT pg_get_viewdef('messages'::regclass)").fetchone()[0].rstrip().rstrip(";")
            conn.execute(f"CREATE OR REPLACE VIEW messages AS SELECT * FROM ({ddl}) AS m WHERE m.role <> 'tool'")
        else:
            ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
            conn.execute(ddl.replace("CREATE VIEW messages", "CREATE VIEW messages_all", 1))
            conn.execute("DROP VIEW messages")
            conn.execute("CREATE VIEW messages AS SELECT * FROM messages_all WHERE role <> 'tool'")
    r = verify_cli(any_loaded)
    assert r.exit_code == 1
    assert "database: schema: view messages differs from its definition" in r.output


def test_renamed_table_and_missing_index_are_findings_not_crashes(loaded):
    conn = sqlite3.connect(loaded, isolation_level=None)
    conn.execute("DROP INDEX events_messages")
    conn.execute("ALTER TABLE events RENAME TO events_old")
    conn.close()
    r = verify_cli(loaded)
    assert r.exit_code == 1 and "unexpected" not in r.output
    assert "extra table events_old" in r.output
    assert "table events is missing" in r.output and "index events_messages on events is missing" in r.output


def test_foreign_and_non_sqlite_files_give_findings(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    r = verify_cli(other)
    assert r.exit_code == 1 and "not an eventstore database" in r.output and "extra table t" in r.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"hello, this is not a database" * 200)
    r = verify_cli(junk)
    assert r.exit_code == 1 and "storage" in r.output and "unexpected" not in r.output


def _leaf_of(db: Path, table: str) -> int:
    """A leaf page of ``table``'s b-tree: the root's right-most descendant."""
    data = db.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    page = _root_page(db, table)
    while data[(page - 1) * size] == 0x05:  # an interior table page: follow its right-most pointer
        page = int.from_bytes(data[(page - 1) * size + 8:(page - 1) * size + 12], "big")
    return page


def _root_page(db: Path, name: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
    finally:
        conn.close()


def _garbage(db: Path, page: int, start: int | None = None) -> None:
    """Random bytes over page ``page`` from ``start`` (default: its second half) to its end."""
    size = int.from_bytes(db.read_bytes()[16:18], "big")
    start = size // 2 if start is None else start
    with open(db, "r+b") as f:
        f.seek((page - 1) * size + start)
        f.write(os.urandom(size - start))


def test_garbage_in_an_index_page_is_a_finding_and_reads_fail_cleanly(loaded):
    _garbage(loaded, _root_page(loaded, "events_messages"), start=8)  # all but the page header
    r = verify_cli(loaded)
    assert r.exit_code == 1 and "storage: PRAGMA quick_check" in r.output and "unexpected" not in r.output
    r = run(loaded, "messages", "a0c1e2f3-111")
    assert "unexpected" not in r.output


def test_garbage_in_a_data_page_is_a_finding_naming_what_cannot_be_read(loaded):
    _garbage(loaded, _leaf_of(loaded, "events"))
    r = verify_cli(loaded)
    assert r.exit_code == 1 and "unexpected" not in r.output
    assert "storage:" in r.output
    for args in (["messages", "a0c1e2f3-111"], ["events", "a0c1e2f3-111"], ["sessions"],
                 ["export", "a0c1e2f3-111"], ["checkpoint"]):
        r = run(loaded, *args)
        assert "unexpected" not in r.output, (args, r.output)


def test_session_filter_still_checks_schema(any_loaded):
    with Attacker(any_loaded, guards_off=False) as conn:
        conn.execute("CREATE VIEW extra AS SELECT 1 AS one")
    assert [k for k, *_ in findings(any_loaded, session_ids=["5a1b896f-beb"])] == ["schema"]


def test_disabled_trigger_and_changed_index_are_findings_on_postgres(any_loaded):
    if not is_pg(any_loaded):
        pytest.skip("PostgreSQL's catalog: SQLite has no disabled triggers")
    with Attacker(any_loaded, guards_off=False) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_guard_update")
        conn.execute("DROP INDEX events_messages")
        conn.execute("CREATE INDEX events_messages ON events (session_id)")
    found = "\n".join(m for *_, m in findings(any_loaded))
    assert "trigger events_guard_update on events is disabled" in found
    assert "index events_messages on events differs from its definition" in found


def test_create_session_under_an_ignore_trigger_fails(any_loaded):
    swallow(any_loaded, "sessions")
    with EventStore.open(any_loaded) as store, pytest.raises(DatabaseError, match="session 'new'.*not stored"):
        store.create_session("new")


def test_copy_without_wal_has_no_findings(loaded, tmp_path):
    copy = tmp_path / "copy.db"
    shutil.copy(loaded, copy)
    assert findings(copy) == []


def test_import_under_an_ignore_trigger_fails_and_stores_nothing(any_loaded, tmp_path):
    swallow(any_loaded, "events")
    r = run(any_loaded, "import", str(DATA / "big.jsonl"))
    assert r.exit_code == 1
    if is_pg(any_loaded):  # COPY is refused as a whole; row by row, the first row is the one dropped
        assert "big.jsonl:2: " in r.output and "a trigger ignores it" in r.output
    else:
        assert "big.jsonl: session" in r.output and "stored" in r.output
    assert "nothing was imported" in r.output
    with Attacker(any_loaded, guards_off=False) as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 3
