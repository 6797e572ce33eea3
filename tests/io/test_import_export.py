"""Bulk import and export through the library: conformance fixtures, salvage, re-import
(skip, conflict, --append), export to a folder with hostile session ids, and the hash
chain an import writes (the same as the append path's).

Every test of an import from a file runs twice: with files parsed in the importing process,
and in the parse worker process (as files of a megabyte or more are; see
eventstore.io.parse_worker). A test marked parsed_once imports no file by its path (none, or
only streams, which the worker never reads), or only to set up an export of it that the
fixture tests already import both ways: it runs once, parsing in process."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from conftest import DATA, FIXTURES, db_rows

from eventstore import EventStore, ImportConflict, InvalidEvent, InvalidJSONL, SessionNotFound
from eventstore.audit import verify as audit
from eventstore.io import parse_worker
from eventstore.io.bulk import Dropped, import_jsonl
from eventstore.io.export import export_session, export_sessions
from eventstore.io.jsonl import file_name_for, session_id_from_file_name
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.codec import dumps, loads
from eventstore.log.commit import commit_json
from eventstore.log.line import event_line

META = b'{"type":"session/meta","id":"s1"}'


def parsed_once(test):
    """Marks a test for which where a file is parsed makes no difference (see above)."""
    test.parsed_once = True
    return test


def pytest_generate_tests(metafunc):
    if not getattr(metafunc.function, "parsed_once", False):
        metafunc.parametrize("parse_in", ["in-process", "worker"], indirect=True)


@pytest.fixture(autouse=True)
def parse_in(request, monkeypatch):
    """Where import parses a file: here, or in the worker process (every file, however small)."""
    where = getattr(request, "param", "in-process")
    if where == "worker":
        monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", 0)
    return where


def ev(seq: int, type_: str = "a", **payload) -> bytes:
    """An event line as the reference writes it."""
    return event_line(type_, seq, 1764460800 + seq / 8, dumps(payload)).encode()


def lines(*parts: bytes, end: bytes = b"\n") -> bytes:
    return b"\n".join(parts) + end


def export_bytes(store: EventStore, sid: str) -> bytes:
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


def stored_hashes(store: EventStore, sid: str) -> list[str]:
    return [h for (h,) in db_rows(store, "SELECT hash FROM events WHERE session_id = ? ORDER BY seq", (sid,))]


def chain_of(sid: str, exported: bytes, store: EventStore | None = None) -> list[str]:
    """The hash chain recomputed from an exported file's event lines: unsalted, or with the
    salts ``store`` holds for the session (each salted line hashed from its commit payload)."""
    salts = [] if store is None else [bytes(s) if s is not None else None for (s,) in db_rows(
        store, "SELECT salt FROM events WHERE session_id = ? ORDER BY seq", (sid,))]
    prev = genesis_hash(sid)
    out = []
    for i, line in enumerate(exported.decode().split("\n")[1:-1]):
        salt = salts[i] if i < len(salts) else None
        if salt is not None:
            obj = json.loads(line)
            payload = {k: v for k, v in obj.items() if k not in ("type", "seq", "ts")}
            line = event_line(obj["type"], obj["seq"], float(obj["ts"]), commit_json(salt, loads(dumps(payload))))
        prev = chain_hash(prev, line)
        out.append(prev)
    return out


# --- conformance ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_imports_exports_byte_identical_and_projects(store, name):
    path = DATA / f"{name}.jsonl"
    rep = import_jsonl(store, path)
    assert (rep.status, rep.normalized, rep.dropped) == ("imported", 0, None)
    data = path.read_bytes()
    assert rep.bytes == len(data) and rep.lines == data.count(b"\n")
    assert export_bytes(store, rep.session_id) == data
    expected = json.loads((DATA / f"{name}.messages.json").read_text(encoding="utf-8"))
    assert store.session(rep.session_id).derive_messages() == expected
    # the import wrote the same hash chain as the append path computes for these lines
    assert stored_hashes(store, rep.session_id) == chain_of(rep.session_id, data, store)


@parsed_once
def test_an_import_salts_every_event_afresh_and_verifies(store, tmp_path):
    """Appends and imports are salted (each hash covers the commit payload, docs/redaction.md):
    an import of an export is a new chain (fresh salts), and both verify, also with appends
    after the import; the exports stay byte-identical."""
    s = store.create_session("chain")
    s.append_many([("a", {"x": 1}, 1.5), ("b", {"y": "é\ud83d", "z": [1.0, 1e21]}, 2.0), ("c", {}, 3.25)])
    s.append("d", {"event_id": "k1"}, ts=4.0)
    data = export_bytes(store, "chain")
    assert stored_hashes(store, "chain") != chain_of("chain", data)  # salted
    with EventStore.open(tmp_path / "other.db") as other:
        other.import_jsonl(io.BytesIO(data), name="chain.jsonl")
        hashes = stored_hashes(other, "chain")
        assert len(set(hashes + stored_hashes(store, "chain") + chain_of("chain", data))) == 3 * len(hashes)
        assert export_bytes(other, "chain") == data
        other.session("chain").append("e", {"n": 5}, ts=5.0)
        store.session("chain").append("e", {"n": 5}, ts=5.0)
        assert export_bytes(other, "chain") == export_bytes(store, "chain")
        for db in (store, other):
            assert audit.verify(db._backend).ok


@parsed_once
def test_export_unknown_session(store):
    with pytest.raises(SessionNotFound):
        store.export_jsonl("nope", io.BytesIO())


@parsed_once
@pytest.mark.parametrize("dest", [".", "folder", "folder/", "afile/", "missing/", "missing2/sub/"])
def test_export_to_a_folder_is_a_clear_error_that_leaves_nothing(store, tmp_path, monkeypatch, dest):
    """A folder (even "."), or any path ending in "/", is no file to write:
    IsADirectoryError naming it, before anything is created (the rename onto "." raised
    EBUSY; "afile/" overwrote the file afile, "missing/" made a file named missing)."""
    store.create_session("s").append("user/message", {"content": "hi"})
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("kept")
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(IsADirectoryError) as e:
        store.export_jsonl("s", dest)
    assert e.value.filename == dest
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "afile").read_text() == "kept"


@parsed_once
def test_export_to_an_empty_path_is_file_not_found(store, tmp_path, monkeypatch):
    """"" names no file: FileNotFoundError, as the reference save("") gives (ENOENT), where
    it said "Is a directory" (Path("") is the current folder)."""
    store.create_session("s").append("user/message", {"content": "hi"})
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(FileNotFoundError) as e:
        store.export_jsonl("s", "")
    assert e.value.filename == ""
    assert sorted(tmp_path.iterdir()) == before


def _demo(store) -> tuple[str, bytes]:
    sid = store.import_jsonl(DATA / "demo.jsonl")
    return sid, (DATA / "demo.jsonl").read_bytes()


@parsed_once
@pytest.mark.sqlite_only
@pytest.mark.parametrize("how", ["itself", "symlink", "hard link", "its WAL", "relative"])
def test_export_never_overwrites_the_store_s_own_database(store, db_path, tmp_path, monkeypatch, how):
    """-o self.db renamed the export over the database (a newcomer helper: the store was
    gone, 'file is not a database'); by any name of its files, export refuses, first."""
    sid, _ = _demo(store)
    monkeypatch.chdir(tmp_path)
    dest = {"itself": str(db_path), "symlink": "alias.db", "hard link": "hard.db",
            "its WAL": str(db_path) + "-wal", "relative": os.path.relpath(db_path)}[how]
    if how == "symlink":
        os.symlink(db_path, dest)
    elif how == "hard link":
        os.link(db_path, dest)
    before = db_path.read_bytes()
    with pytest.raises(OSError, match="this store's own database file") as e:
        store.export_jsonl(sid, dest)
    assert e.value.filename == dest
    assert db_path.read_bytes() == before
    assert [i.events for i in store.sessions()] == [15]


@parsed_once
def test_export_to_a_folder_holding_the_database_under_a_session_s_file_name(tmp_path):
    """export --all into the database's folder, where one session's file name is the
    database's: refused before any file is written."""
    db = tmp_path / file_name_for("b")
    with EventStore.open(db) as st:
        st.create_session("a").append("x", {})
        st.create_session("b").append("x", {})
        with pytest.raises(OSError, match="this store's own database file"):
            export_sessions(st, tmp_path)
        assert not (tmp_path / file_name_for("a")).exists()
        assert [i.events for i in st.sessions()] == [1, 1]


