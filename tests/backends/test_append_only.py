"""No SQL statement may change, remove, overwrite or gap a stored event or session.

Every attack is sent through a separate plain ``sqlite3`` connection (as an auditor's
tool or a buggy script would), then the stored rows are compared with a snapshot.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import AppendOnlyViolation, DatabaseError, EventStore, SessionNotFound
from eventstore.backends.sqlite.schema import GUARDS
from eventstore.schema import SCHEMA_REVISION


@pytest.fixture
def filled(store, raw):
    a = store.create_session("a")
    a.append("user/message", {"content": "hi"})
    a.append("assistant/message", {"content": "hello"})
    store.create_session("b").append("turn/start", {}, event_id="k1")
    return raw


def snapshot(conn: sqlite3.Connection):
    return (conn.execute("SELECT * FROM events ORDER BY position").fetchall(),
            conn.execute("SELECT * FROM sessions ORDER BY id").fetchall())


pytestmark = pytest.mark.sqlite_only  # attacks through plain sqlite3 (PostgreSQL's: tests/backends/postgres/)

H = "0" * 64  # a well-formed hash, so that only the guards can refuse the row

ATTACKS = {
    "update payload": "UPDATE events SET payload = '{\"content\":\"edited\"}' WHERE session_id = 'a' AND seq = 0",
    "update seq": "UPDATE events SET seq = seq + 10",
    "update or replace": "UPDATE OR REPLACE events SET seq = 0 WHERE seq = 1",
    "update position": "UPDATE events SET position = position + 100",
    "delete one": "DELETE FROM events WHERE session_id = 'a' AND seq = 1",
    "delete all": "DELETE FROM events",
    "insert or replace same key": f"INSERT OR REPLACE INTO events (position, session_id, seq, type, ts, payload, hash) "
                                  f"VALUES (4, 'a', 0, 'x', 1, '{{}}', '{H}')",
    "replace into same key": f"REPLACE INTO events (position, session_id, seq, type, ts, payload, hash) "
                             f"VALUES (4, 'a', 1, 'x', 1, '{{}}', '{H}')",
    "replace same position": f"REPLACE INTO events (position, session_id, seq, type, ts, payload, hash) "
                             f"VALUES (1, 'a', 2, 'x', 1, '{{}}', '{H}')",
    "upsert do update": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                        f"VALUES (4, 'a', 0, 'x', 1, '{{}}', '{H}') "
                        f"ON CONFLICT (session_id, seq) DO UPDATE SET payload = excluded.payload",
    "upsert on position": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                          f"VALUES (1, 'a', 2, 'x', 1, '{{}}', '{H}') "
                          f"ON CONFLICT (position) DO UPDATE SET payload = '{{\"x\":1}}'",
    "insert or ignore duplicate": f"INSERT OR IGNORE INTO events (position, session_id, seq, type, ts, payload, hash) "
                                  f"VALUES (4, 'a', 1, 'x', 1, '{{}}', '{H}')",
    "insert gap": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                  f"VALUES (4, 'a', 5, 'x', 1, '{{}}', '{H}')",
    "insert negative seq": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                           f"VALUES (4, 'c', -1, 'x', 1, '{{}}', '{H}')",
    "insert older position": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                             f"VALUES (0, 'a', 2, 'x', 1, '{{}}', '{H}')",
    "insert unknown session": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                              f"VALUES (4, 'nope', 0, 'x', 1, '{{}}', '{H}')",
    "insert unknown session at a later seq": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                             f"VALUES (4, 'nope', 3, 'x', 1, '{{}}', '{H}')",
    "insert position ahead": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                             f"VALUES (100, 'a', 2, 'x', 1, '{{}}', '{H}')",
    "insert the largest position": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                   f"VALUES (9223372036854775807, 'a', 2, 'x', 1, '{{}}', '{H}')",
    "insert without a position": f"INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                                 f"VALUES ('a', 2, 'x', 1, '{{}}', '{H}')",
    "replace over a stored event_id": "INSERT OR REPLACE INTO events (position, session_id, seq, type, ts, payload, hash) "
                                      f"VALUES (4, 'b', 1, 'x', 1, '{{\"event_id\":\"k1\"}}', '{H}')",
    "upsert over a stored event_id": "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                     f"VALUES (4, 'b', 1, 'x', 1, '{{\"event_id\":\"k1\"}}', '{H}') "
                                     "ON CONFLICT DO NOTHING",
    "event_id with an escaped key": "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                    f"VALUES (4, 'b', 1, 'x', 1, '{{\"event\\u005fid\":\"k1\"}}', '{H}')",
    "event_id with an escaped first letter": "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                             f"VALUES (4, 'b', 1, 'x', 1, '{{\"\\u0065vent_id\":\"k1\"}}', '{H}')",
    "event_id given twice": "INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                            f"VALUES (4, 'b', 1, 'x', 1, '{{\"event_id\":\"zz\",\"event_id\":\"k1\"}}', '{H}')",
    "replace a session through its rowid": "INSERT OR REPLACE INTO sessions (rowid, id, created_at, meta) "
                                           "VALUES (1, 'tmp', 0, '{}'), (1, 'a', 123, '{\"owner\":\"m\"}')",
    "remove a session through its rowid": "INSERT OR REPLACE INTO sessions (rowid, id, created_at, meta) "
                                          "SELECT rowid, 'c', 2, '{}' FROM sessions WHERE id = 'b'",
    "a session created_at that is text": "INSERT INTO sessions (id, created_at, meta) VALUES ('c', 'abc', '{}')",
    "a session rowid below 1": "INSERT INTO sessions (rowid, id, created_at, meta) VALUES (-1, 'c', 2, '{}')",
    "insert two rows, second gapped": f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                                      f"VALUES (4, 'a', 2, 'x', 1, '{{}}', '{H}'), "
                                      f"(5, 'a', 4, 'x', 1, '{{}}', '{H}')",
    "copy rows onto themselves": "INSERT OR REPLACE INTO events (position, session_id, seq, type, ts, payload, hash) "
                                 "SELECT position, session_id, seq, 'forged', ts, payload, hash FROM events",
    "update session meta": "UPDATE sessions SET meta = '{\"x\":1}'",
    "rename session": "UPDATE sessions SET id = 'z' WHERE id = 'a'",
    "delete session": "DELETE FROM sessions WHERE id = 'b'",
    "replace session": "INSERT OR REPLACE INTO sessions (id, created_at, meta) VALUES ('a', 0, '{}')",
    "upsert session": "INSERT INTO sessions (id, created_at, meta) VALUES ('a', 0, '{}') "
                      "ON CONFLICT (id) DO UPDATE SET meta = '{\"x\":1}'",
    "insert or ignore session": "INSERT OR IGNORE INTO sessions (id, created_at, meta) VALUES ('a', 0, '{}')",
}


@pytest.mark.parametrize("pragmas", [(), ("PRAGMA recursive_triggers = ON", "PRAGMA foreign_keys = ON")],
                         ids=["defaults", "recursive_triggers+foreign_keys"])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_every_write_path_is_refused_and_changes_nothing(filled, name, pragmas):
    for p in pragmas:
        filled.execute(p)
    before = snapshot(filled)
    with pytest.raises(sqlite3.IntegrityError):
        filled.execute(ATTACKS[name])
    assert snapshot(filled) == before


@pytest.mark.parametrize("name, reason", [
    ("insert gap", "seq is not the next seq"),
    ("insert negative seq", "seq is not the next seq"),
    ("insert unknown session", "unknown session"),
    ("insert unknown session at a later seq", "seq is not the next seq"),
    ("insert older position", "position must be the next position"),
    ("insert position ahead", "position must be the next position"),
    ("insert the largest position", "position must be the next position"),
    ("insert without a position", "position must be the next position"),
    ("insert two rows, second gapped", "seq is not the next seq"),
    ("replace over a stored event_id", "event_id is already stored in this session"),
    ("event_id with an escaped key", "payload holds a key"),
    ("event_id with an escaped first letter", "payload holds a key"),
    ("event_id given twice", "payload holds a key"),
    ("replace a session through its rowid", "a stored session has this rowid"),
    ("remove a session through its rowid", "a stored session has this rowid"),
    ("a session rowid below 1", "a session rowid must be positive"),
    ("a session created_at that is text", "created_at must be a number of seconds"),
])
def test_each_insert_is_refused_for_its_own_reason(filled, name, reason):
    """Each insert attack meets the guard's check meant for it (not an earlier one)."""
    with pytest.raises(sqlite3.IntegrityError, match=rf"^ES0[0-9][0-9]: {reason}"):
        filled.execute(ATTACKS[name])


