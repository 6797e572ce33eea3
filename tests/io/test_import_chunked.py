"""A large import commits in chunks and stays hidden until its last chunk (eventstore.io.bulk,
docs/concurrency.md "Large imports"): with real importer processes, a real SIGKILL, on
every backend."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import TESTS, db_rows

from eventstore import EventStore, SessionNotFound
from eventstore.errors import ImportConflict, InvalidJSONL
from eventstore.io import bulk, parse_worker
from eventstore.io.bulk import CHUNK_ROWS

ROOT = TESTS.parent
# Events in the big file of a real importer process: four chunks of the product's own size,
# enough for a test that waits for two to see the import unfinished for two more (the tests
# hold it there with SIGSTOP where they must); the file is big enough for the parse worker.
N = 4 * CHUNK_ROWS


def write_big(path: Path, n: int = N, sid: str = "big", tail: bytes = b"") -> Path:
    with open(path, "wb") as f:
        f.write(json.dumps({"type": "session/meta", "id": sid}).encode() + b"\n")
        for seq in range(n):
            f.write(json.dumps({"type": "user/message", "seq": seq, "ts": 1.7e9 + seq,
                                "content": f"line {seq} " + "x" * 40}, separators=(",", ":")).encode() + b"\n")
        f.write(tail)
    return path


def small_chunks(monkeypatch, rows: int = 100) -> int:
    """Make this process's imports go in batches and chunks of ``rows`` rows (slices of a
    twentieth, the worker's batches a fifth of it), and parse a file of a few chunks in the
    parse worker: the paths a big file takes with the product's sizes, at a fraction of the
    events."""
    monkeypatch.setattr(bulk, "BATCH_ROWS", rows)
    monkeypatch.setattr(bulk, "CHUNK_ROWS", rows)
    monkeypatch.setattr(bulk, "CHUNK_SLICE", rows // 20)
    monkeypatch.setattr(parse_worker, "WORKER_BATCH_ROWS", rows // 5)
    monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", rows * 100)
    return rows


def start_import(url: str, path: Path) -> subprocess.Popen:
    code = "import sys; from eventstore import EventStore; EventStore.open(sys.argv[1]).import_jsonl(sys.argv[2])"
    assert path.stat().st_size >= parse_worker.PARALLEL_MIN_BYTES  # parsed in the worker, as a big file is
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, url, str(path)], env=env, stderr=subprocess.PIPE)


def stored(store: EventStore, sid: str = "big") -> int:
    return db_rows(store, "SELECT count(*) FROM events WHERE session_id = ?", (sid,))[0][0]


def wait_for(cond, what: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"importer ended ({proc.returncode}) before {what}: {proc.stderr.read().decode()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


@contextlib.contextmanager
def stopped(proc: subprocess.Popen):
    """The importer process stopped (SIGSTOP) for the block, continued after it: what the
    block looks at stays mid-import whatever the machine's speed."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.pid, signal.SIGCONT)


def test_other_writers_append_between_chunks_and_the_session_stays_hidden(store, backend_url, tmp_path):
    w = store.create_session("w")
    w.append("user/message", {"content": "before"})
    proc = start_import(backend_url, write_big(tmp_path / "big.jsonl"))
    try:
        wait_for(lambda: stored(store) >= 2 * CHUNK_ROWS, "two chunks", proc=proc)
        # mid-import (held there while these readers look: they wait for no lock): the
        # session is stored but nobody sees it
        with stopped(proc):
            assert [i.id for i in store.sessions()] == ["w"]
            with pytest.raises(SessionNotFound):
                store.session("big")
            first = db_rows(store, "SELECT min(position) FROM events WHERE session_id = 'big'")[0][0]
            assert store.last_position() == first - 1
        # writers go in between two chunks of the running import
        with pytest.raises(SessionNotFound):
            store.session("big", create=True)
        ev = w.append("user/message", {"content": "during"})
        with stopped(proc):  # the import still unfinished, two chunks or so to go
            assert proc.poll() is None and stored(store) < N
            assert ev.position > first
            # a follower stops before the import's first position and waits there
            seen = [e.position for e in store.follow(0, idle_timeout=0.05)]
            assert seen == list(range(1, first))
        assert proc.wait(120) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
    assert sorted(i.id for i in store.sessions()) == ["big", "w"]
    assert store.session("big").next_seq() == N
    events = list(store.follow(0, idle_timeout=0.05))
    assert [e.position for e in events] == list(range(1, N + 3))  # every event once, in order
    assert ev.position in [e.position for e in events if e.session_id == "w"]
    assert store.imports() == []
    assert store._backend.name != "sqlite" or not list(Path(backend_url).parent.glob("*-import-*"))
    from eventstore.audit.verify import verify
    report = verify(store._backend)
    assert report.ok and not report.notes, (report.findings, report.notes)


