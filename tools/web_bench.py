"""Figures of `eventstore serve` at scale: 100,000 sessions, and one session of 100,000 events.

    python tools/web_bench.py [--db PATH] [--sessions N] [--chunks N]
    python tools/web_bench.py --backend postgres [--sessions N] [--chunks N]

Builds the database at PATH (default /tmp/eventstore-web-bench.db; kept, and reused when it
exists; with ``--backend postgres``, a new database on a throwaway server, tests/pgserver.py):
N sessions of 12 events (a turn with a streamed answer and a tool call; every seventh left
interrupted), and one session `big-session` whose answer streams in N chunks.
Then starts `eventstore serve` on a free port and measures, printing a Markdown table:

* start-up: from starting the process to the URL printed, and to the sessions index read
  from the log (the sessions page says "Reading the log" until then);
* /api/sessions: one page of 50, sorted by each column (the first sort after a change, and
  the same again from the cache), and filtered;
* in Debian's chromium (Playwright): the sessions page, the big session's first screen and
  its full load, and the frame times while scrolling through it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventstore import EventStore  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def build(path, sessions: int, chunks: int) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "run_bash", "arguments": '{"command":"ls"}'}}
    with EventStore.open(path) as store:
        base = 1764460800.0
        for i in range(sessions):
            t = base + i * 10
            evs = [("turn/start", {"agent": "a"}, t), ("user/message", {"content": f"question {i}"}, t + .1),
                   ("step/start", {"step": 0}, t + .2)]
            evs += [("assistant/chunk", {"delta": {"content": f"w{k} "}}, t + .3 + k * .05) for k in range(5)]
            evs += [("assistant/message", {"content": "w0 w1 w2 w3 w4 ", "tool_calls": [call]}, t + .6),
                    ("tool/result", {"tool_call_id": "call_1", "content": "a\nb"}, t + .8)]
            if i % 7:
                evs += [("step/end", {"step": 0, "tool_calls": 1}, t + .9), ("turn/end", {}, t + 1.0)]
            store.create_session(f"s{i:06d}").append_many(evs)
        s = store.create_session("big-session")
        t = base
        s.append_many([("turn/start", {}, t), ("user/message", {"content": "write a long story"}, t + .5),
                       ("step/start", {"step": 0}, t + .6)])
        batch, text = [], []
        for k in range(chunks):
            piece = f"token{k} " + ("\n" if k % 40 == 39 else "")
            text.append(piece)
            batch.append(("assistant/chunk", {"delta": {"content": piece}}, t + 1 + k * 0.01))
            if len(batch) == 1000:
                s.append_many(batch)
                batch = []
        if batch:
            s.append_many(batch)
        end = t + 2 + chunks * .01
        s.append_many([("assistant/message", {"content": "".join(text)}, end), ("step/end", {"step": 0}, end),
                       ("turn/end", {}, end + 1)])


def get_ms(url: str) -> float:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="/tmp/eventstore-web-bench.db")
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                    help="postgres: build and serve a database on a throwaway PostgreSQL server")
    args = ap.parse_args()
    if args._backend == "postgres":
        sys.path.insert(0, str(ROOT / "tests"))
        from pgserver import PgServer

        pg = PgServer().start()
        try:
            db = pg.url(pg.create_database("web_bench"))
            t = time.perf_counter()
            build(db, args.sessions, args.chunks)
            print(f"built {db} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            measure(db, args)
        finally:
            pg.stop()
        return
    db = Path(args.db)
    if not db.exists():
        t = time.perf_counter()
        build(db, args.sessions, args.chunks)
        print(f"built {db} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    measure(db, args)


def measure(db, args) -> None:
    """Serve ``db`` (a path or URL) and print the figures as a Markdown table."""
    with EventStore.open(db, readonly=True) as st:
        n_events = st.last_position()
        n_sessions = len(st.sessions())
    env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    rows = []
    t = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(db), "serve", "--port", "0"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = server.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/")
        rows.append(("start-up: process start to URL printed", f"{time.perf_counter() - t:.2f} s"))
        while not json.loads(urllib.request.urlopen(url + "/api/info", timeout=60).read())["ready"]:
            time.sleep(0.05)
        rows.append((f"sessions index read from the log ({n_sessions:,} sessions, {n_events:,} events), "
                     "from process start", f"{time.perf_counter() - t:.2f} s"))
        for sort in ("last_ts", "events", "id", "complete"):
            first = get_ms(f"{url}/api/sessions?sort={sort}&order=asc&offset=50000&limit=50")
            again = statistics.median(get_ms(f"{url}/api/sessions?sort={sort}&order=asc&offset={o}&limit=50")
                                      for o in (0, 50, 99950))
            rows.append((f"/api/sessions sorted by {sort}: first / next pages", f"{first:.0f} ms / {again:.0f} ms"))
        rows.append(("/api/sessions?q=s0999 (filter)", f"{get_ms(url + '/api/sessions?q=s0999'):.0f} ms"))
        rows.append((f"/api/events of big-session, {args.chunks:,} events in one answer",
                     f"{get_ms(url + '/api/events?session=big-session&limit=200000'):.0f} ms"))

        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            loads = []
            for _ in range(3):
                t = time.perf_counter()
                page.goto(url + "/")
                page.wait_for_selector("body[data-loaded='1']")
                loads.append((time.perf_counter() - t) * 1000)
            rows.append(("sessions page, navigation to table shown (median of 3)",
                         f"{statistics.median(loads):.0f} ms"))
            firsts, fulls = [], []
            for _ in range(3):
                page.goto(url + "/session?id=big-session")
                page.wait_for_selector("body[data-loaded='1']")
                marks = dict(page.evaluate("performance.getEntriesByType('mark').map(m => [m.name, m.startTime])"))
                firsts.append(marks["eventstore:first-page"])
                fulls.append(marks["eventstore:loaded"])
            rows.append((f"big-session ({args.chunks:,} chunks): first screen, from navigation (median of 3)",
                         f"{statistics.median(firsts):.0f} ms"))
            rows.append(("big-session: every event loaded, Replay ready (median of 3)",
                         f"{statistics.median(fulls):.0f} ms"))
            frames = page.evaluate("""async () => {
              const log = document.getElementById('log'); const t = []; let last = performance.now();
              for (let i = 0; i < 240; i++) { log.scrollTop += 600; await new Promise(r => requestAnimationFrame(r));
                const n = performance.now(); t.push(n - last); last = n; }
              t.sort((a, b) => a - b); return [t[120], t[228], document.querySelectorAll('#canvas .item').length];
            }""")
            rows.append(("big-session: frame time scrolling 600 px a frame, median / 95th percentile",
                         f"{frames[0]:.1f} ms / {frames[1]:.1f} ms ({frames[2]} blocks in the DOM)"))
            browser.close()
    finally:
        server.terminate()
        server.wait()
    print("| measurement | figure |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
