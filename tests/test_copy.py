"""`eventstore copy` keeps each session's row: its created_at (and so its meta_hash, its place
in the listing, its checkpoint entry) as well as its events, from SQLite to PostgreSQL and
back, through the one-transaction import and the chunked one (eventstore.copy, eventstore.bulk)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, db_rows, export_bytes

from eventstore import EventStore, anchor, bulk, integrity
from eventstore.cli import cli
from eventstore.copy import copy_sessions
from eventstore.errors import InvalidEvent

PAIRS = [("sqlite", "postgres"), ("postgres", "sqlite"), ("sqlite", "sqlite"), ("postgres", "postgres")]
T0 = 1764460800.123456  # sub-second digits that a float must carry through both databases


@pytest.fixture
def new_url(request, tmp_path: Path):
    """``new_url(kind)``: the URL of a new empty database of that backend."""
    made = []

    def make(kind: str) -> str:
        if kind == "sqlite":
            return str(tmp_path / f"db{len(made)}-{time.monotonic_ns()}.db")
        server = request.getfixturevalue("pg_server")
        name = server.create_database()
        made.append((server, name))
        return server.url(name)

    yield make
    for server, name in made:
        server.drop_database(name)


def write_session(path: Path, sid: str, n: int, meta: dict | None = None, ts0: float = T0 + 5) -> Path:
    with open(path, "wb") as f:
        f.write(json.dumps({"type": "session/meta", "id": sid, **(meta or {})}, separators=(",", ":")).encode() + b"\n")
        for seq in range(n):
            f.write(json.dumps({"type": "user/message", "seq": seq, "ts": round(ts0 + seq / 1000, 3),
                                "content": f"line {seq}"}, separators=(",", ":")).encode() + b"\n")
    return path


def display(url: str) -> str:
    with EventStore.open(url, readonly=True) as store:
        return store.backend.display


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
    src, dst = new_url(src_kind), new_url(dst_kind)
    ids = fill_source(src, tmp_path)
    assert findings(src) == []
    with EventStore.open(src, readonly=True) as store:
        doc = anchor.make_checkpoint(store.backend)
        first_positions = {sid: store.backend.session_events(sid, limit=1)[0][1] for sid in ids}
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
    n = bulk.BATCH_ROWS + 2 * bulk.CHUNK_ROWS + 7
    with EventStore.open(src) as store:
        store.import_jsonl(write_session(tmp_path / "big.jsonl", "big", n, {"owner": "ada"}), created_at=T0 + 0.5)
        store.create_session("small", meta={"k": 1})
    with EventStore.open(src, readonly=True) as store:
        doc = anchor.make_checkpoint(store.backend)

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
    gap = f"{newer - T0:.0f}"
    assert r.output.count("note:") == 1
    assert (f"5a1b896f-beb: note: it is dated {gap} s before session 'newer', stored here before it: verify reports "
            f"it as a session added later with a past date") in r.output
    assert rows(dst)[0][:2] == ("5a1b896f-beb", T0)
    assert findings(dst) == [f"session 5a1b896f-beb: session: created_at is {gap} s before that of session "
                             f"'newer', which was stored before it: a session added later with a past date"]