def test_sigkill_mid_import_leaves_nothing_visible_and_the_next_import_completes_it(store, backend_url, tmp_path):
    n = 5 * CHUNK_ROWS  # killed after three chunks, two before the end
    path = write_big(tmp_path / "big.jsonl", n)
    proc = start_import(backend_url, path)
    try:
        wait_for(lambda: stored(store) >= 3 * CHUNK_ROWS, "three chunks", proc=proc)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        proc.kill()
    partial = stored(store)
    assert 0 < partial < n
    assert store.sessions() == []
    with pytest.raises(SessionNotFound):
        store.session("big")
    [(sid, first, owner, _)] = store.imports()
    assert sid == "big"
    # PostgreSQL ends the killed client's backend (and its lock) once it reads the closed socket
    wait_for(lambda: not store._backend.import_owner_alive(owner), "the server to see the importer gone", 10)
    # the dead import does not hold followers back: an append after it is seen
    w = store.create_session("w")
    ev = w.append("user/message", {"content": "after the crash"})
    assert store.last_position() == ev.position
    assert [e.position for e in store.follow(0, idle_timeout=0.05)] == [ev.position]
    # verify: a finding (its importer is dead, so the session stays hidden), no other (the prefix chains)
    from eventstore.audit.integrity import verify_database
    from eventstore.audit.verify import verify
    report = verify_database(store._backend)
    assert [(f.kind, f.session_id) for f in report.findings] == [("session", "big")], report.findings
    assert "unfinished import" in report.findings[0].message and "importer is not running" in report.findings[0].message
    # the next import of the same file compares the stored prefix and completes it
    rep = store.import_jsonl(path)
    assert rep == "big"
    assert store.session("big").next_seq() == n
    assert store.imports() == []
    assert verify(store._backend).ok


def test_a_bad_line_at_the_end_of_a_big_file(store, tmp_path, monkeypatch):
    from eventstore.io.bulk import import_jsonl

    rows = small_chunks(monkeypatch)
    n = 2 * rows + 2 * rows // 5  # (12,000 events at the product's sizes)
    path = write_big(tmp_path / "bad.jsonl", n, tail=b'{"type":"a","seq":%d,"ts":1}\n{"type":' % n)
    with pytest.raises(InvalidJSONL) as info:
        import_jsonl(store, path)
    assert str(info.value).startswith(f"{path}:")
    if stored(store):  # the message does not send the user to import the same bad file again
        assert str(info.value).endswith(f"importing {path} again once that line is mended, or with --salvage "
                                        f"(the lines before it), completes it"), str(info.value)
    assert store.sessions() == []
    rep = import_jsonl(store, path, salvage=True)
    assert rep.status == "imported" and rep.events == n + 1 and rep.dropped.lines == 1
    assert store.session("big").next_seq() == n + 1
    assert store.imports() == []


def test_an_import_conflicting_with_an_unfinished_one_is_refused(store, tmp_path, monkeypatch):
    from eventstore.io.bulk import import_jsonl

    rows = small_chunks(monkeypatch)
    n = 2 * rows + 2 * rows // 5  # (12,000 events at the product's sizes)
    path = write_big(tmp_path / "bad.jsonl", n, tail=b"not json\n")
    with pytest.raises(InvalidJSONL):
        import_jsonl(store, path)
    if stored(store) == 0:
        pytest.skip("the bad line was seen before the first chunk")  # pragma: no cover
    other = write_big(tmp_path / "other.jsonl", n)
    other.write_bytes(other.read_bytes().replace(b'"line %d ' % rows, b'"line %d ' % (rows + 1)))  # its 2nd chunk
    with pytest.raises(ImportConflict):
        import_jsonl(store, other)
    assert store.sessions() == []


