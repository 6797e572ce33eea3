"""PostgreSQL itself: attacks through plain psycopg, least-privilege roles, tampering with the
triggers switched off, concurrency with real processes, LISTEN/NOTIFY, the sql sandbox,
the projection equal to SQLite's, and `eventstore copy` between the two databases.

Everything runs against the throwaway server of tests/pgserver.py (fixtures ``pg_server``,
``pg_url``, and ``pg_store_url`` where the test starts from a migrated store, in conftest.py); the contract suite runs on PostgreSQL through the
parametrized ``store`` fixture."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
import time
import uuid

import pytest
import workers
from click.testing import CliRunner
from conftest import DATA, FIXTURES, TESTS, export_bytes, new_sqlite_store

from eventstore import DatabaseError, EventStore, SeqConflict
from eventstore.audit import verify as audit
from eventstore.cli import cli
from eventstore.schema import SCHEMA_REVISION

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pg_errors  # noqa: E402

CTX = workers.CTX  # fresh processes from a server that imported eventstore once


def filled(url: str) -> EventStore:
    """A store with two sessions (s: 6 events, t: 2 events)."""
    store = EventStore.open(url)
    s = store.create_session("s")
    s.append("user/message", {"content": "hi"})
    s.append("assistant/message", {"content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                                  "function": {"name": "ls", "arguments": "{}"}}]})
    s.append("tool/result", {"tool_call_id": "c1", "content": "a\nb"})
    s.append("assistant/message", {"content": "done", "event_id": "k1"})
    s.append_many([("turn/start", {}), ("turn/end", {})])
    t = store.create_session("t")
    t.append_many([("user/message", {"content": "x"}), ("assistant/message", {"content": "y"})])
    return store


def snapshot(conn) -> list:
    return [conn.execute("SELECT * FROM events ORDER BY position").fetchall(),
            conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()]


# --- attacks: each way of changing, removing, overwriting or gapping stored rows -------------

ATTACKS = [
    ("UPDATE events SET payload = '{\"content\":\"evil\"}' WHERE session_id = 's' AND seq = 0", "ES004"),
    ("UPDATE events SET seq = seq + 100", "ES004"),
    ("DELETE FROM events WHERE session_id = 's' AND seq = 5", "ES004"),
    ("DELETE FROM events", "ES004"),
    ("TRUNCATE events CASCADE", "ES004"),
    ("TRUNCATE sessions CASCADE", "ES005"),
    ("UPDATE sessions SET meta = '{\"x\":1}'", "ES005"),
    ("DELETE FROM sessions WHERE id = 't'", "ES005"),
    # overwrite: a stored seq again, plainly or through ON CONFLICT
    ("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES ('s', 2, 'x', 1, '{}', repeat('0', 64))",
     "ES002"),
    ("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES (3, 's', 6, 'x', 1, '{}', "
     "repeat('0', 64)) ON CONFLICT (position) DO UPDATE SET payload = EXCLUDED.payload", "ES003"),
    ("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES ('s', 0, 'x', 1, '{}', repeat('0', 64)) "
     "ON CONFLICT (session_id, seq) DO UPDATE SET payload = EXCLUDED.payload", "ES002"),
    ("INSERT INTO sessions (id, created_at) VALUES ('s', 1) ON CONFLICT (id) DO UPDATE SET meta = '{\"x\":1}'",
     "ES005"),
    ("INSERT INTO sessions (id, created_at) VALUES ('s', 1)", "23505"),
    # gaps: a seq past the next one, a position past the next one
    ("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES ('s', 7, 'x', 1, '{}', repeat('0', 64))",
     "ES002"),
    ("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES (100, 's', 6, 'x', 1, '{}', "
     "repeat('0', 64))", "ES003"),
    ("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES ('nobody', 0, 'x', 1, '{}', "
     "repeat('0', 64))", "ES001"),
]


@pytest.mark.parametrize("sql,code", ATTACKS, ids=[a[0][:60] for a in ATTACKS])
def test_plain_sql_attacks_fail_and_change_nothing(pg_store_url, sql, code):
    refused_unchanged(pg_store_url, sql, code)


def refused_unchanged(pg_url: str, sql: str, code: str) -> None:
    """``sql``, run by the superuser who owns the tables on a filled store, fails with
    SQLSTATE ``code`` and leaves every row as it was."""
    filled(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        before = snapshot(conn)
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        assert e.value.sqlstate == code, e.value
        assert snapshot(conn) == before


def test_on_conflict_do_nothing_cannot_overwrite(pg_store_url):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        before = snapshot(conn)
        conn.execute("INSERT INTO sessions (id, created_at, meta) VALUES ('s', 1, '{\"x\":1}') "
                     "ON CONFLICT DO NOTHING")
        assert snapshot(conn) == before


def test_the_store_translates_refusals_by_code(pg_store_url):
    store = filled(pg_store_url)
    other = EventStore.open(pg_store_url)  # a second writer: the first one's cached head goes stale
    other.session("s").append("x", {})
    ev = store.session("s").append("y", {})  # refused at the stale head (ES002), then at the real one
    assert ev.seq == 7
    with pytest.raises(SeqConflict) as e:
        store.session("s").append("z", {}, expected_seq=3)
    assert e.value.actual_seq == 8
    store.close()
    other.close()


# --- statements of many rows: the setting of the row guard, the statement check (0240) --------

H = "repeat('0', 64)"


def _row(sid: str, seq: int, payload: str = "{}", position: int | None = None) -> str:
    pos = "" if position is None else f"{position}, "
    return f"({pos}'{sid}', {seq}, 'x', 1, '{payload}', {H})"


def _insert(*rows: str, positions: bool = False) -> str:
    cols = "position, session_id, seq, type, ts, payload, hash" if positions else "session_id, seq, type, ts, payload, hash"
    return f"INSERT INTO events ({cols}) VALUES {', '.join(rows)}"


def _forge(position: int, seq: int, sid: str) -> str:
    return f"SELECT set_config('eventstore.next', '{position} {seq} {sid}', false)"


def _two_sessions(sid: str, seq: int) -> str:
    """A good row of s, then a row of ``sid`` at ``seq`` whose setting the statement forges."""
    return (f"INSERT INTO events (session_id, seq, type, ts, payload, hash) SELECT v.sid, v.seq, "
            f"'x' || coalesce(left(f.x, 0), ''), 1, '{{}}', {H} FROM (VALUES (1, 's', 6), (2, '{sid}', {seq})) "
            f"AS v(i, sid, seq), LATERAL (SELECT CASE WHEN v.i = 2 THEN "
            f"set_config('eventstore.next', '10 {seq} {sid}', true) END AS x) AS f")


# filled(): s holds seqs 0..5 at positions 1..7 (t's seq 0 is 7, 8), t seqs 0..1; next position 9.
FORGED = [
    # the settings claim a head the table does not have: the statement check refuses
    ("a seq gap", _forge(9, 9, "s"), _insert(_row("s", 9)), "ES002"),
    ("a position gap", _forge(50, 6, "s"), _insert(_row("s", 6)), "ES003"),
    ("position 0", _forge(0, 6, "s"), _insert(_row("s", 6)), "ES003"),
    ("an unknown session", _forge(9, 0, "nobody"), _insert(_row("nobody", 0)), "ES001"),
    # a stored seq or position taken again: the unique indexes refuse it
    ("a stored seq", _forge(9, 2, "s"), _insert(_row("s", 2)), "23505"),
    ("a stored position", _forge(3, 6, "s"), _insert(_row("s", 6)), "23505"),
    ("a stored position, ON CONFLICT DO UPDATE", _forge(3, 6, "s"),
     _insert(_row("s", 6, position=3), positions=True) + " ON CONFLICT (position) DO UPDATE SET ts = 2", "ES004"),
    # forged by the statement itself, between its rows
    ("forged between rows", "SELECT 1",
     f"INSERT INTO events (session_id, seq, type, ts, payload, hash) SELECT 's', v.seq, 'x' || coalesce(left(f.x, 0), ''), "
     f"1, '{{}}', {H} FROM (VALUES (6), (7)) AS v(seq), LATERAL (SELECT CASE WHEN v.seq = 7 THEN "
     f"set_config('eventstore.next', '30 7 s', true) END AS x) AS f", "ES003"),
    ("forged between rows of two sessions", "SELECT 1", _two_sessions("t", 9), "ES002"),
    ("forged between rows, an unknown session", "SELECT 1", _two_sessions("nobody", 0), "ES001"),
]


@pytest.mark.parametrize("what,forge,sql,code", FORGED, ids=[f[0] for f in FORGED])
def test_a_forged_guard_setting_gets_the_statement_refused(pg_store_url, what, forge, sql, code):
    """The row guard lets a row through on the transaction-local setting it keeps; anyone
    may set it, so the statement check (and the unique indexes) must refuse what it lets
    through wrongly."""
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        before = snapshot(conn)
        conn.execute(forge)  # for the session (false): it outlives the transactions below
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        assert e.value.sqlstate == code, e.value
        assert snapshot(conn) == before


MANY_ROWS = [
    ("explicit positions with a gap", _insert(_row("s", 6, position=9), _row("s", 7, position=11), positions=True),
     "ES003"),
    ("an explicit position taken twice", _insert(_row("s", 6, position=9), _row("s", 7, position=9), positions=True),
     "ES003"),
    ("a seq twice", _insert(_row("s", 6), _row("s", 6)), "ES002"),
    ("a seq gap on the second row", _insert(_row("s", 6), _row("s", 8)), "ES002"),
    ("a stored seq after a good row", _insert(_row("s", 6), _row("t", 1)), "ES002"),
    ("an unknown session after a good row", _insert(_row("s", 6), _row("nobody", 0)), "ES001"),
    ("a reserved key on a later row", _insert(_row("s", 6), _row("s", 7, '{"ts":1}')), "ES009"),
    ("a reserved key spelled with an escape", _insert(_row("s", 6), _row("s", 7, '{"\\u0074ype":1}')), "ES009"),
    ("a second event_id key", _insert(_row("s", 6), _row("s", 7, '{"event_id":"a","event_id":"b"}')), "ES009"),
]


@pytest.mark.parametrize("what,sql,code", MANY_ROWS, ids=[m[0] for m in MANY_ROWS])
def test_a_bad_row_of_a_multi_row_insert_refuses_the_statement(pg_store_url, what, sql, code):
    refused_unchanged(pg_store_url, sql, code)


def test_two_sessions_in_one_statement_and_across_statements(pg_store_url):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url) as conn:  # one transaction, several statements, a savepoint
        conn.execute(_insert(_row("s", 6), _row("t", 2), _row("s", 7), _row("t", 3)))
        conn.execute(_insert(_row("t", 4), _row("t", 5)))
        try:
            with conn.transaction():  # rolled back to the savepoint: rows and setting
                conn.execute(_insert(_row("s", 8), _row("s", 9)))
                raise RuntimeError
        except RuntimeError:
            pass
        conn.execute(_insert(_row("s", 8)))
        conn.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                     f"SELECT 't', 5 + i, 'x', 1, '{{}}', {H} FROM generate_series(1, 3) AS i")
        conn.commit()
        rows = conn.execute("SELECT position, session_id, seq FROM events WHERE position > 8 ORDER BY position").fetchall()
    assert rows == [(9, "s", 6), (10, "t", 2), (11, "s", 7), (12, "t", 3), (13, "t", 4), (14, "t", 5),
                    (15, "s", 8), (16, "t", 6), (17, "t", 7), (18, "t", 8)]
    with EventStore.open(pg_store_url) as store:  # the store goes on from there
        assert store.session("s").append("after", {}).position == 19


def _copy_rows(conn, rows: list[tuple]) -> None:
    with conn.cursor().copy("COPY events (position, session_id, seq, type, ts, payload, hash) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


@pytest.mark.parametrize("rows,code", [
    ([(9, "s", 6), (11, "s", 7)], "ES003"),  # a position gap
    ([(9, "s", 6), (10, "s", 8)], "ES002"),  # a seq gap
    ([(9, "s", 6), (10, "nobody", 0)], "ES001"),
    ([(9, "s", 6), (10, "s", 7), (11, "s", 8)], None),
], ids=["position gap", "seq gap", "unknown session", "dense"])
def test_copy_is_checked_like_insert(pg_store_url, rows, code):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        before = snapshot(conn)
        full = [(p, sid, seq, "x", 1.0, "{}", "0" * 64) for p, sid, seq in rows]
        if code is None:
            with conn.transaction():
                _copy_rows(conn, full)
            assert conn.execute("SELECT max(position) FROM events").fetchone()[0] == 11
        else:
            with pytest.raises(psycopg.Error) as e:
                with conn.transaction():
                    _copy_rows(conn, full)
            assert e.value.sqlstate == code, e.value
            assert snapshot(conn) == before


def test_verify_reports_a_disabled_statement_check(pg_store_url):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_guard_check")
    with EventStore.open(pg_store_url, readonly=True) as ro:
        report = audit.verify(ro._backend)
    text = "\n".join(str(f) for f in report.findings if f.kind == "trigger")
    assert "events_guard_check on events is disabled" in text


# --- positions, commit order, rolled-back appends ---------------------------------------------

def test_positions_stay_dense_after_rolled_back_inserts(pg_store_url):
    store = filled(pg_store_url)
    with psycopg.connect(pg_store_url) as conn:  # a transaction that inserts, then rolls back
        conn.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                     "VALUES ('t', 2, 'x', 1, '{}', repeat('0', 64))")
        conn.rollback()
    store.session("t").append("after", {})
    with psycopg.connect(pg_store_url) as conn:
        positions = [r[0] for r in conn.execute("SELECT position FROM events ORDER BY position")]
    assert positions == list(range(1, len(positions) + 1))
    store.close()


def test_a_later_commit_never_has_a_smaller_position(pg_store_url):
    """A transaction that inserted first but commits later: a second writer waits for it
    (the position lock), so positions follow commit order."""
    store = filled(pg_store_url)
    conn = psycopg.connect(pg_store_url)
    conn.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                 "VALUES ('t', 2, 'x', 1, '{}', repeat('0', 64))")  # position 9, not committed yet
    done = threading.Event()
    result = {}

    def append() -> None:
        result["ev"] = store.session("s").append("late", {})
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    with psycopg.connect(pg_store_url, autocommit=True) as look:
        deadline = time.monotonic() + 30
        while not look.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND wait_event = 'relation'").fetchone()[0]:  # the append waits for the lock
            assert time.monotonic() < deadline, "the append never waited for the open transaction"
            time.sleep(0.01)
        assert not done.is_set()
        assert look.execute("SELECT max(position) FROM events").fetchone()[0] == 8
    conn.commit()
    thread.join(10)
    assert result["ev"].position == 10
    conn.close()
    store.close()


def test_concurrent_first_opens_migrate_once(pg_server):
    name = pg_server.create_database()
    url = pg_server.url(name)
    args = [(url, i, 1, None, 10) for i in range(6)]
    barrier = CTX.Barrier(len(args))
    results = CTX.Queue()
    procs = [CTX.Process(target=workers.writer, args=(*a, barrier, results)) for a in args]
    for p in procs:
        p.start()
    for _ in procs:
        tag, status, value = results.get(timeout=120)
        assert status == "ok", value
    for p in procs:
        p.join(10)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 6


# --- concurrency: real processes ----------------------------------------------------------------

@pytest.mark.parametrize("durability", ["may-lose-recent", "normal"])
def test_writers_and_a_follower_lose_nothing(pg_store_url, durability):
    """8 writer processes on their own sessions, 8 on one shared session, and a follower:
    nothing lost, duplicated or reordered; positions dense; the follower sees every event
    once, in position order (with either durability: the default, "normal", waits for the
    flush after the commit, outside the position lock)."""
    count = 60  # per writer: 960 appends from 16 processes contending for the position lock throughout
    with EventStore.open(pg_store_url) as store:
        store.create_session("shared")
    args = [(pg_store_url, i, count, None, 50) for i in range(8)] + [(pg_store_url, 8 + i, count, "shared", 50) for i in range(8)]
    total = len(args) * count
    barrier = CTX.Barrier(len(args) + 1)
    results = CTX.Queue()
    kw = {"durability": durability}
    procs = [CTX.Process(target=workers.follower, args=(pg_store_url, None, total, barrier, results, "follower"), kwargs=kw)]
    procs += [CTX.Process(target=workers.writer, args=(*a, barrier, results), kwargs=kw) for a in args]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in procs:
            tag, status, value = results.get(timeout=300)
            assert status == "ok", value
            got[tag] = value
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    seen = got["follower"]
    assert [e[0] for e in seen] == list(range(1, total + 1))  # every position once, in order
    for w in range(16):
        assert [e[4] for e in seen if e[3] == w] == list(range(count))  # each writer's order kept
    with psycopg.connect(pg_store_url) as conn:
        rows = conn.execute("SELECT position, session_id, seq FROM events ORDER BY position").fetchall()
    assert [r[0] for r in rows] == list(range(1, total + 1))
    assert [(r[0], r[1], r[2]) for r in rows] == [(e[0], e[1], e[2]) for e in seen]
    by_session: dict = {}
    for _pos, sid, seq in rows:
        by_session.setdefault(sid, []).append(seq)
    assert by_session["shared"] == list(range(8 * count))
    for i in range(8):
        assert by_session[f"w{i}"] == list(range(count))
    with EventStore.open(pg_store_url, readonly=True) as store:  # (the writers' tool results answer no call)
        assert [f for f in audit.verify(store._backend).findings if f.kind in ("hash", "seq", "trigger")] == []


def test_durability_may_lose_recent_commits_asynchronously(pg_store_url):
    """The opt-in "may-lose-recent": the store's write connection commits with
    synchronous_commit off (the server's own setting is not touched), and an append runs no
    flush of its own (with every durability the write connection's own setting is off: the
    durable ones raise it per transaction, see test_durability_full_waits_for_the_flush)."""
    with EventStore.open(pg_store_url, durability="may-lose-recent") as store:
        assert store._backend._full_level is None
        s = store.create_session("s")
        s.append("x", {})
        conn = store._backend._conn("w")
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
        with psycopg.connect(pg_store_url) as other:  # another connection keeps the server's setting
            other.execute("SET synchronous_commit = on")
            assert other.execute("SHOW synchronous_commit").fetchone()[0] == "on"


def test_durability_full_waits_for_the_flush(pg_store_url, monkeypatch):
    """durability="full" with the server's durable synchronous_commit ("on" here, where the
    test server is set to off): an append that finds the position lock free commits at that
    level (its commit flushes, one round trip, no flush statement after); one that finds
    another append holding it commits asynchronously and then waits, outside the lock, until
    the WAL is flushed past its commit."""
    with psycopg.connect(pg_store_url) as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"  # the test server's
    with EventStore.open(pg_store_url, durability="full") as store:
        backend = store._backend
        s = store.create_session("s")
        conn = backend._conn("w")
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
        assert backend._sync_level == "on"
        from eventstore.backends.postgres import backend as postgres
        assert conn.execute("SELECT current_setting('synchronous_commit') FROM set_config('synchronous_commit', %s, "
                            "true)", (backend._sync_level,)).fetchone()[0] == "on"  # as FLUSH runs
        assert "set_config('synchronous_commit', %s, true)" in postgres.FLUSH
        committed, inserted = [], []
        durable, insert = backend._durable, backend._insert

        def spy_durable(c, sid):
            committed.append(c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0])  # past the commit
            durable(c, sid)

        def spy_insert(*args):
            inserted.append(insert(*args))
            return inserted[-1]

        monkeypatch.setattr(backend, "_durable", spy_durable)
        monkeypatch.setattr(backend, "_insert", spy_insert)
        s.append("x", {"i": -1})  # the head is cached from here on
        del inserted[:]
        # Uncontended: each commit is synchronous (the server's setting is off, so only the
        # INSERT's own set_config can make it so), and no flush statement follows: the
        # INSERT's commit record (its transaction's, from the row's xmin) is flushed the
        # moment the append returns (the WAL writer would take up to 200 ms).
        with psycopg.connect(pg_store_url, autocommit=True) as other:
            other.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")  # (PostgreSQL 15+)
            for i in range(20):
                start = other.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
                seq = s.append("x", {"i": i}).seq
                flushed = other.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
                assert inserted[-1][1] is True, i
                assert other.execute("SELECT %s::pg_lsn > %s::pg_lsn", (flushed, start)).fetchone()[0], i
                ends = other.execute(  # (pg_walinspect reads only flushed WAL)
                    "SELECT w.end_lsn <= %s::pg_lsn FROM events e, pg_get_wal_records_info(%s, %s) w "
                    "WHERE e.session_id = 's' AND e.seq = %s AND w.resource_manager = 'Transaction' "
                    "AND w.record_type = 'COMMIT' AND w.xid = e.xmin", (flushed, start, flushed, seq)).fetchall()
                assert ends == [(True,)], i
        assert committed == []
        # Contended: another transaction holds the position lock while the append starts.
        with psycopg.connect(pg_store_url, autocommit=True) as holder:
            holder.execute("BEGIN")
            holder.execute(postgres.LOCK_POSITIONS)
            t = threading.Thread(target=s.append, args=("x", {"i": 20}))
            t.start()
            deadline = time.monotonic() + 30
            while not holder.execute("SELECT count(*) FROM pg_locks WHERE relation = 'events_position_lock'::regclass AND NOT granted"
                                     ).fetchone()[0]:
                assert time.monotonic() < deadline, "the append never waited for the position lock"
                time.sleep(0.01)
            holder.execute("COMMIT")
            t.join(30)
        assert not t.is_alive()
        assert inserted[-1][1] is False and len(committed) == 1
        assert conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (committed[-1],)).fetchone()[0]
        # Batches commit asynchronously and flush after.
        s.append_many([("x", {}), ("y", {})], expected_seq=22)
        assert len(committed) == 2
        assert conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (committed[-1],)).fetchone()[0]
        assert [e.seq for e in s.events()] == list(range(24))
    with pytest.raises(DatabaseError, match="durability"):
        EventStore.open(pg_store_url, durability="fast")


def test_durability_full_flush_refused_after_the_commit(pg_store_url, monkeypatch):
    """When the flush statement fails after the INSERT committed (a batch commits
    asynchronously, then flushes), the append raises DatabaseError saying it committed; the
    events are stored and the next append follows them."""
    from eventstore.backends.postgres import backend as postgres
    with EventStore.open(pg_store_url, durability="full") as store:
        s = store.create_session("s")
        s.append("x", {})
        monkeypatch.setattr(postgres, "FLUSH", "SELECT 1 / 0 FROM set_config('synchronous_commit', %s, true)")
        with pytest.raises(DatabaseError, match="committed, but the server did not confirm the flush"):
            s.append_many([("x", {"i": 1}), ("x", {"i": 2})])
        monkeypatch.undo()
        assert s.append("x", {"i": 3}).seq == 3
        assert [e.payload for e in s.events()] == [{}, {"i": 1}, {"i": 2}, {"i": 3}]


def test_follower_wakes_on_notify(pg_store_url):
    store = filled(pg_store_url)
    follower = store.follower(poll_interval=60)
    try:
        last = follower.events_after(0, 100)[-1][0]
        assert follower.wait_for_commit(0.2) is False  # nothing committed: the timeout
        with EventStore.open(pg_store_url) as other:
            other.session("t").append("x", {})
        assert follower.wait_for_commit(30) is True  # woken by the commit, not by the 60 s poll
        assert [r[0] for r in follower.events_after(last, 100)] == [last + 1]
    finally:
        follower.close()
        store.close()


# --- a server restart under a follower ----------------------------------------------------------

@pytest.fixture(scope="module")
def restartable_server(pg_server):
    """A server of this module's own, which its tests restart, stop and start (initdb once
    for them all, not once per test)."""
    from pgserver import PgServer

    with PgServer() as server:
        yield server


@pytest.fixture
def own_server(restartable_server):
    """The server the test may restart, and the URL of a new database of the test's own in it."""
    return restartable_server, restartable_server.url(restartable_server.create_database())


