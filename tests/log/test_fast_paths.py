"""The fast paths of import (``jsonl._fast_rows``) and export (``backends.sqlite._fast_page``) against
the exact paths they shortcut: same stored rows (payload text, hash chain, normalized
count), same exported bytes, on canonical files and on every kind of line the fast paths
must leave to the slow ones (non-canonical spellings, integer-valued and exponent floats,
-0, big integers, escapes, lone surrogates, array-index keys, odd ts, long payloads).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import math

import pytest
from conftest import db_rows, new_sqlite_store
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eventstore import EventStore
from eventstore.backends.sqlite import export as sqlite_mod
from eventstore.io import jsonl as jsonl_mod
from eventstore.io.bulk import import_jsonl
from eventstore.log import chain as chain_mod
from eventstore.log import codec as codec_mod
from eventstore.log.codec import dumps, loads
from eventstore.log.line import event_line, meta_line

orjson = pytest.importorskip("orjson")
_ids = itertools.count()

ODD_TEXT = ["", "é", "😀", "\ud83d", "\ude00x", "\x00", "\x1f", "\x7f", "\u2028", '"', "\\", "/", "1.0,", "re-3",
            "e+5", ',"0":', '{"7":', "\x01", "\x02{", "\n", "\r"]
TEXT = st.text(max_size=8) | st.sampled_from(ODD_TEXT)
NUMBER = (st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
          | st.sampled_from([0.0, -0.0, 5.0, 1e21, 1e20, 1e16, 1e-5, 1e-6, 1e-7, 5e-324, 1.7976931348623157e308,
                             0.1, 2**53, -(2**53), 2.0**60, 123456789012345680000, 1764460800.0]))
JSON = st.recursive(st.none() | st.booleans() | NUMBER | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=8)
KEY = TEXT.filter(lambda k: k not in ("type", "seq", "ts")) | st.sampled_from(["0", "7", "10", "01", "4294967295"])
PAYLOAD = st.dictionaries(KEY, JSON, max_size=4)
TYPE = st.sampled_from(["user/message", "assistant/chunk", "tool/result", "turn/end", 'a"b', "ü", "x\x02{y", "t\n"])
TS = (st.floats(min_value=1073741824.0, max_value=2199023255551.0)
      | st.sampled_from([1764460800.0005, 1764460800.0, 1764460800.0084999, 1e9, 1073741824.0, 2199023255552.5,
                         1.5, 0.0, -5.5, 1e16, 1e-7, 1764460800])
      | st.floats(min_value=-1e20, max_value=1e20, allow_nan=False))


def rows(store: EventStore, sid: str) -> list:
    # (not the hash: each import salts its events afresh, docs/redaction.md)
    return db_rows(store, "SELECT seq, type, ts, payload FROM events WHERE session_id = ? ORDER BY seq", (sid,))


def export_bytes(store: EventStore, sid: str) -> bytes:
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


@pytest.fixture
def stores(tmp_path):
    # copies of the migrated template: migrating is not what these tests are about
    a, b, c = (new_sqlite_store(tmp_path / f"{n}.db") for n in "abc")
    with EventStore.open(a) as a, EventStore.open(b) as b, EventStore.open(c) as c:
        yield a, b, c


def import_three_ways(stores, data: bytes, monkeypatch) -> list:
    """Import ``data`` with the fast paths, without _fast_rows, and without any fast path."""
    a, b, c = stores
    reports = [import_jsonl(a, io.BytesIO(data), name="f.jsonl")]
    with monkeypatch.context() as m:
        m.setattr(jsonl_mod, "_fast_rows", lambda *args: None)
        reports.append(import_jsonl(b, io.BytesIO(data), name="f.jsonl"))
    with monkeypatch.context() as m:
        m.setattr(jsonl_mod, "_fast_rows", lambda *args: None)
        m.setattr(jsonl_mod, "_fast_line", lambda raw: None)
        reports.append(import_jsonl(c, io.BytesIO(data), name="f.jsonl"))
    return reports


def spelled(type_: str, seq: int, ts, payload: dict, how: int) -> str:
    """One line: canonical (how 0), or with the keys in another order, spaces, a 5.0-style ts."""
    line = event_line(type_, seq, float(ts), dumps(payload))
    if how == 1:
        return line.replace('","seq":', '", "seq":', 1)
    if how == 2:
        return dumps({"seq": seq, "type": type_, "ts": ts, **payload})
    if how == 3:
        return line.replace(f',"ts":{codec_mod.js_number(float(ts))}', f',"ts":{float(ts)!r}', 1)
    return line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.tuples(TYPE, PAYLOAD, TS, st.sampled_from([0, 0, 0, 1, 2, 3])), max_size=12),
       copies=st.integers(1, 3))
def test_import_fast_and_slow_paths_store_the_same_rows(stores, monkeypatch, events, copies):
    assume(not any("event_id" in p for _t, p, _ts, _how in events))  # a key unique per session (test_import_rules)
    sid = f"s{next(_ids)}"
    events = events * copies  # runs longer than one line, canonical and not, side by side
    lines = [meta_line(sid)] + [spelled(t, i, ts, p, how) for i, (t, p, ts, how) in enumerate(events)]
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    reports = import_three_ways(stores, data, monkeypatch)
    assert len({(r.events, r.normalized) for r in reports}) == 1
    got = [rows(s, sid) for s in stores]
    assert got[0] == got[1] == got[2]
    assert export_bytes(stores[0], sid) == export_bytes(stores[2], sid)


def test_the_batch_fast_path_takes_canonical_runs(stores, monkeypatch):
    taken = []
    real = jsonl_mod._fast_rows

    def spy(*args):
        got = real(*args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(jsonl_mod, "_fast_rows", spy)
    sid = "runs"
    n = 1200
    lines = [meta_line(sid)] + [event_line("assistant/chunk", i, 1764460800.0005 + i, dumps({"delta": {"content": f"t{i}"}}))
                                for i in range(n)]
    rep = import_jsonl(stores[0], io.BytesIO(("\n".join(lines) + "\n").encode()), name="f.jsonl")
    assert (rep.events, rep.normalized) == (n, 0)
    assert taken and all(taken) and len(taken) == math.ceil(n / jsonl_mod.RUN_LINES) + 0


@pytest.mark.parametrize("line, why", [
    (b'{"type":"a","seq":0,"ts":1764460800.0,"x":1}', "integer-valued float"),
    (b'{"type":"a","seq":0,"ts":1,"x":1e+16}', "exponent"),
    (b'{"type":"a","seq":0,"ts":1,"x":1e-7}', "exponent"),
    (b'{"type":"a","seq":0,"ts":1,"x":-0.0}', "minus zero"),
    (b'{"type":"a","seq":0,"ts":1,"1":2}', "index key"),
    (b'{"type":"a","seq":0,"ts":1,"x":{"0":1}}', "nested index key"),
    (b'{"type":"a","seq":0,"ts":1,"x":9007199254740993}', "integer beyond 2**53"),
    (b'{"type":"a","seq":0,"ts":1,"x":"\\u00e9"}', "escape JavaScript does not write"),
    (b'{"type":"a","seq":0,"ts":1,"x":"\\ud83d"}', "lone surrogate"),
    (b'{"seq":0,"type":"a","ts":1}', "key order"),
    (b'{"type":"a","seq":0,"ts":1,"ts":2}', "duplicate key"),
    (b'{"type":"a","seq":true,"ts":1}', "seq not an integer"),
    (b'{"type":"a","seq":0,"ts":"1"}', "ts not a number"),
])
def test_fast_rows_leaves_odd_lines_to_the_slow_path(line, why):
    assert jsonl_mod._fast_rows([line], 0, "x", {}) is None, why


def test_fast_rows_matches_the_line_by_line_rows():
    lines = [b'{"type":"a","seq":%d,"ts":1764460800.%d5,"k":"v\\n%d"}' % (i, i, i) for i in range(5)]
    lines.append(b'{"type":"turn/end","seq":5,"ts":1764460801.5}')
    got, last = jsonl_mod._fast_rows(lines, 0, "g", {})
    h = "g"
    for raw, (seq, t, ts, payload, hsh) in zip(lines, got, strict=True):
        obj = codec_mod.loads(raw.decode())
        assert (seq, t, ts) == (obj["seq"], obj["type"], obj["ts"])
        assert payload == dumps({k: v for k, v in obj.items() if k not in ("type", "seq", "ts")})
        h = hashlib.sha256(h.encode() + b"\n" + raw).hexdigest()
        assert hsh == h
    assert last == h


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e16, 1e20, 1e21, 1e-6, 1e-7, 5e-324]))
def test_orjson_writes_floats_as_javascript_but_for_what_the_fast_paths_rule_out(x):
    """The invariant both fast paths rest on: orjson's text of a double is JSON.stringify's
    unless it holds an exponent or ends in ".0" (checked here against the store's own
    JavaScript number formatting, itself checked against node in test_jsonl_codec)."""
    text = orjson.dumps(x).decode()
    if "e" not in text and not text.endswith(".0"):
        assert text == codec_mod.js_number(x)
    if "e" in text:
        assert "e+" in text or "e-" in text  # what _odd_run searches for


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.tuples(TYPE, PAYLOAD, TS), max_size=12), copies=st.integers(1, 3))
def test_export_fast_and_row_by_row_pages_write_the_same_bytes(stores, monkeypatch, events, copies):
    # an event_id must be a non-empty string, unique in its session (test_import_rules);
    # the strategy once drew {"event_id": None}, which append_many rightly refused
    assume(not any("event_id" in p for _t, p, _ts in events))
    a = stores[0]
    sid = f"e{next(_ids)}"
    a.create_session(sid).append_many([(t, p, float(ts)) for t, p, ts in events * copies])
    monkeypatch.setattr(sqlite_mod, "EXPORT_PAGE", 7)  # several pages, fast and not, in one file
    fast = export_bytes(a, sid)
    monkeypatch.setattr(sqlite_mod, "_fast_page", lambda *args: None)
    assert export_bytes(a, sid) == fast


def test_export_fast_page_is_taken_and_exact(stores, monkeypatch):
    a = stores[0]
    taken = []
    real = sqlite_mod._fast_page
    monkeypatch.setattr(sqlite_mod, "_fast_page", lambda *args: taken.append(real(*args)) or taken[-1])
    s = a.create_session("p")
    events = [("turn/end", {}, 1764460800.0005)] + [
        ("assistant/chunk", {"delta": {"content": f"tok{i} é\n\"x\""}}, 1764460800.0005 + i * 0.001) for i in range(1200)]
    s.append_many(events)
    data = export_bytes(a, "p")
    assert taken and all(t is not None for t in taken)
    expected = [meta_line("p")] + [event_line(t, i, ts, dumps(p)) for i, (t, p, ts) in enumerate(events)]
    assert data == ("\n".join(expected) + "\n").encode()


@pytest.mark.parametrize("payload, ts, type_", [
    ({"big": "x" * sqlite_mod.FAST_PAYLOAD}, 1764460800.5, "a"),  # a long payload: row by row
    ({"0": 1, "a": 2}, 1764460800.5, "a"),  # an index key
    ({"a": 1}, 1764460800.0, "a"),  # an integer-valued ts
    ({"a": 1}, 1e9, "a"),  # before 2004
    ({"a": 1}, 2199023255552.5, "a"),  # beyond 2**41
    ({"a": 1}, 1764460800.5, 'q"uote'),  # a type with an escape
    ({"a": 1}, 1764460800.5, "x\x02{y"),  # a type with the separator
])
def test_export_pages_the_fast_path_refuses_are_still_exact(stores, payload, ts, type_):
    a = stores[0]
    s = a.create_session("o")
    events = [("a", {"i": 1}, 1764460800.25), (type_, payload, ts), ("turn/end", {}, 1764460801.75)]
    s.append_many(events)
    expected = [meta_line("o")] + [event_line(t, i, t_s, dumps(p)) for i, (t, p, t_s) in enumerate(events)]
    assert export_bytes(a, "o") == ("\n".join(expected) + "\n").encode()


# --- append: payload_json's orjson path and chain_rows ----------------------------------

class _Color(__import__("enum").Enum):
    RED = 1


@settings(max_examples=400, deadline=None)
@given(payload=PAYLOAD)
def test_payload_json_with_orjson_is_the_pure_python_text(payload):
    """payload_json() hands plain dicts to orjson (_fast_dumps); whatever it returns must be
    exactly what the pure-Python JSON.stringify encoder writes, or the same error."""
    eid = payload.get("event_id", "k")
    assume(type(eid) is str and eid)  # payload_json's own rule, checked in test_api
    try:
        slow = dumps(payload)
    except Exception as e:  # noqa: BLE001 - compare the kind of refusal
        slow = type(e)
    fast = codec_mod._fast_dumps(payload)
    if fast is not None:
        assert fast[0] == slow
        assert same_json(fast[1], loads(slow))  # the read-back is what the slow path reads back
    try:
        got = codec_mod.payload_json(payload)
    except Exception as e:  # noqa: BLE001
        got = type(e)
    assert got == slow
    try:
        text, stored = codec_mod.payload_json_stored(payload)
    except Exception as e:  # noqa: BLE001
        text, stored = type(e), None
    assert text == slow
    if stored is not None:
        assert same_json(stored, loads(slow))


def same_json(a, b) -> bool:
    """Equal, and of the same types all the way down (1 == 1.0 == True for ==)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))
    return a == b or (a != a and b != b)


