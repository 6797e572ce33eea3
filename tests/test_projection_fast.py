"""The cheaper projection (migration 0004, orjson) gives exactly what the first one gave.

* The ``messages`` view of 0004 writes the same ``message`` bytes as the view of 0001, on
  the conformance fixtures and on random payloads (numbers of any size, lone surrogates,
  every JSON type in ``content``/``tool_calls``/``tool_call_id``, whitespace in the stored
  text as a plain SQL INSERT could leave it).
* ``projection.loads`` (orjson where it agrees) equals ``json.loads`` on the same text.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import DATA, FIXTURES
from eventstore.engine import migrations_path
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import projection


def _revision(name: str):
    path = next(Path(migrations_path()).glob(f"versions/{name}_*.py"))
    spec = importlib.util.spec_from_file_location(f"rev_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


OLD_VIEW = _revision("0001").CREATE_MESSAGES_VIEW
NEW_VIEW = _revision("0004").CREATE_MESSAGES_VIEW


def test_the_package_and_the_migrations_hold_the_same_view(tmp_path):
    """0004's view with 0005's WHERE (an OR term, for the index) is the package's, and
    what a new database stores."""
    m5 = _revision("0005")
    assert m5._IN_LIST.sub(m5._or_term, NEW_VIEW) == projection.CREATE_MESSAGES_VIEW
    from eventstore import EventStore

    EventStore.open(tmp_path / "v.db").close()
    conn = sqlite3.connect(tmp_path / "v.db")
    stored = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    conn.close()
    assert stored.strip() == projection.CREATE_MESSAGES_VIEW.strip()


@pytest.fixture(scope="module")
def both():
    """A plain table with the events' columns and the two view definitions over it."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, payload TEXT)")
    conn.execute(OLD_VIEW.replace("CREATE VIEW messages", "CREATE VIEW old_messages"))
    conn.execute(NEW_VIEW)
    yield conn
    conn.close()


def compare(conn, rows: list[tuple[str, str]]) -> list[str]:
    conn.execute("DELETE FROM events")
    conn.executemany("INSERT INTO events VALUES ('s', ?, ?, ?)",
                     [(i, t, p) for i, (t, p) in enumerate(rows)])
    old = conn.execute("SELECT seq, role, message FROM old_messages ORDER BY seq").fetchall()
    new = conn.execute("SELECT seq, role, message FROM messages ORDER BY seq").fetchall()
    assert new == old
    text = projection.messages_json(conn, "s")
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


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(message_types, payloads, st.booleans()), max_size=8))
def test_random_payloads_same_bytes_in_both_views(both, events):
    rows = [(t, dump(p, compact)) for t, p, compact in events]
    for _t, p in rows:
        json.loads(p)  # the strategy writes JSON
    compare(both, rows)


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


def test_the_store_keeps_a_chunky_sessions_message_pages_cached(store):
    from eventstore.engine import CACHE_SIZE_KIB

    assert store._conn.execute("PRAGMA cache_size").fetchone() == (-CACHE_SIZE_KIB,)
