// The session as a chat: a model built event by event (Chat), each block's DOM
// (renderBlock), and a virtualised list that keeps only the visible blocks in the page
// (VList). Live updates, replay and the first load all go through Chat.apply.
"use strict";

// The text a chunk adds: delta.content (a string), else nothing.
const chunkText = (p) => {
  const d = p && p.delta;
  if (d && typeof d.content === "string") return d.content;
  if (typeof (p && p.content) === "string") return p.content;
  return "";
};

// A tool result looks failed: an explicit flag, or the demo's "[exit status N]" tail.
const isError = (p) => p.is_error === true || p.isError === true || p.status === "error" ||
  (p.error != null && p.error !== false) ||
  (typeof p.content === "string" && /\[exit status [1-9]\d*\]\s*$/.test(p.content));

// The event types the conversation view shows as cards or dividers; every other event
// (bookkeeping: claude/progress, codex/turn_context, token counts, session/info, steps...)
// is hidden there, counted, and kept in a "hidden" block shown on demand.
const CONVERSATION = new Set(["turn/start", "turn/end", "user/message", "assistant/chunk", "assistant/message",
  "assistant/part", "assistant/thinking", "tool/result", "compaction/boundary"]);

// The readable text of a thinking event, or null: never its signature or encrypted blob.
const thinkingText = (p) => {
  for (const t of [p.thinking, p.text, p.content]) if (typeof t === "string" && t.trim()) return t;
  return null;
};
// The size of an encrypted reasoning payload (bytes of its opaque text).
const thinkingBytes = (p) => {
  const src = p.source && typeof p.source === "object" ? p.source : {};
  for (const t of [p.encrypted_content, src.encrypted_content, p.redacted_thinking, src.data, p.signature])
    if (typeof t === "string" && t) return t.length;
  return 0;
};

class Chat {
  // conversation: the conversation view (bookkeeping hidden, thinking and parts folded);
  // false: the raw view, one block per event not part of a message.
  // showSteps: step dividers in the conversation view too (a session this library wrote;
  // an imported transcript has a step per API call, bookkeeping there).
  constructor(conversation = true) { this.conversation = conversation; this.showSteps = true; this.reset(); }

  reset() {
    this.hidden = new Map(); // type -> events hidden (conversation view)
    this.hiddenTotal = 0;
    this.blocks = [];
    this.turn = null;
    this.turns = 0;
    this.step = null;
    this.asst = null;
    this.window = new Map(); // call id -> calls waiting for their result (before the next message)
    this.count = 0;
    this.generation = (this.generation || 0) + 1;
  }

  push(b) { b.i = this.blocks.length; b.v = 0; b.sv = 0; b.last = b.seq; this.blocks.push(b); return b; }
  touch(b, structural = true) { b.v++; if (structural) b.sv++; }

  closeWindow() {
    for (const calls of this.window.values()) for (const c of calls) { c.dangling = true; this.touch(c.block); }
    this.window.clear();
  }

  // One hidden event: counted, and added to the "hidden" block right before it (a run).
  hide(ev) {
    const u = ev.payload && ev.payload.usage; // Codex's token count: the usage of the answer before it
    const a = this.asst;
    if (u && typeof u === "object" && a && a.final && !a.usage) { a.usage = u; this.touch(a); }
    this.hidden.set(ev.type, (this.hidden.get(ev.type) || 0) + 1);
    this.hiddenTotal++;
    const last = this.blocks[this.blocks.length - 1];
    if (last && last.kind === "hidden") { last.evs.push(ev); last.last = ev.seq; this.touch(last, last.open); }
    else this.push({ kind: "hidden", seq: ev.seq, ts: ev.ts, evs: [ev], open: false });
  }

  newCall(a, c, ts) {
    const f = (c && c.function) || {};
    const call = { block: a, raw: c, id: c && c.id, name: f.name, args: f.arguments, ts, result: null, dangling: false };
    const list = this.window.get(call.id) || [];
    list.push(call);
    this.window.set(call.id, list);
    return call;
  }

