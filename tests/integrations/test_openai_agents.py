"""EventStoreSession with the real OpenAI Agents SDK (Runner, function tools, a scripted
model, no network), side by side with the SDK's own SQLiteSession."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import time

import agent_workers
import pytest
import workers
from conftest import db_rows

from eventstore import AsyncEventStore, EventStore, SeqConflict
from eventstore.audit.verify import verify

if importlib.util.find_spec("agents") is None:
    pytest.skip("could not import 'agents': pip install -e '.[test]'", allow_module_level=True)

CTX = workers.CTX  # fresh processes from a server that imported eventstore once


@pytest.fixture(autouse=True, scope="module")
def _agents_sdk():
    """The Agents SDK, and what this file builds from it, bound as module globals before its
    first test rather than at import: importing the SDK takes 1.7 CPU-seconds, and under
    ``-n`` every worker imports this file to collect it while only one runs its tests."""
    global Agent, Runner, SQLiteSession, function_tool, ScriptedModel, calls, text
    global EventStoreSession, event_items, item_events, SCRIPT, add, weather, divide, slow_add
    from agents import Agent, Runner, SQLiteSession, function_tool
    from scripted_agents import ScriptedModel, calls, text

    from eventstore.integrations.openai_agents import EventStoreSession, event_items, item_events

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @function_tool
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    @function_tool
    def slow_add(a: int, b: int) -> int:
        """Add two integers, slowly."""
        time.sleep(0.3)
        return a + b

    SCRIPT = [
        calls(("call_1", "add", {"a": 1, "b": 2}), ("call_2", "weather", {"city": "Oslo"})),
        text("3, and sunny in Oslo"),
        text("Hello again", id="msg_2"),
        text("streamed: the answer is 42", id="msg_3"),
        calls(("call_3", "add", {"a": 20, "b": 22})),
        text("42", id="msg_4"),
        text("after the clear", id="msg_5"),
    ]


def _as_json(items) -> str:
    return json.dumps(items)  # key order included


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
        assert verify(store._backend).ok, verify(store._backend).findings

        # each item is one event (the two parallel calls one assistant/message), stored once
        first_turn = [e for e in events if e.seq < 12]
        assert [e.type for e in first_turn][:11] == [
            "user/message", "turn/start", "system/message", "model/tools", "assistant/message", "tool/result",
            "tool/result", "assistant/message", "turn/end", "user/message", "turn/start"]
        assert first_turn[1].payload == {"agent": "calc"} and first_turn[8].payload == {"agent": "calc"}
        call_event = first_turn[4]
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
    """get_items() keeps the items of its last whole read (from the object's second one on:
    a first read keeps nothing) and then reads the events from that head on; what another
    session object (another process) appended or retracted in between is in the next read,
    exactly as a fresh read gives it."""
    calls = []
    real = type(store._backend).session_payloads

    def spy(self, session_id, types, limit=None, last=False, from_seq=0):
        calls.append(from_seq)
        return real(self, session_id, types, limit, last, from_seq)

    monkeypatch.setattr(type(store._backend), "session_payloads", spy)

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
        await same()
        assert calls[-1] == 0  # the first read kept nothing: a whole read again, kept now
        calls.clear()
        got = await same()
        assert calls[-1] == store.session("k").next_seq()  # only what came after: nothing
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


# --- drop-in: what a user of SQLiteSession relies on -----------------------------------------

def _answer(t: str) -> list:
    return text(t, id=f"msg_{abs(hash(t)) % 10**6}")


def _run_on_fresh_loop(agent, prompt, **kwargs):
    """Runner.run_sync as a thread of a web server runs it: a thread with its own loop."""
    return Runner.run_sync(agent, prompt, **kwargs)


async def _turn(how: str, agent, prompt, **kwargs):
    """One turn through Runner.run, Runner.run_sync (on a thread) or Runner.run_streamed."""
    if how == "run":
        return await Runner.run(agent, prompt, **kwargs)
    if how == "run_sync":
        return await asyncio.to_thread(_run_on_fresh_loop, agent, prompt, **kwargs)
    result = Runner.run_streamed(agent, prompt, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


HOW = ["run", "run_sync", "run_streamed"]


@pytest.mark.parametrize("how", HOW)
def test_the_second_turn_remembers_the_first_and_sessions_stay_apart(store, how):
    async def main():
        model = ScriptedModel([_answer("Paris"), _answer("Rome"), _answer("France")])
        agent = Agent(name="geo", model=model)
        with EventStoreSession("a", store) as a, EventStoreSession("b", store) as b:
            assert (await _turn(how, agent, "capital of France?", session=a)).final_output == "Paris"
            assert (await _turn(how, agent, "capital of Italy?", session=b)).final_output == "Rome"
            assert (await _turn(how, agent, "which country was my first question about?", session=a)).final_output == "France"
        sent = model.requests[2][1]
        assert [i.get("content") for i in sent if i.get("role") == "user"] == [
            "capital of France?", "which country was my first question about?"]
        assert "capital of Italy?" not in json.dumps(sent)
    asyncio.run(main())


def test_items_from_several_threads_each_with_its_own_loop_are_stored_once(store):
    """One session object, eight threads, each running its own event loop: no call waits
    forever, and each item is stored exactly once."""
    import threading

    session = EventStoreSession("threads", store)
    errors = []

    def worker(i: int) -> None:
        loop = asyncio.new_event_loop()
        try:
            for k in range(5):
                loop.run_until_complete(session.add_items([{"role": "user", "content": f"{i}.{k}"}]))
            loop.run_until_complete(session.get_items(limit=3))
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)
        finally:
            loop.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting"
    assert errors == []
    items = asyncio.run(session.get_items())
    assert sorted(i["content"] for i in items) == sorted(f"{i}.{k}" for i in range(8) for k in range(5))
    assert store.session("threads").next_seq() == 40
    session.close()


def test_run_sync_from_a_thread_pool_on_one_session(store):
    """A threaded web server: each request thread calls Runner.run_sync on the same session
    object; every turn's question and answer is stored once."""
    from concurrent.futures import ThreadPoolExecutor

    session = EventStoreSession("web", store)
    script = [_answer(f"answer {i}") for i in range(6)]
    agent = Agent(name="web", model=ScriptedModel(script))
    with ThreadPoolExecutor(3) as pool:
        outputs = list(pool.map(lambda i: Runner.run_sync(agent, f"question {i}", session=session).final_output,
                                range(6)))
    assert sorted(outputs) == sorted(f"answer {i}" for i in range(6))
    items = asyncio.run(session.get_items())
    assert sorted(i["content"] for i in items if i.get("role") == "user") == sorted(f"question {i}" for i in range(6))
    assert len(items) == 12
    session.close()


