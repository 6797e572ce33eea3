"""eventstore.io.importer: importing many files as ``eventstore import`` does, without the
command line: what each file does to the totals, what is said, and the arguments refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DATA, TESTS

from eventstore import EventStore
from eventstore.io.importer import ImportArgumentError, ImportRun, check_arguments, find_files

TRANSCRIPTS = TESTS / "transcripts_data"


@pytest.fixture
def store(tmp_path):
    with EventStore.open(tmp_path / "i.db") as s:
        yield s


def test_a_folder_of_both_kinds_lands_with_its_totals(store, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(DATA / "demo.jsonl", folder / "a.jsonl")
    shutil.copy(TRANSCRIPTS / "codex" / "rollout-0.40-shell.jsonl", folder / "b.jsonl")
    (folder / "c.jsonl").write_text("not json\n")
    said: list[str] = []
    files, unreadable = find_files([str(folder), str(tmp_path / "missing")], note=said.append)
    assert [Path(f).name for f in files] == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert unreadable == [f"{tmp_path / 'missing'}: no such file or folder"]
    totals = ImportRun(store, note=said.append).run(files, unreadable)
    assert totals.summary().startswith("files: 3, sessions: 2 (2 new, 0 appended), events: ")
    assert totals.failed == 2 and said[0] == unreadable[0]
    assert said[1].startswith(f"{folder / 'c.jsonl'}: ")
    again = ImportRun(store, note=said.append).run(files)
    assert (again.skipped, len(again.new), again.failed) == (2, 0, 1)


def test_a_watch_look_at_an_empty_file_waits_for_it_to_grow(store, tmp_path):
    """An agent creates its transcript before it writes a line: under --watch (its first
    look as much as the later ones) a file found empty neither fails nor says anything; the
    look after it grows imports it. Without --watch an empty file is a failure (there is
    nothing to import)."""
    f = tmp_path / "new.jsonl"
    f.write_bytes(b"")
    said: list[str] = []
    run = ImportRun(store, watching=True, note=said.append)
    run.import_file(str(f))
    run.import_file(str(f), quiet=True)
    assert (run.totals.failed, said) == (0, [])
    f.write_bytes((TRANSCRIPTS / "codex" / "rollout-0.40-shell.jsonl").read_bytes())
    run.import_file(str(f), quiet=True)
    assert run.totals.failed == 0 and len(run.totals.new) == 1
    g = tmp_path / "empty.jsonl"
    g.write_bytes(b"")
    once = ImportRun(store, note=said.append)
    once.import_file(str(g))
    assert once.totals.failed == 1 and said[-1] == f"{g}: the file is empty"


@pytest.mark.parametrize("watching", [False, True])
def test_a_first_line_being_written_waits(store, tmp_path, watching):
    """A file whose first line has no newline yet (its agent is writing it) is in no format
    yet: it waits for the next run (said, unless watching) and fails nothing; once whole it
    imports."""
    whole = (TRANSCRIPTS / "codex" / "rollout-0.40-shell.jsonl").read_bytes()
    f = tmp_path / "r.jsonl"
    f.write_bytes(whole[:50])
    said: list[str] = []
    run = ImportRun(store, watching=watching, note=said.append)
    run.import_file(str(f))
    assert (run.totals.failed, run.totals.skipped, len(run.totals.new)) == (0, 1, 0)
    assert said == ([] if watching else [f"{f}: its first line is not complete yet (no newline): it waits for the "
                                         "next run"])
    f.write_bytes(whole)
    run.import_file(str(f))
    assert run.totals.failed == 0 and len(run.totals.new) == 1


@pytest.mark.parametrize(("files", "kw", "message"), [
    (["-", "-"], {}, "- (stdin) can be read only once"),
    (["a", "b"], {"session_id": "x"}, "--session-id goes with exactly one file (2 given)"),
    (["-"], {"watch": True}, "--watch reads files; - (stdin) cannot be watched"),
])
def test_arguments_that_cannot_go_together_are_refused(files, kw, message):
    with pytest.raises(ImportArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_arguments(files, [], **kw)