  apply(ev) {
    const p = ev.payload && typeof ev.payload === "object" ? ev.payload : {};
    const { seq, ts } = ev;
    if (this.conversation && !CONVERSATION.has(ev.type) && !(this.showSteps && (ev.type === "step/start" || ev.type === "step/end"))) {
      this.hide(ev); this.count = seq + 1; return;
    }
    switch (this.conversation ? ev.type : ev.type === "assistant/part" || ev.type === "assistant/thinking" || ev.type === "compaction/boundary" ? "" : ev.type) {
      case "assistant/thinking":
        this.push({ kind: "thinking", seq, ts, text: thinkingText(p), bytes: thinkingBytes(p), open: false });
        break;
      case "compaction/boundary":
        this.asst = null;
        this.push({ kind: "compaction", seq, ts, reason: p.reason });
        break;
      case "assistant/part": { // the rest of the last assistant message, as the projection folds it
        const a = this.asst;
        if (!a || !a.final || (a.msg && a.msg.payload && a.msg.payload.message_id !== p.message_id)) {
          this.push({ kind: "other", seq, ts, ev });
          break;
        }
        a.parts = (a.parts || 0) + 1;
        if (typeof p.content === "string" && p.content)
          a.content = typeof a.content === "string" && a.content ? a.content + "\n\n" + p.content : p.content;
        if (Array.isArray(p.tool_calls)) for (const c of p.tool_calls) a.calls.push(this.newCall(a, c, ts));
        if (p.usage && typeof p.usage === "object") a.usage = p.usage;
        a.last = seq;
        this.touch(a);
        break;
      }
      case "turn/start":
        this.asst = null;
        this.turn = this.push({ kind: "turn", seq, ts, n: ++this.turns, end: null });
        break;
      case "turn/end": {
        const t = this.turn;
        this.asst = null;
        this.push({ kind: "turn-end", seq, ts, start: t });
        if (t) { t.end = ev; this.touch(t); }
        this.turn = null;
        break;
      }
      case "step/start":
        this.asst = null;
        this.step = this.push({ kind: "step", seq, ts, step: p.step, end: null });
        break;
      case "step/end": {
        const s = this.step;
        this.asst = null;
        this.push({ kind: "step-end", seq, ts, start: s, step: p.step, toolCalls: p.tool_calls });
        if (s) { s.end = ev; this.touch(s); }
        this.step = null;
        break;
      }
      case "user/message":
        this.closeWindow();
        this.asst = null;
        this.push({ kind: "user", seq, ts, content: p.content, userKind: typeof p.kind === "string" ? p.kind : null });
        break;
      case "assistant/chunk": {
        let a = this.asst;
        if (!a || a.final) a = this.asst = this.push({ kind: "assistant", seq, ts, text: "", chunks: 0, final: false, calls: [] });
        a.text += chunkText(p);
        a.chunks++;
        a.last = seq;
        this.touch(a, false);
        break;
      }
      case "assistant/message": {
        this.closeWindow();
        let a = this.asst;
        if (!a || a.final) a = this.asst = this.push({ kind: "assistant", seq, ts, text: "", chunks: 0, final: false, calls: [] });
        a.final = true;
        a.msg = ev;
        a.content = p.content;
        a.usage = p.usage && typeof p.usage === "object" ? p.usage : null;
        a.last = seq;
        a.calls = (Array.isArray(p.tool_calls) ? p.tool_calls : []).map((c) => this.newCall(a, c, ts));
        this.touch(a);
        break;
      }
      case "tool/result": {
        const list = this.window.get(p.tool_call_id);
        const call = list && list.shift();
        if (list && !list.length) this.window.delete(p.tool_call_id);
        if (call) {
          call.result = ev;
          call.error = isError(p);
          call.block.last = Math.max(call.block.last, seq);
          this.touch(call.block);
        } else {
          this.push({ kind: "other", seq, ts, ev, orphan: true });
        }
        break;
      }
      default:
        this.push({ kind: "other", seq, ts, ev });
    }
    this.count = seq + 1;
  }
}

// --- rendering -------------------------------------------------------------------------

