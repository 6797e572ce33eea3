"""EventStoreSession with the real OpenAI Agents SDK (Runner, function tools, a scripted
model, no network), side by side with the SDK's own SQLiteSession."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp

import agent_workers
import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, SQLiteSession, function_tool  # noqa: E402
from conftest import db_rows  # noqa: E402
from scripted_agents import ScriptedModel, calls, text  # noqa: E402

from eventstore import AsyncEventStore, EventStore, SeqConflict  # noqa: E402
from eventstore.audit import verify  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession, event_items, item_events  # noqa: E402

CTX = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _as_json(items) -> str:
    return json.dumps(items)  # key order included


SCRIPT = [
    calls(("call_1", "add", {"a": 1, "b": 2}), ("call_2", "weather", {"city": "Oslo"})),
    text("3, and sunny in Oslo"),
    text("Hello again", id="msg_2"),
    text("streamed: the answer is 42", id="msg_3"),
    calls(("call_3", "add", {"a": 20, "b": 22})),
    text("42", id="msg_4"),
    text("after the clear", id="msg_5"),
]


class Twin:
    """One agent run twice: with SQLiteSession and with EventStoreSession."""

    def __init__(self, store):
        self.sqlite = SQLiteSession("twin")
        self.ours = EventStoreSession("twin", store)
        self.models = {"sqlite": ScriptedModel(SCRIPT), "ours": ScriptedModel(SCRIPT)}

    def agent(self, side: str) -> Agent:
        return Agent(name="calc", instructions="You add and know the weather.", tools=[add, weather],
                     model=self.models[side])

    async def turn(self, prompt: str, streamed: bool = False) -> None:
        for side, session in (("sqlite", self.sqlite), ("ours", self.ours)):
            hooks = self.ours.hooks() if side == "ours" else None
            if streamed:
                result = Runner.run_streamed(self.agent(side), prompt, session=session, hooks=hooks)
                stream = self.ours.record_stream(result) if side == "ours" else result.stream_events()
                async for _ in stream:
                    pass
            else:
                await Runner.run(self.agent(side), prompt, session=session, hooks=hooks)
        await self.same()

    async def same(self, limit=None) -> list:
        a, b = await self.sqlite.get_items(limit), await self.ours.get_items(limit)
        assert _as_json(b) == _as_json(a)
        return b


def test_runner_with_eventstore_session_matches_sqlite_session(backend_url):
    async def main():
        store = EventStore.open(backend_url)
        twin = Twin(store)
        await twin.turn("add 1+2, and the weather in Oslo?")
        await twin.turn("hello")
        await twin.turn("stream it", streamed=True)
        await twin.turn("20+22?")
        assert len(await twin.same(limit=3)) == 3
        assert _as_json(await twin.ours.pop_item()) == _as_json(await twin.sqlite.pop_item())
        await twin.same()
        assert _as_json(await twin.ours.pop_item()) == _as_json(await twin.sqlite.pop_item())
        await twin.same()
        assert len(await twin.same(limit=3)) == 3
        await twin.sqlite.clear_session()
        await twin.ours.clear_session()
        assert await twin.same() == []
        assert await twin.ours.pop_item() is None
        await twin.turn("after the clear")
        # the agent saw the same history in every request
        assert twin.models["ours"].requests == twin.models["sqlite"].requests
        assert len(twin.models["ours"].requests) == len(SCRIPT)

        s = store.session("twin")
        events = list(s.events())
        types = [e.type for e in events]
        assert types.count("context/retract") == 3    # two pops, one clear: nothing deleted
        assert types.count("system/message") == 1 and types.count("model/tools") == 1
        chunks = "".join(e.payload["delta"]["content"] for e in events if e.type == "assistant/chunk")
        assert chunks == "streamed: the answer is 42"
        assert verify(store.backend).ok, verify(store.backend).findings

        # each item is one event (the two parallel calls one assistant/message), stored once
        first_turn = [e for e in events if e.seq < 10]
        assert [e.type for e in first_turn][:8] == [
            "user/message", "system/message", "model/tools", "assistant/message", "tool/result", "tool/result",
            "assistant/message", "user/message"]
        call_event = first_turn[3]
        assert [c["function"]["name"] for c in call_event.payload["tool_calls"]] == ["add", "weather"]
        assert "Oslo" not in json.dumps(call_event.payload["responses_items"])  # arguments not kept twice

        # the whole request: what the model was sent before the first answer
        first_answer = next(e for e in events if e.type == "assistant/message" and e.payload.get("content"))
        request = s.context_at(first_answer.seq)
        assert request["messages"][0] == {"role": "system", "content": "You add and know the weather."}
        assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "tool", "tool"]
        assert [t["function"]["name"] for t in request["tools"]] == ["add", "weather"]
        assert request["tools"][0]["function"]["parameters"]["properties"]["a"]["type"] == "integer"
        # at the head: the clear retracted everything before it
        head = s.context_at()
        assert [m["role"] for m in head["messages"]] == ["system", "user", "assistant"]
        assert head["messages"][1:] == [{"role": "user", "content": "after the clear"},
                                        {"role": "assistant", "content": "after the clear"}]
        # the reference projection shows the log as it is
        assert len(s.derive_messages()) > len(head["messages"])
        store.close()

    asyncio.run(main())


def test_pop_item_takes_back_one_call_of_several(store):
    async def main():
        ses = EventStoreSession("pop", AsyncEventStore(store))
        items = [{"content": "hi", "role": "user"},
                 {"arguments": "{}", "call_id": "c1", "name": "f", "type": "function_call", "id": "fc1", "status": "completed"},
                 {"arguments": "{}", "call_id": "c2", "name": "g", "type": "function_call", "id": "fc2", "status": "completed"}]
        await ses.add_items(items)
        assert await ses.pop_item() == items[2]
        assert await ses.get_items() == items[:2]
        ctx = store.session("pop").context_at()
        assert ctx["messages"][1]["tool_calls"] == [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        assert await ses.pop_item() == items[1]
        assert [m["role"] for m in store.session("pop").context_at()["messages"]] == ["user"]
        assert await ses.get_items(limit=1) == items[:1]
    asyncio.run(main())


ODD_ITEMS = [
    {"role": "user", "content": [{"type": "input_text", "text": "parts"}]},
    {"type": "message", "role": "user", "content": "typed"},
    {"role": "assistant", "content": "easy assistant"},
    {"id": "m", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "a", "annotations": []}, {"type": "refusal", "refusal": "no"}]},
    {"id": "m2", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": None, "annotations": []}]},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
    {"role": "system", "content": "be brief"},
    {"type": "function_call_output", "call_id": "c9", "output": [{"type": "input_text", "text": "x"}]},
    {"type": "function_call", "call_id": "c8", "name": "f"},   # no arguments: kept as an item of its own
]


def test_every_item_comes_back_as_it_went_in(store):
    events = item_events(ODD_ITEMS)
    assert [t for t, _ in events] == ["user/message", "user/message", "assistant/message", "assistant/message",
                                      "assistant/message", "responses/item", "responses/item", "tool/result",
                                      "responses/item"]
    back = [item for t, p in events for item in event_items(t, p)]
    assert _as_json(back) == _as_json(ODD_ITEMS)

    async def main():
        ses = EventStoreSession("odd", store)
        await ses.add_items(ODD_ITEMS)
        assert _as_json(await ses.get_items()) == _as_json(ODD_ITEMS)
        assert _as_json(await ses.get_items(limit=2)) == _as_json(ODD_ITEMS[-2:])
        assert await ses.get_items(limit=0) == []
    asyncio.run(main())


def test_events_written_by_other_code_read_as_items(store):
    s = store.create_session("plain")
    s.append("user/message", {"content": "q"})
    s.append("assistant/message", {"content": "let me see", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    s.append("tool/result", {"tool_call_id": "c1", "content": "ok"})

    async def main():
        ses = EventStoreSession("plain", store)
        assert await ses.get_items() == [
            {"role": "user", "content": "q"}, {"role": "assistant", "content": "let me see"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
        await ses.pop_item()
        await ses.pop_item()
        assert await ses.pop_item() == {"role": "assistant", "content": "let me see"}
        assert s.context_at()["messages"] == [{"role": "user", "content": "q"}]
    asyncio.run(main())


def test_another_process_cannot_splice_into_a_turn(backend_url):
    EventStore.open(backend_url).close()

    async def main():
        async with AsyncEventStore.open(backend_url) as astore:
            ses = EventStoreSession("shared", astore)
            assert await ses.get_items() == []
            await ses.add_items([{"content": "mine", "role": "user"}])   # a turn begins
            p = CTX.Process(target=agent_workers.add_items, args=(str(backend_url), "shared", "theirs"))
            p.start()
            await asyncio.get_running_loop().run_in_executor(None, p.join, 60)
            assert p.exitcode == 0
            with pytest.raises(SeqConflict) as e:   # the rest of the turn would land after theirs
                await ses.add_items([{"role": "assistant", "content": "reply to mine"}])
            assert "another writer appended to session 'shared'" in e.value.__notes__[0]
            items = await ses.get_items()       # reads the head again
            assert [i["content"] for i in items] == ["mine", "theirs"]
            await ses.add_items([{"role": "assistant", "content": "reply"}])
    asyncio.run(main())


@function_tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


def test_a_failed_tool_call_is_stored_with_is_error(store):
    """A tool that raises: the SDK shows the model its default message; with the session's
    tool_error_formatter in the run config, that call's tool/result carries is_error (the
    tool_calls view shows it), the other call's does not, and get_items still returns
    exactly what SQLiteSession returns."""
    from agents import RunConfig

    script = [calls(("call_ok", "divide", {"a": 6, "b": 3}), ("call_bad", "divide", {"a": 1, "b": 0})),
              text("one of them failed")]

    async def main():
        ours, theirs = EventStoreSession("err", store), SQLiteSession("err")
        for session in (theirs, ours):
            agent = Agent(name="calc", tools=[divide], model=ScriptedModel(script))
            config = RunConfig(tool_error_formatter=ours.tool_error_formatter()) if session is ours else None
            await Runner.run(agent, "divide", session=session, run_config=config)
        assert _as_json(await ours.get_items()) == _as_json(await theirs.get_items())
        results = {e.payload["tool_call_id"]: e.payload for e in store.session("err").events(types="tool/result")}
        assert results["call_bad"]["is_error"] is True and "is_error" not in results["call_ok"]
        assert "error" in results["call_bad"]["content"].lower()
        rows = db_rows(store, "SELECT call_id, is_error FROM tool_calls WHERE session_id = 'err' ORDER BY call_id")
        assert rows == [("call_bad", 1), ("call_ok", 0)]

    asyncio.run(main())


def _tool_turn(i: int) -> list[dict]:
    """A turn whose function calls share one event: more items than events."""
    return [{"content": f"q{i}", "role": "user"},
            {"arguments": "{}", "call_id": f"a{i}", "name": "f", "type": "function_call", "id": f"fa{i}", "status": "completed"},
            {"arguments": "{}", "call_id": f"b{i}", "name": "g", "type": "function_call", "id": f"fb{i}", "status": "completed"},
            {"call_id": f"a{i}", "output": "1", "type": "function_call_output"},
            {"call_id": f"b{i}", "output": "2", "type": "function_call_output"},
            {"id": f"m{i}", "content": [{"annotations": [], "text": f"t{i}", "type": "output_text", "logprobs": []}],
             "role": "assistant", "status": "completed", "type": "message"}]


def test_reads_after_retractions_match_sqlite_session_at_every_limit(store):
    async def main():
        ours, theirs = EventStoreSession("r", store), SQLiteSession("r")

        async def same():
            everything = await theirs.get_items()
            assert _as_json(await ours.get_items()) == _as_json(everything)
            for limit in range(1, len(everything) + 2):
                assert _as_json(await ours.get_items(limit=limit)) == _as_json(await theirs.get_items(limit=limit))

        for i in range(4):
            for s in (ours, theirs):
                await s.add_items(_tool_turn(i))
        await same()
        for _ in range(3):  # the message, the outputs: then one call of an event of two
            assert await ours.pop_item() == await theirs.pop_item()
        await same()
        for s in (ours, theirs):
            await s.clear_session()
        assert await ours.get_items() == []
        for s in (ours, theirs):
            await s.add_items(_tool_turn(9))
        assert await ours.pop_item() == await theirs.pop_item()
        await same()
        theirs.close()
    asyncio.run(main())


def test_a_whole_read_after_a_whole_read_reads_only_what_came_after(store, monkeypatch):
    """get_items() keeps the items of its last whole read and then reads the events from
    that head on; what another session object (another process) appended or retracted in
    between is in the next read, exactly as a fresh read gives it."""
    calls = []
    real = type(store.backend).session_payloads

    def spy(self, session_id, types, limit=None, last=False, from_seq=0):
        calls.append(from_seq)
        return real(self, session_id, types, limit, last, from_seq)

    monkeypatch.setattr(type(store.backend), "session_payloads", spy)

    async def main():
        ours, other, theirs = EventStoreSession("k", store), EventStoreSession("k", store), SQLiteSession("k")

        async def same():
            fresh = await EventStoreSession("k", store).get_items()
            got = await ours.get_items()
            assert _as_json(got) == _as_json(fresh) == _as_json(await theirs.get_items())
            return got

        for i in range(3):
            for s in (other, theirs):
                await s.add_items(_tool_turn(i))
        await same()
        calls.clear()
        got = await same()
        assert calls[-1] == await (await ours._s()).next_seq()  # only what came after: nothing
        got[0]["content"] = "changed by the caller"  # the caller's objects are its own
        for s in (other, theirs):
            await s.add_items(_tool_turn(7))
        calls.clear()
        await same()
        assert calls[-1] > 0
        assert await other.pop_item() == await theirs.pop_item()  # a retraction: a whole read again
        calls.clear()
        await same()
        assert calls[-2] > 0 and calls[-1] == 0  # the read from the head met the retraction
        for s in (other, theirs):
            await s.clear_session()
            await s.add_items([{"role": "user", "content": "after the clear"}])
        assert _as_json(await same()) == _as_json([{"role": "user", "content": "after the clear"}])
        theirs.close()
    asyncio.run(main())
