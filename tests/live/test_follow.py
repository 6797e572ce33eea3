"""store.follow / session.follow in one process: paging, the store's own appends, the
in-memory store, argument checks. (Across processes: tests/core/test_concurrency.py.)"""

from __future__ import annotations

import pytest

from eventstore import EventStore, InvalidEvent
from eventstore.live.follow import PAGE


def test_follow_pages_through_more_than_a_page_then_stops_when_idle(store):
    s = store.create_session("s")
    s.append_many([("assistant/chunk", {"delta": {"content": str(i)}}) for i in range(2 * PAGE + 7)])
    got = list(store.follow(idle_timeout=0))
    assert [e.position for e in got] == list(range(1, 2 * PAGE + 8))
    assert got[-1].payload == {"delta": {"content": str(2 * PAGE + 6)}}
    assert [e.seq for e in s.follow(after_seq=2 * PAGE, idle_timeout=0)] == list(range(2 * PAGE + 1, 2 * PAGE + 7))


def test_follow_sees_the_same_stores_appends(store):
    a, b = store.create_session("a"), store.create_session("b")
    a.append("user/message", {"content": "1"})
    whole = store.follow(poll_interval=0.001, idle_timeout=5)
    only_b = b.follow(poll_interval=0.001, idle_timeout=5)
    assert next(whole).payload == {"content": "1"}
    b.append("user/message", {"content": "2"})  # after the follower caught up
    a.append("user/message", {"content": "3"})
    assert [(e.session_id, e.seq) for e in (next(whole), next(whole))] == [("b", 0), ("a", 1)]
    assert next(only_b).payload == {"content": "2"}
    whole.close()
    only_b.close()


def test_follow_from_now(store):
    s = store.create_session("s")
    s.append("turn/start", {})
    now = store.last_position()
    s.append("turn/end", {})
    assert [e.type for e in store.follow(after_position=now, idle_timeout=0)] == ["turn/end"]
    assert store.last_position() == 2


def test_follow_an_in_memory_store():
    with EventStore.open(":memory:") as store:
        s = store.create_session("m")
        s.append("turn/start", {})
        gen = s.follow(poll_interval=0.001, idle_timeout=5)
        assert next(gen).seq == 0
        s.append("turn/end", {})
        assert next(gen).type == "turn/end"
        gen.close()


def test_follow_checks_its_arguments(store):
    s = store.create_session("s")
    with pytest.raises(InvalidEvent):
        next(store.follow(after_position=-1))
    with pytest.raises(InvalidEvent):
        next(s.follow(after_seq=1.5))
    with pytest.raises(ValueError):
        next(store.follow(poll_interval=-1))
    with pytest.raises(ValueError):
        next(s.follow(idle_timeout="soon"))


@pytest.mark.parametrize("interval", [float("nan"), float("inf"), -1, "soon"])
def test_a_bad_interval_is_refused_at_the_call_not_at_the_first_event(store, interval):
    s = store.create_session("s")
    s.append("x", {})
    with pytest.raises(InvalidEvent, match="finite number of seconds"):
        s.follow(poll_interval=interval)
    with pytest.raises(InvalidEvent, match="finite number of seconds"):
        store.follow(idle_timeout=interval)


def test_a_cursor_past_what_sqlite_can_bind_means_nothing_after_it(store):
    """An after_seq or after_position past 2**63 - 1 is not an OverflowError: nothing comes
    after it, as after the largest one SQLite can hold."""
    s = store.create_session("s")
    s.append("x", {})
    assert list(s.events(after_seq=2**70)) == []
    assert list(s.events(after_seq=-(2**70))) == list(s.events())
    assert list(s.follow(after_seq=2**70, idle_timeout=0)) == []
    assert list(store.follow(after_position=2**70, idle_timeout=0)) == []