// Long text goes into segments of about SEG characters, cut after a newline, each with
// content-visibility: auto, so the browser lays out and paints only the segments on screen
// (a 100,000-chunk answer is one message of a megabyte).
const SEG = 4000;
const segment = (into, text) => {
  const seg = document.createElement("div");
  seg.className = "seg";
  const lines = text.length / 90 + (text.match(/\n/g) || []).length;
  seg.style.containIntrinsicSize = `auto ${Math.round(22 * lines)}px`;
  ES.appendText(seg, text);
  seg._len = text.length;
  into.appendChild(seg);
  return seg;
};
const appendLong = (into, text) => {
  if (text.length <= SEG * 1.5) { segment(into, text); return; }
  let start = 0;
  while (start < text.length) {
    let cut = text.indexOf("\n", start + SEG);
    if (cut < 0 || cut - start > SEG * 4) cut = text.length - start > SEG * 4 ? start + SEG * 4 : text.length;
    else cut += 1;
    segment(into, text.slice(start, cut));
    start = cut;
  }
};

// Text up to this size is rendered as Markdown; longer text as plain segments (fast).
const MD_MAX = 60000;
const textNodes = (into, text, md) => {
  if (md && text.length <= MD_MAX) { into.classList.add("md"); MD.render(into, text); } else appendLong(into, text);
};

const contentNodes = (content, into, md = false) => {
  if (content == null) return;
  if (typeof content === "string") { textNodes(into, content, md); return; }
  if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part === "string") textNodes(into, part, md);
      else if (part && typeof part === "object" && part.type === "text" && typeof part.text === "string") textNodes(into, part.text, md);
      else into.appendChild(ES.jsonPre(part));
    }
    return;
  }
  into.appendChild(ES.jsonPre(content));
};

// A tool result's content as text: a string as it is, a list's text parts joined.
const resultText = (content) => {
  if (typeof content === "string") {
    // Codex's function results are JSON text {"output": "...", "metadata": {...}}: the output
    if (content.startsWith('{"output":')) {
      try { const v = JSON.parse(content); if (v && typeof v.output === "string") return v.output; } catch (e) { /* text */ }
    }
    return content;
  }
  if (Array.isArray(content) && content.every((x) => typeof x === "string" || (x && typeof x === "object" && typeof x.text === "string")))
    return content.map((x) => (typeof x === "string" ? x : x.text)).join("\n");
  return null;
};

const parseArgs = (args) => {
  if (typeof args !== "string") return args;
  try { return JSON.parse(args); } catch (e) { return undefined; }
};

// Arguments as the model wrote them: an edit or a patch as a diff; else pretty JSON when
// they parse, else the text.
const argsNode = (args, name, ctxConversation = false) => {
  const v = parseArgs(args);
  if (v && typeof v === "object" && !Array.isArray(v)) {
    if (typeof v.old_string === "string" && typeof v.new_string === "string")
      return MD.diff(v.old_string, v.new_string, v.file_path == null ? "" : String(v.file_path));
    if (Array.isArray(v.edits) && v.edits.length && v.edits.every((e) => e && typeof e.old_string === "string" && typeof e.new_string === "string"))
      return ES.el("div", null, ...v.edits.map((e, i) => MD.diff(e.old_string, e.new_string, `${v.file_path ?? ""} (edit ${i + 1} of ${v.edits.length})`)));
    const patch = MD.findPatch(v.input) || MD.findPatch(v.patch) ||
      (Array.isArray(v.command) ? MD.findPatch(v.command.filter((c) => typeof c === "string").join("\n")) : MD.findPatch(v.command));
    if (patch) return MD.patch(patch);
  }
  if (typeof args === "string" && name === "apply_patch" && MD.findPatch(args)) return MD.patch(MD.findPatch(args));
  if (ctxConversation && v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length &&
      Object.values(v).every((x) => x === null || typeof x !== "object")) {
    // flat arguments (a Task's prompt, a Bash command): each as "name: value", strings as text
    const pre = ES.el("pre", { className: "out args" });
    for (const [k, x] of Object.entries(v)) {
      pre.appendChild(ES.el("span", { className: "j-key" }, k + ": "));
      ES.appendText(pre, (typeof x === "string" ? x : JSON.stringify(x)) + "\n");
    }
    return pre;
  }
  if (v && typeof v === "object") return ES.jsonPre(v);
  if (typeof args === "string") return ES.el("pre", { className: "out" }, args);
  return args === undefined ? ES.el("span", { className: "note" }, "none") : ES.jsonPre(args);
};

