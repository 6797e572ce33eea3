"""The hot append path: the cached session head and the background checkpointer.

The cache is an optimization the guard trigger checks on every insert; these tests make
other writers (other stores, with their own connections, as other processes would) append
behind a store's back and check that what ends up stored is still gapless and chained.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading

import pytest
from test_concurrency import check_session, integrity_ok

from eventstore import EventStore, IdempotencyConflict, InvalidEvent, SeqConflict
from eventstore.backends.sqlite import engine as _engine

pytestmark = pytest.mark.sqlite_only  # the SQLite append path: head cache, write queue, checkpoints


def assert_gapless_and_chained(db_path, sid: str = "s") -> None:
    """Read the session back through a connection of its own and check seqs and hashes."""
    conn = sqlite3.connect(db_path)
    try:
        check_session(conn, sid)
    finally:
        conn.close()


def test_appends_interleaved_from_two_stores_stay_gapless_and_chained(db_path):
    a = EventStore.open(db_path)
    b = EventStore.open(db_path)
    sa, sb = a.create_session("s"), b.session("s")
    other = b.create_session("t")
    for i in range(30):
        writer = (sa, sb, sa, sa, sb)[i % 5]  # runs of appends from one store, then the other
        writer.append("x", {"i": i})
        if i % 7 == 0:
            other.append("y", {"i": i})  # moves the global position behind a's back
    a.close()
    b.close()
    conn = sqlite3.connect(db_path)
    rows = check_session(conn, "s")
    assert [r[3] for r in rows] == [f'{{"i":{i}}}' for i in range(30)]
    check_session(conn, "t")
    conn.close()
    integrity_ok(db_path)


def test_expected_seq_is_checked_against_the_stored_head_not_the_cache(db_path):
    a = EventStore.open(db_path)
    b = EventStore.open(db_path)
    sa = a.create_session("s")
    sa.append("x", {})  # a's cache: next seq 1
    b.session("s").append("x", {})  # the session is at 2 now
    with pytest.raises(SeqConflict) as e:
        sa.append("x", {}, expected_seq=1)
    assert e.value.actual_seq == 2
    assert sa.append("x", {}, expected_seq=2).seq == 2
    assert sa.next_seq() == 3
    a.close()
    b.close()


def test_a_stale_cache_after_another_writer_is_retried_not_stored(db_path):
    """The guard refuses the cached seq/position; the store reads the head and retries in
    the same transaction, so the event lands once, at the right place."""
    a = EventStore.open(db_path)
    b = EventStore.open(db_path)
    sa = a.create_session("s")
    first = sa.append("x", {"n": 1})
    b.session("s").append_many([("x", {"n": 2}), ("x", {"n": 3})])
    ev = sa.append("x", {"n": 4})
    assert (ev.seq, ev.position) == (3, first.position + 3)
    assert [e.payload["n"] for e in sa.events()] == [1, 2, 3, 4]
    a.close()
    b.close()
    assert_gapless_and_chained(db_path)


def test_threads_of_one_store_and_a_second_store_append_without_gaps(db_path):
    a = EventStore.open(db_path)
    b = EventStore.open(db_path)
    a.create_session("s")
    errors = []

    def work(store, tag):
        try:
            s = store.session("s")
            for i in range(100):
                s.append("x", {"who": tag, "i": i})
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(st, f"{n}{k}")) for n, st in (("a", a), ("b", b)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
    assert not errors
    conn = sqlite3.connect(db_path)
    assert len(check_session(conn, "s")) == 400
    conn.close()


def test_checkpoints_run_on_a_background_thread_and_keep_the_wal_bounded(db_path, monkeypatch):
    monkeypatch.setattr(_engine, "CHECKPOINT_FRAMES", 100)  # about 50 appends
    monkeypatch.setattr(_engine, "WAL_RESET_FRAMES", 300)
    store = EventStore.open(db_path)
    s = store.create_session("s")
    for i in range(1000):
        s.append("assistant/chunk", {"delta": {"content": "x" * 200}})
        if i % 50 == 49 and store._backend._checkpointer is not None:
            # Let each checkpoint finish before the next 50 appends: how far a writer gets
            # during one depends on this disk's fsync time, and the bound below should not.
            assert store._backend._checkpointer.wait_idle(timeout=30)
    checkpointer = store._backend._checkpointer
    assert checkpointer is not None and checkpointer._thread is not None
    assert checkpointer._thread.name == "eventstore-checkpoint"
    assert checkpointer.wait_idle(timeout=30)
    assert checkpointer.done >= 2  # several requests; ones that came while one ran merge
    # The last checkpoint copied the WAL up to some recent commit: the file holds events.
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    assert conn.execute("SELECT count(*) FROM events").fetchone() == (1000,)
    conn.close()
    # Without checkpoints the WAL would hold every page of 1,000 commits (about 9 MB here).
    # Passive checkpoints on the side never catch up with a writer that keeps appending,
    # so past WAL_RESET_FRAMES frames one checkpoint makes the WAL start over.
    assert os.path.getsize(f"{db_path}-wal") < 2 * 300 * 4096 + 32
    thread = checkpointer._thread
    store.close()
    assert not thread.is_alive()  # close() stops it


def test_closing_while_a_checkpoint_is_due_loses_nothing(db_path, monkeypatch):
    monkeypatch.setattr(_engine, "CHECKPOINT_FRAMES", 3)  # every commit of a few events
    for round_ in range(5):
        with EventStore.open(db_path) as store:
            s = store.session("s") if round_ else store.create_session("s")
            s.append_many([("x", {"i": i}) for i in range(25)])
            s.append("x", {})
    conn = sqlite3.connect(db_path)
    assert len(check_session(conn, "s")) == 5 * 26
    conn.close()
    integrity_ok(db_path)


def test_a_store_dropped_without_close_stops_its_checkpointer(db_path, monkeypatch):
    import gc

    monkeypatch.setattr(_engine, "CHECKPOINT_FRAMES", 3)  # every commit of a few events
    store = EventStore.open(db_path)
    store.create_session("s").append_many([("x", {})] * 20)
    checkpointer = store._backend._checkpointer
    assert checkpointer.wait_idle(timeout=30)
    thread = checkpointer._thread
    assert thread.is_alive()
    del store
    gc.collect()
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.parametrize("kind", ["single", "batch of 100", "big payloads"])
def test_the_checkpoint_cadence_follows_the_wal_frames_commits_write(db_path, monkeypatch, kind):
    """A checkpoint is due after about CHECKPOINT_FRAMES WAL frames, whatever the commits
    hold: engine.wal_frames() stays within a factor of 1.6 of the frames SQLite writes
    (measured on the WAL file, with checkpoints held back), so a batch of 100 small events
    counts for about 10 frames, not 100 events' worth."""
    monkeypatch.setattr(_engine, "CHECKPOINT_FRAMES", 10**9)
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        s.append_many([("assistant/chunk", {"delta": {"content": f"w{i}"}}) for i in range(300)])
        wal = f"{db_path}-wal"
        before = os.path.getsize(wal)
        if kind == "single":
            commits = [[("assistant/chunk", {"delta": {"content": f"tok{i}"}})] for i in range(400)]
        elif kind == "batch of 100":
            commits = [[("assistant/chunk", {"delta": {"content": f"tok{i}"}})] * 100 for i in range(40)]
        else:
            commits = [[("tool/result", {"content": "x" * 5000})] for _ in range(100)]
        estimate = 0
        for events in commits:
            stored = s.append_many(events)
            estimate += _engine.wal_frames(len(stored), sum(len(json.dumps(e.payload, separators=(",", ":")))
                                                            for e in stored))
        frames = (os.path.getsize(wal) - before) / (24 + 4096)
        assert frames / 1.6 <= estimate <= frames * 1.6, (frames, estimate)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_child_forked_while_another_thread_writes_is_refused_at_once(db_path):
    """SQLite's per-process lock state is copied mid-write: the child could never write and
    would stall every writer for the busy timeout on each try. It is refused at once, with
    the reason, and the parent's writers are not held up."""
    import time

    store = EventStore.open(db_path, busy_timeout=5)
    s = store.create_session("x")
    inside, go = threading.Event(), threading.Event()

    def writer():
        store._backend._transact(lambda _cur: (inside.set(), go.wait()), "x")

    t = threading.Thread(target=writer)
    t.start()
    inside.wait()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what each write attempt did, then leave
        out = []
        for attempt in (lambda: s.append("x", {}), lambda: EventStore.open(db_path).session("x").append("x", {})):
            t0 = time.monotonic()
            try:
                attempt()
                out.append("appended")
            except Exception as e:
                out.append(f"{type(e).__name__} {time.monotonic() - t0:.1f} {'forked while' in str(e)}")
        os.write(w, "|".join(out).encode())
        os._exit(0)
    os.close(w)
    go.set()
    t.join()
    t0 = time.monotonic()
    s.append("x", {"from": "parent"})
    parent_wait = time.monotonic() - t0
    os.waitpid(pid, 0)
    report = os.read(r, 4096).decode().split("|")
    os.close(r)
    assert [x.split()[0] for x in report] == ["DatabaseError", "DatabaseError"], report
    assert all(float(x.split()[1]) < 1.0 and x.split()[2] == "True" for x in report), report
    assert parent_wait < 2.0
    assert [e.payload for e in s.events()] == [{"from": "parent"}]
    store.close()


