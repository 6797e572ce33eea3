"""The Python API: sessions, appends, reads, errors."""

from __future__ import annotations

import math
import re
import sqlite3
import time

import pytest
from conftest import TESTS, db_rows, hashed_line

import eventstore
from eventstore import (
    Event,
    EventStore,
    EventStoreError,
    IdempotencyConflict,
    InvalidEvent,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from eventstore.log.chain import chain_hash, genesis_hash


def test_public_api_is_small_and_listed():
    assert set(eventstore.__all__) == {
        "EventStore", "Session", "Event", "SessionInfo", "EventStoreError", "SessionNotFound", "SessionExists",
        "SeqConflict", "ConflictError", "IdempotencyConflict", "InvalidEvent", "InvalidJSONL", "AppendOnlyViolation", "DatabaseError",
        "QueryError", "ImportConflict", "ImportReport", "Dropped", "CheckpointError", "WalMismatch",
        "SchemaOutdated", "AsyncEventStore", "AsyncSession",
    }
    for name in eventstore.__all__:
        obj = getattr(eventstore, name)
        assert obj.__doc__, name
        if name.endswith(("Error", "Found", "Exists", "Conflict", "JSONL", "Violation", "Mismatch", "Outdated")) or name == "InvalidEvent":
            assert issubclass(obj, EventStoreError), name


def test_create_session_ids_look_like_the_reference(store):
    s = store.create_session()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{3}", s.id)
    assert store.session(s.id).id == s.id
    assert store.create_session("my-id").id == "my-id"


def test_duplicate_and_unknown_sessions(store):
    store.create_session("my-id")
    with pytest.raises(SessionExists):
        store.create_session("my-id")
    with pytest.raises(SessionNotFound) as e:
        store.session("nope")
    assert "nope" in str(e.value)


def test_append_assigns_seq_position_and_ts(store):
    a, b = store.create_session("a"), store.create_session("b")
    t0 = time.time()
    e0 = a.append("user/message", {"content": "1+1?"})
    e1 = b.append("turn/start")
    e2 = a.append("assistant/message", {"content": "2"}, ts=1764460800.5)
    assert isinstance(e0, Event)
    assert (e0.session_id, e0.seq, e0.type, e0.payload) == ("a", 0, "user/message", {"content": "1+1?"})
    assert t0 <= e0.ts <= time.time()
    assert (e1.seq, e2.seq, e2.ts) == (0, 1, 1764460800.5)
    assert e0.position < e1.position < e2.position
    assert list(a.events()) == [e0, e2]
    assert a.next_seq() == 2


def test_returned_payload_is_a_copy(store):
    s = store.create_session("a")
    payload = {"content": "x"}
    ev = s.append("user/message", payload)
    payload["content"] = "changed"
    assert ev.payload == {"content": "x"}
    assert next(s.events()).payload == {"content": "x"}


@pytest.mark.parametrize("payload, message", [
    ({"type": "x"}, "reserved"), ({"seq": 3}, "reserved"), ({"ts": 1.0}, "reserved"),
    ({"x": math.nan}, "NaN"), ({"x": [math.inf]}, "Infinity"), ({"x": -math.inf}, "Infinity"),
    ({"x": {1, 2}}, "not JSON"), ({"x": b"bytes"}, "not JSON"), ({1: "int key"}, "not a string"),
    ({"x": 2**64 + 1}, "exactly"), ("not a dict", "dict"), (["a"], "dict"),
    ({"event_id": 1}, "event_id"), ({"event_id": {"a": 1}}, "event_id"), ({"event_id": ""}, "event_id"),
])
def test_bad_payloads_are_refused_and_nothing_is_stored(store, payload, message):
    s = store.create_session("a")
    with pytest.raises(InvalidEvent, match=message):
        s.append("x", payload)
    assert s.next_seq() == 0


def test_circular_payload_is_refused(store):
    p: dict = {}
    p["self"] = p
    with pytest.raises(InvalidEvent, match="nested"):
        store.create_session("a").append("x", p)


@pytest.mark.parametrize("type_", ["", None, 3, "\ud800", "session/meta"])
def test_bad_types_are_refused(store, type_):
    with pytest.raises(InvalidEvent):
        store.create_session("a").append(type_, {})


def test_a_str_subclass_type_is_refused_with_the_plain_text_to_use(store):
    import enum

    class Kind(enum.StrEnum):
        NOTE = "note"

    s = store.create_session("a")
    for append in (lambda: s.append(Kind.NOTE, {}), lambda: s.append_many([(Kind.NOTE, {})])):
        with pytest.raises(InvalidEvent, match="plain str, not a Kind .a str subclass.: pass .* 'note'"):
            append()
    assert s.next_seq() == 0


def test_append_many_checks_each_item_of_a_batch_whatever_its_shape(store):
    """A batch of (type, payload) pairs is split by C loops, other shapes item by item:
    either way every type is checked (a str subclass equal to a plain type in the same
    batch too), a ts applies to its own event, and a generator is a batch like a list."""
    import enum

    class Kind(enum.StrEnum):
        NOTE = "note"

    s = store.create_session("a")
    for batch in ([("note", {})] * 5 + [(Kind.NOTE, {})], [("note", {}), ["note", {}], (Kind.NOTE, {}, 1.0)]):
        with pytest.raises(InvalidEvent, match="plain str"):
            s.append_many(batch)
    for bad in ([("note", {}), ("note",)], [("note", {}), "note"], [("", {}), ("", {})], [(None, {}), (None, {})]):
        with pytest.raises(InvalidEvent):
            s.append_many(bad)
    assert s.next_seq() == 0
    got = s.append_many((t, {"i": i}) for i, t in enumerate(["a", "b", "a"]))
    assert [(e.seq, e.type, e.payload) for e in got] == [(0, "a", {"i": 0}), (1, "b", {"i": 1}), (2, "a", {"i": 2})]
    assert len({e.ts for e in got}) == 1
    got = s.append_many([("a", {}, 1.5), ("b", {}), ["c", {}, 2]])
    assert [(e.type, e.ts) for e in got][::2] == [("a", 1.5), ("c", 2.0)]
    assert [e.ts for e in s.events(after_seq=2)] == [e.ts for e in got]


_BAD_ITEMS = [
    (("b", {"x": math.nan}), "nan is not a JSON number"),
    (("b", {"seq": 1}), "payload key 'seq' is reserved"),
    (("b", {"event_id": ""}), "payload key 'event_id' .the idempotency key. must be"),
    (("b", [1]), "payload must be a dict"),
    (("", {}), "event type must be a non-empty string"),
    (("b", {}, "soon"), "ts must be a finite number"),
    ("b", "append_many takes .type, payload. or .type, payload, ts. tuples, not 'b'"),
]


@pytest.mark.parametrize("shape, bad, reason", [
    (shape, bad, reason) for shape in ("pairs", "mixed", "tuple", "generator", "lists") for bad, reason in _BAD_ITEMS
    if not (shape == "pairs" and len(bad) == 3)  # a batch of pairs has no ts
])
def test_append_many_names_the_session_and_the_bad_item(store, bad, reason, shape):
    """A refused batch says which of its items was refused, counting from 0, whatever the
    batch's shape (pairs split by C loops, a generator read item by item, lists as items)
    and whichever check refused it (a newcomer helper found the item left unnamed)."""
    s = store.create_session("s-7")
    items = [("a", {}), ("a", {"i": 1}), ("a", {}) if shape == "pairs" else ("a", {}, 2.0), bad, ("c", {"seq": 2})]
    batch = {"pairs": items, "mixed": items, "tuple": tuple(items), "generator": iter(items),
             "lists": [list(i) if type(i) is tuple else i for i in items]}[shape]
    with pytest.raises(InvalidEvent, match=rf"^session 's-7': append_many item 3: {reason}"):
        s.append_many(batch)
    assert s.next_seq() == 0


@pytest.mark.parametrize("later", [("", {}), ("a", {}, "soon"), "a"])
@pytest.mark.parametrize("shape", ["list", "tuple", "generator"])
def test_append_many_names_the_first_bad_item_whichever_check_finds_it(store, later, shape):
    """Types, timestamps and shapes are checked before the payloads, as a batch: a bad type
    at item 3 was named before a bad payload at item 1 (the attack helper)."""
    s = store.create_session("s-8")
    items = [("a", {}), ("a", {"seq": 1}), ("a", {}), later]
    batch = {"list": items, "tuple": tuple(items), "generator": iter(items)}[shape]
    with pytest.raises(InvalidEvent, match=r"^session 's-8': append_many item 1: payload key 'seq' is reserved"):
        s.append_many(batch)
    assert s.next_seq() == 0


def test_append_many_reads_an_iterable_item_by_item(store):
    """A generator is read as it yields (found by helpers: copying it first broke these):
    one mutable item or payload dict reused for every event stores each state it had, a
    bad item or payload is refused before the generator is asked for more (an endless one
    included), and the first bad type of a batch is the one named."""
    import itertools

    s = store.create_session("a")

    def reused():
        item = ["a", None, 1.0]
        for i in range(3):
            item[0], item[1], item[2] = f"t{i}", {"i": i}, 1.0 + i
            yield item

    assert [(e.type, e.payload, e.ts) for e in s.append_many(reused())] == [
        ("t0", {"i": 0}, 1.0), ("t1", {"i": 1}, 2.0), ("t2", {"i": 2}, 3.0)]
    with pytest.raises(InvalidEvent, match="tuples, not 5"):
        s.append_many(itertools.repeat(5))
    with pytest.raises(InvalidEvent, match="non-empty string"):
        s.append_many(itertools.repeat(("", {})))

    shared = {"i": 0}  # one dict, changed between yields (found by a newcomer helper)

    def reused_dict():
        for i in range(3):
            shared["i"] = i
            yield "d", shared

    assert [e.payload for e in s.append_many(reused_dict())] == [{"i": 0}, {"i": 1}, {"i": 2}]
    for bad in ({"v": math.nan}, {"type": "x"}, [1], {"v": {1}}):
        with pytest.raises(InvalidEvent):  # refused as yielded: the endless rest is never asked for
            s.append_many(itertools.chain([("d", bad)], (("d", {"i": i}) for i in itertools.count())))
    with pytest.raises(InvalidEvent, match="^session 'a': append_many takes an iterable of events, not int"):
        s.append_many(5)
    for batch in ([("session/meta", {}), ("", {})], (("session/meta", {}), ("", {}))):
        with pytest.raises(InvalidEvent, match="reserved"):
            s.append_many(batch)
    assert s.next_seq() == 6


@pytest.mark.parametrize("ts", [math.nan, math.inf, "now", True, 10**400, -(10**309)])
def test_bad_ts_is_refused(store, ts):
    """Including integers past a double's range (they raised a bare OverflowError), on
    every path that takes a ts."""
    s = store.create_session("a")
    with pytest.raises(InvalidEvent, match="ts"):
        s.append("x", {}, ts=ts)
    with pytest.raises(InvalidEvent, match="ts"):
        s.append_many([("x", {}, ts)])
    with pytest.raises(InvalidEvent, match="ts"):
        s.append_many(e for e in [("x", {}, ts)])
    assert s.next_seq() == 0


def test_negative_zero_ts_comes_back_as_stored(store):
    s = store.create_session("a")
    returned = [s.append("x", {}, ts=-0.0), *s.append_many([("x", {}, -0.0)])]
    stored = list(s.events())
    assert [(e.ts, math.copysign(1, e.ts)) for e in returned] == [(e.ts, math.copysign(1, e.ts)) for e in stored]


def test_expected_seq(store):
    s = store.create_session("a")
    assert s.append("x", expected_seq=0).seq == 0
    with pytest.raises(SeqConflict) as e:
        s.append("x", expected_seq=0)
    assert (e.value.expected_seq, e.value.actual_seq) == (0, 1)
    with pytest.raises(SeqConflict) as e:
        s.append("x", expected_seq=5)
    assert e.value.actual_seq == 1
    assert s.append("x", expected_seq=1).seq == 1
    with pytest.raises(InvalidEvent):
        s.append("x", expected_seq=-1)
    with pytest.raises(InvalidEvent):
        list(s.events(after_seq="a"))


def test_append_many_is_atomic(store):
    s = store.create_session("a")
    s.append("turn/start")
    evs = s.append_many([("step/start", {"step": 0}), ("assistant/chunk", {"delta": {"content": "a"}}, 5.0)])
    assert [(e.seq, e.type) for e in evs] == [(1, "step/start"), (2, "assistant/chunk")]
    assert evs[1].ts == 5.0
    with pytest.raises(InvalidEvent):
        s.append_many([("ok", {}), ("bad", {"x": math.nan})])
    with pytest.raises(SeqConflict):
        s.append_many([("ok", {})], expected_seq=1)
    assert s.next_seq() == 3
    assert s.append_many([]) == []
    assert [e.seq for e in s.append_many([("a", {}), ("b", None)], expected_seq=3)] == [3, 4]


def test_append_to_a_vanished_session_handle_is_session_not_found(store):
    ghost = eventstore.Session(store, "ghost")
    with pytest.raises(SessionNotFound):
        ghost.append("x", {})
    with pytest.raises(SessionNotFound):
        ghost.append_many([("x", {})])


def test_events_filters(store):
    s = store.create_session("a")
    s.append_many([("turn/start", {}), ("user/message", {"content": "q"}), ("assistant/chunk", {"delta": {}}),
                   ("assistant/message", {"content": "a"}), ("turn/end", {})])
    assert [e.seq for e in s.events(after_seq=2)] == [3, 4]
    assert [e.type for e in s.events(types="user/message")] == ["user/message"]
    assert [e.seq for e in s.events(types=["user/message", "turn/end"], after_seq=1)] == [4]


def test_events_reads_page_by_page(store):
    s = store.create_session("a")
    s.append_many([("x", {"i": i}) for i in range(2503)])
    assert [e.payload["i"] for e in s.events()] == list(range(2503))
    assert [e.seq for e in s.events(after_seq=2400)][:2] == [2401, 2402]


def test_lone_surrogates_are_stored_losslessly(store):
    s = store.create_session("a")
    payload = {"content": "ab\ud83d", "list": ["\ude00 low first", "pair \ud83d\ude00 made of halves"]}
    s.append("tool/result", payload)
    got = next(s.events()).payload
    assert got["content"] == "ab\ud83d"
    assert got["list"][0] == "\ude00 low first"
    # two halves side by side are one character, as in JavaScript
    assert got["list"][1] == "pair \U0001F600 made of halves"


def test_sessions_registry(store):
    assert store.sessions() == []
    store.create_session("a").append_many([("x", {}, 10.0), ("y", {}, 11.5)])
    store.create_session("b")
    infos = {i.id: i for i in store.sessions()}
    assert (infos["a"].events, infos["a"].last_ts) == (2, 11.5)
    assert (infos["b"].events, infos["b"].last_ts) == (0, None)


def test_meta_is_kept_for_export(store):
    import io

    store.create_session("m", meta={"cwd": "/tmp", "model": "x"})
    out = io.BytesIO()
    store.export_jsonl("m", out)
    assert out.getvalue() == b'{"type":"session/meta","id":"m","cwd":"/tmp","model":"x"}\n'
    with pytest.raises(InvalidEvent):
        store.create_session("n", meta={"id": "other"})


def test_idempotent_appends(store):
    s = store.create_session("a")
    first = s.append("tool/result", {"tool_call_id": "c", "content": "2"}, event_id="k1")
    again = s.append("tool/result", {"tool_call_id": "c", "content": "2"}, event_id="k1")
    assert again == first or (again.seq, again.position, again.payload) == (first.seq, first.position, first.payload)
    assert first.payload["event_id"] == "k1"
    # a retry that also carries the expected seq it had the first time
    assert s.append("tool/result", {"tool_call_id": "c", "content": "2"}, event_id="k1", expected_seq=0).seq == 0
    with pytest.raises(IdempotencyConflict) as e:
        s.append("tool/result", {"tool_call_id": "c", "content": "3"}, event_id="k1")
    assert e.value.seq == 0
    assert s.next_seq() == 1
    assert s.append("x", {}, event_id="k2").seq == 1


def test_hash_chain_covers_every_append_path(store, raw):
    import io

    s = store.create_session("a")
    s.append("a", {"x": 1})
    s.append_many([("b", {"y": [1.5, "\ud800"]}), ("c", {})])
    s.append("d", {"z": None}, ts=3.0)

    store.import_jsonl(io.BytesIO((TESTS / "data" / "demo.jsonl").read_bytes()), name="demo")
    salted = {"a": True, "5a1b896f-beb": True}  # appends and imports are salted
    for sid in ("a", "5a1b896f-beb"):
        prev = genesis_hash(sid)
        for seq, type_, ts, payload, h, salt in raw.execute(
                "SELECT seq, type, ts, payload, hash, salt FROM events WHERE session_id = ? ORDER BY seq", (sid,)):
            assert (salt is not None) == salted[sid] and (salt is None or len(salt) == 16)
            prev = chain_hash(prev, hashed_line(type_, seq, ts, payload, salt))
            assert h == prev, (sid, seq)


def test_open_reports_bad_files_clearly(tmp_path):
    bad = tmp_path / "not.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(eventstore.DatabaseError, match="not.db"):
        EventStore.open(bad)
    with pytest.raises(eventstore.DatabaseError, match="does not exist"):
        EventStore.open(tmp_path / "missing" / "x.db")
    with pytest.raises(eventstore.DatabaseError, match="durability"):
        EventStore.open(tmp_path / "x.db", durability="sometimes")


def test_open_accepts_sqlalchemy_urls_and_memory(tmp_path):
    with EventStore.open(f"sqlite:///{tmp_path / 'u.db'}") as st:
        st.create_session("a").append("x", {})
    with EventStore.open(tmp_path / "u.db") as st:
        assert st.session("a").next_seq() == 1
    with EventStore.open(":memory:") as st:
        assert st.create_session("m").append("x", {}).seq == 0


def test_another_applications_database_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE events (x); INSERT INTO events VALUES (1);")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(eventstore.DatabaseError, match="not an eventstore database"):
        EventStore.open(path)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events")  # still theirs: no triggers were added
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_a_newer_schema_revision_is_refused(tmp_path):
    path = tmp_path / "newer.db"
    EventStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    conn.close()
    with pytest.raises(eventstore.DatabaseError, match="schema revision '9999'.*newer eventstore"):
        EventStore.open(path)


def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with EventStore.open(path) as st:
        assert st.create_session("a").append("x", {}).seq == 0


@pytest.mark.parametrize("size", [10, 100_000])  # the export's small and large payload branches
def test_export_writes_index_keys_first_as_javascript_does(store, size):
    import io

    store.create_session("k").append("tool/result", {"content": "x" * size, "0": "line zero"}, ts=1.0)
    out = io.BytesIO()
    store.export_jsonl("k", out)
    line = out.getvalue().split(b"\n")[1]
    assert line.startswith(b'{"0":"line zero","type":"tool/result","seq":0,"ts":1,"content":"xxx')


def test_no_payload_is_stored_as_an_empty_object_on_every_append_path(store):
    """None is ``{}`` for a single append, a list batch and a generator batch alike (one
    rule, in payload_json)."""
    s = store.create_session("none")
    s.append("a", None)
    s.append_many([("b", None), ("c", {})])
    s.append_many(("d", None) for _ in range(2))
    assert [(e.type, e.payload) for e in s.events()] == [("a", {}), ("b", {}), ("c", {}), ("d", {}), ("d", {})]
    assert db_rows(store, "SELECT DISTINCT payload FROM events WHERE session_id = 'none'") == [("{}",)]


def test_every_error_survives_pickling_so_a_worker_process_can_raise_it():
    """A ProcessPoolExecutor worker's SeqConflict reached the parent as BrokenProcessPool
    (its __init__ took other arguments than the message: a newcomer helper found it)."""
    import concurrent.futures
    import pickle

    from eventstore import (
        AppendOnlyViolation,
        DatabaseError,
        ImportConflict,
        InvalidJSONL,
        QueryError,
    )

    errors = [SessionNotFound("s"), SessionExists("s"), SessionExists("s", "detail"), SeqConflict("s", 3, 5),
              IdempotencyConflict("s", "k", 2), IdempotencyConflict("s", "k", 2, "why"), InvalidEvent("bad"),
              InvalidJSONL("f.jsonl", 3, "reason"), InvalidJSONL("f.jsonl", 0, "whole"),
              ImportConflict("f.jsonl", 2, "differs", "s"), AppendOnlyViolation("no"), DatabaseError("db"),
              QueryError("q"), EventStoreError("base")]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert (type(back), str(back), back.args, vars(back)) == (type(error), str(error), error.args, vars(error))
    with concurrent.futures.ProcessPoolExecutor(1) as pool:
        with pytest.raises(SeqConflict) as e:
            pool.submit(_raise_seq_conflict).result(timeout=60)
    assert (e.value.session_id, e.value.expected_seq, e.value.actual_seq) == ("s", 0, 1)


def _raise_seq_conflict():
    s = EventStore.open(":memory:").create_session("s")
    s.append("a", {})
    s.append("a", {}, expected_seq=0)


def test_the_records_behave_as_frozen_dataclasses(tmp_path):
    """Event, SessionInfo, Hit and UsageTotals are made without importing dataclasses
    (eventstore's start-up), and still behave as @dataclass(frozen=True, slots=True) does."""
    import copy
    import dataclasses
    import pickle

    from eventstore.search import Hit, UsageTotals

    with eventstore.EventStore.open(tmp_path / "r.db") as store:
        store.create_session("s").append("user/message", {"content": "hi"}, ts=5.0)
        (event,) = store.session("s").events()
        (info,) = store.sessions()
    assert repr(event) == ("Event(session_id='s', seq=0, position=1, type='user/message', ts=5.0, "
                           "payload={'content': 'hi'})")
    assert event == eventstore.Event("s", 0, 1, "user/message", 5.0, {"content": "hi"}) != info
    assert event == eventstore.Event(payload={"content": "hi"}, ts=5.0, type="user/message", position=1, seq=0,
                                     session_id="s")  # (the fields are __init__'s parameters, by name too)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'seq'"):
        event.seq = 1
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'seq'"):
        del event.seq
    with pytest.raises(TypeError, match="unhashable"):
        hash(event)  # (its payload is a dict)
    assert hash(info) == hash(copy.copy(info)) and pickle.loads(pickle.dumps(info)) == info
    assert copy.deepcopy(event) == event and pickle.loads(pickle.dumps(event)) == event
    assert dataclasses.is_dataclass(event) and dataclasses.is_dataclass(UsageTotals)
    assert [f.name for f in dataclasses.fields(eventstore.SessionInfo)] == ["id", "created_at", "events", "last_ts"]
    assert dataclasses.asdict(info) == {"id": "s", "created_at": info.created_at, "events": 1, "last_ts": 5.0}
    assert dataclasses.replace(event, seq=7).seq == 7 and dataclasses.astuple(UsageTotals(1, 2, 3, 4, 5)) == (1, 2, 3, 4, 5)
    assert Event.__dataclass_params__.frozen and Hit.__match_args__[0] == "session_id"
    match info:
        case eventstore.SessionInfo(sid, _created, n, last):
            assert (sid, n, last) == ("s", 1, 5.0)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'last_ts'"):
        eventstore.SessionInfo("s", 1.0, 2)
