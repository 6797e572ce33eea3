"""Property tests (hypothesis) of the JSONL codec against itself and against the reference.

* Arbitrary JSON payloads (lone surrogates, -0, 1e21, 5e-324, deep nesting, odd keys)
  survive export, import, export byte for byte, with the same hash chain; the fast
  (orjson) and the standard-library parse paths store identical rows.
* Any spelling of the same events (spaces, escapes, number forms, duplicate keys) imports
  and exports to exactly what ``node ref.mjs roundtrip`` writes (JSON.stringify of
  JSON.parse), the reference being the judge.
* Random sessions exported by the store are read by ``node ref.mjs derive`` to the same
  projection the store gives (the reference keeps ``tool_calls: []``, the store drops it).

The reference tests skip when node or ``../shared`` is absent.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import select
import subprocess

import pytest
from conftest import REFERENCE, db_rows, needs_reference, new_sqlite_store
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from eventstore import EventStore
from eventstore.io import jsonl as jsonl_mod
from eventstore.io.bulk import import_jsonl
from eventstore.log import codec as codec_mod

_ids = itertools.count()

ODD_TEXT = ["", "\u2028", "\u2029", "\x85", "\x00", "\x7f", "\x1f", "é", "😀", "\ud83d", "\ude00", "\\", '"', "/",
            "</script>", "1.0,", "re-3", "e+5", ',"seq":', '","ts":1}', "\ufeff", "\r\n"]
TEXT = st.text(st.characters(exclude_categories=()), max_size=10) | st.sampled_from(ODD_TEXT)
NUMBER = (st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
          | st.sampled_from([0.0, -0.0, 1e21, 1e-7, 1e-6, 5e-324, 1.7976931348623157e308, 1e16, 0.1, 5.0,
                             123456789012345680000, 10000000000000000, 2**53, -(2**53)]))
JSON = st.recursive(st.none() | st.booleans() | NUMBER | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
# Not "event_id" either: an idempotency key has rules of its own (test_import_rules), and
# Hypothesis draws string constants from the code under test, so it does come up.
PAYLOAD = st.dictionaries(TEXT.filter(lambda k: k not in ("type", "seq", "ts", "event_id")), JSON, max_size=5)
MESSAGE_TYPES = ["user/message", "assistant/message", "tool/result", "assistant/chunk", "turn/start", "step/end"]


# Shrinking a failure that runs node per example takes many minutes: report it as found.
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


def _plain(s: str) -> bool:
    """A string the store takes as a type or session id: no lone surrogate, no NUL first
    (the schema's CHECK length(...) > 0 counts characters up to the first NUL)."""
    if s.startswith("\x00"):
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


TYPE = st.sampled_from(MESSAGE_TYPES) | TEXT.filter(lambda t: t and t != "session/meta" and _plain(t))
TS = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False) | st.integers(0, 2**40)
SID = TEXT.filter(_plain)


def export_bytes(store: EventStore, sid: str) -> bytes:
    out = io.BytesIO()
    store.export_jsonl(sid, out)
    return out.getvalue()


def hashes(store: EventStore, sid: str) -> list:
    return db_rows(store, "SELECT seq, hash FROM events WHERE session_id = ? ORDER BY seq", (sid,))


@pytest.fixture
def two_stores(tmp_path):
    # copies of the migrated template: migrating is not what these tests are about
    with EventStore.open(new_sqlite_store(tmp_path / "a.db")) as a, \
            EventStore.open(new_sqlite_store(tmp_path / "b.db")) as b:
        yield a, b


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.tuples(TYPE, PAYLOAD, TS), max_size=8), sid=SID,
       meta=st.dictionaries(TEXT.filter(lambda k: k not in ("type", "id")), JSON, max_size=2))
def test_export_import_export_is_byte_identical_on_both_parse_paths(two_stores, events, sid, meta):
    a, b = two_stores
    sid = f"{next(_ids)}{sid}"
    a.create_session(sid, meta=meta or None).append_many(events)
    data = export_bytes(a, sid)
    rep = import_jsonl(b, io.BytesIO(data), name="f.jsonl")
    assert (rep.status, rep.events, rep.normalized) == ("imported", len(events), 0)
    assert export_bytes(b, sid) == data
    assert [s for s, _h in hashes(b, sid)] == [s for s, _h in hashes(a, sid)]  # (fresh salts: a chain of its own)
    saved = jsonl_mod._fast_line, jsonl_mod._fast_rows
    jsonl_mod._fast_line = lambda raw: None  # the standard-library path must store the very same rows
    jsonl_mod._fast_rows = lambda *args: None
    try:
        again = import_jsonl(b, io.BytesIO(data), name="f.jsonl")
    finally:
        jsonl_mod._fast_line, jsonl_mod._fast_rows = saved
    assert (again.status, again.normalized) == ("skipped", 0)