const resultNode = (content) => {
  const text = resultText(content);
  if (text != null) return ES.el("pre", { className: "out" }, text);
  return ES.jsonPre(content === undefined ? null : content);
};

// The label of a user message's kind ("command_output" -> "command output").
const kindLabel = (k) => String(k).replace(/[_-]+/g, " ");

// "model · 1,234 in · 56 out" of an assistant message's usage, where recorded.
const usageNote = (u) => {
  if (!u || typeof u !== "object") return "";
  const bits = [];
  if (typeof u.model === "string") bits.push(u.model);
  const n = (k) => (typeof u[k] === "number" ? u[k] : null);
  // input counts the cached prompt too (read from or written to the cache)
  const base = n("input_tokens") ?? n("prompt_tokens"), out = n("output_tokens") ?? n("completion_tokens");
  const inp = base == null ? null : base + (n("cache_read_tokens") || 0) + (n("cache_creation_tokens") || 0);
  if (inp != null) bits.push(ES.num(inp) + " in");
  if (out != null) bits.push(ES.num(out) + " out");
  return bits.join(" · ");
};

const headTime = (ts, seq) => ES.el("span", { className: "when", title: `${ES.when(ts)} · seq ${seq}` }, ES.time(ts));

const tools = (ctx, b) => ES.el("span", { className: "tools" },
  ES.el("button", { className: "small", title: "The raw events as stored", onclick: () => ctx.showRaw(b) }, "{ } JSON"),
  ES.el("button", { className: "small", title: "The chat messages the model had been sent up to here (the projection)",
    onclick: () => ctx.showContext(b) }, "What the model saw"));

function renderCall(ctx, call, live) {
  let state;
  if (call.result) state = ES.el("span", { className: "lat", title: "latency: result ts − call ts" }, ES.dur(call.result.ts - call.ts));
  else if (call.dangling || !live) state = ES.el("span", { className: "lat badge interrupted" }, "no result");
  else state = ES.el("span", { className: "lat badge running" }, "waiting for result…");
  const el = ES.el("div", { className: "call" + (call.error ? " error" : "") },
    ES.el("div", { className: "call-head" },
      ES.el("span", { className: "tool-tag" }, "tool"), ES.el("span", { className: "name" }, call.name == null ? "(no name)" : String(call.name)),
      ES.el("span", { className: "note mono" }, call.id == null ? "" : String(call.id)),
      call.error ? ES.el("span", { className: "badge interrupted" }, "error") : null,
      state),
    ES.el("div", { className: "call-sec" }, ES.el("div", { className: "label" }, "Arguments"), argsNode(call.args, call.name, ctx.conversation)));
  const sub = ctx.subagent && call.id != null ? ctx.subagent(call.id) : null;
  if (sub) el.querySelector(".call-head").appendChild(ES.el("a", { className: "sublink", href: "/session?id=" + encodeURIComponent(sub),
    title: ES.plain(sub) }, "subagent session →"));
  if (call.result) {
    el.appendChild(ES.el("div", { className: "call-sec result" },
      ES.el("div", { className: "label" }, call.error ? "Result (error)" : "Result", " · ", headTime(call.result.ts, call.result.seq)),
      resultNode(call.result.payload.content)));
  }
  return el;
}