@parsed_once
@pytest.mark.parametrize("tail", ["/.", "/.."])
def test_export_to_a_path_ending_in_dot_is_no_file(store, tmp_path, tail):
    """"f/." overwrote the file f, and "nx/." created a file nx (Path() drops the dot; the
    attack helper): like a trailing slash, IsADirectoryError before anything is written."""
    sid, _ = _demo(store)
    (tmp_path / "f").write_text("kept")
    for dest in (str(tmp_path / "f") + tail, str(tmp_path / "nx") + tail):
        with pytest.raises(IsADirectoryError):
            store.export_jsonl(sid, dest)
    assert (tmp_path / "f").read_text() == "kept"
    assert not (tmp_path / "nx").exists()


@parsed_once
def test_export_does_not_replace_a_file_the_user_may_not_write(store, tmp_path, monkeypatch):
    """A read-only file was replaced by the rename (the attack helper); writeFileSync says
    EACCES. (The tests run as root, whom a 0444 mode does not stop: os.access decides.)"""
    sid, _ = _demo(store)
    target = tmp_path / "ro.jsonl"
    target.write_text("kept")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if os.fspath(p) == str(target) else real_access(p, m, **kw))
    with pytest.raises(PermissionError) as e:
        store.export_jsonl(sid, target)
    assert e.value.filename == str(target)
    assert target.read_text() == "kept"


