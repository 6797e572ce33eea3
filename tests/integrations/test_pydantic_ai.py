"""eventstore.integrations.pydantic_ai with real pydantic-ai runs (FunctionModel,
TestModel, real tools, no network): the log's events rebuild message_history exactly."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from conftest import db_rows

from eventstore import AsyncEventStore
from eventstore.audit.verify import verify

if importlib.util.find_spec("pydantic_ai") is None:
    pytest.skip("could not import 'pydantic_ai': pip install -e '.[test]'", allow_module_level=True)


@pytest.fixture(autouse=True, scope="module")
def _pydantic_ai():
    """pydantic-ai bound as module globals before this file's first test rather than at
    import: importing it takes most of a CPU-second, and under ``-n`` every worker imports
    this file to collect it while only one runs its tests."""
    global Agent, ModelRetry, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart, AgentInfo
    global FunctionModel, TestModel, aload_messages, arecord_messages, load_messages, record_messages
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel

    from eventstore.integrations.pydantic_ai import aload_messages, arecord_messages, load_messages, record_messages


def scripted(messages, info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    if last.part_kind == "user-prompt":
        return ModelResponse(parts=[TextPart("let me add"), ToolCallPart("add", {"a": 1, "b": 2}),
                                    ToolCallPart("check", '{"x": 1}'), ToolCallPart("add", None)])
    return ModelResponse(parts=[TextPart(f"done after {len(messages)} messages")])


def make_agent(model) -> Agent:
    agent = Agent(model, system_prompt="You add.", instructions="Be brief.")

    @agent.tool_plain
    def add(a: int = 0, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @agent.tool_plain
    def check(x: int) -> str:
        """Refuses every x."""
        raise ModelRetry(f"x={x} is not allowed")

    return agent


def _same(a, b) -> None:
    assert ModelMessagesTypeAdapter.dump_json(a) == ModelMessagesTypeAdapter.dump_json(b)
    assert a == b


def test_runs_recorded_and_rebuilt_losslessly(store):
    agent = make_agent(FunctionModel(scripted))
    s = store.session("pai", create=True)
    first = agent.run_sync("1+2?", message_history=load_messages(s))
    record_messages(s, first.new_messages())
    _same(load_messages(s), first.all_messages())
    second = agent.run_sync("and again?", message_history=load_messages(s))
    record_messages(s, second.new_messages())
    _same(load_messages(s), second.all_messages())
    assert second.output.startswith("done after")

    events = list(s.events())
    types = [e.type for e in events]
    assert types[:5] == ["turn/start", "pydantic_ai/request", "system/message", "user/message", "pydantic_ai/response"]
    assert types.count("turn/start") == types.count("turn/end") == 2 and types[-1] == "turn/end"
    calls = next(e for e in events if e.type == "assistant/message" and "tool_calls" in e.payload)
    assert [c["function"]["arguments"] for c in calls.payload["tool_calls"]] == ['{"a":1,"b":2}', '{"x": 1}', "{}"]
    assert "let me add" not in str(events[4].payload)     # the text is its own event, stored once
    # the failed tool is marked, in the log and in the audit view
    rows = db_rows(store, "SELECT name, is_error FROM tool_calls WHERE session_id = 'pai' ORDER BY call_seq, call_id")
    assert sorted(rows) == sorted([("add", 0), ("check", 1), ("add", 0)] * 2)
    assert verify(store._backend).ok, verify(store._backend).findings
    ctx = s.context_at()
    assert ctx["messages"][0] == {"role": "system", "content": "You add."}
    assert [m["role"] for m in ctx["messages"]].count("tool") == 6


def test_async_with_test_model(store):
    async def main():
        astore = AsyncEventStore(store)
        s = await astore.session("pai-async", create=True)
        agent = make_agent(TestModel(call_tools=["add"]))
        result = await agent.run("hello", message_history=await aload_messages(s))
        await arecord_messages(s, result.new_messages())
        _same(await aload_messages(s), result.all_messages())
        again = await agent.run("more", message_history=await aload_messages(s))
        await arecord_messages(s, again.new_messages())
        _same(await aload_messages(s), again.all_messages())
        # other events in between are skipped
        await s.append("turn/end", {})
        _same(await aload_messages(s), again.all_messages())
        await astore.close()
    asyncio.run(main())


def test_tool_time_usage_and_turns_are_recorded(store):
    """A tool that takes 0.3 s shows 0.3 s in the tool_calls view (the events carry the
    times the messages record); each response's usage reaches the usage view; each
    record_messages call is one turn."""
    import time

    agent = Agent(TestModel(call_tools=["slow"]))

    @agent.tool_plain
    def slow(a: int) -> int:
        """Takes its time."""
        time.sleep(0.3)
        return a

    s = store.session("timed", create=True)
    results = []
    for prompt in ("one", "two"):
        result = agent.run_sync(prompt)  # no history: each run calls the tool
        record_messages(s, result.new_messages())
        results.append(result)
    _same(load_messages(s), results[0].all_messages() + results[1].all_messages())
    latencies = db_rows(store, "SELECT latency_s FROM tool_calls WHERE session_id = 'timed'")
    assert len(latencies) == 2 and all(0.3 <= float(lat) < 10 for (lat,) in latencies), latencies
    events = list(s.events())
    turns = [e.payload for e in events if e.type in ("turn/start", "turn/end")]
    run_ids = [m.run_id for m in (r.new_messages()[0] for r in results)]
    assert turns == [{"run_id": run_ids[0]}] * 2 + [{"run_id": run_ids[1]}] * 2
    assert events[0].type == "turn/start" and events[-1].type == "turn/end"
    want_in = sum(r.usage.input_tokens for r in results)
    want_out = sum(r.usage.output_tokens for r in results)
    totals = {row[0]: row[1:] for row in store._backend.usage_totals()}
    assert tuple(totals["timed"][:3]) == (4, want_in, want_out) and want_in > 0
    steps = [e.payload["usage"]["step"] for e in events if "usage" in e.payload]
    assert steps == [1, 2, 1, 2]
    assert record_messages(store.session("bare", create=True), results[0].new_messages(), turn=False)[0].type == \
        "pydantic_ai/request"


def test_concurrent_runs_each_stored_whole_with_calls_paired(store):
    """Runs recorded at once (tasks of one loop, and threads) each land as one block: a
    run's messages are never split by another's, and each tool call's return follows it."""
    from concurrent.futures import ThreadPoolExecutor

    agent = make_agent(TestModel(call_tools=["add"]))
    s = store.session("busy", create=True)

    async def one(astore, prompt):
        session = await astore.session("busy")
        result = await agent.run(prompt)
        await arecord_messages(session, result.new_messages())
        return result

    async def main():
        astore = AsyncEventStore(store)
        done = await asyncio.gather(*(one(astore, f"task {i}") for i in range(4)))
        await astore.close()
        return done

    runs = asyncio.run(main())
    with ThreadPoolExecutor(4) as pool:
        def threaded(i):
            result = agent.run_sync(f"thread {i}")
            record_messages(s, result.new_messages())
            return result
        runs += list(pool.map(threaded, range(4)))

    loaded = load_messages(s)
    by_run = {r.new_messages()[0].run_id: r.new_messages() for r in runs}
    assert len(loaded) == sum(len(m) for m in by_run.values())
    i = 0
    while i < len(loaded):  # consecutive blocks, each exactly one run's messages
        block = by_run.pop(loaded[i].run_id)
        _same(loaded[i:i + len(block)], block)
        i += len(block)
    assert by_run == {}
    pending: set[str] = set()
    for message in loaded:
        for part in message.parts:
            if part.part_kind == "tool-call":
                pending.add(part.tool_call_id)
            elif part.part_kind == "tool-return":
                pending.remove(part.tool_call_id)
        if message.kind == "response" and not any(p.part_kind == "tool-call" for p in message.parts):
            assert pending == set()