@pytest.mark.parametrize("payload", ["x'7b7d'", "' {}'", "'{} '", "'{}' || char(10)", "'{ }'",
                                     "'{' || char(10) || '}'", "'{ \"a\":1}'", "'\t{\"a\":1}'"])
def test_a_payload_that_export_could_not_write_is_refused(filled, payload):
    """A BLOB, or whitespace around the object, passed the JSON CHECK and made export write
    broken lines; the guard refuses them."""
    with pytest.raises(sqlite3.IntegrityError, match="payload must be the text of a JSON object"):
        filled.execute(f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                       f"VALUES (4, 'a', 2, 'x', 1, {payload}, '{H}')")


@pytest.mark.parametrize("payload", ['{"a":1} ', '{"a" : 1}', '{"a":1}\n', '{"a":\n1}', '{"a":1,\r\n"b":2}'])
@pytest.mark.parametrize("big", [False, True], ids=["page", "long payload"])
def test_other_payload_spellings_are_stored_and_export_as_valid_json(store, filled, payload, big):
    """What the guard lets through besides JSON.stringify's text still exports as one line
    that parses (verify reports their hashes, which no store would write); a line break
    inside the object does not split the line."""
    if big:
        payload = payload.replace('"a":', '"pad":"' + "p" * 70000 + '","a":', 1)
    filled.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                   "VALUES (4, 'a', 2, 'x', 1, ?, ?)", (payload, H))
    import io
    import json

    from eventstore.io.export import export_session

    out = io.BytesIO()
    export_session(store, "a", out)
    lines = [line for line in out.getvalue().decode().split("\n") if line.strip()]
    assert len(lines) == 4  # the meta line and three events
    last = json.loads(lines[-1])
    last.pop("pad", None)
    last.pop("b", None)
    assert last == {"type": "x", "seq": 2, "ts": 1, "a": 1}