@parsed_once
def test_export_through_a_symlink_writes_its_target_and_keeps_the_link(store, tmp_path):
    """As writeFileSync does: the rename replaced the link itself with a file."""
    sid, data = _demo(store)
    (tmp_path / "target.jsonl").write_bytes(b"old")
    os.symlink("target.jsonl", tmp_path / "link.jsonl")
    os.symlink("new.jsonl", tmp_path / "dangling.jsonl")
    assert store.export_jsonl(sid, tmp_path / "link.jsonl") == 15
    assert store.export_jsonl(sid, tmp_path / "dangling.jsonl") == 15
    for link, target in (("link.jsonl", "target.jsonl"), ("dangling.jsonl", "new.jsonl")):
        assert os.readlink(tmp_path / link) == target
        assert (tmp_path / target).read_bytes() == data


@parsed_once
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_export_to_a_fifo_writes_through_it(store, tmp_path):
    """A FIFO (or a device, /dev/stdout) is written straight through, as writeFileSync
    does: the rename replaced it with a file, and its reader got nothing."""
    import threading

    sid, data = _demo(store)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert store.export_jsonl(sid, fifo) == 15
    reader.join(timeout=10)  # a FIFO replaced by a file leaves the reader waiting for good
    assert got == [data]
    assert fifo.is_fifo()


@parsed_once
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full")
def test_export_to_a_full_device_names_it(store):
    sid, _ = _demo(store)
    with pytest.raises(OSError) as e:
        store.export_jsonl(sid, "/dev/full")
    assert (e.value.errno, e.value.filename) == (28, "/dev/full")  # ENOSPC
    assert Path("/dev/full").is_char_device()


@parsed_once
def test_export_below_a_file_is_not_a_directory(store, tmp_path):
    """A folder of the path that is a file: ENOTDIR, as open() says (it said 'File exists')."""
    sid, _ = _demo(store)
    (tmp_path / "afile").write_text("kept")
    for dest in (tmp_path / "afile" / "x.jsonl", tmp_path / "afile" / "sub" / "x.jsonl"):
        with pytest.raises(NotADirectoryError) as e:
            store.export_jsonl(sid, dest)
        assert e.value.filename == os.fspath(dest)
    assert (tmp_path / "afile").read_text() == "kept"


