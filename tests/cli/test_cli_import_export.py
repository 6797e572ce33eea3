"""The ``import`` and ``export`` commands: summary, exit status, messages (no traceback),
salvage, re-import, stdin, usage errors, export folders, and the progress bar (a real
process on a pseudo-terminal; nothing when stderr is not a terminal)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, FIXTURES, importing_sessions, interrupt_mid_import

from eventstore import EventStore
from eventstore.cli import cli
from eventstore.io.bulk import BATCH_ROWS, CHUNK_ROWS
from eventstore.io.jsonl import file_name_for
from eventstore.log.codec import dumps
from eventstore.log.line import event_line

META = b'{"type":"session/meta","id":"s1"}'


def ev(seq: int, type_: str = "a", **payload) -> bytes:
    return event_line(type_, seq, 1764460800 + seq / 8, dumps(payload)).encode()


def lines(*parts: bytes, end: bytes = b"\n") -> bytes:
    return b"\n".join(parts) + end


def run(db: Path, *args: str, input: bytes | None = None):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)
    return result


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def test_import_folder_summary(db, tmp_path):
    r = run(db, "import", str(DATA))
    assert r.exit_code == 0, r.output
    total = sum((DATA / f"{n}.jsonl").read_bytes().count(b"\n") - 1 for n in FIXTURES)
    n = len(FIXTURES)
    assert r.stdout == f"files: {n}, sessions: {n} ({n} new, 0 appended), events: {total}, skipped: 0, failed: 0\n"
    assert r.stderr == ""


def test_failed_file_is_reported_others_land_and_exit_status_is_1(db, tmp_path):
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(lines(META, ev(0), ev(1)))
    bad = folder / "sub" / "b.jsonl"
    bad.write_bytes(lines(b'{"type":"session/meta","id":"s2"}', ev(0), ev(2)))
    (folder / "c.jsonl").write_bytes(lines(b'{"type":"session/meta","id":"s3"}', ev(0)))
    (folder / "notes.txt").write_text("not a log")
    r = run(db, "import", str(folder))
    assert r.exit_code == 1
    assert r.stderr == f"{bad}:3: 'seq' 2 is not the next one (1 expected: gap)\n"
    assert "Traceback" not in r.output
    assert r.stdout == "files: 3, sessions: 2 (2 new, 0 appended), events: 3, skipped: 0, failed: 1\n"
    with EventStore.open(db) as st:
        assert sorted(i.id for i in st.sessions()) == ["s1", "s3"]


def test_reimport_is_skipped_conflict_fails_append_continues(db, tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(lines(META, ev(0), ev(1)))
    assert run(db, "import", str(a)).exit_code == 0
    r = run(db, "import", str(a))
    assert r.exit_code == 0
    assert r.stderr == f'{a}: skipped: session "s1" is already stored (the stored session holds the same events)\n'
    assert r.stdout == "files: 1, sessions: 0 (0 new, 0 appended), events: 0, skipped: 1, failed: 0\n"
    longer = tmp_path / "longer.jsonl"
    longer.write_bytes(lines(META, ev(0), ev(1), ev(2)))
    r = run(db, "import", str(longer))
    assert r.exit_code == 1
    assert r.stderr == (f'{longer}:4: session "s1" is already stored with 2 events; this file continues it '
                        f'from seq 2 (use --append to add the rest)\n')
    r = run(db, "import", "--append", "-v", str(longer))
    assert r.exit_code == 0
    assert r.stderr == f'{longer}: appended session "s1": 1 event\n'
    assert r.stdout == "files: 1, sessions: 1 (0 new, 1 appended), events: 1, skipped: 0, failed: 0\n"
    other = tmp_path / "other.jsonl"
    other.write_bytes(lines(META, ev(0), ev(1, x=1)))
    r = run(db, "import", "--append", str(other))
    assert r.exit_code == 1
    assert r.stderr == f'{other}:3: session "s1" is already stored with other events: seq 1 differs (payload)\n'


def test_salvage_reports_what_was_dropped(db, tmp_path):
    f = tmp_path / "crash.jsonl"
    tail = b'{"type":"a","seq":2,"ts":17'
    f.write_bytes(lines(META, ev(0), ev(1), tail, end=b""))
    r = run(db, "import", str(f))
    assert r.exit_code == 1
    assert r.stderr == f"{f}:4: truncated last line (no newline at the end; invalid JSON: Expecting ',' delimiter " \
                       f"at column 28)\n"
    r = run(db, "import", "--salvage", str(f))
    assert r.exit_code == 0
    assert r.stderr == (f'{f}: salvaged 2 events of session "s1"; dropped line 4 (1 line, {len(tail)} bytes): '
                        f"{f}:4: truncated last line (no newline at the end; invalid JSON: Expecting ',' delimiter "
                        f"at column 28)\n")
    assert r.stdout == "files: 1, sessions: 1 (1 new, 0 appended), events: 2, skipped: 0, failed: 0, salvaged: 1\n"


def test_stdin_and_session_id(db, tmp_path):
    data = lines(ev(0), ev(1))
    r = run(db, "import", "--session-id", "piped", "-", input=data)
    assert r.exit_code == 0, r.output
    assert r.stdout == "files: 1, sessions: 1 (1 new, 0 appended), events: 2, skipped: 0, failed: 0\n"
    r = run(db, "import", "-", input=data)
    assert r.exit_code == 1
    assert r.stderr == "-:1: event before any session/meta line (no session id; give one with --session-id)\n"
    r = run(db, "export", "piped")
    assert r.stdout_bytes == lines(b'{"type":"session/meta","id":"piped"}', ev(0), ev(1))


def test_usage_errors(db, tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(lines(META, ev(0)))
    for args, message in [
        (["import", "--session-id", "x", str(a), str(a)], "--session-id goes with exactly one file (2 given)"),
        (["import", "-", "-"], "- (stdin) can be read only once"),
        (["export"], "give one SESSION_ID"),
        (["export", "a", "b"], "give one SESSION_ID (for several, or --all, use --out DIR)"),
        (["export", "--all"], "--all needs --out DIR"),
        (["export", "--all", "x", "--out", str(tmp_path / "o")], "give SESSION_IDs or --all, not both"),
        (["export", "--out", str(tmp_path / "o")], "with --out DIR, give SESSION_IDs or --all"),
        (["export", "x", "-o", "f", "--out", str(tmp_path / "o")], "-o FILE is for one session"),
        # an empty destination (an unset shell variable) wrote to stdout, or into the current folder
        (["export", "x", "-o", ""], "'-o' / '--output': it is empty; give a path, or - for stdout"),
        (["export", "--all", "--out", ""], "'--out': it is empty; give a path"),
        # a file name ending in a slash is the same mistake as -o naming a folder: a usage error too
        (["export", "x", "-o", str(tmp_path)], "is a directory"),
        (["export", "x", "-o", str(tmp_path / "missing") + "/"], "ends in a slash: a folder, not a file"),
    ]:
        r = run(db, *args)
        assert r.exit_code == 2, (args, r.output)
        assert message in r.stderr, (args, r.stderr)


def test_export_one_all_and_selected(db, tmp_path):
    assert run(db, "import", str(DATA)).exit_code == 0
    r = run(db, "export", "5a1b896f-beb")
    assert r.exit_code == 0 and r.stdout_bytes == (DATA / "demo.jsonl").read_bytes()
    out = tmp_path / "one.jsonl"
    r = run(db, "export", "num-0001", "-o", str(out))
    n = (DATA / "numbers.jsonl").read_bytes().count(b"\n") - 1
    assert r.exit_code == 0 and r.stderr == f"{out}: {n} events\n"
    assert out.read_bytes() == (DATA / "numbers.jsonl").read_bytes()
    r = run(db, "export", "--all", "--out", str(tmp_path / "all"))
    assert r.exit_code == 0
    with EventStore.open(db) as st:
        ids = [i.id for i in st.sessions()]
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted(file_name_for(i) for i in ids)
    for name in FIXTURES:
        data = (DATA / f"{name}.jsonl").read_bytes()
        sid = json.loads(data.split(b"\n")[0])["id"]
        assert (tmp_path / "all" / file_name_for(sid)).read_bytes() == data
    r = run(db, "export", "--out", str(tmp_path / "sel"), "big-0001", "num-0001")
    assert r.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "sel").iterdir()) == ["big-0001.jsonl", "num-0001.jsonl"]
    r = run(db, "export", "nope")
    assert r.exit_code == 1 and r.stderr == "error: session 'nope' not found\n"


def test_export_hostile_id_through_the_cli(db, tmp_path):
    with EventStore.open(db) as st:
        st.create_session("../../evil").append("x", {}, ts=1.0)
    out = tmp_path / "deep" / "out"
    r = run(db, "export", "--out", str(out), "../../evil")
    assert r.exit_code == 0
    assert [p.name for p in out.iterdir()] == ["%2E%2E%2F%2E%2E%2Fevil.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("cli.db")) == ["deep"]


# --- real processes: exit status, no progress without a terminal, a bar on one ---------------

def cli_process(db: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    return subprocess.Popen([sys.executable, "-m", "eventstore.cli", "--db", str(db), *args], env=env, **kw)


def big_folder(tmp_path: Path, files: int = 2, events: int = BATCH_ROWS + 1000) -> Path:
    """Files of more than one batch each (the bar advances a batch at a time)."""
    folder = tmp_path / "big"
    folder.mkdir()
    for i in range(files):
        meta = f'{{"type":"session/meta","id":"big-{i}"}}'.encode()
        (folder / f"{i}.jsonl").write_bytes(lines(meta, *(ev(s, "assistant/chunk", delta={"content": "tok"})
                                                          for s in range(events))))
    return folder


def test_no_progress_output_when_stderr_is_not_a_terminal(db, tmp_path):
    folder = big_folder(tmp_path)
    p = cli_process(db, "import", str(folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0
    assert err == b""
    assert out == b"files: 2, sessions: 2 (2 new, 0 appended), events: 12000, skipped: 0, failed: 0\n"


def test_progress_bar_on_a_terminal(db, tmp_path):
    pty = pytest.importorskip("pty")
    folder = big_folder(tmp_path)
    master, slave = pty.openpty()
    p = cli_process(db, "import", str(folder), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the pty closes when the process ends
            break
        if not chunk:
            break
        seen += chunk
    out = p.stdout.read()
    assert p.wait(timeout=60) == 0
    os.close(master)
    assert b"files" in seen and b"events" in seen and b"import" in seen
    assert out == b"files: 2, sessions: 2 (2 new, 0 appended), events: 12000, skipped: 0, failed: 0\n"


def test_a_missing_path_or_an_unreadable_folder_fails_and_the_rest_still_lands(db, tmp_path, monkeypatch):
    """A folder import must not skip a subfolder it cannot read and call that success (a
    backup job would import nothing and exit 0)."""
    import errno
    import os

    good = tmp_path / "good"
    good.mkdir()
    (good / "a.jsonl").write_bytes(lines(META, ev(0)))
    locked = good / "locked"
    locked.mkdir()
    (locked / "b.jsonl").write_bytes(lines(b'{"type":"session/meta","id":"b"}', ev(0)))
    real_scandir = os.scandir

    def scandir(path="."):  # the tests run as root, whom chmod 000 does not stop
        if os.fspath(path) == str(locked):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = run(db, "import", str(good), str(tmp_path / "missing.jsonl"))
    assert r.exit_code == 1, r.output
    assert f"{locked}: cannot read this folder: Permission denied" in r.stderr
    assert f"{tmp_path / 'missing.jsonl'}: no such file or folder" in r.stderr
    assert "files: 1, sessions: 1 (1 new, 0 appended), events: 1, skipped: 0, failed: 2" in r.stdout


def test_a_path_that_cannot_be_a_file_says_why(db, tmp_path):
    """A name too long, or a 'folder' that is a file, said 'no such file or folder' (a
    newcomer helper): the system's reason is the one to read."""
    (tmp_path / "afile").write_text("x")
    long_name = str(tmp_path / ("a" * 300 + ".jsonl"))
    r = run(db, "import", long_name, str(tmp_path / "afile" / "x.jsonl"), str(tmp_path / "none.jsonl"))
    assert r.exit_code == 1, r.output
    assert f"{long_name}: File name too long" in r.stderr
    assert f"{tmp_path / 'afile' / 'x.jsonl'}: Not a directory" in r.stderr
    assert f"{tmp_path / 'none.jsonl'}: no such file or folder" in r.stderr
    assert "files: 0, sessions: 0 (0 new, 0 appended), events: 0, skipped: 0, failed: 3" in r.stdout


