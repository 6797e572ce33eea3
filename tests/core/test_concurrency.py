"""Many processes, one database: real processes (multiprocessing with spawn), a real
SIGKILL, real files. No timing assertions: what is checked is what ends up stored."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
import workers
from conftest import TESTS, db_rows, hashed_line, wait_until

from eventstore import DatabaseError, EventStore
from eventstore.log.chain import chain_hash, genesis_hash

DATA = TESTS / "data"
CTX = workers.CTX  # fresh processes from a server that imported eventstore once
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and fork are POSIX")


def run_all(target, arg_lists, parties: int | None = None, timeout: float = 120) -> dict:
    """Start one process per argument tuple (each gets ``barrier, results`` appended),
    wait for all, and return ``{tag: value}``; fail the test on any child's error."""
    barrier = CTX.Barrier(parties or len(arg_lists))
    results = CTX.Queue()
    procs = [CTX.Process(target=target, args=(*args, barrier, results)) for args in arg_lists]
    for p in procs:
        p.start()
    out, errors = {}, []
    try:
        for _ in procs:
            tag, status, value = results.get(timeout=timeout)
            if status == "ok":
                out[tag] = value
            else:
                errors.append(f"process {tag}:\n{value}")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    assert not errors, "\n".join(errors)
    assert all(p.exitcode == 0 for p in procs)
    return out


def check_session(conn: sqlite3.Connection, sid: str) -> list[tuple]:
    """Assert the session is gapless (seq 0..n-1) and its hash chain is intact; return its rows."""
    salted = conn.execute("SELECT seq, type, ts, payload, hash, position, salt FROM events WHERE session_id = ? "
                          "ORDER BY seq", (sid,)).fetchall()
    rows = [r[:6] for r in salted]
    assert [r[0] for r in rows] == list(range(len(rows))), f"session {sid} has a gap or a duplicate"
    prev = genesis_hash(sid)
    for seq, type_, ts, payload, stored, _pos, salt in salted:  # a salted event's line covers its commitments
        prev = chain_hash(prev, hashed_line(type_, seq, ts, payload, salt))
        assert stored == prev, f"session {sid}: hash chain broken at seq {seq}"
    return rows


