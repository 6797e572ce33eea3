"""The viewer as a user meets it: ``eventstore serve`` started, then the requests of a big
session's first screen and of the sessions page, over HTTP (no browser)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request

from eventstore import EventStore

from .. import data
from ..harness import ES, Figure, command, command_env

SUMMARY = "`eventstore serve`: start-up, a big session's first screen, the sessions index and its first page"
NAME = "Viewer"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def run(bench) -> None:
    """Start the viewer each round and time what its first screens ask for."""
    chunks, small = bench.pick((2_000, 50), (100_000, 1_000))
    db = bench.target("viewer")
    with EventStore.open(db) as store:
        big = store.create_session("big-session")
        big.append("user/message", {"content": "write me a long answer"})
        for k in range(0, chunks, 5000):
            big.append_many([("assistant/chunk", data.chunk(i)) for i in range(k, min(chunks, k + 5000))])
        big.append("assistant/message", {"content": "the long answer"})
        for k in range(small):
            store.create_session(f"s{k:05d}").append_many(data.take(data.agent_events(k), 12))
    cases = {"start-up: process start to URL printed": [],
             f"first screen of a session of {chunks + 2:,} events": [],
             f"sessions index of {small + 1:,} read from the log, from process start": [],
             f"sessions page: first 50 of {small + 1:,}": []}
    names = list(cases)
    env = command_env()
    for _ in range(bench.rounds):
        t0 = time.perf_counter()
        proc = subprocess.Popen(command("serve", "--port", "0", db=db), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            line = proc.stdout.readline()
            cases[names[0]].append(time.perf_counter() - t0)
            url = re.search(r"http://\S+", line)
            if not url:
                raise RuntimeError(f"eventstore serve printed {line!r}")
            base = url.group(0).rstrip("/")
            t = time.perf_counter()
            _get(base + "/api/session?session=big-session")
            page = _get(base + "/api/events?session=big-session&after=-1&limit=500")
            cases[names[1]].append(time.perf_counter() - t)
            while b'"loading":true' in _get(base + "/api/sessions?limit=1").replace(b" ", b""):
                time.sleep(0.01)  # the viewer still reads the log (its page says so)
            cases[names[2]].append(time.perf_counter() - t0)
            t = time.perf_counter()
            listing = _get(base + "/api/sessions?limit=50")
            cases[names[3]].append(time.perf_counter() - t)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    bench.check("viewer: the first page holds events", page.count(b'"seq"') >= 1, len(page))
    rows = json.loads(listing)["sessions"]
    bench.check("viewer: the sessions page lists its first 50 sessions", len(rows) == min(50, small + 1), len(rows))
    notes = ["eventstore serve --port 0", "GET /api/session, then /api/events?after=-1&limit=500, right after start",
             "polled until /api/sessions is no longer loading", "GET /api/sessions?limit=50, the first after ready"]
    for (case, times), note in zip(cases.items(), notes, strict=True):
        bench.add(Figure(NAME, case, ES, "request", times, note))
