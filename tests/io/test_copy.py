"""`eventstore copy` keeps each session's row: its created_at (and so its meta_hash, its place
in the listing, its checkpoint entry) as well as its events, from SQLite to PostgreSQL and
back, through the one-transaction import and the chunked one (eventstore.core.copy, eventstore.io.bulk);
copied again, it completes a session that grew in the source (the rest chained to the
target's head hash) and reports each session it cannot copy while copying the others."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, db_rows, export_bytes, importing_sessions, interrupt_mid_import, new_sqlite_store

from eventstore import EventStore
from eventstore.audit import anchor, integrity
from eventstore.audit.integrity import duration_text
from eventstore.backends.sqlite import importlock
from eventstore.cli import cli
from eventstore.core.copy import copy_sessions
from eventstore.errors import InvalidEvent
from eventstore.io import bulk
from eventstore.schema import SCHEMA_REVISION

PAIRS = [("sqlite", "postgres"), ("postgres", "sqlite"), ("sqlite", "sqlite"), ("postgres", "postgres")]
T0 = 1764460800.123456  # sub-second digits that a float must carry through both databases


@pytest.fixture
def new_url(request, tmp_path: Path):
    """``new_url(kind)``: the URL of a new empty store of that backend, a copy of the migrated
    template (conftest); ``new_url(kind, bare=True)``: of a database with no store yet (SQLite:
    no file), for a test of what copy or init makes of one."""
    made = []

    def make(kind: str, bare: bool = False) -> str:
        if kind == "sqlite":
            path = tmp_path / f"db{len(made)}-{time.monotonic_ns()}.db"
            return str(path if bare else new_sqlite_store(path))
        server = request.getfixturevalue("pg_server")
        name = server.create_database() if bare else \
            server.create_database(template=request.getfixturevalue("pg_store_template"))
        made.append((server, name))
        return server.url(name)

    yield make
    for server, name in made:
        server.drop_database(name)


def small_chunks(monkeypatch, rows: int = 50) -> None:
    """Imports in batches and chunks of ``rows`` rows, slices of a twentieth of it (as the
    product's 5000 and 250): a long session's paths at a hundredth of its events."""
    monkeypatch.setattr(bulk, "BATCH_ROWS", rows)
    monkeypatch.setattr(bulk, "CHUNK_ROWS", rows)
    monkeypatch.setattr(bulk, "CHUNK_SLICE", max(1, rows // 20))


def write_session(path: Path, sid: str, n: int, meta: dict | None = None, ts0: float = T0 + 5) -> Path:
    with open(path, "wb") as f:
        f.write(json.dumps({"type": "session/meta", "id": sid, **(meta or {})}, separators=(",", ":")).encode() + b"\n")
        for seq in range(n):
            f.write(json.dumps({"type": "user/message", "seq": seq, "ts": round(ts0 + seq / 1000, 3),
                                "content": f"line {seq}"}, separators=(",", ":")).encode() + b"\n")
    return path


def display(url: str) -> str:
    """How copy names its target: a file as given, a URL without its password."""
    if not url.startswith("postgresql://"):
        return url
    with EventStore.open(url, readonly=True) as store:
        return store.display


def rows(url: str) -> list[tuple]:
    with EventStore.open(url, readonly=True) as store:
        return sorted(db_rows(store, "SELECT id, created_at, meta, meta_hash FROM sessions"))


def listing(url: str) -> list[tuple]:
    with EventStore.open(url, readonly=True) as store:
        return [(i.id, i.created_at, i.events, i.last_ts) for i in store.sessions()]


def findings(url: str, **kw) -> list[str]:
    return [str(f) for f in integrity.verify_database(url, **kw).findings]


def fill_source(url: str, tmp_path: Path) -> list[str]:
    """Sessions whose order of creation differs from the order of their first events by more
    than verify's clock slack, one made by ``create_session`` (now, sub-second), the
    conformance fixtures, and one whose session/meta line has a ``created_at`` key (meta)."""
    with EventStore.open(url) as store:
        # created first, its events come last
        store.import_jsonl(write_session(tmp_path / "early.jsonl", "early", 0), created_at=T0)
        store.import_jsonl(write_session(tmp_path / "later.jsonl", "later", 3), created_at=T0 + 2 * integrity.CLOCK_SLACK)
        store.session("early").append("user/message", {"content": "after later's events"})
        names = ["demo", "parallel_tools", "unicode"]
        for k, name in enumerate(names):
            store.import_jsonl(DATA / f"{name}.jsonl", created_at=T0 + 3 * integrity.CLOCK_SLACK + k + 0.25)
        store.import_jsonl(write_session(tmp_path / "m.jsonl", "meta-created", 2, {"created_at": 1.5, "owner": "ada"}),
                           created_at=T0 + 4 * integrity.CLOCK_SLACK)
        store.create_session("live", meta={"created_at": "not the row's"}).append("note", {"text": "now"})
        return [i.id for i in store.sessions()]


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
def test_copy_keeps_created_at_meta_hash_listing_and_a_checkpoint(src_kind, dst_kind, new_url, tmp_path):
    src, dst = new_url(src_kind), new_url(dst_kind, bare=True)  # copy makes the target's store
    ids = fill_source(src, tmp_path)
    assert findings(src) == []
    with EventStore.open(src, readonly=True) as store:
        doc = anchor.make_checkpoint(store._backend)
        first_positions = {sid: store._backend.session_events(sid, limit=1)[0][1] for sid in ids}
    assert first_positions["later"] < first_positions["early"]  # the old order would store "later" first
    with open(tmp_path / "cp.json", "wb") as f:
        anchor.write_checkpoint(doc, f)

    r = CliRunner().invoke(cli, ["copy", src, dst], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "note:" not in r.output

    source_rows = rows(src)
    assert rows(dst) == source_rows  # id, created_at (exactly), meta, meta_hash
    created = {sid: c for sid, c, _m, _h in source_rows}
    assert created["early"] == T0 and created["5a1b896f-beb"] == T0 + 3 * integrity.CLOCK_SLACK + 0.25
    assert created["live"] != int(created["live"])  # now, with its sub-second digits
    assert dict((sid, json.loads(m)) for sid, _c, m, _h in source_rows)["meta-created"] == {"created_at": 1.5,
                                                                                          "owner": "ada"}
    assert listing(dst) == listing(src)
    assert [i[0] for i in listing(dst)] == ids
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst, readonly=True) as b:
        for sid in ids:
            assert export_bytes(a, sid) == export_bytes(b, sid)
    # the target stores the sessions in the order of their dates: verify has nothing to say,
    # and the source's checkpoint (every sessions row hashed) holds for the copy
    assert findings(dst) == []
    assert findings(dst, checkpoints=[("cp.json", doc)]) == []
    r = CliRunner().invoke(cli, ["--db", dst, "verify", "--checkpoint", str(tmp_path / "cp.json")])
    assert r.exit_code == 0 and "against 1 checkpoint: OK" in r.output, r.output

    # again: every session is already there, with its row
    r = CliRunner().invoke(cli, ["copy", src, dst], catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout.count("already there") == len(ids) and "note:" not in r.output, r.output
    assert r.stderr.endswith(f"{len(ids)} sessions: 0 copied, 0 added to, {len(ids)} already there, 0 failed; "
                             f"0 events written to {display(dst)}\n"), r.stderr
    assert rows(dst) == source_rows


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS[:2])
def test_copy_of_a_long_session_goes_in_chunks_and_keeps_created_at(src_kind, dst_kind, new_url, tmp_path,
                                                                      monkeypatch):
    src, dst = new_url(src_kind), new_url(dst_kind)
    small_chunks(monkeypatch)
    n = bulk.BATCH_ROWS + 2 * bulk.CHUNK_ROWS + 7
    with EventStore.open(src) as store:
        store.import_jsonl(write_session(tmp_path / "big.jsonl", "big", n, {"owner": "ada"}), created_at=T0 + 0.5)
        store.create_session("small", meta={"k": 1})
    with EventStore.open(src, readonly=True) as store:
        doc = anchor.make_checkpoint(store._backend)

    chunked = []
    real = bulk._import_chunked

    def spy(*args, **kwargs):
        report = real(*args, **kwargs)
        chunked.append(report and (report.session_id, report.status))
        return report

    monkeypatch.setattr(bulk, "_import_chunked", spy)
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst) as b:
        results = copy_sessions(a, b)
    assert [(r.session_id, r.events, r.skipped, r.note) for r in results] == [("big", n, False, ""),
                                                                              ("small", 0, False, "")]
    assert chunked == [("big", "imported")]
    assert rows(dst) == rows(src)
    assert dict((sid, c) for sid, c, _m, _h in rows(dst))["big"] == T0 + 0.5
    assert listing(dst) == listing(src)
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst, readonly=True) as b:
        assert export_bytes(a, "big") == export_bytes(b, "big")
    assert findings(dst, checkpoints=[("cp.json", doc)]) == []


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS[:2])
def test_an_interrupted_chunked_copy_resumes_with_the_sources_created_at(src_kind, dst_kind, new_url, tmp_path,
                                                                         monkeypatch):
    src, dst = new_url(src_kind), new_url(dst_kind)
    small_chunks(monkeypatch)
    n = bulk.BATCH_ROWS + 3 * bulk.CHUNK_ROWS
    with EventStore.open(src) as store:
        store.import_jsonl(write_session(tmp_path / "big.jsonl", "big", n), created_at=T0 + 0.75)

    real = bulk._store_batches
    calls = []

    def fail_second_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("the copy was interrupted")
        return real(*args, **kwargs)

    monkeypatch.setattr(bulk, "_store_batches", fail_second_chunk)
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst) as b, pytest.raises(OSError):
        copy_sessions(a, b)
    with EventStore.open(dst, readonly=True) as b:  # the first chunk is stored, hidden
        assert b.sessions() == []
        assert 0 < db_rows(b, "SELECT count(*) FROM events")[0][0] < n
    monkeypatch.setattr(bulk, "_store_batches", real)
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst) as b:
        [result] = copy_sessions(a, b)
    assert (result.events, result.skipped, result.note) == (n, False, "")
    assert rows(dst) == rows(src)
    assert findings(dst) == []


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS[:2])
def test_a_session_already_in_the_target_with_another_created_at_keeps_its_row_and_is_named(
        src_kind, dst_kind, new_url, tmp_path):
    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as store:
        store.import_jsonl(DATA / "demo.jsonl", created_at=T0)
        store.export_jsonl("5a1b896f-beb", tmp_path / "demo.jsonl")
    with EventStore.open(dst) as store:  # imported from its file before: dated at that import
        store.import_jsonl(tmp_path / "demo.jsonl")
    before = rows(dst)
    r = CliRunner().invoke(cli, ["copy", src, dst], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "already there" in r.output
    assert f"note: its created_at here ({before[0][1]!r}) differs from the source's ({T0!r})" in r.output
    assert rows(dst) == before


def test_import_dates_a_new_session_now_unless_given_created_at(store, tmp_path):
    path = write_session(tmp_path / "m.jsonl", "m", 3, {"created_at": T0, "owner": "ada"})
    t0 = time.time()
    report = bulk.import_jsonl(store, path)
    t1 = time.time()
    [(created, meta)] = db_rows(store, "SELECT created_at, meta FROM sessions WHERE id = 'm'")
    assert report.status == "imported" and t0 <= created <= t1  # the meta line's key is meta, not the row's date
    assert json.loads(meta) == {"created_at": T0, "owner": "ada"}

    # given: the new session carries it; a stored session keeps its own
    other = write_session(tmp_path / "o.jsonl", "o", 3)
    assert store.import_jsonl(other, created_at=T0 + 1) == "o"
    assert store.import_jsonl(path, created_at=T0 + 2) == "m"
    assert bulk.import_jsonl(store, path, created_at=T0 + 2).status == "skipped"
    assert dict(db_rows(store, "SELECT id, created_at FROM sessions")) == {"m": created, "o": T0 + 1}
    for bad in (float("nan"), float("inf"), "1764460800", True, 10 ** 400, [T0]):
        with pytest.raises(InvalidEvent, match="created_at must be a finite number"):
            store.import_jsonl(write_session(tmp_path / "x.jsonl", "x", 1), created_at=bad)
    assert [i.id for i in store.sessions()] == ["o", "m"]


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS[:2])
def test_copying_older_sessions_after_newer_ones_says_what_verify_will_report(src_kind, dst_kind, new_url):
    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as store:
        store.import_jsonl(DATA / "demo.jsonl", created_at=T0)
        store.create_session("recent").append("note", {})
    with EventStore.open(dst) as store:
        store.create_session("newer", meta={"host": "b"})
        newer = store.sessions()[0].created_at
    r = CliRunner().invoke(cli, ["copy", src, dst], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    gap = duration_text(newer - T0)  # (372 days: not a number of seconds with eight digits)
    assert gap.endswith(" days")
    assert r.output.count("note:") == 1
    assert (f"5a1b896f-beb: note: it is dated {gap} before session 'newer', stored here before it: verify reports "
            f"it as a session added later with a past date") in r.output
    assert rows(dst)[0][:2] == ("5a1b896f-beb", T0)
    assert findings(dst) == [f"session 5a1b896f-beb: session: created_at is {gap} before that of session "
                             f"'newer', which was stored before it: a session added later with a past date"]


# --- copying again: grown sessions, conflicts, what the target cannot store ------------------

def copy_cli(src: str, dst: str, *ids: str):
    return CliRunner().invoke(cli, ["copy", src, dst, *ids], catch_exceptions=False)


def exports(url: str) -> dict[str, bytes]:
    with EventStore.open(url, readonly=True) as store:
        return {i.id: export_bytes(store, i.id) for i in store.sessions()}


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
def test_a_session_that_grew_in_the_source_is_completed_by_the_next_copy(src_kind, dst_kind, new_url, tmp_path,
                                                                          monkeypatch):
    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as store:
        store.create_session("grow-1", meta={"owner": "ada"}).append("user/message", {"content": "first"})
        store.create_session("empty-then-grown")
        store.create_session("a\nb").append("note", {})
    r = copy_cli(src, dst)
    assert r.exit_code == 0, r.output
    head = heads(src)
    assert r.stdout.splitlines() == [f"grow-1: 1 event copied (head {head['grow-1'][:12]})",
                                     f"empty-then-grown: 0 events copied (head {head['empty-then-grown'][:12]})",
                                     f"a\\nb: 1 event copied (head {head['a' + chr(10) + 'b'][:12]})"]
    with EventStore.open(src) as store:
        store.session("grow-1").append_many([("assistant/message", {"content": f"reply {k}"}) for k in range(7)])
        store.session("empty-then-grown").append("note", {"k": 1})
        store.create_session("new-one").append("note", {})
    seen = []
    real = bulk._compare
    monkeypatch.setattr(bulk, "_compare", lambda *a: seen.append(a[2]) or real(*a))
    monkeypatch.setattr(bulk, "BATCH_ROWS", 3)  # the rest in several batches of one transaction
    r = copy_cli(src, dst)
    assert r.exit_code == 0, r.output
    head = heads(src)
    assert r.stdout.splitlines() == [f"grow-1: 7 events added, 8 in all (head {head['grow-1'][:12]})",
                                     f"empty-then-grown: 1 event added, 1 in all "
                                     f"(head {head['empty-then-grown'][:12]})",
                                     f"a\\nb: 1 event already there (head {head['a' + chr(10) + 'b'][:12]})",
                                     f"new-one: 1 event copied (head {head['new-one'][:12]})"]
    assert r.stderr == f"4 sessions: 1 copied, 2 added to, 1 already there, 0 failed; 9 events written to " \
                       f"{display(dst)}\n"
    assert seen == []  # the events the target held were not read again: its head hash vouched for them
    assert exports(dst) == exports(src)
    assert rows(dst) == rows(src)
    assert findings(dst) == []
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst) as b:
        results = copy_sessions(a, b)
    assert [(x.session_id, x.status, x.events, x.added, x.error) for x in results] == [
        ("grow-1", "skipped", 8, 0, None), ("empty-then-grown", "skipped", 1, 0, None),
        ("a\nb", "skipped", 1, 0, None), ("new-one", "skipped", 1, 0, None)]


def heads(url: str) -> dict[str, str]:
    """Each session's head hash, as verify reads it."""
    return {sid: h for sid, (_n, h) in integrity.verify_database(url).heads.items()}


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
def test_a_session_the_target_holds_otherwise_is_reported_and_the_others_are_copied(src_kind, dst_kind, new_url,
                                                                                      tmp_path):
    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as store:
        store.create_session("first").append("note", {"n": 1})
        clash = store.create_session("clash")
        clash.append_many([("note", {"n": k}) for k in range(3)])
        store.create_session("shorter").append("note", {"n": 1})
        store.create_session("meta", meta={"owner": "ada"})
        store.create_session("last").append("note", {"n": 2})
    with EventStore.open(dst) as store:
        store.create_session("clash").append_many([("note", {"n": 0}), ("note", {"n": "other"})])
        store.create_session("shorter").append_many([("note", {"n": 1}), ("note", {"n": 2})])
        store.create_session("meta", meta={"owner": "eve"})
    expected_errors = [
        "error: session 'clash' seq 1: the target holds other events: the hash of its last event (of 2) differs "
        "from the source's",
        "error: session 'shorter': the target holds 2 events, the source only 1",
        """error: session 'meta': the target holds it with other session/meta keys: "owner" ("eve" in the """
        """target, "ada" in the source)"""]
    for _run in range(2):  # a rerun fails the same way, and copies nothing twice
        r = copy_cli(src, dst)
        assert r.exit_code == 1, r.output
        assert r.stderr.splitlines()[:3] == expected_errors
        assert r.stderr.splitlines()[3].startswith("5 sessions: ")
        assert r.stderr.splitlines()[3].endswith(" 3 failed; " + ("2 events" if _run == 0 else "0 events")
                                                 + f" written to {display(dst)}")
        assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["first", "last"]
        assert exports(dst)["first"] == exports(src)["first"] and exports(dst)["last"] == exports(src)["last"]
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst) as b:
        results = copy_sessions(a, b)
    failed = [(x.session_id, x.status, x.error.session_id, x.error.seq) for x in results if x.error is not None]
    assert failed == [("clash", "failed", "clash", 1), ("shorter", "failed", "shorter", None),
                      ("meta", "failed", "meta", None)]
    # the cause removed (here: the sessions the target holds otherwise are left out), the copy succeeds
    r = copy_cli(src, dst, "first", "last")
    assert r.exit_code == 0 and r.stdout.count("already there") == 2, r.output
    # into a target that does not hold them, every session is copied
    other = new_url(dst_kind)
    r = copy_cli(src, other)
    assert r.exit_code == 0 and r.stdout.count(" copied ") == 5, r.output
    assert exports(other) == exports(src)
    assert findings(other) == []


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
def test_a_copy_that_failed_for_one_session_succeeds_when_run_again_after_its_cause_is_gone(src_kind, dst_kind,
                                                                                            new_url, monkeypatch):
    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as store:
        store.create_session("before").append("note", {})
        store.create_session("busy").append_many([("note", {"n": k}) for k in range(5)])
        store.create_session("after").append("note", {})
    monkeypatch.setattr(bulk, "BATCH_ROWS", 2)  # "busy" goes in chunks, under its import lock
    # copy gives up on the held lock after a tenth of a second, not a second (SQLite's retry
    # is a constant; PostgreSQL's is a fixed second)
    monkeypatch.setattr(importlock, "TAKE_WAIT", 0.1)
    with EventStore.open(dst) as other:  # another importer of "busy", still running
        lock = other._backend.import_lock("busy")
        assert lock is not None
        r = copy_cli(src, dst)
        lock.release(unlink=True)
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines()[0] == ("""error: session 'busy': session "busy" is being imported by another """
                                        """process right now""")
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["before", "after"]
    r = copy_cli(src, dst)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1].startswith("busy: 5 events copied")
    assert r.stderr.startswith("3 sessions: 1 copied, 0 added to, 2 already there, 0 failed; 5 events written")
    assert exports(dst) == exports(src)
    assert findings(dst) == []


