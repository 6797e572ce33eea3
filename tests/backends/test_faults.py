"""Faults, bounded: a foreign -wal is refused before it is used, a runaway query stops, the
durability level is the user's to choose, export is durable and says where the disk filled,
terminal output carries no raw control characters."""

from __future__ import annotations

import mmap
import os
import pty
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, TESTS, new_sqlite_store

from eventstore import DatabaseError, EventStore
from eventstore.audit.integrity import verify_database
from eventstore.backends.sqlite import walcheck
from eventstore.backends.sqlite.walcheck import WalMismatch, wal_mismatch
from eventstore.cli import cli
from eventstore.io import export

ROOT = TESTS.parent


def run(db: Path, *args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False, env=env)


def cli_process(db: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "eventstore", "--db", str(db), *args], env=env,
                          capture_output=True, **kw)


def count_events(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        conn.close()


# --- a -wal that belongs to another database ---------------------------------------------------

def live_wal_of_small_database(tmp_path: Path) -> bytes:
    """The -wal of a small eventstore database, copied while a writer still had it open."""
    small = tmp_path / "small.db"
    EventStore.open(small).close()
    conn = sqlite3.connect(small, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("INSERT INTO sessions (id, created_at) VALUES ('other', 1)")
    data = Path(str(small) + "-wal").read_bytes()
    conn.close()
    return data


def test_mispaired_wal_is_refused_before_anything_is_read_or_checkpointed(tmp_path):
    big = tmp_path / "big.db"
    with EventStore.open(big) as store:
        s = store.create_session("big")
        for _ in range(50):
            s.append_many([("user/message", {"content": "x" * 300})] * 100)
    assert count_events(big) == 5000
    wal = live_wal_of_small_database(tmp_path)
    Path(str(big) + "-wal").write_bytes(wal)  # a backup restored with cp beside another database's WAL
    before = big.read_bytes()
    assert wal_mismatch(str(big)) is not None
    with pytest.raises(WalMismatch, match=f"{big}-wal does not belong to {big}"):
        EventStore.open(big)
    r = cli_process(big, "import", str(DATA / "demo.jsonl"))
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"error: {big}-wal does not belong to {big}: its transaction 1 leaves")
    assert b"Traceback" not in r.stderr
    assert big.read_bytes() == before and Path(str(big) + "-wal").read_bytes() == wal  # nothing checkpointed
    r = run(big, "verify")
    assert r.exit_code == 1 and "does not belong to" in r.output
    # moved aside, the database is whole again
    os.rename(str(big) + "-wal", tmp_path / "foreign-wal")
    assert count_events(big) == 5000


def test_own_live_wal_and_one_left_by_vacuum_are_accepted(tmp_path):
    db = tmp_path / "own.db"
    with EventStore.open(db) as store:
        store.import_jsonl(DATA / "demo.jsonl")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("INSERT INTO sessions (id, created_at) VALUES ('y', 1)")
    assert wal_mismatch(str(db)) is None
    with EventStore.open(db) as store:
        assert len(store.sessions()) == 2
    conn.execute("VACUUM")  # the whole database in the WAL, smaller than the file
    assert wal_mismatch(str(db)) is None
    conn.close()


#: WAL frames the writer process writes between two checkpoints: a tenth of the store's own
#: (engine.CHECKPOINT_FRAMES), so that its WAL starts over every twenty-odd batches instead of
#: every two hundred-odd, and the tests below see as many generations for a tenth of the writing.
WRITER_CHECKPOINT_FRAMES = 100


def start_writer(db: Path, side: Path, batch: int = 20) -> subprocess.Popen:
    """A process appending batches of ``batch`` events to session "s" of ``db`` until killed,
    writing a line to ``side`` after each batch it got back (checkpointing every
    ``WRITER_CHECKPOINT_FRAMES`` frames)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    code = ("import sys, workers; from eventstore.backends.sqlite import engine; "
            "engine.CHECKPOINT_FRAMES = int(sys.argv[4]); "
            "workers.append_many_forever(sys.argv[1], 's', sys.argv[2], int(sys.argv[3]))")
    return subprocess.Popen([sys.executable, "-c", code, str(db), str(side), str(batch),
                             str(WRITER_CHECKPOINT_FRAMES)], env=env)


def lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def wal_header(db: Path) -> bytes:
    try:
        with open(str(db) + "-wal", "rb") as f:
            return f.read(32)
    except FileNotFoundError:
        return b""


def wal_commits(db: Path) -> int:
    """How many transactions the current generation of the database's WAL holds."""
    with open(str(db) + "-wal", "rb") as f:
        header = walcheck._read_header(f)
        if header is None or os.fstat(f.fileno()).st_size < 32 + 24 + header[1]:
            return 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return len(walcheck._transactions(m, *header[1:]))


def kill_writer_after(db: Path, side: Path, batches: int, resets: int = 0) -> None:
    """Run a writer until it acknowledged ``batches`` more batches, started its WAL over
    ``resets`` times and left transactions in it, then SIGKILL it mid-stream. The writer
    may start its WAL over between the last look and the kill, leaving it without a
    transaction: another writer then runs until one is there, and is killed in turn."""
    start = lines(side)
    first = wal_header(db)
    seen = set()

    def done():
        seen.add(wal_header(db))
        return (lines(side) >= start + batches and len(seen - {first, b""}) > resets
                and wal_commits(db) > 0)

    while True:
        p = start_writer(db, side)
        try:
            wait_for(done, f"{batches} batches and {resets} WAL resets")
        finally:
            p.kill()
            p.wait()
        assert p.returncode == -signal.SIGKILL
        if wal_commits(db) > 0:
            return


def own_pairs_open(db: Path, side: Path) -> None:
    assert wal_mismatch(str(db)) is None
    with EventStore.open(db) as store:
        assert sum(1 for _ in store.session("s").events()) >= lines(side) * 20
    assert verify_database(db).ok


@pytest.fixture
def live_db(tmp_path: Path) -> tuple[Path, Path]:
    db, side = tmp_path / "live.db", tmp_path / "acknowledged"
    with EventStore.open(db) as store:
        store.create_session("s")
    return db, side


def test_a_killed_writers_own_wal_is_always_accepted(live_db):
    db, side = live_db
    for batches, resets in ((1, 0), (10, 0), (30, 1), (60, 2)):
        kill_writer_after(db, side, batches, resets)
        assert os.path.getsize(str(db) + "-wal") > 32
        own_pairs_open(db, side)


def assert_refused_untouched(db: Path) -> None:
    wal = Path(str(db) + "-wal")
    before = db.read_bytes(), wal.read_bytes()
    why = wal_mismatch(str(db))
    assert why is not None
    with pytest.raises(WalMismatch, match=f"{db}-wal does not belong to {db}: "):
        EventStore.open(db)
    r = cli_process(db, "import", str(DATA / "demo.jsonl"))
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert r.stderr.decode().startswith(f"error: {db}-wal does not belong to {db}: {why}")
    assert (db.read_bytes(), wal.read_bytes()) == before  # nothing read through it, nothing checkpointed


def test_an_older_smaller_copy_restored_beside_a_live_wal_is_refused(live_db, tmp_path):
    db, side = live_db
    kill_writer_after(db, side, 20)
    # The file alone is whole once SQLite has checkpointed every commit into it (the killed
    # writer's own checkpoint may have been cut off halfway, which only its WAL mends).
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    conn.close()
    backup = tmp_path / "backup.db"
    shutil.copyfile(db, backup)  # cp of the database file alone, WAL and all left in place
    kill_writer_after(db, side, 30, 1)  # the WAL started over since: it belongs to a newer, larger file
    assert backup.stat().st_size < db.stat().st_size
    shutil.copyfile(backup, db)  # the backup restored with cp beside the live WAL
    assert_refused_untouched(db)
    os.rename(str(db) + "-wal", tmp_path / "aside-wal")
    os.remove(str(db) + "-shm")
    assert verify_database(db).ok  # the backup itself is whole


def test_a_newer_larger_copy_beside_an_older_wal_is_refused(live_db, tmp_path):
    db, side = live_db
    kill_writer_after(db, side, 20)
    old_wal = Path(str(db) + "-wal").read_bytes()
    kill_writer_after(db, side, 30, 1)
    Path(str(db) + "-wal").write_bytes(old_wal)
    assert_refused_untouched(db)


def test_empty_and_header_only_wals_are_accepted(live_db):
    db, side = live_db
    kill_writer_after(db, side, 5)
    wal = Path(str(db) + "-wal")
    for data in (wal.read_bytes()[:32], b""):  # a WAL with no frame; an empty one: SQLite ignores both
        wal.write_bytes(data)
        assert wal_mismatch(str(db)) is None
        with EventStore.open(db) as store:
            store.session("s").append("user/message", {"content": "after"})
        assert verify_database(db).ok


def test_the_check_never_refuses_a_live_database_whose_wal_starts_over(live_db):
    db, side = live_db
    p = start_writer(db, side, batch=50)
    try:
        headers, looks = set(), 0
        while len(headers) < 6:  # the writer's checkpoints started the WAL over five times meanwhile
            assert p.poll() is None
            headers.add(wal_header(db))
            assert wal_mismatch(str(db)) is None
            looks += 1
    finally:
        p.kill()
        p.wait()
    assert looks > 6
    own_pairs_open(db, side)


# --- sql: time and memory -----------------------------------------------------------------------

ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
# 200,000 strings of 2,000 characters joined: 400 MB. (Without the WHERE, SQLite's
# group_concat stops growing at the memory limit and the query runs on until --timeout.)
GREEDY = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200000) "
          "SELECT length(group_concat(hex(zeroblob(1000)))) FROM r")


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    db = new_sqlite_store(tmp_path / "events.db")
    with EventStore.open(db) as store:
        store.import_jsonl(DATA / "demo.jsonl")
    return db


