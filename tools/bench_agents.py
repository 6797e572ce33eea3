"""Benchmark: eventstore as an agent framework's session store, and the asyncio API.

* ``EventStoreSession`` (eventstore.integrations.openai_agents) against the OpenAI Agents
  SDK's own ``SQLiteSession`` on the same items: ``add_items`` of one item (what the runner
  does for a user's input), of one tool-using turn (6 items: a user message, two
  function calls, their two outputs, the answer), ``get_items()`` of a whole session (a
  long one, and one of 20 items; again, and as the object's first read, which has no
  earlier read to extend), ``get_items(limit=10)`` of a long one, and a turn as the runner
  does it (``get_items()``, then ``add_items`` of 6). Both on a file
  in the same folder, each from one event loop; the SDK's with its shipped pragmas (WAL,
  synchronous=NORMAL in WAL mode is SQLite's default for it), eventstore with its defaults (WAL, synchronous=NORMAL).
* ``AsyncSession.append`` against ``Session.append``: what the worker-thread hop costs.

Run: ``python tools/bench_agents.py [--turns N] [--repeat R]``. Prints a Markdown table
(best of R runs; within a run the two sessions' reads take turns); docs/benchmarks.md keeps
the figures of record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import SQLiteSession  # noqa: E402

from eventstore import AsyncEventStore, EventStore  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession  # noqa: E402


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


# a short conversation: three tool-using turns and the start of a fourth
SMALL = [item for i in range(4) for item in turn_items(i)][:20]


async def timed(n: int, op) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        await op(i)
    return (time.perf_counter() - t0) / n


async def run_case(work: Path, turns: int, rnd: int) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    got: dict[str, str] = {}
    store = EventStore.open(work / f"es-{rnd}.db")
    sdk = {"SQLiteSession": lambda sid: SQLiteSession(sid, work / f"sdk-{rnd}.db"),
           "EventStoreSession": lambda sid: EventStoreSession(sid, store)}
    long, short = {}, {}
    for name, make in sdk.items():
        warm = make("warm-up")  # connections opened, schema created: not part of any figure
        for i in range(20):
            await warm.add_items(turn_items(i))
            await warm.get_items(limit=10)
        s = make("one")
        out[("add_items, 1 item", name)] = await timed(turns, lambda i, s=s: s.add_items([turn_items(i)[0]]))
        long[name] = s = make("turns")
        out[("add_items, a turn of 6 items", name)] = await timed(turns, lambda i, s=s: s.add_items(turn_items(i)))
        short[name] = make("small")
        await short[name].add_items(SMALL)
    # the reads take turns, system by system, so that a burst of load elsewhere on the
    # machine falls on both rather than on one
    reads = [(f"get_items(), {6 * turns} items", 10, long, lambda s: s.get_items()),
             ("get_items(limit=10)", 200, long, lambda s: s.get_items(limit=10)),
             (f"get_items(), {len(SMALL)} items", 200, short, lambda s: s.get_items()),
             (f"get_items(), {6 * turns} items, the object's first read", 10, long, _first_read)]
    for _ in range(2):
        for case, n, sessions, read in reads:
            for name, s in sessions.items():
                seconds = await timed(n, lambda i, s=s, read=read: read(s))
                out[(case, name)] = min(out.get((case, name), seconds), seconds)
    # the runner's pattern: each turn reads the conversation, then stores the turn's items
    for name, s in long.items():
        async def turn(i, s=s):
            await s.get_items()
            await s.add_items(turn_items(turns + i))
        out[(f"a turn: get_items() of {6 * turns}+ items, add_items of 6", name)] = await timed(20, turn)
    for name in sdk:
        got[name] = json.dumps(await long[name].get_items()) + json.dumps(await short[name].get_items())
    long["SQLiteSession"].close()
    short["SQLiteSession"].close()
    if got["SQLiteSession"] != got["EventStoreSession"]:  # the same work, or the figures mean nothing
        raise SystemExit("get_items differs between the two sessions")
    astore = AsyncEventStore(store)
    a = await astore.create_session()
    sync = store.create_session()
    out[("append, 1 event", "Session (sync)")] = await timed(turns, lambda i: _sync(sync, i))
    out[("append, 1 event", "AsyncSession")] = await timed(
        turns, lambda i: a.append("user/message", {"content": str(i)}))
    await astore.close()
    store.close()
    return out


def _first_read(s):
    """A whole read with nothing kept from an earlier one (EventStoreSession reads only the
    events after its last whole read's head; a new object, or another process, reads all)."""
    if isinstance(s, EventStoreSession):
        s._known = None
    return s.get_items()


async def _sync(s, i):
    s.append("user/message", {"content": str(i)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp:
        for rnd in range(a.repeat):
            for key, seconds in asyncio.run(run_case(Path(tmp), a.turns, rnd)).items():
                best[key] = min(best.get(key, float("inf")), seconds)
    print(f"python tools/bench_agents.py --turns {a.turns} --repeat {a.repeat}; "
          f"{platform.machine()}, Python {platform.python_version()}, SQLite {__import__('sqlite3').sqlite_version}\n")
    print("| operation | system | time per call | vs. the other |")
    print("|---|---|---:|---:|")
    cases = list(dict.fromkeys(case for case, _ in best))
    for case in cases:
        names = [n for c, n in best if c == case]
        for name in names:
            other = [best[(case, n)] for n in names if n != name]
            ratio = f"{other[0] / best[(case, name)]:.2f}x" if other else ""
            print(f"| {case} | {name} | {best[(case, name)] * 1e6:,.0f} µs | {ratio} |")


if __name__ == "__main__":
    main()
