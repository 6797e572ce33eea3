"""The registry of transcript formats, and what the command line imports to start.

A new format is one module and its registration: detection, the importer and ``eventstore
import --format`` find it there. ``eventstore --help`` lists the commands without importing
them, and ``sessions`` imports neither the bulk importer nor the audit modules.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import TESTS

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
            "print('MODULES', *sorted(m for m in sys.modules if m.startswith('eventstore')), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *(["--db", str(db)] if db else []), *args],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(line.split()[1:])


def test_help_imports_no_command(tmp_path):
    loaded = modules_loaded("--help")
    assert not {m for m in loaded if m.startswith("eventstore.cli.") and m not in ("eventstore.cli.base",)}
    assert "eventstore.core.store" not in loaded and "eventstore.io.bulk" not in loaded


def test_sessions_imports_only_what_it_needs(tmp_path):
    db = tmp_path / "s.db"
    with EventStore.open(db) as store:
        store.create_session("a").append("user/message", {"content": "hi"})
    loaded = modules_loaded("sessions", db=db)
    assert "eventstore.cli.reading" in loaded and "eventstore.cli.importing" not in loaded
    for heavy in ("eventstore.io.bulk", "eventstore.io.parse_worker", "eventstore.audit.verify",
                  "eventstore.io.transcripts.claude_code", "eventstore.web"):
        assert heavy not in loaded, heavy


def test_a_mistyped_command_is_matched_against_every_command():
    """The suggestion looks at every command, not only those imported so far."""
    result = CliRunner().invoke(cli, ["sesions"])
    assert result.exit_code == 2 and "No such command 'sesions'. Did you mean 'sessions'?" in result.output


def test_verify_help_says_how_many_findings_it_prints():
    from eventstore.cli.auditing import VERIFY_SHOWN, verify

    assert f"the first {VERIFY_SHOWN} unless --all" in " ".join(verify.help.split())
