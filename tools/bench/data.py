"""The data every system of a workload gets: seeded, so every run and every system sees the same."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

#: Seconds since the epoch of the generated events (2025-11-30); odd multiples of 1/2048 s keep
#: every ts exact in binary and never whole, so JavaScript, orjson and Python print it alike.
T0 = 1764460800.0
WORDS = ("the file tests pass now let me check output function error value path run import store "
         "session append event result tool call shell build fix line return data").split()


def chunk(i: int) -> dict:
    """A streamed token: the single-append workload's event (the reference's bench-append's)."""
    return {"delta": {"content": f"tok{i}"}}


def agent_events(seed: int = 1):
    """``(type, payload)`` forever, shaped like a coding agent's log: a user message, steps of
    streamed chunks, an assistant message (with tool calls but in the last step), tool results."""
    rng = random.Random(seed)
    turn = 0
    while True:
        yield "turn/start", {"agent": "bench", "turn": turn}
        yield "user/message", {"content": " ".join(rng.choices(WORDS, k=rng.randint(5, 30)))}
        steps = rng.randint(1, 3)
        for step in range(steps):
            yield "step/start", {"step": step}
            text = " ".join(rng.choices(WORDS, k=rng.randint(10, 80)))
            for i in range(0, len(text), 24):
                yield "assistant/chunk", {"delta": {"content": text[i:i + 24]}}
            calls = []
            if step < steps - 1:
                for c in range(rng.randint(1, 2)):
                    args = orjson.dumps({"command": " ".join(rng.choices(WORDS, k=4))}).decode()
                    calls.append({"id": f"call_{turn}_{step}_{c}", "type": "function",
                                  "function": {"name": "run_bash", "arguments": args}})
            yield "assistant/message", {"content": text, "tool_calls": calls}
            for c in calls:
                out = " ".join(rng.choices(WORDS, k=rng.randint(5, 200)))
                yield "tool/result", {"tool_call_id": c["id"], "content": out}
            yield "step/end", {"step": step, "tool_calls": len(calls)}
        yield "turn/end", {}
        turn += 1


def take(gen, n: int) -> list:
    """The next ``n`` items of ``gen``."""
    return [next(gen) for _ in range(n)]


def chat(messages: int, chunks: int = 0):
    """``messages`` chat messages (user, assistant with a tool call, tool result, assistant),
    with ``chunks`` assistant/chunk events spread before the assistant messages."""
    assistants = [k for k in range(messages) if k % 4 in (1, 3)] or [0]
    per = {k: chunks * (j + 1) // len(assistants) - chunks * j // len(assistants) for j, k in enumerate(assistants)}
    for k in range(messages):
        for _ in range(per.get(k, 0)):
            yield "assistant/chunk", {"delta": {"content": f"piece of the answer {k}"}}
        kind = k % 4
        if kind == 0:
            yield "user/message", {"content": f"question {k}: what does the test output say?"}
        elif kind == 1:
            yield "assistant/message", {"content": f"let me look ({k})", "tool_calls": [
                {"id": f"call_{k}", "type": "function",
                 "function": {"name": "run_bash", "arguments": f'{{"command":"pytest -k case{k}"}}'}}]}
        elif kind == 2:
            yield "tool/result", {"tool_call_id": f"call_{k - 1}", "content": f"{k} passed, 0 failed"}
        else:
            yield "assistant/message", {"content": f"all {k} cases pass"}


def derive(events) -> list[dict]:
    """The reference's ``deriveMessages()`` in Python, for baselines that store events only."""
    out = []
    for ev in events:
        t = ev.get("type")
        if t == "user/message":
            out.append({"role": "user", "content": ev.get("content")})
        elif t == "assistant/message":
            msg = {"role": "assistant", "content": ev.get("content") if ev.get("content") is not None else ""}
            if ev.get("tool_calls"):
                msg["tool_calls"] = ev["tool_calls"]
            out.append(msg)
        elif t == "tool/result":
            out.append({"role": "tool", "tool_call_id": ev.get("tool_call_id"), "content": ev.get("content")})
    return out


def write_jsonl(path: Path, session_id: str, events) -> int:
    """Write ``(type, payload)`` events as an eventstore JSONL file (the reference's format);
    return the number of events."""
    n = 0
    with open(path, "wb") as f:
        f.write(orjson.dumps({"type": "session/meta", "id": session_id}) + b"\n")
        for n, (type_, payload) in enumerate(events, 1):
            f.write(orjson.dumps({"type": type_, "seq": n - 1, "ts": T0 + (2 * n - 1) / 2048, **payload}) + b"\n")
    return n


def corpus(folder: Path, files: int, events_per_file: int, seed: int = 1) -> list[tuple[str, Path]]:
    """``files`` agent sessions of ``events_per_file`` events as JSONL files in ``folder``
    (written once, reused by later calls with the same arguments)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(files):
        sid, path = f"session-{k:04d}", folder / f"session-{k:04d}.jsonl"
        if not path.exists():
            write_jsonl(path, sid, take(agent_events(seed + k), events_per_file))
        out.append((sid, path))
    return out
