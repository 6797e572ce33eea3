"""`eventstore serve`: the viewer in a real browser (Debian's chromium, driven by Playwright),
against a server started as a real subprocess on a free port, reading a real database that
this process keeps appending to.

The browser tests skip when Playwright or chromium is missing (`.ci/run` installs both).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.web.index import SessionIndex

DATA = TESTS / "data"

HOSTILE_ID = '<img src=x onerror="window.__pwned=1">"</script><script>window.__pwned=2</script>'
HOSTILE_TEXT = ('<script>window.__pwned=3</script> <img src=x onerror="window.__pwned=4"> '
                '\u202eevil\u202c \x1b[31mred\x1b[0m </script><b>bold</b>')
HOSTILE_TOOL = '<svg onload="window.__pwned=5">'

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]


# --- the server --------------------------------------------------------------------------

class Server:
    def __init__(self, db: Path, *args: str, limits: dict[str, int] | None = None):
        """``limits``: constants of eventstore.web.app set in the server's process before it
        starts (e.g. a byte limit made small, so that passing it takes little data)."""
        env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
        start = ["-m", "eventstore"]
        if limits:
            start = ["-c", "import sys, eventstore.web.app as app\n"
                     + "".join(f"app.{k} = {v!r}\n" for k, v in limits.items())
                     + "from eventstore.cli import main; sys.argv[0] = 'eventstore'; main()"]
        self.proc = subprocess.Popen([sys.executable, *start, "--db", str(db), "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self._line(self.proc.stdout, 60)
        assert "http://" in line, f"no URL printed: {line!r}, stderr: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        self.first_line = line

    def _line(self, stream, timeout: float) -> str:
        sel = selectors.DefaultSelector()
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.stop()
            raise AssertionError("the server printed nothing")
        return stream.readline()

    def get(self, path: str, method: str = "GET", headers: dict | None = None):
        req = urllib.request.Request(self.url + path, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the server has read the log into its sessions index (``/api/info``)."""
        deadline = time.monotonic() + timeout
        while not json.loads(self.get("/api/info")[2])["ready"]:
            assert time.monotonic() < deadline, "the server did not read the log in time"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _paced(s, t0: float, gap: float, chunks: list[str]) -> None:
    """A turn whose answer streams ``chunks`` ``gap`` seconds apart (recorded times)."""
    s.append_many([("turn/start", {}, t0), ("user/message", {"content": "go"}, t0 + 0.1),
                   ("step/start", {"step": 0}, t0 + 0.2)])
    s.append_many([("assistant/chunk", {"delta": {"content": c}}, t0 + 1 + i * gap) for i, c in enumerate(chunks)])
    end = t0 + 1 + len(chunks) * gap
    s.append_many([("assistant/message", {"content": "".join(chunks)}, end), ("step/end", {"step": 0}, end + 0.05),
                   ("turn/end", {}, end + 0.1)])


@pytest.fixture(scope="module", params=["sqlite"])
def db(request, tmp_path_factory):
    """The database every page is served from: an SQLite file (a Path), or with
    ``@pytest.mark.parametrize("db", ["postgres"], indirect=True)`` a new database on the
    throwaway PostgreSQL server (its URL), filled with the same sessions. (The default is the
    param "sqlite" itself, so that a test on it and the sqlite case of ``both_backends``
    share one database and one server, not one each, made again as the order alternates.)"""
    backend = request.param
    if backend == "postgres":
        pg = request.getfixturevalue("pg_server")
        name = pg.create_database()
        request.addfinalizer(lambda: pg.drop_database(name))
        path = pg.url(name)
    else:
        path = tmp_path_factory.mktemp("web") / "web.db"
    with EventStore.open(path) as st:
        for name in ("demo", "parallel_tools", "interrupted", "unicode"):
            st.import_jsonl(DATA / f"{name}.jsonl")
        _paced(st.create_session("paced"), 1764460800.0, 0.3, ["one ", "two ", "three ", "four ", "five"])
        # recorded over ten seconds, for pause and scrub
        _paced(st.create_session("slow"), 1764460800.0, 1.0, [f"w{i} " for i in range(10)])
        h = st.create_session(HOSTILE_ID)
        call = {"id": "c1", "type": "function", "function": {"name": HOSTILE_TOOL, "arguments": json.dumps({"x": HOSTILE_TEXT})}}
        h.append_many([("turn/start", {}), ("user/message", {"content": HOSTILE_TEXT}),
                       ("assistant/chunk", {"delta": {"content": HOSTILE_TEXT}}),
                       ("assistant/message", {"content": HOSTILE_TEXT, "tool_calls": [call]}),
                       ("tool/result", {"tool_call_id": "c1", "content": HOSTILE_TEXT, "is_error": True}),
                       ("x/<b>custom</b>", {"note": HOSTILE_TEXT}), ("turn/end", {})])
    return path


@pytest.fixture(scope="module")
def server(db):
    srv = Server(db)
    srv.wait_ready()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def writer(db, server):
    with EventStore.open(db) as st:
        yield st


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1200, "height": 800}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("dialog", lambda d: errors.append(f"dialog: {d.message}") or d.dismiss())
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" and "EventSource" not in m.text else None)
    pg.errors = errors
    yield pg
    ctx.close()
    assert not errors, errors


def session_url(server, sid: str) -> str:
    return f"{server.url}/session?id={urllib.request.quote(sid, safe='')}"


def open_session(page, server, sid: str) -> None:
    page.goto(session_url(server, sid))
    page.wait_for_selector("body[data-loaded='1']")


def arrived(page, path: str, **query: str) -> None:
    """After a click on a link: waits until the browser is at ``path`` with these query
    values, then until that page has loaded. (Waiting for the loaded body alone may match the
    page the click left, still shown while the next one is on its way.)"""
    def at(url: str) -> bool:
        u = urlsplit(url)
        q = parse_qs(u.query)
        return u.path == path and all(q.get(k) == [v] for k, v in query.items())

    page.wait_for_url(at)
    page.wait_for_selector("body[data-loaded='1']")


#: Runs a test on a server over each backend (the ``db`` fixture).
both_backends = pytest.mark.parametrize("db", ["sqlite", "postgres"], indirect=True)


# --- without a browser ---------------------------------------------------------------------

def test_only_get_and_head(server):
    for path in ("/", "/api/sessions", "/api/events?session=paced", "/nowhere", "/static/style.css"):
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, _ = server.get(path, method)
            assert status == 405, (method, path)
            assert headers["allow"] == "GET, HEAD"
    status, headers, body = server.get("/api/sessions", "HEAD")
    assert status == 200 and body == b""
    status, headers, body = server.get("/")
    assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