def test_exported_files_get_the_usual_mode_not_0600(db, tmp_path):
    import os
    import stat

    assert run(db, "import", str(DATA)).exit_code == 0
    old = os.umask(0o022)
    try:
        assert run(db, "export", "5a1b896f-beb", "-o", str(tmp_path / "one.jsonl")).exit_code == 0
        assert run(db, "export", "--all", "--out", str(tmp_path / "all")).exit_code == 0
        kept = tmp_path / "kept.jsonl"
        kept.write_bytes(b"")
        kept.chmod(0o640)
        assert run(db, "export", "5a1b896f-beb", "-o", str(kept)).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "one.jsonl").stat().st_mode) == 0o644
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "all").iterdir()} == {0o644}
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640  # an existing file keeps its mode


def test_export_dash_is_stdout(db, tmp_path, monkeypatch):
    run(db, "import", str(DATA / "parallel_tools.jsonl"))
    sid = json.loads(run(db, "sessions", "--json").stdout)[0]["id"]
    monkeypatch.chdir(tmp_path)
    r = run(db, "export", sid, "-o", "-")
    assert r.exit_code == 0 and r.stdout.startswith('{"type":"session/meta"')
    assert not (tmp_path / "-").exists()


def test_export_errors_name_the_file_asked_for(db, tmp_path):
    """Not the temporary file written beside it; and that file is gone."""
    store = EventStore.open(db)
    store.create_session("s").append("x", {})
    target = tmp_path / "taken"
    target.mkdir()
    from eventstore.io.export import export_session

    with pytest.raises(OSError) as info:
        export_session(store, "s", target)
    assert info.value.filename == str(target)
    assert not list(tmp_path.glob(".export-*"))
    store.close()


