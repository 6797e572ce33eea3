"""eventstore.integrations.pydantic_ai with real pydantic-ai runs (FunctionModel,
TestModel, real tools, no network): the log's events rebuild message_history exactly."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai")

from conftest import db_rows  # noqa: E402
from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from eventstore import AsyncEventStore  # noqa: E402
from eventstore.audit import verify  # noqa: E402
from eventstore.integrations.pydantic_ai import (  # noqa: E402
    aload_messages,
    arecord_messages,
    load_messages,
    record_messages,
)


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
    assert types[:4] == ["pydantic_ai/request", "system/message", "user/message", "pydantic_ai/response"]
    calls = next(e for e in events if e.type == "assistant/message" and "tool_calls" in e.payload)
    assert [c["function"]["arguments"] for c in calls.payload["tool_calls"]] == ['{"a":1,"b":2}', '{"x": 1}', "{}"]
    assert "let me add" not in str(events[3].payload)     # the text is its own event, stored once
    # the failed tool is marked, in the log and in the audit view
    rows = db_rows(store, "SELECT name, is_error FROM tool_calls WHERE session_id = 'pai' ORDER BY call_seq, call_id")
    assert sorted(rows) == sorted([("add", 0), ("check", 1), ("add", 0)] * 2)
    assert verify(store.backend).ok, verify(store.backend).findings
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
