"""The JSONL codec writes exactly what JSON.stringify writes."""

from __future__ import annotations

import io
import json
import math
import subprocess

import pytest
from conftest import needs_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import InvalidEvent, InvalidJSONL
from eventstore.io.jsonl import JsonlReader, file_name_for, session_id_from_file_name
from eventstore.log.codec import dumps, js_number
from eventstore.log.line import event_line, meta_line


@pytest.mark.parametrize("value, text", [
    (0, "0"), (-0.0, "0"), (1.0, "1"), (-42, "-42"), (100.5, "100.5"), (1764460800.0, "1764460800"),
    (1e21, "1e+21"), (1e-7, "1e-7"), (5e-324, "5e-324"), (1e16, "10000000000000000"),
    (0.1 + 0.2, "0.30000000000000004"), (1 / 3, "0.3333333333333333"), (123456789012345680000.0, "123456789012345680000"),
    (1.5e300, "1.5e+300"), (-2.5e-8, "-2.5e-8"), (0.000001, "0.000001"), (0.0000001, "1e-7"), (2.0**60, "1152921504606847000"),
    (2**53, "9007199254740992"), (66773554652564690, "66773554652564690"), (10**21, "1e+21"),
    (2**60, "1152921504606847000"),  # exactly a double: JavaScript's digits for it
    (1e15 + 0.5, "1000000000000000.5"),
])
def test_js_number(value, text):
    assert js_number(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 2**53 + 1, 12345678901234567891, 10**400])
def test_js_number_refuses_what_javascript_cannot_hold(value):
    with pytest.raises(InvalidEvent):
        js_number(value)


@pytest.mark.parametrize("value, text", [
    ({"a": "é😀", "b": [True, False, None]}, '{"a":"é😀","b":[true,false,null]}'),
    ("\b\f\n\r\t\x00\x1f\x7f\u2028\u2029\ufeff\"\\/", '"\\b\\f\\n\\r\\t\\u0000\\u001f\x7f\u2028\u2029\ufeff\\"\\\\/"'),
    ("ab\ud83d", '"ab\\ud83d"'), ("\ude00x\ud83d\ude00", '"\\ude00x😀"'), ((1, 2), "[1,2]"), ({}, "{}"), ([], "[]"),
])
def test_dumps(value, text):
    assert dumps(value) == text


def test_keys_follow_javascript_property_order():
    """Array-index keys first, ascending; then the rest in insertion order (checked with node)."""
    value = {"b": 1, "0": 2, "10": 3, "2": 4, "01": 5, "-1": 6, "4294967294": 7, "4294967295": 8, "1.5": 9, "²": 10}
    assert dumps(value) == '{"0":2,"2":4,"10":3,"4294967294":7,"b":1,"01":5,"-1":6,"4294967295":8,"1.5":9,"²":10}'


def test_event_lines_put_index_keys_before_type_seq_ts():
    line = '{"0":"line zero","type":"tool/result","seq":0,"ts":1,"tool_call_id":"c1","content":"ok"}'
    _, rows = read_all(b'{"type":"session/meta","id":"s"}\n' + line.encode() + b"\n")
    assert rows[0][3] == '{"0":"line zero","tool_call_id":"c1","content":"ok"}'
    assert event_line("tool/result", 0, 1.0, rows[0][3]) == line
    assert meta_line("s", '{"7":true,"x":1}') == '{"7":true,"type":"session/meta","id":"s","x":1}'


