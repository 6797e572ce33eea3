"""The command line, through click's CliRunner, with exact output."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.cli import cli
from eventstore.schema import SCHEMA_REVISION


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVENTSTORE_DB", raising=False)
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def filled(tmp_path):
    db = new_sqlite_store(tmp_path / "f.db")  # (a copy of the migrated template, as in every test below)
    with EventStore.open(db) as st:
        s = st.create_session("s-1")
        s.append_many([("turn/start", {"agent": "a"}, 1764460800.0),
                       ("user/message", {"content": "1+1?"}, 1764460800.5),
                       ("assistant/chunk", {"delta": {"content": "2"}}, 1764460801.0),
                       ("assistant/message", {"content": "2", "tool_calls": []}, 1764460801.25),
                       ("turn/end", {}, 1764460802.0)])
    return str(db)


def test_default_database_is_in_the_current_folder(run, tmp_path):
    result = run("init")
    assert result.exit_code == 0
    assert result.output == f"eventstore.db: ready (schema revision {SCHEMA_REVISION})\n"
    assert (tmp_path / "eventstore.db").is_file()


def test_database_from_the_environment(run, tmp_path, monkeypatch):
    monkeypatch.setenv("EVENTSTORE_DB", str(tmp_path / "env.db"))
    assert run("init").exit_code == 0
    assert (tmp_path / "env.db").is_file()


def test_events_prints_jsonl(run, filled):
    result = run("--db", filled, "events", "s-1")
    assert result.output == (
        '{"type":"turn/start","seq":0,"ts":1764460800,"agent":"a"}\n'
        '{"type":"user/message","seq":1,"ts":1764460800.5,"content":"1+1?"}\n'
        '{"type":"assistant/chunk","seq":2,"ts":1764460801,"delta":{"content":"2"}}\n'
        '{"type":"assistant/message","seq":3,"ts":1764460801.25,"content":"2","tool_calls":[]}\n'
        '{"type":"turn/end","seq":4,"ts":1764460802}\n')
    result = run("--db", filled, "events", "s-1", "--type", "user/message", "--type", "turn/end", "--after", "1")
    assert result.output == '{"type":"turn/end","seq":4,"ts":1764460802}\n'


def test_messages_prints_the_projection(run, filled):
    result = run("--db", filled, "messages", "s-1")
    assert result.output == '[{"role":"user","content":"1+1?"},{"role":"assistant","content":"2"}]\n'
    pretty = run("--db", filled, "messages", "s-1", "--pretty")
    assert json.loads(pretty.output) == json.loads(result.output)
    assert pretty.output.startswith('[\n  {\n    "role": "user"')


def test_sessions_table_and_json(run, filled):
    result = run("--db", filled, "sessions")
    lines = result.output.splitlines()
    assert re.match(r"SESSION\s+EVENTS\s+CREATED \(UTC\)\s+LAST EVENT \(UTC\)", lines[0])
    assert re.match(r"s-1\s+5\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+2025-11-30 00:00:02", lines[1])
    data = json.loads(run("--db", filled, "sessions", "--json").output)
    assert [(d["id"], d["events"], d["last_ts"]) for d in data] == [("s-1", 5, 1764460802.0)]
    run("init")
    assert run("sessions").output == "no sessions\n"


@pytest.mark.parametrize("command", [["sessions"], ["events", "x"], ["messages", "x"], ["export", "x"], ["tail"],
                                     ["sql", "SELECT 1"], ["search", "x"], ["checkpoint"]])
def test_read_commands_never_create_a_database(run, tmp_path, command):
    result = run("--db", "typo.db", *command)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no database at ") and "typo.db" in result.stderr
    assert not (tmp_path / "typo.db").exists()


def test_a_database_the_user_may_only_read(filled, tmp_path):
    """Auditors often get a copy they cannot write: reads work, nothing is created beside it."""
    import os
    import shutil
    import subprocess
    import sys

    import eventstore

    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(filled, folder / "f.db")
    before = (folder / "f.db").read_bytes()
    with EventStore.open(folder / "f.db", readonly=True) as st:
        assert [m["role"] for m in st.session("s-1").derive_messages()] == ["user", "assistant"]
        with pytest.raises(eventstore.DatabaseError, match="read-only"):
            st.session("s-1").append("x", {})
    assert (folder / "f.db").read_bytes() == before
    # SQLite's own WAL reader files may appear in a writable folder; eventstore's lock file not
    assert {p.name for p in folder.iterdir()} <= {"f.db", "f.db-wal", "f.db-shm"}
    for extra in ("f.db-wal", "f.db-shm"):
        (folder / extra).unlink(missing_ok=True)
    (folder / "f.db").chmod(0o444)
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root ignores permissions: run the CLI as nobody
        def demote():
            os.setgid(65534)
            os.setuid(65534)
        try:
            usable = subprocess.run([sys.executable, "-c", "import eventstore"], capture_output=True,
                                    preexec_fn=demote).returncode == 0
        except PermissionError:
            usable = False
        if not usable:
            pytest.skip("this interpreter or checkout is not readable by an unprivileged user")
    else:
        demote = None
    for args in (["sessions", "--json"], ["messages", "s-1"], ["export", "s-1"]):
        proc = subprocess.run([sys.executable, "-m", "eventstore.cli", "--db", str(folder / "f.db"), *args],
                              capture_output=True, preexec_fn=demote)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["f.db"]
    proc = subprocess.run([sys.executable, "-m", "eventstore.cli", "--db", str(folder / "f.db"), "import", "-",
                           "--session-id", "x"], input=b'{"type":"a","seq":0,"ts":1}\n', capture_output=True,
                          preexec_fn=demote)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr


def test_export_one_and_all(run, filled, tmp_path):
    one = run("--db", filled, "export", "s-1")
    assert one.output.splitlines()[0] == '{"type":"session/meta","id":"s-1"}'
    assert len(one.output.splitlines()) == 6
    result = run("--db", filled, "export", "s-1", "-o", "one.jsonl")
    assert result.exit_code == 0 and (tmp_path / "one.jsonl").read_text() == one.output
    result = run("--db", filled, "export", "--all", "--out", "dump")
    assert result.exit_code == 0
    assert (tmp_path / "dump" / "s-1.jsonl").read_text() == one.output


def test_import_reports_each_file_and_a_summary(run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"session/meta","id":"b"}\n{"type":"x","seq":1,"ts":1}\n')
    result = run("import", str(DATA / "demo.jsonl"), str(bad))
    assert result.exit_code == 1
    assert result.stdout == "files: 2, sessions: 1 (1 new, 0 appended), events: 15, skipped: 0, failed: 1\n"
    assert result.stderr == f"{bad}:2: 'seq' must start at 0, found 1\n"
    assert "b" not in [s.id for s in EventStore.open(tmp_path / "eventstore.db").sessions()]


def test_import_from_stdin_with_a_session_id(run):
    result = run("import", "-", "--session-id", "piped", input=b'{"type":"user/message","seq":0,"ts":1,"content":"x"}\n')
    assert result.exit_code == 0, result.output
    assert run("messages", "piped").output == '[{"role":"user","content":"x"}]\n'


@pytest.mark.parametrize("args, message", [
    (["--db", "f.db", "export", "nope"], "error: session 'nope' not found\n"),
    (["--db", "f.db", "messages", "nope"], "error: session 'nope' not found\n"),
    (["--db", "f.db", "events", "nope"], "error: session 'nope' not found\n"),
    (["--db", "/no/such/folder/x.db", "init"], "error: cannot open database /no/such/folder/x.db: folder /no/such/folder does not exist\n"),
    # an empty --db (an unset variable) or a folder said "no database at <the folder>"
    (["--db", "", "sessions"], "error: the database path is empty: give a file or a postgresql:// URL\n"),
    (["--db", "", "init"], "error: the database path is empty: give a file or a postgresql:// URL\n"),
    (["--db", ":memory:", "demo"], "error: :memory: is an in-memory database, which lasts only as long as one "
                                   "command: give a file or a postgresql:// URL\n"),
    (["--db", "sqlite://", "sessions"], "error: sqlite:// is an in-memory database, which lasts only as long as "
                                        "one command: give a file or a postgresql:// URL\n"),
    (["--db", ":memory:", "verify"], "error: :memory: is an in-memory database, which lasts only as long as one "
                                     "command: give a file or a postgresql:// URL\n"),
    (["copy", "f.db", ":memory:"], "error: :memory: is an in-memory database, which lasts only as long as one "
                                   "command: give a file or a postgresql:// URL\n"),
    (["--db", "/", "sessions"], "error: cannot open database /: it is a folder, not a database file\n"),
    (["--db", "/tmp", "init"], "error: cannot open database /tmp: it is a folder, not a database file\n"),
])
def test_errors_are_one_line_without_traceback(run, args, message):
    run("--db", "f.db", "init")
    result = run(*args)
    assert result.exit_code == 1
    assert result.stderr == message


def test_a_file_that_is_not_a_database(run, tmp_path):
    (tmp_path / "junk.db").write_bytes(b"junk" * 1000)
    result = run("--db", "junk.db", "sessions")
    assert result.exit_code == 1
    assert result.stderr == "error: cannot open junk.db: file is not a database\n"


@pytest.mark.parametrize("args", [["export"], ["export", "s", "--all"], ["import"], ["frobnicate"]])
def test_usage_errors_exit_2(run, args):
    result = run(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_demo_runs_a_real_tool_call(run, tmp_path, monkeypatch):
    from eventstore import demo

    monkeypatch.setattr(demo, "THINK_S", 0)  # its model's pace (two seconds of sleep) is not what this tests
    monkeypatch.setattr(demo, "CHUNK_S", 0)
    result = run("demo")
    assert result.exit_code == 0, result.output
    out = result.output
    sid = re.match(r"Session (\S+) in eventstore.db\n", out).group(1)
    log = [json.loads(line) for line in out.split("Event log (JSONL, as exported):\n")[1].split("\n\n")[0].splitlines()]
    assert [e["seq"] for e in log] == list(range(len(log)))
    assert [e["type"] for e in log][:3] == ["turn/start", "user/message", "step/start"]
    assert log[-1]["type"] == "turn/end"
    result_event = next(e for e in log if e["type"] == "tool/result")
    assert result_event["content"] == "2"  # the shell really ran expr 1 + 1
    messages = json.loads(out.split("Derived messages (the projection sent to the model):\n")[1].split("\n\nNext:")[0])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "run_bash"
    assert "tool_calls" not in messages[3]
    # what the demo printed is what the store holds
    assert run("messages", sid).output == json.dumps(messages, ensure_ascii=False, separators=(",", ":")) + "\n"


def _run_module(args, env_extra=None, **kw):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "eventstore.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# events whose output (some 300 kB) is several times what a pipe holds (64 KiB): the
# process is still writing when its reader goes away
CLOSED_PIPE_EVENTS = 5000


def test_a_closed_pipe_ends_quietly(tmp_path):
    with EventStore.open(new_sqlite_store(tmp_path / "p.db")) as st:
        st.create_session("s").append_many([("x", {"i": i}) for i in range(CLOSED_PIPE_EVENTS)])
    proc = _run_module(["--db", str(tmp_path / "p.db"), "events", "s"])
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    proc.wait(timeout=60)
    assert first.startswith(b'{"type":"x","seq":0')
    assert proc.stderr.read() == b""


def test_a_non_utf8_locale_gets_no_traceback(tmp_path):
    with EventStore.open(new_sqlite_store(tmp_path / "l.db")) as st:
        st.create_session("ü-session").append("user/message", {"content": "é"})
    locale = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}
    results = {}
    for args in (["sessions"], ["export", "ü-nope"], ["messages", "ü-session"]):
        proc = _run_module(["--db", str(tmp_path / "l.db"), *args], locale)
        out, err = proc.communicate(timeout=60)
        results[args[0]] = (proc.returncode, out, err)
    assert [r[0] for r in results.values()] == [0, 1, 0]
    assert all(b"Traceback" not in r[2] for r in results.values())
    assert b"-session" in results["sessions"][1]
    assert results["export"][2].startswith(b"error: session '") and results["export"][2].endswith(b"-nope' not found\n")
    assert results["messages"][1] == '[{"role":"user","content":"é"}]\n'.encode()


def test_verify_reports_a_foreign_database_as_findings_and_leaves_it_unchanged(run, tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "theirs.db")
    conn.execute("CREATE TABLE events (x)")
    conn.close()
    before = (tmp_path / "theirs.db").read_bytes()
    result = run("--db", "theirs.db", "verify")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "database: storage: theirs.db is not an eventstore database" in result.stdout
    assert "database: schema: table events differs" in result.stdout
    assert (tmp_path / "theirs.db").read_bytes() == before


@pytest.mark.parametrize("command", [["repair", "x"]])
def test_audit_commands_refuse_a_foreign_database_in_one_line(run, tmp_path, command):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "theirs.db")
    conn.execute("CREATE TABLE events (x)")
    conn.close()
    before = (tmp_path / "theirs.db").read_bytes()
    result = run("--db", "theirs.db", *command)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "not an eventstore database" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert (tmp_path / "theirs.db").read_bytes() == before


def test_sql_table_of_a_short_result(run, tmp_path):
    """The table as it has been laid out (by rich): columns two spaces apart, each as wide as
    its widest cell in terminal cells (漢字 takes 4), NULL as NULL, control characters as
    escapes, a multi-line value on lines of its own, a BLOB as hex; the count on stderr."""
    new_sqlite_store(tmp_path / "t.db")
    query = ("SELECT 1 AS n, 'a' AS t, NULL AS z, 1.5 AS f, x'00ff' AS b, 'two' || char(10) || 'lines' AS m, "
             "'' AS e, 'é' AS w "
             "UNION ALL SELECT 12345, 'longer text', 'x', -0.25, x'', 'a', 'xx', char(27) || '[31m' "
             "UNION ALL SELECT NULL, char(9) || 'tab', '  lead', 1e400, NULL, 'end' || char(10), NULL, '漢字'")
    r = run("--db", "t.db", "sql", query)
    assert r.exit_code == 0
    assert r.stdout.split("\n") == [
        'n      t            z       f      b     m      e     w       ',
        '1      a            NULL    1.5    00ff  two          é       ',
        '                                         lines                ',
        '12345  longer text  x       -0.25        a      xx    \\x1b[31m',
        'NULL   \\ttab          lead  inf    NULL  end    NULL  漢字    ',
        '                                                              ',
        '']
    assert r.stderr == "(3 rows)\n"
    r = run("--db", "t.db", "sql", "SELECT printf('%.310c', 'y') AS a, 'b' AS \"multi\nline\", 1 AS c")
    assert r.stdout.split("\n") == [f"{'':<311}  multi   ", f"{'a':<311}  line   c", f"{'y' * 300}… (10 more)  b      1", ""]
    assert r.stderr == "(1 row; 1 long value cut, see --json or --csv)\n"


def test_sql_table_of_a_long_result_keeps_the_first_rows_widths(run, tmp_path):
    """Past the first 1,000 rows the widths are fixed: a wider value widens its own line
    only; NULLs, cut values and the count go on as before."""
    new_sqlite_store(tmp_path / "t.db")
    r = run("--db", "t.db", "sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1500) "
                                   "SELECT x, CASE x WHEN 1400 THEN 'wider than the rest' WHEN 1200 THEN NULL "
                                   "WHEN 1300 THEN printf('%.400c', 'y') ELSE 'w' END AS t, 'z' AS z FROM c")
    assert r.exit_code == 0
    lines = r.stdout.split("\n")
    assert lines[0] == "x     t  z" and lines[1] == "1     w  z" and lines[1000] == "1000  w  z"
    assert lines[1001] == "1001  w  z" and lines[1500] == "1500  w  z" and lines[1501] == ""
    assert lines[1200] == "1200  NULL  z" and lines[1400] == "1400  wider than the rest  z"
    assert lines[1300] == f"1300  {'y' * 300}… (100 more)  z"
    assert len(lines) == 1502
    assert r.stderr == "(1500 rows; 1 long value cut, see --json or --csv)\n"


# Runs argv[2:], exits with its status and writes its peak RSS (KiB) to the file argv[1].
_PEAK_RSS = ("import resource, subprocess, sys; status = subprocess.call(sys.argv[2:]); "
             "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
             "sys.exit(status)")


def test_sql_table_of_a_large_store_streams_in_bounded_memory(tmp_path):
    """SELECT * FROM events on 20,000 events: the table needs no more memory than on 1,000
    of them (laid out whole, it needed some 8 kB a row), and writes every row aligned."""
    import subprocess
    import sys

    db = new_sqlite_store(tmp_path / "big.db")
    with EventStore.open(db) as st:
        for s in range(10):
            session = st.create_session(f"sess-{s:04d}")
            for b in range(2):
                session.append_many([("user/message", {"content": f"message {b * 1000 + i}: " + "lorem ipsum " * 10})
                                     for i in range(1000)])

    def peak_mib(query: str) -> tuple[float, str, str]:
        """The peak RSS (MiB), stdout and stderr of ``eventstore sql QUERY``. Started from a
        small Python (whose RUSAGE_CHILDREN it reports): a child's ru_maxrss counts the
        memory of the process that forked it, and this one's is large."""
        with open(tmp_path / "out", "w+b") as out, open(tmp_path / "err", "w+b") as err:
            subprocess.run([sys.executable, "-c", _PEAK_RSS, str(tmp_path / "rss"), sys.executable, "-m",
                            "eventstore", "--db", str(db), "sql", query], stdout=out, stderr=err, check=True)
            out.seek(0)
            err.seek(0)
            return int((tmp_path / "rss").read_text()) / 1024, out.read().decode(), err.read().decode()

    small, _out, err = peak_mib("SELECT * FROM events ORDER BY position LIMIT 1000")
    assert err == "(1000 rows)\n"
    large, out, err = peak_mib("SELECT * FROM events ORDER BY position")
    assert err == "(20000 rows)\n"
    assert large < small + 20, (small, large)
    lines = out.splitlines()
    assert len(lines) == 20001 and lines[0].split() == ["position", "session_id", "seq", "type", "ts", "payload",
                                                         "hash", "event_id", "salt"]
    start = lines[1].index("sess-0000")
    assert start == lines[0].index("session_id")
    assert lines[20000].index("sess-0009") == start and lines[20000].split()[2] == "1999"