@parsed_once
def test_export_to_a_text_stream_and_a_path(store, tmp_path):
    store.import_jsonl(DATA / "unicode.jsonl")
    sid = "u-2026-0001"
    text = io.StringIO()
    store.export_jsonl(sid, text)
    data = (DATA / "unicode.jsonl").read_bytes()
    assert text.getvalue().encode("utf-8") == data
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old content")
    assert store.export_jsonl(sid, target) == data.count(b"\n") - 1
    assert target.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events.db")) == ["out.jsonl"]


# --- salvage -------------------------------------------------------------------------------------

def test_salvage_keeps_the_prefix_of_a_truncated_file(store, tmp_path):
    tail = b'{"type":"assistant/chunk","seq":3,"ts":1764460800.4,"delta":{"content":"he'
    content = lines(META, ev(0), ev(1), ev(2), tail, end=b"")
    path = tmp_path / "crash.jsonl"
    path.write_bytes(content)
    with pytest.raises(InvalidJSONL):
        store.import_jsonl(path)
    assert store.sessions() == []
    rep = import_jsonl(store, path, salvage=True)
    reason = (f"{path}:5: truncated last line (no newline at the end; invalid JSON: "
              f"Unterminated string starting at column 72)")
    assert rep.dropped == Dropped(5, 5, 1, len(tail), reason)
    assert str(rep.dropped) == f"dropped line 5 (1 line, {len(tail)} bytes): {reason}"
    assert (rep.status, rep.events, rep.total, rep.lines, rep.bytes) == ("imported", 3, 3, 5, len(content))
    assert export_bytes(store, "s1") == lines(META, ev(0), ev(1), ev(2))


def test_salvage_drops_everything_from_the_first_bad_line(store, tmp_path):
    bad = b'{"type":"a","seq":2,"ts":1,"x":"\xff"}'
    rest = [ev(3), b"", ev(4)]
    content = lines(META, ev(0), ev(1), bad, *rest)
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(content)
    rep = import_jsonl(store, path, salvage=True)
    dropped_bytes = len(lines(bad, *rest))
    assert rep.dropped == Dropped(4, 7, 4, dropped_bytes, f"{path}:4: invalid UTF-8 at byte 33 of the line")
    assert export_bytes(store, "s1") == lines(META, ev(0), ev(1))


def test_salvage_with_a_bad_meta_line_keeps_nothing(store, tmp_path):
    path = tmp_path / "nometa.jsonl"
    path.write_bytes(lines(b'{"type":"session/meta"', ev(0)))
    with pytest.raises(InvalidJSONL, match=r":1: invalid JSON"):
        import_jsonl(store, path, salvage=True)
    assert store.sessions() == []


def test_salvage_when_the_database_refuses_a_row(store, tmp_path):
    # the refused row is in the middle of a multi-row INSERT: the rows before it stay
    evs = [ev(i, event_id=f"k{i}") for i in range(120)]
    evs[77] = ev(77, event_id="k3")
    path = tmp_path / "dup.jsonl"
    content = lines(META, *evs)
    path.write_bytes(content)
    with pytest.raises(InvalidJSONL) as info:
        store.import_jsonl(path)
    assert str(info.value) == (f'{path}:79: event_id "k3" is already used by seq 3 of session "s1" '
                               f'(event_id is an idempotency key, unique per session)')
    rep = import_jsonl(store, path, salvage=True)
    assert rep.events == 77
    assert rep.dropped == Dropped(79, 121, 43, len(lines(*evs[77:])), str(info.value))
    assert export_bytes(store, "s1") == lines(META, *evs[:77])
    assert stored_hashes(store, "s1") == chain_of("s1", lines(META, *evs[:77]), store)