def test_after_a_refused_far_position_the_store_still_appends(store, filled):
    """One plain-SQL insert at position 2**63 - 1 used to leave no next position: every
    later append failed. It is refused, and appends go on."""
    with pytest.raises(sqlite3.IntegrityError):
        filled.execute(ATTACKS["insert the largest position"])
    assert store.session("a").append("x", {}).position == 4


def test_refusal_inside_a_transaction_keeps_earlier_rows_intact(filled):
    before = snapshot(filled)
    filled.execute("BEGIN")
    with pytest.raises(sqlite3.IntegrityError):
        filled.execute("DELETE FROM events")
    filled.execute("COMMIT")
    assert snapshot(filled) == before


def test_a_correct_plain_sql_append_is_accepted(filled):
    """The guards refuse only what breaks the log: the next seq at the next position is fine."""
    filled.execute(f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                   f"VALUES (4, 'a', 2, 'note', 1, '{{}}', '{H}')")
    assert filled.execute("SELECT max(seq) FROM events WHERE session_id = 'a'").fetchone() == (2,)


def _insert(conn: sqlite3.Connection, *rows: tuple, verb: str = "INSERT") -> None:
    values = ",".join(f"({position}, '{sid}', {seq}, 'x', 1, '{{}}', '{H}')" for position, sid, seq in rows)
    conn.execute(f"{verb} INTO events (position, session_id, seq, type, ts, payload, hash) VALUES {values}")


