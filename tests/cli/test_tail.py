"""``eventstore tail``: a session rendered like a chat UI, and --follow in a real process
showing streamed deltas while they are being committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from conftest import TESTS

from eventstore import EventStore
from eventstore.cli import cli


def tail(db, *args):
    return CliRunner().invoke(cli, ["--db", str(db), "tail", *args])


def fill(store, sid="s1"):
    s = store.create_session(sid)
    s.append("turn/start", {"agent": sid})
    s.append("user/message", {"content": "What is 1+1?"})
    s.append("step/start", {"step": 0})
    for piece in ("Let me ", "check."):
        s.append("assistant/chunk", {"delta": {"content": piece}})
    call = {"id": "call_1", "type": "function",
            "function": {"name": "run_bash", "arguments": '{"command":"expr 1 + 1"}'}}
    s.append("assistant/message", {"content": "Let me check.", "tool_calls": [call]})
    s.append("tool/result", {"tool_call_id": "call_1", "content": "2"})
    s.append("step/end", {"step": 0, "tool_calls": 1})
    s.append("assistant/message", {"content": "It is 2.", "tool_calls": []})
    s.append("skill/inject", {"name": "math"})
    s.append("turn/end", {})
    return s


def test_tail_renders_a_session_like_a_chat_ui(store, backend_url):
    fill(store)
    r = tail(backend_url, "s1")
    assert r.exit_code == 0, r.output
    assert r.output == (
        "--- turn ---\n"
        "user: What is 1+1?\n"
        "assistant: Let me check.\n"  # the streamed chunks, not repeated by the message
        '  -> run_bash({"command":"expr 1 + 1"})\n'
        "  <- call_1: 2\n"
        "assistant: It is 2.\n"  # not streamed: printed from the message
        '[skill/inject] {"name": "math"}\n'
        "--- end of turn ---\n"
    )


def test_tail_shows_reasoning_on_a_line_and_leaves_out_what_an_import_kept(store, backend_url):
    """An imported transcript: its reasoning as one line of text (not the signature or the
    encrypted original), other events without the source line the import kept beside
    them, and an event that holds only that line not at all."""
    s = store.create_session("t")
    s.append("assistant/thinking", {"thinking": "Check the\n  units  table.", "signature": "x" * 300,
                                    "source": {"encrypted_content": "gAAAA" * 100}, "event_id": "L6"})
    s.append("assistant/thinking", {"redacted": True, "data": "opaque", "event_id": "L7"})
    s.append("assistant/thinking", {"thinking": "y" * 250})
    s.append("codex/turn_context", {"source": {"cwd": "/w", "model": "gpt-5-codex"}, "event_id": "L8"})
    s.append("codex/token_count", {"usage": {"input_tokens": 3}, "source": {"info": "z" * 300}, "event_id": "L9"})
    s.append("note", {})
    assert tail(backend_url, "t").output == (
        "thinking: Check the units table.\n"
        "thinking: [redacted]\n"
        f"thinking: {'y' * 200}... (50 more characters)\n"
        '[codex/token_count] {"usage": {"input_tokens": 3}}\n'
        "[note]\n")


def test_tail_shows_the_parts_of_one_api_message_as_its_text_and_calls(store, backend_url):
    """A transcript's API message written over several lines: each later line's part shows
    its text and calls as the message's own do, not as raw JSON."""
    def call(i, name):
        return {"id": f"toolu_{i}", "type": "function", "function": {"name": name, "arguments": '{"p":"a.py"}'}}
    s = store.create_session("p")
    s.append("assistant/message", {"content": "Reading both.", "tool_calls": [call(1, "Read")], "message_id": "m1"})
    s.append("tool/result", {"tool_call_id": "toolu_1", "content": "one"})
    s.append("assistant/part", {"tool_calls": [call(2, "Grep")], "message_id": "m1", "source": {"x": 1}})
    s.append("assistant/part", {"content": "And more.", "message_id": "m1"})
    assert tail(backend_url, "p").output == (
        "assistant: Reading both.\n"
        '  -> Read({"p":"a.py"})\n'
        "  <- toolu_1: one\n"
        '  -> Grep({"p":"a.py"})\n'
        "assistant: And more.\n")


def test_tail_shows_the_final_text_when_it_differs_from_the_stream(store, backend_url):
    s = store.create_session("s")
    s.append("assistant/chunk", {"delta": {"content": "Draft"}})
    s.append("assistant/message", {"content": "Final"})
    s.append("assistant/chunk", {"delta": {"content": "cut off"}})  # interrupted: no message follows
    assert tail(backend_url, "s").output == "assistant: Draft\nassistant: Final\nassistant: cut off\n"