def _on_a_terminal(args: list[str], env_extra: dict[str, str]) -> tuple[str, bytes]:
    """Run ``python -m eventstore ARGS`` with stdout on a pseudo-terminal 60 columns wide:
    what it wrote there (line ends as \n) and its stderr."""
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", *args], stdout=follower, stderr=subprocess.PIPE,
                            env={**env, "COLUMNS": "60", "LINES": "25", "TERM": "xterm", **env_extra})
    os.close(follower)
    got = bytearray()
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        got += data
    os.close(leader)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    return got.decode().replace("\r\n", "\n"), err


def test_sql_table_on_a_terminal(tmp_path):
    """On a terminal, a short result is fitted to the window by rich (bold header, dim NULL);
    a long one is streamed with the same styles (none with NO_COLOR) and is not fitted."""
    db = new_sqlite_store(tmp_path / "t.db")
    words = " ".join(["word"] * 30)
    out, err = _on_a_terminal(["--db", str(db), "sql", f"SELECT '{words}' AS a, NULL AS b"], {})
    assert err == b"(1 row)\n"
    assert "\x1b[1m" in out and "\x1b[2mNULL" in out
    plain = re.sub("\x1b\\[[0-9;]*m", "", out).splitlines()
    assert len(plain) > 3 and max(map(len, plain)) <= 60 and "".join(plain).count("word") == 30
    query = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1001) "
             "SELECT x, CASE x WHEN 1001 THEN printf('%.100c', 'y') END AS t FROM c")
    out, err = _on_a_terminal(["--db", str(db), "sql", query], {})
    assert err == b"(1001 rows)\n"
    lines = out.split("\n")
    assert lines[0] == "\x1b[1mx     t   \x1b[0m" and lines[1] == "1     \x1b[2mNULL\x1b[0m"
    assert lines[1001] == "1001  " + "y" * 100 and lines[1002] == ""
    out, err = _on_a_terminal(["--db", str(db), "sql", query], {"NO_COLOR": "1"})
    assert out.split("\n")[:2] == ["x     t   ", "1     NULL"]