def test_a_bad_line_right_after_a_full_batch_is_an_error_without_salvage(store, tmp_path, monkeypatch):
    from eventstore.io import bulk

    # batches of 100 rows in process and 20 in the worker (5,000 and 1,000 as shipped):
    # 100 events are a whole number of batches in both
    monkeypatch.setattr(bulk, "BATCH_ROWS", 100)
    monkeypatch.setattr(parse_worker, "WORKER_BATCH_ROWS", 20)
    n = 100
    evs = [ev(i) for i in range(n)]
    path = tmp_path / "cut.jsonl"
    path.write_bytes(lines(META, *evs, b'{"type":"a","se'))
    with pytest.raises(InvalidJSONL) as info:
        import_jsonl(store, path)
    assert str(info.value).startswith(f"{path}:{n + 2}: invalid JSON")
    assert store.sessions() == []
    rep = import_jsonl(store, path, salvage=True)
    assert rep.events == n and rep.dropped.first_line == n + 2


def test_salvaged_prefix_reimported_with_salvage_is_skipped(store, tmp_path):
    path = tmp_path / "crash.jsonl"
    path.write_bytes(lines(META, ev(0), ev(1), b'{"type":"a","se', end=b""))
    import_jsonl(store, path, salvage=True)
    rep = import_jsonl(store, path, salvage=True)
    assert (rep.status, rep.events, rep.note) == ("skipped", 0, "the stored session holds the same events")
    assert rep.dropped is not None and rep.dropped.first_line == 4


# --- re-import ---------------------------------------------------------------------------------

@pytest.fixture
def stored(store, tmp_path):
    """Session s1 stored with events 0..2 from s1.jsonl."""
    path = tmp_path / "s1.jsonl"
    path.write_bytes(lines(META, ev(0), ev(1, "b", x=1), ev(2)))
    store.import_jsonl(path)
    return path


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_reimport_identical_is_skipped(store, stored):
    before = db_rows(store, "SELECT position, hash FROM events ORDER BY position")
    rep = import_jsonl(store, stored)
    assert (rep.status, rep.events, rep.total) == ("skipped", 0, 3)
    assert rep.note == "the stored session holds the same events"
    assert db_rows(store, "SELECT position, hash FROM events ORDER BY position") == before


def test_reimport_noncanonical_spelling_of_the_same_events_is_skipped(store, stored, tmp_path):
    path = write(tmp_path, "spaced.jsonl", lines(META, b"", ev(0), b'{"seq":1,"type":"b","ts":1764460800.125,"x":1.0}',
                                                   ev(2) + b"\r"))
    assert import_jsonl(store, path).status == "skipped"


@pytest.mark.parametrize(("changed", "what"), [
    (ev(1, "b", x=2), "payload"), (ev(1, "c", x=1), "type"),
    (b'{"type":"b","seq":1,"ts":5,"x":1}', "ts"), (ev(1, "b", x=1, y=None), "payload"),
])
def test_reimport_with_other_events_is_a_conflict_naming_the_first_differing_line(store, stored, tmp_path,
                                                                                   changed, what):
    path = write(tmp_path, "other.jsonl", lines(META, ev(0), changed, ev(2, "zzz"), ev(3)))
    with pytest.raises(ImportConflict) as info:
        import_jsonl(store, path, append=True)
    assert str(info.value) == f'{path}:3: session "s1" is already stored with other events: seq 1 differs ({what})'
    assert info.value.session_id == "s1"
    assert store.session("s1").next_seq() == 3


def test_reimport_of_a_longer_file_needs_append(store, stored, tmp_path):
    path = write(tmp_path, "more.jsonl", lines(META, ev(0), ev(1, "b", x=1), ev(2), ev(3), ev(4)))
    with pytest.raises(ImportConflict) as info:
        import_jsonl(store, path)
    assert str(info.value) == (f'{path}:5: session "s1" is already stored with 3 events; this file continues it '
                               f'from seq 3 (use --append to add the rest)')
    assert store.session("s1").next_seq() == 3
    rep = import_jsonl(store, path, append=True)
    assert (rep.status, rep.events, rep.total) == ("appended", 2, 5)
    data = export_bytes(store, "s1")
    assert data == path.read_bytes()
    # the appended events continue the stored hash chain
    assert stored_hashes(store, "s1") == chain_of("s1", data, store)
    assert import_jsonl(store, path, append=True).status == "skipped"