# The insert guard proves the head of most inserts from the table's last row alone (revision
# 0230): the row at the largest position of the same session, with the seq before. In
# `filled` that row is ('b', seq 0, position 3); 'a' holds seqs 0 and 1 at positions 1, 2.
@pytest.mark.parametrize("rows", [
    [(4, "b", 1)],                                  # the last row is the session's previous event
    [(4, "b", 1), (5, "b", 2), (6, "b", 3)],        # ... for each row of a multi-row insert
    [(4, "a", 2)],                                  # another session's event is last: the index decides
    [(4, "b", 1), (5, "a", 2), (6, "a", 3), (7, "b", 2)],  # sessions taking turns in one statement
], ids=["last row's session", "a batch", "another session last", "sessions interleaved"])
def test_the_next_event_is_accepted_whichever_session_wrote_last(filled, rows):
    _insert(filled, *rows)
    stored = filled.execute("SELECT position, session_id, seq FROM events WHERE position > 3 ORDER BY position")
    assert stored.fetchall() == rows


@pytest.mark.parametrize("rows, verb, code", [
    ([(4, "b", 2)], "INSERT", "ES002"),             # the last row's session, a seq skipped
    ([(4, "b", 0)], "INSERT OR REPLACE", "ES002"),  # ... its seq again, over the stored event
    ([(5, "b", 1)], "INSERT", "ES003"),             # the next seq, a position skipped
    ([(3, "b", 1)], "INSERT OR REPLACE", "ES003"),  # the next seq over the last row's position
    ([(2, "b", 1)], "INSERT OR REPLACE", "ES003"),  # ... over another session's stored event
    ([(4, "b", "'1x'")], "INSERT", "ES002"),        # a seq that only arithmetic reads as the next
    ([(4, "b", 1.5)], "INSERT", "ES002"),
    ([(4, "a", 1)], "INSERT OR REPLACE", "ES002"),  # another session last: a stored seq again
    ([(4, "a", 3)], "INSERT", "ES002"),             # ... a seq skipped
    ([(5, "a", 2)], "INSERT", "ES003"),             # ... a position skipped
    ([(4, "b", 1), (5, "b", 3)], "INSERT", "ES002"),  # a later row of a batch skips a seq
    ([(4, "b", 1), (6, "b", 2)], "INSERT", "ES003"),  # ... or a position
    ([(4, "zz", 0)], "INSERT", "ES001"),            # an unknown session's first event
    ([(4, "zz", 1)], "INSERT", "ES002"),
], ids=["seq skipped", "seq repeated", "position skipped", "last position repeated",
        "older position repeated", "seq as text", "seq as a fraction", "other session: seq repeated",
        "other session: seq skipped", "other session: position skipped", "batch: seq skipped",
        "batch: position skipped", "unknown session", "unknown session at a later seq"])
def test_a_forged_head_is_refused_with_the_code_of_before(filled, rows, verb, code):
    before = snapshot(filled)
    with pytest.raises(sqlite3.IntegrityError, match=rf"^{code}: "):
        _insert(filled, *rows, verb=verb)
    assert snapshot(filled) == before


def test_the_first_events_of_an_empty_log(store, raw):
    """No last row: the first event must be seq 0 at position 1 of a stored session."""
    store.create_session("c")
    store.create_session("d")
    for rows, code in [([(2, "c", 0)], "ES003"), ([(1, "c", 1)], "ES002"), ([(1, "zz", 0)], "ES001"),
                       ([(0, "c", 0)], "ES003")]:
        with pytest.raises(sqlite3.IntegrityError, match=rf"^{code}: "):
            _insert(raw, *rows)
    assert raw.execute("SELECT count(*) FROM events").fetchone() == (0,)
    _insert(raw, (1, "c", 0), (2, "d", 0), (3, "c", 1))  # each session's first event, then the next
    with pytest.raises(sqlite3.IntegrityError, match=r"^ES002: "):
        _insert(raw, (4, "d", 0))  # a first event again, when the session has one
    assert store.session("d").append("x", {}).seq == 1


