"""Claude Code transcripts (``~/.claude/projects/<cwd>/<session>.jsonl``) as sessions.

The mapping (docs/import-export.md, "Agents' transcripts", has the table):

* a human prompt (or a slash command) opens a turn: ``turn/start {"turn"}``, then
  ``user/message``; other user text (caveats, command output, interrupts, compact
  summaries) is a ``user/message`` with a ``kind`` and opens nothing;
* each API response is a step: ``step/start {"step"}``, one ``assistant/thinking`` per
  thinking block, one ``assistant/message`` (its text blocks joined, its ``tool_use``
  blocks as chat ``tool_calls``, ``model``, ``usage``), the lines that share its
  ``message.id`` merged in line order; ``step/end`` and ``turn/end`` are written when the
  file shows the step or turn is over (the next response or prompt, a ``turn_duration``);
* each ``tool_result`` block is a ``tool/result`` (``tool_call_id``, ``content``,
  ``is_error``);
* every other line (system notices, progress, snapshots, queue operations, titles, and
  types this module does not know) is an event ``claude/<type>`` of its own;
* each event keeps what the mapping did not use of its source line in ``source``.

The file is a tree (``parentUuid``). Branches that hold a human prompt are real forks (a
``/rewind`` or an edited prompt): the one holding the newest line is the session, the
others sessions of their own (``<id>:fork:<uuid>``) that name the parent session and the
seq where they fork. Branches without a prompt (parallel tool calls, hooks, progress) stay
in the conversation. Subagents (inline ``isSidechain`` lines, or ``agent-*.jsonl`` files)
are sessions of their own as well.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .common import Converted, parse_ts, without

NOT_A_PROMPT = ("Caveat:", "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>")
INTERRUPT = "[Request interrupted by user"
#: The keys of a line that go into the session's meta (an event keeps them only where they differ).
META_KEYS = {"sessionId": "source_session_id", "cwd": "cwd", "gitBranch": "git_branch", "version": "version"}
_UUID_KEY = re.compile(r"^[0-9A-Za-z-]{8,}")

#: The known line types that sit in the tree and carry a conversation.
_MESSAGE_TYPES = ("user", "assistant")


@dataclass
class _Branch:
    """The lines of one session of a file (indexes into the file's lines)."""

    session_id: str
    meta: dict
    members: list[int] = field(default_factory=list)
    parent: int | None = None  # index of the parent branch
    fork_node: int | None = None  # the line this branch forks from


def _text_of(content: object) -> str | None:
    """The text of a user message's content, or None if it holds no text block."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str)) if texts else None
    return None


def user_kind(line: dict) -> str | None:
    """What a user line's text is: None for a human prompt, else ``command``, ``meta``,
    ``command_output``, ``interrupt``, ``compact_summary`` (or ``tool_result`` when it holds
    only tool results)."""
    msg = line.get("message") if isinstance(line.get("message"), dict) else {}
    text = _text_of(msg.get("content"))
    if text is None:
        return "tool_result"
    if line.get("isCompactSummary"):
        return "compact_summary"
    if line.get("isMeta"):
        return "meta"
    stripped = text.lstrip()
    if stripped.startswith(INTERRUPT):
        return "interrupt"
    if stripped.startswith(NOT_A_PROMPT):
        return "command_output" if stripped.startswith(("<local-command-stdout>", "<local-command-stderr>")) else "meta"
    if "<command-name>" in stripped:
        return "command"
    return None


def _opens_turn(line: dict) -> bool:
    return line.get("type") == "user" and user_kind(line) in (None, "command")


def convert(lines: list[tuple[int, dict]], path: str,
            stored_uuid: Callable[[str], str | None] | None = None, stream: bool = False) -> list[Converted]:
    """Convert the parsed lines of one Claude Code file into sessions (main session first).
    ``stream``: the lines came from a pipe or stdin, whose ``path`` (``/dev/fd/63``, ``-``)
    is no file to record as ``source_file``.

    ``stored_uuid(session_id)`` returns the uuid of the newest source line already stored
    in that session (None if none): at a fork, the branch holding it stays the session, so
    a re-import continues what is stored even when a ``/rewind`` came after it.
    """
    data = [obj for _no, obj in lines]
    numbers = [no for no, _obj in lines]
    base = _session_id(data)
    if base is None:  # no conversation line yet (an empty file, snapshots only): wait for one
        return []
    agent_id = next((d["agentId"] for d in data if isinstance(d.get("agentId"), str)), None)
    tree_lines = [i for i, d in enumerate(data) if isinstance(d.get("uuid"), str) and d["uuid"]]
    is_agent_file = agent_id is not None and bool(tree_lines) and all(
        data[i].get("agentId") == agent_id for i in tree_lines)
    meta = _meta(data, path, stream)
    if is_agent_file:
        main_id = f"{base}:agent:{agent_id}"
        meta = {**meta, "relation": "subagent", "parent_session": base, "agent_id": agent_id}
    else:
        main_id = base

    by_uuid: dict[str, int] = {}
    for i in tree_lines:
        by_uuid.setdefault(data[i]["uuid"], i)
    tree = {i for i in by_uuid.values()}
    parent: dict[int, int | None] = {}
    for i in tree:
        d = data[i]
        p = d.get("parentUuid") or d.get("logicalParentUuid")
        parent[i] = by_uuid.get(p) if isinstance(p, str) else None
        if parent[i] is not None and parent[i] == i:
            parent[i] = None

    def sidechain(i: int) -> bool:
        return bool(data[i].get("isSidechain")) and not is_agent_file

    children: dict[int | None, list[int]] = {}
    roots_side: list[int] = []
    for i in sorted(tree):
        p = parent[i]
        if p is not None and sidechain(p) != sidechain(i):
            p = None
        if p is None and sidechain(i):
            roots_side.append(i)
            continue
        children.setdefault(p, []).append(i)

    # Bottom-up facts of every subtree: holds a prompt, its newest line, holds a stored line.
    prompt_sub: dict[int, bool] = {}
    newest_sub: dict[int, tuple] = {}
    order = _post_order(children, [None] + roots_side)
    for i in order:
        if i is None:
            continue
        kids = children.get(i, [])
        prompt_sub[i] = _opens_turn(data[i]) or any(prompt_sub[k] for k in kids)
        own = (str(data[i].get("timestamp") or ""), i)
        newest_sub[i] = max([own] + [newest_sub[k] for k in kids])

    branches: list[_Branch] = [_Branch(main_id, meta)]
    for r in roots_side:
        branches.append(_Branch(f"{base}:sidechain:{data[r]['uuid']}",
                                {**meta, "relation": "subagent", "parent_session": main_id,
                                 "parent_uuid": data[r]["uuid"]}))

    def hint_line(sid: str) -> int | None:
        u = stored_uuid(sid) if stored_uuid is not None else None
        return by_uuid.get(u) if u else None

    def holds(sub: int, line: int | None) -> bool:
        seen = set()
        while line is not None and line not in seen:  # (a malformed file can loop)
            if line == sub:
                return True
            seen.add(line)
            line = parent.get(line)
        return False

    # Walk each tree from its root: a node's children that hold a prompt are forks when
    # there are two or more; the others (tool results, hooks, progress) stay in the branch.
    starts: list[tuple[int, int | None]] = [(0, None)] + [(k + 1, r) for k, r in enumerate(roots_side)]
    for b_index, root in starts:
        stack: list[tuple[int, int | None]] = [(b_index, root)]
        hints = {b_index: hint_line(branches[b_index].session_id)}
        while stack:
            b, node = stack.pop()
            if node is not None:
                branches[b].members.append(node)
            kids = children.get(node, []) if node is not None or b == 0 else []
            prompt_kids = [k for k in kids if prompt_sub[k]]
            plain = [k for k in kids if not prompt_sub[k]]
            if len(prompt_kids) > 1:
                h = hints.get(b)
                keep = next((k for k in prompt_kids if holds(k, h)), None)
                if keep is None:
                    keep = max(prompt_kids, key=lambda k: newest_sub[k])
                for k in prompt_kids:
                    if k == keep:
                        continue
                    fid = f"{base}:fork:{data[k]['uuid']}"
                    branches.append(_Branch(fid, {**meta, "relation": "fork",
                                                   "parent_session": branches[b].session_id},
                                            parent=b, fork_node=node))
                    nb = len(branches) - 1
                    hints[nb] = hint_line(fid)
                    stack.append((nb, k))
                plain.append(keep)
            else:
                plain.extend(prompt_kids)
            for k in sorted(plain, reverse=True):
                stack.append((b, k))

    # Lines outside the tree (titles, snapshots, queue operations, unknown types) and
    # duplicated uuids go to the main session, in file order; a title naming a leaf goes
    # with that leaf's session, after it.
    branch_of: dict[int, int] = {}
    for b, br in enumerate(branches):
        for i in br.members:
            branch_of[i] = b
    extra: dict[int, list[tuple[float, int]]] = {}
    for i, d in enumerate(data):
        if i in branch_of:
            continue  # (a line of a parentUuid loop, which no root reaches, goes to the main session)
        if d.get("type") == "summary":
            leaf = by_uuid.get(d.get("leafUuid")) if isinstance(d.get("leafUuid"), str) else None
            if leaf is None:
                continue  # names a conversation of another file
            extra.setdefault(branch_of.get(leaf, 0), []).append((max(i, leaf) + 0.5, i))
        else:
            extra.setdefault(0, []).append((i, i))

    out = []
    for b, br in enumerate(branches):
        keyed = [(float(i), i) for i in br.members] + extra.get(b, [])
        keyed.sort()
        out.append(_Emitter(br, data, numbers, meta, tree).run([i for _k, i in keyed]))
    # Name where each fork leaves its parent: the parent's seq of the event of the fork node
    # (or of the last event before it on the way up).
    for b, br in enumerate(branches):
        conv = out[b].converted
        if br.parent is not None and br.fork_node is not None:
            seq = out[br.parent].source_seq(br.fork_node, parent)
            conv.meta = {**conv.meta, "parent_uuid": data[br.fork_node]["uuid"]}
            if seq is not None:
                conv.meta["parent_seq"] = seq
    for b, br in enumerate(branches):
        if br.session_id.startswith(f"{base}:sidechain:"):
            prompt = _text_of((data[br.members[0]].get("message") or {}).get("content")) if br.members else None
            found = out[0].task_call(prompt)
            if found is not None:
                conv = out[b].converted
                conv.meta = {**conv.meta, "parent_seq": found[0], "tool_call_id": found[1]}
    return [o.converted for o in out]


def _post_order(children: dict, roots: list) -> list:
    """Nodes in post order (children before parents), without recursion."""
    out = []
    stack = [(r, False) for r in roots]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        stack.append((node, True))
        for k in children.get(node, []):
            stack.append((k, False))
    return out


def _session_id(data: list[dict]) -> str | None:
    for d in data:
        if isinstance(d.get("sessionId"), str) and d["sessionId"]:
            return d["sessionId"]
    return None


def _meta(data: list[dict], path: str, stream: bool) -> dict:
    meta: dict = {"source": "claude-code"}
    if not stream:
        meta["source_file"] = os.path.abspath(path)
    for d in data:
        if not isinstance(d.get("uuid"), str):
            continue
        for k, name in META_KEYS.items():
            if name not in meta and isinstance(d.get(k), str) and d[k]:
                meta[name] = d[k]
        msg = d.get("message")
        if "model" not in meta and d.get("type") == "assistant" and isinstance(msg, dict):
            m = msg.get("model")
            if isinstance(m, str) and m and m != "<synthetic>":
                meta["model"] = m
    return meta


def _usage(raw: object, model: object, turn: int, step: int) -> dict | None:
    if not isinstance(raw, dict):
        return None

    def n(key: str) -> int:
        v = raw.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    return {"turn": turn, "step": step, "model": model if isinstance(model, str) else None,
            "input_tokens": n("input_tokens"), "output_tokens": n("output_tokens"),
            "cache_read_tokens": n("cache_read_input_tokens"),
            "cache_creation_tokens": n("cache_creation_input_tokens")}


class _Emitter:
    """Turns one branch's lines (file order) into events, with turn and step boundaries."""

    def __init__(self, branch: _Branch, data: list[dict], numbers: list[int], meta: dict, tree: set[int]):
        self.b = branch
        self.tree = tree  # the lines keyed by their uuid (a repeated uuid's later lines are not)
        self.data = data
        self.numbers = numbers
        self.meta_values = {k: meta.get(name) for k, name in META_KEYS.items()}
        self.events: list[tuple[str, dict, float]] = []
        self.sources: list[int] = []  # the source line of each event
        self.turn = 0
        self.step = 0
        self.step_open = False
        self.turn_open = False
        self.calls = 0
        self.unanswered: dict[str, None] = {}  # tool call ids of the last response without a result yet
        self.ts = 0.0
        self.converted = Converted(branch.session_id, branch.meta)

    # --- helpers ------------------------------------------------------------------------

    def _key(self, i: int) -> str:
        return self.data[i]["uuid"] if i in self.tree else f"L{self.numbers[i]}"

    def _emit(self, type_: str, payload: dict, i: int, ts: float | None = None) -> None:
        self.events.append((type_, payload, self.ts if ts is None else ts))
        self.sources.append(i)

    def _source(self, d: dict, used: tuple[str, ...]) -> dict:
        return {k: v for k, v in d.items()
                if k not in used and not (k in self.meta_values and v == self.meta_values[k])}

    def _close_step(self, key: str, i: int) -> None:
        if self.step_open:
            self._emit("step/end", {"step": self.step, "tool_calls": self.calls, "event_id": f"{key}:step-end"}, i)
            self.step_open = False

    def _close_turn(self, key: str, i: int, extra: dict | None = None) -> None:
        self._close_step(key, i)
        if self.turn_open:
            self._emit("turn/end", {"turn": self.turn, **(extra or {}), "event_id": f"{key}:turn-end"}, i)
            self.turn_open = False

    # --- the run ---------------------------------------------------------------------

    def run(self, order: list[int]) -> _Emitter:
        data = self.data
        # Group the assistant lines of one API response (same message.id) at the first one.
        group_of: dict[str, list[int]] = {}
        items: list[tuple[str, object]] = []
        for i in order:
            d = data[i]
            msg = d.get("message")
            if d.get("type") == "assistant" and isinstance(msg, dict):
                mid = msg.get("id")
                if isinstance(mid, str) and mid in group_of:
                    group_of[mid].append(i)
                    continue
                g = [i]
                if isinstance(mid, str):
                    group_of[mid] = g
                items.append(("group", g))
            else:
                items.append(("line", i))
        position = {i: k for k, i in enumerate(order)}
        for kind, item in items:
            if kind == "group" and not self._complete(item, order, position):
                self.converted.held = len(order) - position[item[0]]
                break
            if kind == "group":
                self._group(item)
            else:
                self._line(item)
        self.converted.events = self.events
        return self

    def _complete(self, group: list[int], order: list[int], position: dict[int, int]) -> bool:
        """An API response is complete when one of its lines has a stop_reason, or when a
        later line of the branch other than a progress line shows that it went on."""
        for i in group:
            msg = self.data[i].get("message") or {}
            if msg.get("stop_reason") is not None:
                return True
        members = set(group)
        for i in order[position[group[-1]] + 1:]:
            if i not in members and self.data[i].get("type") != "progress":
                return True
        return False

    def _line(self, i: int) -> None:
        d = self.data[i]
        ts = parse_ts(d.get("timestamp"))
        if ts is None and not self.ts and isinstance(d.get("snapshot"), dict):
            ts = parse_ts(d["snapshot"].get("timestamp"))  # only before any line with a time
        if ts is not None:
            self.ts = ts
        t = d.get("type")
        key = self._key(i)
        msg = d.get("message")
        if t == "user" and isinstance(msg, dict):
            self._user(i, d, msg, key)
            return
        if t == "summary":
            key = f"L{self.numbers[i]}"
        type_ = f"claude/{t}" if isinstance(t, str) and t and "/" not in t else "claude/unknown"
        payload = {"source": self._source(d, ("timestamp",) if t == "summary" else ("type", "timestamp")),
                   "event_id": key}
        if t == "summary":
            payload["source"].pop("type", None)
        self._emit(type_, payload, i)
        if t == "system" and d.get("subtype") == "turn_duration":
            extra = {"duration_ms": d["durationMs"]} if isinstance(d.get("durationMs"), (int, float)) else {}
            self._close_turn(key, i, extra)

    def _user(self, i: int, d: dict, msg: dict, key: str) -> None:
        content = msg.get("content")
        rest_msg = without(msg, ("content",))
        source = self._source(d, ("type", "timestamp", "message"))
        if rest_msg != {"role": "user"}:
            source["message"] = rest_msg
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            others = []
            first = True
            for b in content:
                if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                    others.append(b)
                    continue
                tid = b.get("tool_use_id")
                payload = {"tool_call_id": tid, "content": b.get("content", ""),
                           "is_error": b.get("is_error") is True}
                extra_b = without(b, ("type", "tool_use_id", "content", "is_error"))
                src = dict(source) if first else {}
                if extra_b:
                    src["block"] = extra_b
                if src:
                    payload["source"] = src
                payload["event_id"] = f"{key}:{tid}"
                self._emit("tool/result", payload, i)
                self.unanswered.pop(tid, None)
                first = False
            if others:
                self._emit("user/message", {"content": others, "kind": "with_tool_result",
                                            "event_id": f"{key}:text"}, i)
            return
        kind = user_kind(d)
        if kind == "interrupt" and self.unanswered:
            # Claude Code answers the calls an interrupt cut off with this text when it next
            # calls the model: a result per call, marked as not from the file.
            text = _text_of(content)
            for tid in list(self.unanswered):
                self._emit("tool/result", {"tool_call_id": tid, "content": text, "is_error": True,
                                           "synthetic": True, "event_id": f"{key}:{tid}"}, i)
            self.unanswered.clear()
        if kind in (None, "command"):
            self._close_turn(key, i)
            self.turn += 1
            self.step = 0
            self.turn_open = True
            self._emit("turn/start", {"turn": self.turn, "event_id": f"{key}:turn-start"}, i)
        payload: dict = {"content": content}
        if kind is not None:
            payload["kind"] = kind
        if source:
            payload["source"] = source
        payload["event_id"] = key
        self._emit("user/message", payload, i)

    def _group(self, group: list[int]) -> None:
        data = self.data
        first = group[0]
        ts = parse_ts(data[first].get("timestamp"))
        if ts is not None:
            self.ts = ts
        key = self._key(first)
        self._close_step(key, first)
        self.step += 1
        self.calls = 0
        self.step_open = True
        self._emit("step/start", {"step": self.step, "event_id": f"{key}:step-start"}, first)
        texts: list[str] = []
        calls: list[dict] = []
        sources: list[dict] = []
        best_usage = None
        model = None
        for i in group:
            d = data[i]
            msg = d["message"]
            model = msg.get("model") if isinstance(msg.get("model"), str) else model
            u = msg.get("usage")
            if isinstance(u, dict):
                out_now = u.get("output_tokens") if isinstance(u.get("output_tokens"), int) else -1
                out_best = best_usage.get("output_tokens") if best_usage and isinstance(
                    best_usage.get("output_tokens"), int) else -1
                if best_usage is None or out_now > out_best:
                    best_usage = u
            src = self._source(d, ("type", "timestamp", "message"))
            rest_msg = without(msg, ("content", "model", "usage"))
            content = msg.get("content")
            blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}]
                                                                if isinstance(content, str) else [])
            extras = []
            line_ts = parse_ts(d.get("timestamp")) or self.ts
            for n, b in enumerate(blocks):
                bt = b.get("type") if isinstance(b, dict) else None
                if bt == "text" and isinstance(b.get("text"), str):
                    texts.append(b["text"])
                    rest = without(b, ("type", "text"))
                elif bt == "tool_use":
                    inp = b.get("input", {})
                    calls.append({"id": b.get("id"), "type": "function",
                                  "function": {"name": b.get("name"),
                                               "arguments": json.dumps(inp, ensure_ascii=False)}})
                    rest = without(b, ("type", "id", "name", "input"))
                elif bt in ("thinking", "redacted_thinking"):
                    payload = {k: b[k] for k in ("thinking", "signature", "data") if k in b}
                    if bt == "redacted_thinking":
                        payload["redacted"] = True
                    rest_b = without(b, ("type", "thinking", "signature", "data"))
                    if rest_b:
                        payload["source"] = rest_b
                    payload["event_id"] = f"{self._key(i)}#{n}"
                    self._emit("assistant/thinking", payload, i, line_ts)
                    rest = {}
                else:
                    rest = dict(b) if isinstance(b, dict) else {"value": b}
                if rest:
                    extras.append({"index": n, **rest})
            if rest_msg:
                src["message"] = rest_msg
            if extras:
                src["blocks"] = extras
            sources.append(src)
        payload: dict = {"content": "\n\n".join(texts)}
        if calls:
            payload["tool_calls"] = calls
        if model is not None:
            payload["model"] = model
        usage = _usage(best_usage, model, self.turn, self.step)
        if usage is not None:
            payload["usage"] = usage
        if best_usage is not None:
            sources[0].setdefault("message", {})["usage"] = best_usage
        payload["source"] = sources[0] if len(sources) == 1 else sources
        payload["event_id"] = key
        self.calls += len(calls)
        self.unanswered = {c["id"]: None for c in calls if isinstance(c["id"], str)}
        self._emit("assistant/message", payload, first, ts if ts is not None else self.ts)

    # --- questions asked after the run -------------------------------------------------

    def source_seq(self, node: int, parent: dict[int, int | None]) -> int | None:
        """The seq of the newest event made from ``node`` or from a line above it."""
        ancestors = set()
        line: int | None = node
        while line is not None and line not in ancestors:
            ancestors.add(line)
            line = parent.get(line)
        found = None
        for seq, src in enumerate(self.sources):
            if src in ancestors:
                found = seq
        return found

    def task_call(self, prompt: str | None) -> tuple[int, str] | None:
        """The seq and id of the Task tool call whose prompt is ``prompt``."""
        if prompt is None:
            return None
        for seq, (t, p, _ts) in enumerate(self.events):
            if t != "assistant/message":
                continue
            for c in p.get("tool_calls", []):
                try:
                    args = json.loads(c["function"]["arguments"])
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(args, dict) and args.get("prompt") == prompt:
                    return seq, c["id"]
        return None
