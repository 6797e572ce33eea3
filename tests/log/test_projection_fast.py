"""The cheaper projection (migration 0004, orjson) gives exactly what the first one gave.

* The ``messages`` view of 0004 writes the same ``message`` bytes as the view of 0001, on
  the conformance fixtures and on random payloads (numbers of any size, lone surrogates,
  every JSON type in ``content``/``tool_calls``/``tool_call_id``, whitespace in the stored
  text as a plain SQL INSERT could leave it).
* ``projection.loads`` (orjson where it agrees) equals ``json.loads`` on the same text.
* The ``messages_uncut`` view of today's head writes the same bytes as revision 0270's, the
  first with the folds of ``assistant/part`` events (later revisions only make it cheaper),
  on random sessions of parts, compactions and every message type.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import DATA, FIXTURES, TESTS
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventstore.log import projection

# The first definition of the view (the first release's revision 0001: json_object() and
# friends), kept here as the reference the cheaper view must equal byte for byte.
OLD_VIEW = """
CREATE VIEW messages AS
SELECT
  session_id,
  seq,
  CASE type WHEN 'user/message' THEN 'user'
            WHEN 'assistant/message' THEN 'assistant'
            ELSE 'tool' END AS role,
  CASE type
    WHEN 'user/message' THEN
      json_remove(json_object('role', 'user', 'content', json(payload -> '$.content')),
                  CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
    WHEN 'assistant/message' THEN
      json_remove(
        json_object('role', 'assistant',
                    'content', CASE WHEN coalesce(json_type(payload, '$.content'), 'null') = 'null'
                                   THEN '' ELSE json(payload -> '$.content') END,
                    'tool_calls', json(payload -> '$.tool_calls')),
        CASE WHEN coalesce(json_type(payload, '$.tool_calls'), 'null') IN ('null', 'false')
               OR (json_type(payload, '$.tool_calls') IN ('integer', 'real') AND payload ->> '$.tool_calls' = 0)
               OR (json_type(payload, '$.tool_calls') = 'text' AND payload -> '$.tool_calls' = '""')
               OR (json_type(payload, '$.tool_calls') = 'array'
                   AND json_array_length(payload, '$.tool_calls') = 0)
             THEN '$.tool_calls' ELSE '$.none' END)
    ELSE
      json_remove(
        json_object('role', 'tool',
                    'tool_call_id', json(payload -> '$.tool_call_id'),
                    'content', json(payload -> '$.content')),
        CASE WHEN json_type(payload, '$.tool_call_id') IS NULL THEN '$.tool_call_id' ELSE '$.none' END,
        CASE WHEN json_type(payload, '$.content') IS NULL THEN '$.content' ELSE '$.none' END)
  END AS message
FROM events
WHERE type IN ('user/message', 'assistant/message', 'tool/result')
"""


def _views(db: Path) -> list[str]:
    """The messages view of a database the store created, after the view it reads
    (``messages_uncut``, revision 0270: ``messages`` is its rows after the last compaction)."""
    from eventstore import EventStore

    EventStore.open(db).close()
    conn = sqlite3.connect(db)
    try:
        return [conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
                for name in ("messages_uncut", "messages")]
    finally:
        conn.close()


# 0270's fold took a tool call as json(value) of json_each: the value of a string element,
# not its JSON text (0350 fixed it, test_a_folds_tool_calls_that_are_not_objects_are_their_json).
_FOLD_ELEMENT_0270 = "SELECT j.value FROM events AS x"
_FOLD_ELEMENT_FIXED = "SELECT x.payload -> j.fullkey AS value FROM events AS x"


def _uncut_0270() -> str:
    """Revision 0270's ``messages_uncut`` (its SQLite revision's text), as ``uncut_0270``, with
    the one fix 0350 made to its fold."""
    path = next((TESTS.parent / "migrations" / "sqlite" / "versions").glob("0270_*.py"))
    spec = importlib.util.spec_from_file_location("revision_0270", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert _FOLD_ELEMENT_0270 in module.SQLITE_UNCUT
    return (module.SQLITE_UNCUT.replace("CREATE VIEW messages_uncut", "CREATE VIEW uncut_0270")
            .replace(_FOLD_ELEMENT_0270, _FOLD_ELEMENT_FIXED))


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """A plain table with the events' columns and the two view definitions over it."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, payload TEXT)")
    conn.execute(OLD_VIEW.replace("CREATE VIEW messages", "CREATE VIEW old_messages"))
    conn.execute(_uncut_0270())
    for view in _views(tmp_path_factory.mktemp("view") / "v.db"):
        conn.execute(view)
    yield conn
    conn.close()