# --- the reference, one node process per test ---------------------------------------------------

# What ``node ref.mjs roundtrip SRC OUT`` and ``node ref.mjs derive FILE`` do (ref.mjs's own
# two lines over the same Session class), one request a line on stdin: starting node for
# every example took most of these tests' time, and the process is not what they test.
REFERENCE_WORKER = """
import { createInterface } from "node:readline";
const { Session } = await import(process.argv[1]);
for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, a, b] = JSON.parse(line);
  try {
    if (cmd === "derive") process.stdout.write(JSON.stringify(Session.load(a).deriveMessages()) + "\\n");
    else { Session.load(a).save(b); process.stdout.write("ok\\n"); }
  } catch (e) {
    process.stdout.write("error " + JSON.stringify(String(e && e.stack || e)) + "\\n");
  }
}
"""


class Reference:
    """A node process that answers ``roundtrip`` and ``derive`` as ref.mjs does."""

    def __init__(self) -> None:
        session = (REFERENCE.parent / "session.mjs").as_uri()
        self.proc = subprocess.Popen(["node", "--input-type=module", "-e", REFERENCE_WORKER, session],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def ask(self, *request: str) -> str:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        # one line answers each request, so nothing is left in the buffer for select to miss
        assert select.select([self.proc.stdout], [], [], 60)[0], f"node did not answer {request}"
        answer = self.proc.stdout.readline()
        assert answer and not answer.startswith("error "), (request, answer, self.proc.poll())
        return answer

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def reference():
    ref = Reference()
    yield ref
    ref.close()


# --- spellings against the reference -----------------------------------------------------------

WS = st.sampled_from(["", "", "", " ", "\t", "  ", " \t "])
PLAIN = st.just("")


def spell(data, value, plain: bool = False) -> str:
    """Some JSON text of ``value``: random spaces, escapes and number forms; with ``plain``,
    only the number forms vary (the rest is what JSON.stringify writes)."""
    if plain and not isinstance(value, (int, float)) or isinstance(value, bool):
        if isinstance(value, (list, dict)):
            if isinstance(value, list):
                return "[" + ",".join(spell(data, v, True) for v in value) + "]"
            return "{" + ",".join(codec_mod.dumps(k) + ":" + spell(data, v, True) for k, v in value.items()) + "}"
        return codec_mod.dumps(value)
    ws = "" if plain else data.draw(WS)
    if value is None or value is True or value is False:
        return ws + json.dumps(value)
    if isinstance(value, int) and not isinstance(value, bool):
        forms = [str(value), f"{value}.0", f"{value}e0", f"{value}E+0", f"{value}.000", repr(float(value))]
        if value == 0:
            forms += ["-0", "-0.0", "0e5"]
        return ws + data.draw(st.sampled_from(forms))
    if isinstance(value, float):
        forms = [repr(value), codec_mod.js_number(value), f"{value:.17g}", f"{value:.25e}", f"{value:.17E}"]
        if abs(value) < 1e25:
            forms.append(f"{value:.30f}".rstrip("0") + "0")
        return ws + data.draw(st.sampled_from(forms)).replace("inf", "1e999")
    if isinstance(value, str):
        out = []
        for ch in value:
            o = ord(ch)
            must = ch in '"\\' or o < 0x20 or 0xD800 <= o <= 0xDFFF
            how = data.draw(st.integers(0, 3)) if not must else data.draw(st.integers(1, 3))
            if how == 0:
                out.append(ch)
            elif how == 1 and ch in '"\\/\b\f\n\r\t':
                out.append("\\" + {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r",
                                   "\t": "t"}[ch])
            elif o > 0xFFFF:
                hi, lo = 0xD800 + ((o - 0x10000) >> 10), 0xDC00 + ((o - 0x10000) & 0x3FF)
                out.append(f"\\u{hi:04x}\\u{lo:04X}")
            else:
                out.append(f"\\u{o:04x}" if how != 3 else f"\\u{o:04X}")
        return ws + '"' + "".join(out) + '"'
    if isinstance(value, list):
        return ws + "[" + ",".join(spell(data, v) + data.draw(WS) for v in value) + data.draw(WS) + "]"
    items = [spell(data, k) + data.draw(WS) + ":" + spell(data, v) for k, v in value.items()]
    if value and data.draw(st.booleans()):  # a duplicate key: JSON.parse keeps its place, takes the last value
        k = data.draw(st.sampled_from(list(value)))
        items.insert(0, spell(data, k) + ":" + spell(data, [1, "dup"]))
    return ws + "{" + ",".join(items) + data.draw(WS) + "}"


def spell_event(data, type_: str, seq: int, ts: float, payload: dict) -> str:
    plain = data.draw(st.booleans())  # half the lines differ from JSON.stringify in number forms only
    p = (lambda v: spell(data, v, True)) if plain else (lambda v: spell(data, v))
    head = [p("type") + ":" + p(type_), p("seq") + ":" + p(seq), p("ts") + ":" + p(ts)]
    items = [p(k) + ":" + p(v) for k, v in payload.items()]
    end = "}" if plain else data.draw(WS) + "}" + data.draw(st.sampled_from(["", "", "\r"]))
    return "{" + ",".join(head + items) + end


def ts_ok(ts: float) -> bool:
    return math.isfinite(ts)


@needs_reference
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=NO_SHRINK)
@given(data=st.data(), events=st.lists(st.tuples(TYPE, PAYLOAD, TS), min_size=1, max_size=5))
def test_any_spelling_imports_to_what_the_reference_roundtrip_writes(store, reference, tmp_path, data, events):
    if store._backend.name == "postgresql":  # its text cannot hold U+0000 (test_import_export tests the refusal)
        assume(not any("\x00" in t for t, _, _ in events))
    sid = f"spell-{next(_ids)}"
    lines = [json.dumps({"type": "session/meta", "id": sid})]
    for seq, (t, payload, ts) in enumerate(events):
        lines.append(spell_event(data, t, seq, ts, payload))
    src = tmp_path / f"{sid}.jsonl"
    # no lone surrogate reaches the file: spell() escapes them
    src.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    ref_out = tmp_path / f"{sid}.ref.jsonl"
    assert reference.ask("roundtrip", str(src), str(ref_out)) == "ok\n"
    import_jsonl(store, src)
    assert export_bytes(store, sid) == ref_out.read_bytes()