def test_an_update_of_importing_cannot_hide_a_stored_session(filled):
    """An unfinished import's row may change its owner (a take-over) and nothing else: moving
    it onto a stored session, or its first position back, would hide stored events
    (revision 0250)."""
    filled.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES ('new', 1, '{}', ?)", (H,))
    filled.execute("INSERT INTO importing VALUES ('new', 4, 'x#1', 0)")
    for sql in ["UPDATE importing SET session_id = 'a'", "UPDATE importing SET first_position = 1",
                "UPDATE OR REPLACE importing SET session_id = 'b'"]:
        with pytest.raises(sqlite3.IntegrityError, match=r"^ES011: "):
            filled.execute(sql)
    filled.execute("UPDATE importing SET owner = 'y#2', started_at = 5")  # a take-over
    assert filled.execute("SELECT * FROM importing").fetchall() == [("new", 4, "y#2", 5.0)]


@pytest.mark.parametrize("column, value", [
    ("payload", "'not json'"), ("payload", "'[1,2]'"), ("ts", "'soon'"), ("ts", "9e999"),
    ("payload", "'{\"type\":\"evil\"}'"), ("payload", "'{\"seq\":99}'"), ("payload", "'{\"ts\":1}'"),
    ("payload", "'{\"event_id\":1}'"), ("payload", "'{\"event_id\":{}}'"), ("payload", "'{\"type\":null}'"), ("payload", "'{\"typ\\u0065\":1}'"),
    ("payload", "'{\"\\u0073eq\":1}'"), ("payload", "'{\"a\":1,\"\\u0074s\":2}'"), ("payload", "'{\"event_\\u0069d\":5}'"),
    ("payload", "'{\"a\":\"\\\"\",\"ts\":0}'"),
    ("payload", "x'7b7d'"), ("payload", "' {}'"), ("payload", "'{} '"), ("payload", "'{}' || char(10)"),
    ("type", "''"), ("type", "x'00'"), ("type", "'session/meta'"), ("seq", "'1'"), ("seq", "1.5"), ("hash", "'short'"),
])
def test_check_constraints_refuse_malformed_rows(filled, column, value):
    values = {"position": "4", "session_id": "'a'", "seq": "2", "type": "'x'", "ts": "1",
              "payload": "'{}'", "hash": f"'{H}'"}
    values[column] = value
    before = snapshot(filled)
    with pytest.raises(sqlite3.DatabaseError):  # a CHECK failure, or "malformed JSON"
        filled.execute(f"INSERT INTO events ({', '.join(values)}) VALUES ({', '.join(values.values())})")
    assert snapshot(filled) == before


@pytest.mark.parametrize("payload", [
    '{"tool_calls":[{"type":"function","seq":1}]}', '{"note":"the \\"type\\" key","ts_ms":5}',
    '{"event_id":"k1"}', '{"a":{"ts":1,"event_id":2}}', '{"\\u0061":1}',
])
def test_insert_guard_accepts_reserved_names_that_are_not_top_level_keys(filled, payload):
    """The guard's cheap text test only decides whether to parse; nested keys, keys that
    merely contain a reserved name, and escapes of other keys are still accepted."""
    filled.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                   "VALUES (4, 'a', 2, 'x', 1, ?, ?)", (payload, H))
    assert filled.execute("SELECT payload FROM events WHERE position = 4").fetchone() == (payload,)


