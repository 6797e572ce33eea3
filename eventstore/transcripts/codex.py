"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as sessions.

The mapping (docs/import-export.md, "Agents' transcripts", has the table):

* ``session_meta`` and the first ``turn_context`` give the session's meta (cwd, git,
  version, model); both stay events of their own (``codex/session_meta``,
  ``codex/turn_context``);
* a user ``message`` item opens a turn (``turn/start``, ``user/message``); the injected
  ``<environment_context>``/``<user_instructions>`` messages are ``user/message`` with
  ``kind: "context"``, ``developer`` messages with ``kind: "developer"``;
* each ``turn_context`` (written before every model call) opens a step;
  ``turn_aborted`` and ``task_complete`` end the turn;
* ``function_call``, ``custom_tool_call`` and ``local_shell_call`` items written one after
  the other are one ``assistant/message`` with chat ``tool_calls``; an assistant text
  ``message`` is an ``assistant/message``; ``reasoning`` is ``assistant/thinking``;
* ``function_call_output``/``custom_tool_call_output`` are ``tool/result`` (``is_error``
  when the exit code is not 0);
* ``token_count`` is ``codex/token_count`` carrying ``usage``: the difference between its
  cumulative totals and the previous ones (repeated totals carry none);
* every other line is an event ``codex/<type>`` of its own; each event keeps what the
  mapping did not use of its line in ``source``.
