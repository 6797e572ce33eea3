"""The conversation view in a browser: an imported-like session (each exchange a prompt, a
thinking block, an answer with an ``Edit`` call, its result, and four bookkeeping events)
opened in Debian's chromium through ``eventstore serve``: the first screen, then every
event loaded, and how many DOM nodes the list holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

from eventstore import EventStore

from ..harness import ES, ROOT, Figure, command

SUMMARY = "the viewer's conversation view in chromium: an imported-like session's first screen, every event loaded"
NAME = "Conversation view"
SESSION = "mixed"


def exchange(i: int, t: float) -> list[tuple[str, dict, float]]:
    """The eight events of exchange ``i`` from ``t`` on: half of them bookkeeping."""
    cid = f"c{i}"
    edit = json.dumps({"file_path": "/a.py", "old_string": "a\nb", "new_string": "a\nc"})
    return [("user/message", {"content": f"prompt **{i}** with `code`"}, t),
            ("claude/progress", {"source": {"data": "x" * 50}}, t + 0.1),
            ("assistant/thinking", {"thinking": f"think {i}", "signature": "sig" * 20}, t + 0.2),
            ("assistant/message", {"content": f"answer {i}\n\n- a\n- b", "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "Edit", "arguments": edit}}]}, t + 0.3),
            ("claude/progress", {"source": {"data": "y" * 50}}, t + 0.4),
            ("claude/progress", {"source": {"data": "y" * 50}}, t + 0.5),
            ("tool/result", {"tool_call_id": cid, "content": "ok"}, t + 0.6),
            ("claude/file-history-snapshot", {"source": {}}, t + 0.7)]


def browser_missing() -> str:
    """Why the workload cannot run here, or "" (it needs playwright and chromium)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return "" if shutil.which("chromium") else "no chromium on PATH"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def run(bench) -> None:
    """Serve a session of 8 events an exchange, then open it once a round in one browser."""
    exchanges = bench.pick(100, 12_500)
    n = 8 * exchanges
    cases = (f"first screen of a session of {n:,} events (half bookkeeping)", f"every event of {n:,} loaded")
    reason = browser_missing()
    if reason:
        for case in cases:
            bench.skip(NAME, case, ES, reason)
        return
    from playwright.sync_api import sync_playwright

    db = bench.target("conversation")
    with EventStore.open(db) as store:
        s = store.create_session(SESSION, meta={"source": "claude-code", "cwd": "/x/proj"})
        rows: list = []
        for i in range(exchanges):
            rows += exchange(i, 1764460800.0 + i)
            if len(rows) >= 5000:
                s.append_many(rows)
                rows = []
        if rows:
            s.append_many(rows)
    env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(command("serve", "--port", "0", db=db), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    first, full, nodes, info = [], [], 0, ""
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://\S+", line)
        if not url:
            raise RuntimeError(f"eventstore serve printed {line!r}")
        base = url.group(0).rstrip("/")
        while not json.loads(_get(base + "/api/info"))["ready"]:  # the viewer still reads its index
            time.sleep(0.05)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--headless"])
            for _ in range(bench.rounds):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                t0 = time.perf_counter()
                page.goto(f"{base}/session?id={SESSION}")
                page.wait_for_selector("#canvas .item")
                first.append(time.perf_counter() - t0)
                page.wait_for_selector("body[data-loaded='1']", timeout=120_000)
                full.append(time.perf_counter() - t0)
                nodes = page.evaluate("document.querySelectorAll('#canvas *').length")
                info = page.inner_text("#hiddeninfo")
                page.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bench.check("conversation: the bookkeeping events are hidden and counted", "hidden" in info, info)
    bench.add(Figure(NAME, cases[0], ES, "page", first, "navigation to the first item drawn"))
    bench.add(Figure(NAME, cases[1], ES, "page", full, "navigation to body[data-loaded]",
                     extra={"DOM nodes in the list": nodes}))