def test_tail_of_every_session_prefixes_lines_and_interleaves_streams(store, backend_url):
    a, b = store.create_session("a"), store.create_session("b")
    a.append("assistant/chunk", {"delta": {"content": "one "}})
    b.append("user/message", {"content": "hello"})
    a.append("assistant/chunk", {"delta": {"content": "two"}})
    a.append("assistant/message", {"content": "one two"})
    r = tail(backend_url)
    assert r.exit_code == 0, r.output
    assert r.output == "[a] assistant: one \n[b] user: hello\n[a] assistant: ...two\n"
    assert tail(backend_url, "-n", "1").output == "[a] assistant: one two\n"
    # starting mid-stream: the final text differs from the part seen, so it is shown whole
    assert tail(backend_url, "a", "-n", "2").output == "assistant: two\nassistant: one two\n"


def test_tail_of_every_session_keeps_each_prefix_on_its_line(store, backend_url):
    s = store.create_session("two\nlines\tid")
    s.append("assistant/chunk", {"delta": {"content": "streamed"}})
    s.append("user/message", {"content": "hi"})
    assert tail(backend_url).output == "[two\\nlines\\tid] assistant: streamed\n[two\\nlines\\tid] user: hi\n"


def test_tail_neutralizes_terminal_control_characters(store, backend_url):
    s = store.create_session("s")
    s.append("tool/result", {"tool_call_id": "c", "content": "\x1b[2J\x07gone\ud83d"})
    r = tail(backend_url, "s")
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert r.output == "  <- c: \\x1b[2J\\x07gone\\ud83d\n"


def test_tail_shows_bidirectional_controls_as_escapes(store, backend_url):
    """U+202E and its kin would make the terminal show the text in another order."""
    s = store.create_session("s")
    s.append("tool/result", {"tool_call_id": "c", "content": "ok\u202eexe.txt\u2066x\u200f"})
    r = tail(backend_url, "s")
    assert r.output == "  <- c: ok\\u202eexe.txt\\u2066x\\u200f\n"


def test_tail_errors(store, backend_url):
    r = tail(backend_url, "nope")
    assert r.exit_code == 1 and "error: session 'nope' not found" in r.output
    r = tail(backend_url, "--timeout", "1")
    assert r.exit_code == 2 and "--timeout goes with --follow" in r.output


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_tail_follow_prints_deltas_as_another_process_commits_them(store, backend_url):
    s = store.create_session("live")
    s.append("user/message", {"content": "go"})
    proc = subprocess.Popen([sys.executable, "-m", "eventstore.cli", "--db", str(backend_url), "tail", "live",
                             "--follow", "--timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"},
                            # a shell's background job ignores SIGINT, and a child inherits that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    output = bytearray()

    def read():
        while chunk := os.read(proc.stdout.fileno(), 4096):
            output.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def shows(text: str) -> None:
        deadline = time.monotonic() + 60
        while not output.decode().endswith(text):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, f"tail printed {output.decode()!r}, waiting for {text!r}"
            time.sleep(0.01)

    try:
        shows("user: go\n")
        s.append("assistant/chunk", {"delta": {"content": "Hel"}})
        shows("assistant: Hel")  # on screen while the message is still streaming
        s.append("assistant/chunk", {"delta": {"content": "lo"}})
        shows("assistant: Hello")
        s.append("assistant/message", {"content": "Hello"})
        shows("assistant: Hello\n")
        s.append("tool/result", {"tool_call_id": "c1", "content": "done"})
        shows("  <- c1: done\n")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        reader.join(10)
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert output.decode() == "user: go\nassistant: Hello\n  <- c1: done\n"


_CREATE_AND_APPEND = """
import sys
from eventstore import EventStore
with EventStore.open(sys.argv[1]) as st:
    st.create_session("shared-1").append("user/message", {"content": "hello"})
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_tail_follow_waits_for_a_session_that_another_process_creates(store, backend_url):
    """tail -f of a session not stored yet says once that it waits, then follows the session
    another process creates (woken by the followers' wait for commits: LISTEN/NOTIFY on
    PostgreSQL, polling on SQLite); without -f a missing session stays an error."""
    env = {**os.environ, "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(TESTS.parent),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", str(backend_url), "tail", "-f", "shared-1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    streams = {"out": bytearray(), "err": bytearray()}

    def read(name, f):
        while chunk := os.read(f.fileno(), 4096):
            streams[name].extend(chunk)

    readers = [threading.Thread(target=read, args=(n, f), daemon=True)
               for n, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()

    def shows(name: str, text: str) -> None:
        deadline = time.monotonic() + 60
        while not streams[name].decode().endswith(text):
            assert proc.poll() is None, bytes(streams["err"])
            assert time.monotonic() < deadline, f"tail printed {bytes(streams[name])!r}, waiting for {text!r}"
            time.sleep(0.01)

    try:
        shows("err", "waiting for session 'shared-1' (Ctrl-C stops)\n")
        subprocess.run([sys.executable, "-c", _CREATE_AND_APPEND, str(backend_url)], env=env, check=True, timeout=60)
        shows("out", "user: hello\n")
        store.session("shared-1").append("assistant/message", {"content": "hi"})
        shows("out", "assistant: hi\n")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        for r in readers:
            r.join(10)
    assert proc.returncode == 0, bytes(streams["err"])
    assert streams["out"].decode() == "user: hello\nassistant: hi\n"
    assert streams["err"].decode() == "waiting for session 'shared-1' (Ctrl-C stops)\n"  # once


def test_tail_follow_of_a_session_that_never_comes_ends_at_the_timeout(store, backend_url):
    r = tail(backend_url, "-f", "never", "--timeout", "0.3")
    assert r.exit_code == 1
    assert r.stderr == "waiting for session 'never' (Ctrl-C stops)\nerror: session 'never' not found\n"
    r = tail(backend_url, "never")
    assert (r.exit_code, r.stderr) == (1, "error: session 'never' not found\n")


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def tail_follow_never(backend_url, *python: str) -> subprocess.Popen:
    """``eventstore --db URL tail -f never`` in a real process, started by ``python
    *PYTHON`` (SIGINT at its default action until Python installs its handler)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, *python, "--db", str(backend_url), "tail", "-f", "never"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def after_ctrl_c(proc: subprocess.Popen) -> tuple[int, str, str]:
    """``(status, stdout, stderr)`` of ``proc`` once it ended; fails the test (the process
    killed, its output shown) when it still runs 30 s on."""
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"tail -f still waited 30 s after the Ctrl-C; it printed {out!r} and {err!r}")
    return proc.returncode, out, err


