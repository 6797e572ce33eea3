"""The parse worker process that reads large imports (eventstore.io.parse_worker): the same
result as parsing in the importing process, and every way it can fail loses nothing.

test_import_rules and test_import_export run their whole suites through the worker too;
this file is about the process itself: killed with SIGKILL mid-file, an import that stops
early, Ctrl-C, two threads, a forked child, the importing process exiting, no interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import db_rows, export_bytes, new_sqlite_store

from eventstore import DatabaseError, EventStore, ImportConflict
from eventstore.io import bulk as bulk_mod
from eventstore.io import parse_worker
from eventstore.log.codec import dumps
from eventstore.log.line import event_line


def write_session(path: Path, sid: str, n: int, *, start: int = 0, text: str = "x") -> Path:
    """A session file of ``n`` events as the reference writes it (about 80 bytes each)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(dumps({"type": "session/meta", "id": sid}) + "\n")
        for seq in range(start, start + n):
            f.write(event_line("assistant/chunk", seq, 1764460800 + seq / 8, dumps({"delta": f"{text}{seq}"})) + "\n")
    return path


@pytest.fixture
def always(monkeypatch):
    """Every file goes through the worker; a fresh worker for this test."""
    monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parse_worker, "_worker", None)
    monkeypatch.setattr(parse_worker, "_cannot_start", False)
    yield
    if parse_worker._worker is not None:
        parse_worker._worker.close()


def worker_pid() -> int:
    return parse_worker._worker.proc.pid


