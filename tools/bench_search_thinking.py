"""The PostgreSQL search index's catch-up with thinking events (revision 0280).

    PYTHONPATH=. EVENTSTORE_PG_BINDIR=/usr/lib/postgresql/15/bin python tools/bench_search_thinking.py

Starts a throwaway server (tests/pgserver.py), stores 40,000 events in one session (only
messages; then, in a second database, a third of them thinking events), and times the
first search (the catch-up, whose guard computes each row's vector), then a search of 300
thinking events stored past the index's bound (update_index=False: scanned).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from pgserver import PgServer  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.search import search  # noqa: E402


def event(i: int, thinking: bool) -> tuple[str, dict]:
    if thinking and i % 3 == 0:
        return "assistant/thinking", {"thinking": f"think{i} common"}
    return "user/message", {"content": f"word{i} common"}


def main() -> None:
    srv = PgServer().start()
    try:
        for thinking in (False, True):
            with EventStore.open(srv.url(srv.create_database())) as store:
                s = store.create_session("a")
                for k in range(20):
                    s.append_many([event(i, thinking) for i in range(k * 2000, (k + 1) * 2000)])
                t = time.perf_counter()
                search(store, "common")
                label = "messages and thinking" if thinking else "messages only"
                print(f"catch-up of 40,000 events ({label}): {time.perf_counter() - t:.2f} s")
                if thinking:
                    s.append_many([("assistant/thinking", {"thinking": f"late{i} common"}) for i in range(300)])
                    for q in ("late5", "common"):
                        t = time.perf_counter()
                        search(store, q, update_index=False)
                        print(f"search {q!r} with 300 thinking events past the bound: "
                              f"{(time.perf_counter() - t) * 1000:.1f} ms")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