def test_sql_stops_an_endless_query_after_its_timeout(demo_db):
    r = cli_process(demo_db, "sql", "--timeout", "0.5", ENDLESS, timeout=60)
    assert r.returncode == 1
    assert r.stderr.decode() == ("error: the query was stopped after --timeout 0.5 s (give a larger --timeout, "
                                 "or 0 for no limit)\n")


def test_sql_bounds_the_memory_of_a_query(demo_db):
    r = cli_process(demo_db, "sql", "--max-memory", "32", GREEDY, timeout=120)
    assert r.returncode == 1
    assert r.stderr.decode() == "error: the query was stopped: it needed more than --max-memory 32 MiB\n"


def test_sql_timeout_and_memory_limit_on_postgres(pg_store_url):
    pg_url = pg_store_url
    with EventStore.open(pg_url) as store:
        store.import_jsonl(DATA / "demo.jsonl")
    r = run(pg_url, "sql", "--timeout", "0.5", ENDLESS)
    assert r.exit_code == 1
    assert r.stderr == "error: the query was stopped after --timeout 0.5 s (give a larger --timeout, or 0 for no limit)\n"
    # PostgreSQL bounds memory per sort and hash (work_mem; past it they spill to disk): lowered, never raised
    r = run(pg_url, "sql", "--csv", "--max-memory", "1", "SELECT current_setting('work_mem') AS w")
    assert r.exit_code == 0 and r.stdout == "w\n1MB\n"
    r = run(pg_url, "sql", "--csv", "SELECT current_setting('work_mem') AS w")
    assert r.stdout == "w\n4MB\n"
    r = run(pg_url, "sql", "--json", "--timeout", "0", "SELECT count(*) AS n FROM events")
    assert r.exit_code == 0 and '"n": 15' in r.stdout