# keys that JavaScript orders first (array indices) mixed with ordinary ones
js_keys = st.text(max_size=5) | st.integers(0, 2**33).map(str) | st.sampled_from(["01", "-1", "4294967295", "1.5"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None, categories=None)),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(js_keys, children, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_dumps_round_trips_through_python_json(value):
    text = dumps(value)
    text.encode("utf-8")  # always encodable: lone surrogates are escaped
    again = dumps(json.loads(text))
    assert again == text


@needs_reference
@settings(max_examples=1, suppress_health_check=list(HealthCheck), deadline=None)
@given(st.lists(json_values, min_size=300, max_size=300))
def test_javascript_writes_the_same_text(values):
    """JSON.stringify(JSON.parse(ours)) === ours, for a few hundred random values at once."""
    texts = [dumps(v) for v in values]
    script = ("const lines=require('fs').readFileSync(0,'utf8').split('\\n').filter(Boolean);"
              "for (const l of lines) { const t = JSON.parse(l); process.stdout.write(JSON.stringify(JSON.stringify(JSON.parse(t))) + '\\n'); }")
    stdin = "\n".join(json.dumps(t) for t in texts) + "\n"
    out = subprocess.run(["node", "-e", script], input=stdin.encode(), capture_output=True, check=True).stdout
    js = [json.loads(line) for line in out.decode().splitlines()]
    assert js == texts


def read_all(data: bytes, name: str = "f.jsonl", session_id=None):
    r = JsonlReader(io.BytesIO(data), name, session_id)
    return r, list(r)


def test_reader_is_lenient_where_the_reference_is():
    data = (b'\r\n{"type":"session/meta","id":"s"}\r\n\n   \n'
            b'{"type":"user/message","seq":0,"ts":1,"content":"a\xe2\x80\xa8b\xc2\x85c"}\r\n'
            b'{"ts":2.5,"seq":1,"type":"x"}')
    r, rows = read_all(data)
    assert r.session_id == "s"
    assert [row[:3] for row in rows] == [(0, "user/message", 1.0), (1, "x", 2.5)]
    assert json.loads(rows[0][3]) == {"content": "a\u2028b\x85c"}


@pytest.mark.parametrize("data, error", [
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1}\n{"type":"x","seq":1,"ts":', "f.jsonl:3: truncated last line"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,}\n', "f.jsonl:2: invalid JSON"),
    (b'{"type":"session/meta","id":"s"}\n[1]\n', "f.jsonl:2: not a JSON object but an array"),
    (b'{"type":"session/meta","id":"s"}\n{"seq":0,"ts":1}\n', "f.jsonl:2: 'type' is missing"),
    (b'{"type":"session/meta","id":"s"}\n{"type":5,"seq":0,"ts":1}\n', "f.jsonl:2: 'type' must be a non-empty string"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","ts":1}\n', "f.jsonl:2: 'seq' is missing"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":"0","ts":1}\n', "f.jsonl:2: 'seq' must be an integer"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":1,"ts":1}\n', "f.jsonl:2: 'seq' must start at 0, found 1"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1}\n{"type":"x","seq":2,"ts":1}\n', "f.jsonl:3: 'seq' 2 is not the next one (1 expected: gap)"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1}\n{"type":"x","seq":0,"ts":1}\n', "f.jsonl:3: 'seq' 0 is not the next one (1 expected: duplicated)"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":9007199254740992,"ts":1}\n', "f.jsonl:2: 'seq' 9007199254740992 is out of range"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0}\n', "f.jsonl:2: 'ts' is missing"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":"now"}\n', "f.jsonl:2: 'ts' must be a finite number"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1e999}\n', "f.jsonl:2: 'ts' must be a finite number (seconds), not 1e999, a number beyond the largest double"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"v":[1e999]}\n', "f.jsonl:2: not JSON: 1e999, a number beyond the largest double (about 1.8e308): "
     "JavaScript reads it as Infinity"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"v":NaN}\n', "f.jsonl:2: invalid JSON: NaN is not valid JSON"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"v":-Infinity}\n', "f.jsonl:2: invalid JSON: -Infinity"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"v":"\xff"}\n', "f.jsonl:2: invalid UTF-8"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"session/meta","id":"t"}\n', "f.jsonl:2: second session/meta names another id"),
    (b'{"type":"x","seq":0,"ts":1}\n', "f.jsonl:1: event before any session/meta line"),
    (b"\n\n", "f.jsonl: no session/meta line"),
    (b"", "f.jsonl: the file is empty: no session/meta line and no events"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"v":-' + b"9" * 400 + b'.5}\n',
     "f.jsonl:2: not JSON: -99999999999...(403 characters), a number beyond the largest double"),
    (b'{"type":"session/meta"}\n', "f.jsonl:1: session/meta needs a non-empty string 'id'"),
    (b'{"type":"session/meta","id":"s"}\n{"type":"x","seq":0,"ts":1,"big":12345678901234567891}\n', "f.jsonl:2: integer 12345678901234567891 cannot be stored exactly"),
])
def test_reader_rejections_name_file_and_line(data, error):
    with pytest.raises(InvalidJSONL) as e:
        read_all(data)
    assert str(e.value).startswith(error), str(e.value)


def test_reader_session_id_override():
    r, rows = read_all(b'{"type":"x","seq":0,"ts":1}\n', session_id="given")
    assert r.session_id == "given" and len(rows) == 1


def test_reader_normalizes_to_the_javascript_form():
    _, rows = read_all(b'{"type":"session/meta","id":"s"}\n'
                       b'{"type": "x", "seq": 0, "ts": 1.0, "a": 1.50, "b": 1E-7, "c": -0, "d": "\\u00e9\\uD83D"}\n')
    assert rows[0][3] == '{"a":1.5,"b":1e-7,"c":0,"d":"é\\ud83d"}'
    seq, type_, ts, payload = rows[0]
    assert event_line(type_, seq, ts, payload) == '{"type":"x","seq":0,"ts":1,"a":1.5,"b":1e-7,"c":0,"d":"é\\ud83d"}'


@pytest.mark.parametrize("sid", ["5a1b896f-beb", "../../etc/passwd", "/abs/path", "a\x00b", "x" * 500, "CaSe", "case",
                                 "..", ".", "con", "ü/ß", "a%2Fb", "~x", "\ud800"])
def test_file_names_are_safe_and_map_back(sid):
    name = file_name_for(sid)
    assert "/" not in name and "\x00" not in name and "\\" not in name and not name.startswith(".")
    assert len(name.encode()) <= 210
    assert name == name.lower() or "%" in name
    back = session_id_from_file_name(name)
    assert back == sid or (back is None and (len(sid) > 60 or sid == "\ud800"))  # no file holds a lone surrogate id


def test_file_names_never_collide_by_case():
    assert file_name_for("CaSe").lower() != file_name_for("case").lower()


def test_meta_difference_names_the_keys_that_differ():
    from eventstore.log.codec import meta_difference

    a = '{"source":"codex","source_file":"/home/ada/rollout.jsonl","cwd":"/w","n":1}'
    b = '{"source":"codex","cwd":"/x","n":1.0,"extra":"' + "y" * 100 + '"}'
    assert meta_difference(a, b, "in A", "in B") == (
        f'"source_file" ("/home/ada/rollout.jsonl" in A, none in B); "cwd" ("/w" in A, "/x" in B); '
        f'"extra" (none in A, "{"y" * 58}… in B)')
    many = "{" + ",".join(f'"k{i}":{i}' for i in range(5)) + "}"
    assert meta_difference(many, "{}", "here", "there").endswith('"k2" (2 here, none there); and 2 more')