def test_search_table_on_a_terminal(tmp_path):
    """``search`` goes through the shared table renderer: on a terminal the header is bold,
    each match bold and reversed, the snippet folded to the window (80 columns); with
    NO_COLOR the same layout without styles."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as st:
        st.create_session("s1").append("user/message", {"content": "alpha beta " * 3 + "wombat " + "gamma " * 9})
    out, _err = _on_a_terminal(["--db", str(db), "search", "wombat"], {"COLUMNS": "80"})
    lines = out.rstrip("\n").split("\n")
    assert lines[0] == "\x1b[1mSESSION  SEQ  TYPE          SNIPPET\x1b[0m"
    assert "\x1b[1;7mwombat\x1b[0m" in lines[1] and len(lines) > 2
    plain = re.sub("\x1b\\[[0-9;]*m", "", out).splitlines()
    assert max(map(len, plain)) <= 80 and plain[1].startswith("s1         0  user/message  ")
    out, _err = _on_a_terminal(["--db", str(db), "search", "wombat"], {"COLUMNS": "80", "NO_COLOR": "1"})
    assert out.splitlines() == plain


def test_fold_keeps_lines_within_the_room_and_marks_on_each_line():
    from eventstore.cli.table import fold, print_table

    marks = ("<", ">")
    assert fold("the <quick brown fox> jumps", 10, marks).split("\n") == ["the <quick>", "<brown fox>", "jumps"]
    assert fold("字字字字字 ab", 4) == "字字\n字字\n字\nab"  # cells, not characters
    assert fold("aaaaaaa b", 3) == "aaa\naaa\na b"
    out = io.BytesIO()
    assert print_table(out, ["A", "B"], [["x", "one <two> three"]], marks=marks, width=12, strip=True) == 1
    assert out.getvalue().decode() == "A  B\nx  one two\n   three\n"


@pytest.mark.parametrize("fmt", [["--json"], ["--csv"], []])
def test_sql_into_a_closed_pipe_ends_quietly(tmp_path, fmt):
    with EventStore.open(new_sqlite_store(tmp_path / "q.db")) as st:
        st.create_session("s").append_many([("x", {"i": i}) for i in range(CLOSED_PIPE_EVENTS)])
    proc = _run_module(["--db", str(tmp_path / "q.db"), "sql", "SELECT * FROM events", *fmt])
    proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=60)
    assert b"Traceback" not in proc.stderr.read()


def test_ctrl_c_stops_an_endless_sql_query(tmp_path):
    """SQLite runs a statement without returning to Python: without the read-only
    connection's progress handler a SIGINT waits for the query to end, and this one never
    does. A real process, a real SIGINT while SQLite runs the statement (the process has
    the file open and has spent CPU time since): one line on stderr, status 1."""
    import signal
    import time

    db = new_sqlite_store(tmp_path / "q.db")
    proc = _run_module(["--db", str(db), "sql",
                        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"],
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def cpu_seconds() -> float:  # utime + stime of /proc/PID/stat, in clock ticks
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    deadline = time.monotonic() + 60
    fds = Path(f"/proc/{proc.pid}/fd")
    while not any(str(db) == os.path.realpath(f) for f in fds.iterdir()):  # opened: the query comes next
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    opened = cpu_seconds()
    while cpu_seconds() < opened + 0.3:  # inside the statement
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (1, b"", b"error: interrupted (Ctrl-C): the query was stopped\n")


_CTRL_C_WHILE_IMPORTING = """
import sys