def _insert_raw(path: str, sid: str, created_at: float, events: list[tuple[str, dict]]) -> None:
    """Store a session with plain sqlite3, as an older eventstore could (its rows hashed as
    the store hashes them): what the API refuses now may be in an old store."""
    from eventstore.log.chain import chain_hash, genesis_hash, session_hash
    from eventstore.log.codec import dumps
    from eventstore.log.line import event_line

    raw = sqlite3.connect(path)
    with raw:
        if not raw.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
            raw.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (?, ?, '{}', ?)",
                        (sid, created_at, session_hash(sid, created_at, "{}")))
        seq, prev = raw.execute("SELECT count(*), (SELECT hash FROM events WHERE session_id = ?1 ORDER BY seq DESC "
                                "LIMIT 1) FROM events WHERE session_id = ?1", (sid,)).fetchone()
        prev = prev or genesis_hash(sid)
        for type_, payload in events:
            ts = created_at + seq
            prev = chain_hash(prev, event_line(type_, seq, ts, dumps(payload)))
            raw.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) VALUES "
                        "((SELECT coalesce(max(position), 0) + 1 FROM events), ?, ?, ?, ?, ?, ?)",
                        (sid, seq, type_, ts, dumps(payload), prev))
            seq += 1
    raw.close()


def test_a_nul_in_a_session_id_or_event_type_fails_that_session_alone_on_postgresql(new_url):
    src, dst = new_url("sqlite"), new_url("postgres")
    with EventStore.open(src) as store:
        store.create_session("first").append("note", {})
    _insert_raw(src, "nul\x00id", time.time(), [("note", {"k": 1})])
    with EventStore.open(src) as store:
        store.create_session("nul-type").append("note", {"k": 1})
    _insert_raw(src, "nul-type", time.time(), [("no\x00te", {"k": 2})])
    with EventStore.open(src) as store:
        store.create_session("last").append("note", {})
    assert findings(src) == []  # the source's triggers let them in, and their hashes verify
    ids = [i[0] for i in listing(src)]
    assert ids == ["first", "nul\x00id", "nul-type", "last"]

    r = copy_cli(src, dst)
    assert r.exit_code == 1, r.output
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: session 'nul\\x00id': PostgreSQL text fields cannot contain NUL (0x00) bytes",
                      "error: session 'nul-type' seq 1: the database refused this event: PostgreSQL text fields "
                      "cannot contain NUL (0x00) bytes"]
    assert r.stderr.splitlines()[-1].startswith("4 sessions: 2 copied, 0 added to, 0 already there, 2 failed; ")
    assert sorted(exports(dst)) == ["first", "last"]  # nothing of "nul-type": its import is atomic
    assert exports(dst) == {k: v for k, v in exports(src).items() if k in ("first", "last")}
    # the same source into SQLite: all of it
    other = new_url("sqlite")
    r = copy_cli(src, other)
    assert r.exit_code == 0, r.output
    assert exports(other) == exports(src)