// The element of one block; `ctx` gives the buttons' actions, and `ctx.active()` says whether
// the session may still be running (followed live, last event under two minutes ago): an
// open turn or a call without its result is then "in progress", otherwise "not ended".
function renderBlock(ctx, b) {
  const item = document.createElement("div");
  item.className = "item";
  item.dataset.seq = b.seq;
  item.dataset.kind = b.kind;
  let body;
  switch (b.kind) {
    case "turn":
      body = ES.el("div", { className: "divider turn" }, `Turn ${b.n}`, ES.el("span", { className: "note" }, ES.when(b.ts)),
        b.end ? ES.el("span", { className: "dur" }, ES.dur(b.end.ts - b.ts))
              : ES.el("span", { className: "open" }, ctx.active() ? "in progress" : "not ended"));
      break;
    case "turn-end":
      body = ES.el("div", { className: "divider" }, b.start ? `Turn ${b.start.n} ended` : "turn ended",
        b.start ? ES.el("span", { className: "dur" }, "after " + ES.dur(b.ts - b.start.ts)) : null);
      break;
    case "step":
      body = ES.el("div", { className: "divider" }, `Step ${b.step ?? ""}`,
        b.end ? ES.el("span", { className: "dur" }, ES.dur(b.end.ts - b.ts)) : ES.el("span", { className: "open" }, ctx.active() ? "running" : "not ended"));
      break;
    case "step-end": {
      const n = b.toolCalls;
      body = ES.el("div", { className: "divider" }, `Step ${b.step ?? ""} done`,
        b.start ? ES.el("span", { className: "dur" }, ES.dur(b.ts - b.start.ts)) : null,
        typeof n === "number" ? ES.el("span", null, `${n} tool call${n === 1 ? "" : "s"}`) : null);
      break;
    }
    case "user": {
      const text = ES.el("div", { className: "text" });
      const typed = !b.userKind || b.userKind === "command";
      contentNodes(b.content, text, ctx.conversation && typed);
      const head = ES.el("div", { className: "msg-head" }, ES.el("span", { className: "role" }, "user"),
        b.userKind ? ES.el("span", { className: "kind", title: "written by the agent program, not typed (kind " + ES.plain(b.userKind) + ")" }, kindLabel(b.userKind)) : null,
        headTime(b.ts, b.seq), tools(ctx, b));
      if (ctx.conversation && !typed) { // not typed by a person: folded, muted
        const det = ES.el("details", { className: "msg user aside", open: !!b.open,
          ontoggle: () => { b.open = det.open; ctx.relayout(); } }, ES.el("summary", null, head), text);
        body = det;
      } else body = ES.el("div", { className: "msg user" }, head, text);
      break;
    }
    case "thinking": {
      const label = b.text != null ? "thinking" : `encrypted reasoning, ${ES.num(b.bytes)} bytes`;
      const det = ES.el("details", { className: "thinking", open: !!b.open, ontoggle: () => { b.open = det.open; ctx.relayout(); } },
        ES.el("summary", null, ES.el("span", { className: "role" }, label), headTime(b.ts, b.seq),
          b.text != null ? ES.el("span", { className: "note preview" }, b.text.replace(/\*\*|__|`/g, "").replace(/\s+/g, " ").slice(0, 120)) : null));
      if (b.text != null) textNodes(det.appendChild(ES.el("div", { className: "text" })), b.text, true);
      body = det;
      break;
    }
    case "compaction":
      body = ES.el("div", { className: "divider compaction" }, "Conversation compacted", ES.el("span", { className: "note" }, ES.when(b.ts)),
        ES.el("span", { className: "note" }, "the model is sent only what follows"));
      break;
    case "hidden": {
      const counts = new Map();
      for (const ev of b.evs) counts.set(ev.type, (counts.get(ev.type) || 0) + 1);
      const what = [...counts].map(([t, n]) => `${n} ${t}`).join(", ");
      const toggle = ES.el("button", { className: "link hidden-toggle", onclick: () => { b.open = !b.open; b.sv++; b.v++; ctx.relayout(); } },
        `${b.open ? "▾" : "▸"} ${b.evs.length} hidden event${b.evs.length === 1 ? "" : "s"}: ${what}`);
      body = ES.el("div", { className: "hidden-run" }, toggle);
      if (b.open) {
        const SHOWN = 200;
        for (const ev of b.evs.slice(0, SHOWN)) body.appendChild(ES.el("div", { className: "msg other" },
          ES.el("div", { className: "msg-head" }, ES.el("span", { className: "role mono" }, ev.type), headTime(ev.ts, ev.seq)), ES.jsonPre(ev.payload)));
        if (b.evs.length > SHOWN) body.appendChild(ES.el("p", { className: "note" }, `… and ${ES.num(b.evs.length - SHOWN)} more: the raw view shows every event`));
      }
      break;
    }
    case "assistant": {
      const text = ES.el("div", { className: "text" + (b.final ? "" : " streaming") });
      text.dataset.chunks = b.chunks;
      if (b.final) contentNodes(b.content, text, ctx.conversation); else appendLong(text, b.text);
      const note = b.chunks ? `${ES.num(b.chunks)} chunk${b.chunks === 1 ? "" : "s"}` : "";
      const usage = usageNote(b.usage);
      body = ES.el("div", { className: "msg assistant" },
        ES.el("div", { className: "msg-head" }, ES.el("span", { className: "role" }, "assistant"), headTime(b.ts, b.seq),
          note ? ES.el("span", { className: "note" }, note) : null,
          b.final && b.msg && b.chunks ? ES.el("span", { className: "note" }, "streamed in " + ES.dur(b.msg.ts - b.ts)) : null,
          usage ? ES.el("span", { className: "note usage" }, usage) : null,
          tools(ctx, b)),
        text, ...b.calls.map((c) => renderCall(ctx, c, ctx.active())));
      item._text = text;
      item._textLen = b.final ? -1 : b.text.length;
      break;
    }
    default: {
      const ev = b.ev;
      body = ES.el("div", { className: "msg other" },
        ES.el("div", { className: "msg-head" }, ES.el("span", { className: "role mono" }, ev.type),
          headTime(b.ts, b.seq), b.orphan ? ES.el("span", { className: "badge interrupted" }, "answers no open call") : null, tools(ctx, b)),
        ES.jsonPre(ev.payload));
    }
  }
  item.appendChild(body);
  item._sv = b.sv;
  return item;
}

// Only the text of a streaming message grew: append it instead of building the block again.
function patchBlock(item, b) {
  if (b.kind !== "assistant" || item._sv !== b.sv || item._textLen < 0) return false;
  const delta = b.text.slice(item._textLen);
  const text = item._text;
  let seg = text.lastElementChild;
  if (!seg || (seg._len > SEG && b.text[item._textLen - 1] === "\n")) seg = segment(text, "");
  const lastNode = seg.lastChild;
  ES.UNSAFE.lastIndex = 0;
  if (lastNode && lastNode.nodeType === 3 && !ES.UNSAFE.test(delta)) lastNode.appendData(delta);
  else ES.appendText(seg, delta);
  seg._len += delta.length;
  item._textLen = b.text.length;
  text.dataset.chunks = b.chunks;
  const note = item.querySelector(".msg-head .note");
  if (note) note.textContent = `${ES.num(b.chunks)} chunk${b.chunks === 1 ? "" : "s"}`;
  return true;
}

// --- the virtualised list --------------------------------------------------------------

class VList {
  constructor(scroller, canvas, ctx) {
    this.scroller = scroller;
    this.canvas = canvas;
    this.ctx = ctx;
    this.items = [];
    this.els = new Map(); // index -> element
    this.h = [];
    this.off = [0];
    this.dirtyFrom = 0;
    this.stick = false;
    this.targetItem = null; // the item marked as the one asked for (?seq=N, find, j/k)
    this.raf = 0;
    this.width = 0;
    // At the bottom, the list sticks to it (follows what is added); scrolling up lets go.
    scroller.addEventListener("scroll", () => {
      this.stick = scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - 40;
      this.schedule();
    }, { passive: true });
    new ResizeObserver(() => {
      const w = canvas.clientWidth;
      if (w !== this.width) { this.width = w; this.h = []; this.dirtyFrom = 0; }
      this.schedule();
    }).observe(scroller);
  }

  setItems(items) { this.items = items; this.clear(); this.schedule(); }
  clear() { for (const el of this.els.values()) el.remove(); this.els.clear(); this.h = []; this.dirtyFrom = 0; }
  schedule() { if (!this.raf) this.raf = requestAnimationFrame(() => { this.raf = 0; this.update(); }); }

  estimate(b) {
    const cpl = Math.max(20, (this.width || 800) / 8.3);
    const lines = (s) => {
      if (!s) return 1;
      if (s.length > 20000) return s.length / cpl + (s.split("\n").length - 1);
      let n = 0;
      for (const line of s.split("\n")) n += Math.max(1, Math.ceil(line.length / cpl));
      return n;
    };
    switch (b.kind) {
      case "turn": case "turn-end": case "step": case "step-end": case "compaction": return 34;
      case "thinking": return b.open ? 60 + 22 * lines(b.text || "") : 36;
      case "hidden": return b.open ? 30 + b.evs.slice(0, 200).length * 120 : 24;
      case "user": return b.userKind && b.userKind !== "command" && this.ctx.conversation && !b.open ? 40
        : 70 + 22 * lines(typeof b.content === "string" ? b.content : JSON.stringify(b.content ?? ""));
      case "assistant": {
        let h = 70 + 22 * lines(b.final ? (typeof b.content === "string" ? b.content : JSON.stringify(b.content ?? "")) : b.text);
        for (const c of b.calls) h += 110 + Math.min(420, 19 * lines(String(c.args ?? ""))) + (c.result ? Math.min(420, 19 * lines(String(c.result.payload.content ?? ""))) : 0);
        return h;
      }
      default: return 90 + Math.min(600, 19 * lines(JSON.stringify(b.ev.payload, null, 2)));
    }
  }

  offsets() {
    const n = this.items.length, h = this.h, off = this.off;
    while (h.length < n) h.push(this.estimate(this.items[h.length]));
    // off[i] is the top of item i; off[0..dirtyFrom] are current (items added or re-measured
    // since then move dirtyFrom back).
    if (this.dirtyFrom < n) {
      off.length = n + 1;
      for (let i = this.dirtyFrom; i < n; i++) off[i + 1] = off[i] + h[i];
      this.dirtyFrom = n;
    } else off.length = n + 1;
    return off;
  }

  find(y) { // the last index whose top is <= y
    const off = this.off, n = this.items.length;
    let lo = 0, hi = n - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (off[mid] <= y) lo = mid; else hi = mid - 1; }
    return Math.max(0, lo);
  }

  scrollTo(y) { this.scroller.scrollTop = y; }

  // The index of the marked item now (items come and go as the log loads), or -1.
  get target() { return this.targetItem === null ? -1 : this.items.indexOf(this.targetItem); }

  // Scroll item i to the top and mark it (class "target") until another is revealed.
  reveal(i) {
    const off = this.offsets();
    this.canvas.style.height = off[this.items.length] + "px"; // tall enough to scroll that far
    this.stick = false;
    this.targetItem = this.items[i];
    this.scrollTo(off[i]);
    this.schedule();
  }

  update() {
    const n = this.items.length, sc = this.scroller;
    for (let pass = 0; pass < 4; pass++) {
      const off = this.offsets();
      this.canvas.style.height = off[n] + "px";
      if (this.stick) this.scrollTo(off[n]);
      const top = sc.scrollTop, H = sc.clientHeight || 800;
      const first = n ? this.find(top - 400) : 0, last = n ? this.find(top + H + 400) : -1;
      for (const [i, el] of this.els) if (i < first || i > last || i >= n) { el.remove(); this.els.delete(i); }
      for (let i = first; i <= last; i++) {
        const b = this.items[i];
        let el = this.els.get(i);
        if (el && el._b === b && el._v === b.v) { /* current */ }
        else if (el && el._b === b && patchBlock(el, b)) { el._v = b.v; }
        else {
          const fresh = renderBlock(this.ctx, b);
          fresh._b = b; fresh._v = b.v;
          if (el) el.replaceWith(fresh); else this.canvas.appendChild(fresh);
          el = fresh;
          this.els.set(i, el);
        }
        el.style.top = off[i] + "px";
        el.classList.toggle("target", b === this.targetItem);
      }
      let above = 0, changed = false;
      for (let i = first; i <= last; i++) {
        const el = this.els.get(i), hh = el.offsetHeight;
        if (hh !== this.h[i]) {
          if (off[i] + this.h[i] <= top) above += hh - this.h[i];
          this.h[i] = hh;
          if (i < this.dirtyFrom) this.dirtyFrom = i;
          changed = true;
        }
      }
      if (!changed) break;
      if (above && !this.stick) {
        const off2 = this.offsets();
        this.canvas.style.height = off2[n] + "px";
        this.scrollTo(top + above);
      }
    }
  }

  // Re-render every visible block (e.g. live state changed), keeping heights.
  refresh() { for (const el of this.els.values()) el._v = -1; this.schedule(); }
}