def test_close_ends_what_the_session_opened_and_nothing_else(store):
    import threading

    async def main():
        before = threading.active_count()
        session = EventStoreSession("c", store)
        await session.add_items([{"role": "user", "content": "hi"}])
        assert threading.active_count() > before  # its worker thread
        session.close()
        assert threading.active_count() == before
        session.close()  # again: nothing happens
        for call in (session.add_items([]), session.add_items([{"role": "user", "content": "x"}]),
                     session.get_items(), session.get_items(limit=0), session.pop_item(), session.clear_session()):
            with pytest.raises(RuntimeError, match="EventStoreSession 'c' is closed"):
                await call
        # the store given to it stays open, for this session's other objects and other sessions
        assert [e.payload["content"] for e in store.session("c").events()] == ["hi"]
        async with EventStoreSession("c", store) as again:
            assert await again.get_items() == [{"role": "user", "content": "hi"}]
        with pytest.raises(RuntimeError):
            await again.get_items()
        with EventStoreSession("d", store) as other:
            await other.add_items([{"role": "user", "content": "still open"}])
        # an AsyncEventStore passed in is the caller's too
        astore = AsyncEventStore(store)
        async with EventStoreSession("e", astore) as mine:
            await mine.add_items([{"role": "user", "content": "e"}])
        assert (await (await astore.session("e")).next_seq()) == 1
        await astore.close()
    asyncio.run(main())


def test_session_settings_as_the_sdk_takes_them(store):
    from agents import RunConfig, SessionSettings

    assert EventStoreSession("s", store).session_settings == SessionSettings()
    as_dict = EventStoreSession("s", store, session_settings={"limit": 2})
    assert isinstance(as_dict.session_settings, SessionSettings) and as_dict.session_settings.limit == 2
    with pytest.raises(TypeError, match="limitt"):
        EventStoreSession("s", store, session_settings={"limitt": 2})

    async def main():
        await as_dict.add_items([{"role": "user", "content": f"m{i}"} for i in range(6)])
        assert [i["content"] for i in await as_dict.get_items()] == ["m4", "m5"]          # the settings' limit
        assert [i["content"] for i in await as_dict.get_items(limit=3)] == ["m3", "m4", "m5"]  # the call's wins
        model = ScriptedModel([_answer("ok"), _answer("ok 2")])
        agent = Agent(name="s", model=model)
        await Runner.run(agent, "next", session=as_dict, run_config=RunConfig(session_settings=SessionSettings(limit=1)))
        assert [i.get("content") for i in model.requests[0][1]] == ["m5", "next"]  # the run's settings win
        await Runner.run(agent, "again", session=as_dict)
        assert len(model.requests[1][1]) == 3  # the session's limit of 2, then the new input
    asyncio.run(main())


