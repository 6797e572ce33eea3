"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as sessions.

One pass over the lines in file order; the events a line makes depend only on that line
and the lines before it, and nothing waits for a later line, so importing a prefix of a
growing rollout and then all of it stores what one import of all of it stores. The mapping
(docs/import-export.md, "Agents' transcripts", has the table):

* the first line's ``session_meta`` gives the session's meta (cwd, git, version); the
  model, which only ``turn_context`` lines name, is a ``session/info {"info": {"model"}}``
  whenever it changes, the title a ``thread_name_updated`` gives one ``{"title"}``; every
  ``session_meta``/``turn_context`` line stays an event (``codex/session_meta``,
  ``codex/turn_context``);
* a user ``message`` item that a human typed opens a turn (``turn/start``,
  ``user/message``). Text Codex wrote itself is a ``user/message`` with a ``kind`` (see
  :func:`user_kind`) and opens nothing. ``event_msg user_message`` repeats the prompt item
  (``codex/user_message``); one with no prompt item next to it (a review session keeps
  its prompt only there) is the prompt itself;
* each ``turn_context`` (written before a model call) opens a step; ``task_complete`` ends
  the turn; either it or ``turn_aborted`` says how the session stands in ``session/info
  {"ended": "complete" | "interrupted"}`` (``null`` again when a new turn starts). An
  aborted turn stays open until the next prompt, which writes its ``turn/end {"aborted"}``
  (with the abort's time), so a session cut off mid-turn reads as interrupted, not as
  finished; before the next user text, each call left without a result gets a
  ``tool/result`` ``"aborted"`` (``synthetic``, ``is_error``), as Codex answers it in the
  model's next request;
* the items of one model response (its ``reasoning``, text ``message`` and tool calls,
  up to the next input: a tool output, a user message, a ``turn_context``) share a
  ``message_id`` (the key of the response's first line): the first text or call is an
  ``assistant/message``, each later one an ``assistant/part`` that the projection folds
  into it, ``reasoning`` an ``assistant/thinking``. Calls are chat ``tool_calls``
  (``custom_tool_call``: ``{"input": ...}``; ``local_shell_call``: its ``action``);
* ``function_call_output``/``custom_tool_call_output`` are ``tool/result``: ``is_error``
  when the exit code is not 0, or, without an exit code, when the output is one of the
  runtime's own failure texts (:func:`failure`) or the call's ``exec_command_end`` /
  ``patch_apply_end`` / ``mcp_tool_call_end`` said it failed;
* ``token_count`` is ``codex/token_count`` carrying ``usage``: the increase of its
  cumulative totals over the previous ones (repeated totals carry none); totals lower
  than the previous ones are a counter that started again from zero, a new base;
* ``compacted`` is ``compaction/boundary`` (the projection starts again there), then the
  replacement history (``user/message`` with kind ``compact_history`` for the earlier
  prompts sent again, ``compact_summary`` for the summary), or, in the versions that write
  only the summary, that summary;
* every other line is an event ``codex/<type>`` of its own; each event keeps what the
  mapping did not use of its line in ``source``.
"""

from __future__ import annotations

import json
import os
import re

from eventstore.errors import InvalidJSONL
from eventstore.io.transcripts import TranscriptFormat, register
from eventstore.io.transcripts.common import Converted, parse_ts, without

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
#: Response items that are input to the model: they end the model response before them.
_INPUT_ITEMS = OUTPUT_TYPES + ("tool_search_output",)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

#: How user text that no human typed begins (compared without case, after leading blanks),
#: and its ``kind``. Codex writes these itself: the environment and the instructions
#: (AGENTS.md) at the start, the marker of an interrupted turn, the output of a ``!command``,
#: a review's findings, and a compaction's instruction and summary.
KINDS: tuple[tuple[str, str], ...] = (
    ("<environment_context>", "environment"),
    ("<user_instructions>", "environment"),
    ("<user-instructions>", "environment"),
    ("# AGENTS.md", "environment"),
    ("<INSTRUCTIONS>", "environment"),
    ("<permissions instructions>", "environment"),
    ("<skills_instructions>", "environment"),
    ("<turn_aborted>", "interrupt"),
    ("<user_shell_command>", "command_output"),
    ("<user_action>", "review"),
    ("Another language model started to solve this problem and produced a summary", "compact_summary"),
    ("You are performing a CONTEXT CHECKPOINT COMPACTION", "compact_instruction"),
)

#: How the runtime's own failures of a tool call begin when they carry no exit code
#: (compared without case): a sandbox denial, a rejection by the user, a patch that did not
#: apply or parse, arguments that did not parse, a call that was cut off.
FAILURES = ("exec command rejected", "patch rejected", "failed in sandbox", "sandbox denied", "execution error:",
            "retry failed:", "apply_patch verification failed", "failed to parse function arguments",
            "unsupported call", "unsupported custom tool call", "exec_command failed", "write_stdin failed",
            "command timed out")


def user_kind(role: object, text: str | None) -> str | None:
    """The ``kind`` of a user (or developer) message Codex wrote itself; None for text a
    human typed."""
    if role not in ("user", None):
        return "developer"
    if text is None:
        return None
    head = text.lstrip()[:100].lower()
    for prefix, kind in KINDS:
        if head.startswith(prefix.lower()):
            return kind
    return None


def exit_code(output: object) -> int | None:
    """The exit code a tool output reports: JSON ``{"metadata": {"exit_code"}}`` (0.40, and
    apply_patch in 0.66), text starting ``Exit code: N`` (0.66+), or a ``Process exited with
    code N`` line in the header of a unified exec output; None if none of these."""
    if isinstance(output, dict):
        meta = output.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    if not isinstance(output, str):
        return None
    if output.startswith("{"):
        try:
            data = json.loads(output)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return exit_code(data)
    m = re.match(r"Exit code: (-?\d+)", output)
    if m:
        return int(m.group(1))
    header = output.split("\nOutput:", 1)[0][:2000]
    m = re.search(r"^Process exited with code (-?\d+)\s*$", header, re.M)
    return int(m.group(1)) if m else None


def failure(output: object) -> bool:
    """Whether a tool output without an exit code says the call failed: one of
    :data:`FAILURES`, the bare ``aborted`` of a call cut off, or an object with
    ``"success": false``."""
    if isinstance(output, dict):
        return output.get("success") is False
    if not isinstance(output, str):
        return False
    head = output.lstrip()[:100].lower()
    return head.rstrip(". \n") == "aborted" or head.startswith(FAILURES)


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _first(lines: list[tuple[int, dict]]) -> dict | None:
    """The first line's ``session_meta`` payload, if it is one (Codex writes it first; a
    later one, of a resumed session, is an event)."""
    if not lines:
        return None
    d = lines[0][1]
    p = d.get("payload")
    return p if d.get("type") == "session_meta" and isinstance(p, dict) else None


def _session_id(lines: list[tuple[int, dict]], path: str, stream: bool) -> str:
    p = _first(lines)
    if p is not None and isinstance(p.get("id"), str) and p["id"]:
        return p["id"]
    if stream:
        raise InvalidJSONL(path, 0, "no session_meta line names the session, and a pipe has no file name to "
                                    "take it from (Codex names its files rollout-DATE-ID.jsonl): import the file")
    m = _UUID.findall(os.path.basename(path))
    return m[-1] if m else os.path.splitext(os.path.basename(path))[0]


def _meta(lines: list[tuple[int, dict]], path: str, stream: bool) -> dict:
    """The meta the first line gives (a later line's facts are ``session/info`` events)."""
    meta: dict = {"source": "codex"}
    if not stream:
        meta["source_file"] = os.path.abspath(path)
    p = _first(lines)
    if p is None:
        return meta
    for k in ("cwd", "originator", "cli_version", "model_provider"):
        if isinstance(p.get(k), str):
            meta["version" if k == "cli_version" else k] = p[k]
    if p.get("source") is not None:
        meta["agent_source"] = p["source"]
    git = p.get("git")
    if isinstance(git, dict):
        for k, name in (("branch", "git_branch"), ("commit_hash", "git_commit"),
                        ("repository_url", "git_repository")):
            if isinstance(git.get(k), str):
                meta[name] = git[k]
    return meta


_TOTAL_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def _call(t: object, p: dict) -> tuple[dict, dict]:
    """A call item as a chat tool call, and what the call did not use of the item."""
    if t == "function_call":
        args = p.get("arguments")
        call = {"id": p.get("call_id"), "type": "function",
                "function": {"name": p.get("name"), "arguments": args if isinstance(args, str) else json.dumps(args)}}
        rest = without(p, ("type", "name", "arguments", "call_id"))
    elif t == "custom_tool_call":
        call = {"id": p.get("call_id"), "type": "function",
                "function": {"name": p.get("name"),
                             "arguments": json.dumps({"input": p.get("input")}, ensure_ascii=False)}}
        rest = without(p, ("type", "name", "input", "call_id"))
        rest["custom"] = True
    else:  # local_shell_call
        call = {"id": p.get("call_id"), "type": "function",
                "function": {"name": "local_shell", "arguments": json.dumps(p.get("action"), ensure_ascii=False)}}
        rest = without(p, ("type", "action", "call_id"))
    return call, {"type": t, **rest}


class _Converter:
    def __init__(self, sid: str, meta: dict):
        self.conv = Converted(sid, meta)
        self.events = self.conv.events
        self.turn = 0
        self.step = 0
        self.turn_open = False
        self.step_open = False
        self.calls = 0  # tool calls of the open step
        self.model: str | None = None  # the model of the latest turn_context
        self.totals: dict | None = None
        self.ts = 0.0
        # The model response being written: its message_id (the key of its first line),
        # and whether its assistant/message is written yet (the later items are parts).
        self.response: str | None = None
        self.response_message = False
        # A prompt item whose event_msg user_message (its repetition) has not come yet; the
        # text of a prompt made from an event_msg whose item (if any) has not come yet. The
        # model's first output after a prompt ends the wait for either.
        self.prompt_item = False
        self.prompt_event: str | None = None
        self.failed: set[str] = set()  # call ids whose end event said they failed
        self.unanswered: list[str] = []  # ids of calls without a result yet
        self.ended: str | None = None  # the last "ended" said in a session/info
        self.aborted: tuple[object, float, str] | None = None  # an aborted turn's (reason, ts, key)

    def emit(self, type_: str, payload: dict, key: str, ts: float | None = None) -> None:
        payload["event_id"] = key
        self.events.append((type_, payload, self.ts if ts is None else ts))

    def info(self, key: str, **facts) -> None:
        self.emit("session/info", {"info": facts}, f"{key}:info")

    def end_response(self) -> None:
        self.response = None
        self.response_message = False

    def close_step(self, key: str) -> None:
        if self.step_open:
            self.emit("step/end", {"step": self.step, "tool_calls": self.calls}, f"{key}:step-end")
            self.step_open = False

    def close_turn(self, key: str) -> None:
        self.close_step(key)
        if self.turn_open:
            if self.aborted is not None:
                reason, ts, at = self.aborted
                self.emit("turn/end", {"turn": self.turn, "aborted": reason}, f"{at}:turn-end", ts)
            else:
                self.emit("turn/end", {"turn": self.turn}, f"{key}:turn-end")
            self.turn_open = False
        self.aborted = None

    def answer_left_calls(self, key: str) -> None:
        """Before user text: the calls left without a result (a turn cut off) are answered
        ``aborted``, as Codex answers them in the model's next request."""
        for call_id in self.unanswered:
            self.emit("tool/result", {"tool_call_id": call_id, "content": "aborted", "is_error": True,
                                      "synthetic": True}, f"{key}:{call_id}")
        self.unanswered = []

    def open_turn(self, key: str) -> None:
        self.end_response()
        self.answer_left_calls(key)
        self.close_turn(key)
        if self.ended is not None:  # the session goes on
            self.ended = None
            self.info(key, ended=None)
        self.turn += 1
        self.step = 0
        self.turn_open = True
        self.emit("turn/start", {"turn": self.turn}, f"{key}:turn-start")

    def assistant(self, key: str, fields: dict) -> None:
        """One text or call of the model response being written: its ``assistant/message``
        (the first), or an ``assistant/part`` of it."""
        self.prompt_item, self.prompt_event = False, None
        if self.response is None:
            self.response = key
        if self.response_message:
            self.emit("assistant/part", {"message_id": self.response, **fields}, key)
            return
        self.response_message = True
        payload = {"content": fields.pop("content", "")}
        payload.update(fields)
        if self.model is not None:
            payload["model"] = self.model
        payload["message_id"] = self.response
        self.emit("assistant/message", payload, key)

    def line(self, no: int, d: dict) -> None:
        ts = parse_ts(d.get("timestamp"))
        if ts is not None:
            self.ts = ts
        t = d.get("type")
        p = d.get("payload") if isinstance(d.get("payload"), dict) else None
        pt = p.get("type") if p is not None else None
        key = f"L{no}"
        rest_line = without(d, ("timestamp", "type", "payload"))
        if t == "response_item" and p is not None:
            self.response_item(key, pt, p, rest_line)
        elif t == "turn_context" and p is not None:
            self.end_response()
            self.close_step(key)
            self.step += 1
            self.calls = 0
            self.step_open = True
            self.emit("step/start", {"step": self.step}, f"{key}:step-start")
            if isinstance(p.get("model"), str) and p["model"] != self.model:
                self.model = p["model"]
                self.info(key, model=self.model)
            self.emit("codex/turn_context", {"source": {**p, **rest_line}}, key)
        elif t == "compacted" and p is not None:
            self.compacted(key, p, rest_line)
        elif t == "event_msg" and p is not None:
            self.event_msg(key, pt, p, rest_line)
        else:
            name = t if isinstance(t, str) and t and "/" not in t else "unknown"
            src = {**p, **rest_line} if p is not None else without(d, ("timestamp", "type"))
            self.emit(f"codex/{name}", {"source": src}, key)

    def event_msg(self, key: str, pt: object, p: dict, rest_line: dict) -> None:
        if pt == "token_count":
            self.token_count(key, p, rest_line)
            return
        if pt == "user_message":
            self.user_message_event(key, p, rest_line)
            return
        if pt in ("exec_command_end", "patch_apply_end", "mcp_tool_call_end") and isinstance(p.get("call_id"), str):
            self.note_end(pt, p)
        self.emit(f"codex/{pt}" if isinstance(pt, str) and pt and "/" not in pt else "codex/event_msg",
                  {"source": {**without(p, ("type",)), **rest_line}}, key)
        if pt == "thread_name_updated" and isinstance(p.get("thread_name"), str) and p["thread_name"].strip():
            self.info(key, title=p["thread_name"].strip())
        if pt in ("turn_aborted", "task_complete"):
            self.end_response()
            if pt == "task_complete":
                self.close_turn(key)
            else:  # the turn stays open until the next prompt (see the module's docstring)
                self.close_step(key)
                if self.turn_open:
                    self.aborted = (p.get("reason", True), self.ts, key)
            ended = "interrupted" if pt == "turn_aborted" else "complete"
            if ended != self.ended:
                self.ended = ended
                self.info(key, ended=ended)

    def note_end(self, pt: object, p: dict) -> None:
        """Remember a call that its end event says failed (the output comes after it)."""
        if pt == "exec_command_end":
            code = p.get("exit_code")
            bad = isinstance(code, int) and not isinstance(code, bool) and code != 0
        elif pt == "patch_apply_end":
            bad = p.get("success") is False
        else:
            result = p.get("result")  # a Rust Result: {"Ok": {"content", "is_error"}} or {"Err": text}
            ok = result.get("Ok") if isinstance(result, dict) else None
            bad = isinstance(result, dict) and "Err" in result or isinstance(ok, dict) and ok.get("is_error") is True
        if bad:
            self.failed.add(p["call_id"])

    def user_message_event(self, key: str, p: dict, rest_line: dict) -> None:
        src = {**without(p, ("type",)), **rest_line}
        if self.prompt_item:  # the repetition of the prompt item just written
            self.prompt_item = False
            self.emit("codex/user_message", {"source": src}, key)
            return
        text = p.get("message") if isinstance(p.get("message"), str) else None
        kind = user_kind("user", text)
        self.answer_left_calls(key)
        if kind is None:
            self.open_turn(key)
            self.prompt_event = text or ""
        payload: dict = {"content": text if text is not None else ""}
        if kind is not None:
            payload["kind"] = kind
        payload["source"] = {"type": "user_message", **without(src, ("message",) if text is not None else ())}
        self.emit("user/message", payload, key)

    def response_item(self, key: str, pt: object, p: dict, rest_line: dict) -> None:
        if pt in CALL_TYPES:
            call, rest = _call(pt, {**p, **rest_line})
            self.calls += 1
            if isinstance(call["id"], str):
                self.unanswered.append(call["id"])
            self.assistant(key, {"tool_calls": [call], "source": rest})
            return
        if pt in _INPUT_ITEMS:
            self.end_response()
        if pt in OUTPUT_TYPES:
            self.tool_result(key, pt, p, rest_line)
            return
        if pt == "message":
            self.message(key, p, rest_line)
            return
        if pt == "reasoning":
            self.prompt_item, self.prompt_event = False, None
            if self.response is None:
                self.response = key
            summary = p.get("summary")
            texts = [s.get("text") for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)] \
                if isinstance(summary, list) else []
            self.emit("assistant/thinking", {"thinking": "\n\n".join(texts), "message_id": self.response,
                                             "source": {**without(p, ("type",)), **rest_line}}, key)
            return
        name = pt if isinstance(pt, str) and pt and "/" not in pt else "response_item"
        self.emit(f"codex/{name}", {"source": {**without(p, ("type",)), **rest_line}}, key)

    def tool_result(self, key: str, pt: object, p: dict, rest_line: dict) -> None:
        out = p.get("output")
        code = exit_code(out)
        call_id = p.get("call_id")
        told = call_id in self.failed
        self.failed.discard(call_id)
        if call_id in self.unanswered:
            self.unanswered.remove(call_id)
        payload = {"tool_call_id": call_id, "content": out if out is not None else "",
                   "is_error": code != 0 if code is not None else (told or failure(out))}
        rest = {**without(p, ("type", "call_id", "output")), **rest_line}
        if pt != "function_call_output":
            rest["type"] = pt
        if code is not None:
            payload["exit_code"] = code
        if rest:
            payload["source"] = rest
        self.emit("tool/result", payload, key)

    def message(self, key: str, p: dict, rest_line: dict) -> None:
        role = p.get("role")
        content = p.get("content")
        text = _text(content)
        rest = {**without(p, ("type", "role", "content")), **rest_line}
        if text is None or not (isinstance(content, list) and all(
                isinstance(b, dict) and set(b) <= {"type", "text"} for b in content)):
            rest["content"] = content
        if role == "assistant":
            fields: dict = {"content": text if text is not None else content}
            if rest:
                fields["source"] = rest
            self.assistant(key, fields)
            return
        self.end_response()
        kind = user_kind(role, text)
        if kind is None and self.prompt_event is not None and (text or "").strip() == self.prompt_event.strip():
            # The item of a prompt already made from its event_msg (written the other way round).
            self.prompt_event = None
            self.emit("codex/message", {"source": {**without(p, ("type",)), **rest_line}}, key)
            return
        self.answer_left_calls(key)
        if kind is None:
            self.open_turn(key)
            self.prompt_item = True
        payload: dict = {"content": text if text is not None else content}
        if kind is not None:
            payload["kind"] = kind
        if role not in ("user", "assistant"):
            rest["role"] = role
        if rest:
            payload["source"] = rest
        self.emit("user/message", payload, key)

    def compacted(self, key: str, p: dict, rest_line: dict) -> None:
        """The model's history was replaced here: a boundary, then what replaced it."""
        self.end_response()
        history = p.get("replacement_history")
        src = {**without(p, ("replacement_history",)), **rest_line}
        if isinstance(history, list):
            src["replacement_items"] = len(history)
        self.emit("compaction/boundary", {"reason": "compaction", "source": src}, key)
        if not isinstance(history, list):
            summary = p.get("message")
            if isinstance(summary, str) and summary:
                self.emit("user/message", {"content": summary, "kind": "compact_summary"}, f"{key}#summary")
            return
        for i, item in enumerate(history):
            k = f"{key}#{i}"
            if not isinstance(item, dict) or item.get("type") != "message":
                self.emit("codex/replacement_item", {"source": item}, k)
                continue
            role, content = item.get("role"), item.get("content")
            text = _text(content)
            rest = without(item, ("type", "role", "content"))
            if text is None or not (isinstance(content, list) and all(
                    isinstance(b, dict) and set(b) <= {"type", "text"} for b in content)):
                rest["content"] = content
            payload: dict = {"content": text if text is not None else content}
            if role == "assistant":
                type_ = "assistant/message"
            else:
                type_ = "user/message"
                payload["kind"] = user_kind(role, text) or "compact_history"
                if role != "user":
                    rest["role"] = role
            if rest:
                payload["source"] = rest
            self.emit(type_, payload, k)

    def token_count(self, key: str, p: dict, rest_line: dict) -> None:
        payload: dict = {}
        info = p.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            before = self.totals or dict.fromkeys(_TOTAL_KEYS, 0)
            # a counter this line does not give keeps its value (it did not start again)
            now = {k: v if isinstance(v := total.get(k), int) and not isinstance(v, bool) else before[k]
                   for k in _TOTAL_KEYS}
            if any(now[k] < before[k] for k in _TOTAL_KEYS):
                before = dict.fromkeys(_TOTAL_KEYS, 0)  # the counter started again from zero
                payload["counter_restart"] = True
            delta = {k: now[k] - before[k] for k in _TOTAL_KEYS}
            self.totals = now
            if any(delta.values()):
                payload["usage"] = {
                    "turn": self.turn, "step": self.step, "model": self.model,
                    "input_tokens": delta["input_tokens"] - delta["cached_input_tokens"],
                    "output_tokens": delta["output_tokens"],
                    "cache_read_tokens": delta["cached_input_tokens"],
                    "cache_creation_tokens": 0,
                    "reasoning_tokens": delta["reasoning_output_tokens"],
                }
        payload["source"] = {**without(p, ("type",)), **rest_line}
        self.emit("codex/token_count", payload, key)


def convert(lines: list[tuple[int, dict]], path: str, stream: bool = False) -> list[Converted]:
    """Convert the parsed lines of one rollout file into its session (a list of one).
    ``stream``: the lines came from a pipe or stdin, whose ``path`` (``/dev/fd/63``, ``-``)
    is no file to record as ``source_file`` or to take a session id from.

    The session's id and meta come from the first line alone and each line's events from
    it and the lines before it, so a prefix of a file converts to a prefix of the file's
    events (and nothing is ``held``).
    """
    if not lines:
        return []
    c = _Converter(_session_id(lines, path, stream), _meta(lines, path, stream))
    for no, d in lines:
        c.line(no, d)
    return [c.conv]


# --- registration (eventstore.io.transcripts) -----------------------------------------------

_LINE_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}


def looks_like(d: dict) -> bool:
    """Whether one parsed line of a file's head is a Codex rollout's: ``{timestamp, type,
    payload}`` of its types."""
    return d.get("type") in _LINE_TYPES and "payload" in d


register(TranscriptFormat("codex", looks_like, convert))
