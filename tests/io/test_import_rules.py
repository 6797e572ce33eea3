"""JSONL import: every rejection rule (small file, exact ``FILE:LINE: reason``), the lenient
cases the reference allows, and atomicity (a bad file stores nothing).

Each rule runs three times: with orjson (the fast path takes canonical lines), without
(every line goes through the standard library), and in the parse worker process (as files
of a megabyte or more are read; see eventstore.io.parse_worker), so all give the same verdicts.
"""

from __future__ import annotations

import io

import pytest
from conftest import db_rows

from eventstore import EventStore, InvalidJSONL
from eventstore.io import jsonl as jsonl_mod
from eventstore.io import parse_worker
from eventstore.io.bulk import import_jsonl
from eventstore.io.jsonl import JsonlReader

META = b'{"type":"session/meta","id":"s1"}'
E0 = b'{"type":"a","seq":0,"ts":1}'
E1 = b'{"type":"a","seq":1,"ts":2}'


@pytest.fixture(params=["orjson", "stdlib", "worker"])
def path_kind(request, monkeypatch):
    if request.param == "stdlib":  # the reader's slow path: the standard library parses every line
        monkeypatch.setattr(jsonl_mod, "_fast_line", lambda raw: None)
        monkeypatch.setattr(jsonl_mod, "_fast_rows", lambda *args: None)
    elif request.param == "worker":
        monkeypatch.setattr(parse_worker, "PARALLEL_MIN_BYTES", 0)
    return request.param


def lines(*parts: bytes, end: bytes = b"\n") -> bytes:
    return b"\n".join(parts) + end


