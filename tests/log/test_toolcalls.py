"""The tool-call tracker (eventstore.log.toolcalls), used by verify, repair and the viewer's
sessions index, says what the ``tool_calls``, ``turns`` and ``session_summary`` views say, on
both databases, for sessions of every shape (hypothesis): repeated and missing call ids,
results before, between and after their calls, parts adding calls, turns left open."""

from __future__ import annotations

import itertools

import pytest
from conftest import db_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore.log.codec import dumps
from eventstore.log.toolcalls import ToolCallTracker
from eventstore.web.index import SessionIndex, state_extra

IDS = st.sampled_from(["a", "b", ""])
CALL = st.one_of(
    st.builds(lambda i, n: {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}},
              IDS, st.sampled_from(["f", "g"])),
    st.just({"type": "function", "function": {"name": "f"}}),  # no id: nothing answers it
)
CALLS = st.lists(CALL, max_size=3)


def _message(calls) -> dict:
    return {"content": "a"} if calls is None else {"content": "a", "tool_calls": calls}


EVENT = st.one_of(
    st.just(("user/message", {"content": "q"})),
    st.builds(lambda c: ("assistant/message", _message(c)), st.none() | CALLS | st.just("not an array")),
    st.builds(lambda c: ("assistant/part", {"message_id": "m", "tool_calls": c}), CALLS),
    st.builds(lambda i: ("tool/result", {"content": "r"} if i is None else {"tool_call_id": i, "content": "r"}),
              st.none() | IDS),
    st.sampled_from([("turn/start", {}), ("turn/end", {}), ("step/start", {"step": 0}), ("step/end", {}),
                     ("note/x", {})]),
)
_SESSIONS = itertools.count()


def _key(row: tuple) -> tuple:
    return tuple((v is None, v) for v in row)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(EVENT, min_size=1, max_size=24))
def test_the_tracker_says_what_the_views_say(store, events):
    sid = f"s{next(_SESSIONS)}"
    stored = store.create_session(sid).append_many(events)
    tracker = ToolCallTracker(keep=True)
    for ev in stored:
        tracker.feed(ev.seq, ev.type, ev.payload)
    tracker.finish()

    calls = db_rows(store, "SELECT call_seq, call_id, result_seq FROM tool_calls WHERE session_id = ?", (sid,))
    assert sorted(calls, key=_key) == sorted(((c.seq, c.id, c.result_seq) for c in tracker.calls), key=_key)

    turns = db_rows(store, "SELECT start_seq, end_seq, complete, steps, tool_calls FROM turns "
                           "WHERE session_id = ? ORDER BY start_seq", (sid,))
    assert [(a, b, bool(c), d, e) for a, b, c, d, e in turns] == [
        (t.start_seq, t.end_seq, t.complete, t.steps, t.tool_calls) for t in tracker.turns]

    summary = db_rows(store, "SELECT messages, tool_calls FROM session_summary WHERE session_id = ?", (sid,))
    assert summary == [(tracker.messages, tracker.tool_calls)]
    unanswered = sum(1 for c in tracker.calls if c.result_seq is None)
    assert tracker.dangling == unanswered  # after finish(), every unanswered call dangles

    # The viewer's index follows the same tracker from what the backend hands it.
    index = SessionIndex()
    index.load([(sid, 0.0)], [], [r for r in store._backend.state_rows(0, 2**62, 10**6) if r[1] == sid])
    s = index.get(sid)
    assert (s.messages, s.tool_calls, s.dangling + s.waiting) == (tracker.messages, tracker.tool_calls, unanswered)
    last_turn = turns[-1] if turns else None
    assert s.complete == (not unanswered and (last_turn is None or bool(last_turn[2]) or s.answered))
    # ... and so does it from the events as the live follower hands them over.
    live = SessionIndex()
    for ev in stored:
        live.apply(ev.seq + 1, sid, ev.seq, ev.type, ev.ts, state_extra(ev.type, dumps(ev.payload)))
    assert live.get(sid).to_dict() | {"created_at": 0.0} == s.to_dict() | {"created_at": 0.0, "events": len(stored),
                                                                              "first_ts": stored[0].ts,
                                                                              "last_ts": stored[-1].ts}



@pytest.mark.parametrize(("call_id", "result_id"), [
    ("\ud83d", "/ud83d"), ("\x00", "/u0000"), ("a\x00b", "a\x00c"), ("\x00\ud83d", "/u0000/ud83d"),
    ("\ud83d", "\ud83d"), ("a\x00b", "a\x00b"), ("\\\x00", "\\\x00")])
def test_a_result_answers_only_its_own_escaped_id(store, call_id, result_id):
    """Ids that read the same only decoded (PostgreSQL's es_json spells "\\ud83d" as "/ud83d",
    SQLite's ->> ends a text at U+0000) are different ids in the ``tool_calls`` and ``turns``
    views, as in the tracker; the same id still answers."""
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    session = store.create_session()
    stored = session.append_many([
        ("turn/start", {}), ("assistant/message", {"content": "", "tool_calls": [call]}),
        ("tool/result", {"tool_call_id": result_id, "content": "r"}), ("assistant/message", {"content": "ok"})])
    tracker = ToolCallTracker(keep=True)
    for ev in stored:
        tracker.feed(ev.seq, ev.type, ev.payload)
    tracker.finish()
    answered = 2 if call_id == result_id else None
    assert [c.result_seq for c in tracker.calls] == [answered]
    assert db_rows(store, "SELECT call_seq, result_seq FROM tool_calls WHERE session_id = ?",
                   (session.id,)) == [(1, answered)]
    assert [bool(r[0]) for r in db_rows(store, "SELECT complete FROM turns WHERE session_id = ?", (session.id,))] \
        == [t.complete for t in tracker.turns] == [answered is not None]


def test_a_tool_call_that_is_not_an_object_has_no_id(store):
    """An element of ``tool_calls`` that is not an object (a string, a number, null, an
    array) is a call without id or name, on both databases, as in the tracker; reading the
    ``tool_calls`` view works (SQLite's took a string element's value as JSON text and failed
    with "malformed JSON" before 0370)."""
    session = store.create_session()
    calls = ["x", "{\"id\":\"c\"}", 1, None, ["c"], {"id": "c", "function": {"name": "f"}}]
    stored = session.append_many([("assistant/message", {"content": "", "tool_calls": calls}),
                                  ("tool/result", {"tool_call_id": "c", "content": "r"})])
    tracker = ToolCallTracker(keep=True)
    for ev in stored:
        tracker.feed(ev.seq, ev.type, ev.payload)
    tracker.finish()
    rows = db_rows(store, "SELECT call_seq, call_id, name, result_seq FROM tool_calls WHERE session_id = ?",
                   (session.id,))
    assert sorted(rows, key=_key) == sorted([(c.seq, c.id, c.name, c.result_seq) for c in tracker.calls], key=_key) \
        == sorted([(0, None, None, None)] * 5 + [(0, "c", "f", 1)], key=_key)