# 3,000 floats in all, ten an example: one float an example spent its time in Hypothesis's
# per-example machinery, not in the check
@settings(max_examples=300, deadline=None)
@given(fs=st.lists(st.floats(allow_nan=False, allow_infinity=False)
                   | st.floats(min_value=1e9, max_value=3e9)  # seconds since the epoch, as ts holds them
                   | st.floats(min_value=1e-7, max_value=1e21)
                   | st.integers(min_value=-2**53, max_value=2**53).map(lambda i: i / 2**20), min_size=10, max_size=10))
def test_js_float_orjson_path_writes_what_the_javascript_algorithm_writes(fs):
    """js_float() takes orjson's text for a ts where orjson writes a plain decimal with a
    fraction; it must be the text of the Number.prototype.toString port it skips."""
    class Subclass(float):  # not a float itself: js_float takes the JavaScript algorithm for it
        pass

    for f in fs:
        assert codec_mod.js_float(f) == codec_mod.js_float(Subclass(f)), f


def _stable_repr(value) -> str:
    """A test id that is the same in every process (pytest-xdist compares them): an
    orjson.Fragment's repr holds its address."""
    return "orjson.Fragment" if isinstance(value, orjson.Fragment) else repr(value)


@pytest.mark.parametrize("value", [
    math.nan, math.inf, -math.inf, 5.0, -0.0, 1e16, 1e21, 1e-7, 2**53 + 2, 2**64, _Color.RED,
    __import__("uuid").UUID(int=1), __import__("datetime").datetime(2026, 1, 1), (1, 2), {"0": 1, "a": 2},
    {"a": 1, "7": 2}, {1: "x"}, "\ud800", orjson.Fragment(b'{"type":1}'),
], ids=_stable_repr)
def test_payload_json_leaves_what_orjson_writes_otherwise_to_the_exact_encoder(value):
    """Each value orjson writes differently from JSON.stringify (or takes where the store
    refuses) goes past _fast_dumps to dumps(), which writes it or refuses it."""
    payload = {"v": value}
    assert codec_mod._fast_dumps is None or codec_mod._fast_dumps(payload) is None
    try:
        expected = dumps(payload)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            codec_mod.payload_json(payload)
    else:
        assert codec_mod.payload_json(payload) == expected