def test_append_across_batches_and_after_other_sessions(store, tmp_path, monkeypatch):
    from eventstore.io import bulk

    monkeypatch.setattr(bulk, "BATCH_ROWS", 7)
    evs = [ev(i, x="y" * (i % 5)) for i in range(60)]
    store.import_jsonl(write(tmp_path, "p.jsonl", lines(META, *evs[:23])))
    store.import_jsonl(DATA / "demo.jsonl")  # other positions in between
    rep = import_jsonl(store, write(tmp_path, "all.jsonl", lines(META, *evs)), append=True)
    assert (rep.events, rep.total) == (37, 60)
    data = export_bytes(store, "s1")
    assert data == lines(META, *evs)
    assert stored_hashes(store, "s1") == chain_of("s1", data, store)
    positions = [p for (p,) in db_rows(store, "SELECT position FROM events WHERE session_id='s1' ORDER BY seq")]
    assert positions == sorted(positions) and len(set(positions)) == 60


def test_reimport_of_a_shorter_file_is_skipped_with_a_note(store, stored, tmp_path):
    path = write(tmp_path, "short.jsonl", lines(META, ev(0), ev(1, "b", x=1)))
    rep = import_jsonl(store, path, append=True)
    assert (rep.status, rep.note) == ("skipped", "the stored session holds the file's 2 events and 1 more")


def test_append_when_the_store_went_on_differently_is_a_conflict(store, stored, tmp_path):
    store.session("s1").append("live", {"n": 1}, ts=9.0)
    path = write(tmp_path, "more.jsonl", lines(META, ev(0), ev(1, "b", x=1), ev(2), ev(3)))
    with pytest.raises(ImportConflict, match=r":5: session \"s1\" is already stored with other events: seq 3 differs"):
        import_jsonl(store, path, append=True)


def test_reimport_with_other_meta_keys_is_a_conflict(store, stored, tmp_path):
    path = write(tmp_path, "meta.jsonl", lines(b'{"type":"session/meta","id":"s1","agent":"x"}', ev(0)))
    with pytest.raises(ImportConflict) as info:
        import_jsonl(store, path)
    assert str(info.value) == f'{path}:1: session "s1" is already stored with other session/meta keys: "agent" ' \
                              f'(none stored, "x" here)'


def test_reimport_compares_the_events_and_leaves_the_chain_to_verify(store, stored, tmp_path, raw):
    """The stored events are salted, so a file's lines do not give their hashes: a re-import
    compares type, ts and payload, and verify finds the edited hash."""
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET hash = ? WHERE seq = 1", ("0" * 64,))
    assert import_jsonl(store, stored).status == "skipped"  # the same events
    assert ("hash", 1) in [(f.kind, f.seq) for f in audit.verify(store._backend).findings]


def test_meta_keys_survive_import_and_export(store, tmp_path):
    content = lines(b'{"type":"session/meta","id":"m","agent":"coder","tags":["a",1]}', ev(0))
    store.import_jsonl(write(tmp_path, "m.jsonl", content))
    assert export_bytes(store, "m") == content


# --- export to a folder: hostile ids ---------------------------------------------------------------

HOSTILE = [
    "../escape", "..", ".", "/etc/passwd", "/", "a/b/c", "a\\b", "C:\\Windows\\evil", "c:evil", "\\\\server\\share",
    "a\x00b", "a\x00", "x" * 300, "é" * 150, "y" * 183 + "%", "Abc", "abc", "ABC", "aBc", "%41bc", "%2E%2E",
    "con", "CON", "nul", "com1", "lpt9", "aux.txt", " lead", "trail.", "trail ", ".hidden", "-", "--all", "~",
    "a~b", "日本語", "\n", "a\tb", "emoji 😀", "\u202e reversed", "*?<>|\"", "x.jsonl", "~" + "z" * 250,
]