def test_sql_default_limits_leave_normal_queries_alone(demo_db):
    r = run(demo_db, "sql", "--json", "SELECT count(*) AS n FROM events")
    assert r.exit_code == 0 and '"n": 15' in r.stdout


# --- durability ---------------------------------------------------------------------------------

def test_durability_option_and_environment_reach_the_connection(demo_db, monkeypatch):
    seen = []
    real = EventStore.open

    def spy(*a, **kw):
        seen.append(kw.get("durability"))
        return real(*a, **kw)

    monkeypatch.setattr(EventStore, "open", spy)
    assert run(demo_db, "--durability", "full", "import", str(DATA / "parallel_tools.jsonl")).exit_code == 0
    assert run(demo_db, "repair", "a0c1e2f3-111", env={"EVENTSTORE_DURABILITY": "full"}).exit_code == 0
    assert run(demo_db, "init").exit_code == 0
    assert seen == ["full", "full", "normal"]
    r = run(demo_db, "--durability", "fast", "init")
    assert r.exit_code == 2


def test_full_durability_sets_synchronous_full(demo_db):
    with EventStore.open(demo_db, durability="full") as store:
        assert store._backend._conn.execute("PRAGMA synchronous").fetchone()[0] == 2


# --- export: fsync, a full disk ---------------------------------------------------------------------