@pytest.mark.parametrize("how", HOW)
def test_limits_and_input_callbacks_shape_what_the_model_is_sent(store, how):
    from agents import RunConfig, SessionSettings

    async def main():
        session = EventStoreSession("lim", store)
        await session.add_items([{"role": "user", "content": "old question"}, {"role": "assistant", "content": "old answer"}])
        model = ScriptedModel([_answer("a"), _answer("b"), _answer("c")])
        agent = Agent(name="lim", model=model)
        await _turn(how, agent, "none of the past", session=session,
                    run_config=RunConfig(session_settings=SessionSettings(limit=0)))
        assert [i.get("content") for i in model.requests[0][1]] == ["none of the past"]
        await _turn(how, agent, "all of it", session=session,
                    run_config=RunConfig(session_settings=SessionSettings(limit=100)))
        assert len(model.requests[1][1]) == 5

        def questions_only(history, new_input):
            return [i for i in history if i.get("role") == "user"] + new_input

        await _turn(how, agent, [{"role": "user", "content": "questions only"}], session=session,
                    run_config=RunConfig(session_input_callback=questions_only))
        assert [i.get("content") for i in model.requests[2][1]] == [
            "old question", "none of the past", "all of it", "questions only"]
        stored = await session.get_items()
        assert [i.get("content") for i in stored if i.get("role") == "user"] == [
            "old question", "none of the past", "all of it", "questions only"]  # each stored once
    asyncio.run(main())


def test_a_limit_that_cuts_a_tool_call_from_its_output_sends_neither(store):
    """get_items(limit) returns exactly the newest items; the SDK then drops an output whose
    call fell outside the limit, as it does with its own sessions."""
    async def main():
        session = EventStoreSession("cut", store)
        await session.add_items(_tool_turn(0)[:4])  # question, two calls, the first output
        assert [i.get("type") for i in await session.get_items(limit=2)] == ["function_call", "function_call_output"]
        assert (await session.get_items(limit=1))[0]["call_id"] == "a0"
        model = ScriptedModel([_answer("fine")])
        from agents import RunConfig, SessionSettings
        await Runner.run(Agent(name="cut", model=model), "go on", session=session,
                         run_config=RunConfig(session_settings=SessionSettings(limit=1)))
        assert [i.get("content") for i in model.requests[0][1]] == ["go on"]
    asyncio.run(main())


def test_unicode_and_sql_looking_content_come_back_unchanged(store):
    odd = ["こんにちは", "😊👍", "Привет", "O'Reilly", "DROP TABLE events;--", '"; DELETE FROM sessions; --',
           "Robert'); DROP TABLE students;--", "\u0000 nul and \u2028 separator", "\ud83d"]

    async def main():
        session = EventStoreSession("odd'; DROP TABLE events;--", store)
        await session.add_items([{"role": "user", "content": c} for c in odd])
        assert [i["content"] for i in await session.get_items()] == odd
        assert (await session.pop_item())["content"] == odd[-1]
    asyncio.run(main())


def test_a_failing_add_items_ends_a_streamed_run_with_its_error(store):
    async def main():
        session = EventStoreSession("fail", store)

        async def refuse(items):
            raise RuntimeError("the store said no")

        session.add_items = refuse
        result = Runner.run_streamed(Agent(name="f", model=ScriptedModel([_answer("never")])), "hi", session=session)

        async def drain():
            async for _ in result.stream_events():
                pass

        with pytest.raises(RuntimeError, match="the store said no"):
            await asyncio.wait_for(drain(), 30)
    asyncio.run(main())


