"""The CLI with inputs that are no regular file, and with odd bytes on the command line.

``import`` of a pipe (``<(command)``, a FIFO): format detection must not consume what the
import then reads, and nothing may open the pipe twice. Queries, ids and file names that are
not UTF-8 (argv bytes Python holds as surrogate escapes). A query that opens with an SQL comment.
The imports run as real processes, so that a hang fails the test instead of stopping it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.cli import cli
from eventstore.io.bulk import BATCH_ROWS
from eventstore.io.transcripts.importer import Watcher

TRANSCRIPTS = TESTS / "transcripts_data"
SOURCES = {  # a file of each format import detects
    "eventstore": DATA / "demo.jsonl",
    "claude-code": TRANSCRIPTS / "claude-code" / "v2.1-main.jsonl",
    "codex": TRANSCRIPTS / "codex" / "rollout-0.40-shell.jsonl",
}
TIMEOUT = 60


def cli_run(*args: str | bytes, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventstore.cli", *args], capture_output=True,
                          timeout=TIMEOUT, **kw)


def contents(db: Path) -> dict[str, list[tuple]]:
    """Every stored session's events (meta aside: a transcript's names its source file)."""
    with EventStore.open(db, readonly=True) as s:
        return {i.id: [(e.seq, e.type, e.ts, e.payload) for e in s.session(i.id).events()] for i in s.sessions()}


def import_through_fd_pipe(db: Path, data: bytes, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """``eventstore import <(cat FILE)``: the process gets the read end of a pipe as
    /dev/fd/N while a thread writes ``data`` into it. Returns the result and the path."""
    r, w = os.pipe()

    def write() -> None:
        try:
            _write_all(w, data)
        except BrokenPipeError:
            pass
        finally:
            os.close(w)

    writer = threading.Thread(target=write, daemon=True)
    path = f"/dev/fd/{r}"
    try:
        proc = subprocess.Popen([sys.executable, "-m", "eventstore.cli", "--db", str(db), "import", *args, path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(r,))
    finally:
        os.close(r)
    writer.start()
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    writer.join(TIMEOUT)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Fifo:
    """A named pipe with a writer process (``cat FILE > FIFO``) waiting for its reader."""

    def __init__(self, folder: Path, data: bytes, name: str = "pipe") -> None:
        self.path = folder / name
        os.mkfifo(self.path)
        src = folder / f"{name}.src"
        src.write_bytes(data)
        self.writer = subprocess.Popen(["sh", "-c", 'cat "$1" > "$2"', "sh", str(src), str(self.path)])

    def reader_came(self) -> bool:
        """Whether the writer got its reader and finished (it stays blocked in open() until then)."""
        try:
            self.writer.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return False
        return self.writer.returncode == 0

    def close(self) -> None:
        self.writer.kill()
        self.writer.wait()


@pytest.fixture
def fifo(tmp_path):
    made: list[Fifo] = []

    def make(data: bytes, name: str = "pipe") -> Fifo:
        made.append(Fifo(tmp_path, data, name))
        return made[-1]

    yield make
    for f in made:
        f.close()


def reference(tmp_path: Path, fmt: str) -> dict[str, list[tuple]]:
    """What importing the regular file stores (the same command, run in this process: the
    pipe is what runs as a real process; once per format)."""
    if fmt not in _REFERENCES:
        db = tmp_path / f"ref-{fmt}.db"
        r = CliRunner().invoke(cli, ["--db", str(db), "import", str(SOURCES[fmt])])
        assert r.exit_code == 0, r.output
        _REFERENCES[fmt] = contents(db)
    return _REFERENCES[fmt]


_REFERENCES: dict[str, dict[str, list[tuple]]] = {}


@pytest.mark.parametrize("fmt", list(SOURCES))
@pytest.mark.parametrize("given", [False, True], ids=["detected", "format-given"])
def test_import_from_a_pipe_of_each_format(tmp_path, fmt, given):
    args = ["--format", fmt] if given else []
    db = new_sqlite_store(tmp_path / "pipe.db")
    r, path = import_through_fd_pipe(db, SOURCES[fmt].read_bytes(), "-v", *args)
    assert r.returncode == 0, r.stderr
    assert b"1 new" in r.stdout and path.encode() in r.stderr
    want = reference(tmp_path, fmt)
    assert contents(db) == want and want


@pytest.mark.parametrize("fmt", list(SOURCES))
def test_import_from_a_named_fifo_of_each_format(tmp_path, fifo, fmt):
    db = new_sqlite_store(tmp_path / "fifo.db")
    f = fifo(SOURCES[fmt].read_bytes())
    r = cli_run("--db", str(db), "import", str(f.path))
    assert r.returncode == 0, r.stderr
    assert f.reader_came()
    assert contents(db) == reference(tmp_path, fmt)


def metas(db: Path) -> dict[str, dict]:
    conn = sqlite3.connect(db)
    try:
        return {sid: json.loads(meta) for sid, meta in conn.execute("SELECT id, meta FROM sessions")}
    finally:
        conn.close()


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_transcript_from_a_pipe_or_stdin_records_no_source_file(tmp_path, fmt):
    """A pipe's name (/dev/fd/63, -) is no file anyone can open again; the file's own name is kept."""
    r, _path = import_through_fd_pipe(new_sqlite_store(tmp_path / "pipe.db"), SOURCES[fmt].read_bytes())
    assert r.returncode == 0, r.stderr
    r = cli_run("--db", str(new_sqlite_store(tmp_path / "stdin.db")), "import", "-", input=SOURCES[fmt].read_bytes())
    assert r.returncode == 0, r.stderr
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "file.db"), "import", str(SOURCES[fmt])])
    assert r.exit_code == 0, r.output
    from_file = metas(tmp_path / "file.db")
    assert {m["source_file"] for m in from_file.values()} == {str(SOURCES[fmt])}
    without = {sid: {k: v for k, v in m.items() if k != "source_file"} for sid, m in from_file.items()}
    assert metas(tmp_path / "pipe.db") == metas(tmp_path / "stdin.db") == without


def test_a_rollout_without_session_meta_takes_its_id_from_its_name_and_a_pipe_has_none(tmp_path):
    lines = SOURCES["codex"].read_bytes().splitlines(keepends=True)
    assert b'"session_meta"' in lines[0]
    named = tmp_path / "rollout-2025-09-22T08-10-04-01996e2a-4b7c-7d10-8e3f-2a9b5c6d7e99.jsonl"
    named.write_bytes(b"".join(lines[1:]))
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "file.db"), "import", "--format", "codex", str(named)])
    assert r.exit_code == 0, r.output  # (a regular file: in this process; the pipe below is a real one)
    assert list(metas(tmp_path / "file.db")) == ["01996e2a-4b7c-7d10-8e3f-2a9b5c6d7e99"]
    r, path = import_through_fd_pipe(tmp_path / "pipe.db", named.read_bytes(), "--format", "codex")
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"{path}: no session_meta line names the session, and a pipe has no file "
                                        f"name to take it from"), r.stderr
    assert contents(tmp_path / "pipe.db") == {}


def test_import_from_a_fifo_with_format_given(tmp_path, fifo):
    db = new_sqlite_store(tmp_path / "fifo.db")
    f = fifo(SOURCES["codex"].read_bytes())
    r = cli_run("--db", str(db), "import", "--format", "codex", str(f.path))
    assert r.returncode == 0, r.stderr
    assert contents(db) == reference(tmp_path, "codex")


def big_session(events: int, bad_at: int | None = None) -> bytes:
    """An eventstore file of ``events`` events (megabytes: many reads and batches), with an
    invalid line in place of event ``bad_at``."""
    out = [b'{"type":"session/meta","id":"big"}']
    for seq in range(events):
        out.append(b"{not json" if seq == bad_at else
                   b'{"type":"a","seq":%d,"ts":1764460800.5,"text":"%s"}' % (seq, b"x" * 200))
    return b"\n".join(out) + b"\n"


def test_a_bad_line_deep_in_a_pipe_stores_nothing_and_names_the_line(tmp_path):
    db = new_sqlite_store(tmp_path / "pipe.db")
    n = 2 * BATCH_ROWS + 2000  # past two whole batches (three megabytes through the pipe) before the bad line
    r, path = import_through_fd_pipe(db, big_session(n, bad_at=n - 10))
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"{path}:{n - 8}: invalid JSON")  # the meta line is line 1
    assert contents(db) == {}
    r, _ = import_through_fd_pipe(db, big_session(n))
    assert r.returncode == 0, r.stderr
    assert len(contents(db)["big"]) == n


def test_a_bad_transcript_line_in_a_pipe_stores_nothing_and_names_the_line(tmp_path):
    good = SOURCES["codex"].read_bytes().split(b"\n")
    data = b"\n".join([*good[:5], b"{not json", *good[5:]])
    db = new_sqlite_store(tmp_path / "pipe.db")
    r, path = import_through_fd_pipe(db, data)
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"{path}:6: ")
    assert contents(db) == {}


@pytest.mark.parametrize("data, reason", [
    (b"", "the file is empty"),
    (b"\n\n  \n", "the file holds only blank lines"),
    (b"\n\xff{}\n", ":2: invalid UTF-8 at byte 1 of the line"),
    (b'{"hello": 1}\n', ": not in a known format"),
])
def test_a_pipe_without_a_format_says_why(tmp_path, fifo, data, reason):
    f = fifo(data)
    r = cli_run("--db", str(tmp_path / "x.db"), "import", str(f.path))
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"{f.path}{'' if reason.startswith(':') else ': '}{reason}")


def test_stdin_is_detected_too(tmp_path):
    """- was always read as eventstore JSONL: a transcript on stdin failed, --format was ignored."""
    db = new_sqlite_store(tmp_path / "stdin.db")
    r = cli_run("--db", str(db), "import", "-", input=SOURCES["codex"].read_bytes())
    assert r.returncode == 0, r.stderr
    assert contents(db) == reference(tmp_path, "codex")
    r = cli_run("--db", str(db), "import", "--format", "codex", "-", input=SOURCES["eventstore"].read_bytes())
    assert r.returncode == 1
    assert r.stderr == b"-: this is an eventstore file, not codex: give --format eventstore, or leave --format out\n"


def test_watch_refuses_a_pipe_before_opening_it(tmp_path, fifo):
    f = fifo(SOURCES["eventstore"].read_bytes())
    r = cli_run("--db", str(tmp_path / "w.db"), "import", "--watch", "--interval", "0.05", str(f.path))
    assert r.returncode == 2
    assert (f"Error: --watch reads files again as they grow; {f.path} is not a regular file (a pipe or a "
            "device), which can be read only once: import it without --watch").encode() in r.stderr
    assert f.writer.poll() is None  # never opened: its writer still waits for a reader


def test_the_watcher_never_finds_a_pipe_due(tmp_path):
    os.mkfifo(tmp_path / "p")
    (tmp_path / "f.jsonl").write_bytes(b"")
    assert list(Watcher().due([str(tmp_path / "p"), str(tmp_path / "f.jsonl")])) == [str(tmp_path / "f.jsonl")]


def test_the_same_pipe_twice_is_a_usage_error(tmp_path, fifo):
    f = fifo(SOURCES["eventstore"].read_bytes())
    r = cli_run("--db", str(tmp_path / "x.db"), "import", str(f.path), str(f.path))
    assert r.returncode == 2
    assert f"Error: {f.path} is not a regular file (a pipe or a device) and can be read only once; it is given " \
           f"twice\n".encode() in r.stderr
    assert f.writer.poll() is None


# --- bytes that are not UTF-8 on the command line ------------------------------------------

def test_a_query_that_is_not_utf8_is_a_clear_error(backend_url):
    EventStore.open(backend_url).close()
    r = CliRunner().invoke(cli, ["--db", backend_url, "sql", "-"], input=b"SELECT '\xff'")
    assert (r.exit_code, r.stderr) == (1, "error: -: the query is not UTF-8 text (byte 0xFF at byte 9)\n")


@pytest.mark.parametrize(("args", "name", "what"), [
    (["sql", "SELECT '\udcff'"], "QUERY", "byte 0xFF at character 9"),
    (["sql", "SELECT 'é\udce2\udc82'"], "QUERY", "byte 0xE2 at character 10"),
    (["search", "\udcff"], "QUERY", "byte 0xFF at character 1"),
    (["search", "x", "--type", "a\udcff"], "--type", "byte 0xFF at character 2"),
    (["search", "x", "--session", "\udcff"], "--session", "byte 0xFF at character 1"),
    (["events", "\udce9"], "SESSION_ID", "byte 0xE9 at character 1"),
    (["events", "s", "--type", "\udcff"], "--type", "byte 0xFF at character 1"),
    (["messages", "\ud83d"], "SESSION_ID", "U+D83D at character 1"),
    (["tail", "\udcff"], "[SESSION_ID]", "byte 0xFF at character 1"),
    (["verify", "\udcff"], "[SESSION_ID...]", "byte 0xFF at character 1"),
    (["import", "--session-id", "\udcff", "x.jsonl"], "--session-id", "byte 0xFF at character 1"),
    (["roles", "--writer", "w\udcff"], "--writer", "byte 0xFF at character 2"),
    (["serve", "--host", "\udcff"], "--host", "byte 0xFF at character 1"),
])
def test_a_word_that_is_not_utf8_is_a_usage_error_that_names_it(tmp_path, args, name, what):
    """Text on the command line (queries, ids, types, role names) must be UTF-8: bytes that
    are not arrive as surrogate escapes, which no backend can store or send. File names
    need not be (see below)."""
    db = tmp_path / "x.db"
    r = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.endswith(f"Error: Invalid value for '{name}': not UTF-8 text ({what})\n"), r.stderr
    assert not db.exists()


def test_a_file_name_that_is_not_utf8_works_end_to_end(tmp_path, monkeypatch):
    """The names arrive as argv bytes in real processes (sessions, copy, sql; the bare
    ``sessions`` runs without click there). The demo session is written in this process,
    through the name as Python's argv would hold it (surrogate escapes: os.fsdecode), and
    verify runs here too: its argv is no different from the others'."""
    from eventstore import demo

    monkeypatch.setattr(demo, "THINK_S", 0)  # the demo's model pace (two seconds of sleep) is not the point
    monkeypatch.setattr(demo, "CHUNK_S", 0)
    folder = os.fsencode(tmp_path)
    src, dst = folder + b"/src\xff.db", folder + b"/dst\xfe.db"
    with EventStore.open(os.fsdecode(src)) as st:
        demo.run_demo(st)
    assert os.path.exists(src)
    r = cli_run(b"--db", src, b"sessions", b"--json")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.split(b'"id": "')[1].split(b'"')[0]
    r = cli_run(b"copy", src, dst)
    assert r.returncode == 0, r.stderr
    assert b"1 copied" in r.stderr
    for db in (src, dst):
        r = cli_run(b"--db", db, b"sessions")
        assert r.returncode == 0 and sid in r.stdout, r.stderr
        r = CliRunner().invoke(cli, ["--db", os.fsdecode(db), "verify"])
        assert r.exit_code == 0, r.output
    r = cli_run(b"--db", dst, b"sql", b"SELECT count(*) AS n FROM sessions", b"--json")
    assert r.stdout == b'[\n{"n": 1}\n]\n', r.stderr


# --- a query that opens with a comment ----------------------------------------------------

def test_a_query_may_open_with_an_sql_comment(tmp_path):
    db = str(tmp_path / "q.db")
    EventStore.open(db).close()
    query = "-- how many\nSELECT 1 AS a"
    for args in (["sql", query], ["sql", "--json", query], ["sql", query, "--json"],
                 ["sql", "--timeout", "5", "-- a=b\nSELECT 1 AS a", "--json"]):
        r = CliRunner().invoke(cli, ["--db", db, *args])
        assert r.exit_code == 0, (args, r.output)
        assert r.stdout == ('[\n{"a": 1}\n]\n' if "--json" in args else "a\n1\n"), args
    r = CliRunner().invoke(cli, ["--db", db, "sql", "--jsn", "SELECT 1"])
    assert r.exit_code == 2
    assert "No such option '--jsn'. (Did you mean one of: '--csv', '--json'?)" in r.stderr
