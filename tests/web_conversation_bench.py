"""The conversation view at scale: one imported-like session of 100,000 events (12,500
exchanges of a prompt, a thinking block, an answer with an Edit call and its result, and
50,000 bookkeeping events: claude/progress, claude/file-history-snapshot), opened three
times in Debian's chromium; prints the median time to the first screen and to every event
loaded, and how many DOM nodes the list holds.

    PYTHONPATH=. python tests/web_conversation_bench.py [PATH]    # PATH: /tmp/eventstore-conversation.db

(Next to tests/web_screenshots.py while tools/ becomes one benchmark package.)
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright

from eventstore import EventStore

path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/eventstore-conversation.db"
if not os.path.exists(path):
    with EventStore.open(path) as st:
        s = st.create_session("mixed-100k", meta={"source": "claude-code", "cwd": "/x/proj"})
        rows, t = [], 1764460800.0
        for i in range(12500):
            cid = f"c{i}"
            rows += [("user/message", {"content": f"prompt **{i}** with `code`"}, t),
                     ("claude/progress", {"source": {"data": "x" * 50}}, t + 0.1),
                     ("assistant/thinking", {"thinking": f"think {i}", "signature": "sig" * 20}, t + 0.2),
                     ("assistant/message", {"content": f"answer {i}\n\n- a\n- b", "tool_calls": [{"id": cid, "type": "function", "function": {"name": "Edit", "arguments": json.dumps({"file_path": "/a.py", "old_string": "a\nb", "new_string": "a\nc"})}}]}, t + 0.3),
                     ("claude/progress", {"source": {"data": "y" * 50}}, t + 0.4),
                     ("claude/progress", {"source": {"data": "y" * 50}}, t + 0.5),
                     ("tool/result", {"tool_call_id": cid, "content": "ok"}, t + 0.6),
                     ("claude/file-history-snapshot", {"source": {}}, t + 0.7)]
            t += 1
        for k in range(0, len(rows), 5000):
            s.append_many(rows[k:k + 5000])
env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
p = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", path, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True,
                     env=env)
url = p.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/")
try:
    while not json.loads(urllib.request.urlopen(url + "/api/info").read())["ready"]:  # the index read
        time.sleep(0.05)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--headless"])
        first, full, nodes = [], [], 0
        for _ in range(3):
            pg = b.new_page(viewport={"width": 1280, "height": 900})
            t0 = time.perf_counter()
            pg.goto(url + "/session?id=mixed-100k")
            pg.wait_for_selector("#canvas .item")
            first.append(time.perf_counter() - t0)
            pg.wait_for_selector("body[data-loaded='1']", timeout=60000)
            full.append(time.perf_counter() - t0)
            nodes = pg.evaluate("document.querySelectorAll('#canvas *').length")
            info = pg.inner_text("#hiddeninfo")
            pg.close()
        print(f"first screen {statistics.median(first)*1000:.0f} ms, loaded {statistics.median(full)*1000:.0f} ms, DOM nodes in canvas {nodes}; {info}")
        b.close()
finally:
    p.terminate()
    p.wait()
