"""Claude Code transcripts (``~/.claude/projects/<cwd>/<session>.jsonl``) as sessions.

The mapping (docs/import-export.md, "Agents' transcripts", has the table and the why):

* the file is read in ONE pass, line after line, and what a line makes depends only on it
  and the lines before it: an import of any prefix of a file stores a beginning of what an
  import of the whole file stores, nothing waits for a later line, and nothing stored is
  ever changed (a fact learned later is a new event, ``session/info``);
* a human prompt (or a slash command) opens a turn: ``turn/start {"turn"}``, then
  ``user/message``; other user text (caveats, command output, interrupts, compact
  summaries, task notifications, a compaction agent's instruction) is a ``user/message``
  with a ``kind`` and opens nothing;
* each API response (``message.id``) is a step: ``step/start {"step"}`` at its first line;
  its text and tool_use blocks go, in source order, into one ``assistant/message`` (the
  first line that holds any) and an ``assistant/part`` per later line (the projection folds
  the parts into the message); thinking blocks are ``assistant/thinking`` where they stand;
  ``step/end`` and ``turn/end`` are written when a line shows the step or turn is over
  (the next response or prompt, a ``turn_duration``);
* each ``tool_result`` block is a ``tool/result`` (``tool_call_id``, ``content``,
  ``is_error``);
* a ``compact_boundary`` is followed by ``compaction/boundary``: the projection starts again
  there;
* every other line (system notices, progress, snapshots, queue operations, titles, and
  types this module does not know) is an event ``claude/<type>`` of its own; the ``summary``
  lines before any line naming a session are stored at once in a session of their own,
  ``<file name>:titles`` (their titles reach the sessions they name when read);
* each event keeps what the mapping did not use of its source line in ``source``.

The file is a tree (``parentUuid``). A prompt written under a node that already has a
prompt below it is a ``/rewind`` (or an edited prompt): it starts a fork, a session of its
own (``<id>:fork:<uuid>``) naming its parent session and the seq where it forks; the branch
stored first keeps the session id (stored events never move) and is told where the user
went on (``session/info {"continued_in"}``). Other branches (parallel tool calls, hooks,
progress) stay in the conversation. Subagents (inline ``isSidechain`` lines, or
``agent-*.jsonl`` files) are sessions of their own.
"""

from __future__ import annotations

import hashlib
import json
import os

from eventstore.io.transcripts import TranscriptFormat, register
from eventstore.io.transcripts.common import Converted, parse_ts, without

