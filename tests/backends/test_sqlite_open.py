"""Opening an SQLite database never destroys it: a -wal of another database (or of another
state of this one) is refused before a read-write connection exists, a file with two
hard-link names is refused, and a file the user may only read, in a folder they may not
write, can be read."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, TESTS

from eventstore import DatabaseError, EventStore, WalMismatch
from eventstore.audit.integrity import verify_database
from eventstore.backends.sqlite import engine as _engine
from eventstore.backends.sqlite.walcheck import APPLICATION_ID, wal_verdict
from eventstore.cli import cli

ROOT = TESTS.parent
EVENTS = 600  # in the database under attack


def cli_run(db: Path, *args: str, input: bytes | None = None):
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input)


def fill(store: EventStore, session: str, batches: int, size: int = 200) -> None:
    s = store.create_session(session)
    for i in range(batches):
        s.append_many([("user/message", {"content": f"{session} {i} " + "x" * size})] * 20)


def wal_of(db: Path, work: Callable[[EventStore], None]) -> bytes:
    """The -wal of the eventstore database ``db`` as ``work`` left it, copied while the store
    is still open (a live WAL, not yet checkpointed away)."""
    store = EventStore.open(db)
    try:
        work(store)
        return Path(f"{db}-wal").read_bytes()
    finally:
        store.close()


def settle(store: EventStore) -> None:
    """What a store's first write does first: give the database a mark of this copy's own
    and checkpoint it into the file (the file as a crash of the store's later writes leaves it)."""
    backend = store._backend
    backend._marks.settle(backend._conn, backend.busy_timeout)


def fill_past_a_restart(store: EventStore, session: str) -> None:
    """Append batches to a new ``session``, and more after a checkpoint that starts the WAL over."""
    fill(store, session, 5)
    conn = sqlite3.connect(store._backend.files()[0])
    assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    conn.close()
    assert os.path.getsize(store._backend.files()[1]) == 0
    fill(store, session + "+", 5)


def plain_wal(path: Path, statements: list[str]) -> bytes:
    """The -wal of a plain SQLite database (another application's) after ``statements``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    for sql in statements:
        conn.execute(sql)
    data = Path(f"{path}-wal").read_bytes()
    conn.close()
    return data


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """An eventstore database of 600 events (30 batches), checkpointed and closed: no WAL."""
    db = tmp_path / "victim.db"
    with EventStore.open(db) as store:
        fill(store, "victim", EVENTS // 20)
    assert not Path(f"{db}-wal").exists()
    return db


def intact(db: Path, events: int = EVENTS) -> bool:
    report = verify_database(db, full=True)
    if not report.ok:
        return False
    with EventStore.open(db, readonly=True) as store:
        return sum(1 for _ in store.session("victim").events()) == events


def attack(db: Path, wal: bytes, events: int = EVENTS) -> str:
    """Put ``wal`` beside ``db`` and open it every way (read-write, the CLI's import and its
    reads): each refuses, leaving the database file and the WAL exactly as they were, or
    opens the database whole. Returns "refused" or "opened"."""
    walpath = Path(f"{db}-wal")
    walpath.write_bytes(wal)
    before = db.read_bytes()
    outcomes = set()
    try:
        EventStore.open(db).close()
        outcomes.add("opened")
    except DatabaseError as e:
        outcomes.add("refused")
        assert "leaves it unchanged" not in str(e) or db.read_bytes() == before
    if outcomes == {"refused"}:
        assert db.read_bytes() == before and walpath.read_bytes() == wal
        r = cli_run(db, "import", str(DATA / "demo.jsonl"))
        assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit), r.output
        r = cli_run(db, "sessions")
        assert r.exit_code == 1, r.output
        assert db.read_bytes() == before and walpath.read_bytes() == wal
        walpath.unlink()
        Path(f"{db}-shm").unlink(missing_ok=True)
        assert db.read_bytes() == before
    assert intact(db, events)  # refused: the file as it was; opened: the database whole, every event there
    assert len(outcomes) == 1
    return outcomes.pop()


def wals_of_another_eventstore_database(tmp_path: Path) -> dict[str, bytes]:
    other = tmp_path / "other.db"
    with EventStore.open(other) as store:
        fill(store, "victim", EVENTS // 20)  # the same sessions, sizes and page count as the victim
    return {
        "one append": wal_of(other, lambda st: st.session("victim").append("user/message", {"content": "o"})),
        "a few batches": wal_of(other, lambda st: fill(st, "o1", 5)),
        "many batches, past a checkpoint": wal_of(other, lambda st: fill(st, "o2", 150, 1000)),
    }


def test_the_wal_of_another_eventstore_database_is_refused_whatever_its_size(victim, tmp_path):
    for name, wal in wals_of_another_eventstore_database(tmp_path).items():
        assert wal_verdict(str(victim)) == (None, True)
        Path(f"{victim}-wal").write_bytes(wal)
        why, _confirmed = wal_verdict(str(victim))
        assert why is not None and "written for another database" in why, name
        assert attack(victim, wal) == "refused", name


def test_a_plain_sqlite_databases_wal_is_refused(victim, tmp_path):
    cases = {
        "a table": ["PRAGMA page_size = 4096", "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"],
        "rows": ["CREATE TABLE t (x)", *["INSERT INTO t VALUES (randomblob(3000))"] * 40],
        "a vacuum": ["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)", "VACUUM"],
    }
    for n, (name, statements) in enumerate(cases.items()):
        wal = plain_wal(tmp_path / f"plain{n}.db", statements)
        assert attack(victim, wal) == "refused", name


def test_a_database_from_before_marks_is_never_checkpointed_on_a_refusal(victim, tmp_path):
    """The issue's case: a database without its mark (before 0260) beside the WAL of a
    plain database's VACUUM (which fits any file): the file is read through it only on a
    read-only connection, which refuses it, and the file stays as it was."""
    unmark(victim)
    wal = plain_wal(tmp_path / "plain.db", ["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)", "VACUUM"])
    Path(f"{victim}-wal").write_bytes(wal)
    before = victim.read_bytes()
    with pytest.raises(DatabaseError, match="is not an eventstore database .* eventstore leaves it unchanged"):
        EventStore.open(victim)
    assert victim.read_bytes() == before and Path(f"{victim}-wal").read_bytes() == wal


def test_an_older_wal_of_the_same_database_is_refused(victim):
    earlier = wal_of(victim, lambda st: fill(st, "w0", 2))  # written by an earlier store
    store = EventStore.open(victim)
    try:
        fill(store, "w1", 3)
        old = Path(f"{victim}-wal").read_bytes()
        fill_past_a_restart(store, "w2")  # a WAL generation later
    finally:
        store.close()
    for wal, message in ((old, "the database file is newer than the WAL"),
                         (earlier, "another copy of this database")):  # each store gives it a mark of its own
        Path(f"{victim}-wal").write_bytes(wal)
        why, _ = wal_verdict(str(victim))
        assert why is not None and ("older state of this database" in why) == (wal is old), why
        before = victim.read_bytes()
        with pytest.raises(WalMismatch, match=message):
            EventStore.open(victim)
        assert victim.read_bytes() == before and Path(f"{victim}-wal").read_bytes() == wal
        Path(f"{victim}-wal").unlink()
        assert verify_database(victim, full=True).ok


def test_an_older_copy_of_the_database_beside_its_newer_wal_is_refused(victim, tmp_path):
    backup = tmp_path / "backup"

    def work(store: EventStore) -> None:
        settle(store)
        shutil.copyfile(victim, backup)  # the file holds this store's mark: the backup is of this copy
        fill_past_a_restart(store, "w")  # the WAL started over since the backup

    new = wal_of(victim, work)
    shutil.copyfile(backup, victim)  # the backup restored with cp beside the live WAL
    Path(f"{victim}-wal").write_bytes(new)
    why, _ = wal_verdict(str(victim))
    assert why is not None and "the database file is an older copy" in why
    assert attack(victim, new) == "refused"


def test_empty_header_only_and_truncated_wals(victim, tmp_path):
    foreign = wals_of_another_eventstore_database(tmp_path)["a few batches"]
    frame = 24 + 4096
    sizes = [0, 16, 32, 32 + 24, 32 + frame - 1, 32 + frame, 32 + 3 * frame + 100, len(foreign) - 1]
    for size in sizes:
        assert attack(victim, foreign[:size]) in ("refused", "opened"), size
        if size > 32 + frame:  # frames of a committed transaction of another database: refused
            Path(f"{victim}-wal").write_bytes(foreign[:size])
            assert wal_verdict(str(victim))[0] is not None, size
            Path(f"{victim}-wal").unlink()
    own = wal_of(victim, lambda st: st.session("victim").append("user/message", {"content": "mine"}))
    for size in (0, 32, len(own) - 1, len(own)):  # its own WAL, whole or cut: opened, never refused
        Path(f"{victim}-wal").write_bytes(own[:size])
        assert wal_verdict(str(victim)) == (None, True), size
        with EventStore.open(victim):
            pass
        assert verify_database(victim, full=True).ok


def test_each_wal_generation_eventstore_starts_is_marked(victim):
    def mark() -> int:
        conn = sqlite3.connect(f"file:{victim}?mode=ro", uri=True)
        try:
            assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            return conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()

    first = mark()
    store = EventStore.open(victim)
    marks = []
    try:
        for i in range(3):  # the WAL starts over three times
            fill_past_a_restart(store, f"w{i}")
            assert wal_verdict(str(victim)) == (None, True)  # its first transaction holds the next mark
            marks.append(mark())
    finally:
        store.close()
    assert first not in marks  # the store gave the database a mark of its own before its first write
    assert [marks[1] - marks[0], marks[2] - marks[1]] == [1, 1]  # one per generation started over


def crash_wal(db: Path, work: Callable[[EventStore], None]) -> bytes:
    """The -wal ``work`` left, beside the database file as it was before: a writer killed
    before its WAL was checkpointed."""
    def settled_work(store: EventStore) -> None:
        nonlocal before
        settle(store)  # what the store's first write does first
        before = db.read_bytes()
        work(store)

    before = b""
    wal = wal_of(db, settled_work)
    db.write_bytes(before)
    return wal


def unmark(db: Path) -> None:
    """Make ``db`` a database from before 0260 (no mark)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA application_id = 0")
    conn.execute("PRAGMA user_version = 0")
    conn.close()


def test_a_wal_eventstore_did_not_mark_is_checked_before_any_write(victim, tmp_path, monkeypatch):
    """A WAL written without marks (by an eventstore before 0260, or another program) is
    opened when the database read through it passes quick_check, refused when it does not."""
    one_more = lambda st: st.session("victim").append("user/message", {"content": "o"})  # noqa: E731
    monkeypatch.setattr(_engine.WalMarks, "mark", lambda self, cur: None)
    monkeypatch.setattr(_engine.WalMarks, "settle", lambda self, conn, busy_timeout: None)
    own = crash_wal(victim, one_more)  # its first transaction writes page 1, the mark unchanged
    Path(f"{victim}-wal").write_bytes(own)
    assert wal_verdict(str(victim)) == (None, False)
    assert attack(victim, own, EVENTS + 1) == "opened"
    other = tmp_path / "other.db"
    with EventStore.open(other) as store:
        fill(store, "rival!", EVENTS // 20)  # as many events as the victim now, the same page count
        store.session("rival!").append("user/message", {"content": "o"})
    assert other.stat().st_size == victim.stat().st_size
    unmark(victim)  # databases from before 0260: no marks to tell them apart
    unmark(other)
    foreign = crash_wal(other, lambda st: st.session("rival!").append("user/message", {"content": "o"}))
    Path(f"{victim}-wal").write_bytes(foreign)
    assert wal_verdict(str(victim)) == (None, False)  # the page images and sizes fit
    before = victim.read_bytes()
    with pytest.raises(WalMismatch, match="nothing proves that it belongs to the file, and the database read through it no longer holds the last events"):
        EventStore.open(victim)
    assert victim.read_bytes() == before and Path(f"{victim}-wal").read_bytes() == foreign


def test_a_refusal_through_the_cli_tells_the_truth(victim, tmp_path):
    wal = wals_of_another_eventstore_database(tmp_path)["one append"]
    Path(f"{victim}-wal").write_bytes(wal)
    before = victim.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "eventstore", "--db", str(victim), "import", str(DATA / "demo.jsonl")],
                       env=env, capture_output=True)
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert r.stderr.decode().startswith(f"error: {victim}-wal does not belong to {victim}: its transaction 1 "
                                        f"writes a page 1 with the mark ")
    assert "it was written for another database" in r.stderr.decode()
    assert "Refused before anything was read through it or written" in r.stderr.decode()
    assert victim.read_bytes() == before and Path(f"{victim}-wal").read_bytes() == wal