def test_two_processes_running_turns_on_one_session(backend_url, tmp_path):
    """Two real processes, one session: A's model is still thinking when B runs a whole
    turn. B's model sees A's question (stored before A's model saw it); A's answer cannot
    land after B's turn: A's run fails with SeqConflict and stores nothing more."""
    EventStore.open(backend_url).close()
    f = {name: str(tmp_path / name) for name in ("asked", "go", "a.json", "b.json")}
    a = CTX.Process(target=agent_workers.run_turn,
                    args=(str(backend_url), "shared", "question A", "answer A", f["asked"], f["go"], f["a.json"]))
    a.start()
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f["asked"]):
            assert a.is_alive() and time.monotonic() < deadline, "A never reached its model"
            time.sleep(0.01)
        b = CTX.Process(target=agent_workers.run_turn,
                        args=(str(backend_url), "shared", "question B", "answer B", None, None, f["b.json"]))
        b.start()
        b.join(60)
        assert b.exitcode == 0
    finally:
        open(f["go"], "w").close()
        a.join(60)
    assert a.exitcode == 0
    got_a, got_b = (json.loads(open(f[n]).read()) for n in ("a.json", "b.json"))
    assert got_b["final_output"] == "answer B"
    assert got_b["model_input"] == ["question A", "question B"]
    assert got_a["model_input"] == ["question A"]
    assert got_a["error"] == "SeqConflict" and "final_output" not in got_a
    assert any("another writer appended to session 'shared'" in n for n in got_a["notes"])
    with EventStore.open(backend_url) as store:
        events = [(e.type, e.payload.get("content")) for e in store.session("shared").events()
                  if e.type in ("user/message", "assistant/message", "turn/start", "turn/end")]
        assert events == [("user/message", "question A"), ("turn/start", None), ("user/message", "question B"),
                          ("turn/start", None), ("assistant/message", "answer B"), ("turn/end", None)]


@pytest.mark.parametrize("how", HOW)
def test_hooks_record_tool_time_turns_and_token_usage(store, how):
    """Each tool call's latency is the tool's real time; each run is a turn/start ..
    turn/end; each model response's usage is stored (the usage view adds it up)."""
    async def main():
        session = EventStoreSession(f"timed-{how}", store)
        for turn in range(2):
            model = ScriptedModel([calls((f"c{turn}", "slow_add", {"a": 1, "b": turn})), _answer(f"done {turn}")])
            agent = Agent(name="timer", tools=[slow_add], model=model)
            if how == "run_streamed":
                result = Runner.run_streamed(agent, f"turn {turn}", session=session, hooks=session.hooks())
                async for _ in session.record_stream(result):
                    pass
            else:
                await _turn(how, agent, f"turn {turn}", session=session, hooks=session.hooks())
        return await session.get_items()

    items = asyncio.run(main())
    sid = f"timed-{how}"
    latencies = db_rows(store, f"SELECT call_id, latency_s FROM tool_calls WHERE session_id = '{sid}' ORDER BY call_id")
    assert [c for c, _ in latencies] == ["c0", "c1"]
    assert all(0.3 <= float(lat) < 10 for _, lat in latencies), latencies
    events = list(store.session(sid).events())
    types = [e.type for e in events]
    assert types.count("turn/start") == 2 and types.count("turn/end") == 2
    assert types.index("turn/start") < types.index("assistant/message") and types[-1] == "turn/end"
    assert types.index("turn/end") < types.index("turn/start", 2)  # the first turn ends before the second begins
    usage = [e.payload["usage"] for e in events if "usage" in e.payload]
    # the SDK's input_tokens count the cached ones; the usage view counts them apart
    assert [(u["step"], u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["reasoning_tokens"])
            for u in usage] == [(1, 99, 10, 1, 1), (2, 198, 20, 2, 2)] * 2
    totals = {row[0]: row[1:] for row in store._backend.usage_totals()}
    assert tuple(totals[sid][:4]) == (4, 594, 60, 6)
    # nothing of this is in the items: get_items gives back exactly what the SDK stored
    assert all("usage" not in json.dumps(i) for i in items)
    assert [i.get("content") for i in items if i.get("role") == "user"] == ["turn 0", "turn 1"]


def test_items_with_a_secret_on_a_store_that_redacts_them(db_path):
    """With redact_secrets=True an item holding a secret is followed by its redaction event:
    the session's head moves past it, so the next add_items is no SeqConflict (one item or
    several at once)."""
    key = "OPENAI_API_KEY=sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5oQ7sT3BlbkFJu9wY1aC3eG5iK7mO9qS1"

    async def main():
        with EventStore.open(db_path, redact_secrets=True) as store:
            ses = EventStoreSession("leak", store)
            for batch in ([{"role": "user", "content": key}],
                          [{"role": "user", "content": "hi"}, {"role": "user", "content": key}],
                          [{"role": "user", "content": "again"}]):
                await ses.add_items(batch)
            assert [i["content"] for i in await ses.get_items()] == [
                "[redacted: secret: OpenAI Token]", "hi", "[redacted: secret: OpenAI Token]", "again"]
            ses.close()
    asyncio.run(main())