def _payload_json_or_error(payload):
    try:
        return codec_mod.payload_json(payload)
    except Exception as e:  # noqa: BLE001 - compare the kind of refusal
        return type(e)


# 150 examples, not 300: each draws up to six recursive payloads, most of its time (one
# payload's text against the exact encoder is test_payload_json_with_orjson_is_the_pure_python_text's, on 400)
@settings(max_examples=150, deadline=None)
@given(payloads=st.lists(PAYLOAD | st.none(), min_size=1, max_size=6))
def test_payload_jsons_is_payload_json_of_each(payloads):
    """append_many's batch encoder (one screen and one read-back for the whole batch)
    writes what payload_json() writes for each payload, refuses what it refuses, and
    gives back each payload as its text reads."""
    assume(all(p is None or type(p.get("event_id", "k")) is str and p.get("event_id", "k") for p in payloads))
    each = [_payload_json_or_error(p) for p in payloads]
    refused = next((e for e in each if isinstance(e, type)), None)
    if refused is not None:
        with pytest.raises(refused):
            codec_mod.payload_jsons(payloads)
        return
    texts, stored = codec_mod.payload_jsons(payloads)
    assert texts == each
    assert stored == [codec_mod.loads(t) for t in texts]


@pytest.mark.parametrize("payloads", [
    [{"nested": {"type": "x", "ts": 1, "seq": 2, "event_id": 3}}, {"tool_calls": [{"type": "function"}]}],
    [{"a": 1}, {"tool_calls": [{"type": "function"}]}, {"seq": 1}],
    [{"a": 1}, {"type": "x"}], [{"ts": 1}], [{"a": 1}, {"event_id": "k"}], [{"event_id": ""}],
    [{"b": 2}, {"event_id": 5}], [{"event_id": "\ud800"}],
], ids=["nested-names", "seq-after-nested-type", "type", "ts", "event_id", "empty-event_id", "int-event_id",
        "surrogate-event_id"])
