"""The README's "With an agent framework" examples, run as written (a scripted model in
place of the real one: no network)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from conftest import TESTS

README = (TESTS.parent / "README.md").read_text()


def example(name: str) -> str:
    m = re.search(rf"<!-- agents-example: {re.escape(name)} -->\n```python\n(.*?)```", README, re.S)
    assert m, f"README has no example {name!r}"
    return m.group(1)


def test_asyncio_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(example("asyncio"), "README:asyncio", "exec"), {})
    assert capsys.readouterr().out == "0 user/message\n"
    from eventstore import EventStore
    with EventStore.open(tmp_path / "agent.db") as store:
        assert [e.payload for e in store.session("chat-1").events()] == [{"content": "hi", "event_id": "msg-1"}]


def test_openai_agents_example_and_the_context_command(tmp_path, monkeypatch, capsys):
    pytest.importorskip("agents")
    from agents.models.multi_provider import MultiProvider
    from scripted_agents import ScriptedModel, calls, text

    from eventstore.cli import cli

    model = ScriptedModel([calls(("call_1", "add", {"a": 1, "b": 2})), text("3")])
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)
    monkeypatch.chdir(tmp_path)
    exec(compile(example("openai-agents"), "README:openai-agents", "exec"), {})
    assert capsys.readouterr().out == "3\n"
    assert model.requests[1][1][-1] == {"call_id": "call_1", "output": "3", "type": "function_call_output"}

    console = re.search(r"\$ eventstore context chat-2 --at 4\n(.*?)\.\.\.", README).group(1)
    r = CliRunner().invoke(cli, ["--db", "agent.db", "context", "chat-2", "--at", "4"], catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout.startswith(console), (console, r.stdout)


def test_pydantic_ai_example(tmp_path, monkeypatch):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.test import TestModel

    from eventstore import EventStore
    from eventstore.integrations.pydantic_ai import load_messages

    monkeypatch.chdir(tmp_path)
    code = example("pydantic-ai")
    assert '"openai:gpt-4o"' in code
    namespace = {"TestModel": TestModel}
    exec(compile(code.replace('"openai:gpt-4o"', "TestModel()"), "README:pydantic-ai", "exec"), namespace)
    with EventStore.open("agent.db") as store:
        assert load_messages(store.session("chat-3")) == namespace["result"].all_messages()