def test_export_folder_with_hostile_ids_stays_inside_and_maps_back(tmp_path):
    parent = tmp_path / "parent"
    out = parent / "out"
    with EventStore.open(tmp_path / "h.db") as st:
        for i, sid in enumerate(HOSTILE):
            st.create_session(sid).append("user/message", {"content": f"session {i}"}, ts=float(i))
        written = export_sessions(st, out)
    assert [p.name for p in parent.iterdir()] == ["out"]  # nothing written beside the folder
    entries = sorted(out.iterdir())
    assert len(entries) == len(HOSTILE) == len(written)
    assert all(e.is_file() and not e.is_symlink() and e.parent == out for e in entries)
    names = [e.name for e in entries]
    assert len({n.lower() for n in names}) == len(names)  # distinct on a case-insensitive file system
    assert all(len(n.encode()) <= 255 and not n.startswith(".") and n.endswith(".jsonl") for n in names)
    for sid, path, n in written:
        assert path.parent == out and n == 1
        first = json.loads(path.read_bytes().split(b"\n")[0])
        assert first == {"type": "session/meta", "id": sid}
        back = session_id_from_file_name(path.name)
        assert back == sid or (back is None and "~" in path.name and len(file_name_for(sid)) > 200)
    # and the folder imports back to the same sessions, byte for byte
    with EventStore.open(tmp_path / "back.db") as st2:
        reps = [import_jsonl(st2, p) for p in sorted(out.iterdir())]
        assert sorted(r.session_id for r in reps) == sorted(HOSTILE)
        for sid, path, _n in written:
            assert export_bytes(st2, sid) == path.read_bytes()


def test_a_session_id_starting_with_nul_round_trips(store, tmp_path):
    # SQLite's length() stops at NUL: the schema's not-empty CHECK compares with '' instead
    path = write(tmp_path, "nul.jsonl", lines(b'{"type":"session/meta","id":"\\u0000x"}', ev(0)))
    if store._backend.name == "postgresql":  # PostgreSQL's text cannot hold U+0000
        with pytest.raises(InvalidEvent, match="NUL"):
            store.import_jsonl(path)
        assert store.sessions() == []
        return
    assert store.import_jsonl(path) == "\x00x"
    out = io.BytesIO()
    store.export_jsonl("\x00x", out)
    assert out.getvalue() == path.read_bytes()


@parsed_once
def test_file_names_are_a_one_to_one_map():
    names = [file_name_for(s) for s in HOSTILE]
    assert len(set(names)) == len(names)
    assert file_name_for("Abc") == "%41bc.jsonl" and file_name_for("abc") == "abc.jsonl"
    assert file_name_for("../x") == "%2E%2E%2Fx.jsonl"
    assert file_name_for("con") == "%63on.jsonl"
    assert session_id_from_file_name("abc.jsonl") == "abc"
    assert session_id_from_file_name("ABC.jsonl") is None  # not a name file_name_for writes
    assert session_id_from_file_name("%63on.jsonl") == "con"
    assert session_id_from_file_name("con.jsonl") is None


@parsed_once
def test_export_selected_sessions_and_unknown_ids(store, tmp_path):
    for sid in ("a", "b", "c"):
        store.create_session(sid).append("x", {}, ts=1.0)
    written = export_sessions(store, tmp_path / "sel", ["c", "a", "c"])
    assert [(s, p.name, n) for s, p, n in written] == [("c", "c.jsonl", 1), ("a", "a.jsonl", 1)]
    with pytest.raises(SessionNotFound):
        export_sessions(store, tmp_path / "none", ["a", "missing"])
    assert not (tmp_path / "none").exists()  # checked before writing anything


@parsed_once
def test_export_replaces_atomically_and_leaves_no_temporary_file(store, tmp_path, monkeypatch):
    store.create_session("a").append("x", {"n": 1}, ts=1.0)
    target = tmp_path / "a.jsonl"
    target.write_bytes(b"previous")

    def boom(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store._backend, "export_chunks", boom)
    with pytest.raises(OSError):
        export_session(store, "a", target)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@parsed_once