def test_export_fsyncs_the_file_before_the_rename_and_the_folder_after(demo_db, tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"))
        return real_fsync(fd)

    def replace(a, b):
        calls.append(("rename",))
        return real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with EventStore.open(demo_db, readonly=True) as store:
        export.export_session(store, "5a1b896f-beb", tmp_path / "out.jsonl")
    assert calls == [("fsync", "file"), ("rename",), ("fsync", "dir")]


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 256 KiB tmpfs (needs root and mount); skipped where it cannot be mounted."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_export_all_on_a_full_disk_names_the_file_and_counts_what_it_wrote(tmp_path, small_disk):
    db = new_sqlite_store(tmp_path / "events.db")
    with EventStore.open(db) as store:
        for i in range(6):
            store.create_session(f"s{i}").append_many([("user/message", {"content": "y" * 1000})] * 60)
    r = run(db, "export", "--all", "--out", str(small_disk / "backup"))
    assert r.exit_code == 1
    message = r.stderr.strip()
    assert message.startswith(f"error: {small_disk / 'backup'}/s"), message
    assert "No space left on device; export stopped after writing " in message
    written = int(message.split("after writing ")[1].split(" of ")[0])
    assert 0 < written < 6 and message.endswith(f"of 6 file(s) to {small_disk / 'backup'}")
    assert len(list((small_disk / "backup").glob("*.jsonl"))) == written
    assert not list((small_disk / "backup").glob(".export-*"))  # no temporary file left


def test_export_to_a_full_device_names_it(demo_db):
    r = run(demo_db, "export", "5a1b896f-beb", "-o", "/dev/full")
    assert r.exit_code == 1 and r.stderr == "error: /dev/full: No space left on device\n"


def test_append_on_a_full_database_names_the_file_and_session(demo_db):
    with EventStore.open(demo_db) as store:
        pages = store._backend._conn.execute("PRAGMA page_count").fetchone()[0]
        store._backend._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
        s = store.session("5a1b896f-beb")
        with pytest.raises(DatabaseError, match=f"^{demo_db}: session '5a1b896f-beb': database or disk is full"):
            for _ in range(100):
                s.append("user/message", {"content": "z" * 5000})


def test_append_on_a_full_postgres_tablespace_names_the_database_and_session(pg_url, pg_server):
    """SQLSTATE 53100 (disk full) from the server, translated by the backend."""
    import tempfile

    mnt = Path(tempfile.mkdtemp(prefix="es-small-", dir="/tmp"))
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs",
                                                        str(mnt)], capture_output=True).returncode != 0:
        mnt.rmdir()
        pytest.skip("cannot mount a small tmpfs here")
    try:
        shutil.chown(mnt, "postgres", "postgres")
        with EventStore.open(pg_url) as store:
            s = store.create_session("s")
            with pg_server.connect(pg_url.rsplit("/", 1)[1]) as admin:
                admin.execute(f"CREATE TABLESPACE small LOCATION '{mnt}'")
                admin.execute("ALTER TABLE events SET TABLESPACE small")
            try:
                with pytest.raises(DatabaseError, match=r"^postgresql://postgres@.*: session 's': .*No space left on "
                                                         r"device.*nothing was written"):
                    for _ in range(1000):
                        s.append("user/message", {"content": os.urandom(4000).hex()})
            finally:
                with pg_server.connect(pg_url.rsplit("/", 1)[1]) as admin:
                    admin.execute("ALTER TABLE events SET TABLESPACE pg_default")
                    admin.execute("DROP TABLESPACE small")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
        mnt.rmdir()


# --- terminal output ---------------------------------------------------------------------------

def on_terminal(db: Path, *args: str) -> bytes:
    """What the CLI writes to a terminal (a pseudo-terminal as its stdout)."""
    main, sub = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), *args], stdout=sub,
                            stderr=subprocess.PIPE, env=env)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(main)
    assert proc.returncode == 0, proc.stderr.read()
    return out


def test_csv_on_a_terminal_shows_control_characters_as_escapes(demo_db):
    query = "SELECT char(27) || '[31mred' || char(7) || char(155) || char(8238) AS v"
    shown = on_terminal(demo_db, "sql", "--csv", query)
    assert b"\x1b" not in shown and b"\x07" not in shown and "\u202e".encode() not in shown
    assert b"\\x1b[31mred\\x07" in shown
    piped = cli_process(demo_db, "sql", "--csv", query).stdout  # into a file or pipe: the bytes as stored
    assert b"\x1b[31mred\x07" in piped


def test_sessions_table_on_a_terminal_escapes_ids(tmp_path):
    db = new_sqlite_store(tmp_path / "t.db")
    with EventStore.open(db) as store:
        store.create_session("\x1b]0;pwned\x07")
    shown = on_terminal(db, "sessions")
    assert b"\x1b" not in shown and b"\\x1b]0;pwned\\x07" in shown