def test_copy_init_and_demo_show_a_postgresql_url_without_its_password(new_url, tmp_path, monkeypatch):
    from eventstore import demo

    monkeypatch.setattr(demo, "THINK_S", 0)  # the scripted model's pauses (two seconds): not what is tested here
    monkeypatch.setattr(demo, "CHUNK_S", 0)
    src, dst = new_url("sqlite"), new_url("postgres", bare=True)  # init makes its store
    with EventStore.open(src) as store:
        store.create_session("s").append("note", {})
    secret = dst.replace("postgresql://postgres@", "postgresql://postgres:pw-s3cret@")
    assert secret != dst  # the test server trusts local connections: any password does
    r = CliRunner().invoke(cli, ["--db", secret, "init"], catch_exceptions=False)
    assert r.exit_code == 0 and r.output == f"{dst}: ready (schema revision {SCHEMA_REVISION})\n", r.output
    r = copy_cli(src, secret)
    assert r.exit_code == 0, r.output
    assert "pw-s3cret" not in r.output and r.stderr.endswith(f"1 event written to {dst}\n"), r.output
    r = CliRunner().invoke(cli, ["--db", secret, "demo"], catch_exceptions=False)
    assert r.exit_code == 0 and "pw-s3cret" not in r.output and f" in {dst}\n" in r.output, r.output
    assert f"Next: eventstore --db {dst} messages " in r.output