NOT_A_PROMPT = ("Caveat:", "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>")
INTERRUPT = "[Request interrupted by user"
TASK_NOTIFICATION = "<task-notification>"
#: The keys of a line that go into the session's meta (an event keeps them only where they differ).
META_KEYS = {"sessionId": "source_session_id", "cwd": "cwd", "gitBranch": "git_branch", "version": "version"}
#: The event types whose payload feeds the projection (the others keep the source only).
PART = "assistant/part"
COMPACT = "compaction/boundary"
INFO = "session/info"
#: The tools whose call starts a subagent (an inline sidechain whose root holds its prompt).
SUBAGENT_TOOLS = ("Task", "Agent")


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
    ``command_output``, ``interrupt``, ``compact_summary``, ``task_notification`` (or
    ``tool_result`` when it holds only tool results)."""
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
    if stripped.startswith(TASK_NOTIFICATION):
        return "task_notification"
    if stripped.startswith(NOT_A_PROMPT):
        return "command_output" if stripped.startswith(("<local-command-stdout>", "<local-command-stderr>")) else "meta"
    if "<command-name>" in stripped:
        return "command"
    return None


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


_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


class _Session:
    """One session being built: its events, and the turn/step state of its conversation."""

    def __init__(self, session_id: str, meta: dict, compact_agent: bool = False):
        self.conv = Converted(session_id, meta)
        self.events = self.conv.events
        self.seq_of_line: dict[int, int] = {}  # source line -> seq of its last event here
        self.keys: set[str] = set()
        self.turn = 0
        self.step = 0
        self.step_open = False
        self.turn_open = False
        self.calls = 0
        self.message_id: str | None = None  # the API message of the open step
        self.has_message: set[str] = set()  # API messages that have their assistant/message
        self.usage_max: dict[str, dict] = {}  # per API message: the largest counts so far
        self.unanswered: dict[str, None] = {}  # tool calls of the open step without a result
        self.model = meta.get("model")
        self.ts = 0.0
        self.compact_agent = compact_agent  # a compaction agent: its first user text is an instruction
        self.seen_user_text = False


def convert(lines: list[tuple[int, dict]], path: str, stream: bool = False) -> list[Converted]:
    """Convert the parsed lines of one Claude Code file into sessions (main session first).
    ``stream``: the lines came from a pipe or stdin, whose ``path`` (``/dev/fd/63``, ``-``)
    is no file to record as ``source_file``. Which branch holds a line depends only on the
    lines before it.
    """
    return _Converter(lines, path, stream).run()


class _Converter:
    def __init__(self, lines: list[tuple[int, dict]], path: str, stream: bool):
        self.lines = lines
        self.path = path
        self.stream = stream
        self.sessions: list[_Session] = []
        self.base: str | None = None
        self.agent_file = False
        self.by_uuid: dict[str, int] = {}  # uuid -> index of the line that first had it
        self.parent: dict[int, int | None] = {}
        self.branch: dict[int, _Session] = {}  # tree line -> its session
        self.prompt_below: set[int | None] = set()  # nodes with a prompt in their subtree
        self.waiting_titles: dict[str, list[str]] = {}  # leafUuid not seen yet -> titles
        self.pending: list[int] = []  # lines before the session id is known
        self.meta_values: dict = {}
        self.side_ids: set[str] = set()  # the inline sidechains' sessions
        # Task prompt -> the calls with it whose sidechain has not started: (session, seq, id)
        self.calls_by_prompt: dict[str, list[tuple[_Session, int, str]]] = {}
        self.titles: _Session | None = None  # the summary lines before any line naming a session

    # --- sessions -------------------------------------------------------------------------

    def _start(self, i: int, d: dict) -> None:
        """The first line with a session id: create the main session from it."""
        self.base = d["sessionId"]
        meta: dict = {"source": "claude-code"}
        if not self.stream:
            meta["source_file"] = os.path.abspath(self.path)
        for k, name in META_KEYS.items():
            if isinstance(d.get(k), str) and d[k]:
                meta[name] = d[k]
        msg = d.get("message")
        if d.get("type") == "assistant" and isinstance(msg, dict) and _real_model(msg.get("model")):
            meta["model"] = msg["model"]
        self.meta_values = {k: meta.get(name) for k, name in META_KEYS.items()}
        self.meta = meta
        agent = d.get("agentId")
        compact = False
        if isinstance(agent, str) and agent and isinstance(d.get("uuid"), str):
            self.agent_file = True
            compact = agent.startswith("acompact")
            main = _Session(f"{self.base}:agent:{agent}",
                            {**meta, "relation": "subagent", "parent_session": self.base, "agent_id": agent},
                            compact_agent=compact)
        else:
            main = _Session(self.base, meta)
        self.sessions.append(main)

    def _new_session(self, session_id: str, meta: dict) -> _Session:
        s = _Session(session_id, {**self.meta, **meta})
        self.sessions.append(s)
        return s

    # --- the pass -------------------------------------------------------------------------

    def _titles_session(self, d: dict) -> _Session:
        """The session of the summary lines written before any line naming a session (Claude
        Code writes earlier conversations' titles at the top of a file, and a file can hold
        nothing else): ``<file name without .jsonl>:titles``, or for a pipe, named after
        its first line. Its events have no time (the lines have none): ``ts`` 0."""
        if self.titles is None:
            if self.stream:
                digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
                tid = f"claude-titles-{digest}:titles"
                meta: dict = {"source": "claude-code", "relation": "titles"}
            else:
                stem = os.path.basename(self.path)
                stem = stem[:-len(".jsonl")] if stem.endswith(".jsonl") else stem
                tid = f"{stem}:titles"
                meta = {"source": "claude-code", "source_file": os.path.abspath(self.path), "relation": "titles"}
            self.titles = _Session(tid, meta)
        return self.titles

    def run(self) -> list[Converted]:
        for i, (_no, d) in enumerate(self.lines):
            if self.base is None:
                if not (isinstance(d.get("sessionId"), str) and d["sessionId"]):
                    if d.get("type") == "summary":  # stored now, in a session of their own
                        self._other(self._titles_session(d), i, d, "summary")
                    else:
                        self.pending.append(i)  # (a snapshot before any conversation line)
                    continue
                self._start(i, d)
                self.sessions[0].ts = parse_ts(d.get("timestamp")) or 0.0  # (the lines before have none)
                for j in self.pending:
                    self._line(j, self.lines[j][1])
                self.pending = []
            self._line(i, d)
        return [s.conv for s in ([self.titles] if self.titles is not None else []) + self.sessions]

    def _line(self, i: int, d: dict) -> None:
        uuid = d.get("uuid")
        if isinstance(uuid, str) and uuid and uuid not in self.by_uuid:
            s = self._place(i, d)
        else:
            s = self.sessions[0]  # titles, snapshots, queue operations, repeated uuids
        ts = parse_ts(d.get("timestamp"))
        if ts is None and not s.ts and isinstance(d.get("snapshot"), dict):
            ts = parse_ts(d["snapshot"].get("timestamp"))  # only before any line with a time
        if ts is not None:
            s.ts = ts
        t = d.get("type")
        msg = d.get("message")
        if t == "assistant" and isinstance(msg, dict):
            self._assistant(s, i, d, msg)
        elif t == "user" and isinstance(msg, dict):
            self._user(s, i, d, msg)
        else:
            self._other(s, i, d, t)
        if isinstance(uuid, str) and uuid in self.waiting_titles and self.by_uuid.get(uuid) == i:
            for title in self.waiting_titles.pop(uuid):
                self._info(s, i, {"title": title}, f"{self._key(i)}:title")

    def _place(self, i: int, d: dict) -> _Session:
        """Put a tree line in its session (and record it in the tree)."""
        uuid = d["uuid"]
        self.by_uuid[uuid] = i
        p_uuid = d.get("parentUuid") or d.get("logicalParentUuid")
        p = self.by_uuid.get(p_uuid) if isinstance(p_uuid, str) else None
        self.parent[i] = p
        side = bool(d.get("isSidechain")) and not self.agent_file
        prompt = d.get("type") == "user" and user_kind(d) in (None, "command")
        if p is not None and side != (self.branch[p].conv.session_id in self.side_ids):
            p = None  # a sidechain's root hangs off the main chain (or the other way): a root
        if side and p is None:
            s = self._sidechain(i, d)
        elif p is None:
            s = self.sessions[0]
            if prompt and None in self.prompt_below:
                s = self._fork(i, d, None, s)
        else:
            s = self.branch[p]
            if prompt and p in self.prompt_below:
                s = self._fork(i, d, p, s)
        self.branch[i] = s
        if prompt:
            node: int | None = i
            while node not in self.prompt_below:
                self.prompt_below.add(node)
                if node is None:
                    break
                node = self.parent.get(node)
        return s

    def _fork(self, i: int, d: dict, node: int | None, parent: _Session) -> _Session:
        fid = f"{self.base}:fork:{d['uuid']}"
        meta: dict = {"relation": "fork", "parent_session": parent.conv.session_id}
        if node is not None:
            meta["parent_uuid"] = self.lines[node][1]["uuid"]
            seq = self._seq_at(parent, node)
            if seq is not None:
                meta["parent_seq"] = seq
        s = self._new_session(fid, meta)
        self._info(parent, i, {"continued_in": fid}, f"{d['uuid']}:continued-in")
        return s

    def _seq_at(self, s: _Session, node: int | None) -> int | None:
        """The seq in ``s`` of the newest event made from ``node`` or a line above it."""
        seen = set()
        while node is not None and node not in seen:
            seen.add(node)
            if node in s.seq_of_line:
                return s.seq_of_line[node]
            node = self.parent.get(node)
        return None

    def _sidechain(self, i: int, d: dict) -> _Session:
        sid = f"{self.base}:sidechain:{d['uuid']}"
        meta: dict = {"relation": "subagent", "parent_session": self.sessions[0].conv.session_id,
                      "parent_uuid": d["uuid"]}
        prompt = _text_of((d.get("message") or {}).get("content")) if isinstance(d.get("message"), dict) else None
        # (the first call of that prompt not yet answered by a sidechain: parallel Tasks may
        # share a prompt, and their sidechains start in the order of their calls)
        waiting = self.calls_by_prompt.get(prompt) if prompt is not None else None
        found = waiting.pop(0) if waiting else None
        if found is not None:
            meta["parent_session"] = found[0].conv.session_id
            meta["parent_seq"] = found[1]
            meta["tool_call_id"] = found[2]
        s = self._new_session(sid, meta)
        self.side_ids.add(sid)
        if found is not None:
            self._info(found[0], i, {f"subagent/{found[2]}": sid}, f"{d['uuid']}:subagent")
        return s

    # --- events ---------------------------------------------------------------------------

    def _key(self, i: int) -> str:
        d = self.lines[i][1]
        u = d.get("uuid")
        return u if isinstance(u, str) and self.by_uuid.get(u) == i else f"L{self.lines[i][0]}"

    def _emit(self, s: _Session, type_: str, payload: dict, i: int, ts: float | None = None) -> None:
        key = payload["event_id"]
        if key in s.keys:  # (a repeated uuid in a fork's lines: keep the event, make its key unique)
            payload["event_id"] = key = f"{key}@L{self.lines[i][0]}"
        s.keys.add(key)
        s.events.append((type_, payload, s.ts if ts is None else ts))
        line_type = self.lines[i][1].get("type")
        what = (line_type if isinstance(line_type, str) else "?", type_)
        s.conv.folded[what] = s.conv.folded.get(what, 0) + 1
        s.seq_of_line[i] = len(s.events) - 1

    def _info(self, s: _Session, i: int, info: dict, key: str) -> None:
        self._emit(s, INFO, {"info": info, "event_id": key}, i)

    def _source(self, d: dict, used: tuple[str, ...]) -> dict:
        return {k: v for k, v in d.items()
                if k not in used and not (k in self.meta_values and v == self.meta_values[k])}

    def _close_step(self, s: _Session, key: str, i: int) -> None:
        if s.step_open:
            self._emit(s, "step/end", {"step": s.step, "tool_calls": s.calls, "event_id": f"{key}:step-end"}, i)
            s.step_open = False
            s.message_id = None

    def _close_turn(self, s: _Session, key: str, i: int, extra: dict | None = None) -> None:
        self._close_step(s, key, i)
        if s.turn_open:
            self._emit(s, "turn/end", {"turn": s.turn, **(extra or {}), "event_id": f"{key}:turn-end"}, i)
            s.turn_open = False

    def _other(self, s: _Session, i: int, d: dict, t: object) -> None:
        key = self._key(i)
        type_ = f"claude/{t}" if isinstance(t, str) and t and "/" not in t else "claude/unknown"
        payload = {"source": self._source(d, ("timestamp",) if t == "summary" else ("type", "timestamp")),
                   "event_id": key}
        if t == "summary":
            payload["source"].pop("type", None)
        self._emit(s, type_, payload, i)
        if t == "summary" and isinstance(d.get("summary"), str):
            leaf = d.get("leafUuid")
            at = self.by_uuid.get(leaf) if isinstance(leaf, str) else None
            if at is not None:
                self._info(self.branch.get(at, self.sessions[0]), i, {"title": d["summary"]}, f"{key}:title")
            elif isinstance(leaf, str):
                # The leaf may come later in this file (then the title goes to its session
                # there) or be in another file: the event above keeps it either way.
                self.waiting_titles.setdefault(leaf, []).append(d["summary"])
        if t == "system" and d.get("subtype") == "turn_duration":
            extra = {"duration_ms": d["durationMs"]} if isinstance(d.get("durationMs"), (int, float)) else {}
            self._close_turn(s, key, i, extra)
        elif t == "system" and d.get("subtype") == "compact_boundary":
            self._emit(s, COMPACT, {"reason": "compaction", "event_id": f"{key}:compact"}, i)

    def _user(self, s: _Session, i: int, d: dict, msg: dict) -> None:
        key = self._key(i)
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
                self._emit(s, "tool/result", payload, i)
                s.unanswered.pop(tid, None)
                first = False
            if others:
                self._emit(s, "user/message", {"content": others, "kind": "with_tool_result",
                                               "event_id": f"{key}:text"}, i)
            result = d.get("toolUseResult")
            agent = result.get("agentId") if isinstance(result, dict) else None
            if isinstance(agent, str) and agent and self.base is not None:
                tid = next((b.get("tool_use_id") for b in content
                            if isinstance(b, dict) and b.get("type") == "tool_result"), None)
                self._info(s, i, {f"subagent/{tid}": f"{self.base}:agent:{agent}"}, f"{key}:subagent")
            return
        kind = user_kind(d)
        if s.compact_agent and not s.seen_user_text and kind is None:
            kind = "compact_instruction"  # the compaction agent's task, written by Claude Code
        s.seen_user_text = True
        if kind == "interrupt" and s.unanswered:
            # Claude Code answers the calls an interrupt cut off with this text when it next
            # calls the model: a result per call, marked as not from the file.
            text = _text_of(content)
            for tid in list(s.unanswered):
                self._emit(s, "tool/result", {"tool_call_id": tid, "content": text, "is_error": True,
                                              "synthetic": True, "event_id": f"{key}:{tid}"}, i)
            s.unanswered.clear()
        if kind in (None, "command"):
            self._close_turn(s, key, i)
            s.turn += 1
            s.step = 0
            s.turn_open = True
            self._emit(s, "turn/start", {"turn": s.turn, "event_id": f"{key}:turn-start"}, i)
        payload: dict = {"content": content}
        if kind is not None:
            payload["kind"] = kind
        if source:
            payload["source"] = source
        payload["event_id"] = key
        self._emit(s, "user/message", payload, i)

    def _assistant(self, s: _Session, i: int, d: dict, msg: dict) -> None:
        key = self._key(i)
        mid = msg.get("id") if isinstance(msg.get("id"), str) else None
        group = mid if mid is not None else f"line:{i}"
        if not (s.step_open and s.message_id == group):
            if group in s.has_message and s.step_open:
                pass  # (a later line of a message whose step another message closed: a part)
            else:
                self._close_step(s, key, i)
                s.step += 1
                s.calls = 0
                s.step_open = True
                s.unanswered = {}
                self._emit(s, "step/start", {"step": s.step, "event_id": f"{key}:step-start"}, i)
            s.message_id = group
        model = msg.get("model")
        if _real_model(model) and model != s.model:
            s.model = model
            self._info(s, i, {"model": model}, f"{key}:model")
        line_ts = parse_ts(d.get("timestamp")) or s.ts
        # The usage this line adds to its message: per count, the rise over the largest
        # seen so far (the first line: all of it), so the sum over a message's events is
        # the largest of its lines. The line's own usage stays in its source.
        usage = _usage(msg.get("usage"), model, s.turn, s.step)
        delta = None
        if usage is not None:
            best = s.usage_max.get(group)
            if best is None:
                delta = usage
                s.usage_max[group] = {k: usage[k] for k in _COUNTS}
            else:
                rise = {k: max(0, usage[k] - best[k]) for k in _COUNTS}
                if any(rise.values()):
                    delta = {**usage, **rise, "part": True}
                    for k in _COUNTS:
                        best[k] = max(best[k], usage[k])
        src = self._source(d, ("type", "timestamp", "message"))
        rest_msg = without(msg, ("content",))
        if rest_msg:
            src["message"] = rest_msg
        content = msg.get("content")
        blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}]
                                                            if isinstance(content, str) else [])
        extras: list[dict] = []
        made: list[tuple[str, dict]] = []  # (type, payload) of this line, in source order
        texts: list[str] = []
        calls: list[dict] = []

        def flush() -> None:
            if not texts and not calls:
                return
            made.append(("text", {"texts": list(texts), "calls": list(calls)}))
            texts.clear()
            calls.clear()

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
                flush()
                payload = {k: b[k] for k in ("thinking", "signature", "data") if k in b}
                if bt == "redacted_thinking":
                    payload["redacted"] = True
                rest_b = without(b, ("type", "thinking", "signature", "data"))
                if rest_b:
                    payload["source"] = rest_b
                payload["message_id"] = mid
                payload["event_id"] = f"{key}#{n}"
                made.append(("thinking", payload))
                rest = {}
            else:
                rest = dict(b) if isinstance(b, dict) else {"value": b}
            if rest:
                extras.append({"index": n, **rest})
        flush()
        if extras:
            src["blocks"] = extras
        if not made:
            made.append(("text", {"texts": [], "calls": []}))  # (no block: the line still makes an event)
        if all(w == "thinking" for w, _p in made):
            made[-1][1]["source"] = {**made[-1][1].get("source", {}), "line": src}  # thinking only
        first_text = True
        for k, (what, p) in enumerate(made):
            if what == "thinking":
                if delta is not None and k == 0:
                    p["usage"] = delta
                self._emit(s, "assistant/thinking", p, i, line_ts)
                continue
            head = group not in s.has_message
            payload: dict = {}
            if p["texts"] or head:
                payload["content"] = "\n\n".join(p["texts"])
            if p["calls"]:
                payload["tool_calls"] = p["calls"]
                s.calls += len(p["calls"])
                for c in p["calls"]:
                    if isinstance(c["id"], str):
                        s.unanswered[c["id"]] = None
                    self._remember_task(s, c)
            if head and isinstance(model, str):
                payload["model"] = model
            if delta is not None and k == 0:
                payload["usage"] = delta
            if first_text:
                payload["source"] = src
            payload["message_id"] = mid
            payload["event_id"] = key if first_text else f"{key}#{k}"
            first_text = False
            self._emit(s, "assistant/message" if head else PART, payload, i, line_ts)
            s.has_message.add(group)

    def _remember_task(self, s: _Session, call: dict) -> None:
        try:
            args = json.loads(call["function"]["arguments"])
        except (ValueError, KeyError, TypeError):
            return
        if call["function"].get("name") not in SUBAGENT_TOOLS:  # (WebFetch has a prompt too)
            return
        if isinstance(args, dict) and isinstance(args.get("prompt"), str) and isinstance(call.get("id"), str):
            self.calls_by_prompt.setdefault(args["prompt"], []).append((s, len(s.events), call["id"]))


def _real_model(m: object) -> bool:
    return isinstance(m, str) and bool(m) and m != "<synthetic>"


# --- registration (eventstore.io.transcripts) -----------------------------------------------

_LINE_TYPES = {"user", "assistant", "system", "summary", "file-history-snapshot", "progress", "queue-operation"}


def looks_like(d: dict) -> bool:
    """Whether one parsed line of a file's head is a Claude Code transcript's: a line of its
    types with ``sessionId``, ``uuid``, ``leafUuid`` or ``messageId``."""
    return d.get("type") in _LINE_TYPES and any(k in d for k in ("sessionId", "uuid", "leafUuid", "messageId"))


register(TranscriptFormat("claude-code", looks_like, convert))