def compare(conn, rows: list[tuple[str, str]]) -> list[str]:
    conn.execute("DELETE FROM events")
    conn.executemany("INSERT INTO events VALUES ('s', ?, ?, ?)",
                     [(i, t, p) for i, (t, p) in enumerate(rows)])
    old = conn.execute("SELECT seq, role, message FROM old_messages ORDER BY seq").fetchall()
    new = conn.execute("SELECT seq, role, message FROM messages ORDER BY seq").fetchall()
    assert new == old
    text = "[" + ",".join(m for _s, _r, m in new) + "]"
    assert projection.loads(text) == json.loads(text)
    assert repr(projection.loads(text)) == repr(json.loads(text))  # 1 and 1.0, -0.0 and 0.0
    return [m for _s, _r, m in new]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixtures_same_bytes_in_both_views(both, store, raw, name):
    sid = store.import_jsonl(DATA / f"{name}.jsonl")
    rows = raw.execute("SELECT type, payload FROM events WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    messages = compare(both, rows)
    expected = json.loads((DATA / f"{name}.messages.json").read_text("utf-8"))
    assert projection.loads("[" + ",".join(messages) + "]") == expected


# Number texts JSON allows that Python's json.dumps never writes, and the edges of orjson.
NUMBER_TEXTS = ["0", "-0", "0.0", "-0.0", "0e0", "0E+5", "-0.000e-3", "1e-400", "1e400", "-1e400",
                "1E21", "1e+21", "5e-324", "18446744073709551615", "18446744073709551616",
                "-9223372036854775808", "-9223372036854775809", "123456789012345678901234567890",
                "9007199254740993", "0.1", "1.0", "2.5e-7"]


class Raw(str):
    """A JSON text to paste in as is."""


def dump(value, compact: bool) -> str:
    if isinstance(value, Raw):
        return str(value)
    sep = (",", ":") if compact else (" , ", " : ")
    if isinstance(value, list):
        return "[" + sep[0].join(dump(v, compact) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + sep[0].join(json.dumps(k) + sep[1] + dump(v, compact) for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=not isinstance(value, str) or _has_surrogate(value))


def _has_surrogate(s: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in s)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(NUMBER_TEXTS).map(Raw),
    st.text(max_size=8), st.sampled_from(["", "0", "[]", "null", "false", "\ud83d", "a\udc00b", "\u2028\x00"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["id", "type", "x", "content"]), inner, max_size=3)),
    max_leaves=8)
keys = st.sampled_from(["content", "tool_calls", "tool_call_id", "extra"])
payloads = st.dictionaries(keys, values, max_size=4)
message_types = st.sampled_from(["user/message", "assistant/message", "tool/result", "assistant/chunk"])


# 150 examples, not 300: each draws up to eight recursive payloads, most of its time (the
# edge values each key and type can take are test_every_edge_value_in_every_key's, all of them)
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(message_types, payloads, st.booleans()), max_size=8))
def test_random_payloads_same_bytes_in_both_views(both, events):
    rows = [(t, dump(p, compact)) for t, p, compact in events]
    for _t, p in rows:
        json.loads(p)  # the strategy writes JSON
    compare(both, rows)


# A session's events as an import of a split API response writes them: parts of a few
# message ids (or none, or not a string) after assistant messages, most holding text and tool
# calls (what a fold joins), some any payload; user messages, results and compactions between.
fold_ids = st.sampled_from([None, "m1", "m1", "m2", 1])
part_payloads = st.one_of(
    st.fixed_dictionaries({}, optional={"content": st.one_of(st.text(max_size=3), values),
                                        "tool_calls": st.one_of(st.lists(values, max_size=2), values)}),
    payloads)