def wait_delivered(pid: int, sig: int, timeout: float = 10.0) -> None:
    """Until signal ``sig`` sent to ``pid`` is no longer pending there (delivered, or
    discarded as ignored); a short sleep where there is no /proc to tell."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        time.sleep(0.2)
        return
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            masks = [int(line.split()[1], 16) for line in status.read_text().splitlines()
                     if line.startswith(("SigPnd:", "ShdPnd:"))]
        except FileNotFoundError:  # it ended: delivered
            return
        if not any(m & bit for m in masks) or time.monotonic() > deadline:
            return
        time.sleep(0.005)


def test_large_files_go_through_the_worker_with_the_same_result(tmp_path, monkeypatch):
    # "large" from 64 KiB (1 MiB as shipped): a file of 1,000 events (80 KB) is large
    monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", 1 << 16)
    path = write_session(tmp_path / "big.jsonl", "big", 1000)
    assert path.stat().st_size >= parse_worker.PARALLEL_MIN_BYTES
    monkeypatch.setattr(parse_worker, "_worker", None)
    monkeypatch.setattr(parse_worker, "_cannot_start", False)
    with EventStore.open(new_sqlite_store(tmp_path / "w.db")) as store:
        report = bulk_mod.import_jsonl(store, path)
        worker = parse_worker._worker
        assert worker is not None and worker.proc.poll() is None  # it served this import
        exported = export_bytes(store, "big")
    monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", 1 << 60)
    with EventStore.open(new_sqlite_store(tmp_path / "p.db")) as store:
        assert bulk_mod.import_jsonl(store, path) == report
        assert export_bytes(store, "big") == exported == path.read_bytes()
    worker.close()


def test_the_worker_salts_the_rows_and_the_chain_verifies(store, tmp_path, always, monkeypatch):
    """The worker salts each batch and builds the lines the chain hashes (salted_lines): the
    importing process only chains them, in slices and chunks, and verify finds every hash
    right."""
    from eventstore.audit.verify import verify

    def not_here(rows):
        raise AssertionError("salted in the importing process")

    monkeypatch.setattr(bulk_mod, "salted_lines", not_here)
    monkeypatch.setattr(bulk_mod, "CHUNK_ROWS", 700)  # chunks and slices cut the worker's batches
    monkeypatch.setattr(bulk_mod, "CHUNK_SLICE", 300)
    path = write_session(tmp_path / "big.jsonl", "big", 3000)
    report = bulk_mod.import_jsonl(store, path)
    assert (report.status, report.total) == ("imported", 3000)
    assert export_bytes(store, "big") == path.read_bytes()
    result = verify(store._backend)
    assert result.ok and not result.notes, (result.findings, result.notes)
    salts = {bytes(r[0]) for r in db_rows(store, "SELECT salt FROM events WHERE session_id = 'big'")}
    assert len(salts) == 3000 and {len(s) for s in salts} == {16}  # a fresh salt each


def test_the_worker_salted_lines_are_kept_only_for_the_batches_ahead(store, tmp_path, always, monkeypatch):
    """Memory stays bounded by the batches read ahead: importing a stored file again (every
    row compared, none inserted) keeps no salted lines of the batches already compared."""
    held = []
    real_next = bulk_mod._Batches.next

    def next_batch(self):
        held.append(sum(len(salts) for _first, salts, _lines in self._salted))
        return real_next(self)

    monkeypatch.setattr(bulk_mod._Batches, "next", next_batch)
    path = write_session(tmp_path / "big.jsonl", "big", 6000)
    assert bulk_mod.import_jsonl(store, path).status == "imported"
    held.clear()
    report = bulk_mod.import_jsonl(store, path)
    assert (report.status, report.total) == ("skipped", 6000)
    assert len(held) >= 6 and max(held) <= 3 * parse_worker.WORKER_BATCH_ROWS, held


def test_small_files_stay_in_the_importing_process(store, tmp_path, monkeypatch):
    monkeypatch.setattr(parse_worker, "_worker", None)
    bulk_mod.import_jsonl(store, write_session(tmp_path / "small.jsonl", "small", 10))
    assert parse_worker._worker is None


def test_worker_killed_mid_file_stores_nothing_and_the_next_import_works(store, tmp_path, always, monkeypatch):
    # 10,000 events (800 KB): past the two batches (of 1,000 rows from the worker) read before
    # the first insert and the pipe's 64 KiB, the worker is still writing
    path = write_session(tmp_path / "s.jsonl", "s", 10_000)
    real_transaction = store._backend.import_transaction

    def transaction_killing_the_worker(session_id, body):
        def wrapped(tx):
            real_insert = tx.insert

            def insert_after_killing(rows, position0):
                if parse_worker._worker.proc.poll() is None:
                    os.kill(worker_pid(), signal.SIGKILL)
                    parse_worker._worker.proc.wait()
                return real_insert(rows, position0)

            tx.insert = insert_after_killing
            return body(tx)

        return real_transaction(session_id, wrapped)

    monkeypatch.setattr(store._backend, "import_transaction", transaction_killing_the_worker)
    with pytest.raises(DatabaseError, match=r"the JSONL parse worker \(pid \d+\) ended unexpectedly while reading .*s\.jsonl; "
                                          r"nothing of the file is stored"):
        bulk_mod.import_jsonl(store, path)
    assert store.sessions() == []
    monkeypatch.setattr(store._backend, "import_transaction", real_transaction)
    assert bulk_mod.import_jsonl(store, path).events == 10_000  # a new worker
    assert export_bytes(store, "s") == path.read_bytes()


def test_an_import_that_stops_early_kills_the_worker(store, tmp_path, always):
    bulk_mod.import_jsonl(store, write_session(tmp_path / "a.jsonl", "a", 5000))
    first = parse_worker._worker
    # the same session with other events from line 2: a conflict while the worker is busy
    other = write_session(tmp_path / "a2.jsonl", "a", 5000, text="y")
    with pytest.raises(ImportConflict, match=r"a2\.jsonl:2: "):
        bulk_mod.import_jsonl(store, other)
    assert first.broken and first.proc.poll() is not None
    assert bulk_mod.import_jsonl(store, write_session(tmp_path / "b.jsonl", "b", 5000)).events == 5000
    assert parse_worker._worker is not first and parse_worker._worker.usable()


def test_salvage_after_a_refused_row_counts_the_rest_of_the_file(store, tmp_path, always):
    # row 1500 repeats an idempotency key: the database refuses it while the worker has
    # batches left to send; salvage keeps rows 0-1499 and counts the rest of the file
    path = tmp_path / "r.jsonl"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write('{"type":"session/meta","id":"r"}\n')
        for seq in range(4000):
            key = "k3" if seq == 1500 else f"k{seq}"
            f.write(event_line("a", seq, 1764460800.5 + seq, dumps({"event_id": key})) + "\n")
    report = bulk_mod.import_jsonl(store, path, salvage=True)
    assert report.events == 1500 and report.lines == 4001 and report.bytes == path.stat().st_size
    assert (report.dropped.first_line, report.dropped.last_line, report.dropped.lines) == (1502, 4001, 2500)
    assert parse_worker._worker.usable()  # it read the file to its end: no need to kill it


def test_ctrl_c_in_the_terminal_does_not_stop_the_worker(store, tmp_path, always):
    bulk_mod.import_jsonl(store, write_session(tmp_path / "a.jsonl", "a", 100))
    pid = worker_pid()
    os.kill(pid, signal.SIGINT)  # what the terminal sends to the whole foreground group
    wait_delivered(pid, signal.SIGINT)
    assert bulk_mod.import_jsonl(store, write_session(tmp_path / "b.jsonl", "b", 100)).events == 100
    assert worker_pid() == pid


def test_two_threads_import_at_once(tmp_path, always):
    # each a chunked import (2 x CHUNK_ROWS events: two chunks)
    paths = [write_session(tmp_path / f"t{i}.jsonl", f"t{i}", 2 * bulk_mod.CHUNK_ROWS) for i in range(2)]
    errors = []
    with EventStore.open(new_sqlite_store(tmp_path / "t.db")) as store:
        def run(p):
            try:
                bulk_mod.import_jsonl(store, p)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(p,)) for p in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert [export_bytes(store, f"t{i}") for i in range(2)] == [p.read_bytes() for p in paths]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_worker(store, tmp_path, always, backend_url):
    bulk_mod.import_jsonl(store, write_session(tmp_path / "a.jsonl", "a", 100))
    parent_pid = worker_pid()
    child_file = write_session(tmp_path / "c.jsonl", "c", 100)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            with EventStore.open(backend_url) as child_store:
                bulk_mod.import_jsonl(child_store, child_file)
            os.write(w, str(worker_pid()).encode())
        finally:
            os._exit(0)
    os.close(w)
    child_worker = int(os.read(r, 64) or b"0")
    os.waitpid(pid, 0)
    os.close(r)
    assert child_worker not in (0, parent_pid)
    assert parse_worker._worker.usable() and worker_pid() == parent_pid
    assert bulk_mod.import_jsonl(store, write_session(tmp_path / "b.jsonl", "b", 100)).events == 100
    assert export_bytes(store, "c") == child_file.read_bytes()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_worker_ends_with_the_importing_process(tmp_path):
    path = write_session(tmp_path / "big.jsonl", "big", 100)
    script = textwrap.dedent(f"""
        from eventstore import EventStore
        from eventstore.io import parse_worker
        parse_worker.PARALLEL_MIN_BYTES = 0  # every file goes through the worker
        with EventStore.open({str(new_sqlite_store(tmp_path / 'x.db'))!r}) as store:
            store.import_jsonl({str(path)!r})
            print(parse_worker._worker.proc.pid, flush=True)
        import os
        os._exit(0)  # no atexit: the worker must end when its pipe closes
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":  # ended, waiting for a parent that does not reap (PID 1 in a container)
            return
        time.sleep(0.05)
    pytest.fail(f"worker {pid} still runs after its importing process ended")


def test_no_interpreter_to_start_means_parsing_in_process(store, tmp_path, always, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")
    path = write_session(tmp_path / "a.jsonl", "a", 100)
    assert bulk_mod.import_jsonl(store, path).events == 100
    assert parse_worker._worker is None and parse_worker._cannot_start


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
def test_a_path_that_opens_another_file_in_the_worker_is_read_here(tmp_path):
    # /dev/stdin is the importer's file here and the worker's own pipe there
    path = write_session(tmp_path / "big.jsonl", "big", 100)
    script = textwrap.dedent(f"""
        from eventstore import EventStore
        from eventstore.io import parse_worker
        parse_worker.PARALLEL_MIN_BYTES = 0  # every file goes through the worker
        with EventStore.open({str(new_sqlite_store(tmp_path / 'x.db'))!r}) as store:
            store.import_jsonl("/dev/stdin")
            import io
            out = io.BytesIO()
            store.export_jsonl("big", out)
            assert out.getvalue() == open({str(path)!r}, "rb").read()
    """)
    with open(path, "rb") as stdin:
        subprocess.run([sys.executable, "-c", script], stdin=stdin, timeout=60, check=True)