class CtrlC:  # a Ctrl-C that lands while the command's modules are still being imported
    def find_spec(self, name, path=None, target=None):
        if name == "eventstore.cli.group":
            raise KeyboardInterrupt

sys.meta_path.insert(0, CtrlC())
sys.argv[0] = "eventstore"
from eventstore.cli import main
main()
"""


def test_ctrl_c_while_the_command_starts_is_one_line_not_a_traceback(tmp_path):
    """A Ctrl-C in the first tenths of a second lands while click and the commands are
    imported, before any command reports it: it printed a KeyboardInterrupt traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_IMPORTING, "--db", str(tmp_path / "a.db"), "init"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "error: interrupted\n")
    assert not (tmp_path / "a.db").exists()


def test_an_unforeseen_error_is_one_line_not_a_traceback(run, filled, monkeypatch):
    """Whatever goes wrong inside a command (here a bug planted in the store), the user gets
    one line and status 1; EVENTSTORE_DEBUG=1 lets the traceback through for a report."""
    def broken(self):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(EventStore, "sessions", broken)
    result = run("--db", filled, "sessions")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == ("error: unexpected ZeroDivisionError: planted (EVENTSTORE_DEBUG=1 shows the "
                             "traceback; please report it)\n")
    monkeypatch.setenv("EVENTSTORE_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run("--db", filled, "sessions")
    monkeypatch.delenv("EVENTSTORE_DEBUG")
    assert run("--db", filled, "--help").exit_code == 0  # click's own exits pass through
    assert run("--db", filled, "nosuchcommand").exit_code == 2


def test_verify_escapes_control_and_bidi_characters_from_the_log(run, tmp_path):
    """A session id or tool name holding U+202E (right-to-left override) or ESC would reorder
    or restyle the terminal's line: verify shows them escaped, as tail does (found by a
    newcomer helper)."""
    db = str(new_sqlite_store(tmp_path / "v.db"))
    sid = "s\u202eX\x1b[31m"
    with EventStore.open(db) as st:
        st.create_session(sid).append_many([("user/message", {"content": "hi"}, 1.0),
                                            ("tool/result", {"tool_call_id": "c\u202e", "content": "x"}, 2.0)])
    result = run("--db", db, "verify", "--head")
    assert result.exit_code == 1
    out = result.stdout + result.stderr
    assert "s\\u202eX\\x1b[31m" in out
    assert "\u202e" not in out and "\x1b" not in out


_MODULES_AFTER_A_COMMAND = """
import sys
sys.argv = ["eventstore", "--db", sys.argv[1], sys.argv[2]]
from eventstore.__main__ import main  # what the installed `eventstore` script runs
try:
    main()
except SystemExit:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & {"sqlalchemy", "alembic"}), file=sys.stderr)
"""


def test_a_command_on_a_current_database_imports_neither_sqlalchemy_nor_alembic(tmp_path):
    """Start-up is the cheap version check only; migrating (a new file) loads Alembic."""
    import subprocess
    import sys

    db = str(tmp_path / "s.db")
    first = subprocess.run([sys.executable, "-c", _MODULES_AFTER_A_COMMAND, db, "init"], capture_output=True, text=True,
                           timeout=60)
    assert first.stderr.splitlines()[-1] == "['alembic', 'sqlalchemy']"  # created and migrated
    again = subprocess.run([sys.executable, "-c", _MODULES_AFTER_A_COMMAND, db, "sessions"], capture_output=True, text=True,
                           timeout=60)
    assert again.stderr.splitlines()[-1] == "[]"


def test_python_dash_m_eventstore_is_the_command():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "eventstore", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "eventstore, version 0.1.0\n")