def test_a_store_dropped_without_close_frees_its_lock_file(db_path):
    import gc

    def open_lock_fds():
        lock = os.path.realpath(f"{db_path}-lock")
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}") == lock
            except OSError:
                pass
        return n

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc")
    for _ in range(10):
        store = EventStore.open(db_path)
        store.create_session().append("x", {})
        del store
    gc.collect()
    assert open_lock_fds() == 0


def test_a_checkpoint_asked_for_just_before_close_still_runs(db_path):
    store = EventStore.open(db_path)
    store.create_session("s").append("x", {})
    checkpointer = store._backend._checkpointer
    checkpointer.request()
    checkpointer.close()  # at once: the thread may not even have started
    assert checkpointer.done == 1
    store.close()


@pytest.mark.parametrize("n", [1, 2, 9, 10, 11, 64, 99, 100, 101, 123, 250])
def test_append_many_in_groups_stores_each_event_once_in_order_and_chained(db_path, n):
    """append_many inserts up to 100 rows per statement (a batch's hundreds, tens and units:
    123 is 100 + 20 + 3 rows): every size lands gapless, in order, with the chain a
    row-by-row append would give."""
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        s.append("x", {"i": -1})
        events = s.append_many([("x", {"i": i}) for i in range(n)])
        assert [(e.seq, e.position) for e in events] == [(i + 1, events[0].position + i) for i in range(n)]
        assert [e.payload["i"] for e in s.events()] == list(range(-1, n))
    assert_gapless_and_chained(db_path)