"""

from __future__ import annotations

import json
import os
import re

from ..errors import InvalidJSONL
from .common import Converted, parse_ts, without

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
INJECTED = ("<environment_context>", "<user_instructions>", "<user-instructions>", "# AGENTS.md")
# Lines that may sit inside one model response without ending its run of tool calls.
_INSIDE_RESPONSE = {("response_item", t) for t in CALL_TYPES} | {("event_msg", "agent_reasoning")}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def exit_code(output: object) -> int | None:
    """The exit code a tool output reports: JSON ``{"metadata": {"exit_code"}}`` (0.40, and
    apply_patch in 0.66) or text starting ``Exit code: N`` (0.66+); None if neither."""
    if isinstance(output, dict):
        meta = output.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return code if isinstance(code, int) else None
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
    return int(m.group(1)) if m else None


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _session_id(lines: list[tuple[int, dict]], path: str, stream: bool) -> str:
    for _no, d in lines:
        p = d.get("payload")
        if d.get("type") == "session_meta" and isinstance(p, dict) and isinstance(p.get("id"), str) and p["id"]:
            return p["id"]
    if stream:
        raise InvalidJSONL(path, 0, "no session_meta line names the session, and a pipe has no file name to "
                                    "take it from (Codex names its files rollout-DATE-ID.jsonl): import the file")
    m = _UUID.findall(os.path.basename(path))
    return m[-1] if m else os.path.splitext(os.path.basename(path))[0]


def _meta(lines: list[tuple[int, dict]], path: str, stream: bool) -> dict:
    meta: dict = {"source": "codex"}
    if not stream:
        meta["source_file"] = os.path.abspath(path)
    for _no, d in lines:
        p = d.get("payload")
        if not isinstance(p, dict):
            continue
        if d.get("type") == "session_meta" and "cwd" not in meta:
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
        elif d.get("type") == "turn_context" and "model" not in meta and isinstance(p.get("model"), str):
            meta["model"] = p["model"]
    return meta


_TOTAL_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


class _Converter:
    def __init__(self, sid: str, meta: dict):
        self.conv = Converted(sid, meta)
        self.events = self.conv.events
        self.turn = 0
        self.step = 0
        self.turn_open = False
        self.step_open = False
        self.calls = 0
        self.model = meta.get("model")
        self.totals: dict | None = None
        self.pending: list[tuple[int, dict, float]] = []  # a run of tool calls: (line number, payload, ts)
        self.ts = 0.0

    def emit(self, type_: str, payload: dict, key: str, ts: float | None = None) -> None:
        payload["event_id"] = key
        self.events.append((type_, payload, self.ts if ts is None else ts))

    def close_step(self, key: str) -> None:
        self.flush()
        if self.step_open:
            self.emit("step/end", {"step": self.step, "tool_calls": self.calls}, f"{key}:step-end")
            self.step_open = False

    def close_turn(self, key: str, extra: dict | None = None) -> None:
        self.close_step(key)
        if self.turn_open:
            self.emit("turn/end", {"turn": self.turn, **(extra or {})}, f"{key}:turn-end")
            self.turn_open = False

    def flush(self) -> None:
        """Write the pending run of tool calls as one assistant message."""
        if not self.pending:
            return
        calls, sources = [], []
        for _no, p, _ts in self.pending:
            t = p.get("type")
            if t == "function_call":
                args = p.get("arguments")
                calls.append({"id": p.get("call_id"), "type": "function",
                              "function": {"name": p.get("name"),
                                           "arguments": args if isinstance(args, str) else json.dumps(args)}})
                rest = without(p, ("type", "name", "arguments", "call_id"))
            elif t == "custom_tool_call":
                calls.append({"id": p.get("call_id"), "type": "function",
                              "function": {"name": p.get("name"),
                                           "arguments": json.dumps({"input": p.get("input")}, ensure_ascii=False)}})
                rest = without(p, ("type", "name", "input", "call_id"))
                rest["custom"] = True
            else:  # local_shell_call
                calls.append({"id": p.get("call_id"), "type": "function",
                              "function": {"name": "local_shell",
                                           "arguments": json.dumps(p.get("action"), ensure_ascii=False)}})
                rest = without(p, ("type", "action", "call_id"))
            sources.append({"type": t, **rest})
        payload = {"content": "", "tool_calls": calls}
        if self.model is not None:
            payload["model"] = self.model
        payload["source"] = sources[0] if len(sources) == 1 else sources
        no, _p, ts = self.pending[0]
        self.calls += len(calls)
        self.pending = []
        self.emit("assistant/message", payload, f"L{no}", ts)

    def line(self, no: int, d: dict) -> None:
        ts = parse_ts(d.get("timestamp"))
        if ts is not None:
            self.ts = ts
        t = d.get("type")
        p = d.get("payload") if isinstance(d.get("payload"), dict) else None
        pt = p.get("type") if p is not None else None
        key = f"L{no}"
        if (t, pt) not in _INSIDE_RESPONSE:
            self.flush()
        rest_line = without(d, ("timestamp", "type", "payload"))
        if t == "response_item" and p is not None:
            self.response_item(no, key, pt, p, rest_line)
            return
        if t == "turn_context" and p is not None:
            self.close_step(key)
            self.step += 1
            self.calls = 0
            self.step_open = True
            self.emit("step/start", {"step": self.step}, f"{key}:step-start")
            if isinstance(p.get("model"), str):
                self.model = p["model"]
            self.emit("codex/turn_context", {"source": {**p, **rest_line}}, key)
            return
        if t == "event_msg" and p is not None:
            if pt == "token_count":
                self.token_count(key, p, rest_line)
                return
            self.emit(f"codex/{pt}" if isinstance(pt, str) and pt else "codex/event_msg",
                      {"source": {**without(p, ("type",)), **rest_line}}, key)
            if pt in ("turn_aborted", "task_complete"):
                extra = {"aborted": p.get("reason", True)} if pt == "turn_aborted" else {}
                self.close_turn(key, extra)
            return
        name = t if isinstance(t, str) and t and "/" not in t else "unknown"
        src = {**p, **rest_line} if p is not None else {k: v for k, v in d.items() if k not in ("timestamp", "type")}
        self.emit(f"codex/{name}", {"source": src}, key)

    def response_item(self, no: int, key: str, pt: object, p: dict, rest_line: dict) -> None:
        if pt in CALL_TYPES:
            self.pending.append((no, {**p, **rest_line}, self.ts))
            return
        if pt in OUTPUT_TYPES:
            out = p.get("output")
            code = exit_code(out)
            payload = {"tool_call_id": p.get("call_id"), "content": out if out is not None else "",
                       "is_error": code is not None and code != 0}
            rest = {**without(p, ("type", "call_id", "output")), **rest_line}
            if pt != "function_call_output":
                rest["type"] = pt
            if code is not None:
                payload["exit_code"] = code
            if rest:
                payload["source"] = rest
            self.emit("tool/result", payload, key)
            return
        if pt == "message":
            role = p.get("role")
            content = p.get("content")
            text = _text(content)
            rest = {**without(p, ("type", "role", "content")), **rest_line}
            if role == "assistant":
                payload = {"content": text if text is not None else content}
                if self.model is not None:
                    payload["model"] = self.model
            else:
                kind = None
                if role == "developer" or role == "system":
                    kind = "developer"
                elif text is not None and text.lstrip().startswith(INJECTED):
                    kind = "context"
                if kind is None:
                    self.close_turn(key)
                    self.turn += 1
                    self.step = 0
                    self.turn_open = True
                    self.emit("turn/start", {"turn": self.turn}, f"{key}:turn-start")
                payload = {"content": text if text is not None else content}
                if kind is not None:
                    payload["kind"] = kind
                if role not in ("user", "assistant"):
                    rest["role"] = role
            if text is None or not (isinstance(content, list) and all(
                    isinstance(b, dict) and set(b) <= {"type", "text"} for b in content)):
                rest["content"] = content
            if rest:
                payload["source"] = rest
            self.emit("assistant/message" if role == "assistant" else "user/message", payload, key)
            return
        if pt == "reasoning":
            summary = p.get("summary")
            texts = [s.get("text") for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)] \
                if isinstance(summary, list) else []
            self.emit("assistant/thinking", {"thinking": "\n\n".join(texts),
                                             "source": {**without(p, ("type",)), **rest_line}}, key)
            return
        name = pt if isinstance(pt, str) and pt and "/" not in pt else "response_item"
        self.emit(f"codex/{name}", {"source": {**without(p, ("type",)), **rest_line}}, key)

    def token_count(self, key: str, p: dict, rest_line: dict) -> None:
        payload: dict = {}
        info = p.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            now = {k: total.get(k) if isinstance(total.get(k), int) else 0 for k in _TOTAL_KEYS}
            before = self.totals or dict.fromkeys(_TOTAL_KEYS, 0)
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

    A run of tool calls at the end of the file is held for the next run (``held``): the
    calls of one model response are written one after the other, and the next line shows
    the run is over.
    """
    if not lines:
        return []
    c = _Converter(_session_id(lines, path, stream), _meta(lines, path, stream))
    for no, d in lines:
        c.line(no, d)
    c.conv.held = len(c.pending)
    return [c.conv]