fold_events = st.lists(st.tuples(
    st.sampled_from(["assistant/message", "assistant/part", "assistant/part", "assistant/part", "user/message",
                     "tool/result", "compaction/boundary", "assistant/chunk"]),
    part_payloads, fold_ids, st.booleans()), max_size=12)
A_FOLD = [("assistant/message", {"content": "a", "tool_calls": [1]}, "m1", True),
          ("assistant/part", {"content": "b"}, "m1", False), ("assistant/part", {"content": ""}, "m2", True),
          ("assistant/part", {"tool_calls": [{"id": 2}]}, "m1", True), ("tool/result", {"content": 1}, None, True),
          ("assistant/part", {"content": "c"}, "m1", True)]
# A part after the next assistant message folds into that one's span, not the first's.
LATE_PART = [("assistant/message", {"content": [0], "tool_calls": {}}, "m1", True),
             ("assistant/message", {"content": "x"}, None, True), ("assistant/part", {"content": "p"}, "m1", True)]


@settings(max_examples=200, deadline=None)
@given(fold_events)
@example(A_FOLD)
@example(LATE_PART)
def test_random_folds_same_bytes_as_revision_0270(both, events):
    rows = []
    for t, p, message_id, compact in events:
        if message_id is not None:
            p = {**p, "message_id": message_id}
        rows.append((t, dump(p, compact)))
    both.execute("DELETE FROM events")
    both.executemany("INSERT INTO events VALUES ('s', ?, ?, ?)", [(i, t, p) for i, (t, p) in enumerate(rows)])
    old = both.execute("SELECT seq, role, message FROM uncut_0270 ORDER BY seq").fetchall()
    assert both.execute("SELECT seq, role, message FROM messages_uncut ORDER BY seq").fetchall() == old


def test_a_folds_tool_calls_that_are_not_objects_are_their_json(store):
    """A tool call that is a string, a number or a boolean is folded as its JSON text, as
    the unfolded rule copies it: 0270 parsed a string's value as JSON (a read of the session
    failed with "malformed JSON", or ``"1"`` became ``1``) and wrote ``true`` as ``1``."""
    s = store.create_session()
    s.append_many([("assistant/message", {"message_id": "m", "content": "a", "tool_calls": ["", "1", True]}),
                   ("assistant/part", {"message_id": "m", "tool_calls": ["back\\slash", 1e21, {"id": "c"}]})])
    assert s.derive_messages() == [{"role": "assistant", "content": "a",
                                    "tool_calls": ["", "1", True, "back\\slash", 1e21, {"id": "c"}]}]


@given(st.lists(values, max_size=5))
@settings(deadline=None)
def test_loads_equals_json_loads(items):
    text = dump(items, True)
    assert repr(projection.loads(text)) == repr(json.loads(text))


EDGE_VALUES = [*NUMBER_TEXTS, "null", "true", "false", '""', '"0"', '"[]"', '"\\ud83d"', '"a\\"b"', "[]", "[ ]",
               "[0]", "{}", '{"a":[1,{"b":null}]}', '{ "a" : 1 }', '"\\u0041\\/"']


@pytest.mark.parametrize("key", ["content", "tool_calls", "tool_call_id"])
def test_every_edge_value_in_every_key(both, key):
    """Each value the tool_calls rules and the number rules care about, in each key that a
    message copies, for each message type, with and without a second key beside it."""
    rows = []
    for t in ("user/message", "assistant/message", "tool/result"):
        for v in EDGE_VALUES:
            rows.append((t, f'{{"{key}":{v}}}'))
            rows.append((t, f'{{"x":1,"{key}" : {v},"content":"c"}}' if key != "content" else f'{{"{key}":{v},"tool_calls":[1]}}'))
    compare(both, rows)


@pytest.mark.sqlite_only
def test_the_store_keeps_a_chunky_sessions_message_pages_cached(store):
    from eventstore.backends.sqlite.engine import CACHE_SIZE_KIB

    assert store._backend._connection().execute("PRAGMA cache_size").fetchone() == (-CACHE_SIZE_KIB,)