def test_export_streams_in_pages(store, monkeypatch):
    from eventstore.backends.sqlite import export as sqlite
    from eventstore.log import line

    monkeypatch.setattr(line, "PAGE_ROWS", 3)  # the neutral pages
    for module in (line, sqlite):  # and SQLite's own
        monkeypatch.setattr(module, "EXPORT_BUFFER", 50)
    monkeypatch.setattr(sqlite, "EXPORT_PAGE", 3)
    s = store.create_session("p")
    s.append_many([("t", {"i": i}, float(i)) for i in range(10)])
    chunks = list(store._backend.export_chunks("p", "{}"))
    assert len(chunks) > 4 and sum(n for _c, _b, n in chunks) == 10
    assert b"".join(b"".join(c) for c, _b, _n in chunks) == export_bytes(store, "p")
    assert export_session(store, "p", io.BytesIO()) == 10


@parsed_once
def test_pages_of_rows_are_bounded_by_bytes(store, monkeypatch):
    """export_rows(max_bytes) cuts a page where the payloads before a row reach the bound
    (the first row always comes), on every backend; row_pages goes through the whole
    session so, and chunks_from_rows (PostgreSQL's export, copy) writes the same bytes."""
    from eventstore.log import line
    from eventstore.log.line import chunks_from_rows, row_pages

    # half the page (and payloads half the size): each bound still falls between rows as
    # before; the larger payloads are still past the SQLite export's BIG_PAYLOAD characters
    monkeypatch.setattr(line, "PAGE_BYTES", line.PAGE_BYTES // 2)
    s = store.create_session("b")
    sizes = [10, 200_000, 10, 350_000, 1_000_000, 10, 10, 450_000, 150_000]
    s.append_many([("t", {"x": "é" * (n // 2)}, float(i)) for i, n in enumerate(sizes)])
    rows = store._backend.export_rows("b", -1, 100)
    lens = [len(r[3].encode()) for r in rows]
    for after in range(-1, len(sizes) - 1):
        for bound in (1, 250_000, 600_000, 10**9):
            got = store._backend.export_rows("b", after, 100, bound)
            rest = lens[after + 1:]
            k = 1
            while k < len(rest) and sum(rest[:k]) < bound:
                k += 1
            assert [r[1] for r in got] == list(range(after + 1, after + 1 + k)), (after, bound)
    assert [r[1] for r in store._backend.export_rows("b", 2, 2, 10**9)] == [3, 4]
    pages = list(row_pages(store._backend, "b"))
    assert [r for p in pages for r in p] == rows and len(pages) > 2
    assert all(sum(len(r[3].encode()) for r in p[:-1]) < line.PAGE_BYTES for p in pages)
    assert [r[1] for p in row_pages(store._backend, "b", 1, limit=4) for r in p] == [2, 3, 4, 5]
    assert b"".join(b"".join(c) for c, _b, _n in chunks_from_rows(store._backend, "b", "{}")) == export_bytes(store, "b")


@parsed_once
def test_stdin_like_stream_import(store):
    data = (DATA / "demo.jsonl").read_bytes()
    assert store.import_jsonl(io.BytesIO(data), name="-") == "5a1b896f-beb"
    with pytest.raises(InvalidJSONL, match=r"^-:2: "):
        store.import_jsonl(io.BytesIO(META + b"\n{\n"), name="-")
    assert os.path.basename("-") == "-"


def test_an_event_type_holding_nul_is_stored_or_refused_by_line(store, tmp_path):
    path = write(tmp_path, "nul-type.jsonl", lines(b'{"type":"session/meta","id":"nt"}',
                                                    b'{"type":"a\\u0000b","seq":0,"ts":1}'))
    if store._backend.name == "postgresql":  # PostgreSQL's text cannot hold U+0000
        with pytest.raises(InvalidEvent, match=r"nul-type\.jsonl:2: .*NUL"):
            store.import_jsonl(path)
        assert store.sessions() == []
        return
    assert store.import_jsonl(path) == "nt"
    assert export_bytes(store, "nt") == path.read_bytes()