def assert_upgrade_keeps_the_events_and_installs_the_guards(raw: sqlite3.Connection, db_path) -> None:
    """Store a session and an event in a database at an older revision, open it with the
    store (which upgrades it) and append: the stored rows are kept, and every guard is
    installed with the package's definition."""
    raw.execute("INSERT INTO sessions (id, created_at) VALUES ('a', 1)")
    raw.execute(f"INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                f"VALUES (1, 'a', 0, 'x', 1, '{{\"k\":1}}', '{H}')")
    before = snapshot(raw)
    with EventStore.open(db_path) as store:
        store.session("a").append("y", {"k": 2})
    assert raw.execute("SELECT version_num FROM alembic_version").fetchone() == (SCHEMA_REVISION,)
    installed = dict(raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
    assert {name: installed.get(name, "").strip() for name in GUARDS} == {n: d.strip() for n, d in GUARDS.items()}
    assert snapshot(raw)[0][:1] == before[0]


def test_the_store_leaves_the_session_check_to_the_guard(store):
    """The store's connection does not enforce the foreign key (the guard checks the
    session on every connection); an append to an unknown session is still refused."""
    assert store._backend._connection().execute("PRAGMA foreign_keys").fetchone() == (0,)
    with pytest.raises(SessionNotFound):
        store.session("nope").append("x", {})
    with pytest.raises(AppendOnlyViolation, match="unknown session"):
        store._backend._transact(lambda cur: cur.execute(f"INSERT INTO events (position, session_id, seq, type, ts, "
                                                f"payload, hash) VALUES (1, 'nope', 0, 'x', 1, '{{}}', '{H}')"))


def test_store_reports_a_refused_write_as_append_only_violation(store):
    s = store.create_session("a")
    s.append("x", {})
    with pytest.raises(AppendOnlyViolation):
        store._backend._transact(lambda cur: cur.execute("DELETE FROM events"))
    assert s.next_seq() == 1


def test_guards_and_view_exist_at_head(raw):
    names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert set(GUARDS) <= names
    assert raw.execute("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = 'messages'").fetchone()
    assert raw.execute("SELECT version_num FROM alembic_version").fetchone() == (SCHEMA_REVISION,)


def test_schema_revision_is_the_alembic_head():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from eventstore.backends.sqlite.engine import migrations_path

    cfg = Config()
    cfg.set_main_option("script_location", migrations_path())
    assert ScriptDirectory.from_config(cfg).get_current_head() == SCHEMA_REVISION


def test_reopening_does_not_migrate_again(db_path, store):
    from eventstore.backends.sqlite.engine import connect, upgrade

    conn = connect(str(db_path), 5.0)
    assert upgrade(conn, str(db_path)) == (False, SCHEMA_REVISION)
    conn.close()
    with EventStore.open(db_path) as again:
        assert again.sessions() == []


def test_position_survives_vacuum(store, raw):
    s = store.create_session("a")
    t = store.create_session("t")
    for i in range(20):
        (s if i % 2 else t).append("x", {"i": i})
    before = raw.execute("SELECT session_id, seq, position FROM events ORDER BY position").fetchall()
    raw.execute("VACUUM")
    assert raw.execute("SELECT session_id, seq, position FROM events ORDER BY position").fetchall() == before


# --- the insert guard's text pre-check, against its definition ------------------------------

_KEYS = ["type", "seq", "ts", "event_id", "t", "ty", "types", "se", "sequence", "tsx", "event", "event_ids",
         "e", "s", "content", "delta", "Type", "TS", ""]


def _encode_key(key: str, escapes: list[bool]) -> str:
    """JSON string text for ``key``, with the characters chosen by ``escapes`` written as \\uXXXX."""
    return '"' + "".join(f"\\u{ord(c):04{'x' if i % 2 else 'X'}}" if escapes[i % len(escapes)] else c
                         for i, c in enumerate(key)) + '"'


@st.composite
def _payload_texts(draw):
    members = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(_KEYS))
        escapes = draw(st.lists(st.booleans(), min_size=1, max_size=4))
        value = draw(st.sampled_from(['1', '"x"', '"tsunami"', 'null', '{"type":"function"}', '["seq"]', '"\\u0074"']))
        members.append((key, _encode_key(key, escapes), value))
    text = "{" + ",".join(f"{k}:{v}" for _key, k, v in members) + "}"
    # json_each yields every member, duplicates too: one reserved member is enough
    refused = any(key in ("type", "seq", "ts") or (key == "event_id" and not value.startswith('"'))
                  for key, _t, value in members)
    # an event_id member must also hold what the event_id column (->>) reads: SQLite may
    # not decode an escaped key, and it takes the first of two; the test asks SQLite
    ids = [json.loads(value) for key, _t, value in members if key == "event_id" and value.startswith('"')]
    return text, refused, ids


@settings(max_examples=300, deadline=None)
@given(case=_payload_texts())
def test_insert_guard_refuses_exactly_the_payloads_with_reserved_top_level_keys(tmp_path_factory, case):
    """Whatever escapes a key is written with, the guard's cheap GLOB pre-check never lets a
    reserved top-level key through, and never refuses a payload without one."""
    text, refused, ids = case
    conn = _guard_db(tmp_path_factory)
    column = conn.execute("SELECT ? ->> '$.event_id'", (text,)).fetchone()[0]
    refused = refused or any(i != column for i in ids)
    conn.execute("SAVEPOINT t")
    try:
        if refused:
            with pytest.raises(sqlite3.IntegrityError, match="payload holds a key"):
                conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                             "VALUES (1, 'a', 0, 'x', 1, ?, ?)", (text, H))
        else:
            conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                         "VALUES (1, 'a', 0, 'x', 1, ?, ?)", (text, H))
    finally:
        conn.execute("ROLLBACK TO t")
        conn.execute("RELEASE t")