@pytest.mark.parametrize("shape", ["one type, one ts", "two types", "own timestamps", "one type, ts of one value"])
def test_append_many_binds_a_shared_type_and_ts_once_and_each_row_its_own_otherwise(db_path, shape):
    """A batch of one type and one ts binds them once per statement; any other batch binds
    each row's: every shape stores each event's own type and ts, chained."""
    n = 123  # three statements: 100 rows, then 20 and 3
    items = {
        "one type, one ts": [("x", {"i": i}) for i in range(n)],
        "two types": [("x" if i % 3 else "y", {"i": i}) for i in range(n)],
        "own timestamps": [("x", {"i": i}, 1000.0 + i) for i in range(n)],
        "one type, ts of one value": [("x", {"i": i}, float("1234.5")) for i in range(n)],
    }[shape]
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        events = s.append_many(items)
        stored = list(s.events())
        assert [(e.type, e.payload["i"]) for e in stored] == [(t, p["i"]) for t, p, *_ in items]
        assert [e.ts for e in stored] == [e.ts for e in events]
        if shape == "own timestamps":
            assert [e.ts for e in stored] == [1000.0 + i for i in range(n)]
        assert stored == events
    assert_gapless_and_chained(db_path)


def test_append_many_retries_a_stale_cached_head_and_stores_the_whole_batch_once(db_path):
    a = EventStore.open(db_path)
    b = EventStore.open(db_path)
    sa = a.create_session("s")
    sa.append_many([("x", {"n": i}) for i in range(3)])
    b.session("s").append("x", {"n": 3})  # behind a's back: a's cached head is stale
    events = sa.append_many([("x", {"n": i}) for i in range(4, 4 + 70)])
    assert events[0].seq == 4 and events[-1].seq == 73
    assert [e.payload["n"] for e in sa.events()] == list(range(74))
    a.close()
    b.close()
    assert_gapless_and_chained(db_path)


