"""The registry of transcript formats, and what the command line imports to start.

A new format is one module and its registration: detection, the importer and ``eventstore
import --format`` find it there. ``eventstore --help`` lists the commands without importing
them, and ``sessions`` imports neither the bulk importer nor the audit modules.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.cli import COMMANDS, cli
from eventstore.io import transcripts
from eventstore.io.transcripts.detect import detect_file
from eventstore.io.transcripts.importer import convert_file

ROOT = TESTS.parent

# One file: a toy agent's transcript, {"toy": "say", "text": ...} per line, as one session.
TOY_FORMAT = '''
from eventstore.io.transcripts import TranscriptFormat, register
from eventstore.io.transcripts.common import Converted


def looks_like(line):
    return "toy" in line and "text" in line


def convert(lines, path, stream=False):
    events = [("user/message", {"content": d["text"], "event_id": f"L{n}"}, 1700000000.0 + n) for n, d in lines]
    return [Converted("toy-" + str(len(lines)), {"source": "toy"}, events)]


register(TranscriptFormat("toy", looks_like, convert))
'''


@pytest.fixture
def toy_format(tmp_path, monkeypatch):
    """The toy format's module written to a file and registered by importing it."""
    (tmp_path / "toy_format.py").write_text(TOY_FORMAT)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("toy_format")
    yield "toy"
    transcripts.unregister("toy")
    sys.modules.pop("toy_format", None)


def toy_file(folder: Path) -> Path:
    path = folder / "toy.jsonl"
    path.write_text("".join(json.dumps({"toy": "say", "text": t}) + "\n" for t in ("hello", "again")))
    return path


def test_a_registered_format_is_detected_converted_imported_and_offered(toy_format, tmp_path):
    path = toy_file(tmp_path)
    assert "toy" in transcripts.names()
    assert detect_file(str(path)) == "toy"
    sessions, dropped, waiting = convert_file(str(path), "toy")
    assert [s.session_id for s in sessions] == ["toy-2"] and not dropped and not waiting

    db = tmp_path / "t.db"
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "import", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("files: 1, sessions: 1 (1 new, 0 appended), events: 2")
    with EventStore.open(db, readonly=True) as store:
        assert [e.payload["content"] for e in store.session("toy-2").events()] == ["hello", "again"]

    result = runner.invoke(cli, ["--db", str(db), "import", "--format", "toy", str(path)])
    assert result.exit_code == 0, result.output  # an accepted choice; the session is stored already
    assert "skipped: 1" in result.output.splitlines()[-1]
    result = runner.invoke(cli, ["import", "--help"])
    assert "[claude-code|codex|eventstore|toy]" in result.output


def test_a_format_taken_out_is_no_longer_known(toy_format, tmp_path):
    path = toy_file(tmp_path)
    transcripts.unregister("toy")
    assert "toy" not in transcripts.names()
    assert detect_file(str(path)) is None
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "t.db"), "import", "--format", "toy", str(path)])
    assert result.exit_code == 2 and "'toy' is not one of 'claude-code', 'codex', 'eventstore'" in result.output


def test_the_built_in_formats_are_registered():
    assert transcripts.names() == ["claude-code", "codex", "eventstore"]
    assert transcripts.get("eventstore").convert is None  # the store's own JSONL: eventstore.io.bulk
    with pytest.raises(ValueError, match="no JSONL format 'nope'"):
        transcripts.get("nope")


@pytest.mark.parametrize("width", [40, 80, 200, 10_000])
def test_the_help_list_matches_each_command(width):
    """--help lists the commands from a static table: each entry names its command's
    function and shows what the command's own docstring would."""
    assert sorted(COMMANDS) == sorted(cli.list_commands(click.Context(cli)))
    for name, (where, short) in COMMANDS.items():
        module, attr = where.split(":")
        command = getattr(importlib.import_module(f"eventstore.cli.{module}"), attr)
        assert command.name == name or (name, command.name) in {("import", "import"), ("copy", "copy")}
        assert click.Command(name, help=short).get_short_help_str(width) == command.get_short_help_str(width), name


