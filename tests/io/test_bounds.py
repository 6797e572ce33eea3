"""Bounds and truthful messages under hostile input (issue 31): every reader has a byte
limit per line (and the viewer per answer), measured as the peak RSS of a real eventstore
process; one hostile file fails alone; a failed chunked import, a full log and a cancelled
query say what happened.

Peak memory is the ``ru_maxrss`` of the eventstore process as its parent sees it
(``RUSAGE_CHILDREN``), the parent being a small Python wrapper started for it (Linux carries
a parent's peak into its forked child, so the wrapper keeps this test process's out).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import PEAK, TESTS, new_sqlite_store, wait_until

from eventstore import DatabaseError, EventStore, InvalidJSONL
from eventstore.io import bulk
from eventstore.io.bulk import import_jsonl

ROOT = TESTS.parent
DATA = TESTS / "transcripts_data"
MB = 1 << 20


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="devices and ru_maxrss as on Linux")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def measured(db, *args: str, stdin=None, timeout: float = 300) -> tuple[int, str, str, int]:
    """Run ``eventstore --db DB ARGS`` as a real process: ``(exit status, stdout, stderr,
    peak RSS in bytes)``. (The tests hand it a store copied from the migrated template,
    new_sqlite_store: migrating a new file is not what they are about.)"""
    r = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "eventstore", "--db", str(db), *args],
                       stdin=stdin, capture_output=True, text=True, env=_env(), timeout=timeout)
    err, _, last = r.stderr.rstrip("\n").rpartition("\n")
    assert last.startswith("peak-kb "), r.stderr[-2000:]
    return r.returncode, r.stdout, err, int(last.split()[1]) * 1024


# --- a byte limit per line: devices and long lines ------------------------------------------

@pytest.mark.parametrize("fmt", ["claude-code", "codex", "eventstore"])
def test_a_link_to_dev_zero_stops_at_the_line_limit(tmp_path, fmt):
    """/dev/zero has no newline: the reader stops at 64 MiB, naming file:line (it read the
    whole device before: 10.8 GB in 30 s)."""
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    code, out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", "--format", fmt, str(link))
    assert code == 1 and "failed: 1" in out
    assert f"{link}:1: the line is longer than 64 MiB, the longest line eventstore reads" in err, err
    assert "Traceback" not in err
    assert peak < 512 * MB, peak / MB


def test_stdin_of_dev_zero_stops_at_the_line_limit(tmp_path):
    with open("/dev/zero", "rb") as zero:
        code, _out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", "--format", "claude-code", "-",
                                         stdin=zero)
    assert code == 1 and "-:1: the line is longer than 64 MiB" in err, err
    assert peak < 512 * MB, peak / MB


@pytest.mark.parametrize("salvage", [False, True])
def test_a_link_to_dev_urandom_fails_at_its_first_line_or_past_the_lines_salvage_drops(tmp_path, salvage):
    link = tmp_path / "random.jsonl"
    link.symlink_to("/dev/urandom")
    code, _out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", "--format", "claude-code", str(link),
                                     *(["--salvage"] if salvage else []), timeout=120)
    if salvage:  # (the list of dropped lines grew with the device before)
        assert code == 1 and "; more than 10000 bad lines to drop: not a transcript that --salvage can keep" in err
    else:  # at its first line, or after the blank lines the device may start with (1 in 256)
        first = re.search(re.escape(str(link)) + r":(\d+): ", err)
        assert code == 1 and first is not None and int(first.group(1)) <= 3, err
    assert peak < 200 * MB, peak / MB


def test_a_100_mb_line_is_refused_by_its_line_number_in_bounded_memory(tmp_path):
    f = tmp_path / "big.jsonl"
    with open(f, "w") as out:
        out.write('{"type":"session/meta","id":"big"}\n{"type":"x","seq":0,"ts":1}\n')
        out.write('{"type":"x","seq":1,"ts":1,"t":"' + "a" * (100 * MB) + '"}\n')
    code, _out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", str(f))
    assert code == 1 and f"{f}:3: the line is longer than 64 MiB" in err, err
    assert peak < 256 * MB, peak / MB  # 1.09 GB before
    with EventStore.open(tmp_path / "x.db", readonly=True) as st:
        assert st.sessions() == []  # nothing half-written


def test_a_line_just_under_the_limit_is_imported(tmp_path):
    f = tmp_path / "long.jsonl"
    text = "a" * (60 * MB)
    with open(f, "w") as out:
        out.write('{"type":"session/meta","id":"long"}\n')
        out.write('{"type":"x","seq":0,"ts":1,"t":"' + text + '"}\n')
    code, out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", str(f))
    assert code == 0, err
    assert peak < 900 * MB, peak / MB  # a few copies of the line: 483 MiB measured
    with EventStore.open(tmp_path / "x.db", readonly=True) as st:
        assert next(iter(st.session("long").events())).payload["t"] == text


def test_verify_of_a_checkpoint_on_dev_zero_stops_at_its_limit(tmp_path):
    db = new_sqlite_store(tmp_path / "x.db")
    code, _out, err, peak = measured(db, "verify", "--checkpoint", "/dev/zero")
    assert code == 1 and "/dev/zero: not a checkpoint: it holds more than 256 MiB" in err, err
    assert peak < 512 * MB, peak / MB  # 12.6 GB before


# --- one hostile file fails alone ----------------------------------------------------------

def _deep(session: str, depth: int) -> str:
    return (json.dumps({"type": "user", "uuid": "u1", "sessionId": session, "timestamp": "2025-01-01T00:00:00Z",
                        "message": {"role": "user", "content": "X"}}).replace('"X"', "[" * depth + "]" * depth)
            + "\n")


@pytest.mark.parametrize("fmt", [None, "claude-code"])
def test_a_file_nested_100000_deep_fails_alone(tmp_path, fmt):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a-deep.jsonl").write_text(_deep("deep", 100_000))
    (folder / "b-deep.jsonl").write_text(_deep("deep2", 5000))
    shutil.copy(DATA / "claude-code/v2.1-main.jsonl", folder / "c-good.jsonl")
    args = ["import", str(folder)] + (["--format", fmt] if fmt else [])
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(new_sqlite_store(tmp_path / "x.db")), *args],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 1
    assert f"{folder / 'a-deep.jsonl'}:1: nested too deeply" in r.stderr, r.stderr
    assert f"{folder / 'b-deep.jsonl'}:1: nested too deeply" in r.stderr, r.stderr
    assert "unexpected" not in r.stderr and "RecursionError" not in r.stderr
    assert "failed: 2" in r.stdout and "sessions: 1 (1 new" in r.stdout, r.stdout


def test_watch_goes_on_past_a_file_nested_too_deeply(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    db = new_sqlite_store(tmp_path / "x.db")
    shutil.copy(DATA / "claude-code/v2.1-main.jsonl", folder / "a.jsonl")
    # (SIGINT as by default in the watcher, as conftest's interrupt_mid_import does: a test run
    # started in the background inherits it ignored, and the watcher would not stop)
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), "import", "--watch",
                             "--interval", "0.1", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # stdout and stderr as they come, read by threads (to wait on b's message, not on a sleep)
    outputs: list[str] = []
    errors: list[str] = []
    readers = [threading.Thread(target=lambda s=s, got=got: got.extend(iter(s.readline, "")), daemon=True)
               for s, got in ((proc.stdout, outputs), (proc.stderr, errors))]
    for t in readers:
        t.start()

    def sessions() -> set[str]:
        try:
            with EventStore.open(db, readonly=True) as st:
                return {s.id for s in st.sessions()}
        except DatabaseError:
            return set()

    try:
        assert wait_until(lambda: len(sessions()) == 1)
        first = sessions()
        (folder / "b.jsonl").write_text(_deep("deep", 100_000))
        # b has failed (its message is out) before c is there: b is due before c
        assert wait_until(lambda: any("nested too deeply" in line for line in errors)), proc.poll()
        shutil.copy(DATA / "codex/rollout-0.40-shell.jsonl", folder / "c.jsonl")
        assert wait_until(lambda: len(sessions()) == 2), proc.poll()
        assert proc.poll() is None  # still watching
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:  # (a watcher that outlived Ctrl-C fails the test; it is not left running)
                proc.kill()
            for t in readers:
                t.join(timeout=60)
    out, err = "".join(outputs), "".join(errors)
    assert f"{folder / 'b.jsonl'}:1: nested too deeply" in err, err
    assert "failed: 1" in out and first < sessions()


# --- messages that say what happened ---------------------------------------------------------

@pytest.fixture
def small_disk():
    """A 3 MiB tmpfs (needs root to mount: CI runs as root; skipped elsewhere)."""
    mnt = Path(tempfile.mkdtemp(prefix="es-full-", dir="/tmp"))
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                                                       capture_output=True).returncode != 0:
        mnt.rmdir()
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
        mnt.rmdir()


def _session_file(path: Path, sid: str, n: int, partial: bool = False) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({"type": "session/meta", "id": sid}) + "\n")
        for i in range(n):
            f.write(json.dumps({"type": "user/message", "seq": i, "ts": 1.0 + i, "content": "x" * 200},
                               separators=(",", ":")) + "\n")
        if partial:
            f.write('{"type":"user/message","seq":' + str(n) + ',"ts":1,"content":"half a li')


def _stored_rows(db: Path) -> int:
    """Events in the file, hidden ones too (plain SQL, below the store)."""
    import sqlite3

    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return c.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        c.close()


def test_disk_full_in_a_chunked_import_says_what_is_stored_and_how_to_complete_it(tmp_path, small_disk):
    # two chunks and a bit: the first fits on the 3 MiB disk (with the migrated store), the
    # second does not (two chunks' rows take more than 3 MiB)
    n = 2 * bulk.CHUNK_ROWS + bulk.CHUNK_ROWS // 5
    src = tmp_path / "many.jsonl"
    _session_file(src, "many", n)
    db = new_sqlite_store(small_disk / "x.db")
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db), "import", str(src)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 1, r.stderr
    stored = _stored_rows(db)
    assert 0 < stored < n
    assert "database or disk is full" in r.stderr
    assert (f"That was one chunk of a longer import: the {stored} events of session \"many\" that its earlier "
            f"chunks stored stay stored and hidden (an unfinished import): importing {src} again completes it"
            in r.stderr), r.stderr
    with EventStore.open(db, readonly=True) as st:
        assert st.sessions() == []  # hidden
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db), "import", str(src)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"completed an unfinished import that had stored {stored} events" in r.stderr
    with EventStore.open(db, readonly=True) as st:
        assert st.session("many").next_seq() == n


def test_a_file_that_grew_while_read_says_so_and_what_stays_hidden(tmp_path, monkeypatch):
    """The reader meets the end of the file halfway through a line its writer is still
    writing; by the time the import fails on it the file is longer."""
    # chunks of 100 rows: the file's 1,000 events are several chunks, as 30,000 are with the real sizes
    monkeypatch.setattr(bulk, "BATCH_ROWS", 100)
    monkeypatch.setattr(bulk, "CHUNK_ROWS", 100)
    n = 1000
    src = tmp_path / "growing.jsonl"
    _session_file(src, "grows", n, partial=True)
    db = new_sqlite_store(tmp_path / "x.db")
    grown = []

    class Source:  # the file as its reader sees it: its writer adds the rest of the line just after the end is met
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            data = self.f.read(n)
            if not data and not grown:
                with open(src, "a") as w:
                    w.write('ne"}\n')
                grown.append(True)
            return data

    with open(src, "rb") as f, EventStore.open(db) as store:
        with pytest.raises(InvalidJSONL) as e:
            import_jsonl(store, Source(f), name=str(src))
    assert grown
    stored = _stored_rows(db)
    assert 0 < stored < n
    assert str(e.value).startswith(f"{src}:{n + 2}: truncated last line")
    assert str(e.value).endswith(
        f"(the file grew while it was read: another process is writing it); the {stored} events of session "
        f"\"grows\" that its earlier chunks stored stay stored and hidden (an unfinished import): once its writer "
        f"is done, importing {src} again completes it"), str(e.value)


def _fill_positions(backend_url: str, pg_server=None) -> None:
    """Give the log's one event the last position a database holds (2**63-1), below the
    guards (as the tables' owner, triggers off)."""
    if backend_url.startswith("postgresql"):
        with pg_server.connect(backend_url.rsplit("/", 1)[1]) as admin:
            admin.execute("ALTER TABLE events DISABLE TRIGGER ALL")
            admin.execute("UPDATE events SET position = 9223372036854775807")
            admin.execute("ALTER TABLE events ENABLE TRIGGER ALL")
        return
    import sqlite3

    c = sqlite3.connect(backend_url)
    triggers = c.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'").fetchall()
    for name, _ in triggers:
        c.execute(f'DROP TRIGGER "{name}"')
    c.execute("UPDATE events SET position = 9223372036854775807")
    for _, sql in triggers:
        c.execute(sql)
    c.commit()
    c.close()


@pytest.mark.parametrize("backend_url", ["sqlite", "postgres"], indirect=True)
def test_an_append_past_the_last_position_names_the_session(request, backend_url, store):
    # (``store``: backend_url is then a copy of the migrated template, and this store on it)
    store.create_session("s1").append("user/message", {"content": "hi"})
    store.close()
    _fill_positions(backend_url, request.getfixturevalue("pg_server") if backend_url.startswith("postgres") else None)
    with EventStore.open(backend_url) as st:
        with pytest.raises(DatabaseError, match=r"session 's1': the append was refused: the log's last position is "
                                                r"9223372036854775807, the largest a position can be \(2\*\*63-1\), "
                                                r"so no event can follow it; nothing was written"):
            st.session("s1").append("user/message", {"content": "again"})
        assert st.session("s1").next_seq() == 1


def test_a_query_cancelled_by_another_session_is_not_called_a_timeout(pg_url):
    import psycopg

    p = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", pg_url, "sql", "--timeout", "30",
                          "SELECT pg_sleep(20)"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        with psycopg.connect(pg_url, autocommit=True) as c:
            deadline = time.monotonic() + 60
            while True:  # (a cursor's FETCH runs the query: wait until the server sleeps in it)
                (cancelled,) = c.execute("SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity "
                                         "WHERE wait_event = 'PgSleep' AND datname = current_database() "
                                         "AND pid <> pg_backend_pid()").fetchone()
                if cancelled or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        assert cancelled
        _out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 1
    assert "stopped after 30 s" not in err and "--timeout" not in err, err
    assert "the query was cancelled after" in err and "before its time limit of 30 s" in err, err


# --- the viewer: bytes per answer, not events ------------------------------------------------

def _vm(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(key)


def test_the_viewer_answers_a_big_session_in_bounded_memory(tmp_path):
    """A session of 120 MB of payloads (7 answers' bytes, MAX_ANSWER_BYTES): /api/events,
    /api/stream and /api/export each grow the server by far less than the session (4-5x it
    before: events were counted, not bytes)."""
    from test_web import Server

    db = tmp_path / "big.db"
    blob = "y" * (2 * MB)
    with EventStore.open(db) as st:
        s = st.create_session("big")
        for i in range(60):
            s.append("tool/result", {"tool_call_id": f"c{i}", "content": blob})
    srv = Server(db)
    try:
        srv.wait_ready()
        pid = srv.proc.pid
        base = _vm(pid, "VmRSS")
        status, _h, body = srv.get("/api/events?session=big&after=-1&limit=200000")
        answer = json.loads(body)
        assert status == 200 and answer["more"] is True and 1 <= len(answer["events"]) <= 9
        seen, after = 0, -1
        while True:  # paging by `after` gets every event
            answer = json.loads(srv.get(f"/api/events?session=big&after={after}&limit=200000")[2])
            seen += len(answer["events"])
            if not answer["more"]:
                break
            after = answer["events"][-1]["seq"]
        assert seen == 60
        with urllib.request.urlopen(srv.url + "/api/export?session=big", timeout=60) as r:
            total = 0
            while chunk := r.read(1 << 20):
                total += len(chunk)
        assert total > 60 * 2 * MB
        with urllib.request.urlopen(srv.url + "/api/stream?session=big&after=-1", timeout=60) as r:
            got = 0
            for line in r:
                if line.startswith(b"data: ["):
                    got += len(json.loads(line[6:]))
                if line.startswith(b"event: caught-up"):
                    break
        assert got == 60
        grew = _vm(pid, "VmHWM") - base
        assert grew < 64 * MB, grew / MB  # 22 MB measured (about 1 GB before)
    finally:
        srv.stop()


# --- the line limit, at every place a line can end ---------------------------------------------

class SmallChunks:
    """A binary stream that gives at most 7 bytes a read, so that lines span many reads."""

    def __init__(self, data: bytes):
        import io

        self.f = io.BytesIO(data)

    def read(self, n=-1):
        return self.f.read(7)


@pytest.mark.parametrize("chunked", [False, True])
def test_the_line_limit_keeps_the_lines_before_it_and_names_its_line(chunked):
    from eventstore.io.jsonl import JsonlReader

    good = [b'{"type":"session/meta","id":"s"}'] + [b'{"type":"x","seq":%d,"ts":1}' % i for i in range(3)]
    for long_line, at_end in ((b'{"type":"x","seq":3,"ts":1,"t":"' + b"a" * 200 + b'"}', False),
                              (b"\0" * 300, True)):  # the last line, no newline (as /dev/zero)
        data = b"\n".join(good + [long_line]) + (b"" if at_end else b"\n" + good[1])
        r = JsonlReader(SmallChunks(data) if chunked else __import__("io").BytesIO(data), "f.jsonl", max_line=100)
        rows = [row for batch in r.batches() for row in batch]
        assert [row[0] for row in rows] == [0, 1, 2]
        assert str(r.error) == "f.jsonl:5: the line is longer than 100 bytes, the longest line eventstore reads " \
                               "(not a JSONL file, or an event too large to store)"
        assert r.error_offset == len(b"\n".join(good)) + 1
        r = JsonlReader(__import__("io").BytesIO(data), "f.jsonl", max_line=None)
        list(r.batches())
        assert r.error is None or "longer than" not in str(r.error)


def test_copy_takes_an_event_past_the_line_limit(tmp_path, monkeypatch):
    """The limit is for files from elsewhere; copy reads the store's own export."""
    from eventstore.core.copy import copy_sessions

    monkeypatch.setattr(bulk, "MAX_LINE_BYTES", 1000)  # as if the event were past 64 MiB
    monkeypatch.setattr(bulk.import_jsonl, "__kwdefaults__", {**bulk.import_jsonl.__kwdefaults__, "max_line": 1000})
    with EventStore.open(new_sqlite_store(tmp_path / "a.db")) as a:
        a.create_session("s").append("tool/result", {"tool_call_id": "c", "content": "b" * 5000})
        with pytest.raises(InvalidJSONL, match="longer than"):
            p = tmp_path / "s.jsonl"
            a.export_jsonl("s", p)
            with open(p, "rb") as f, EventStore.open(new_sqlite_store(tmp_path / "c.db")) as c:
                import_jsonl(c, f)
        with EventStore.open(new_sqlite_store(tmp_path / "b.db")) as b:
            results = copy_sessions(a, b)
            assert [r.status for r in results] == ["copied"], results
            assert next(iter(b.session("s").events())).payload["content"] == "b" * 5000


def test_the_viewer_refuses_a_projection_past_its_byte_limit_before_reading_it(tmp_path):
    """/api/messages of 48 MB of messages: 413 with a JSON error that says why and what prints
    it, and the server does not grow by the projection (it built the whole array before);
    up to a seq under the limit, the answer is the projection."""
    from test_web import Server

    from eventstore.web.app import MAX_MESSAGES_BYTES

    db = tmp_path / "big.db"
    blob = "m" * (2 * MB)
    with EventStore.open(db) as st:
        s = st.create_session("big")
        for _ in range(24):
            s.append("user/message", {"content": blob})
    srv = Server(db)
    try:
        srv.wait_ready()
        pid = srv.proc.pid
        base = _vm(pid, "VmRSS")
        status, _h, body = srv.get("/api/messages?session=big")
        assert status == 413, status
        error = json.loads(body)["error"]
        assert "big" in error and f"{MAX_MESSAGES_BYTES:,}" in error and "eventstore messages" in error
        assert srv.get("/api/messages?session=big&upto=30")[0] == 413
        grew = _vm(pid, "VmHWM") - base
        assert grew < 40 * MB, grew / MB  # 25 MB measured (the page cache and a row or two)
        status, _h, body = srv.get("/api/messages?session=big&upto=2")  # 3 messages, 6 MB
        assert status == 200 and [m["content"] == blob for m in json.loads(body)] == [True] * 3
    finally:
        srv.stop()


def test_export_of_big_events_on_postgresql_reads_pages_bounded_by_bytes(tmp_path, pg_store_url):
    """PostgreSQL's export pages (chunks_from_rows) were 500 events, whatever they held:
    60 events of 4 MB took the whole session into memory at once. Pages are cut by bytes now
    (row_pages, as the viewer's): the export's peak does not grow with the session. Events of
    two pages' bytes each (a page of one event): exporting 24 of them (48 MiB) peaks less than
    a quarter of the 22 more events' bytes above exporting 2, where pages of 500 events would
    hold those 44 MiB (twice at least)."""
    from eventstore.log.line import PAGE_BYTES

    blob = "z" * (2 * PAGE_BYTES)
    with EventStore.open(pg_store_url) as st:
        for sid, n in (("short", 2), ("big-export", 24)):
            s = st.create_session(sid)
            for i in range(n):
                s.append("tool/result", {"tool_call_id": f"c{i}", "content": blob})
    peaks = {}
    for sid in ("short", "big-export"):
        out = tmp_path / f"{sid}.jsonl"
        status, _out, err, peaks[sid] = measured(pg_store_url, "export", sid, "-o", str(out))
        assert status == 0, err
    more = (tmp_path / "big-export.jsonl").stat().st_size - (tmp_path / "short.jsonl").stat().st_size
    assert more > 22 * 2 * PAGE_BYTES
    grew = peaks["big-export"] - peaks["short"]
    # 4 MB measured (before: 74 MB in all for 60 events of 4 MB; 531 MB with pages of 500 events)
    assert grew < more / 4, (grew / MB, peaks["short"] / MB)


def _claude_code_transcript(path: Path, size: int) -> None:
    """A Claude Code transcript of about ``size`` bytes: user questions and assistant answers
    of 300-400 bytes of text each (about 700-byte lines), chained by parentUuid."""
    parent = None
    with open(path, "w") as f:
        n = 0
        while f.tell() < size:
            u = f"00000000-0000-4000-8000-{n + 1:012d}"
            line = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/x",
                    "sessionId": "5e551011-0000-4000-8000-000000000001", "version": "2.1.39", "uuid": u,
                    "timestamp": f"2026-02-12T10:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"}
            if n % 2 == 0:
                line.update(type="user", message={"role": "user", "content": f"question {n} " + "q" * 200})
            else:
                line.update(type="assistant", message={
                    "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
                    "content": [{"type": "text", "text": f"answer {n} " + "a" * 300}], "stop_reason": "end_turn",
                    "usage": {"input_tokens": 10, "output_tokens": 20}})
            f.write(json.dumps(line) + "\n")
            parent = u
            n += 1


# The documented bound of a transcript import (docs/import-export.md, "peak memory"): the
# converters hold every parsed line, so the peak is proportional to the file.
TRANSCRIPT_FACTOR, TRANSCRIPT_CONSTANT = 14, 100 * MB


def test_a_transcript_import_stays_within_its_documented_proportional_bound(tmp_path):
    """import of an 8 MiB Claude Code transcript: peak RSS <= 14 x the file + 100 MiB
    (226 MiB measured for 12 MiB; 50 MiB took 713 MiB, 12.8x the file past the constant)."""
    src = tmp_path / "t.jsonl"
    _claude_code_transcript(src, 8 * MB)
    code, _out, err, peak = measured(new_sqlite_store(tmp_path / "x.db"), "import", "--format", "claude-code", str(src))
    assert code == 0, err
    size = src.stat().st_size
    assert peak <= TRANSCRIPT_FACTOR * size + TRANSCRIPT_CONSTANT, (peak / MB, size / MB)
    assert peak > 2 * size  # the bound is the proportional one: were it streamed, this test and the docs change


def test_the_viewer_refuses_a_session_whose_info_events_pass_its_byte_limit(tmp_path):
    """/api/session merges the session's session/info events into its meta: 120 of 1 MB are
    counted a page at a time and refused (413, saying what prints them) without reading them
    all into memory; a subagent's session whose parent holds them is refused too; a session
    whose few info events are under the limit gets its meta merged."""
    from test_web import Server

    from eventstore.web.app import MAX_INFO_BYTES

    db = tmp_path / "info.db"
    with EventStore.open(db) as st:
        s = st.create_session("many")
        for i in range(120):
            s.append("session/info", {"info": {f"k{i}": "i" * MB}})
        st.create_session("child", meta={"relation": "subagent", "parent_session": "many"})
        few = st.create_session("few")
        few.append("session/info", {"info": {"title": "a title"}})
        few.append("session/info", {"info": {"model": "m"}})
    srv = Server(db)
    try:
        srv.wait_ready()
        pid = srv.proc.pid
        base = _vm(pid, "VmRSS")
        for sid, whose in (("many", "session 'many'"), ("child", "session 'child' and its parent 'many'")):
            status, _h, body = srv.get(f"/api/session?session={sid}")
            assert status == 413, (status, body[:200])
            error = json.loads(body)["error"]
            assert error.startswith(f"the session/info events of {whose} hold more than {MAX_INFO_BYTES:,} bytes")
            assert error.endswith("`eventstore events many --type session/info` prints them")
        grew = _vm(pid, "VmHWM") - base
        assert grew < 48 * MB, grew / MB  # a page of 8 events and the page cache, whatever the session holds
        status, _h, body = srv.get("/api/session?session=few")
        assert status == 200 and json.loads(body)["meta"] == {"title": "a title", "model": "m"}
    finally:
        srv.stop()
