"""The demo agent run: the spec's demo turn, written through the store.

A scripted model answers "what is 1+1?" by calling a ``run_bash`` tool; the tool call is
executed for real (``expr 1 + 1`` through the system shell) and its output is logged as the
``tool/result``. Returns the session so the caller can print the log and the projection.

The scripted model streams at a model's pace (a pause before answering, then a chunk every
:data:`CHUNK_S` seconds), about two seconds in all, so that ``eventstore serve`` has a
recorded pace to replay.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from eventstore.core.store import EventStore, Session

QUESTION = "What is 1+1? Use a tool to work it out."
COMMAND = "set /a 1+1" if os.name == "nt" else "expr 1 + 1"
THINK_S = 0.4  # seconds before the scripted model's first chunk
CHUNK_S = 0.12  # seconds between two of its chunks


def run_shell(command: str, timeout: float = 10.0) -> str:
    """Run ``command`` in the system shell; return its stdout (and stderr, if any), stripped."""
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout.strip()
    if proc.returncode != 0 or proc.stderr.strip():
        out = (out + "\n" + proc.stderr.strip()).strip() + f"\n[exit status {proc.returncode}]"
    return out


def stream(session: Session, text: str, pieces: int = 3, pause: float = 0.0) -> None:
    """Log ``text`` as ``assistant/chunk`` deltas, the way a streaming model sends it:
    ``pause`` seconds before the first, and between two."""
    size = max(1, -(-len(text) // pieces))
    for i in range(0, len(text), size):
        time.sleep(pause)
        session.append("assistant/chunk", {"delta": {"content": text[i:i + size]}})


def run_demo(store: EventStore) -> Session:
    """Write one complete agent turn (two steps, one real tool call) and return its session."""
    s = store.create_session()
    s.append("turn/start", {"agent": s.id})
    s.append("user/message", {"content": QUESTION})

    s.append("step/start", {"step": 0})
    thought = "Let me compute that with the shell."
    time.sleep(THINK_S)
    stream(s, thought, pieces=5, pause=CHUNK_S)
    call = {"id": "call_1", "type": "function",
            "function": {"name": "run_bash", "arguments": json.dumps({"command": COMMAND}, separators=(",", ":"))}}
    s.append("assistant/message", {"content": thought, "tool_calls": [call]})
    result = run_shell(COMMAND)
    s.append("tool/result", {"tool_call_id": "call_1", "content": result})
    s.append("step/end", {"step": 0, "tool_calls": 1})

    s.append("step/start", {"step": 1})
    answer = f"The shell says 1+1 = {result}."
    time.sleep(THINK_S)
    stream(s, answer, pieces=5, pause=CHUNK_S)
    s.append("assistant/message", {"content": answer, "tool_calls": []})
    s.append("step/end", {"step": 1, "tool_calls": 0})
    s.append("turn/end", {})
    return s