def integrity_ok(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        positions = conn.execute("SELECT count(*), count(DISTINCT position), coalesce(max(position), 0) "
                                 "FROM events").fetchone()
        assert positions[0] == positions[1] == positions[2], "global positions have a gap or a duplicate"
    finally:
        conn.close()


# --- many writers ---------------------------------------------------------------------------


@pytest.mark.parametrize("n_procs, count, write_queue", [(8, 300, True), (4, 100, False)],
                         ids=["write-queue", "busy-handler-only"])
def test_processes_append_to_a_shared_session_and_their_own(db_path, n_procs, count, write_queue):
    with EventStore.open(db_path) as store:
        shared = store.create_session("shared").id
    options = {"write_queue": write_queue}
    got = run_all(workers.shared_and_own, [(str(db_path), i, count, shared, options) for i in range(n_procs)])

    conn = sqlite3.connect(db_path)
    shared_rows = check_session(conn, "shared")
    assert len(shared_rows) == n_procs * count
    for i in range(n_procs):
        own_rows = check_session(conn, f"own-{i}")
        assert len(own_rows) == count
        # what each append returned is what is stored, and each process's events keep its order
        mine = [(seq, pos, n) for sid, seq, pos, n in got[i] if sid == "shared"]
        assert [n for _seq, _pos, n in mine] == list(range(count))
        assert [seq for seq, _pos, _n in mine] == sorted(seq for seq, _pos, _n in mine)
        stored = {r[0]: (r[5], r[3]) for r in shared_rows}
        for seq, pos, n in mine:
            assert stored[seq][0] == pos
            assert f'"w":{i},"n":{n}' in stored[seq][1]
        assert [(seq, n) for sid, seq, _pos, n in got[i] if sid == f"own-{i}"] == [(n, n) for n in range(count)]
    conn.close()
    integrity_ok(db_path)


def test_expected_seq_conflicts_under_real_contention(db_path):
    """Every round all processes read the same next seq and append with it at once:
    exactly one wins, every other one gets SeqConflict naming the real next seq."""
    n_procs, rounds = 4, 15
    with EventStore.open(db_path) as store:
        sid = store.create_session().id
    got = run_all(workers.optimistic_rounds, [(str(db_path), i, sid, rounds) for i in range(n_procs)])
    for r in range(rounds):
        outcomes = [next(o for o in got[i] if o[1] == r) for i in range(n_procs)]
        won = [o for o in outcomes if o[0] == "won"]
        lost = [o for o in outcomes if o[0] == "conflict"]
        assert len(won) == 1 and won[0][2] == r
        assert len(lost) == n_procs - 1
        assert all(o[2] == r and o[3] == r + 1 for o in lost)
    conn = sqlite3.connect(db_path)
    assert len(check_session(conn, sid)) == rounds
    conn.close()


def test_idempotent_appends_race_to_one_stored_event(db_path):
    n_procs, rounds = 4, 15
    with EventStore.open(db_path) as store:
        sid = store.create_session().id
    got = run_all(workers.idempotent_rounds, [(str(db_path), i, sid, rounds) for i in range(n_procs)])
    for r in range(rounds):
        answers = {next(o[1:] for o in got[i] if o[0] == r) for i in range(n_procs)}
        assert answers == {(r, r + 1)}, f"round {r}: processes got {answers}"
    conn = sqlite3.connect(db_path)
    rows = check_session(conn, sid)
    assert len(rows) == rounds
    conn.close()


def test_migration_race_on_new_files(tmp_path):
    """N processes open brand-new files at the same moment: all succeed, exactly one migrates."""
    n_procs, files = 6, 3
    dbs = [str(tmp_path / f"new{k}.db") for k in range(files)]
    got = run_all(workers.migrate, [(dbs, i) for i in range(n_procs)])
    for k, db in enumerate(dbs):
        assert sum(got[i][k] for i in range(n_procs)) == 1, f"{db}: {[got[i][k] for i in range(n_procs)]}"
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (n_procs,)
        conn.close()
        integrity_ok(Path(db))


# --- SIGKILL ------------------------------------------------------------------------------


def kill_when(proc, side: Path, lines: int, timeout: float = 60) -> None:
    """SIGKILL ``proc`` once the side file holds ``lines`` lines (the process runs until then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if side.exists() and side.read_bytes().count(b"\n") >= lines:
            break
        assert proc.is_alive(), f"the writer died on its own (exit code {proc.exitcode})"
        time.sleep(0.01)
    else:
        pytest.fail("the writer made no progress")
    proc.kill()
    proc.join(10)
    assert proc.exitcode == -9


def acknowledged(side: Path) -> list[list[str]]:
    # a line the writer was writing when killed may be incomplete: only whole lines count
    text = side.read_text()
    return [line.split() for line in text.split("\n")[:-1]]


def test_sigkill_during_single_appends_loses_no_acknowledged_event(db_path, tmp_path):
    with EventStore.open(db_path) as store:
        store.create_session("victim")
    side = tmp_path / "acked.txt"
    for _attempt in range(2):  # kill it twice: the second writer appends after a crash
        p = CTX.Process(target=workers.append_forever, args=(str(db_path), "victim", str(side)))
        p.start()
        kill_when(p, side, len(acknowledged(side)) + 300 if side.exists() else 300)
    integrity_ok(db_path)
    conn = sqlite3.connect(db_path)
    rows = check_session(conn, "victim")
    acked = acknowledged(side)
    stored = {r[0]: r[3] for r in rows}
    for seq, n in acked:
        assert stored[int(seq)].endswith(f',"n":{n}}}'), f"acknowledged event seq {seq} is missing or changed"
    assert len(rows) >= len(acked)
    assert len(rows) <= len(acked) + 2  # at most the one in flight when each writer died
    conn.close()


def test_sigkill_during_append_many_leaves_no_partial_batch(db_path, tmp_path):
    batch = 50
    with EventStore.open(db_path) as store:
        store.create_session("batches")
    side = tmp_path / "acked.txt"
    p = CTX.Process(target=workers.append_many_forever, args=(str(db_path), "batches", str(side), batch))
    p.start()
    kill_when(p, side, 40)
    integrity_ok(db_path)
    conn = sqlite3.connect(db_path)
    rows = check_session(conn, "batches")
    assert len(rows) % batch == 0, f"{len(rows)} events: a partial batch is stored"
    counts = dict(conn.execute("SELECT payload ->> '$.batch', count(*) FROM events GROUP BY 1").fetchall())
    assert set(counts.values()) == {batch}
    acked = acknowledged(side)
    for b, first, last in acked:
        assert counts.get(int(b)) == batch, f"acknowledged batch {b} is missing"
        assert (int(first), int(last)) == (int(b) * batch, int(b) * batch + batch - 1)
    assert len(counts) in (len(acked), len(acked) + 1)
    conn.close()


def test_sigkill_during_import_leaves_no_partial_session(db_path, tmp_path):
    source = DATA / "big.jsonl"
    expected = sum(1 for line in source.read_bytes().split(b"\n") if line.strip()) - 1  # minus the meta line
    side = tmp_path / "acked.txt"
    p = CTX.Process(target=workers.import_forever, args=(str(db_path), str(source), str(side)))
    p.start()
    kill_when(p, side, 3)
    integrity_ok(db_path)
    conn = sqlite3.connect(db_path)
    sessions = [r[0] for r in conn.execute("SELECT id FROM sessions")]
    for sid in sessions:
        assert len(check_session(conn, sid)) == expected, f"session {sid} is partial"
    acked = [line[0] for line in acknowledged(side)]
    assert set(acked) <= set(sessions)
    assert len(sessions) in (len(acked), len(acked) + 1)
    conn.close()


def test_a_killed_writer_holding_the_lock_lets_the_others_go(db_path, tmp_path):
    """A writer dies inside its write transaction (holding the write queue's lock and
    SQLite's): the next writer gets in and the dead one's rows are not there."""
    with EventStore.open(db_path, busy_timeout=0.2) as store:
        s = store.create_session("s")
        ready = tmp_path / "ready"
        p = CTX.Process(target=workers.hold_write_lock, args=(str(db_path), str(ready)))
        p.start()
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert p.is_alive() and time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(DatabaseError, match="busy"):
            s.append("user/message", {"content": "blocked"})
        p.kill()
        p.join(10)
        store.busy_timeout = 10
        assert s.append("user/message", {"content": "after"}).seq == 0
        assert [i.id for i in store.sessions()] == ["s"]  # no ghost
    integrity_ok(db_path)


# --- fork -----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_a_forked_child_gets_its_own_connection(db_path):
    with EventStore.open(db_path) as store:
        s = store.create_session("f")
        s.append("turn/start", {})
        parent_conn = store._backend._conn
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: use the inherited store, report, and leave without cleanup
            code = 1
            try:
                ev = s.append("user/message", {"content": "from the child"})
                own = store._backend._conn is not parent_conn
                os.write(w, f"{ev.seq} {own} {len(list(s.events()))}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        answer = os.read(r, 100).decode()
        os.close(r)
        assert os.waitstatus_to_exitcode(status) == 0
        assert answer == "1 True 2"
        assert store._backend._conn is parent_conn
        assert s.append("assistant/message", {"content": "parent again"}).seq == 2
    integrity_ok(db_path)


# --- follow ---------------------------------------------------------------------------------


def test_follow_across_processes_sees_every_event_once_in_order(db_path):
    count = 300
    with EventStore.open(db_path) as store:
        store.create_session("shared")
    db = str(db_path)
    writers_args = [(db, 0, count, "shared", 20), (db, 1, count, "shared", 20), (db, 2, count, None, 20)]
    barrier = CTX.Barrier(len(writers_args) + 2)
    results = CTX.Queue()
    procs = [CTX.Process(target=workers.follower, args=(db, None, 3 * count, barrier, results, "store")),
             CTX.Process(target=workers.follower, args=(db, "shared", 2 * count, barrier, results, "session"))]
    procs += [CTX.Process(target=workers.writer, args=(*a, barrier, results)) for a in writers_args]
    for p in procs:
        p.start()
    got = {}
    for _ in procs:
        tag, status, value = results.get(timeout=120)
        assert status == "ok", value
        got[tag] = value
    for p in procs:
        p.join(10)

    whole = got["store"]
    assert [e[0] for e in whole] == list(range(1, 3 * count + 1))  # every position once, in order
    for w in range(3):
        assert [e[4] for e in whole if e[3] == w] == list(range(count))  # each writer's order kept
    one = got["session"]
    assert [e[2] for e in one] == list(range(2 * count))  # every seq once, in order
    assert {e[1] for e in one} == {"shared"}
    assert [e[0] for e in one] == sorted(e[0] for e in one)
    assert [e for e in whole if e[1] == "shared"] == one


def test_follow_holds_no_read_transaction_between_polls(db_path):
    """While a follower waits for news (and while the caller holds a yielded event), the WAL
    can be checkpointed completely and truncated: the follower pins no snapshot."""
    import threading

    store = EventStore.open(db_path)
    s = store.create_session("s")
    s.append_many([("assistant/chunk", {"delta": {"content": "x" * 500}})] * 300)
    # a reader in the WAL would make TRUNCATE wait these 5 s and then report busy
    auditor = sqlite3.connect(db_path, timeout=5, isolation_level=None)
    try:
        gen = store.follow(poll_interval=0.005, idle_timeout=30)
        first = next(gen)  # suspended in the middle of a page
        assert first.position == 1
        assert auditor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone() == (0, 0, 0)

        seen = [first]
        caught_up = threading.Event()

        def consume():
            for ev in gen:
                seen.append(ev)
                if len(seen) in (300, 600):
                    caught_up.set()
                if len(seen) == 600:
                    return

        t = threading.Thread(target=consume)
        t.start()
        assert caught_up.wait(30)
        caught_up.clear()
        time.sleep(0.05)  # the follower is polling now
        s.append_many([("assistant/chunk", {"delta": {"content": "y" * 500}})] * 300)
        time.sleep(0.05)
        # (the append crossed position 500: the store's own checkpointer may be running, and
        # a second checkpoint meanwhile would be refused as busy; that is not a reader)
        assert store._backend._checkpointer.wait_idle(timeout=30)
        # the writes may or may not have been seen yet; either way nothing holds the WAL
        assert auditor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone() == (0, 0, 0)
        assert os.path.getsize(str(db_path) + "-wal") == 0
        assert caught_up.wait(30)
        t.join(30)
        assert [e.position for e in seen] == list(range(1, 601))
    finally:
        auditor.close()
        store.close()


def test_wal_stays_bounded_while_a_follower_tails_heavy_writing(db_path):
    n_writers, count, payload = 4, 1200, 9000
    with EventStore.open(db_path) as store:
        page_size = db_rows(store, "PRAGMA page_size")[0][0]
    db = str(db_path)
    barrier = CTX.Barrier(n_writers + 1)
    results = CTX.Queue()
    procs = [CTX.Process(target=workers.follower, args=(db, None, n_writers * count, barrier, results, "tail"))]
    procs += [CTX.Process(target=workers.writer, args=(db, i, count, None, payload, barrier, results))
              for i in range(n_writers)]
    for p in procs:
        p.start()
    biggest, got = 0, {}
    while len(got) < len(procs):
        try:
            tag, status, value = results.get(timeout=0.02)
            assert status == "ok", value
            got[tag] = value
        except Exception as e:  # queue.Empty: sample the WAL meanwhile
            if isinstance(e, AssertionError):
                raise
        try:
            biggest = max(biggest, os.path.getsize(db + "-wal"))
        except OSError:
            pass
    for p in procs:
        p.join(10)
    assert len(got["tail"]) == n_writers * count
    from eventstore.backends.sqlite import engine

    frame = page_size + 24
    # The checkpoint that makes the WAL start over is due at the first round of requests
    # past WAL_RESET_FRAMES, and each store asks after CHECKPOINT_FRAMES of its own: by
    # WAL_RESET_FRAMES + n_writers * CHECKPOINT_FRAMES, plus what the writers add while it
    # copies and waits for the lock (the rest of this bound).
    assert engine.WAL_RESET_FRAMES + n_writers * engine.CHECKPOINT_FRAMES <= 2 * engine.WAL_RESET_FRAMES
    bound = 3 * engine.WAL_RESET_FRAMES * frame
    # Had the WAL never started over it would hold every page ever written: at least one
    # leaf page plus the overflow pages of the payload per append.
    at_least = n_writers * count * (1 + payload // page_size) * frame
    assert at_least > bound
    assert biggest < bound, f"-wal reached {biggest} bytes"


class CheckpointLockHolder:
    """Another process holding SQLite's checkpoint lock on ``db``, as one whose checkpoint is
    in progress does, from :meth:`hold` until :meth:`let_go`."""

    def __init__(self, db: str, folder: Path):
        self.ready, self.release = folder / "checkpoint-held", folder / "checkpoint-let-go"
        self.proc = CTX.Process(target=workers.hold_checkpoint_lock, args=(db, str(self.ready), str(self.release)))
        self.holding = False

    def hold(self) -> None:
        self.proc.start()
        assert wait_until(lambda: self.ready.exists() or not self.proc.is_alive()) and self.ready.exists()
        self.holding = True

    def let_go(self) -> None:
        if self.proc.pid is None:
            return
        self.release.touch()
        self.proc.join(30)
        if self.proc.is_alive():  # pragma: no cover - reported by the assert
            self.proc.kill()
            self.proc.join(10)
        self.holding = False
        assert self.proc.exitcode == 0


def wal_length(db: str) -> int:
    """The frames in the WAL now, as a passive checkpoint of another connection reports them."""
    auditor = sqlite3.connect(db)
    try:
        busy, log, _done = auditor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        auditor.close()
    assert busy == 0
    return log


def grow_wal(store: EventStore, db: str, frames: int) -> None:
    page_size = db_rows(store, "PRAGMA page_size")[0][0]
    s = store.session("s")
    while os.path.getsize(db + "-wal") < frames * (page_size + 24):
        s.append_many([("tool/result", {"tool_call_id": "c", "content": "z" * 9000})] * 10)


def test_a_checkpoint_refused_while_another_process_checkpoints_runs_after_it(db_path, tmp_path):
    """SQLite refuses a checkpoint at once while another connection checkpoints (busy
    handler or not), and writer processes that write alike ask for theirs at about the same
    moment: all requests but one were dropped, and the WAL grew by every writer's
    CHECKPOINT_FRAMES again before the next ones (the test above then passed its bound
    now and then). A refused checkpoint waits for the other one, then runs."""
    from eventstore.backends.sqlite import engine

    db = str(db_path)
    holder = CheckpointLockHolder(db, tmp_path)
    with EventStore.open(db, busy_timeout=30) as store:
        store.create_session("s").append("x", {})  # the store's first write (its mark) is in
        holder.hold()
        try:
            # every checkpoint this asks for finds the lock held
            grow_wal(store, db, engine.WAL_RESET_FRAMES + 100)
        finally:
            holder.let_go()
        assert store._backend._checkpointer.wait_idle(timeout=60)
        store.session("s").append("x", {})
        # the long WAL was copied and the append started it over (else it holds every frame)
        assert wal_length(db) < 100


def test_a_restart_refused_while_another_process_checkpoints_is_tried_again(db_path, tmp_path, monkeypatch):
    """The RESTART that makes a long WAL start over is refused the same way when another
    process's checkpoint began between the passive checkpoint and it; it is tried again
    once that one is done."""
    from eventstore.backends.sqlite import checkpoint, engine
    from eventstore.backends.sqlite.writelock import open_write_lock

    monkeypatch.setattr(engine, "CHECKPOINT_FRAMES", 10**9)  # the test runs the checkpoint itself
    db = str(db_path)
    holder = CheckpointLockHolder(db, tmp_path)
    store = EventStore.open(db, busy_timeout=30)
    s = store.create_session("s")
    conn = engine.connect(db, 30)  # the checkpointer's (on a database in WAL mode)
    wlock = open_write_lock(db)
    reader = sqlite3.connect(db, isolation_level=None)

    class Contended:
        """The checkpoint's connection: just before its first RESTART the reader leaves and
        another process takes the checkpoint lock; it lets go before the next checkpoint."""

        def __init__(self, conn: sqlite3.Connection):
            self.conn = conn

        def execute(self, sql: str):
            if "wal_checkpoint(RESTART)" in sql and holder.proc.pid is None:
                reader.execute("COMMIT")
                holder.hold()
            elif "wal_checkpoint" in sql and holder.holding:
                holder.let_go()
            return self.conn.execute(sql)

    try:
        grow_wal(store, db, engine.WAL_RESET_FRAMES + 100)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchall()
        s.append("x", {})  # the passive checkpoint cannot copy this while the reader reads before it
        checkpoint.checkpoint(Contended(conn), wlock, 30)
        assert holder.proc.pid is not None  # the RESTART was reached
        holder.let_go()  # (if the checkpoint gave up, it still holds the lock)
        s.append("x", {})
        assert wal_length(db) < 100  # the RESTART ran after all: the append started the WAL over
    finally:
        holder.let_go()
        reader.close()
        wlock.close()
        conn.close()
        store.close()


def test_a_checkpoint_refused_while_the_wal_is_long_holds_writers_back_until_it_restarts(db_path, tmp_path,
                                                                                          monkeypatch):
    """A passive checkpoint holds no writer back, so while another process's is slow (its
    fsyncs on a busy disk) writers can add many times WAL_RESET_FRAMES to the WAL. A
    checkpoint refused while the WAL is that long already keeps writers out until it can
    make the WAL start over."""
    import fcntl
    import threading

    from eventstore.backends.sqlite import checkpoint, engine
    from eventstore.backends.sqlite.writelock import lock_path, open_write_lock

    monkeypatch.setattr(engine, "CHECKPOINT_FRAMES", 10**9)  # the test runs the checkpoint itself
    db = str(db_path)
    holder = CheckpointLockHolder(db, tmp_path)
    store = EventStore.open(db, busy_timeout=30)
    store.create_session("s")
    conn = engine.connect(db, 30)  # the checkpointer's (on a database in WAL mode)
    wlock = open_write_lock(db)
    probe = os.open(lock_path(db), os.O_RDWR)

    def writers_kept_out() -> bool:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False

    try:
        grow_wal(store, db, engine.WAL_RESET_FRAMES + 100)
        holder.hold()  # another process's checkpoint, a slow one
        thread = threading.Thread(target=checkpoint.checkpoint, args=(conn, wlock, 30, db))
        thread.start()
        assert wait_until(writers_kept_out, 30)
        holder.let_go()
        thread.join(60)
        assert not thread.is_alive()
        store.session("s").append("x", {})
        assert wal_length(db) < 100  # the RESTART ran: the append started the WAL over
    finally:
        holder.let_go()
        os.close(probe)
        wlock.close()
        conn.close()
        store.close()