# --- two names for one file ----------------------------------------------------------------------

def test_a_database_file_with_two_hard_link_names_is_refused(victim, tmp_path):
    link = tmp_path / "link.db"
    os.link(victim, link)
    before = victim.read_bytes()
    for name in (victim, link):
        for readonly in (False, True):
            with pytest.raises(DatabaseError, match=r"has 2 names \(hard links to one file\): SQLite keeps a "
                                                    r"-wal file beside each name"):
                EventStore.open(name, readonly=readonly)
    for args in (["sessions"], ["sql", "SELECT 1"], ["verify"], ["import", str(DATA / "demo.jsonl")]):
        r = cli_run(link, *args)
        assert r.exit_code == 1 and "has 2 names (hard links to one file)" in r.output, (args, r.output)
    target = tmp_path / "target.db"
    EventStore.open(target).close()
    os.link(target, tmp_path / "target-link.db")
    r = CliRunner().invoke(cli, ["copy", str(victim), str(tmp_path / "target-link.db")])
    assert r.exit_code == 1 and "has 2 names (hard links to one file)" in r.output, r.output
    assert "disk I/O error" not in r.output
    assert victim.read_bytes() == before
    link.unlink()  # one name again: fine
    assert intact(victim)
    sym = tmp_path / "sym.db"
    sym.symlink_to(victim)
    with EventStore.open(sym) as store:  # a symbolic link stays fine: its WAL is the file's own
        store.session("victim").append("user/message", {"content": "through the link"})
        assert Path(f"{victim}-wal").exists() and not Path(f"{sym}-wal").exists()
    assert verify_database(victim, full=True).ok