@both_backends
def test_the_api(server, db):
    status, _, body = server.get("/api/sessions?sort=events&order=desc&limit=2")
    data = json.loads(body)
    assert status == 200 and data["total"] == 7 and len(data["sessions"]) == 2
    assert data["sessions"][0]["events"] >= data["sessions"][1]["events"]
    status, _, body = server.get("/api/events?session=5a1b896f-beb&after=2&limit=3")
    data = json.loads(body)
    assert [e["seq"] for e in data["events"]] == [3, 4, 5] and data["more"] is True
    with EventStore.open(db, readonly=True) as st:
        stored = list(st.session("5a1b896f-beb").events(after_seq=2))[:3]
        assert [{"seq": e.seq, "type": e.type, "ts": e.ts, "payload": e.payload} for e in stored] == data["events"]
        messages = st.session("5a1b896f-beb").derive_messages()
    status, _, body = server.get("/api/messages?session=5a1b896f-beb")
    assert json.loads(body) == messages
    status, _, body = server.get("/api/messages?session=5a1b896f-beb&upto=6")  # up to the tool result
    assert json.loads(body) == messages[:3]
    status, headers, body = server.get("/api/export?session=5a1b896f-beb")
    assert body == (DATA / "demo.jsonl").read_bytes()
    assert 'filename="5a1b896f-beb.jsonl"' in headers["content-disposition"]
    assert server.get("/api/session?session=nope")[0] == 404
    assert server.get("/api/sessions?sort=nope")[0] == 400
    assert server.get("/api/events?session=paced&after=x")[0] == 400


def _first_sse_batch(server, path: str, headers: dict | None = None) -> tuple[list[dict], list[str]]:
    """The first `events` message of a stream, and the lines up to the caught-up one."""
    req = urllib.request.Request(server.url + path, headers=headers or {})
    lines = []
    with urllib.request.urlopen(req, timeout=10) as r:
        while True:
            line = r.readline().decode().rstrip("\n")
            lines.append(line)
            if line == "event: caught-up":
                break
    data = next(json.loads(x[6:]) for x in lines if x.startswith("data: ["))
    return data, lines


def test_the_stream_resumes_where_the_browser_stopped(server):
    """A reconnecting EventSource sends the id of the last message it got (the last seq):
    the stream goes on after it, whatever `after` its URL says."""
    events, lines = _first_sse_batch(server, "/api/stream?session=5a1b896f-beb&after=-1")
    assert [e["seq"] for e in events] == list(range(15)) and "id: 14" in lines
    events, _ = _first_sse_batch(server, "/api/stream?session=5a1b896f-beb&after=-1", {"Last-Event-ID": "11"})
    assert [e["seq"] for e in events] == [12, 13, 14]


def test_a_foreign_host_name_is_refused(server):
    """A page elsewhere that rebinds its DNS name to 127.0.0.1 cannot read the log."""
    assert server.get("/api/sessions", headers={"Host": "attacker.example:8000"})[0] == 421
    assert server.get("/api/sessions", headers={"Host": "localhost"})[0] == 200


@both_backends
def test_the_index_agrees_with_the_views(db):
    """The sessions index (built from the log, then kept current event by event) counts
    what the SQL views count."""
    from eventstore.web.hub import Hub

    with EventStore.open(db, readonly=True) as st:
        hub = Hub(st)
        hub.build()
        index = hub.index
    # the same from nothing but live events: every event of the log through apply()
    live = SessionIndex()
    with EventStore.open(db, readonly=True) as st:
        for ev in st.follow(0, idle_timeout=0):
            p = ev.payload
            live.apply(ev.position, ev.session_id, ev.seq, ev.type, ev.ts,
                       p.get("tool_calls") if ev.type == "assistant/message" else p.get("tool_call_id"))
    with EventStore.open(db, readonly=True) as st:
        conn = type(st._backend).query_connection(str(db))
    try:
        _, cursor = conn.query("""SELECT s.session_id, s.events, s.messages, s.tool_calls, s.first_ts, s.last_ts,
            (SELECT count(*) FROM turns t WHERE t.session_id = s.session_id AND t.complete = 0),
            (SELECT count(*) FROM tool_calls c WHERE c.session_id = s.session_id AND c.result_seq IS NULL)
            FROM session_summary s""")
        rows = list(cursor)
    finally:
        conn.close()
    assert len(rows) == len(index) == len(live) == 7
    for sid, events, messages, calls, first, last, open_turns, dangling in rows:
        d = index.get(sid).to_dict()
        built, followed = dict(d), live.get(sid).to_dict()
        del built["created_at"], followed["created_at"]
        assert built == followed
        assert (d["events"], d["messages"], d["tool_calls"], d["first_ts"], d["last_ts"]) == (events, messages, calls, first, last)
        assert d["dangling_calls"] == dangling and d["open_turn"] == bool(open_turns), sid
        assert d["complete"] == (not open_turns and not dangling)
    assert index.get("crash-0001").complete is False


def test_a_network_host_warns(db):
    srv = Server(db, "--host", "0.0.0.0")
    try:
        srv.stop()
        err = srv.proc.stderr.read()
        assert "can read the whole log" in err and "DNS rebinding" in err and "--allow-host" in err
    finally:
        srv.stop()


def _status(url: str, host: str) -> int:
    """The status of GET ``url`` sent with the header ``Host: host`` (as a rebinding page's
    browser sends it: the attacker's name, this server's address)."""
    req = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_every_address_keeps_the_host_check(db):
    """Bound to 0.0.0.0 the viewer still refuses a name it was not given (a page elsewhere
    that rebinds its DNS name to this machine), and answers IP addresses, localhost, the
    printed name and each --allow-host name."""
    import socket

    srv = Server(db, "--host", "0.0.0.0", "--allow-host", "Viewer.Example", "--allow-host", "logs.internal")
    try:
        port = srv.url.rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{port}/api/info"
        assert srv.url.startswith(f"http://{socket.gethostname()}:")
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example",
                     f"localhost.attacker.example:{port}", "", f"[::1]x:{port}", f"127.0.0.1:{port}@evil"):
            assert _status(url, host) == 421, host
        for host in (f"127.0.0.1:{port}", "10.1.2.3", f"[::1]:{port}", f"localhost:{port}", "viewer.example",
                     f"LOGS.internal:{port}", f"{socket.gethostname()}:{port}"):
            assert _status(url, host) == 200, host
    finally:
        srv.stop()


def test_another_loopback_address_answers_at_its_printed_url(db):
    """--host 127.0.0.2: the URL printed is one that answers (not 421)."""
    srv = Server(db, "--host", "127.0.0.2")
    try:
        assert srv.url.startswith("http://127.0.0.2:")
        assert srv.get("/api/info")[0] == 200
        assert srv.get("/api/info", headers={"Host": "attacker.example"})[0] == 421
    finally:
        srv.stop()


