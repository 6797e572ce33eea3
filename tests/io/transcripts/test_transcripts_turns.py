"""The ``turns`` view says of a transcript's last turn what the session says of itself
(issue 32, "a finished session reads as finished"; migration 0300): a Claude Code file has no
end-of-turn line in most versions (``stop_reason`` null on every line, no ``turn_duration``),
so the last turn is complete when it was answered, on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TESTS

from eventstore.io.transcripts.importer import import_transcript
from eventstore.web.index import Summary

DATA = TESTS / "transcripts_data"
SAMPLES = sorted(str(p.relative_to(DATA)) for p in (DATA / "claude-code").rglob("*.jsonl"))
CODEX = sorted(str(p.relative_to(DATA)) for p in DATA.glob("codex*/*.jsonl"))


def _rows(store, sql, params=()):
    from conftest import db_rows
    return db_rows(store, sql, params)


def _summary(store, sid: str) -> Summary:
    s = Summary(sid, 0)
    for e in store.session(sid).events():
        s.state(e.type, e.payload.get("tool_call_id") if e.type == "tool/result" else e.payload.get("tool_calls"))
    return s


def _view_complete(store, sid: str) -> bool:
    """The session as the views say it: no incomplete turn and no call without its result."""
    open_turns = _rows(store, "SELECT count(*) FROM turns WHERE session_id = ? AND complete = 0", (sid,))[0][0]
    dangling = _rows(store, "SELECT count(*) FROM tool_calls WHERE session_id = ? AND result_seq IS NULL", (sid,))[0][0]
    return not open_turns and not dangling


@pytest.mark.parametrize("rel", SAMPLES + CODEX)
def test_the_turns_view_agrees_with_the_session_at_every_line(rel, store, tmp_path):
    # The file grows a line at a time; after each import the views and the viewer's rule say
    # the same of every session, and the whole file's sessions are complete (Codex's too).
    data = (DATA / rel).read_bytes()
    f = tmp_path / Path(rel).name
    lines = data.splitlines(keepends=True)
    for n in range(1, len(lines) + 1):
        f.write_bytes(b"".join(lines[:n]))
        import_transcript(store, str(f), "codex" if rel.startswith("codex") else "claude-code")
        for info in store.sessions():
            assert _view_complete(store, info.id) == _summary(store, info.id).complete, (n, info.id)
    for info in store.sessions():
        assert _view_complete(store, info.id), info.id
        assert all(c for (c,) in _rows(store, "SELECT complete FROM turns WHERE session_id = ?", (info.id,)))


def test_a_finished_session_without_stop_reason_has_its_last_turn_complete(store):
    # (the samples of the 2.1 layout: no stop_reason and no turn_duration anywhere)
    rel = "claude-code/v2.1-interleaved-progress.jsonl"
    text = (DATA / rel).read_text(encoding="utf-8")
    assert '"stop_reason": null' in text or '"stop_reason":null' in text
    assert not any(isinstance((json.loads(x).get("message") or {}).get("stop_reason"), str) for x in text.splitlines())
    assert "turn_duration" not in text
    import_transcript(store, str(DATA / rel), "claude-code")
    (info,) = [i for i in store.sessions() if not i.id.endswith(":titles")]
    rows = _rows(store, "SELECT start_seq, end_seq, complete FROM turns WHERE session_id = ?", (info.id,))
    assert [r[2] for r in rows] == [1] and rows[0][1] == info.events - 1


def call(i: str) -> dict:
    return {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}


CASES = {
    # name: (events, the complete column of each turn)
    "answered": ([("turn/start", {}), ("user/message", {"content": "q"}),
                  ("assistant/message", {"content": "", "tool_calls": [call("a")]}),
                  ("tool/result", {"tool_call_id": "a", "content": "r"}),
                  ("assistant/message", {"content": "done"}), ("step/end", {})], [1]),
    "a call answered too late": ([("turn/start", {}), ("user/message", {"content": "q"}),
                                  ("assistant/message", {"content": "", "tool_calls": [call("a")]}),
                                  ("assistant/message", {"content": "done"}),
                                  ("tool/result", {"tool_call_id": "a", "content": "late"}),
                                  ("assistant/message", {"content": "done"})], [0]),
    "a part's call waits": ([("turn/start", {}), ("user/message", {"content": "q"}),
                             ("assistant/message", {"content": "x", "message_id": "m"}),
                             ("assistant/part", {"tool_calls": [call("b")], "message_id": "m"})], [0]),
    "a part's call answered": ([("turn/start", {}), ("user/message", {"content": "q"}),
                                ("assistant/message", {"content": "x", "message_id": "m"}),
                                ("assistant/part", {"tool_calls": [call("b")], "message_id": "m"}),
                                ("tool/result", {"tool_call_id": "b", "content": "r"}),
                                ("assistant/message", {"content": "ok", "message_id": "n"})], [1]),
    "a call that is no object": ([("turn/start", {}), ("user/message", {"content": "q"}),
                                  ("assistant/message", {"content": "", "tool_calls": [3, None]}),
                                  ("tool/result", {"tool_call_id": "3", "content": "r"}),
                                  ("assistant/message", {"content": "done"})], [0]),
    "a call that is a string": ([("turn/start", {}), ("user/message", {"content": "q"}),
                                 ("assistant/message", {"content": "", "tool_calls": ["junk"]}),
                                 ("tool/result", {"tool_call_id": "junk", "content": "r"}),
                                 ("assistant/message", {"content": "done"})], [0]),
    "the question only": ([("turn/start", {}), ("user/message", {"content": "q"})], [0]),
    "no message yet": ([("assistant/message", {"content": "before"}), ("turn/start", {})], [0]),
    "cut by the next turn": ([("turn/start", {}), ("user/message", {"content": "q"}),
                              ("assistant/message", {"content": "a"}), ("turn/start", {}),
                              ("user/message", {"content": "q2"}), ("assistant/message", {"content": "b"})], [0, 1]),
    "ended": ([("turn/start", {}), ("user/message", {"content": "q"}), ("turn/end", {})], [1]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_last_turn_is_complete_when_answered(store, name):
    events, want = CASES[name]
    s = store.create_session("s")
    s.append_many([(t, p, float(k)) for k, (t, p) in enumerate(events)])
    got = [c for (c,) in _rows(store, "SELECT complete FROM turns WHERE session_id = 's' ORDER BY start_seq")]
    assert got == want
    # (the session's rule looks at its last turn only, and keeps an answer from before it;
    # SQLite's tool_calls view cannot read a call that is a string)
    if name not in ("no message yet", "cut by the next turn", "a call that is a string"):
        assert _view_complete(store, "s") == _summary(store, "s").complete