# --- a file the user may only read, in a folder they may not write -------------------------------

NOBODY = 65534


def as_reader(db: Path, commands: list[list[str]], private: Path | None = None) -> list[tuple[int, str]]:
    """Run the CLI ``commands`` on ``db`` as a user who may only read it: the current user
    when not root (its folder and files are made read-only), else ``nobody`` in a forked
    child (root ignores file permissions; a fork needs no interpreter that nobody may run:
    the modules are imported already); ``private``: a file only its owner (root) may read.
    Returns each ``(exit code, output)``."""
    import json

    folder = db.parent
    for p in folder.iterdir():
        p.chmod(0o600 if p == private else 0o444)
    folder.chmod(0o555)
    try:
        for args in commands:  # as ourselves first: every module the commands need is imported
            cli_run(db.parent.parent / "warm.db", *args)
        if os.geteuid() != 0:
            return [(r.exit_code, r.output) for r in (cli_run(db, *args) for args in commands)]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.close(read)
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                results = [(r.exit_code, r.output) for r in (cli_run(db, *args) for args in commands)]
                os.write(write, json.dumps(results).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
        assert status == 0, data
        return [tuple(r) for r in json.loads(data)]
    finally:
        folder.chmod(0o755)


READS = [["sessions", "--json"], ["events", "victim"], ["export", "victim"], ["verify"],
         ["sql", "SELECT count(*) AS n FROM events"]]


@pytest.fixture
def reader_copy(victim):
    """A folder holding a copy of the victim, and a warm-up copy above it; in a folder of
    its own under the system's temporary folder, which ``nobody`` may enter (pytest's is
    its user's alone)."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="eventstore-ro-"))
    top.chmod(0o755)
    folder = top / "ro"
    folder.mkdir()
    shutil.copyfile(victim, folder / "f.db")
    shutil.copyfile(victim, top / "warm.db")
    try:
        yield folder / "f.db"
    finally:
        folder.chmod(0o755)
        shutil.rmtree(top)


def test_a_file_the_user_may_only_read_in_a_folder_they_may_not_write(reader_copy):
    names = sorted(os.listdir(reader_copy.parent))
    results = as_reader(reader_copy, READS)
    for args, (code, output) in zip(READS, results, strict=True):
        assert code == 0, (args, output)
    assert results[4][1].split() == ["n", str(EVENTS), "(1", "row)"]
    assert len(results[2][1].splitlines()) == EVENTS + 1  # the meta line and every event
    assert sorted(os.listdir(reader_copy.parent)) == names  # nothing created beside it


def test_a_wal_the_reader_cannot_use_is_named(reader_copy):
    one_more = lambda st: st.session("victim").append("user/message", {"content": "in the WAL"})  # noqa: E731
    store = EventStore.open(reader_copy)
    settle(store)
    before = reader_copy.read_bytes()
    one_more(store)
    wal, shm = Path(f"{reader_copy}-wal").read_bytes(), Path(f"{reader_copy}-shm").read_bytes()
    store.close()
    reader_copy.write_bytes(before)  # the writer's crash: its transaction only in the WAL
    walpath = Path(f"{reader_copy}-wal")
    walpath.write_bytes(wal)
    for code, output in as_reader(reader_copy, READS):
        assert code == 1, output
        assert (f"{walpath} holds 1 transaction(s) not yet copied into the file, and SQLite reads a WAL only "
                f"through a {reader_copy}-shm file, which it cannot create in {reader_copy.parent}") in output
        assert "Traceback" not in output
    walpath.write_bytes(wal[:32])  # a WAL with no transaction: the file alone is the database
    results = as_reader(reader_copy, READS)
    assert [code for code, _ in results] == [0] * len(READS), results
    if os.geteuid() == 0:  # a WAL the reader may not read (root reads anything)
        walpath.write_bytes(wal)
        results = as_reader(reader_copy, [["sessions"]], private=walpath)
        assert results[0][0] == 1
        assert f"{walpath} is there but cannot be read (Permission denied)" in results[0][1]
    walpath.write_bytes(wal)
    Path(f"{reader_copy}-shm").write_bytes(shm)  # its -shm beside it too: SQLite reads the WAL through it
    results = as_reader(reader_copy, READS)
    assert [code for code, _ in results] == [0] * len(READS), results
    assert results[4][1].split() == ["n", str(EVENTS + 1), "(1", "row)"]


def test_a_killed_writers_wal_is_proved_by_its_mark(tmp_path):
    """A writer process killed mid-stream, before and after its WAL started over: the WAL
    it leaves carries the mark, so the pair is proved, not inferred (no read-through check)."""
    from test_faults import kill_writer_after, lines

    db, side = tmp_path / "live.db", tmp_path / "acknowledged"
    with EventStore.open(db) as store:
        store.create_session("s")
    for batches, resets in ((1, 0), (300, 1)):
        kill_writer_after(db, side, batches, resets)
        assert wal_verdict(str(db)) == (None, True)
        with EventStore.open(db) as store:
            assert sum(1 for _ in store.session("s").events()) >= lines(side) * 20
        assert verify_database(db).ok


# --- two copies of one database that diverged ----------------------------------------------------

# A writer process: append COUNT events to session "victim" of DB, each with content
# TAG + its number, note on SIDE that they were acknowledged, and wait to be killed.
DIVERGING_WRITER = """
import sys, time
from eventstore import EventStore
db, tag, count, side = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
store = EventStore.open(db)
s = store.session("victim")
for i in range(count):
    s.append_many([("user/message", {"content": f"{tag} {i} " + "y" * 300})] * 20)
open(side, "w").write("acknowledged")
time.sleep(600)
"""


def killed_writer(db: Path, tag: str, batches: int) -> None:
    """Run a writer process on ``db`` until it acknowledged ``batches`` batches of 20 events
    tagged ``tag``, then SIGKILL it: its WAL stays beside the file, not checkpointed."""
    import signal
    import time

    side = db.parent / f"{db.name}.{tag}.acknowledged"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", DIVERGING_WRITER, str(db), tag, str(batches), str(side)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not side.exists():
            assert p.poll() is None, "the writer stopped before it was killed"
            assert time.monotonic() < deadline, "timed out waiting for the writer"
            time.sleep(0.01)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    assert Path(f"{db}-wal").stat().st_size > 32


def digest(*paths: Path) -> list[str]:
    import hashlib

    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def tags(db: Path) -> set[str]:
    with EventStore.open(db, readonly=True) as store:
        return {e.payload["content"].split()[0] for e in store.session("victim").events()}


@pytest.mark.parametrize("batches", [1, 4])
def test_the_wal_of_a_diverged_copy_is_refused_both_ways(victim, tmp_path, batches):
    """The issue's case: a database copied (cp a.db b.db, both at the same mark), each copy
    appended to by a writer SIGKILLed before its WAL was checkpointed; the -wal of one put
    beside the other is refused, in both directions, and nothing is written or checkpointed.
    Each copy still opens with its own WAL, its own events there."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    shutil.copyfile(victim, a)
    shutil.copyfile(victim, b)
    killed_writer(a, "A", batches)
    killed_writer(b, "B", batches)
    wals = {a: Path(f"{a}-wal").read_bytes(), b: Path(f"{b}-wal").read_bytes()}
    for db, other in ((a, b), (b, a)):
        walpath = Path(f"{db}-wal")
        walpath.write_bytes(wals[other])  # the other copy's WAL put beside this file
        Path(f"{db}-shm").unlink(missing_ok=True)
        before = digest(db, walpath)
        why, _confirmed = wal_verdict(str(db))
        assert why is not None and "another copy of this database" in why, why
        with pytest.raises(WalMismatch, match=f"{db}-wal does not belong to {db}: "):
            EventStore.open(db)
        r = cli_run(db, "import", str(DATA / "demo.jsonl"))
        assert r.exit_code == 1 and "does not belong to" in r.output, r.output
        with pytest.raises(WalMismatch):
            EventStore.open(db, readonly=True)
        assert digest(db, walpath) == before  # nothing read through it, nothing checkpointed
    for db, tag in ((a, "A"), (b, "B")):  # each with its own WAL again: opened, its events there
        Path(f"{db}-wal").write_bytes(wals[db])
        Path(f"{db}-shm").unlink(missing_ok=True)
        assert wal_verdict(str(db)) == (None, True)
        with EventStore.open(db) as store:
            assert sum(1 for _ in store.session("victim").events()) == EVENTS + 20 * batches
        assert tags(db) == {"victim", tag}
        assert verify_database(db, full=True).ok


def test_a_reader_holding_the_new_mark_out_of_the_file_does_not_stop_the_write(victim):
    """A reader of an older state keeps the new mark out of the file: the store waits for it
    only briefly (other writers would wait as long), then writes, its two mark transactions
    first in the WAL; the WAL is this file's, and the next open reads every event."""
    import mmap

    from eventstore.backends.sqlite import walcheck

    reader = sqlite3.connect(victim, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == EVENTS
    store = EventStore.open(victim, busy_timeout=30)  # (were the reader waited for, this would hang)
    try:
        store.session("victim").append("user/message", {"content": "while a reader reads"})
        with open(f"{victim}-wal", "rb") as f:
            header = walcheck._read_header(f)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                done = walcheck._transactions(m, *header[1:])
        assert len(done) >= 3 and all(pages == [1] for pages, _size, _p1 in done[:2])  # the marks, then the event
        assert wal_verdict(str(victim)) == (None, True)
    finally:
        reader.execute("COMMIT")
        reader.close()
        store.close()
    assert intact(victim, EVENTS + 1)


def test_paths_and_uris_are_spelled_as_pathlib_and_urllib_spell_them(tmp_path, monkeypatch):
    """The engine spells a database's absolute path and its read-only URI itself (not to
    import pathlib and urllib at start-up): the same text as they give, for every shape."""
    import itertools
    import random
    from pathlib import Path
    from urllib.parse import quote

    from eventstore.backends.sqlite import engine

    monkeypatch.chdir(tmp_path)
    parts = ["a", "..", ".", "", "~", "x y.db", "é", "//"]
    for k in range(1, 4):
        for combo in itertools.product(parts, repeat=k):
            for text in ("/".join(combo), "/" + "/".join(combo), "//" + "/".join(combo)):
                if text:
                    assert engine.database_url(text) == "sqlite:///" + str(Path(text).expanduser().absolute()), text
    rng = random.Random(5)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(10)))
        assert engine._quote(raw) == quote(raw), raw
