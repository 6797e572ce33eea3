#!/usr/bin/env python3
"""The projection of one big session (docs/benchmarks.md, migration 0270): a plain log of
the reference types, and a Claude-shaped one (each assistant message followed by an
``assistant/part`` holding its call, a ``compaction/boundary`` in the middle).

    PYTHONPATH=. python tools/bench_projection_parts.py /tmp/bp.db 10000
"""
import os
import sys
import time

from eventstore import EventStore


def call(i: int) -> list[dict]:
    return [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]


def main(db: str, n: int) -> None:
    if os.path.exists(db):
        os.remove(db)
    st = EventStore.open(db)
    evs: list[tuple] = []
    for i in range(n):
        evs += [("user/message", {"content": f"q{i}"}),
                ("assistant/message", {"content": f"a{i}", "tool_calls": call(i)}),
                ("tool/result", {"tool_call_id": f"c{i}", "content": "ok"})]
    st.create_session("plain").append_many(evs)
    evs = []
    for i in range(n):
        m = f"msg{i}"
        evs += [("user/message", {"content": f"q{i}"}),
                ("assistant/message", {"content": f"a{i}", "message_id": m}),
                ("assistant/part", {"tool_calls": call(i), "message_id": m}),
                ("tool/result", {"tool_call_id": f"c{i}", "content": "ok"})]
        if i == n // 2:
            evs.append(("compaction/boundary", {"reason": "compaction"}))
    st.create_session("claude").append_many(evs)
    for sid in ("plain", "claude"):
        s = st.session(sid)
        t = time.perf_counter()
        m = s.derive_messages()
        d = time.perf_counter() - t
        print(f"{sid}: {s.next_seq()} events, {len(m)} messages, derive_messages {d * 1000:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