# (file content, line, reason)
REJECTED = [
    # malformed JSON
    (lines(META, b'{"type":"a","seq":0,"ts":1,}'), 2,
     "invalid JSON: Expecting property name enclosed in double quotes at column 28"),
    (lines(META, b'{"type":"a" "seq":0}'), 2, "invalid JSON: Expecting ',' delimiter at column 13"),
    (lines(META, b"{"), 2, "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
    (lines(META, E0, b'{"type":"a","seq":1,"ts":2} x'), 3, "invalid JSON: Extra data at column 29"),
    # a truncated last line (no newline at the end) says so; the same line ended is just invalid
    (lines(META, E0, b'{"type":"a","seq":1,"ts":2,"content":"hel', end=b""), 3,
     "truncated last line (no newline at the end; invalid JSON: Unterminated string starting at column 38)"),
    (lines(META, E0, b'{"type":"a","seq":1,"ts"', end=b""), 3,
     "truncated last line (no newline at the end; invalid JSON: Expecting ':' delimiter at column 25)"),
    (lines(META, E0, b'{"type":"a","seq":1,"ts"'), 3, "invalid JSON: Expecting ':' delimiter at column 25"),
    # not an object
    (lines(META, b"[1,2]"), 2, "not a JSON object but an array"),
    (lines(META, b'"text"'), 2, "not a JSON object but a string"),
    (lines(META, b"42"), 2, "not a JSON object but the number 42"),
    (lines(META, b"null"), 2, "not a JSON object but null"),
    # type
    (lines(META, b'{"seq":0,"ts":1}'), 2, "'type' is missing"),
    (lines(META, b'{"type":7,"seq":0,"ts":1}'), 2, "'type' must be a non-empty string, not the number 7"),
    (lines(META, b'{"type":null,"seq":0,"ts":1}'), 2, "'type' must be a non-empty string, not null"),
    (lines(META, b'{"type":"","seq":0,"ts":1}'), 2, "'type' must be a non-empty string, not an empty string"),
    (lines(META, b'{"type":["a"],"seq":0,"ts":1}'), 2, "'type' must be a non-empty string, not an array"),
    (lines(META, b'{"type":"\\ud800","seq":0,"ts":1}'), 2, "'type' \"\\ud800\" holds a lone UTF-16 surrogate"),
    # seq
    (lines(META, b'{"type":"a","ts":1}'), 2, "'seq' is missing"),
    (lines(META, b'{"type":"a","seq":"0","ts":1}'), 2, "'seq' must be an integer, not a string"),
    (lines(META, b'{"type":"a","seq":0.5,"ts":1}'), 2, "'seq' must be an integer, not the number 0.5"),
    (lines(META, b'{"type":"a","seq":true,"ts":1}'), 2, "'seq' must be an integer, not a boolean"),
    (lines(META, b'{"type":"a","seq":null,"ts":1}'), 2, "'seq' must be an integer, not null"),
    (lines(META, b'{"type":"a","seq":1,"ts":1}'), 2, "'seq' must start at 0, found 1"),
    (lines(META, E0, b'{"type":"a","seq":2,"ts":1}'), 3, "'seq' 2 is not the next one (1 expected: gap)"),
    (lines(META, E0, E0), 3, "'seq' 0 is not the next one (1 expected: duplicated)"),
    (lines(META, E0, E1, E1), 4, "'seq' 1 is not the next one (2 expected: duplicated)"),
    (lines(META, b'{"type":"a","seq":9007199254740992,"ts":1}'), 2,
     "'seq' 9007199254740992 is out of range (0 to 2**53-1)"),
    (lines(META, b'{"type":"a","seq":1e300,"ts":1}'), 2, "'seq' must be an integer, not the number 1e+300"),
    (lines(META, b'{"type":"a","seq":-1,"ts":1}'), 2, "'seq' -1 is out of range (0 to 2**53-1)"),
    # ts
    (lines(META, b'{"type":"a","seq":0}'), 2, "'ts' is missing"),
    (lines(META, b'{"type":"a","seq":0,"ts":"1"}'), 2, "'ts' must be a finite number (seconds), not a string"),
    (lines(META, b'{"type":"a","seq":0,"ts":null}'), 2, "'ts' must be a finite number (seconds), not null"),
    (lines(META, b'{"type":"a","seq":0,"ts":false}'), 2, "'ts' must be a finite number (seconds), not a boolean"),
    (lines(META, b'{"type":"a","seq":0,"ts":1e400}'), 2,
     "'ts' must be a finite number (seconds), not 1e400, a number beyond the largest double (about 1.8e308): JavaScript reads it as Infinity, which JSON cannot hold"),
    # NaN and Infinity anywhere (JavaScript never writes them)
    (lines(META, b'{"type":"a","seq":0,"ts":NaN}'), 2, "invalid JSON: NaN is not valid JSON"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":[1,{"y":Infinity}]}'), 2,
     "invalid JSON: Infinity is not valid JSON"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":-Infinity}'), 2, "invalid JSON: -Infinity is not valid JSON"),
    (lines(b'{"type":"session/meta","id":"s1","x":NaN}', E0), 1, "invalid JSON: NaN is not valid JSON"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":1e999}'), 2,
     "not JSON: 1e999, a number beyond the largest double (about 1.8e308): JavaScript reads it as Infinity, which JSON cannot hold"),
    # numbers a double cannot hold exactly are refused, not rounded
    (lines(META, b'{"type":"a","seq":0,"ts":1,"n":12345678901234567890}'), 2,
     "integer 12345678901234567890 cannot be stored exactly as a JSON number (IEEE double)"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"n":[-9007199254740993]}'), 2,
     "integer -9007199254740993 cannot be stored exactly as a JSON number (IEEE double)"),
    # raw control characters are not JSON (JSON.parse refuses them too)
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":"a\x01b"}'), 2,
     "invalid JSON: Invalid control character at column 34"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":"a\rb"}'), 2,
     "invalid JSON: Invalid control character at column 34"),
    # invalid UTF-8
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":"\xff"}'), 2, "invalid UTF-8 at byte 33 of the line"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":"\xed\xa0\x80"}'), 2, "invalid UTF-8 at byte 33 of the line"),
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":"\xe2\x82"}'), 2, "invalid UTF-8 at byte 33 of the line"),
    (b"\xef\xbb\xbf" + lines(META, E0), 1, "invalid JSON: the line starts with a byte order mark (U+FEFF)"),
    # session/meta
    (lines(META, b'{"type":"session/meta","id":"s2"}', E0), 2,
     'second session/meta names another id ("s2", line 1 named "s1")'),
    (lines(META, b'{"type":"session/meta","id":"s1","agent":"x"}', E0), 2,
     "second session/meta with other keys than line 1"),
    (lines(META, E0, META), 3, "session/meta after the first event"),
    (lines(b'{"type":"session/meta"}', E0), 1, "session/meta needs a non-empty string 'id', it has none"),
    (lines(b'{"type":"session/meta","id":5}', E0), 1, "session/meta needs a non-empty string 'id', not the number 5"),
    (lines(b'{"type":"session/meta","id":"\\udc00"}', E0), 1,
     'session id "\\udc00" holds a lone UTF-16 surrogate'),
    (lines(E0, E1), 1, "event before any session/meta line (no session id; give one with --session-id)"),
    (lines(b"", b"  ", E0), 3, "event before any session/meta line (no session id; give one with --session-id)"),
    (b"", 0, "the file is empty: no session/meta line and no events (give the id with --session-id)"),
    (b"\n\n \n", 0, "no session/meta line and no events (give the id with --session-id)"),
    # nesting deeper than any parser keeps
    (lines(META, b'{"type":"a","seq":0,"ts":1,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 2,
     "invalid JSON: nested too deeply"),
    # the idempotency key is unique per session (the database says so; the line is named)
    (lines(META, b'{"type":"a","seq":0,"ts":1,"event_id":"k"}', b'{"type":"b","seq":1,"ts":1,"event_id":"k"}'), 3,
     'event_id "k" is already used by seq 0 of session "s1" (event_id is an idempotency key, unique per session)'),
    # ... and a string (the guard trigger refuses any other JSON type)
    *[(lines(META, b'{"type":"a","seq":0,"ts":1,"event_id":' + v + b"}"), 2,
       "event_id must be a string (it is the event's idempotency key)")
      for v in (b"5", b"null", b"{}", b"[1]", b"1.5", b"true")],
]