def test_sessions_table_escapes_control_characters_in_ids(db):
    store = EventStore.open(db)
    store.create_session("two\nlines\x00\u202e")
    store.close()
    r = run(db, "sessions")
    assert r.exit_code == 0
    assert "two\\nlines\\x00\\u202e" in r.stdout and "\x00" not in r.stdout


def test_import_reports_a_broken_symlink_in_a_folder(db, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes((DATA / "parallel_tools.jsonl").read_bytes())
    (folder / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    r = run(db, "import", str(folder))
    assert r.exit_code == 1
    assert f"{folder / 'gone.jsonl'}: a symbolic link to nothing" in r.stderr
    assert "sessions: 1 (1 new" in r.stderr or "sessions: 1 (1 new" in r.stdout


def test_sql_takes_one_output_format(db):
    EventStore.open(db).close()
    r = run(db, "sql", "--json", "--csv", "SELECT 1")
    assert r.exit_code == 2 and "give --json or --csv, not both" in r.output


def test_sessions_lists_a_ts_that_is_no_date(db):
    """A ts given in milliseconds by mistake (year 57883) is shown as a number, not a traceback."""
    store = EventStore.open(db)
    store.create_session("ms").append("x", {}, ts=1764460800401)
    store.create_session("far").append("x", {}, ts=1e308)
    store.close()
    r = run(db, "sessions")
    assert r.exit_code == 0, r.output
    assert "ts 1764460800401.0 (not a date)" in r.stdout and "ts 1e+308 (not a date)" in r.stdout


def test_ctrl_c_during_a_folder_import_names_the_file_and_running_again_completes_it(tmp_path):
    """A real SIGINT while a long file of a folder goes in chunks: the one line names that
    file and says that the same command completes it, which it does."""
    folder = tmp_path / "many"
    folder.mkdir()
    # each file in four transactions (CHUNK_ROWS): three chunks' time with the second file's
    # import unfinished for the signal to land in; a third file not begun
    events = 4 * CHUNK_ROWS
    for k in range(3):
        with open(folder / f"b{k}.jsonl", "wb") as f:
            f.write(b'{"type":"session/meta","id":"s%d"}\n' % k)
            f.writelines(ev(i, "user/message", content="x" * 50) + b"\n" for i in range(events))
    db = tmp_path / "c.db"
    argv = ["--db", str(db), "import", str(folder)]
    proc, out, err = interrupt_mid_import(argv, db, "s0")
    [sid] = importing_sessions(db)
    name = f"{folder}/b{sid[1:]}.jsonl"
    assert (proc.returncode, out) == (1, "")
    assert err == f"error: interrupted while importing {name}: running the same command again completes it\n"
    again = run(db, "import", str(folder))
    assert again.exit_code == 0, again.stderr
    assert f"{name}: completed an unfinished import that had stored " in again.stderr
    assert importing_sessions(db) == []
    with EventStore.open(db, readonly=True) as st:
        assert [(i.id, i.events) for i in st.sessions()] == [(f"s{k}", events) for k in range(3)]
