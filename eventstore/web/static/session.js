// The session page: load the log, follow it live, replay it at its recorded pace.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const sid = new URLSearchParams(location.search).get("id");
  const targetSeq = parseInt(new URLSearchParams(location.search).get("seq") ?? "", 10); // ?seq=N: show that event
  const targetCall = new URLSearchParams(location.search).get("call"); // ?call=ID: show that tool call
  const rawView = new URLSearchParams(location.search).get("view") === "raw";
  const q = (extra) => "session=" + encodeURIComponent(sid) + (extra || "");
  const events = []; // every event known, by seq
  const chat = new Chat(!rawView);
  const ctx = {
    conversation: !rawView,
    relayout: () => list.schedule(),
    // The session id of the subagent a tool call started (the importer's session/info
    // "subagent/<call id>"), or null.
    subagent: (callId) => {
      const v = summary && summary.meta && summary.meta["subagent/" + callId];
      return typeof v === "string" ? v : null;
    },
    // Whether an open turn or call may still end: replaying before the end of the log, or
    // live with the last event under two minutes old.
    active: () => (replay && replay.k < events.length) ||
      (events.length > 0 && Date.now() / 1000 - events[events.length - 1].ts < 120),
    showRaw: (b) => showRaw(b),
    showContext: (b) => showContext(b),
  };
  const list = new VList($("log"), $("canvas"), ctx);
  list.setItems(chat.blocks);
  let summary = null;
  let replay = null; // the Replay while replaying
  let started = false; // the first page is shown and the stream brings the rest

  if (sid == null) { $("notice").textContent = "No session given: open one from the sessions list."; return; }
  $("sid").textContent = ES.plain(sid);
  $("sid").title = ES.plain(sid);
  document.title = ES.plain(sid).slice(0, 60) + " · eventstore";
  $("download").href = "/api/export?" + q();

  // --- header ----------------------------------------------------------------------------
  const renderStats = () => {
    const n = events.length, first = n ? events[0].ts : null, last = n ? events[n - 1].ts : null;
    const s = summary || {};
    const stat = (label, value) => ES.el("span", null, ES.el("b", null, value), " " + label);
    $("stats").replaceChildren(
      stat("events", ES.num(n)), stat("messages", ES.num(s.messages)), stat("tool calls", ES.num(s.tool_calls)),
      n ? ES.el("span", { title: `${ES.when(first)} → ${ES.when(last)}` }, ES.el("b", null, ES.dur(last - first) || "0 ms"), " long") : null);
    if (summary) $("badge").replaceChildren(ES.badge(summary));
    renderRelations();
    renderHidden();
  };

  // The title, and the links to this session's parent (a subagent's Task call, a fork's
  // fork point) or to the session it continued in.
  const renderRelations = () => {
    const meta = (summary && summary.meta) || {};
    const own = typeof meta.title === "string" && meta.title ? meta.title : null;
    const title = own || (summary && typeof summary.first_prompt === "string" ? summary.first_prompt : null);
    $("title").textContent = title ? ES.plain(title) : "";
    $("title").classList.toggle("prompt", !own);
    $("title").title = own ? "title" : "the first prompt (no title recorded)";
    if (title) document.title = ES.plain(title).slice(0, 60) + " · eventstore";
    const links = [];
    const parent = typeof meta.parent_session === "string" ? meta.parent_session : null;
    if (parent) {
      const at = typeof meta.tool_call_id === "string" ? "&call=" + encodeURIComponent(meta.tool_call_id)
        : Number.isInteger(meta.parent_seq) ? "&seq=" + meta.parent_seq : "";
      const label = meta.relation === "subagent" ? "↑ parent session, at the call that started this subagent"
        : meta.relation === "fork" ? `↑ forked from its parent${Number.isInteger(meta.parent_seq) ? " at seq " + meta.parent_seq : ""}` : "↑ parent session";
      links.push(ES.el("a", { id: "parentlink", href: "/session?id=" + encodeURIComponent(parent) + at, title: ES.plain(parent) }, label));
    }
    if (typeof meta.continued_in === "string")
      links.push(ES.el("a", { href: "/session?id=" + encodeURIComponent(meta.continued_in), title: ES.plain(meta.continued_in) }, "continued in a fork →"));
    $("relations").replaceChildren(...links);
  };

  // "212 hidden: 180 claude/progress, ..." and the view toggle.
  const renderHidden = () => {
    const el = $("hiddeninfo");
    if (!chat.conversation) { el.textContent = "raw view: every event"; return; }
    if (!chat.hiddenTotal) { el.textContent = ""; return; }
    const top = [...chat.hidden].sort((a, b) => b[1] - a[1]);
    const what = top.slice(0, 3).map(([t, n]) => `${ES.num(n)} ${t.replace(/^(claude|codex)\//, "")}`).join(", ");
    el.textContent = `${ES.num(chat.hiddenTotal)} bookkeeping events hidden (${what}${top.length > 3 ? ", …" : ""})`;
    el.title = top.map(([t, n]) => `${n} ${t}`).join("\n");
  };
  const setView = (conversation) => {
    chat.conversation = ctx.conversation = conversation;
    $("viewmode").textContent = conversation ? "Show all events" : "Conversation view";
    $("viewmode").setAttribute("aria-pressed", String(!conversation));
    document.body.dataset.view = conversation ? "conversation" : "raw";
    const p = new URLSearchParams(location.search);
    if (conversation) p.delete("view"); else p.set("view", "raw");
    history.replaceState(null, "", "?" + p);
    if (replay) replay.seek(replay.now());
    else { chat.reset(); for (const ev of events) chat.apply(ev); list.setItems(chat.blocks); }
    renderHidden();
  };
  let summaryTimer = null;
  const refreshSummary = () => {
    if (summaryTimer) return;
    summaryTimer = setTimeout(async () => {
      summaryTimer = null;
      try { summary = await ES.getJSON("/api/session?" + q()); } catch (e) { /* keep the last */ }
      renderStats();
    }, summary ? 500 : 0);
  };

  // --- the side panel ----------------------------------------------------------------------
  const openPanel = (title, ...nodes) => {
    $("panel-title").textContent = title;
    $("panel-body").replaceChildren(...nodes);
    $("panel").hidden = false;
    list.schedule();
  };
  $("panel-close").addEventListener("click", () => { $("panel").hidden = true; list.schedule(); });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") $("panel").hidden = true; });

  const eventJSON = (ev) => ({ type: ev.type, seq: ev.seq, ts: ev.ts, ...ev.payload });
  function showRaw(b) {
    const seqs = [];
    if (b.kind === "assistant") {
      const firstChunk = b.chunks ? b.seq : null;
      if (firstChunk != null) for (let s = firstChunk; s <= Math.min(b.last, firstChunk + 4) && s < events.length; s++)
        if (events[s].type === "assistant/chunk") seqs.push(s);
      if (b.msg) seqs.push(b.msg.seq);
      for (const c of b.calls) if (c.result) seqs.push(c.result.seq);
    } else seqs.push(b.seq);
    const nodes = [];
    for (const s of [...new Set(seqs)].sort((x, y) => x - y)) {
      nodes.push(ES.el("div", { className: "label note" }, `seq ${s} · ${events[s].type} · ${ES.when(events[s].ts)}`));
      nodes.push(ES.jsonPre(eventJSON(events[s])));
    }
    if (b.kind === "assistant" && b.chunks > 5)
      nodes.splice(10, 0, ES.el("p", { className: "note" }, `… and ${ES.num(b.chunks - 5)} more chunks (download the JSONL for all)`));
    openPanel(`Raw events (seq ${b.seq}${b.last > b.seq ? "–" + b.last : ""})`, ...nodes);
  }

  async function showContext(b) {
    const upto = b.kind === "assistant" && b.msg ? b.msg.seq - 1 : b.last;
    openPanel(`What the model saw (seq ≤ ${upto})`, ES.el("p", { className: "note" }, "Loading…"));
    try {
      const r = await fetch("/api/messages?" + q("&upto=" + upto));
      if (!r.ok) throw new Error(((await r.json().catch(() => null)) || {}).error || r.statusText);
      const msgs = await r.json();
      const intro = ES.el("p", { className: "note" },
        `${msgs.length} message${msgs.length === 1 ? "" : "s"}: the projection of the log up to seq ${upto}` +
        (b.kind === "assistant" && b.msg ? ", the request this answer was written for." : "."));
      const items = msgs.map((m, i) => ES.el("div", { className: "ctx-msg " + (typeof m.role === "string" ? m.role : "") },
        ES.el("div", { className: "role" }, `${i + 1}. ${m.role}`), ES.jsonPre(m)));
      openPanel(`What the model saw (seq ≤ ${upto})`, intro, ...items);
    } catch (e) {
      openPanel("What the model saw", ES.el("p", { className: "note" }, "Cannot load: " + e.message));
    }
  }

  // --- loading and following --------------------------------------------------------------
  const accept = (batch) => {
    let added = 0;
    for (const ev of batch) {
      if (ev.seq !== events.length) continue; // already known (a reconnect), or out of order
      events.push(ev);
      added++;
      if (!replay) chat.apply(ev);
    }
    // While the stored events stream in after the first screen, the page is drawn once at
    // the end ("caught-up"), not after every batch.
    if (added && (document.body.dataset.loaded || !started)) {
      if (!replay) list.schedule(); else replay.grew();
      renderStats();
      $("notice").hidden = events.length > 0;
    }
    return added;
  };

  // The stream sends the stored events after `after` in batches (parsed and shown as they
  // arrive), says "caught-up", then sends each new event as it is committed.
  const follow = () => {
    const live = $("live");
    const es = new EventSource("/api/stream?" + q("&after=" + (events.length - 1)));
    es.addEventListener("open", () => { live.className = "live on"; live.textContent = "live"; });
    es.addEventListener("error", () => { live.className = "live off"; live.textContent = "reconnecting"; });
    es.addEventListener("events", (m) => { if (accept(JSON.parse(m.data)) && document.body.dataset.loaded) refreshSummary(); });
    es.addEventListener("caught-up", () => {
      if (document.body.dataset.loaded) return; // a reconnect
      if (ctx.active()) list.stick = true; // a running session: follow its end
      list.schedule();
      renderStats();
      $("notice").hidden = events.length > 0;
      if (!events.length) $("notice").textContent = "No events yet: they appear here as they are committed.";
      $("replay").disabled = false;
      if (targetCall) showCall(targetCall);
      else if (targetSeq >= 0) showEvent(targetSeq);
      performance.mark("eventstore:loaded");
      document.body.dataset.loaded = "1";
    });
  };

  // ?seq=N: scroll to the block that holds event N (a tool result: its call's block;
  // an event no block holds alone, such as a chunk: the block it belongs to) and mark it.
  const holds = (b, n) => b.seq === n || (b.msg && b.msg.seq === n) ||
    (b.calls && b.calls.some((c) => c.result && c.result.seq === n)) || (b.evs && b.evs.some((e) => e.seq === n));
  const showEvent = (n) => {
    const blocks = chat.blocks;
    let i = blocks.findIndex((b) => holds(b, n));
    if (i < 0) for (let k = 0; k < blocks.length && blocks[k].seq <= n; k++) i = k;
    if (i < 0) return;
    if (blocks[i].kind === "hidden" && !blocks[i].open) { blocks[i].open = true; blocks[i].sv++; blocks[i].v++; }
    list.reveal(i);
  };
  const showCall = (id) => {
    const i = chat.blocks.findIndex((b) => b.calls && b.calls.some((c) => c.id === id));
    if (i >= 0) list.reveal(i);
  };

  // A first small page shows the top at once; the stream brings the rest.
  const load = async () => {
    const first = ES.getJSON("/api/events?" + q("&after=-1&limit=500"));
    first.catch(() => {}); // a missing session: the summary's error below says so
    try {
      summary = await ES.getJSON("/api/session?" + q());
    } catch (e) {
      $("notice").textContent = e.message;
      document.body.dataset.loaded = "error";
      const live = $("live");
      live.className = "live off";
      live.textContent = "not following";
      $("viewmode").disabled = true;
      $("download").removeAttribute("href"); // (nothing to download)
      return;
    }
    chat.showSteps = !(summary.meta && typeof summary.meta.source === "string"); // imported: steps are bookkeeping
    renderStats();
    accept((await first).events);
    performance.mark("eventstore:first-page");
    started = true;
    follow();
  };

  // --- replay -------------------------------------------------------------------------------
  const IDLE_CAP_MS = 500;
  // The replay clock: m:ss.s, h:mm:ss past an hour, "N d hh:mm:ss" past a day.
  const fmt = (ms) => {
    const s = ms / 1000;
    if (s < 3600) return `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, "0")}`;
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    const hms = `${ES.pad2(h)}:${ES.pad2(m)}:${ES.pad2(sec)}`;
    return d ? `${d} d ${hms}` : `${h}:${ES.pad2(m)}:${ES.pad2(sec)}`;
  };

  class Replay {
    constructor() {
      this.k = 0; // events[0..k) are shown
      this.v = 0; // the playhead, ms of (virtual) session time
      this.speed = parseFloat($("speed").value);
      this.skip = $("skipidle").checked;
      this.playing = false;
      this.timer = 0;
      this.vt = [];
      this.times();
    }
    // vt[i]: when event i happens, in ms after the first event, with long gaps cut when skipping.
    times() {
      const vt = this.vt = new Float64Array(events.length);
      for (let i = 1; i < events.length; i++) {
        let gap = (events[i].ts - events[i - 1].ts) * 1000;
        if (!(gap > 0)) gap = 0;
        if (this.skip && gap > IDLE_CAP_MS) gap = IDLE_CAP_MS;
        vt[i] = vt[i - 1] + gap;
      }
    }
    get total() { return this.vt.length ? this.vt[this.vt.length - 1] : 0; }
    grew() { this.times(); this.clock(); if (this.playing && !this.timer) this.tick(); }
    now() { return this.playing ? this.v0 + (performance.now() - this.w0) * this.speed : this.v; }
    play() {
      if (this.k >= events.length) this.seek(0);
      this.playing = true; this.v0 = this.v; this.w0 = performance.now();
      this.controls(); this.tick();
    }
    pause() {
      this.v = this.now(); this.playing = false;
      clearTimeout(this.timer); this.timer = 0; this.controls(); this.clock();
    }
    setSpeed(x) { const v = this.now(); this.speed = x; this.v = this.v0 = v; this.w0 = performance.now(); if (this.playing) { clearTimeout(this.timer); this.tick(); } }
    setSkip(on) {
      // keep the playhead on the same event
      const v = this.now(), i = Math.max(0, this.k - 1), into = this.k ? Math.max(0, v - this.vt[i]) : 0;
      this.skip = on; this.times();
      this.v = this.v0 = Math.min(this.total, this.k ? this.vt[i] + (on ? Math.min(into, IDLE_CAP_MS) : into) : 0);
      this.w0 = performance.now();
      if (this.playing) { clearTimeout(this.timer); this.tick(); }
      this.clock();
    }
    seek(v) {
      v = Math.max(0, Math.min(v, this.total));
      let lo = 0, hi = events.length; // first event after v
      while (lo < hi) { const mid = (lo + hi) >> 1; if (this.vt[mid] <= v) lo = mid + 1; else hi = mid; }
      chat.reset();
      for (let i = 0; i < lo; i++) chat.apply(events[i]);
      this.k = lo;
      list.setItems(chat.blocks);
      list.stick = true;
      this.v = this.v0 = v; this.w0 = performance.now();
      if (this.playing) { clearTimeout(this.timer); this.tick(); } else this.controls(); // no longer "ended"
      this.clock();
    }
    tick() {
      this.timer = 0;
      const v = this.now();
      let k = this.k;
      while (k < events.length && this.vt[k] <= v) chat.apply(events[k++]);
      if (k !== this.k) { this.k = k; list.schedule(); }
      this.clock(v);
      if (k >= events.length) {
        this.v = this.total; this.playing = false; this.controls(); this.clock();
        $("replaystate").textContent = "end of the log: Play again, or Exit replay for the live view";
        document.body.dataset.replay = "ended";
        return;
      }
      const wait = Math.max(0, (this.vt[k] - v) / this.speed);
      this.timer = setTimeout(() => this.tick(), Math.min(wait, 100));
    }
    clock(v = this.now()) {
      $("clock").textContent = `${fmt(Math.min(v, this.total))} / ${fmt(this.total)}`;
      if (!this.dragging) $("scrub").value = this.total ? Math.round(1000 * Math.min(v, this.total) / this.total) : 0;
    }
    controls() {
      $("playpause").textContent = this.playing ? "Pause" : (this.k >= events.length ? "Play again" : "Resume");
      $("replaystate").textContent = this.playing ? `playing at ${this.speed}×` : "paused";
      document.body.dataset.replay = this.playing ? "playing" : "paused";
    }
    stop() { clearTimeout(this.timer); this.playing = false; }
  }

  const startReplay = () => {
    if (replay) replay.stop();
    // A gap of an hour or more (a session resumed the next day): skip idle gaps, unless chosen otherwise.
    if (!skipChosen) {
      let gap = 0;
      for (let i = 1; i < events.length; i++) gap = Math.max(gap, events[i].ts - events[i - 1].ts);
      $("skipidle").checked = gap >= 3600;
    }
    replay = new Replay();
    $("replaybar").hidden = false;
    $("replay").textContent = "↺ Restart";
    replay.seek(0);
    replay.play();
  };
  const exitReplay = () => {
    if (!replay) return;
    replay.stop();
    replay = null;
    $("replaybar").hidden = true;
    $("replay").textContent = "▶ Replay";
    delete document.body.dataset.replay;
    chat.reset();
    for (const ev of events) chat.apply(ev);
    list.setItems(chat.blocks);
  };
  $("viewmode").addEventListener("click", () => setView(!chat.conversation));
  document.body.dataset.view = chat.conversation ? "conversation" : "raw";
  if (!chat.conversation) $("viewmode").textContent = "Conversation view";
  $("replay").addEventListener("click", startReplay);
  $("exitreplay").addEventListener("click", exitReplay);
  $("playpause").addEventListener("click", () => { if (!replay) return; if (replay.playing) replay.pause(); else replay.play(); });
  $("speed").addEventListener("change", () => replay && replay.setSpeed(parseFloat($("speed").value)));
  let skipChosen = false;
  $("skipidle").addEventListener("change", () => { skipChosen = true; if (replay) replay.setSkip($("skipidle").checked); });
  const scrub = $("scrub");
  scrub.addEventListener("pointerdown", () => { if (replay) replay.dragging = true; });
  scrub.addEventListener("pointerup", () => { if (replay) replay.dragging = false; });
  let seekFrame = 0, seekTo = 0; // a drag fires many inputs: rebuild the view once a frame at most
  scrub.addEventListener("input", () => {
    if (!replay) return;
    seekTo = scrub.value / 1000;
    if (!seekFrame) seekFrame = requestAnimationFrame(() => { seekFrame = 0; if (replay) replay.seek(replay.total * seekTo); });
  });
  // Keys: j/k the next/previous message, / find, space pause or resume a replay.
  const MESSAGE_KINDS = new Set(["user", "assistant"]);
  const stepMessage = (dir) => {
    const blocks = chat.blocks;
    let i = list.target >= 0 && list.target < blocks.length ? list.target : list.find(list.scroller.scrollTop) - (dir > 0 ? 1 : 0);
    for (i += dir; i >= 0 && i < blocks.length; i += dir) if (MESSAGE_KINDS.has(blocks[i].kind)) { list.reveal(i); return; }
  };
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT" || e.target.tagName === "TEXTAREA" ||
        e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/") { e.preventDefault(); $("find").focus(); $("find").select(); }
    else if (e.key === "j") stepMessage(1);
    else if (e.key === "k") stepMessage(-1);
    else if (e.key === " " && replay) { e.preventDefault(); $("playpause").click(); }
  });

  // --- find in the session: the search API's hits for this session, one at a time ------------
  let found = { q: "", seqs: [], at: -1 };
  const showFound = () => {
    const n = found.seqs.length;
    $("findcount").textContent = !found.q ? "" : n ? `${found.at + 1} / ${n}${n >= 200 ? "+" : ""}` : "no match";
    if (n && found.at >= 0) {
      const seq = found.seqs[found.at];
      if (seq < events.length) showEvent(seq);
    }
  };
  const find = async (dir) => {
    const text = $("find").value.trim();
    if (!text) { found = { q: "", seqs: [], at: -1 }; showFound(); return; }
    if (text !== found.q) {
      try {
        const r = await ES.getJSON("/api/search?" + new URLSearchParams({ q: text, session: sid, limit: 200 }));
        if ($("find").value.trim() !== text) return; // typed on meanwhile
        found = { q: text, seqs: [...new Set(r.hits.map((h) => h.seq))].sort((a, b) => a - b), at: -1 };
      } catch (e) {
        found = { q: "", seqs: [], at: -1 };
        $("findcount").textContent = e.message;
        return;
      }
    }
    const n = found.seqs.length;
    if (n) found.at = found.at < 0 ? (dir > 0 ? 0 : n - 1) : (found.at + dir + n) % n;
    document.body.dataset.found = String(n);
    showFound();
  };
  $("find").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); find(e.shiftKey ? -1 : 1); }
    else if (e.key === "Escape") { $("find").blur(); }
  });
  $("findnext").addEventListener("click", () => find(1));
  $("findprev").addEventListener("click", () => find(-1));

  ES.info();
  load();
})();