def test_a_bad_value_from_the_environment_names_the_variable(run, filled, monkeypatch):
    """$EVENTSTORE_DURABILITY=xx is reported as the variable, not as an option nobody gave;
    a bad --durability on the command line still names the option."""
    monkeypatch.setenv("EVENTSTORE_DURABILITY", "xx")
    result = run("--db", filled, "sessions")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == ("Error: Invalid value for $EVENTSTORE_DURABILITY: 'xx' is not one of "
                                              "'normal', 'full', 'may-lose-recent'.")
    result = run("--db", filled, "--durability", "yy", "sessions")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "Error: Invalid value for '--durability': 'yy' is not one of 'normal', 'full', 'may-lose-recent'."
    monkeypatch.setenv("EVENTSTORE_DURABILITY", "full")
    assert run("--db", filled, "sessions").exit_code == 0


def test_durability_is_read_in_any_case(run, filled, monkeypatch):
    """FULL, Full and full are one value, on the command line and in the environment."""
    import eventstore.cli as cli_module

    seen = []
    real_open = cli_module.EventStore.open

    def recording_open(*args, **kwargs):
        seen.append(kwargs.get("durability"))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(cli_module.EventStore, "open", recording_open)
    assert run("--db", filled, "--durability", "FULL", "sessions").exit_code == 0
    monkeypatch.setenv("EVENTSTORE_DURABILITY", "Normal")
    assert run("--db", filled, "sessions").exit_code == 0
    assert seen == ["full", "normal"]


@pytest.mark.parametrize("backend_url", ["sqlite", "postgres"], indirect=True)
def test_sql_refuses_to_print_a_value_past_its_memory_limit(backend_url):
    """--max-memory bounds what printing a row takes too: a value over its share (1/8) is
    refused before it is printed, on both backends (PostgreSQL's rows come from a cursor).
    (A process of its own: SQLite's heap limit, which --max-memory sets, is the process's.)"""
    import subprocess
    import sys

    EventStore.open(backend_url).close()
    query = "SELECT repeat('x', 20000000) AS v" if backend_url.startswith("postgres") else \
        "SELECT hex(zeroblob(10000000)) AS v"
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}

    def sql(q):
        return subprocess.run([sys.executable, "-m", "eventstore", "--db", backend_url, "sql", q, "--csv",
                               "--max-memory", "100"], capture_output=True, text=True, env=env, timeout=120)
    r = sql(query)
    assert r.returncode == 1 and "--max-memory 100 MiB" in r.stderr, r.stderr
    assert len(r.stdout) < 1000
    r = sql(query.replace("0000000", "00000"))
    assert r.returncode == 0 and len(r.stdout) > 200000, r.stderr[-300:]