def test_ctrl_c_while_tail_follow_waits_for_a_session_stops_it_quietly(store, backend_url):
    proc = tail_follow_never(backend_url, "-m", "eventstore")
    try:
        assert proc.stderr.readline() == "waiting for session 'never' (Ctrl-C stops)\n"  # (EOF if it ended)
    finally:
        proc.send_signal(signal.SIGINT)
        ended = after_ctrl_c(proc)
    assert ended == (0, "", "")


# Runs `eventstore ARGS`; as the follower's wait for commits begins, a real SIGINT is raised
# inside a weakref callback, where Python can only print the KeyboardInterrupt and drop it.
_CTRL_C_IN_A_CALLBACK = """
import signal, sys, weakref

def ctrl_c_in_a_callback(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "wait_for_commit":
        sys.setprofile(None)
        print("SIGINT raised", flush=True)
        box = type("Box", (), {})()
        ref = weakref.ref(box, lambda _: signal.raise_signal(signal.SIGINT))
        del box

sys.setprofile(ctrl_c_in_a_callback)
sys.argv[0] = "eventstore"
from eventstore.cli import main
main()
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_ctrl_c_that_python_handles_inside_a_callback_still_stops_tail_follow(store, backend_url):
    """Python raises a Ctrl-C's KeyboardInterrupt in whatever Python code runs next; in a
    callback that cannot raise it (importlib's weakref callback after a module's first
    import, which tail -f does as it starts waiting) it was printed and lost, and tail -f
    kept waiting. The command delivers it again."""
    proc = tail_follow_never(backend_url, "-c", _CTRL_C_IN_A_CALLBACK)
    assert after_ctrl_c(proc) == (0, "SIGINT raised\n", "waiting for session 'never' (Ctrl-C stops)\n")


def test_follow_stops_after_the_idle_timeout(store, backend_url):
    fill(store)
    r = tail(backend_url, "s1", "--follow", "--timeout", "0.2")
    assert r.exit_code == 0
    assert r.output.endswith("--- end of turn ---\n")
    assert [ev.seq for ev in EventStore.open(backend_url).session("s1").follow(after_seq=8, idle_timeout=0.1)] == [9, 10]


@pytest.mark.parametrize("tool_calls", [1.5, True, 7, "call", {"id": "c"}, None])
def test_tail_shows_an_assistant_message_whose_tool_calls_are_not_a_list(store, backend_url, tool_calls):
    """Import, messages and verify accept such sessions; tail must not crash on them."""
    store.create_session("odd").append("assistant/message", {"content": "hi", "tool_calls": tool_calls})
    r = tail(backend_url, "odd")
    assert r.exit_code == 0, r.output
    assert r.output == "assistant: hi\n"