def test_tail_f_goes_on_after_a_server_restart(own_server):
    """Real `tail -f` processes, one following a session, one waiting for a session not
    stored yet: the server restarts under them, and events appended after the restart are
    shown, with nothing on stderr."""
    import subprocess
    import sys

    server, url = own_server
    with EventStore.open(url) as store:
        s = store.create_session("live")
        s.append("user/message", {"content": "before the restart"})
    tails = {sid: subprocess.Popen([sys.executable, "-m", "eventstore", "--db", url, "tail", "-f", sid,
                                    "--timeout", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for sid in ("live", "later")}
    out: dict[str, list[str]] = {sid: [] for sid in tails}
    for sid, proc in tails.items():
        threading.Thread(target=lambda o=out[sid], p=proc: o.extend(p.stdout), daemon=True).start()

    def shown(sid: str, text: str) -> None:
        deadline = time.monotonic() + 60
        while not any(text in line for line in out[sid]):
            assert tails[sid].poll() is None and time.monotonic() < deadline, (out, tails[sid].stderr.read())
            time.sleep(0.02)

    try:
        shown("live", "before the restart")
        waiting = tails["later"].stderr.readline()  # said once, on stderr, before it waits
        assert waiting == "waiting for session 'later' (Ctrl-C stops)\n"
        server.restart()
        with EventStore.open(url) as store:
            store.session("live").append("user/message", {"content": "after the restart"})
            store.create_session("later").append("user/message", {"content": "a new session"})
        shown("live", "after the restart")
        shown("later", "a new session")
    finally:
        errors = {}
        for sid, proc in tails.items():
            proc.terminate()
            errors[sid] = proc.communicate(timeout=30)[1]
    assert errors == {"live": "", "later": ""}


def test_import_watch_tries_again_a_file_the_database_was_away_for(own_server, tmp_path):
    """A real `import --watch` process: lines written while the server is stopped fail to
    import (said on stderr), and are imported once it is back, though the file did not
    change since."""
    import subprocess
    import sys

    server, url = own_server
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "agent.jsonl"
    lines = [json.dumps({"type": "session/meta", "id": "w"}, separators=(",", ":"))]
    lines += [json.dumps({"type": "user/message", "seq": i, "ts": 1764460800 + i, "content": f"m{i}"},
                         separators=(",", ":")) for i in range(4)]
    log.write_text("\n".join(lines[:3]) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", url, "import", "--watch", "--append",
                             str(folder), "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()

    def stored() -> int:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                return conn.execute("SELECT count(*) FROM events WHERE session_id = 'w'").fetchone()[0]
        except (psycopg.OperationalError, pg_errors.UndefinedTable):  # (server away; schema not made yet)
            return -1

    def wait(condition, what: str) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert proc.poll() is None and time.monotonic() < deadline, (what, err)
            time.sleep(0.05)

    try:
        wait(lambda: stored() == 2, "the first two events")
        server.halt()
        log.write_text("\n".join(lines) + "\n")
        wait(lambda: any("agent.jsonl: " in line and "cannot connect" in line for line in err), "the failure")
        server.resume()
        wait(lambda: stored() == 4, "the rest, once the server is back")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_follower_refuses_to_go_on_when_the_restarted_server_lost_what_it_read(own_server):
    """After a restart the follower checks that the last event it handed out is still
    stored (a crash loses the last asynchronous commits, and new events would take their
    positions). Here a superuser removes it, triggers off, before the restart."""
    server, url = own_server
    with EventStore.open(url) as store:
        s = store.create_session("s")
        s.append_many([("x", {"i": i}) for i in range(3)])
        follower = store.follower(poll_interval=60)
        try:
            rows = follower.events_after(0, 100)
            assert [r[2] for r in rows] == [0, 1, 2]
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SET session_replication_role = replica")
                conn.execute("DELETE FROM events WHERE position = %s", (rows[-1][0],))
            server.restart()
            with pytest.raises(DatabaseError, match=f"restarted without the event at position {rows[-1][0]} "
                                                    r"\(session 's' seq 2\), which was read before"):
                follower.wait_for_commit(30)
        finally:
            follower.close()


# --- tampering with the triggers switched off ------------------------------------------------

def test_verify_finds_a_search_index_out_of_step_with_the_log(pg_store_url):
    """The derived search index is written by whoever searches (the writer role too): a
    bound past the log, a row missing, a row of no message event, and (with full) a row's
    vector changed are each a finding, and search really misses or invents hits then."""
    from eventstore.audit.integrity import verify_database
    from eventstore.search import search

    def found(full: bool = False) -> list[str]:
        return [f.message for f in verify_database(pg_store_url, full=full).findings]

    store = filled(pg_store_url)
    try:
        search(store, "hi")  # the index caught up with the log
        assert found(full=True) == []
        with psycopg.connect(pg_store_url, autocommit=True) as conn:
            last = conn.execute("SELECT max(position) FROM events").fetchone()[0]
            with pytest.raises(psycopg.DatabaseError) as e:  # the guards of revision 0250
                conn.execute("UPDATE events_search_state SET indexed_through = 9000000000")
            assert e.value.sqlstate == "ES012"
            conn.execute("SET session_replication_role = replica")  # (the superuser: guards off)
            conn.execute("UPDATE events_search_state SET indexed_through = 9000000000")
            store.session("t").append("user/message", {"content": "hidden"})
            assert search(store, "hidden") == []
            assert found() == [f"the search index does not match the log: its bound (position 9000000000) is past "
                               f"the last event (position {last + 1}): search may miss or invent hits (events_search, "
                               f"events_search_state: derived, written by whoever searches)",
                               "the search index does not match the log: 1 searchable event(s) up to its bound have no "
                               "row: search may miss or invent hits (events_search, events_search_state: derived, "
                               "written by whoever searches)"]
            conn.execute("UPDATE events_search_state SET indexed_through = %s", (last,))
            assert [h.seq for h in search(store, "hidden")] == [2] and found() == []
            conn.execute("INSERT INTO events_search (position, session_id, type, tsv) "
                         "SELECT position, session_id, 'user/message', to_tsvector('simple', 'planted') FROM events "
                         "WHERE type = 'turn/start'")
            assert len(found()) == 1 and "1 row(s) belong to no searchable event" in found()[0]
            conn.execute("DELETE FROM events_search WHERE tsv = to_tsvector('simple', 'planted')")
            conn.execute("UPDATE events_search SET tsv = to_tsvector('simple', 'invented') "
                         "WHERE position = (SELECT min(position) FROM events_search)")
        assert found() == []
        assert len(found(full=True)) == 1 and "1 row(s) hold another vector" in found(full=True)[0]
    finally:
        store.close()



def test_verify_names_every_tampered_seq(pg_store_url):
    store = filled(pg_store_url)
    with EventStore.open(pg_store_url, readonly=True) as ro:
        assert audit.verify(ro._backend).ok
    with psycopg.connect(pg_store_url, autocommit=True) as conn:  # a superuser switches the triggers off
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE events SET payload = '{\"content\":\"bye\"}' WHERE session_id = 's' AND seq = 0")
        conn.execute("DELETE FROM events WHERE session_id = 's' AND seq = 2")
        conn.execute("UPDATE events SET ts = 5 WHERE session_id = 't' AND seq = 1")
        conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                     "VALUES (100, 'ghost', 0, 'x', 1, '{}', repeat('0', 64))")
        conn.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                     "VALUES (101, 't', 2, 'user/message', 1, '{\"content\":\"forged\"}', repeat('0', 64))")
    with EventStore.open(pg_store_url, readonly=True) as ro:
        report = audit.verify(ro._backend)
    found = {(f.session_id, f.seq, f.kind) for f in report.findings}
    assert ("t", 2, "hash") in found  # an event added at the end
    assert ("s", 0, "hash") in found
    assert ("s", 3, "seq") in found  # seq 2 is missing
    assert ("t", 1, "hash") in found
    assert ("ghost", None, "session") in found
    store.close()


def test_verify_reports_a_disabled_trigger(pg_store_url):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_guard_update")
        conn.execute("DROP TRIGGER sessions_guard_delete ON sessions")
    with EventStore.open(pg_store_url, readonly=True) as ro:
        report = audit.verify(ro._backend)
    text = "\n".join(str(f) for f in report.findings if f.kind == "trigger")
    assert "events_guard_update on events is disabled" in text
    assert "sessions_guard_delete on sessions is missing" in text


# --- least privilege --------------------------------------------------------------------------

def test_writer_and_auditor_roles(pg_server, pg_url, tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", pg_url, "roles"])
    assert r.exit_code == 0, r.output
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE agent1 LOGIN IN ROLE eventstore_writer; "
                     "CREATE ROLE audit1 LOGIN IN ROLE eventstore_auditor; "
                     "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    name = pg_url.rsplit("/", 1)[1]
    writer, auditor = pg_server.url(name, "agent1"), pg_server.url(name, "audit1")

    # the store works as the writer: appends, batches, import
    with EventStore.open(writer) as store:
        s = store.create_session("w")
        s.append("user/message", {"content": "hi"})
        s.append_many([("turn/start", {}), ("turn/end", {})])
        store.import_jsonl(DATA / "demo.jsonl")
    with psycopg.connect(writer, autocommit=True) as conn:
        before = snapshot(conn)
        for sql in ["UPDATE events SET ts = 0", "DELETE FROM events", "TRUNCATE events CASCADE",
                    "ALTER TABLE events DISABLE TRIGGER events_guard_update", "DROP TABLE events CASCADE",
                    "SET session_replication_role = replica", "DROP TRIGGER events_guard_delete ON events",
                    "CREATE TABLE x (a int)", "DELETE FROM alembic_version"]:
            with pytest.raises((pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction)):
                conn.execute(sql)
        assert snapshot(conn) == before

    # sql and verify work as the auditor, who cannot write
    r = runner.invoke(cli, ["--db", auditor, "sql", "SELECT count(*) AS n FROM events WHERE session_id = 'w'",
                            "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"n": 3}]
    r = runner.invoke(cli, ["--db", auditor, "verify", "w"])
    assert r.exit_code == 0, r.output
    assert "note: " in r.stderr and "schema not compared" in r.stderr  # (no CREATE for the scratch schema)
    with psycopg.connect(auditor, autocommit=True) as conn:
        with pytest.raises(pg_errors.InsufficientPrivilege):
            conn.execute("INSERT INTO sessions (id, created_at) VALUES ('a', 1)")

    # writing as the auditor, or anything as a role granted neither, says which role lacks what
    hint = ("may not: grant it eventstore_writer to append or eventstore_auditor to read; `eventstore roles`, run "
            "as the tables' owner, creates both)")
    with pg_server.connect() as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE nobody1 LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    with psycopg.connect(writer, autocommit=True) as conn:
        before = snapshot(conn)
    r = runner.invoke(cli, ["--db", auditor, "import", str(DATA / "numbers.jsonl")])
    assert r.exit_code == 1
    assert (f"{DATA / 'numbers.jsonl'}: {auditor}: permission denied for table events_position_lock (role 'audit1' "
            f"{hint}\n"
            in r.stderr), r.stderr
    with EventStore.open(auditor) as store:
        with pytest.raises(DatabaseError) as e:
            store.session("w").append("user/message", {"content": "not mine to write"})
    assert str(e.value) == f"{auditor}: permission denied for table events_position_lock (role 'audit1' {hint}"
    nobody = pg_server.url(name, "nobody1")
    r = runner.invoke(cli, ["--db", nobody, "sessions"])
    assert (r.exit_code, r.stderr) == (1, f"error: {nobody}: permission denied for table alembic_version "
                                          f"(role 'nobody1' {hint}\n")
    r = runner.invoke(cli, ["--db", nobody, "sql", "SELECT 1 AS one"])  # (no schema warning: it cannot read it)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "one\n1  \n", "(1 row)\n")
    r = runner.invoke(cli, ["--db", nobody, "sql", "SELECT count(*) FROM events"])
    assert (r.exit_code, r.stderr) == (1, "error: refused: permission denied for table events (role 'nobody1' may "
                                          "not; eventstore_auditor, which `eventstore roles` creates, may read every "
                                          "table)\n")
    with psycopg.connect(writer, autocommit=True) as conn:
        assert snapshot(conn) == before



def test_the_writer_appends_and_the_auditor_reads_a_fold_of_escapes(pg_server, pg_url):
    """As the roles `eventstore roles` makes: the writer appends a fold whose strings hold
    U+0000 beside a lone surrogate (the insert guard's es_json refused it before 0370), and
    the auditor reads it back exactly, through derive_messages and the views (es_raw, new in
    0370, is executable by every role that reads the views)."""
    from eventstore.log import codec

    assert CliRunner().invoke(cli, ["--db", pg_url, "roles"]).exit_code == 0
    tag = uuid.uuid4().hex[:8]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE w_{tag} LOGIN IN ROLE eventstore_writer")
        conn.execute(f"CREATE ROLE a_{tag} LOGIN IN ROLE eventstore_auditor")
    name = pg_url.rsplit("/", 1)[1]
    s = "\x00\ud83d\\\x00"
    call = {"id": s, "type": "function", "function": {"name": s, "arguments": s}}
    expected = [{"role": "assistant", "content": f"{s}\n\n{s}", "tool_calls": [call, s]},
                {"role": "tool", "tool_call_id": s, "content": s}]
    try:
        with EventStore.open(pg_server.url(name, f"w_{tag}")) as store:
            session = store.create_session()
            session.append_many([("assistant/message", {"message_id": s, "content": s, "tool_calls": [call]}),
                                 ("assistant/part", {"message_id": s, "content": s, "tool_calls": [s]}),
                                 ("tool/result", {"tool_call_id": s, "content": s})])
        with EventStore.open(pg_server.url(name, f"a_{tag}"), readonly=True) as store:
            assert store.session(session.id).derive_messages() == expected
            assert store.session(session.id).messages_json() == codec.dumps(expected)
        with psycopg.connect(pg_server.url(name, f"a_{tag}"), autocommit=True) as conn:
            assert conn.execute("SELECT call_seq, result_seq FROM tool_calls ORDER BY call_seq").fetchall() \
                == [(0, 2), (1, None)]
            assert conn.execute("SELECT string_agg(message, ',' ORDER BY seq) FROM messages").fetchone()[0] \
                == codec.dumps(expected)[1:-1]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for role in (f"w_{tag}", f"a_{tag}"):
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


@contextlib.contextmanager
def owned_database(pg_server, *options: str):
    """A new login role (with ``options``, e.g. CREATEROLE) owning a new database: yields
    ``(tag, owner, database name, the owner's URL)``; drops the database and every role
    named ``*_TAG`` afterwards."""
    tag = uuid.uuid4().hex[:8]
    owner, name = f"owner_{tag}", f"owned_{tag}"
    with pg_server.connect() as conn:
        conn.execute(f"CREATE ROLE {owner} LOGIN {' '.join(options)}")
        conn.execute(f'CREATE DATABASE "{name}" OWNER {owner}')
    try:
        yield tag, owner, name, pg_server.url(name, owner)
    finally:
        pg_server.drop_database(name)
        with pg_server.connect() as conn:
            for (role,) in conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY rolname = %s",
                                        (f"%{tag}", owner)).fetchall():
                conn.execute(f'DROP OWNED BY "{role}" CASCADE')
                conn.execute(f'DROP ROLE "{role}"')


def test_roles_refuses_names_whose_privileges_it_would_revoke(pg_server):
    """--writer or --auditor naming the tables' owner, the role running it or a superuser
    (the set-up revokes a role's privileges before granting its own), one role for both,
    or an auditor that is a member of the writer, is refused before any grant; the owner
    keeps what it had."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        with pg_server.connect() as conn:
            conn.execute(f"CREATE ROLE kid_{tag} IN ROLE {owner}")
            conn.execute(f"CREATE ROLE wr_{tag}")
            conn.execute(f"CREATE ROLE agent_{tag} IN ROLE wr_{tag}")
        cases = [([f"wr_{tag}", f"agent_{tag}"], f"role 'agent_{tag}' is a member of the writer role 'wr_{tag}'"),
                 ([owner, f"a_{tag}"], f"role {owner!r} owns the tables"),
                 ([f"w_{tag}", "postgres"], "role 'postgres' is a superuser"),
                 ([f"kid_{tag}", f"a_{tag}"], f"role 'kid_{tag}' is a member of the tables' owner"),
                 ([f"{owner} ", f"a_{tag}"], f"role name '{owner} ': no role name starts or ends with a space"),
                 ([f"w_{tag}", f"w_{tag}"], f"the writer and auditor roles must differ (both are 'w_{tag}')")]
        for (writer, auditor), said in cases:
            r = CliRunner().invoke(cli, ["--db", url, "roles", "--writer", writer, "--auditor", auditor])
            assert r.exit_code == 1 and r.stderr.startswith(f"error: {said}"), r.stderr
        r = CliRunner().invoke(cli, ["--db", pg_server.url(name), "roles", "--writer", "postgres"])
        assert r.exit_code == 1 and r.stderr.startswith("error: role 'postgres' is the role running this"), r.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT has_table_privilege('alembic_version', 'UPDATE'), "
                                "has_table_privilege('events', 'INSERT'), "
                                "(SELECT count(*) FROM pg_roles WHERE rolname LIKE %s)",
                                (f"%_{tag}",)).fetchone() == (True, True, 4)  # (the owner, its member, wr_, agent_)
        # a name that holds the DO blocks' $$ quote gets another one
        r = CliRunner().invoke(cli, ["--db", url, "roles", "--writer", f"w$${tag}", "--auditor", f"a_{tag}"])
        assert r.exit_code == 0, r.output
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT has_table_privilege(%s, 'events', 'INSERT')",
                                (f"w$${tag}",)).fetchone() == (True,)


def test_roles_as_an_owner_without_createrole_says_what_it_needs(pg_server):
    """The database's owner may create the tables but not roles: `roles` says which role
    runs it (the error recognised by SQLSTATE 42501), and runs once given CREATEROLE."""
    with owned_database(pg_server) as (tag, owner, name, url):
        args = ["--db", url, "roles", "--writer", f"w_{tag}", "--auditor", f"a_{tag}"]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 1
        assert r.stderr == (f"error: postgresql://{owner}@127.0.0.1:{pg_server.port}/{name}: cannot set up the roles: "
                            "permission denied to create role: run it once as a role with CREATEROLE that owns "
                            "the tables, or as a superuser\n")
        with pg_server.connect() as conn:
            conn.execute(f"ALTER ROLE {owner} CREATEROLE")
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        # run by the owner, not a superuser: it says what stays with PUBLIC
        assert "note: PUBLIC keeps EXECUTE on pg_logical_emit_message" in r.stderr, r.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT has_table_privilege(%s, 'events', 'INSERT'), "
                                "has_table_privilege(%s, 'events', 'INSERT')",
                                (f"w_{tag}", f"a_{tag}")).fetchone() == (True, False)
        r = CliRunner().invoke(cli, ["--db", pg_server.url(name), *args[2:]])  # a superuser's: nothing left
        assert r.exit_code == 0 and "note:" not in r.stderr, r.output


# --- eventstore sql ---------------------------------------------------------------------------

@pytest.mark.parametrize("sql", ["DELETE FROM events", "CREATE TABLE x (a int)", "SELECT 1; DELETE FROM events",
                                 "COMMIT", "INSERT INTO sessions (id, created_at) VALUES ('z', 1)"])
def test_sql_refuses_what_writes(pg_store_url, sql):
    filled(pg_store_url).close()
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        before = snapshot(conn)
    r = CliRunner().invoke(cli, ["--db", pg_store_url, "sql", sql])
    assert r.exit_code != 0
    assert "Traceback" not in r.output
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        assert snapshot(conn) == before


def test_sql_refuses_what_acts_outside_the_tables(pg_server, pg_store_url):
    """A READ ONLY transaction still lets a superuser's COPY ... TO write a server file or run
    a program, directly or from server-side code: sql runs a superuser's query as
    pg_read_all_data, so PostgreSQL refuses them whatever the text (a nested comment
    included), and no file appears. A column named copy is still read."""
    filled(pg_store_url).close()
    target = pg_server.folder / "written-by-sql"
    quoted = f"''{target}''"  # (the path as a literal inside the DO block's literal)
    cases = [("to a file", f"COPY (SELECT 1) TO '{target}'"),
             ("to or from an external program", f"/* c */ copy (SELECT 1) TO PROGRAM 'touch {target}'"),
             ("to or from an external program", f"/* /* */ x */ COPY (SELECT 1) TO PROGRAM 'touch {target}'"),
             ("to a file", f"DO $$BEGIN EXECUTE 'COPY (SELECT 1) TO {quoted}'; END$$"),
             ("pg_read_file", "SELECT pg_read_file('/etc/passwd')"),
             ("lo_export", f"SELECT lo_export(1, '{target}')")]
    for word, sql in cases:
        r = CliRunner().invoke(cli, ["--db", pg_store_url, "sql", sql])
        assert r.exit_code == 1 and r.stderr.startswith("error: refused: ") and word in r.stderr, r.stderr
        assert "'pg_read_all_data', as which sql runs," in r.stderr
        assert not target.exists()
    r = CliRunner().invoke(cli, ["--db", pg_store_url, "sql", "--csv", "SELECT 1 AS copy"])
    assert (r.exit_code, r.stdout) == (0, "copy\n1\n")


def test_sql_settings_do_not_outlive_the_query(pg_store_url):
    filled(pg_store_url).close()
    from eventstore.backends.postgres import PostgresBackend

    q = PostgresBackend.query_connection(pg_store_url)
    try:
        list(q.query("SELECT set_config('statement_timeout', '0', false)")[1])
        _cols, rows = q.query("SELECT current_setting('statement_timeout'), current_setting('transaction_read_only')")
        assert list(rows) == [("30s", "on")]
    finally:
        q.close()


# --- the projection and the audit views equal SQLite's ---------------------------------------

def test_views_give_the_same_rows_as_sqlite(pg_store_url, tmp_path):
    db = new_sqlite_store(tmp_path / "x.db")
    with EventStore.open(db) as lite, EventStore.open(pg_store_url) as pg:
        for name in FIXTURES:
            lite.import_jsonl(DATA / f"{name}.jsonl")
            pg.import_jsonl(DATA / f"{name}.jsonl")
    src = sqlite3.connect(db)
    with psycopg.connect(pg_store_url) as conn:
        for view, key in [("messages", "session_id, seq"), ("tool_calls", "session_id, call_seq, call_id"),
                          ("turns", "session_id, start_seq"), ("session_summary", "session_id")]:
            a = src.execute(f"SELECT * FROM {view} ORDER BY {key}").fetchall()
            b = [tuple(r) for r in conn.execute(f"SELECT * FROM {view} ORDER BY {key}")]
            if view == "tool_calls":  # SQLite's ->> ends a text at U+0000, which PostgreSQL cannot hold
                a = [r[:6] + r[7:] for r in a]
                b = [r[:6] + r[7:] for r in b]
            assert a == b, view
    src.close()


# --- eventstore copy --------------------------------------------------------------------------

def test_copy_sqlite_to_postgres_and_back(pg_url, tmp_path):
    lite = new_sqlite_store(tmp_path / "a.db")
    with EventStore.open(lite) as store:
        ids = [store.import_jsonl(DATA / f"{name}.jsonl") for name in FIXTURES]
        store.create_session("empty")
        store.session(ids[0]).append("note", {"text": "live"})
    runner = CliRunner()
    r = runner.invoke(cli, ["copy", str(lite), pg_url])
    assert r.exit_code == 0, r.output
    back = tmp_path / "b.db"
    r = runner.invoke(cli, ["copy", pg_url, str(back)])
    assert r.exit_code == 0, r.output
    with EventStore.open(lite) as a, EventStore.open(pg_url) as p, EventStore.open(back) as b:
        for sid in [*ids, "empty"]:
            assert export_bytes(a, sid) == export_bytes(p, sid) == export_bytes(b, sid)
        for store in (p, b):
            report = audit.verify(store._backend)
            src_report = audit.verify(a._backend)
            assert report.heads == src_report.heads
            assert {str(f) for f in report.findings} == {str(f) for f in src_report.findings}
    # again: everything is already there
    r = runner.invoke(cli, ["copy", str(lite), pg_url, ids[1]])
    assert r.exit_code == 0 and "already there" in r.output, r.output


def test_copy_refuses_a_tampered_source_session(pg_url, tmp_path):
    lite = new_sqlite_store(tmp_path / "a.db")
    with EventStore.open(lite) as store:
        sid = store.import_jsonl(DATA / "demo.jsonl")
    conn = sqlite3.connect(lite)
    conn.execute("DROP TRIGGER events_guard_update")
    conn.execute("UPDATE events SET ts = ts + 1 WHERE seq = 1")
    conn.commit()
    conn.close()
    r = CliRunner().invoke(cli, ["copy", str(lite), pg_url])
    assert r.exit_code != 0
    assert "do not verify" in r.output
    with EventStore.open(pg_url) as p:
        assert [s.id for s in p.sessions()] == []
    assert sid


def test_export_of_a_postgres_session_streams(pg_store_url):
    with EventStore.open(pg_store_url) as store:
        sid = store.import_jsonl(DATA / "big.jsonl")
        out = io.BytesIO()
        store.export_jsonl(sid, out)
    assert out.getvalue() == (DATA / "big.jsonl").read_bytes()


def test_urls_in_both_forms_and_no_password_in_messages(pg_url, pg_server):
    sqlalchemy_form = pg_url.replace("postgresql://", "postgresql+psycopg://")
    with EventStore.open(sqlalchemy_form) as store:
        store.create_session("a").append("x", {})
    with EventStore.open(pg_url) as store:
        assert [s.id for s in store.sessions()] == ["a"]
    closed_port = pg_url.replace(f":{pg_server.port}/", ":1/").replace("postgres@", "postgres:s3cret@")
    with pytest.raises(DatabaseError) as e:
        EventStore.open(closed_port)
    assert "cannot connect" in str(e.value) and "s3cret" not in str(e.value)
    # a password given as a parameter, and a URL libpq cannot parse (it quotes it back)
    for url in (pg_url.replace(f":{pg_server.port}/", ":1/") + "?sslmode=disable&password=s3cret",
                "postgresql://postgres:s3cret@[::1/x", "postgresql:///x?host=/nonexistent&password=s3cret"):
        with pytest.raises(DatabaseError) as e:
            EventStore.open(url)
        assert "cannot connect" in str(e.value) and "s3cret" not in str(e.value), str(e.value)
    with EventStore.open(pg_url + "?password=s3cret") as store:  # (the test server trusts local connections)
        assert "s3cret" not in store.display and store.display == pg_url
    r = CliRunner().invoke(cli, ["--db", pg_url + "?password=s3cret", "init"])
    assert r.exit_code == 0 and r.output == f"{pg_url}: ready (schema revision {SCHEMA_REVISION})\n", r.output


def test_ctrl_c_stops_a_long_sql_query(pg_store_url):
    """A real process, a real SIGINT, while the server runs its query: one line, status 1,
    and the server's query is cancelled."""
    import os
    import signal
    import subprocess
    import sys

    filled(pg_store_url).close()
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", pg_store_url, "sql", "SELECT pg_sleep(600)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # (the rows stream through a cursor: the server runs the query in the FETCH that reads them)
    running = ("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'FETCH %% FROM \"eventstore_sql\"' "
               "AND state = 'active'")
    try:
        with psycopg.connect(pg_store_url, autocommit=True) as look:
            deadline = time.monotonic() + 60
            while not look.execute(running).fetchone()[0]:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 1
            deadline = time.monotonic() + 30
            while look.execute(running).fetchone()[0]:  # cancelled on the server too
                assert time.monotonic() < deadline
                time.sleep(0.02)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert b"interrupted" in err and b"Traceback" not in err


def test_an_import_transaction_sees_a_writer_waiting_for_the_position_lock(pg_store_url):
    """A chunked import ends its chunk when another writer waits (eventstore.io.bulk): the
    PostgreSQL import transaction says so after the insert during which one came to wait for
    the position lock it holds, and only then (alone, it never does)."""
    seen = []
    locked = threading.Event()

    def writer() -> None:  # what an append does first: wait for the position lock
        with psycopg.connect(pg_store_url, autocommit=True) as conn, conn.transaction():
            conn.execute("LOCK TABLE events_position_lock IN EXCLUSIVE MODE")
            locked.set()

    def waiting(conn) -> bool:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' "
                            "AND relation = 'events_position_lock'::regclass").fetchone()[0] > 0

    def body(tx):
        assert tx.create_session(time.time(), "{}") is None
        row = (0, "user/message", 1.0, '{"content":"a"}', "0" * 64, None)
        assert tx.insert([row], 1) is None
        seen.append(tx.writers_waiting())
        thread.start()
        with psycopg.connect(pg_store_url, autocommit=True) as look:
            deadline = time.monotonic() + 30
            while not waiting(look):
                assert time.monotonic() < deadline, "the writer never waited"
                time.sleep(0.01)
        assert tx.insert([(1, *row[1:])], 1) is None
        seen.append(tx.writers_waiting())
        seen.append(tx.writers_waiting())  # (said once: the chunk ends there)
        assert not locked.is_set()

    thread = threading.Thread(target=writer)
    with EventStore.open(pg_store_url) as store:
        store._backend.import_transaction("s", body)
        thread.join(30)
        assert locked.is_set()  # the commit let the writer in
        assert store.session("s").next_seq() == 2
    assert seen == [False, True, False]