def test_payload_jsons_refuses_the_reserved_keys_at_the_top_only(payloads):
    """The batch encoder looks for reserved keys only when the batch's text names one: a
    nested "type" (a tool call's) is stored, a top-level one is refused as payload_json()
    refuses it, and an event_id must be a non-empty string."""
    each = [_payload_json_or_error(p) for p in payloads]
    refused = next((e for e in each if isinstance(e, type)), None)
    if refused is not None:
        with pytest.raises(refused):
            codec_mod.payload_jsons(payloads)
    else:
        assert codec_mod.payload_jsons(payloads) == (each, [codec_mod.loads(t) for t in each])


@pytest.mark.parametrize("value", [
    math.nan, 5.0, 1e16, 2**64, _Color.RED, __import__("uuid").UUID(int=1), (1, 2), {"0": 1}, {"a": 1, "7": 2}, {1: "x"},
    orjson.Fragment(b'{"type":1}'),
], ids=_stable_repr)
def test_payload_jsons_leaves_an_odd_value_anywhere_in_the_batch_to_the_exact_encoder(value):
    """One odd value in the middle of a batch of plain payloads sends the batch past
    orjson: its text and every other payload's are still exactly dumps()'s."""
    payloads = [{"a": 1}, {"v": value}, {"b": "c"}]
    try:
        expected = [dumps(p) for p in payloads]
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            codec_mod.payload_jsons(payloads)
    else:
        texts, stored = codec_mod.payload_jsons(payloads)
        assert texts == expected
        assert stored == [codec_mod.loads(t) for t in expected]


# 100 examples, not 200: each draws up to ten events with recursive payloads, which is most
# of its time (chain_hash itself is a sha256 a line)
@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.tuples(TYPE, TS, PAYLOAD), max_size=10), first=st.integers(0, 2**40))
def test_chain_rows_is_each_event_with_chain_hash_of_its_line(events, first):
    rows = []
    for t, ts, p in events:
        try:
            rows.append((t, float(ts), dumps(p)))
        except Exception:  # noqa: BLE001 - payloads dumps() refuses are never chained
            continue
    prev = "0" * 64
    expected = []
    for i, (t, ts, pj) in enumerate(rows):
        try:
            prev = chain_mod.chain_hash(prev, event_line(t, first + i, ts, pj))
        except UnicodeEncodeError:  # a type with a lone surrogate: the store refuses it
            return
        expected.append(prev)
    flat = chain_mod.chain_rows("0" * 64, first, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    assert flat == [x for (t, ts, pj), h in zip(rows, expected, strict=True) for x in (t, ts, pj, h, None)]
