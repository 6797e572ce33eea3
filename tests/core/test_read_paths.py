"""The fast paths of one session's reads give what the plain paths give.

``events()`` parses a page's payloads in one call over them joined as a JSON array, and
builds the page's events a field at a time; the payloads must still be ``json.loads`` of
each stored text, odd values included (lone surrogates, integers past 64 bits, which send
the page to the exact parser). SQLite joins the projection's rows itself; past its longest
value the rows are joined in Python, with the same text.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import db_rows

# values orjson refuses or would read differently, spread over the pages of a long session
ODD = [{"content": "\ud83d half a pair"}, {"n": 2**70}, {"n": -(2**64)}, {"content": "x", "big": [1, 18446744073709551616]},
       {"f": 1.0, "z": -0.0}, {"deep": {"a": [{"b": "\udfff"}]}}]


def _mixed(n: int) -> list[tuple[str, dict]]:
    out = []
    for i in range(n):
        if i % 997 == 5:
            out.append(("note", ODD[(i // 997) % len(ODD)]))
        elif i % 3 == 0:
            out.append(("user/message", {"content": f"q{i}"}))
        else:
            out.append(("assistant/message", {"content": f"a{i}", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}))
    return out


def test_events_payloads_are_json_loads_of_each_stored_text(store):
    s = store.create_session("long")
    s.append_many(_mixed(2_600))  # three pages, the odd values in some of them only
    stored = db_rows(store, "SELECT seq, position, type, ts, payload FROM events WHERE session_id = ? ORDER BY seq",
                     ("long",))
    expected = [json.loads(p) for *_, p in stored]
    events = list(s.events())
    assert [(e.seq, e.position, e.type, e.ts) for e in events] == [tuple(r[:4]) for r in stored]
    assert [e.payload for e in events] == expected
    assert repr([e.payload for e in events]) == repr(expected)  # 1.0 stays a float, -0.0 keeps its sign
    assert all(e.session_id == "long" for e in events)
    tail = list(s.events(last=1_500))
    assert [e.seq for e in tail] == list(range(1_100, 2_600))
    assert repr([e.payload for e in tail]) == repr(expected[1_100:])
    notes = list(s.events(types=["note"]))
    assert repr([e.payload for e in notes]) == repr([x for x, r in zip(expected, stored, strict=True)
                                                     if r[2] == "note"])
    assert list(s.events(after_seq=2_599)) == [] and list(s.events(last=0)) == []


@pytest.mark.sqlite_only
def test_a_projection_past_sqlites_longest_value_is_joined_in_python(sqlite_store):
    s = sqlite_store.create_session("s")
    s.append_many(_mixed(400))
    rows = db_rows(sqlite_store, "SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq", ("s",))
    whole = "[" + ",".join(m for _, m in rows) + "]"
    upto = "[" + ",".join(m for seq, m in rows if seq <= 199) + "]"
    assert s.messages_json() == whole and s.messages_json(upto_seq=199) == upto  # joined by SQLite
    conn = sqlite_store._backend._connection()
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, len(upto) // 2)  # a message fits, the joined text does not
    try:
        assert s.messages_json() == whole
        assert s.messages_json(upto_seq=199) == upto
        assert s.derive_messages() == json.loads(whole)
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)
    assert sqlite_store.session("s").messages_json() == whole


def test_the_projection_starts_after_the_last_compaction_as_the_messages_view_does(store):
    s = store.create_session("c")
    s.append_many([("user/message", {"content": "old"}), ("assistant/message", {"content": "old answer"}),
                   ("compaction/boundary", {}), ("user/message", {"content": "mid"}),
                   ("compaction/boundary", {"summary": "x"}), ("user/message", {"content": "new"}),
                   ("assistant/message", {"content": "new answer"})])
    view = db_rows(store, "SELECT message FROM messages WHERE session_id = ? ORDER BY seq", ("c",))
    assert s.messages_json() == "[" + ",".join(m for (m,) in view) + "]"
    assert s.derive_messages() == [{"role": "user", "content": "new"}, {"role": "assistant", "content": "new answer"}]
    assert json.loads(s.messages_json(upto_seq=3)) == [{"role": "user", "content": "mid"}]
    assert json.loads(s.messages_json(upto_seq=1)) == [{"role": "user", "content": "old"},
                                                       {"role": "assistant", "content": "old answer"}]
    assert s.messages_json(upto_seq=2) == "[]" and store.create_session("empty").messages_json() == "[]"