def test_without_the_extra_it_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
            "from eventstore.cli import main; sys.argv = ['eventstore', '--db', sys.argv[1], 'serve']; main()")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.db")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "pip install starlette uvicorn" in proc.stderr and "'.[web]'" in proc.stderr and "Traceback" not in proc.stderr


# --- in the browser -----------------------------------------------------------------------

@both_backends
def test_sessions_page(page, server):
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    ids = page.locator("#rows td.sid a.sid-link")
    assert ids.count() == 7
    # sort by events, most first: the unicode fixture's session has the most
    page.click("th[data-sort=events]")
    page.wait_for_function("""() => { const n = [...document.querySelectorAll('#rows td.num:nth-child(5)')].map(t => +t.textContent.replace(/,/g, ''));
                                     return n.length === 7 && n.every((x, i) => i === 0 || n[i - 1] >= x); }""")
    assert page.locator("th[data-sort=events]").get_attribute("class") == "num sorted desc"
    # the filter box
    page.fill("#filter", "crash")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 1")
    row = page.locator("#rows tr")
    assert row.locator("td.sid a.sid-link").inner_text() == "crash-0001"
    assert row.locator(".badge").inner_text() == "interrupted"
    assert "1 of 7 sessions by title, project, model or id" in page.inner_text("#count")
    row.locator("a.sid-link").click()
    arrived(page, "/session", id="crash-0001")
    assert page.url.endswith("/session?id=crash-0001")


@both_backends
def test_session_page(page, server, db):
    open_session(page, server, "a0c1e2f3-111")
    log = page.locator("#canvas")
    assert "List the repo and show the README" in log.inner_text()
    calls = page.locator(".call")
    assert calls.count() == 2
    first = calls.nth(0)
    assert first.locator(".name").inner_text() == "run_bash"
    assert first.locator(".lat").inner_text() == "120 ms"  # result ts - call ts
    assert first.locator("pre.args").inner_text() == "command: ls\n"  # flat arguments: name and text
    assert "README.md" in first.locator(".result").inner_text()
    assert page.locator(".divider.turn").count() == 2
    assert page.locator(".divider.turn").first.locator(".dur").inner_text() == "556 ms"
    assert page.locator(".divider", has_text="Step 0 done").count() >= 1
    assert "23" in page.inner_text("#stats")
    # raw JSON on demand
    page.locator(".item[data-kind=user] .msg").first.hover()
    page.locator(".item[data-kind=user] button", has_text="JSON").first.click()
    assert '"type": "user/message"' in page.inner_text("#panel-body")
    # what the model saw at the second answer: the messages up to before it
    answer = page.locator(".item[data-kind=assistant]").nth(1)
    answer.hover()
    answer.locator("button", has_text="What the model saw").click()
    page.wait_for_function("() => document.querySelectorAll('#panel-body .ctx-msg').length > 0")
    with EventStore.open(db, readonly=True) as st:
        expected = st.session("a0c1e2f3-111").derive_messages()
    assert page.locator("#panel-body .ctx-msg").count() == 4 and expected[3]["role"] == "tool"
    # download: the export, byte for byte
    with page.expect_download() as dl:
        page.click("#download")
    assert Path(dl.value.path()).read_bytes() == (DATA / "parallel_tools.jsonl").read_bytes()


@both_backends
def test_interrupted_call_is_marked(page, server):
    open_session(page, server, "crash-0001")
    assert page.locator(".call .lat").inner_text() == "no result"
    assert page.locator(".divider.turn .open").count() == 1