def test_import_continues_a_stored_session_only_from_its_head_hash(store):
    import io
    import pickle

    from eventstore.errors import ImportConflict
    from eventstore.log.chain import genesis_hash

    s = store.create_session("c", meta={"k": 1})
    s.append_many([("note", {"n": k}) for k in range(3)])
    rest = (b'{"type":"session/meta","id":"c","k":1}\n{"type":"note","seq":3,"ts":5,"n":3}\n'
            b'{"type":"note","seq":4,"ts":6,"n":4}\n')
    hashes = [row[5] for row in store._backend.verify_rows("c")]

    def attempt(data: bytes, seq: int, h: str):
        return bulk.import_jsonl(store, io.BytesIO(data), name="rest", continues=(seq, h))

    with pytest.raises(ImportConflict, match=r'^rest:1: session "c" is stored with 3 events, but this rest of it '
                                             r'starts at seq 4$') as e:
        attempt(rest.replace(b'"seq":3', b'"seq":4').replace(b'"seq":4,"ts":6', b'"seq":5,"ts":6'), 4, hashes[2])
    assert e.value.seq == 3
    with pytest.raises(ImportConflict, match=r'^rest:1: session "c" is stored with other events: the hash of seq '
                                             r'2 differs$') as e:
        attempt(rest, 3, hashes[1])
    assert e.value.seq == 2 and pickle.loads(pickle.dumps(e.value)).seq == 2
    with pytest.raises(ImportConflict, match=r'^rest:1: session "d" is not stored: there is nothing'):
        attempt(b'{"type":"session/meta","id":"d"}\n{"type":"note","seq":0,"ts":5}\n', 0, genesis_hash("d"))
    with pytest.raises(ImportConflict, match=r"^rest:1: session \"c\" is already stored with other session/meta"):
        attempt(rest.replace(b'"k":1}', b'"k":2}', 1), 3, hashes[2])
    assert store.session("c").next_seq() == 3  # nothing of the failed ones was stored
    report = attempt(rest, 3, hashes[2])
    assert (report.status, report.events, report.total) == ("appended", 2, 5)
    assert attempt(rest, 3, hashes[2]).status == "skipped"  # the events past the hash are compared, as stored
    with pytest.raises(ImportConflict, match=r'^rest:2: session "c" is already stored with other events: seq 3 '
                                             r'differs \(payload\)$') as e:
        attempt(rest.replace(b'"n":3', b'"n":33'), 3, hashes[2])
    assert e.value.seq == 3
    assert findings_of(store) == []


