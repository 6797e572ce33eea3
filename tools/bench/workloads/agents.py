"""The Agents SDK adapter: ``EventStoreSession`` against the SDK's own ``SQLiteSession``, on
the same items, at the same durability: the SDK's connections get the ``synchronous`` level
of eventstore's ``--durability`` (``normal``: NORMAL; ``full``: FULL, the SDK's default).
Each side's note gives the settings read back from its connections, and a check fails when
they differ."""

from __future__ import annotations

import asyncio
import json
import time

from eventstore import EventStore

from ..harness import timed
from ..peers import agents_sdk
from ._systems import store_settings

SUMMARY = "EventStoreSession against the SDK's SQLiteSession: add_items, a first get_items, get_items(limit=10)"
NAME = "Agents SDK session"
ESS = "EventStoreSession"


def turn_items(i: int) -> list[dict]:
    """One tool-using turn as the Agents SDK saves it (items copied from a real run)."""
    return [
        {"content": f"question {i}: add 1+2 and look up the weather in Oslo", "role": "user"},
        {"arguments": json.dumps({"a": i, "b": 2}), "call_id": f"call_{i}_a", "name": "add",
         "type": "function_call", "id": f"fc_{i}_a", "status": "completed"},
        {"arguments": json.dumps({"city": "Oslo"}), "call_id": f"call_{i}_b", "name": "weather",
         "type": "function_call", "id": f"fc_{i}_b", "status": "completed"},
        {"call_id": f"call_{i}_a", "output": str(i + 2), "type": "function_call_output"},
        {"call_id": f"call_{i}_b", "output": "sunny, 18 degrees", "type": "function_call_output"},
        {"id": f"msg_{i}", "content": [{"annotations": [], "text": f"{i + 2}, and it is sunny in Oslo.",
                                        "type": "output_text", "logprobs": []}],
         "role": "assistant", "status": "completed", "type": "message"},
    ]


def run(bench) -> None:
    """Time the adapter and the SDK's session on the same items (SQLite only)."""
    if bench.backend != "sqlite":
        reason = "SQLiteSession is SQLite only"
    else:
        reason = agents_sdk.available() if bench.peers else "--no-peers"
    if reason:
        bench.skip(NAME, "every case", agents_sdk.NAME, reason)
        return
    from eventstore.integrations.openai_agents import EventStoreSession

    turns = bench.pick(20, 200)
    loop = asyncio.new_event_loop()
    store = EventStore.open(bench.target("agents"), durability=bench.durability)
    sdk_path = bench.folder("agents") / "sdk.db"
    make = {ESS: lambda sid: EventStoreSession(sid, store),
            agents_sdk.NAME: lambda sid: agents_sdk.session(sid, sdk_path, bench.durability)}
    run_ = loop.run_until_complete
    counters = {name: iter(range(turns, 10**9)) for name in make}  # the same items for both
    sessions = {name: m(f"long-{name}") for name, m in make.items()}
    for s in sessions.values():
        run_(s.add_items([x for i in range(turns) for x in turn_items(i)]))
    ran = {ESS: store_settings(store), agents_sdk.NAME: agents_sdk.session_settings(sessions[agents_sdk.NAME])}
    notes = {ESS: f"durability {bench.durability}: {ran[ESS]}", agents_sdk.NAME: ran[agents_sdk.NAME]}
    bench.check("agents: both sides ran the same journal mode and synchronous level", ran[ESS] == ran[agents_sdk.NAME],
                ran)

    def adds(name: str, items_of) -> float:
        s, counter = sessions[name], counters[name]

        async def go():
            for _ in range(turns):
                await s.add_items(items_of(next(counter)))
        return timed(lambda: run_(go()), turns)

    def first_read(name: str) -> float:
        s = make[name](f"long-{name}")  # a new object: nothing kept from an earlier read
        # CPU time of this process, every thread (both sides read on worker threads): a read is
        # CPU work here, and its wall time on a shared machine mostly measures who else ran
        t0 = time.process_time()
        run_(s.get_items())
        t = time.process_time() - t0
        if name == agents_sdk.NAME:
            s.close()
        return t

    def last10(name: str) -> float:
        return timed(lambda: [run_(sessions[name].get_items(limit=10)) for _ in range(turns)], turns)

    n = 6 * turns
    cases = [("add_items, 1 item", lambda name: adds(name, lambda i: turn_items(i)[:1])),
             ("add_items, a turn of 6 items", lambda name: adds(name, turn_items)),
             (f"get_items() of {n:,}+ items, a new object's first read (CPU time)", first_read),
             ("get_items(limit=10)", last10)]
    for case, fn in cases:
        bench.measure(NAME, case, {ESS: lambda fn=fn: fn(ESS), agents_sdk.NAME: lambda fn=fn: fn(agents_sdk.NAME)},
                      "call", notes)
    got = [run_(make[name](f"long-{name}").get_items()) for name in make]
    bench.check("agents: both sessions return the same items", got[0] == got[1], f"{len(got[0])} items")
    sessions[agents_sdk.NAME].close()
    store.close()
    loop.close()
