"""Arbitrary JSON payloads survive export, import, export with identical bytes."""

from __future__ import annotations

import io
import itertools

import pytest
from conftest import new_sqlite_store
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import EventStore


def encodable(s: str) -> bool:
    return s.encode("utf-8", "ignore") == s.encode("utf-8", "surrogatepass")


keys = st.text(max_size=6).filter(lambda k: k not in ("type", "seq", "ts"))
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),  # any code points, lone surrogates included
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=10,
)
events = st.lists(st.tuples(st.text(min_size=1, max_size=12).filter(lambda t: encodable(t) and t != "session/meta"),
                            st.dictionaries(keys, values, max_size=4),
                            st.floats(0, 4e9, allow_nan=False)), max_size=8)
_n = itertools.count()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roundtrip")
    with EventStore.open(new_sqlite_store(folder / "a.db")) as a, EventStore.open(new_sqlite_store(folder / "b.db")) as b:
        yield a, b


# 100 examples, not 150: each writes, exports, imports, exports and reads back a session in two
# SQLite files (tens of milliseconds; test_import_export_props checks the same round trip on both parse paths)
@settings(max_examples=100, deadline=None)
@given(events=events, session_id=st.text(min_size=1, max_size=20).filter(encodable))
def test_export_import_export_is_byte_identical(stores, events, session_id):
    a, b = stores
    sid = f"{session_id}#{next(_n)}"  # every example gets a session of its own
    s = a.create_session(sid)
    s.append_many(events)
    first = io.BytesIO()
    a.export_jsonl(sid, first)
    assert b.import_jsonl(io.BytesIO(first.getvalue()), name="first") == sid
    second = io.BytesIO()
    b.export_jsonl(sid, second)
    assert second.getvalue() == first.getvalue()
    assert [e.payload for e in b.session(sid).events()] == [e.payload for e in s.events()]
    assert b.session(sid).derive_messages() == s.derive_messages()