# --- the projection against the reference ---------------------------------------------------------

CONTENT = st.one_of(TEXT, st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                                                max_size=3), JSON)
CALL = st.fixed_dictionaries({"id": TEXT, "type": st.just("function"),
                              "function": st.fixed_dictionaries({"name": TEXT, "arguments": TEXT})})
TOOL_CALLS = st.one_of(st.lists(CALL, max_size=3), st.just([]), st.none(),
                       st.sampled_from([0, 0.0, "", False, True, "x", "0", {}, {"a": 1}, [0], 1]))


@st.composite
def message_event(draw):
    t = draw(st.sampled_from(MESSAGE_TYPES + ["skill/inject"]))
    payload = {}
    if draw(st.booleans()):
        payload["content"] = draw(CONTENT)
    if t == "assistant/message" and draw(st.booleans()):
        payload["tool_calls"] = draw(TOOL_CALLS)
    if t == "tool/result" and draw(st.integers(0, 3)):
        payload["tool_call_id"] = draw(st.one_of(TEXT, st.none(), st.integers(0, 9)))
    if draw(st.integers(0, 4)) == 0:
        payload.update(draw(PAYLOAD))
    return t, payload, draw(TS)


def drop_empty_tool_calls(messages: list) -> list:
    """The store's one deliberate difference (shared/spec/session-log.md)."""
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls") == []:
            del m["tool_calls"]
    return messages


@needs_reference
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=NO_SHRINK)
@given(events=st.lists(message_event(), max_size=8))
def test_exported_sessions_project_like_the_reference(store, reference, tmp_path, events):
    sid = f"proj-{next(_ids)}"
    store.create_session(sid).append_many(events)
    path = tmp_path / f"{sid}.jsonl"
    store.export_jsonl(sid, path)
    expected = drop_empty_tool_calls(json.loads(reference.ask("derive", str(path))))
    assert store.session(sid).derive_messages() == expected
    assume(events)