def test_an_unfinished_imports_matches_do_not_crowd_out_visible_hits(store, tmp_path, monkeypatch):
    """Search ranks among the newest matches: those of a hidden (unfinished) import, newer
    than a visible hit, must not fill that window and leave the visible hit out."""
    from eventstore import search
    from eventstore.io.bulk import import_jsonl

    store.create_session("visible").append("user/message", {"content": "line visible " + "x" * 40})
    rows = small_chunks(monkeypatch)
    path = write_big(tmp_path / "bad.jsonl", 2 * rows + 2 * rows // 5, tail=b"not json\n")
    with pytest.raises(InvalidJSONL):
        import_jsonl(store, path)
    assert stored(store) >= rows  # a chunk stored, hidden, every event of it matching "line"
    monkeypatch.setattr(search, "RANK_WINDOW", 5)
    assert [(h.session_id, h.seq) for h in search.search(store, "line")] == [("visible", 0)]
    assert search.count(store, "line") == 1


def test_two_imports_of_one_file_at_once(store, backend_url, tmp_path, monkeypatch):
    from eventstore.backends.sqlite import importlock
    from eventstore.io.bulk import import_jsonl

    # the second import gives up on the held lock after a tenth of a second, not a second
    # (SQLite's retry is a constant; PostgreSQL's is a fixed second)
    monkeypatch.setattr(importlock, "TAKE_WAIT", 0.1)
    n = 3 * CHUNK_ROWS  # stopped after its first chunk, two before the end
    path = write_big(tmp_path / "big.jsonl", n)
    proc = start_import(backend_url, path)
    try:
        wait_for(lambda: stored(store) >= CHUNK_ROWS, "a chunk", proc=proc)
        os.kill(proc.pid, signal.SIGSTOP)  # mid-import, whatever the machine's speed
        try:
            with pytest.raises(ImportConflict, match="being imported by another process"):
                import_jsonl(store, path)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(120) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
    rep = import_jsonl(store, path)  # now it is stored: the same events, skipped
    assert rep.status == "skipped" and rep.total == n


def _raw_write(store, backend_url, sql: str) -> None:
    """Run ``sql`` through the driver, as a writer with plain SQL access would."""
    if store._backend.name == "postgresql":
        import psycopg

        with psycopg.connect(backend_url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        import sqlite3

        conn = sqlite3.connect(backend_url)
        try:
            conn.execute(sql)
            conn.commit()
        finally:
            conn.close()


def test_an_importing_row_cannot_hide_a_stored_session(store, backend_url):
    """The writer may insert importing rows (an import needs to); the database still refuses
    one that would hide a session holding events, or stop position readers early."""
    s = store.create_session("victim")
    s.append("user/message", {"content": "keep me visible"})
    store.create_session("empty")
    last = store._backend.last_position()
    for sql in (f"INSERT INTO importing VALUES ('victim', {last + 1}, 'x', 0)",  # events stored
                f"INSERT INTO importing VALUES ('empty', {last}, 'x', 0)"):  # not the next position
        with pytest.raises(Exception, match="ES011|only an import creating a session"):
            _raw_write(store, backend_url, sql)
    assert sorted(i.id for i in store.sessions()) == ["empty", "victim"]
    assert store.imports() == []


def test_verify_notes_an_importing_row_it_did_not_write(store, backend_url, tmp_path):
    """An importing row whose owner names no lock of an importer is an abandoned import to
    verify (a note), never a crash."""
    from eventstore.audit.verify import verify

    store.create_session("ghost")
    _raw_write(store, backend_url, f"INSERT INTO importing VALUES ('ghost', {store._backend.last_position() + 1}, "
                                   f"'nobody', 0)")
    report = verify(store._backend)
    assert "ghost" not in [i.id for i in store.sessions()]
    assert any("ghost" in str(n) for n in (*report.findings, *getattr(report, "notes", [])))


def test_a_chunked_import_never_pauses_when_no_writer_waits(store, tmp_path, monkeypatch):
    """The importer yields the lock only to a writer that waits for it: alone, it never sleeps.
    (The store's own checkpointer is such a writer once the WAL is long, and the import rightly
    yields to it: its checkpoints are held off here.)"""
    from eventstore.backends.sqlite.checkpoint import Checkpointer

    slept = []
    real_sleep, importer = time.sleep, threading.get_ident()  # (other tests' threads may sleep too)
    monkeypatch.setattr(Checkpointer, "request", lambda self: None)
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(s) if threading.get_ident() == importer
                        else real_sleep(s))
    small_chunks(monkeypatch)
    rep = bulk.import_jsonl(store, write_big(tmp_path / "big.jsonl", 3 * bulk.BATCH_ROWS + 10), name="big")
    assert rep.status == "imported" and rep.total == 3 * bulk.BATCH_ROWS + 10
    assert not slept, f"{len(slept)} sleeps, the first {slept[:3]}"


def test_a_writer_waiting_during_an_import_gets_in_at_once(store, backend_url, tmp_path):
    """A live writer's appends wait for about one slice of an import, not for its chunk."""
    w = store.create_session("w")
    w.append("user/message", {"content": "before"})
    proc = start_import(backend_url, write_big(tmp_path / "big.jsonl"))
    waits = []
    try:
        wait_for(lambda: stored(store) >= 1, "the first rows", proc=proc)
        while proc.poll() is None and len(waits) < 200:
            t0 = time.perf_counter()
            w.append("user/message", {"content": "during"})
            waits.append(time.perf_counter() - t0)
        assert proc.wait(120) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
    assert len(waits) >= 20
    waits.sort()
    assert waits[len(waits) // 2] < 0.05 and waits[-1] < 2.0, waits[-5:]
    assert store.session("big").next_seq() == N
