"""What the sessions page shows besides the index's counts: each session's title, project
(``cwd``), agent, model, tokens and relation to a parent (a subagent, a fork), read in bulk
from the session registry's meta, the ``session/info`` events (with the Claude summary
titles) and the ``usage`` view, and re-read at most every :data:`REFRESH_S` seconds while
the log changes. A session with no title is called by its first prompt, read for the
sessions shown (a page at a time) and kept.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import TYPE_CHECKING

from eventstore.io.transcripts.common import all_info

from ..search import usage_totals

if TYPE_CHECKING:
    from .index import SessionIndex, Summary

__all__ = ["SessionFacts", "FACT_KEYS", "STATES"]

REFRESH_S = 2.0
#: Sort keys besides :data:`eventstore.web.index.SORT_KEYS`.
FACT_KEYS = ("title", "cwd", "agent", "model", "tokens", "duration", "state")
#: The values of the ``state`` filter.
STATES = ("complete", "interrupted", "subagent", "fork", "top")
_EMPTY: dict = {}
_FILTERED = ("title", "cwd", "agent", "model")
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


_NAMES = (("title", "title"), ("cwd", "cwd"), ("model", "model"), ("agent", "source"),
          ("relation", "relation"), ("parent", "parent_session"), ("ended", "ended"))
#: The keys of a session's meta and info the list shows (the rest is not read into memory).
META_KEYS = frozenset([name for _key, name in _NAMES] + ["parent_seq", "tool_call_id"])


def _facts(meta: dict, info: dict, usage) -> dict:
    m = {**meta, **info}
    out = {}
    for key, name in _NAMES:
        v = m.get(name)
        if isinstance(v, str) and v:
            out[key] = v
    if isinstance(m.get("parent_seq"), int):
        out["parent_seq"] = m["parent_seq"]
    if isinstance(m.get("tool_call_id"), str):
        out["tool_call_id"] = m["tool_call_id"]
    if usage is not None:
        out["input_tokens"] = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
        out["output_tokens"] = usage.output_tokens
    return out


class SessionFacts:
    """Per-session facts over a :class:`SessionIndex`, and its sorted, filtered pages."""

    def __init__(self, store, index: SessionIndex):
        self.store = store
        self.index = index
        self._lock = threading.Lock()
        self._facts: dict[str, dict] = {}
        self._prompts: dict[str, tuple[int, str | None]] = {}
        self._texts: dict[str, str] = {}  # what the filter matches besides the id, in lower case
        self._read_at = -1.0
        self._read_version = -1
        self._took = 0.0
        self._busy = False
        self._reading = threading.Lock()
        self.version = 0
        self._sorted: dict[tuple, tuple[tuple, list]] = {}

    def refresh(self) -> None:
        """Have the facts current: read them now the first time; afterwards, when the index
        changed since the last read, re-read them on a thread of their own (the pages
        meanwhile show the last ones), at most every REFRESH_S seconds and at most a fifth
        of the time (a read of 100,000 sessions takes about a second)."""
        if self._read_version < 0:
            with self._reading:
                if self._read_version < 0:
                    self._read()
            return
        if self.index.version == self._read_version or self._busy:
            return
        if time.monotonic() - self._read_at < max(REFRESH_S, 5 * self._took):
            return
        self._busy = True

        def run():
            try:
                with self._reading:
                    self._read()
            except Exception:  # noqa: BLE001 - the last facts stay; the next change tries again
                pass
            finally:
                self._busy = False

        threading.Thread(target=run, name="eventstore-facts", daemon=True).start()

    def _read(self) -> None:
        start = time.monotonic()
        version = self.index.version
        from eventstore.backends.capabilities import AuditReads

        metas = {}
        for sid, _created, meta, *_ in self.store.capability(AuditReads).sessions_in_storage_order():
            try:
                v = json.loads(meta) if isinstance(meta, str) else meta
            except ValueError:
                v = None
            metas[sid] = v if isinstance(v, dict) else _EMPTY
        infos = all_info(self.store, META_KEYS)
        tokens = usage_totals(self.store)
        facts = {sid: _facts(m, infos.get(sid, _EMPTY), tokens.get(sid)) for sid, m in metas.items()}
        texts = {sid: "\n".join(v for k, v in f.items() if k in _FILTERED).casefold() for sid, f in facts.items()}
        with self._lock:
            self._facts, self._texts = facts, texts
            self._read_at, self._read_version = time.monotonic(), version
            self._took = self._read_at - start
            self.version += 1

    def get(self, sid: str) -> dict:
        return self._facts.get(sid, _EMPTY)

    def first_prompt(self, sid: str, events: int = 0) -> str | None:
        """The session's first user message a person typed (no ``kind``), cut to 200
        characters; kept, or while there is none, looked for again when the session's
        ``events`` count changed."""
        known = self._prompts.get(sid)
        if known is not None and (known[1] is not None or known[0] == events):
            return known[1]
        text = None
        for ev in self.store.session(sid).events(types=["user/message"]):
            p = ev.payload
            if isinstance(p, dict) and p.get("kind") in (None, "command"):
                c = p.get("content")
                if isinstance(c, list):
                    c = " ".join(x.get("text", "") for x in c if isinstance(x, dict) and isinstance(x.get("text"), str))
                if isinstance(c, str) and "<command-name>" in c:  # a slash command: its name and arguments
                    name, args = _COMMAND.search(c), _ARGS.search(c)
                    c = (name.group(1) if name else "") + (" " + args.group(1) if args else "")
                if isinstance(c, str) and c.strip():
                    text = " ".join(c.split())[:200]
                    break
        if len(self._prompts) > 100_000:
            self._prompts.clear()
        self._prompts[sid] = (events, text)
        return text

    def state(self, s: Summary) -> str:
        ended = self.get(s.id).get("ended")
        if ended in ("complete", "interrupted"):
            return ended
        return "complete" if s.complete else "interrupted"

    def row(self, s: Summary) -> dict:
        """The index's row of ``s`` with its facts (``title`` falls back to the first prompt,
        ``title_from`` saying which)."""
        d = s.to_dict()
        f = self.get(s.id)
        d.update(f)
        if "title" in f:
            d["title_from"] = "title"
        else:
            prompt = self.first_prompt(s.id, s.events)
            if prompt:
                d["title"], d["title_from"] = prompt, "prompt"
        if f.get("ended") in ("complete", "interrupted"):
            d["complete"] = f["ended"] == "complete"
        d["duration"] = None if s.first_ts is None or s.last_ts is None else s.last_ts - s.first_ts
        return d

    def _fact_key(self, sort: str):
        facts = self.get
        if sort in ("title", "cwd", "agent", "model"):
            return lambda s: ((facts(s.id).get(sort) or "\uffff").casefold(), s.id)
        if sort == "tokens":
            return lambda s: (facts(s.id).get("input_tokens", -1) + facts(s.id).get("output_tokens", 0), s.id)
        if sort == "duration":
            return lambda s: (-1 if s.first_ts is None else s.last_ts - s.first_ts, s.id)
        return lambda s: (self.state(s), s.id)

    def page(self, *, sort: str, descending: bool, query: str, state: str, offset: int,
             limit: int) -> tuple[int, list[dict]]:
        """``(matching, rows)`` as :meth:`SessionIndex.page`, over the fact columns too:
        ``query`` matches the id, title, project, agent or model (any case); ``state`` one
        of :data:`STATES` or empty."""
        from .index import SORT_KEYS, sort_key

        self.refresh()
        items = self.index.summaries()
        cache_key = (sort, descending, query, state)
        stamp = (self.index.version, self.version)
        with self._lock:
            cached = self._sorted.get(cache_key)
            if cached is not None and cached[0] == stamp:
                ordered = cached[1]
            else:
                if query:
                    q = query.casefold()
                    texts = self._texts
                    items = [s for s in items if q in s.id.casefold() or q in texts.get(s.id, "")]
                if state in ("complete", "interrupted"):
                    items = [s for s in items if self.state(s) == state]
                elif state in ("subagent", "fork"):
                    items = [s for s in items if self.get(s.id).get("relation") == state]
                elif state == "top":
                    items = [s for s in items if "parent" not in self.get(s.id)]
                if sort in SORT_KEYS:
                    key = (lambda s: s.id) if sort == "id" else sort_key(sort, descending)
                else:
                    key = self._fact_key(sort)
                ordered = sorted(items, key=key, reverse=descending)
                if len(self._sorted) > 16:
                    self._sorted.clear()
                self._sorted[cache_key] = (stamp, ordered)
        return len(ordered), [self.row(s) for s in ordered[offset:offset + limit]]
