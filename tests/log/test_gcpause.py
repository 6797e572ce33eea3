"""Large reads build their results with the cyclic garbage collector paused
(``eventstore.log.gcpause``): no collection runs while ``derive_messages``, ``events()`` or
the Agents SDK session's ``get_items`` parse a long session, the collector is on again
after (and stays off when the caller had turned it off), and pauses nest across threads.
"""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from eventstore.log.gcpause import paused


@pytest.fixture
def collections():
    """A list that gets an entry for each collection the cyclic collector starts."""
    seen: list[int] = []

    def callback(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)


def _long_session(store, n: int = 6000):
    s = store.create_session("long")
    s.append_many([("user/message", {"content": f"q{i}", "meta": {"i": [i, {"k": i}]}}) if i % 2 == 0 else
                   ("assistant/message", {"content": f"a{i}", "tool_calls": [{"id": f"c{i}", "type": "function",
                                          "function": {"name": "f", "arguments": "{}"}}]})
                   for i in range(n)])
    return s


def test_reads_of_a_long_session_run_no_collection(store, collections):
    s = _long_session(store)
    assert gc.isenabled()
    # at most one young collection as each pause ends (unpaused: one per ~700 new objects)
    collections.clear()
    assert len(s.derive_messages()) == 6000
    assert len(collections) <= 1
    collections.clear()
    assert len(list(s.events())) == 6000
    assert len(collections) <= 7  # a page of 1,000 at a time
    collections.clear()
    assert len(list(s.events(last=3000))) == 3000
    assert len(collections) <= 1
    assert gc.isenabled()


def test_a_paused_read_leaves_the_collector_as_the_caller_had_it(sqlite_store):
    s = _long_session(sqlite_store, 10)
    gc.disable()
    try:
        s.derive_messages()
        list(s.events())
        assert not gc.isenabled()
    finally:
        gc.enable()
    with paused():
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_pauses_nest_across_threads():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still holds
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_agents_session_first_read_runs_no_collection(sqlite_store, collections):
    pytest.importorskip("agents")
    from eventstore.integrations.openai_agents import EventStoreSession

    loop = asyncio.new_event_loop()
    try:
        items = [{"role": "user", "content": f"q{i}"} if i % 2 == 0 else
                 {"type": "function_call_output", "call_id": f"c{i}", "output": f"r{i}"} for i in range(6000)]
        loop.run_until_complete(EventStoreSession("a", sqlite_store).add_items(items))
        fresh = EventStoreSession("a", sqlite_store)
        collections.clear()
        got = loop.run_until_complete(fresh.get_items())
        assert got == items and len(collections) <= 1
        fresh.close()
    finally:
        loop.close()
