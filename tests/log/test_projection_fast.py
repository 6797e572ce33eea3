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
from hypothesis import HealthCheck, example, given, settings
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


# The fixes later revisions made to 0270's fold, as (its text, the fixed text). 0350: a tool
# call is its element's JSON text, not json(value) of json_each (the value of a string
# element; test_a_folds_tool_calls_that_are_not_objects_are_their_json). 0370: a content is
# joined as its JSON text, not decoded by ->> and quoted again (->> cut it at \u0000 and
# wrote a lone surrogate as bytes that are not UTF-8), and message ids compare as JSON text
# (test_a_fold_keeps_every_escape).
_FOLD_FIXES = [
    ("SELECT j.value FROM events AS x", "SELECT x.payload -> j.fullkey AS value FROM events AS x"),
    ("payload ->> '$.message_id' = e.payload ->> '$.message_id'", "payload -> '$.message_id' = e.payload -> '$.message_id'"),
    ("""'{{"role":"assistant","content":' || json_quote(coalesce(
         (SELECT group_concat(text, char(10) || char(10)) FROM (
            SELECT x.payload ->> '$.content' AS text FROM events AS x WHERE {_SQ_FOLD}
              AND json_type(x.payload, '$.content') = 'text' AND x.payload ->> '$.content' <> ''
            ORDER BY x.seq)), ''))""",
     """'{{"role":"assistant","content":"' || coalesce(
         (SELECT group_concat(substr(text, 2, length(text) - 2), '\\\\n\\\\n') FROM (
            SELECT x.payload -> '$.content' AS text FROM events AS x WHERE {_SQ_FOLD}
              AND json_type(x.payload, '$.content') = 'text' AND x.payload -> '$.content' <> '""'
            ORDER BY x.seq)), '') || '"'"""),
]


def _uncut_0270() -> str:
    """Revision 0270's ``messages_uncut`` (its SQLite revision's text), as ``uncut_0270``, with
    the fixes 0350 and 0370 made to its fold."""
    path = next((TESTS.parent / "migrations" / "sqlite" / "versions").glob("0270_*.py"))
    text = path.read_text("utf-8")
    for old, new in _FOLD_FIXES:
        assert old in text
        text = text.replace(old, new)
    spec = importlib.util.spec_from_loader("revision_0270", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102 (the repository's own file)
    return module.SQLITE_UNCUT.replace("CREATE VIEW messages_uncut", "CREATE VIEW uncut_0270")


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


# Strings whose JSON text holds escapes: lone surrogates and U+0000 (which PostgreSQL's JSON
# functions refuse decoded, and SQLite's ->> cuts or writes as bytes that are not UTF-8),
# backslashes before them, and texts that look like es_json's rewriting ("/u..." and "\/u").
ESCAPED = ["\ud83d", "a\udc00b", "\x00", "a\x00b\x00", "\x00\ud83d", "\ud83d\ud83d", "\udc00\ud83d",
           "back\\slash", "\\ud83d", "\\\ud83d", "\\\\\x00", "/ud83d", "/u0000", "\\/ud83d", "\\/u0000",
           "\u2028\x1f\x7f", '"q"\n\t', "\U0001f600", "\\/ud83d\x01", "\\/u0000\ud83d", ""]


def _fold_session(store, s: str):
    """A session whose assistant message folds with two parts, ``s`` in every string of it."""
    call = {"id": s, "type": "function", "function": {"name": s, "arguments": s}}
    session = store.create_session()
    session.append_many([
        ("assistant/message", {"message_id": "m", "content": s, "tool_calls": [call, s]}),
        ("assistant/part", {"message_id": "m", "content": s + "!", "tool_calls": [s, [s, {"k": s}]]}),
        ("assistant/part", {"message_id": "m", "content": s}),
        ("tool/result", {"tool_call_id": s, "content": s}),
        ("user/message", {"content": s})])
    return session


@pytest.mark.parametrize("s", ESCAPED, ids=range(len(ESCAPED)))
def test_a_fold_keeps_every_escape(store, tmp_path, s):
    """A fold's content and tool calls hold each string exactly: the same bytes as
    ``JSON.stringify`` writes (the reference's projection) and the same values."""
    from eventstore.log import codec

    session = _fold_session(store, s)
    call = {"id": s, "type": "function", "function": {"name": s, "arguments": s}}
    content = "\n\n".join(t for t in (s, s + "!", s) if t)
    expected = [{"role": "assistant", "content": content, "tool_calls": [call, s, s, [s, {"k": s}]]},
                {"role": "tool", "tool_call_id": s, "content": s}, {"role": "user", "content": s}]
    assert session.derive_messages() == expected
    assert session.messages_json() == codec.dumps(expected)


# Strings of the characters whose JSON text is an escape, and of the letters of the escapes
# (two high surrogates never make a pair: each stays a lone one).
escaped_text = st.text(st.sampled_from(["\x00", "\ud83d", "\udbff", "\\", "/", "u", "d", "8", "0", '"', "\n",
                                        "\x1f", "a", "é", "\U0001f600"]), max_size=6)
escaped_values = st.recursive(escaped_text, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(escaped_text, inner, max_size=2)), max_leaves=4)
# The message's id, an id differing from it after a U+0000, one PostgreSQL decoded the same
# ("/ud83d" beside "\ud83d"), and the JSON number 1 beside the string "1".
ESCAPED_IDS = [("a\x00b", "a\x00c"), ("\ud83d", "/ud83d"), ("1", 1)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(ESCAPED_IDS), st.tuples(st.one_of(escaped_text, escaped_values), st.lists(escaped_values)),
       st.lists(st.tuples(st.booleans(), st.one_of(escaped_text, escaped_values), st.lists(escaped_values)),
                max_size=4))
def test_random_folds_keep_every_escape(store, ids, first, parts):
    """On both backends, a fold of parts whose content and tool calls hold escaped strings is
    what the rule says (docs/schema.md, "The projection"), in JSON.stringify's bytes: the
    content strings that are not empty, joined by a blank line, then the calls in order;
    a part of another id (one that only decoding would confuse with the message's) stays out."""
    from eventstore.log import codec

    mid, other = ids
    content, calls = first
    events = [("assistant/message", {"message_id": mid, "content": content, "tool_calls": calls})]
    events += [("assistant/part", {"message_id": mid if same else other, "content": c, "tool_calls": t})
               for same, c, t in parts]
    session = store.create_session()
    session.append_many(events)
    folded = [p for t, p in events if t == "assistant/part" and p["message_id"] == mid]
    if folded:
        texts = [p["content"] for p in (events[0][1], *folded) if isinstance(p["content"], str) and p["content"]]
        message = {"role": "assistant", "content": "\n\n".join(texts)}
        every = [c for p in (events[0][1], *folded) for c in p["tool_calls"]]
    else:
        message = {"role": "assistant", "content": content}
        every = calls
    if every:
        message["tool_calls"] = every
    assert session.messages_json() == codec.dumps([message])
    assert session.derive_messages() == [message]