def _rejected_params():
    """REJECTED as parameters. A verdict the reader gives before anything is written does not
    depend on the database: it runs with one store (``one_backend``), and the test checks that
    no write transaction began (these files are far shorter than a batch: the reader reads the
    first batch, up to the bad line, before the import begins one). Every backend still meets
    the verdicts the database gives (event_id)."""
    for i, (content, line, reason) in enumerate(REJECTED):
        by_database = "event_id" in reason
        yield pytest.param(content, line, reason, by_database, id=f"{i:02d}-{reason[:40]}",
                           marks=() if by_database else pytest.mark.one_backend)


@pytest.mark.parametrize(("content", "line", "reason", "by_database"), list(_rejected_params()))
def test_rejected_with_file_line_reason_and_nothing_stored(store, tmp_path, path_kind, monkeypatch, content, line,
                                                           reason, by_database):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    if not by_database:  # the reader's verdict comes before any write transaction (see _rejected_params)
        def no_transaction(*args, **kwargs):
            raise AssertionError("a write transaction began before the reader's verdict")

        monkeypatch.setattr(store._backend, "import_transaction", no_transaction)
    with pytest.raises(InvalidJSONL) as info:
        store.import_jsonl(path)
    assert str(info.value) == (f"{path}:{line}: {reason}" if line else f"{path}: {reason}")
    assert (info.value.path, info.value.line, info.value.reason) == (str(path), line, reason)
    assert store.sessions() == []
    assert db_rows(store, "SELECT count(*) FROM events") == [(0,)]