_GUARD_DB: dict = {}


def _guard_db(tmp_path_factory) -> sqlite3.Connection:
    if "conn" not in _GUARD_DB:
        path = tmp_path_factory.mktemp("guard") / "guard.db"
        EventStore.open(path).close()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("INSERT INTO sessions (id, created_at) VALUES ('a', 1)")
        _GUARD_DB["conn"] = conn
    return _GUARD_DB["conn"]


def test_opening_a_database_another_process_holds_for_its_upgrade_says_busy(db_path):
    """An open that must upgrade the file while another connection holds the write lock
    (two processes starting at once on a new database) says the database is busy."""
    shutil.copyfile(DATA / "legacy-0007.db", db_path)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseError, match=r"cannot open .*: database is busy: .*busy timeout \(0.2 s\)"):
            EventStore.open(db_path, busy_timeout=0.2)
    finally:
        other.execute("ROLLBACK")
        other.close()
    EventStore.open(db_path).close()


@pytest.mark.parametrize("payload", [' {"a":1}', '\n{"b":2}', b'{"c":3}', b"{}", "{ }", '{ "d":4}',
                                     '\t{}\r', '{"e":5} ', '{"f":\n6}'])
@pytest.mark.parametrize("ts", [1.5, 1764562000.25], ids=["row by row", "page at once"])
def test_export_writes_valid_lines_for_payloads_stored_before_0006(db_path, tmp_path, payload, ts):
    """Before 0006 the guard let plain SQL store whitespace around the object or a BLOB;
    export writes each such event as one valid line (the payload written anew), where it
    wrote broken lines or stopped with an unexpected error, and export of every session
    goes on past it."""
    import io

    from eventstore.io.export import export_session, export_sessions

    EventStore.open(db_path).close()
    raw = sqlite3.connect(db_path, isolation_level=None)
    raw.execute("DROP TRIGGER events_guard_insert")  # the guard of the first release's 0005 let these in
    for position, sid in enumerate(("odd", "next"), start=1):
        raw.execute("INSERT INTO sessions (id, created_at) VALUES (?, 1)", (sid,))
        raw.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                    "VALUES (?, ?, 0, 'x', ?, ?, ?)", (position, sid, ts, payload if sid == "odd" else "{}", H))
    raw.execute(GUARDS["events_guard_insert"])
    raw.close()
    expected = json.loads(payload.decode() if isinstance(payload, bytes) else payload)
    with EventStore.open(db_path) as store:
        store.session("odd").append("y", {"k": 1}, ts=ts)  # a second line after it
        out = io.BytesIO()
        export_session(store, "odd", out)
        lines = out.getvalue().decode().split("\n")
        assert lines[-1] == "" and len(lines) == 4
        assert json.loads(lines[1]) == {"type": "x", "seq": 0, "ts": ts, **expected}
        assert json.loads(lines[2])["k"] == 1
        written = export_sessions(store, tmp_path / "all")
        assert sorted(sid for sid, _path, _n in written) == ["next", "odd"]