@both_backends
def test_live_append_appears_without_reload(page, server, writer):
    s = writer.create_session("live-1")
    s.append_many([("turn/start", {}), ("user/message", {"content": "hello"})])
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    page.evaluate("window.__same = 1")
    page.wait_for_selector("#live.on")
    # a new session appears in the list
    writer.create_session("live-2").append("user/message", {"content": "x"})
    page.wait_for_function("() => [...document.querySelectorAll('#rows td.sid a.sid-link')].some(a => a.textContent === 'live-2')", timeout=5000)
    open_session(page, server, "live-1")
    page.evaluate("window.__same = 1")
    page.wait_for_selector("#live.on")
    s.append("step/start", {"step": 0})
    committed = time.monotonic()
    for word in ("Hel", "lo ", "there"):
        s.append("assistant/chunk", {"delta": {"content": word}})
    page.wait_for_function("() => [...document.querySelectorAll('.item[data-kind=assistant] .text')].some(t => t.textContent === 'Hello there')",
                           timeout=5000)
    assert time.monotonic() - committed < 2.0  # shown within about a second of the commit
    call = {"id": "k", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    s.append("assistant/message", {"content": "Hello there", "tool_calls": [call]})
    page.wait_for_selector(".call .lat:has-text('waiting for result')", timeout=5000)
    s.append("tool/result", {"tool_call_id": "k", "content": "done"})
    page.wait_for_selector(".call .result:has-text('done')", timeout=5000)
    assert page.evaluate("window.__same") == 1  # the same page: nothing reloaded


_RECORD = """() => {
  window.__chunks = [];
  if (window.__observer) window.__observer.disconnect();
  let last = 0;
  window.__observer = new MutationObserver(() => {
    const n = Math.max(0, ...[...document.querySelectorAll('#canvas .text[data-chunks]')].map(t => +t.dataset.chunks));
    if (n !== last) { last = n; window.__chunks.push([n, performance.now()]); }
  });
  window.__observer.observe(document.getElementById('canvas'), {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def _chunk_span(page) -> float:
    """Milliseconds between the first chunk and the fifth appearing in the replay."""
    page.wait_for_function("() => { const c = window.__chunks, i = c.findLastIndex(x => x[0] === 1); "
                           "return i >= 0 && c.slice(i).some(x => x[0] === 5); }", timeout=10000)
    seen = page.evaluate("window.__chunks")
    start = max(i for i, (n, _) in enumerate(seen) if n == 1)
    run = seen[start:start + 5]
    assert [n for n, _ in run] == [1, 2, 3, 4, 5]  # one at a time, in order
    return run[4][1] - run[0][1]


def test_replay_plays_at_the_recorded_pace(page, server):
    open_session(page, server, "paced")
    assert "five" in page.inner_text("#canvas")
    page.evaluate(_RECORD)
    page.click("#replay")
    page.wait_for_selector("body[data-replay]")
    # events not yet reached are not shown
    page.wait_for_selector(".item[data-kind=user]")
    assert "five" not in page.inner_text("#canvas")
    span = _chunk_span(page)
    assert 1050 <= span <= 1500, span  # four gaps of 300 ms at 1x
    page.wait_for_selector("body[data-replay=ended]")
    page.select_option("#speed", "4")
    page.evaluate(_RECORD)
    page.click("#replay")  # restart, at 4x
    span = _chunk_span(page)
    assert 220 <= span <= 450, span  # a quarter of it
    page.click("#exitreplay")
    page.wait_for_function("() => !document.body.dataset.replay")
    # the whole session is drawn again (in the next frame, by the virtual list)
    page.wait_for_function("() => document.getElementById('canvas').innerText.includes('five')", timeout=5000)


def test_replay_pause_resume_and_scrub(page, server):
    open_session(page, server, "slow")
    page.click("#replay")
    # at 4x (a recorded gap of a second is 250 ms): the pace is test_replay_plays_at_the_recorded_pace's
    # point, here what pause, scrub and resume do, each in a quarter of the time
    page.select_option("#speed", "4")
    page.wait_for_function("() => document.querySelectorAll('#canvas .text[data-chunks]').length > 0", timeout=5000)
    page.click("#playpause")  # pause
    page.wait_for_selector("body[data-replay=paused]")
    shown = page.inner_text("#canvas")
    clock = page.inner_text("#clock")
    page.wait_for_timeout(800)  # more than three recorded gaps at 4x: nothing may move while paused
    assert page.inner_text("#canvas") == shown and page.inner_text("#clock") == clock
    assert "w9" not in shown
    # scrub to the end: everything; back to the start: only the first event
    page.eval_on_selector("#scrub", "el => { el.value = 1000; el.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => document.querySelector('#canvas').innerText.includes('w9')")
    assert page.locator(".divider", has_text="Turn 1 ended").count() == 1
    page.eval_on_selector("#scrub", "el => { el.value = 0; el.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => document.querySelectorAll('#canvas .item').length === 1")
    assert page.locator("#canvas .item").get_attribute("data-kind") == "turn"
    # resume from the middle, with idle gaps skipped
    page.check("#skipidle")
    page.eval_on_selector("#scrub", "el => { el.value = 500; el.dispatchEvent(new Event('input')); }")
    page.click("#playpause")
    page.wait_for_selector("body[data-replay=playing]")
    page.wait_for_selector("body[data-replay=ended]", timeout=10000)
    assert "w9" in page.inner_text("#canvas")


def test_hostile_content_stays_inert(page, server):
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    link = page.locator("#rows a.sid-link", has_text="<img")
    assert link.inner_text() == HOSTILE_ID
    link.click()
    arrived(page, "/session", id=HOSTILE_ID)
    assert page.inner_text("#sid") == HOSTILE_ID
    canvas = page.locator("#canvas")
    text = canvas.inner_text()
    assert "<script>window.__pwned=3</script>" in text and HOSTILE_TOOL in text and "x/<b>custom</b>" in text
    # the bidi override and the terminal escapes are shown as escapes, not obeyed
    assert "\u202e" not in text and "\x1b" not in text
    assert "\\u202e" in text and "\\e[31m" in text
    assert page.locator(".call.error").count() == 1
    for sel in ("img", "script", "svg", "b"):
        assert page.locator(f"#canvas {sel}, #sid {sel}, #rows {sel}").count() == 0
    page.locator(".item[data-kind=user] .msg").hover()
    page.locator(".item[data-kind=user] button", has_text="JSON").click()
    assert "<script>" in page.inner_text("#panel-body")
    page.click("#replay")
    page.wait_for_selector("body[data-replay=ended]", timeout=10000)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#canvas img, #panel img").count() == 0


def test_csp_blocks_inline_script(page, server):
    """The policy itself: an inline script put in the page (as a bug might) does not run."""
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    page.errors.clear()
    page.evaluate("""() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1';
                            document.body.appendChild(s); }""")
    assert page.evaluate("window.__inline") is None
    page.errors.clear()  # the console reports the refusal


def test_narrow_window(browser, server):
    ctx = browser.new_context(viewport={"width": 390, "height": 800})
    pg = ctx.new_page()
    try:
        open_session(pg, server, "a0c1e2f3-111")
        # no horizontal scrolling: everything fits the width
        assert pg.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        assert pg.evaluate("document.getElementById('log').scrollWidth <= document.getElementById('log').clientWidth + 1")
    finally:
        ctx.close()


def test_ctrl_c_stops_the_server_with_streams_open(db):
    """Open event streams do not hold the server up: Ctrl-C ends it at once, quietly."""
    import signal
    import threading

    srv = Server(db)
    try:
        opened = []

        def listen(path):
            with urllib.request.urlopen(srv.url + path, timeout=30) as r:
                opened.append(r.readline())
                r.read()  # until the server ends the stream

        threads = [threading.Thread(target=listen, args=(p,), daemon=True)
                   for p in ("/api/stream?session=paced", "/api/sessions/stream")]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(opened) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(opened) == 2
        srv.proc.send_signal(signal.SIGINT)
        assert srv.proc.wait(10) == 0
        for t in threads:
            t.join(5)
            assert not t.is_alive()
        assert srv.proc.stderr.read() == ""
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A server over 120 sessions, one of them a conversation of 6,000 messages."""
    path = tmp_path_factory.mktemp("many") / "many.db"
    with EventStore.open(path) as st:
        t0 = 1764460800.0
        for i in range(120):
            st.create_session(f"s{i:03d}").append_many([("turn/start", {}, t0 + i), ("user/message", {"content": f"q{i}"}, t0 + i),
                                                        ("turn/end", {}, t0 + i + 0.5)])
        st.create_session("chatty").append_many(
            [(("user/message", {"content": f"question {i}"}, t0 + i) if i % 2 == 0 else
              ("assistant/message", {"content": f"answer {i}\n" + "text " * (i % 40)}, t0 + i)) for i in range(6000)])
    srv = Server(path)
    yield srv
    srv.stop()


def test_sessions_page_pages(page, many):
    page.goto(many.url + "/?sort=id&order=asc")
    page.wait_for_selector("body[data-loaded='1']")
    first = lambda: page.locator("#rows td.sid a.sid-link").first.inner_text()  # noqa: E731
    assert page.locator("#rows tr").count() == 50 and first() == "chatty"
    assert page.inner_text("#pageinfo") == "1–50 of 121"
    page.click("#next")
    page.wait_for_function("() => document.getElementById('pageinfo').textContent.startsWith('51')")
    assert first() == "s049"
    page.click("#last")
    page.wait_for_function("() => document.getElementById('pageinfo').textContent === '101–121 of 121'")
    assert page.locator("#rows tr").count() == 21 and "offset=100" in page.url
    assert page.locator("#next").is_disabled()