def test_append_many_refused_in_a_later_group_stores_nothing(db_path):
    """A row refused in the second statement of a batch (a duplicate idempotency key)
    rolls back the rows the first statement stored: all or none."""
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        s.append("x", {"event_id": "k"})
        batch = [("x", {"i": i}) for i in range(64)] + [("x", {"event_id": "k"})]
        with pytest.raises(Exception) as info:
            s.append_many(batch)
        assert "event_id" in str(info.value)
        assert s.next_seq() == 1
        assert len(s.append_many([("x", {"i": i}) for i in range(65)])) == 65
    assert_gapless_and_chained(db_path)


def test_a_retried_append_many_batch_returns_the_stored_events(db_path):
    """An agent that lost the answer to an append_many (a crash, a timeout) sends the same
    batch again: when each event has an event_id, it gets the stored events back."""
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        batch = [("x", {"event_id": f"k{i}", "i": i}) for i in range(70)]
        first = s.append_many(batch)
        again = s.append_many(batch)
        assert [(e.seq, e.position, e.payload) for e in again] == [(e.seq, e.position, e.payload) for e in first]
        assert s.next_seq() == 70


@pytest.mark.parametrize("batch, error, words", [
    ([("x", {"event_id": "k0", "i": 0}), ("x", {"event_id": "new"})], IdempotencyConflict, "rest of this batch"),
    ([("x", {"event_id": "k0", "i": 0}), ("x", {"i": 1})], IdempotencyConflict, "rest of this batch"),
    ([("x", {"event_id": "k0", "i": 99})], IdempotencyConflict, "different type or payload"),
    ([("y", {"event_id": "k0", "i": 0})], IdempotencyConflict, "different type or payload"),
    ([("x", {"event_id": "d"}), ("x", {"event_id": "d"})], InvalidEvent, "appears twice"),
], ids=["stored-with-new", "stored-with-keyless", "other-payload", "other-type", "twice-in-batch"])
def test_append_many_names_the_idempotency_key_it_cannot_honour(db_path, batch, error, words):
    with EventStore.open(db_path) as store:
        s = store.create_session("s")
        s.append_many([("x", {"event_id": "k0", "i": 0}), ("x", {"event_id": "k1", "i": 1})])
        with pytest.raises(error, match=words):
            s.append_many(batch)
        assert s.next_seq() == 2


def test_appends_return_their_payloads_as_stored(store):
    """What append and append_many return is what a read gives back: the stored JSON, not
    the caller's objects (a tuple is an array, an IntEnum its number, 2.0 the integer 2)
    and not shared with them (changing the caller's dict later changes nothing)."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    nested = {"k": [1]}
    odd = {"t": (1, 2), "level": Level.HIGH, "f": 2.0, "n": nested}
    s = store.create_session("s")
    one = s.append("x", odd)
    many = s.append_many([("y", odd), ("z", {"plain": "a"}), ("w", None)])
    nested["k"].append(2)
    read = list(s.events())
    assert [e.payload for e in [one, *many]] == [e.payload for e in read]
    assert one.payload == {"t": [1, 2], "level": 3, "f": 2, "n": {"k": [1]}}
    assert type(one.payload["level"]) is int and type(many[0].payload["t"]) is list
    assert many[2].payload == {}


@pytest.mark.parametrize("key", ["\ud800", "a\udfffb"])
def test_an_event_id_that_could_not_be_looked_up_is_refused(store, key):
    """A key with a lone surrogate could be stored (escaped in the payload) but never found
    again, so a retry could not be recognised: it is refused up front, in both calls."""
    s = store.create_session("s")
    with pytest.raises(InvalidEvent, match="without lone UTF-16 surrogates"):
        s.append("x", {}, event_id=key)
    with pytest.raises(InvalidEvent, match="without lone UTF-16 surrogates"):
        s.append_many([("x", {"event_id": "ok"}), ("x", {"event_id": key})])
    assert s.next_seq() == 0
    s.append("x", {}, event_id="é-1")
    assert s.append("x", {}, event_id="é-1").seq == 0  # a plain non-ASCII key retries fine