def modules_loaded(*args: str, db: Path | None = None) -> set[str]:
    code = ("import sys; from eventstore.cli import main; sys.argv = ['eventstore', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('MODULES', *sorted(m for m in sys.modules if m.startswith(('eventstore', 'click', 'sqlalchemy', "
            "'alembic', 'rich'))), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *(["--db", str(db)] if db else []), *args],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(line.split()[1:])


def test_help_imports_no_command(tmp_path):
    loaded = modules_loaded("--help")
    assert not {m for m in loaded if m.startswith("eventstore.cli.") and m not in ("eventstore.cli.base",)}
    assert "eventstore.core.store" not in loaded and "eventstore.io.bulk" not in loaded
    assert "eventstore.cli.group" not in loaded and "click" not in loaded  # the help text is written without click


def help_output(args: list[str], columns: str | None) -> str:
    """What ``eventstore ARGS`` prints to a pipe, with $COLUMNS set to ``columns`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(ROOT)}
    if columns is not None:
        env["COLUMNS"] = columns
    proc = subprocess.run([sys.executable, "-m", "eventstore", *args], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("columns", [None, "80", "200", "79", "60", "0", "x"])
def test_help_written_without_click_is_clicks_own(columns):
    """``--help`` and ``-h`` alone are written without importing click at click's usual
    width: the text is exactly what click writes (given a global option, click writes it),
    and a narrower window gets click's own narrower layout."""
    by_click = help_output(["--db", "x.db", "--help"], columns)
    assert "Commands:" in by_click and "  sessions    List stored sessions" in by_click
    again = "a global option changed? eventstore.cli.HELP_HEAD holds click's text of them"
    assert help_output(["--help"], columns) == by_click, again
    assert help_output(["-h"], columns) == by_click, again


def help_on_terminal(args: list[str], columns: int) -> bytes:
    """What ``eventstore ARGS`` writes to a terminal ``columns`` wide ($COLUMNS unset)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "eventstore", *args], stdout=slave, stderr=subprocess.PIPE,
                                env=env)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # (EIO: the terminal's last writer has gone)
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=60) == 0 and proc.stderr.read() == b""
        proc.stderr.close()
        return out
    finally:
        os.close(master)


@pytest.mark.parametrize("columns", [120, 80, 79, 60])
def test_help_on_a_terminal_is_clicks_own(columns):
    """On a terminal, the window's width decides as it does for click: 80 columns or more get
    the text written without click, a narrower one click's own layout; the same text either way."""
    by_click = help_on_terminal(["--db", "x.db", "--help"], columns)
    assert b"Commands:" in by_click
    assert help_on_terminal(["--help"], columns) == by_click


@pytest.mark.parametrize("args", [["--help"], ["--db", "x.db", "--help"]])
def test_help_to_a_closed_pipe_is_quiet(args):
    """A reader gone before ``--help`` is written: status 1 and nothing on stderr, with click or
    without it."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "eventstore", *args], stdout=w, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    finally:
        os.close(w)
    assert (proc.returncode, proc.stderr) == (1, b"")


def test_help_to_a_full_disk_is_one_line():
    """Written without click, ``--help`` to a full device says so in one line, status 1."""
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "eventstore", "--help"], stdout=full, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert (proc.returncode, proc.stderr) == (1, b"error: writing the help: No space left on device\n")


def test_short_help_is_clicks():
    """The command list's lines are cut as click cuts a command's help, at every width."""
    import random

    from eventstore.cli import short_help

    rng = random.Random(7)
    words = ["a", "bb", "ccc.", "Dd", "e-f", "g" * 45, "vs.", "x.", "Y", "\b"]
    texts = [short for _where, short in COMMANDS.values()]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 20))) for _ in range(500)]
    texts += ["First.\n\nSecond paragraph.", "\b\nkept as is", ""]
    for text in texts:
        for limit in (0, 2, 3, 5, 10, 30, 45, 62, 80):
            assert short_help(text, limit) == click.Command("x", help=text).get_short_help_str(limit), (text, limit)


# What `eventstore sessions` on an up-to-date SQLite store never imports: click (the table is
# written without it, as --help is), the other commands, what only a migration, a progress
# bar or PostgreSQL needs, and the modules (of eventstore and of Python) that only writing,
# reading payloads, searching, importing or verifying needs.
SESSIONS_NEVER_IMPORTS = frozenset({
    "click", "rich", "sqlalchemy", "alembic", "psycopg",
    "eventstore.cli.group", "eventstore.cli.reading", "eventstore.cli.importing", "eventstore.cli.auditing",
    "eventstore.io.bulk", "eventstore.io.jsonl", "eventstore.io.parse_worker", "eventstore.io.transcripts",
    "eventstore.audit.verify", "eventstore.web", "eventstore.log.toolcalls", "eventstore.log.commit",
    "eventstore.log.redaction", "eventstore.log.gcpause", "eventstore.audit.secrets",
    "eventstore.backends.postgres", "eventstore.backends.fallbacks", "eventstore.log.context",
    "eventstore.backends.sqlite.checkpoint", "eventstore.backends.sqlite.follower",  # (a writer's, a follower's,
    "eventstore.backends.sqlite.importer", "eventstore.backends.sqlite.importlock",  # an importer's)
    "eventstore.backends.sqlite.writelock", "fcntl",
    "importlib", "warnings", "orjson", "dataclasses", "inspect", "ast", "tokenize", "typing", "hashlib", "uuid",
    "pathlib", "urllib.parse", "secrets", "random", "queue", "unicodedata", "textwrap", "threading", "weakref",
    "re", "enum",  # (each pattern is compiled at its first use: eventstore.lazy)
})


def all_modules_loaded(*args: str) -> set[str]:
    """Every module in ``sys.modules`` after ``eventstore ARGS`` ran (as the console script,
    output to a pipe, no $COLUMNS), less those the interpreter had loaded before (site's, and
    an editable install's finder)."""
    code = ("import sys; before = set(sys.modules)\n"
            "from eventstore.cli import main; sys.argv = ['eventstore', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('MODULES', *sorted(set(sys.modules) - before), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set([x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1].split()[1:])


def test_sessions_imports_only_what_it_needs(tmp_path):
    """Listing the sessions of an up-to-date store imports none of SESSIONS_NEVER_IMPORTS."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        store.create_session("a").append("user/message", {"content": "hi"})
        store.create_session("b").append("assistant/message", {"content": "yes", "usage": {"input_tokens": 3}})
    for args in (["--db", str(db), "sessions"], [f"--db={db}", "--durability", "full", "sessions"]):
        loaded = all_modules_loaded(*args)
        assert "eventstore.cli.listing" in loaded
        assert not loaded & SESSIONS_NEVER_IMPORTS, sorted(loaded & SESSIONS_NEVER_IMPORTS)
    loaded = all_modules_loaded("--db", str(db), "sessions", "--json")  # (the session/info reader too)
    assert "eventstore.cli.listing" in loaded and "eventstore.cli.importing" not in loaded
    assert not loaded & {"click", "sqlalchemy", "alembic", "rich", "eventstore.io.bulk", "eventstore.audit.verify"}


# What `eventstore search` on an up-to-date SQLite store never imports: what the listing never
# imports, but the search itself (and the index's catch-up, which writes).
SEARCH_NEVER_IMPORTS = SESSIONS_NEVER_IMPORTS - {"eventstore.io.transcripts", "threading", "weakref", "re", "enum",
                                                 "eventstore.backends.sqlite.checkpoint", "fcntl",
                                                 "eventstore.backends.sqlite.writelock"} | {
    "eventstore.cli.search", "shutil", "json"}


def test_search_imports_only_what_it_needs(tmp_path):
    """A search (its common forms, a table or JSON, snippets with "…" and accents) imports
    none of SEARCH_NEVER_IMPORTS (--json: json; rich only measures wide characters)."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        store.create_session("a").append("user/message", {"content": "wombat " + "word " * 40 + "naïve café"})
        store.create_session("b").append("assistant/message", {"content": "a wombat, “quoted” — ½"})
    for args in (["search", "wombat"], ["search", "--limit", "1", "wombat", "--type", "user/message"],
                 ["search", "-n", "5", "--session=b", "wombat"], ["search", "--raw", "wombat OR word"],
                 ["search", "wombat", "--json"], ["search", "nothing"]):
        loaded = all_modules_loaded("--db", str(db), *args)
        assert "eventstore.cli.searching" in loaded, args
        assert not loaded & SEARCH_NEVER_IMPORTS - ({"json"} if "--json" in args else set()), (
            args, sorted(loaded & SEARCH_NEVER_IMPORTS))


# `eventstore sessions` through click alone, as before the listing was written without it.
CLICK_ONLY = ("import sys\n"
              "for s in (sys.stdout, sys.stderr):\n    s.reconfigure(errors='backslashreplace')\n"
              "from eventstore.cli.group import cli\ncli(prog_name='eventstore')")


def both_ways(args: list[str], env: dict | None = None, stdout=subprocess.PIPE, real: bool = False) -> tuple:
    """``(returncode, stdout, stderr)`` of ``eventstore ARGS`` as run, and through click alone
    (no $COLUMNS unless ``env`` sets it).

    In this process (:func:`in_process`) unless ``real`` or ``stdout`` is not a pipe: what
    only a process shows is run as two (``python -m eventstore`` and ``python -c
    CLICK_ONLY``): a closed pipe or ``/dev/full`` as stdout, and an argument that is not
    UTF-8 (bytes in argv, decoded with surrogates)."""
    real = real or stdout is not subprocess.PIPE or any(_not_utf8(a) for a in args)
    if not real:
        return tuple(in_process(how, args, env) for how in (_fast, _click_only))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(ROOT), **(env or {})}
    runs = [subprocess.run([sys.executable, *how, *args], stdout=stdout, stderr=subprocess.PIPE, env=env,
                           timeout=60) for how in (["-m", "eventstore"], ["-c", CLICK_ONLY])]
    return tuple((r.returncode, r.stdout, r.stderr) for r in runs)


def _not_utf8(arg: str) -> bool:
    """Whether ``arg`` came from bytes that are not UTF-8 (surrogates: Python's argv decoding)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _fast(args: list[str], served: list | None = None) -> None:
    """``python -m eventstore ARGS``: the console script's entry point, fast path first
    (whether the fast path ran the command, not click, appended to ``served``)."""
    from eventstore.cli import fast, main

    run_plain = fast.run_plain

    def recording(argv: list[str]) -> bool:
        done = run_plain(argv)
        if served is not None:
            served.append(done)
        return done

    sys.argv = ["eventstore", *args]
    fast.run_plain = recording
    try:
        main()
    finally:
        fast.run_plain = run_plain


def fast_served(args: list[str], env: dict | None = None) -> bool:
    """Whether ``eventstore ARGS``, run in this process, was run by the fast path (click not
    called): an equivalence of :func:`both_ways` is only one when it was."""
    served: list[bool] = []
    in_process(lambda a: _fast(a, served), args, env)
    return served == [True]


def _click_only(args: list[str]) -> None:
    """:data:`CLICK_ONLY` with ``ARGS``: the click group alone."""
    from eventstore.cli.group import cli as group

    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(errors="backslashreplace")
    group.main(args=list(args), prog_name="eventstore")


def in_process(how, args: list[str], env: dict | None) -> tuple[int, bytes, bytes]:
    """``(status, stdout, stderr)`` of ``how(ARGS)`` run here as in a process of its own:
    the environment as :func:`both_ways` makes it, stdout and stderr UTF-8 text streams over
    bytes (as a pipe's are: not terminals, no file descriptor), the status that of its
    ``SystemExit`` (0 when it returns), the streams flushed as at exit."""
    out, err = io.BytesIO(), io.BytesIO()
    streams = sys.stdout, sys.stderr
    saved_env, saved_argv = dict(os.environ), sys.argv
    os.environ.pop("COLUMNS", None)
    os.environ.update(env or {})
    text_out = io.TextIOWrapper(out, encoding="utf-8")  # (held here: a wrapper closes its buffer when freed)
    text_err = io.TextIOWrapper(err, encoding="utf-8", line_buffering=True)  # (as Python's own stderr)
    sys.stdout, sys.stderr = text_out, text_err
    status = 0
    try:
        how(args)
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            status = e.code or 0
        else:
            sys.stderr.write(f"{e.code}\n")
            status = 1
    finally:
        for stream in (text_out, text_err):
            stream.flush()
        sys.stdout, sys.stderr = streams
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return status, out.getvalue(), err.getvalue()


def test_sessions_without_click_prints_what_click_prints(tmp_path):
    """The table, its token columns, escaped ids and odd times; an empty store; and every
    error (no file, a folder, a bad --durability or $EVENTSTORE_DURABILITY, an in-memory
    database, a store of a newer schema) exactly as through click."""
    db = new_sqlite_store(tmp_path / "s.db")
    new_sqlite_store(tmp_path / "empty.db")
    fast, slow = both_ways(["--db", str(tmp_path / "empty.db"), "sessions"])
    assert fast == slow and fast[1] == b"no sessions\n"
    assert fast_served(["--db", str(tmp_path / "empty.db"), "sessions"])
    with EventStore.open(db) as store:
        store.create_session("two\nlines\x00\u202e").append("user/message", {"content": "hi"})
        store.create_session("ms").append("x", {}, ts=1764460800401)
        store.create_session("tokens").append("assistant/message", {"content": "a", "usage": {
            "input_tokens": 1234567, "output_tokens": 5, "cache_read_input_tokens": 7}})
        store.create_session("none")
    cases = [(["--db", str(db), "sessions"], None), ([f"--db={db}", "sessions"], None),
             (["--durability", "FULL", "sessions"], {"EVENTSTORE_DB": str(db)}),
             (["sessions"], {"EVENTSTORE_DB": str(db), "EVENTSTORE_DURABILITY": "may-lose-recent"}),
             (["--db", str(tmp_path / "missing.db"), "sessions"], None),
             (["--db", str(tmp_path), "sessions"], None),
             (["--db", str(db), "--durability", "sometimes", "sessions"], None),
             (["--db", str(db), "sessions"], {"EVENTSTORE_DURABILITY": "sometimes"}),
             (["--db", ":memory:", "sessions"], None), (["--db", "", "sessions"], None),
             (["--db", str(db), "--db", str(tmp_path / "missing.db"), "sessions"], None)]
    for args, env in cases:
        fast, slow = both_ways(args, env)
        assert fast == slow, (args, env, fast, slow)
        if (args, env) == cases[0]:
            listed = fast
    fast = listed  # the table itself: the first case, not run again
    json_fast, json_slow = both_ways(["--db", str(db), "sessions", "--json"])
    assert json_fast == json_slow and json_fast[0] == 0 and json.loads(json_fast[1])[0]["input_tokens"] == 0
    assert fast[0] == 0 and b"two\\nlines\\x00\\u202e" in fast[1] and b"1,234,567" in fast[1]
    assert b"ts 1764460800401.0 (not a date)" in fast[1]
    newer = tmp_path / "newer.db"
    shutil.copy(db, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    fast, slow = both_ways(["--db", str(newer), "sessions"])
    assert fast == slow and fast[0] == 1 and fast[2].startswith(b"error: ")


def test_sessions_to_a_closed_pipe_exits_as_click_does(tmp_path):
    """The reader gone (``| head``, before the first row): status 1, nothing on stderr."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        for k in range(50):
            store.create_session(f"s{k}")
    r, w = os.pipe()
    os.close(r)
    try:
        fast, slow = both_ways(["--db", str(db), "sessions"], stdout=w)
    finally:
        os.close(w)
    assert fast == slow == (1, None, b"")


def test_search_without_click_prints_what_click_prints(tmp_path):
    """The table (snippets with marks, "…", wide and control characters), the count of more
    matches than shown, JSON, no match; each option's forms; and every error (an empty or
    malformed query, a word that is not UTF-8, an unknown session, a bad --limit, an option
    twice, no file) exactly as through click."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        a = store.create_session("a\x1bb")
        a.append("user/message", {"content": "漢字 café wombat " + "word " * 40})
        a.append("assistant/message", {"content": "the wombat\tsaid\x00 \u202eno"})
        store.create_session("b").append("tool/result", {"tool_call_id": "c", "content": "wombats and a wombat"})
    d = ["--db", str(db)]
    cases = [[*d, "search", "wombat"], [f"--db={db}", "search", "wombat", "--limit", "1"],
             [*d, "search", "-n", "2", "wombat"], [*d, "search", "--limit=2", "wombat", "--json"],
             [*d, "search", "wombat", "--session", "b"], [*d, "search", "--session=a\x1bb", "wombat", "-n", "1"],
             [*d, "search", "wombat", "--type", "tool/result"], [*d, "search", "--raw", "wombat NOT word"],
             [*d, "search", "wombat*", "--json"], [*d, "search", "café 漢字"], [*d, "search", "nothing"],
             [*d, "search", "nothing", "--json"], [*d, "--durability", "full", "search", "said"],
             [*d, "search", ""], [*d, "search", "  "], [*d, "search", "--raw", "wombat AND ("],
             [*d, "search", "\udcff"], [*d, "search", "wombat", "--session", "missing"],
             [*d, "search", "wombat", "--limit", "0"], [*d, "search", "wombat", "-n", "x"],
             [*d, "search", "wombat", "-n", "1", "--limit", "2"], [*d, "search", "wombat", "--json", "--json"],
             [*d, "search", "wombat", "extra"], [*d, "search"], [*d, "search", "wombat", "-n2"],
             [*d, "search", "wombat", "--", "x"], ["--db", str(tmp_path / "missing.db"), "search", "wombat"],
             [*d, "search", "wombat", "--db", str(db)], [*d, "search", "-n", "-1", "wombat"]]
    for args in cases:
        fast, slow = both_ways(args)
        assert fast == slow, (args, fast, slow)
    fast, _slow = both_ways(cases[0])
    assert fast[0] == 0 and fast[1].startswith(b"SESSION") and b"a\\x1bb" in fast[1]
    assert fast_served(cases[0]) and fast_served(cases[3]) and not fast_served(cases[18])  # (--limit 0: click's)
    assert "…".encode() in fast[1] and "漢字 café wombat".encode() in fast[1] and b"wombat said" in fast[1]
    fast, _slow = both_ways(cases[1])
    assert fast[2] == b"3 matches; the best 1 shown\n"
    fast, _slow = both_ways(cases[4], env={"COLUMNS": "50"})  # folded to $COLUMNS: each snippet below its hit
    assert fast == _slow and fast[1].startswith(b"b  seq 0  tool/result\n    ")
    fast, _slow = both_ways(cases[3], env={"COLUMNS": "200"})
    assert fast == _slow and {h["session_id"] for h in json.loads(fast[1])} == {"b", "a\x1bb"}


def test_search_to_a_closed_pipe_exits_as_click_does(tmp_path):
    """The reader gone before the first hit: status 1, nothing on stderr."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        store.create_session("s").append_many([("user/message", {"content": f"wombat {k}"}) for k in range(30)])
    r, w = os.pipe()
    os.close(r)
    try:
        fast, slow = both_ways(["--db", str(db), "search", "wombat"], stdout=w)
    finally:
        os.close(w)
    assert fast == slow == (1, None, b"30 matches; the best 20 shown\n")


def test_events_and_messages_without_click_print_what_click_prints(tmp_path):
    """A session's events (all, some types, after a seq) and messages (plain, --pretty), and
    the errors (no such session, a bad --after), exactly as through click; the reader gone
    halfway through the events: status 1, nothing on stderr, as click."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        s = store.create_session("s\u00e9")
        s.append("user/message", {"content": "hi \x1b there"})
        s.append("assistant/message", {"content": "caf\u00e9", "usage": {"input_tokens": 3}})
        store.create_session("big").append_many([("user/message", {"content": "x" * 500})] * 400)
    d = ["--db", str(db)]
    cases = [[*d, "events", "sé"], [*d, "events", "sé", "--type", "assistant/message"],
             [*d, "events", "--type=user/message", "sé", "--type", "assistant/message", "--after", "0"],
             [*d, "events", "sé", "--after=5"], [*d, "events", "missing"], [*d, "events", "sé", "--after", "x"],
             [*d, "events", "sé", "--after", "-1"], [*d, "events", "s\udcff"], [*d, "messages", "sé"],
             [*d, "messages", "--pretty", "sé"], [*d, "messages", "missing"], [*d, "messages", "sé", "extra"],
             ["--db", str(tmp_path / "none.db"), "events", "sé"]]
    for args in cases:
        fast, slow = both_ways(args)
        assert fast == slow, (args, fast, slow)
    fast, _slow = both_ways(cases[2])
    assert fast[0] == 0 and len(fast[1].splitlines()) == 1 and b"caf\xc3\xa9" in fast[1]
    assert fast_served(cases[2]) and fast_served(cases[9])
    assert "click" not in all_modules_loaded(*cases[0]) | all_modules_loaded(*cases[9])
    r, w = os.pipe()
    os.close(r)
    try:
        fast, slow = both_ways([*d, "events", "big"], stdout=w)
    finally:
        os.close(w)
    assert fast == slow == (1, None, b"")


def test_the_fast_path_on_postgresql_prints_what_click_prints(pg_store_url):
    """The read commands without click on PostgreSQL: the same output and errors."""
    with EventStore.open(pg_store_url) as store:
        store.create_session("p").append("user/message", {"content": "a wombat on postgres", "usage": {
            "input_tokens": 2}})
    d = ["--db", pg_store_url]
    for args in ([*d, "sessions"], [*d, "sessions", "--json"], [*d, "search", "wombat"],
                 [*d, "search", "wombat", "--json", "--session", "p"], [*d, "search", "wombat", "--session", "q"],
                 [*d, "events", "p"], [*d, "messages", "p"], [*d, "messages", "q"]):
        fast, slow = both_ways(args)
        assert fast == slow, (args, fast, slow)
    assert b"postgres" in both_ways([*d, "search", "wombat"])[0][1]
    assert fast_served([*d, "search", "wombat"]) and fast_served([*d, "sessions", "--json"])


def test_the_fast_path_to_a_full_disk_says_what_click_says(tmp_path):
    """Each fast command writing to a full device: one line, status 1, as through click."""
    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        store.create_session("a").append("user/message", {"content": "a wombat"})
    with open("/dev/full", "wb") as full:
        for args in (["sessions"], ["sessions", "--json"], ["search", "wombat"], ["search", "wombat", "--json"],
                     ["events", "a"], ["messages", "a"]):
            fast, slow = both_ways(["--db", str(db), *args], stdout=full)
            assert fast == slow and fast[0] == 1 and fast[2].endswith(b"No space left on device\n"), (args, fast)


def test_each_fast_command_declares_its_click_options():
    """What eventstore.cli.fast parses for a command is its click command's parameters: the
    same spellings, kinds and defaults, the same arguments."""
    from eventstore.cli.base import TEXT
    from eventstore.cli.fast import COUNT, FLAG, INT, PLAIN, TEXTS
    from eventstore.cli.fast import TEXT as TEXT_KIND

    for name, plain in PLAIN.items():
        command = cli.get_command(click.Context(cli), name)
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        assert tuple(p.name for p in arguments) == plain.arguments, name
        assert all(p.required and p.type is TEXT and p.nargs == 1 for p in arguments)
        declared = {}
        for p in command.params:
            if isinstance(p, click.Option):
                assert not p.secondary_opts and p.envvar is None and p.callback is None, p.name
                assert not p.multiple or p.type is TEXT, p.name
                if p.is_flag:
                    kind = FLAG
                elif p.type is TEXT:
                    kind = TEXTS if p.multiple else TEXT_KIND
                elif p.type is click.INT:
                    kind = INT
                else:
                    assert isinstance(p.type, click.IntRange) and (p.type.min, p.type.max, p.type.min_open) == (
                        1, None, False), p.name
                    kind = COUNT
                declared |= {spelling: (p.name, kind) for spelling in p.opts}
        assert declared == plain.options, name
        given = command.make_context(name, ["x"] * len(arguments), parent=click.Context(cli)).params
        assert given == plain.defaults | dict.fromkeys(plain.arguments, "x"), name  # (what click passes by default)


@pytest.mark.parametrize(("args", "env", "parsed"), [
    (["sessions"], {}, ("sessions", "eventstore.db", "normal", {"as_json": False})),
    (["--durability=FULL", "--db", "x.db", "sessions", "--json"], {}, ("sessions", "x.db", "full", {"as_json": True})),
    (["search", "-n", "3", "a b"], {"EVENTSTORE_DB": "e.db"},
     ("search", "e.db", "normal", {"query": "a b", "session_id": None, "type_": None, "limit": 3, "raw": False,
                                   "as_json": False})),
    (["search", "q", "--session=", "--type", "t", "--raw", "--json", "--limit=07"], {"EVENTSTORE_DURABILITY": "Full"},
     ("search", "eventstore.db", "full", {"query": "q", "session_id": "", "type_": "t", "limit": 7, "raw": True,
                                          "as_json": True})),
    (["search", "caf\udcc3\udca9"], {}, ("search", "eventstore.db", "normal", {
        "query": "café", "session_id": None, "type_": None, "limit": 20, "raw": False, "as_json": False})),
    (["events", "s", "--type", "a", "--after=0", "--type=b"], {}, ("events", "eventstore.db", "normal", {
        "session_id": "s", "types": ("a", "b"), "after_seq": 0})),
    (["messages", "--pretty", "s"], {}, ("messages", "eventstore.db", "normal", {"session_id": "s", "pretty": True})),
    # left to click: help, version, unknown or repeated options, values click may refuse or take otherwise
    *[(args, {}, None) for args in (
        [], ["--help"], ["--version"], ["sessions", "--help"], ["search", "q", "-h"], ["-h", "sessions"],
        ["sesions"], ["tail", "s"], ["events"], ["events", "s", "--after", "-1"], ["events", "s", "--after", "1_0"],
        ["events", "s", "--after", "1", "--after", "2"], ["messages", "s", "--pretty=1"], ["search"], ["search", "a", "b"], ["search", "-x"], ["search", "q", "--"],
        ["search", "q", "-n5"], ["search", "q", "-n=5"], ["search", "q", "-n", "0"], ["search", "q", "-n", "+5"],
        ["search", "q", "-n", " 5"], ["search", "q", "-n", "٣"], ["search", "q", "--limit"],
        ["search", "q", "--json=1"], ["search", "q", "--raw", "--raw"], ["search", "q", "-n", "1", "--limit", "2"],
        ["search", "q", "--type", "-t"], ["search", "\udcff"], ["search", "q", "--session", "\udcff"],
        ["sessions", "--db", "x"], ["--db", "a", "--db", "b", "sessions"], ["--db", "-x", "sessions"],
        ["--db", "", "sessions"], ["--db", ":memory:", "sessions"], ["--db", "sqlite://", "sessions"],
        ["--durability", "sometimes", "sessions"], ["--db"], ["--db", "x"])],
    (["sessions"], {"EVENTSTORE_DB": ""}, None), (["sessions"], {"EVENTSTORE_DURABILITY": "never"}, None),
])
def test_the_fast_path_takes_only_simple_command_lines(monkeypatch, args, env, parsed):
    from eventstore.cli.fast import parse

    for var in ("EVENTSTORE_DB", "EVENTSTORE_DURABILITY"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert parse(args) == parsed


@pytest.mark.parametrize("columns", [None, "", "abc", "-3", "0", "7", "132"])
def test_terminal_columns_are_shutils(monkeypatch, columns):
    from eventstore.cli import terminal_columns

    monkeypatch.delenv("COLUMNS", raising=False)
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_text_width_is_richs():
    """The widths the table takes without importing rich are rich's own (text all ASCII is as
    many cells as characters: the table escapes control characters before measuring)."""
    import random

    from rich.cells import cell_len

    from eventstore.cli.table import text_width

    rng = random.Random(3)
    chars = [chr(c) for c in [*range(0, 0x400), *range(0x2000, 0x2070), 0x3000, 0x5b57, 0xfffd, 0x1f600]]
    for _ in range(3000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 12)))
        assert text_width(text) == (len(text) if text.isascii() else cell_len(text)), text
    for c in chars:
        assert text_width(c) == (1 if c.isascii() else cell_len(c)), hex(ord(c))


def test_a_mistyped_command_is_matched_against_every_command():
    """The suggestion looks at every command, not only those imported so far."""
    result = CliRunner().invoke(cli, ["sesions"])
    assert result.exit_code == 2 and "No such command 'sesions'. Did you mean 'sessions'?" in result.output


def test_verify_help_says_how_many_findings_it_prints():
    from eventstore.cli.auditing import VERIFY_SHOWN, verify

    assert f"the first {VERIFY_SHOWN} unless --all" in " ".join(verify.help.split())


def test_reading_commands_and_search_leave_a_database_an_older_eventstore_wrote_as_it_is(tmp_path):
    """``search`` writes only its index, so it refuses an older eventstore's database as the
    other reading commands do (fast path and click alike), and leaves its bytes as they were:
    an upgrade would lock out the older eventstore's processes still using it. ``init``
    upgrades it; the search then finds."""
    from conftest import DATA

    db = tmp_path / "schema-0290.db"
    shutil.copyfile(DATA / db.name, db)
    before = db.read_bytes()
    sid, word = "a0c1e2f3-111", "README"  # a session of the file, a word of its events
    refused = (f"error: {db} is at schema revision '0290', older than this eventstore's '0370': open it once for "
               "writing ('eventstore init') to upgrade it\n").encode()
    for args in (["search", word], ["search", "--raw", word], ["search", word, "--json"], ["sessions"],
                 ["events", sid], ["messages", sid]):
        fast, slow = both_ways(["--db", str(db), *args])
        assert fast == slow == (1, b"", refused), (args, fast, slow)
        assert db.read_bytes() == before
    r = CliRunner().invoke(cli, ["--db", str(db), "init"])
    assert r.exit_code == 0 and "upgraded from schema revision 0290" in r.stderr, r.output
    fast, slow = both_ways(["--db", str(db), "search", "--json", word])
    assert fast == slow and fast[0] == 0 and json.loads(fast[1]), fast