def findings_of(store) -> list[str]:
    from eventstore.audit import verify as audit

    return [str(f) for f in audit.verify(store._backend).findings]


def test_ctrl_c_during_a_copy_says_that_running_again_completes_it(tmp_path):
    """A real SIGINT while a long session goes across: one line saying that the same
    command completes the copy, which it does (every session whole, exports equal)."""
    # (the real command, with the product's sizes: a session of two chunks and one row is
    # unfinished in the target for a chunk's time, three times over, while the test looks)
    n = 2 * max(bulk.BATCH_ROWS, bulk.CHUNK_ROWS) + 1
    src, dst = new_sqlite_store(tmp_path / "src.db"), tmp_path / "dst.db"
    with EventStore.open(src) as store:
        for k in range(4):
            store.create_session(f"s{k}").append_many([("user/message", {"content": "x" * 50})] * n)
    proc, out, err = interrupt_mid_import(["copy", str(src), str(dst)], dst, "s0")
    assert proc.returncode == 1 and out.startswith(f"s0: {n} events copied"), (out, err)
    assert err == "error: interrupted while copying: running the same command again completes it\n"
    again = copy_cli(str(src), str(dst))
    assert again.exit_code == 0, again.stderr
    assert importing_sessions(dst) == []
    with EventStore.open(src, readonly=True) as a, EventStore.open(dst, readonly=True) as b:
        assert [(i.id, i.events) for i in b.sessions()] == [(f"s{k}", n) for k in range(4)]
        assert all(export_bytes(a, f"s{k}") == export_bytes(b, f"s{k}") for k in range(4))