def test_meta_naming_another_id_than_session_id_option(store, tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(lines(META, E0))
    with pytest.raises(InvalidJSONL) as info:
        store.import_jsonl(path, session_id="other")
    assert str(info.value) == f'{path}:1: session/meta names session "s1", not the given session id "other"'
    assert store.import_jsonl(path, session_id="s1") == "s1"


def test_session_id_option_for_a_file_without_meta(store, tmp_path, path_kind):
    path = tmp_path / "nometa.jsonl"
    path.write_bytes(lines(E0, E1))
    assert store.import_jsonl(path, session_id="given") == "given"
    out = io.BytesIO()
    assert store.export_jsonl("given", out) == 2
    assert out.getvalue() == lines(b'{"type":"session/meta","id":"given"}', E0, E1)


def test_session_id_option_for_an_empty_file(store, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert store.import_jsonl(path, session_id="e") == "e"
    assert store.session("e").next_seq() == 0


def test_file_with_only_a_meta_line_is_an_empty_session(store, tmp_path, path_kind):
    path = tmp_path / "m.jsonl"
    path.write_bytes(lines(META))
    assert store.import_jsonl(path) == "s1"
    assert store.session("s1").next_seq() == 0


# --- lenient where the reference is ---------------------------------------------------------

def export_bytes(store: EventStore, sid: str) -> bytes:
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


def test_crlf_blank_lines_and_meta_after_blank_lines(store, tmp_path, path_kind):
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b"\r\n  \r\n" + META + b"\r\n\r\n" + E0 + b"\r\n\t\n" + E1 + b"\r\n\r\n")
    assert store.import_jsonl(path) == "s1"
    assert export_bytes(store, "s1") == lines(META, E0, E1)


def test_lines_that_trim_to_nothing_in_javascript_are_blank(store, tmp_path, path_kind):
    # String.prototype.trim() also strips NBSP, U+FEFF, U+2028, U+3000...
    blank = "\u00a0\ufeff\u2028\u3000 \t".encode()
    path = tmp_path / "ws.jsonl"
    path.write_bytes(lines(META, blank, E0))
    store.import_jsonl(path)
    assert export_bytes(store, "s1") == lines(META, E0)


def test_meta_line_repeated_identically_before_the_first_event(store, tmp_path):
    path = tmp_path / "twice.jsonl"
    path.write_bytes(lines(META, META, E0))
    store.import_jsonl(path)
    assert export_bytes(store, "s1") == lines(META, E0)


def test_line_separators_inside_strings_are_content(store, tmp_path, path_kind):
    # U+2028, U+2029, U+0085 do not end a line (str.splitlines() would split there)
    e = '{"type":"a","seq":0,"ts":1,"text":"a\u2028b\u2029c\u0085d\x7fe","k\u2028":1}'.encode()
    path = tmp_path / "sep.jsonl"
    path.write_bytes(lines(META, e))
    store.import_jsonl(path)
    ev = next(store.session("s1").events())
    assert ev.payload == {"text": "a\u2028b\u2029c\u0085d\x7fe", "k\u2028": 1}
    assert export_bytes(store, "s1") == lines(META, e)


def test_last_line_without_newline_is_kept_when_complete(store, tmp_path, path_kind):
    path = tmp_path / "nonl.jsonl"
    path.write_bytes(lines(META, E0, E1, end=b""))
    store.import_jsonl(path)
    assert export_bytes(store, "s1") == lines(META, E0, E1)


def test_seq_written_as_a_float_is_the_same_number(store, tmp_path, path_kind):
    path = tmp_path / "f.jsonl"
    path.write_bytes(lines(META, b'{"type":"a","seq":0.0,"ts":1}', b'{"type":"a","seq":1e0,"ts":2}'))
    store.import_jsonl(path)
    assert export_bytes(store, "s1") == lines(META, E0, E1)


NONCANONICAL = [
    # (line in the file, what JSON.stringify(JSON.parse(line)) writes)
    (b'{ "type" : "a", "seq" : 0, "ts" : 1 }', E0),
    (b'{"type":"a","seq":0,"ts":1.0,"x":5.0,"y":-0.0,"z":-0}', b'{"type":"a","seq":0,"ts":1,"x":5,"y":0,"z":0}'),
    (b'{"type":"a","seq":0,"ts":1,"x":1E5,"y":1e-7,"z":1e21,"w":1e-6,"v":0.1e1}',
     b'{"type":"a","seq":0,"ts":1,"x":100000,"y":1e-7,"z":1e+21,"w":0.000001,"v":1}'),
    (b'{"type":"a","seq":0,"ts":1,"x":1.50,"y":123456789012345680000,"z":10000000000000000}',
     b'{"type":"a","seq":0,"ts":1,"x":1.5,"y":123456789012345680000,"z":10000000000000000}'),
    (b'{"type":"a","seq":0,"ts":1,"s":"\\u00e9\\/\\u0041\\u001F\\ud83d\\ude00"}',
     '{"type":"a","seq":0,"ts":1,"s":"é/A\\u001f😀"}'.encode()),
    (b'{"type":"a","seq":0,"ts":1,"x":1,"x":2}', b'{"type":"a","seq":0,"ts":1,"x":2}'),
    (b'{"type":"a","seq":0,"ts":1,"x":{"b":1,"a":[1, 2]}}', b'{"type":"a","seq":0,"ts":1,"x":{"b":1,"a":[1,2]}}'),
    # lines that orjson writes back unchanged but JavaScript would not
    (b'{"type":"a","seq":0,"ts":1,"x":5.0}', b'{"type":"a","seq":0,"ts":1,"x":5}'),
    (b'{"type":"a","seq":0,"ts":1.0}', E0),
    (b'{"type":"a","seq":0,"ts":1,"x":[-0.0,1e+16,1e-6,1.5e+20]}',
     b'{"type":"a","seq":0,"ts":1,"x":[0,10000000000000000,0.000001,150000000000000000000]}'),
    (b'{"type":"a","seq":0,"ts":1,"x":{"y":9007199254740993}}', None),
    (b'{"type":"a","seq":0,"ts":9007199254740994.0,"x":[-9999999999999998.0,1200000000000000.0]}',
     b'{"type":"a","seq":0,"ts":9007199254740994,"x":[-9999999999999998,1200000000000000]}'),
    # the known gap: type, seq, ts come first again (see docs/import-export.md)
    (b'{"seq":0,"x":1,"type":"a","ts":1}', b'{"type":"a","seq":0,"ts":1,"x":1}'),
]


@pytest.mark.parametrize(("line", "canonical"), NONCANONICAL)
def test_noncanonical_lines_are_stored_in_canonical_form(store, tmp_path, path_kind, line, canonical):
    path = tmp_path / "n.jsonl"
    path.write_bytes(lines(META, line))
    if canonical is None:  # refused rather than rounded
        with pytest.raises(InvalidJSONL, match="cannot be stored exactly"):
            import_jsonl(store, path)
        return
    rep = import_jsonl(store, path)
    assert rep.normalized == 1
    assert export_bytes(store, "s1") == lines(META, canonical)


def test_canonical_lines_are_not_counted_as_normalized(store, tmp_path, path_kind):
    path = tmp_path / "c.jsonl"
    content = lines(META, E0, b'{"type":"a","seq":1,"ts":1.5,"x":[1.25,{"y":"\\u0000"}]}',
                    # what JSON.stringify writes for the double 1.2345678901234568e20, and 2**53
                    b'{"type":"a","seq":2,"ts":1,"big":123456789012345680000,"n":9007199254740992}')
    path.write_bytes(content)
    assert import_jsonl(store, path).normalized == 0
    assert export_bytes(store, "s1") == content


# --- the reader on its own ---------------------------------------------------------------------

def test_reader_streams_in_chunks_across_line_boundaries(monkeypatch):
    monkeypatch.setattr(JsonlReader, "CHUNK", 7)  # every line spans several reads
    data = lines(META, b"", E0 + b"\r", E1)
    reader = JsonlReader(io.BytesIO(data), "x")
    assert [row[:3] for row in reader] == [(0, "a", 1.0), (1, "a", 2.0)]
    assert (reader.session_id, reader.meta_line, reader.lines, reader.bytes) == ("s1", 1, 4, len(data))


def test_reader_crlf_split_across_chunks(monkeypatch):
    data = META + b"\r\n" + E0 + b"\r\n"
    for chunk in range(1, len(data) + 1):
        monkeypatch.setattr(JsonlReader, "CHUNK", chunk)
        reader = JsonlReader(io.BytesIO(data), "x")
        assert [row[:3] for row in reader] == [(0, "a", 1.0)], chunk
        assert reader.normalized == 0


def test_reader_iteration_raises_the_first_error():
    reader = JsonlReader(io.BytesIO(lines(META, E0, b"oops", E1)), "f.jsonl")
    got = []
    with pytest.raises(InvalidJSONL, match=r"^f\.jsonl:3: invalid JSON"):
        for row in reader:
            got.append(row[0])
    assert got == [0]


def test_parse_line_slices_canonical_payloads():
    assert jsonl_mod.parse_line('{"type":"a","seq":0,"ts":1,"x":[1]}') == (
        {"type": "a", "seq": 0, "ts": 1, "x": [1]}, '{"x":[1]}')
    assert jsonl_mod.parse_line(E0) == ({"type": "a", "seq": 0, "ts": 1}, "{}")
    assert jsonl_mod.parse_line('{"type":"a","seq":0,"ts":1,"x":1.0}')[1] is None
    assert jsonl_mod.parse_line('{"seq":0,"type":"a","ts":1}')[1] is None
    with pytest.raises(ValueError):
        jsonl_mod.parse_line('{"x":NaN}')


def test_text_the_bulk_insert_must_escape_round_trips(store, tmp_path, path_kind, monkeypatch):
    """Tabs, newlines, carriage returns and backslashes in the session id, the type and the
    payload (the characters PostgreSQL's COPY text format escapes), in rows of both reader
    paths (str and bytes payloads): stored as they were, exported byte for byte."""
    import json

    sid = "s\\t\t\r\nx"
    events = [{"type": "a\tb\\c\nd\re", "seq": 0, "ts": 1.5, "text": "tab\there \\ back\\slash \r\n"},
              {"type": "plain", "seq": 1, "ts": 2, "v": "\\\\t"},
              {"type": "plain", "seq": 2, "ts": 3}]
    body = "\n".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in
                     [{"type": "session/meta", "id": sid}, *events]) + "\n"
    path = tmp_path / "odd.jsonl"
    path.write_bytes(body.encode())
    copies = []
    if store._backend.name == "postgresql":  # COPY itself takes the rows (no row-by-row fallback)
        from eventstore.backends.postgres.importer import PgImport

        def copy(self, rows, position0, _copy=PgImport._copy):
            copies.append(len(rows))
            n = _copy(self, rows, position0)
            copies.append(n)
            return n

        monkeypatch.setattr(PgImport, "_copy", copy)
    rep = import_jsonl(store, path)
    assert copies in ([], [3, 3])
    assert rep.status == "imported" and rep.total == 3
    got = db_rows(store, "SELECT type, payload FROM events WHERE session_id = ? ORDER BY seq", (sid,))
    assert [(t, json.loads(p)) for t, p in got] == [
        (e["type"], {k: v for k, v in e.items() if k not in ("type", "seq", "ts")}) for e in events]
    out = io.StringIO()
    store.export_jsonl(sid, out)
    assert out.getvalue() == body
    from eventstore.audit.verify import verify
    assert verify(store._backend).ok