def test_a_long_session_keeps_only_what_is_visible_in_the_page(page, many):
    open_session(page, many, "chatty")
    items = lambda: page.locator("#canvas .item").count()  # noqa: E731
    assert 0 < items() < 60
    assert page.locator(".item[data-kind=user]").first.inner_text().endswith("question 0")
    page.evaluate("() => { const l = document.getElementById('log'); l.scrollTop = l.scrollHeight; }")
    page.wait_for_function("() => [...document.querySelectorAll('#canvas .item')].some(i => i.innerText.includes('answer 5999'))")
    assert 0 < items() < 60
    page.evaluate("() => { const l = document.getElementById('log'); l.scrollTop = l.scrollHeight / 2; }")
    page.wait_for_function("() => [...document.querySelectorAll('#canvas .item')].some(i => /answer [2-3]\\d{3}\\b/.test(i.innerText))")
    assert 0 < items() < 60


def test_what_the_model_saw_says_why_a_projection_too_large_is_not_shown(page, tmp_path):
    """A projection past the viewer's byte limit (a question of 33/32 of it): the panel shows
    the server's reason (413, `eventstore messages` prints it), not a bare status; the page
    itself (its events, the chat) still works. The server's limit is set to 1 MiB (32 MiB in
    the package) so that passing it takes a 1 MiB question, not a 33 MiB one."""
    from eventstore.web.app import MAX_MESSAGES_BYTES

    limit = 1 << 20
    assert limit < MAX_MESSAGES_BYTES
    db = new_sqlite_store(tmp_path / "bigmsg.db")
    with EventStore.open(db) as st:
        s = st.create_session("bigmsg")
        s.append("user/message", {"content": "q " + "m" * (limit // 32 * 33)})
        s.append("assistant/message", {"content": "the answer"})
    srv = Server(db, limits={"MAX_MESSAGES_BYTES": limit})
    try:
        srv.wait_ready()
        open_session(page, srv, "bigmsg")
        answer = page.locator(".item[data-kind=user]").first  # what the model saw up to the question
        answer.hover()
        answer.locator("button", has_text="What the model saw").click()
        page.wait_for_function("() => document.querySelector('#panel-body').innerText.includes('Cannot load')")
        text = page.inner_text("#panel-body")
        assert "more than the viewer answers at once" in text and "eventstore messages" in text, text
        assert f"({limit:,})" in text  # the limit the server was given, so the 413 is this one
        assert page.locator("#panel-body .ctx-msg").count() == 0
        page.errors[:] = [e for e in page.errors if "413" not in e]  # the browser logs the refused fetch
    finally:
        srv.stop()


# --- the backend contract's reads for the index (every backend) ------------------------------

def test_the_index_reads_of_the_contract(store):
    """``session_rows``, ``session_counts``, ``state_rows`` and ``messages_json(upto_seq)``
    give the same on every backend: payload values as stored, a position bound, paging."""
    a = store.create_session("a")
    call = {"id": "c\u00e91", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    a.append_many([("turn/start", {}, 10.0), ("user/message", {"content": "hi \u0000 \ud83d"}, 11.0),
                   ("assistant/chunk", {"delta": {"content": "x"}}, 12.0),
                   ("assistant/message", {"content": "", "tool_calls": [call]}, 13.0),
                   ("tool/result", {"tool_call_id": "c\u00e91", "content": "ok"}, 14.0)])
    b = store.create_session("b")
    b.append("user/message", {"content": "later"}, ts=20.0)
    store.create_session("empty")
    backend = store._backend
    assert [r[0] for r in backend.session_rows()] == ["a", "b", "empty"]
    assert sorted(tuple(r) for r in backend.session_counts(10)) == [("a", 5, 5, 10.0, 14.0), ("b", 1, 6, 20.0, 20.0)]
    assert [tuple(r) for r in backend.session_counts(3)] == [("a", 3, 3, 10.0, 12.0)]
    states = [tuple(r) for r in backend.state_rows(0, 6, 1000)]
    assert [r[:3] for r in states] == [(1, "a", "turn/start"), (2, "a", "user/message"),
                                        (4, "a", "assistant/message"), (5, "a", "tool/result"), (6, "b", "user/message")]
    assert json.loads(states[2][3]) == [call] and states[3][3] == "c\u00e91"
    assert [r[3] for r in states if r[2] not in ("assistant/message", "tool/result")] == [None, None, None]
    assert [tuple(r) for r in backend.state_rows(2, 5, 1)] == [states[2]]  # after, upto, limit
    assert backend.state_rows(0, 0, 10) == []
    full = json.loads(backend.messages_json("a"))
    assert len(full) == 3
    assert json.loads(backend.messages_json("a", 3)) == full[:2]
    assert backend.messages_json("a", -1) == "[]"
    assert backend.messages_json("a", 2**63 - 1) == backend.messages_json("a")
    # messages_size: the bytes of what messages_json joins (the viewer's limit), read by the database
    for sid, upto in [("a", None), ("a", 3), ("a", -1), ("a", 2**63 - 1), ("b", None), ("empty", None)]:
        text = backend.messages_json(sid, upto)
        n = len(json.loads(text))
        assert backend.messages_size(sid, upto) == (len(text.encode("utf-8", "surrogatepass")) - 1 - n if n else 0)


# --- full-text search from the filter box ----------------------------------------------------

HOSTILE_SNIPPET = '<img src=x onerror="window.__pwned=6"> quokkahostile </mark><script>window.__pwned=7</script> \x02\u202e'


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    """A server over three sessions: a word only in one session's tool result, and hostile
    text around a match in another."""
    path = tmp_path_factory.mktemp("search") / "search.db"
    call = {"id": "c1", "type": "function", "function": {"name": "run_bash", "arguments": '{"command": "cat notes"}'}}
    with EventStore.open(path) as st:
        for sid, result in (("alpha-1", "the zanzibarite ore sample is in notes.txt"), ("beta-2", "nothing here"),
                            (HOSTILE_ID, HOSTILE_SNIPPET)):
            st.create_session(sid).append_many([
                ("turn/start", {}), ("user/message", {"content": "look at the notes"}),
                ("assistant/message", {"content": "", "tool_calls": [call]}),
                ("tool/result", {"tool_call_id": "c1", "content": result}),
                ("assistant/message", {"content": "done"}), ("turn/end", {})])
    srv = Server(path)
    srv.path = path
    yield srv
    srv.stop()


def test_the_search_api(searchable):
    status, _, body = searchable.get("/api/search?q=Zanzibarite&limit=5")
    assert status == 200
    hits = json.loads(body)["hits"]
    assert len(hits) == 1
    hit = hits[0]
    assert (hit["session_id"], hit["seq"], hit["type"]) == ("alpha-1", 3, "tool/result")
    assert isinstance(hit["ts"], float)
    assert hit["snippet"] == "the zanzibarite ore sample is in notes.txt"
    assert [hit["snippet"][a:b] for a, b in hit["marks"]] == ["zanzibarite"]
    # plain text; a marker character in the stored text is not taken for a match
    hit = json.loads(searchable.get("/api/search?q=quokkahostile")[2])["hits"][0]
    assert hit["snippet"] == HOSTILE_SNIPPET.replace("\x02", "\ufffd") and len(hit["marks"]) == 1
    assert json.loads(searchable.get("/api/search?q=notes&limit=2")[2])["hits"].__len__() == 2
    assert searchable.get("/api/search?q=")[0] == 400
    assert searchable.get("/api/search?q=x&limit=y")[0] == 400
    assert searchable.get("/api/search?q=x", "POST")[0] == 405
    # the viewer did not write the index: it scanned the events past it
    import sqlite3

    conn = sqlite3.connect(f"file:{searchable.path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT indexed_through FROM events_search_state").fetchone()[0] == 0
    finally:
        conn.close()


@both_backends
def test_the_search_api_on_every_backend(server):
    hits = json.loads(server.get("/api/search?q=readme&limit=50")[2])["hits"]
    result = next(h for h in hits if h["session_id"] == "a0c1e2f3-111" and h["type"] == "tool/result")
    assert result["seq"] == 4 and result["snippet"].startswith("README.md")
    assert [result["snippet"][a:b] for a, b in result["marks"]] == ["README"]
    hit = json.loads(server.get("/api/search?q=pwned&type=tool/result")[2])["hits"]
    assert [(h["session_id"], h["seq"]) for h in hit] == [(HOSTILE_ID, 4)]
    assert "<script>" in hit[0]["snippet"]


def test_the_filter_box_searches_content(page, searchable):
    page.goto(searchable.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    assert page.locator("#hits").is_hidden()
    page.fill("#filter", "zanzibarite")
    page.wait_for_selector("body[data-searched='zanzibarite']")
    sessions = page.locator("#hitlist .hitsession")
    assert sessions.count() == 1
    assert sessions.locator("a.sid").inner_text() == "alpha-1"
    hit = sessions.locator(".hit")
    assert hit.count() == 1 and hit.get_attribute("data-seq") == "3"
    assert hit.locator(".snippet").inner_text() == "the zanzibarite ore sample is in notes.txt"
    assert hit.locator("mark").all_inner_texts() == ["zanzibarite"]
    assert "tool/result" in hit.locator("a.where").inner_text()
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 0")  # no id contains it
    # the count says what matched where: none by title or id, one session by its content
    page.wait_for_function("() => document.getElementById('count').textContent.includes('by content')")
    assert page.inner_text("#count") == "0 of 3 sessions by title, project, model or id · 1 by content (below)"
    assert "sessions whose content matches are below" in page.inner_text("#empty")
    # the id filter still works beside it
    page.fill("#filter", "beta")
    page.wait_for_selector("body[data-searched='beta']")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 1")
    assert page.locator("#rows td.sid a.sid-link").inner_text() == "beta-2"
    assert page.locator("#hitlist .hitsession").count() == 0
    # clearing the box hides the results
    page.fill("#filter", "")
    page.wait_for_function("() => document.getElementById('hits').hidden && document.querySelectorAll('#rows tr').length === 3")
    # a hit links to its session, and to its event there
    page.fill("#filter", "zanzibarite")
    page.wait_for_selector("body[data-searched='zanzibarite']")
    page.locator("#hitlist a.sid").click()
    arrived(page, "/session", id="alpha-1")
    assert page.url.endswith("/session?id=alpha-1")
    page.go_back()
    page.wait_for_selector("body[data-searched='zanzibarite']")
    page.locator("#hitlist .hit a.where").click()
    arrived(page, "/session", id="alpha-1", seq="3")
    assert page.url.endswith("/session?id=alpha-1&seq=3")
    target = page.locator("#canvas .item.target")  # the block of the call whose result it is
    assert target.count() == 1 and target.get_attribute("data-kind") == "assistant"
    assert "zanzibarite" in target.locator(".call .result").inner_text()


def test_a_session_opens_at_the_event_asked_for(page, many):
    """``?seq=N`` deep in a long session: that event's block is drawn, marked and in view."""
    page.goto(many.url + "/session?id=chatty&seq=4001")
    page.wait_for_selector("body[data-loaded='1']")
    target = page.locator("#canvas .item.target")
    target.wait_for()
    assert target.get_attribute("data-seq") == "4001" and "answer 4001" in target.inner_text()
    assert page.locator("#canvas .item.target").count() == 1
    page.wait_for_function("""() => { const t = document.querySelector('#canvas .item.target').getBoundingClientRect(),
                                         l = document.getElementById('log').getBoundingClientRect();
                                     return t.top >= l.top - 1 && t.top < l.bottom; }""")


def test_hostile_content_in_a_snippet_stays_inert(page, searchable):
    page.goto(searchable.url + "/?q=quokkahostile")
    page.wait_for_selector("body[data-searched='quokkahostile']")
    assert page.input_value("#filter") == "quokkahostile"
    hit = page.locator("#hitlist .hit")
    assert hit.count() == 1
    assert page.locator("#hitlist a.sid").inner_text() == HOSTILE_ID
    text = hit.locator(".snippet").inner_text()
    assert '<img src=x onerror="window.__pwned=6">' in text and "<script>window.__pwned=7</script>" in text
    assert "\u202e" not in text and "\\u202e" in text  # the bidi override shown as an escape
    assert hit.locator("mark").all_inner_texts() == ["quokkahostile"]
    assert page.locator("#hits img, #hits script, #hits svg").count() == 0
    assert page.evaluate("window.__pwned") is None


# --- imported transcripts: the conversation view (issue #34) -------------------------------

TRANSCRIPTS = TESTS / "transcripts_data"
CLAUDE_MAIN = "e2c84b1f-6d3a-4a07-b5e9-93f1c0a7d258"  # v2.1-main: a Task call and its subagent
CLAUDE_SUB = CLAUDE_MAIN + ":agent:0a1b2c3"
CLAUDE_TASK = "toolu_014PQ1EfIalQLVQlmj6GUitA"
CLAUDE_EDIT = "3f0c9a52-7d1e-4b8a-9c33-51e2a7d40b6f"  # Edit calls
CODEX = "019aeb31-58f2-7a44-b1c9-d03e6f7a8b92"  # rollout-0.66: apply_patch calls
HOSTILE_MD = (
    "# Heading\n\nSome **bold** and `<code>` and *it*.\n\n"
    "[run](javascript:window.__pwned=6) [run2](JaVaScRiPt:window.__pwned=7) [data](data:text/html,<script>x</script>)\n"
    "<javascript:window.__pwned=8> <img src=x onerror=\"window.__pwned=9\"> <script>window.__pwned=10</script>\n\n"
    "- item **<svg onload=\"window.__pwned=11\">**\n- [fine](https://example.org/ok \"t\")\n\n"
    "```html\n<iframe src=\"javascript:window.__pwned=12\"></iframe>\n```\n\n"
    "| a | b |\n|---|---|\n| <b onclick=\"window.__pwned=13\">x</b> | [q](vbscript:x) |\n"
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """A server over Claude Code and Codex samples imported by the CLI, plus a session whose
    messages are hostile Markdown and a thinking event with only encrypted content."""
    from click.testing import CliRunner

    from eventstore.cli import cli

    path = new_sqlite_store(tmp_path_factory.mktemp("imported") / "imported.db")
    # the import command in process (the viewer is the point here, not the command's process)
    r = CliRunner().invoke(cli, ["--db", str(path), "import", str(TRANSCRIPTS / "claude-code"), str(TRANSCRIPTS / "codex")])
    assert r.exit_code == 0 and r.exception is None, r.output
    with EventStore.open(path) as st:
        st.create_session("hostile-md").append_many([
            ("turn/start", {}), ("user/message", {"content": HOSTILE_MD}),
            ("assistant/thinking", {"thinking": "", "source": {"encrypted_content": "gAAAA" + "x" * 995}}),
            ("assistant/message", {"content": HOSTILE_MD}), ("turn/end", {})])
    srv = Server(path)
    srv.db = path
    srv.wait_ready()
    yield srv
    srv.stop()


def test_bookkeeping_is_hidden_and_counted_and_shown_by_the_toggle(page, imported):
    open_session(page, imported, CLAUDE_MAIN)
    canvas = page.locator("#canvas")
    assert page.locator("#canvas .item[data-kind=other]").count() == 0  # no JSON block in the way
    info = page.inner_text("#hiddeninfo")
    assert "bookkeeping events hidden" in info and "progress" in info
    assert page.locator("#canvas pre.json", has_text="progress").count() == 0
    assert "add a --dry-run flag" in canvas.inner_text()
    # a run of hidden events opens inline
    run = page.locator(".hidden-toggle", has_text="claude/progress").first
    run.click()
    page.wait_for_function("() => document.querySelector('.hidden-run .msg.other') !== null")
    # the toggle: every event as stored
    page.click("#viewmode")
    page.wait_for_function("() => document.body.dataset.view === 'raw'")
    page.wait_for_function("() => [...document.querySelectorAll('#canvas .item[data-kind=other] .role')].some(r => r.textContent === 'claude/progress')")
    assert "view=raw" in page.url
    page.click("#viewmode")
    page.wait_for_function("() => document.body.dataset.view === 'conversation'")
    assert page.locator("#canvas .item[data-kind=other]").count() == 0


def test_thinking_is_readable_never_a_signature(page, imported):
    open_session(page, imported, CLAUDE_MAIN)
    thinking = page.locator("details.thinking").first
    assert "I need the sync command's structure" in thinking.inner_text()
    thinking.locator("summary").click()
    assert thinking.get_attribute("open") is not None
    text = page.inner_text("#canvas")
    assert "signature" not in text and "vkSOC0ZW79Dki5c1Ew1FGGz9" not in text
    # Codex: its reasoning summary once, never the encrypted content
    open_session(page, imported, CODEX)
    text = page.inner_text("#canvas")
    assert page.locator("details.thinking", has_text="Reproducing the crash").count() == 1
    assert "gAAAA" not in text and "encrypted_content" not in text
    # the model and tokens of an answer, from the token count after it
    assert page.locator(".msg.assistant .usage").first.inner_text() == "gpt-5.1-codex · 3,620 in · 96 out"
    # only encrypted content: its size
    open_session(page, imported, "hostile-md")
    assert page.inner_text("details.thinking summary").startswith("encrypted reasoning, 1,000 bytes")


def test_a_subagent_link_is_followed_both_ways(page, imported):
    open_session(page, imported, CLAUDE_MAIN)
    assert page.inner_text("#title").startswith("add a --dry-run flag to `driftwood sync`")  # no title: the first prompt
    call = page.locator(".call", has=page.locator(".name", has_text="Task")).first
    call.locator("a.sublink").click()
    arrived(page, "/session", id=CLAUDE_SUB)
    assert page.evaluate("new URLSearchParams(location.search).get('id')") == CLAUDE_SUB
    assert page.locator("#canvas .item[data-kind=user]").count() >= 1
    page.click("#parentlink")
    arrived(page, "/session", id=CLAUDE_MAIN)
    assert page.evaluate("new URLSearchParams(location.search).get('id')") == CLAUDE_MAIN
    assert page.evaluate("new URLSearchParams(location.search).get('call')") == CLAUDE_TASK
    # the parent opens at the Task call, marked
    page.wait_for_function("""() => { const t = document.querySelector('.item.target');
                                     return t && t.querySelector('.call .name')?.textContent === 'Task'; }""")


def test_edits_and_patches_are_diffs(page, imported):
    open_session(page, imported, CODEX)
    patch = page.locator("pre.diff").first
    assert patch.locator(".file", has_text="*** Update File: scripts/check_links.py").count() == 1
    assert patch.locator(".dl.del", has_text="urlopen(href)").count() == 1
    assert patch.locator(".dl.add", has_text='if "://" not in href:').count() == 1
    page.goto(session_url(imported, CLAUDE_EDIT) + "&seq=16")  # the Edit call, scrolled to
    page.wait_for_selector("body[data-loaded='1']")
    edit = page.locator(".item.target .call", has=page.locator(".name", has_text="Edit")).first.locator("pre.diff")
    assert edit.locator(".dl.file").inner_text().strip() == "/home/dev/src/tidepool/tidepool/net.py"
    assert edit.locator(".dl.del").count() >= 1 and edit.locator(".dl.add").count() >= 1
    # a Task's prompt is text, not an escaped JSON string
    open_session(page, imported, CLAUDE_MAIN)
    task = page.locator(".call", has=page.locator(".name", has_text="Task")).first
    assert "prompt: Find where `driftwood sync` is implemented" in task.locator("pre.args").inner_text()


def test_hostile_markdown_stays_inert(page, imported):
    open_session(page, imported, "hostile-md")
    canvas = page.locator("#canvas")
    # rendered as Markdown...
    assert canvas.locator(".md h3", has_text="Heading").count() == 2
    assert canvas.locator(".md strong", has_text="bold").count() == 2
    assert canvas.locator(".md table td").count() >= 4
    assert canvas.locator(".md a[href='https://example.org/ok']").count() == 2
    # ...and inert: the HTML is text, no other link, no handler attribute, nothing ran
    text = canvas.inner_text()
    assert '<img src=x onerror="window.__pwned=9">' in text and "<script>window.__pwned=10</script>" in text
    assert canvas.locator("script, img, svg, iframe, b").count() == 0
    hrefs = page.eval_on_selector_all("#canvas a[href]", "as => as.map(a => a.href)")
    assert hrefs == ["https://example.org/ok", "https://example.org/ok"], hrefs
    handlers = page.evaluate("""() => [...document.querySelectorAll('#canvas *')].flatMap(e =>
        [...e.attributes].map(a => a.name).filter(n => n.startsWith('on')))""")
    assert handlers == []
    for a in canvas.locator("a[href^='javascript'], a[href^='JaVa']").all():
        a.click()
    page.click("#replay")
    page.wait_for_selector("body[data-replay=ended]", timeout=10000)
    assert page.evaluate("window.__pwned") is None


def test_the_sessions_list_of_imported_sessions(page, imported):
    page.goto(imported.url + "/?sort=tokens")
    page.wait_for_selector("body[data-loaded='1']")
    rows = page.locator("#rows tr")
    assert rows.count() == 29
    # titles: the summary's, else the first prompt; project, model, tokens
    forks = page.locator("#rows tr", has=page.locator("a.title", has_text="Rename the --dry flag"))
    fork = forks.filter(has=page.locator(".rel.fork")).first  # (two /rewind samples share the prompt)
    assert fork.locator(".rel.fork").count() == 1
    assert fork.locator("td.proj").inner_text() == "pebble" and fork.locator("td.model").inner_text() == "claude-opus-4-6"
    codex = page.locator("#rows tr", has=page.locator("a.sid-link", has_text=CODEX))
    assert codex.locator("a.title.prompt").inner_text().startswith("scripts/check_links.py crashes")
    assert codex.locator("td.model").inner_text() == "gpt-5.1-codex"
    tokens = page.eval_on_selector_all("#rows td.num:nth-child(4)", "ts => ts.map(t => +t.textContent.replace(/,/g, '') || 0)")
    assert tokens == sorted(tokens, reverse=True) and tokens[0] > 200_000
    # filter by project: the count is the rows'
    page.fill("#filter", "pebble")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 9")
    assert page.inner_text("#count").startswith("9 of 29 sessions by title, project, model or id")
    # subagents: marked, each linked to its parent
    page.fill("#filter", "")
    page.select_option("#state", "subagent")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 8")
    assert page.locator("#rows .rel.subagent").count() == 8 and page.locator("#rows a.parent").count() == 8
    assert page.inner_text("#count").startswith("8 of 29 sessions by state")
    sub = page.locator("#rows tr", has=page.locator("a.sid-link", has_text=CLAUDE_SUB))
    sub.locator("a.parent").click()
    arrived(page, "/session", id=CLAUDE_MAIN)
    assert page.evaluate("new URLSearchParams(location.search).get('id')") == CLAUDE_MAIN


def test_find_in_a_session_and_keys(page, imported):
    open_session(page, imported, CODEX)
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "find"
    page.keyboard.type("relative")
    page.keyboard.press("Enter")
    page.wait_for_function("() => /^1 \\/ \\d+/.test(document.getElementById('findcount').textContent)")
    n = int(page.inner_text("#findcount").split("/ ")[1].rstrip("+"))
    assert n >= 2
    assert "relative" in page.locator(".item.target").inner_text().lower()
    first = page.locator(".item.target").get_attribute("data-seq")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('findcount').textContent.startsWith('2 / ')")
    page.wait_for_function(f"() => document.querySelector('.item.target')?.dataset.seq !== '{first}'")
    page.fill("#find", "zzzqqqnotthere")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('findcount').textContent === 'no match'")
    # j/k: from message to message
    page.locator("#find").blur()
    page.click("#log", position={"x": 5, "y": 5})
    marked = "document.querySelector('.item.target')?.dataset.seq"
    before = page.evaluate(marked)  # (the last find hit stays marked: j steps on from it)
    page.keyboard.press("j")
    page.wait_for_function(f"() => {marked} !== undefined && {marked} !== {json.dumps(before)}")
    a = page.locator(".item.target").get_attribute("data-seq")
    page.keyboard.press("j")
    page.wait_for_function(f"() => {marked} !== '{a}'")
    b = page.locator(".item.target").get_attribute("data-seq")
    assert int(b) > int(a)
    kind = page.locator(".item.target").get_attribute("data-kind")
    assert kind in ("user", "assistant")
    page.keyboard.press("k")
    page.wait_for_function(f"() => document.querySelector('.item.target')?.dataset.seq === '{a}'")


def test_a_missing_session_says_so_without_a_script_error(page, imported):
    page.goto(session_url(imported, "no-such-session"))
    page.wait_for_selector("body[data-loaded='error']")
    assert "not found" in page.inner_text("#notice")
    assert page.inner_text("#live") == "not following" and page.is_disabled("#viewmode")
    assert page.get_attribute("#download", "href") is None
    page.wait_for_timeout(300)  # a rejected promise nobody awaits would be reported by now
    assert [e for e in page.errors if "Failed to load resource" not in e] == []
    page.errors.clear()  # the console's own line for each 404 answer


def test_the_replay_clock_says_days_and_skips_long_gaps(page, imported):
    with EventStore.open(imported.db) as st:
        t0 = 1764460800.0
        st.create_session("a-year").append_many([("turn/start", {}, t0), ("user/message", {"content": "hi"}, t0 + 1),
                                                 ("assistant/message", {"content": "later"}, t0 + 1 + 400 * 86400),
                                                 ("turn/end", {}, t0 + 2 + 400 * 86400)])
    open_session(page, imported, "a-year")
    page.click("#replay")
    assert page.is_checked("#skipidle")
    page.wait_for_selector("body[data-replay=ended]", timeout=10000)
    page.uncheck("#skipidle")
    assert page.inner_text("#clock").endswith("/ 400 d 00:00:02")
    # scrubbing after the end: no longer "end of the log"
    page.eval_on_selector("#scrub", "el => { el.value = 100; el.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => document.body.dataset.replay === 'paused'")
    assert "end of the log" not in page.inner_text("#replaystate")