@pytest.mark.parametrize("src_kind, dst_kind", PAIRS)
def test_a_source_growing_during_the_copy_is_copied_as_far_as_it_was_read(src_kind, dst_kind, new_url, monkeypatch):
    """An agent appends to a session between copy's check of it and its export: the copy
    holds the longer session, checked by its last hash against the source's at that seq."""
    from eventstore.io import export

    src, dst = new_url(src_kind), new_url(dst_kind)
    with EventStore.open(src) as source, EventStore.open(dst) as target:
        s = source.create_session("live")
        s.append_many([("user/message", {"content": f"m{i}"}) for i in range(5)])
        real = export.export_session

        def export_after_an_append(store, sid, out, *args, **kwargs):
            store.session(sid).append("user/message", {"content": "late"})
            return real(store, sid, out, *args, **kwargs)

        monkeypatch.setattr(export, "export_session", export_after_an_append)
        [result] = copy_sessions(source, target)
        assert (result.status, result.events, result.error) == ("copied", 6, None)
        assert result.head == target._backend.checkpoint_rows()["sessions"][0][4]
        monkeypatch.setattr(export, "export_session", real)  # (export_jsonl below reads the module's)
        assert export_bytes(source, "live") == export_bytes(target, "live")


@pytest.mark.parametrize("dst_kind", ["sqlite", "postgres"])
def test_an_unknown_session_id_is_an_error_before_the_target_is_made(dst_kind, new_url, tmp_path):
    """A mistyped id leaves no empty store behind: the ids are looked up in SRC first."""
    src, dst = new_url("sqlite"), new_url(dst_kind, bare=True)
    with EventStore.open(src) as store:
        store.import_jsonl(DATA / "demo.jsonl")
    r = CliRunner().invoke(cli, ["copy", src, dst, "nope"])
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "error: session 'nope' not found\n")
    if dst_kind == "sqlite":
        assert not Path(dst).exists()
    else:
        import psycopg

        with psycopg.connect(dst) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)


def test_copy_into_a_database_an_older_eventstore_wrote_says_it_upgraded_it(tmp_path):
    import shutil

    src, dst = str(tmp_path / "src.db"), str(tmp_path / "old.db")
    shutil.copyfile(DATA / "legacy-0007.db", dst)
    with EventStore.open(src) as store:
        store.create_session("new").append("note", {"n": 1})
    r = copy_cli(src, dst)
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith(f"{dst}: upgraded from schema revision 0007 to ")
    with EventStore.open(dst, readonly=True) as store:
        assert sorted(i.id for i in store.sessions()) == ["5a1b896f-beb", "new", "second"]
    assert copy_cli(src, dst).stderr.count("upgraded") == 0
