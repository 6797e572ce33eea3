// The sessions page: a sorted, filtered, paged table that follows new commits.
"use strict";

(() => {
  const PAGE = 50;
  const params = new URLSearchParams(location.search);
  const state = {
    sort: params.get("sort") || "last_ts",
    order: params.get("order") || "desc",
    q: params.get("q") || "",
    state: params.get("state") || "",
    offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
  };
  let matching = 0, seen = new Map(), inflight = false, again = false, contentSessions = 0, lastData = null;
  const $ = (id) => document.getElementById(id);
  $("filter").value = state.q;

  const keepInUrl = () => {
    const p = new URLSearchParams();
    if (state.sort !== "last_ts") p.set("sort", state.sort);
    if (state.order !== "desc") p.set("order", state.order);
    if (state.q) p.set("q", state.q);
    if (state.state) p.set("state", state.state);
    if (state.offset) p.set("offset", state.offset);
    const qs = p.toString();
    history.replaceState(null, "", qs ? "?" + qs : location.pathname);
  };

  // The last path component of a project directory (the whole path in the title).
  const project = (cwd) => (cwd ? String(cwd).replace(/\/+$/, "").split("/").pop() || cwd : "");

  const row = (s, fresh) => {
    const href = "/session?id=" + encodeURIComponent(s.id);
    const title = s.title ? ES.el("a", { href, className: "title" + (s.title_from === "prompt" ? " prompt" : ""),
      title: s.title_from === "prompt" ? "the first prompt (no title recorded)" : "title" }, s.title) : null;
    const rel = s.relation ? ES.el("span", { className: "rel " + s.relation }, s.relation === "subagent" ? "subagent" : s.relation) : null;
    const parent = s.parent ? ES.el("a", { className: "parent", href: "/session?id=" + encodeURIComponent(s.parent) +
      (s.tool_call_id ? "&call=" + encodeURIComponent(s.tool_call_id) : Number.isInteger(s.parent_seq) ? "&seq=" + s.parent_seq : ""),
      title: "parent: " + ES.plain(s.parent) }, "↑ parent") : null;
    const link = ES.el("a", { href, className: "sid-link", title: ES.plain(s.id) }, s.id);
    const td = (label, cls, ...c) => ES.el("td", { className: cls || "", dataset: { label } }, ...c);
    const tokens = s.input_tokens != null ? ES.el("span", { title: `${ES.num(s.input_tokens)} in (with cache) · ${ES.num(s.output_tokens)} out` },
      ES.num(s.input_tokens + s.output_tokens)) : "–";
    const tr = ES.el("tr", { className: (fresh ? "fresh " : "") + (s.parent ? "child" : "") },
      td("Session", "sid", ES.el("div", { className: "sess-cell" }, rel, title, parent), ES.el("div", null, link)),
      td("Project", "proj", s.cwd ? ES.el("span", { title: ES.plain(s.cwd) }, project(s.cwd)) : "–"),
      td("Agent · model", "model", ES.el("span", { title: [s.agent, s.model].filter(Boolean).map(ES.plain).join(" · ") }, s.model || s.agent || "–")),
      td("Tokens", "num", tokens),
      td("Events", "num", ES.el("span", { title: `${ES.num(s.messages)} messages · ${ES.num(s.tool_calls)} tool calls` }, ES.num(s.events))),
      td("Started", "when", ES.when(s.first_ts)),
      td("Duration", "num", s.duration == null ? "–" : ES.dur(s.duration) || "0 ms"),
      td("State", "", ES.badge(s)));
    return tr;
  };

  const render = (data) => {
    lastData = data;
    matching = data.matching;
    const rows = $("rows");
    const next = new Map();
    const frag = document.createDocumentFragment();
    for (const s of data.sessions) {
      const before = seen.get(s.id);
      frag.appendChild(row(s, seen.size > 0 && before !== s.events));
      next.set(s.id, s.events);
    }
    seen = next;
    rows.replaceChildren(frag);
    const from = data.sessions.length ? state.offset + 1 : 0, to = state.offset + data.sessions.length;
    $("pageinfo").textContent = `${ES.num(from)}–${ES.num(to)} of ${ES.num(matching)}`;
    // What matched: sessions by their title, project, model or id (the table); the
    // content search below counts its own.
    $("count").textContent = state.q || state.state
      ? `${ES.num(matching)} of ${ES.num(data.total)} sessions by ${state.q ? "title, project, model or id" : "state"}` +
        (state.q && document.body.dataset.searched === state.q.trim() && contentSessions ? ` · ${ES.num(contentSessions)} by content (below)` : "")
      : `${ES.num(data.total)} sessions`;
    $("empty").hidden = data.sessions.length > 0;
    $("empty").textContent = data.total ? (state.q ? "No session's title, project, model or id contains that text" +
      (contentSessions ? "; the sessions whose content matches are below." : ".") : "No session in that state.") :
      "No sessions yet. Run an agent that logs to this database (or `eventstore demo`): it appears here as it starts.";
    $("prev").disabled = $("first").disabled = state.offset === 0;
    $("next").disabled = $("last").disabled = to >= matching;
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.classList.toggle("sorted", th.dataset.sort === state.sort);
      th.classList.toggle("asc", th.dataset.sort === state.sort && state.order === "asc");
      th.classList.toggle("desc", th.dataset.sort === state.sort && state.order === "desc");
    }
    document.body.dataset.loaded = "1";
  };

  // One request at a time; a change meanwhile asks for one more afterwards.
  const load = async () => {
    if (inflight) { again = true; return; }
    inflight = true;
    try {
      const p = new URLSearchParams({ sort: state.sort, order: state.order, q: state.q, state: state.state, offset: state.offset, limit: PAGE });
      const data = await ES.getJSON("/api/sessions?" + p);
      if (data.loading) { // the server is still reading the log (its first seconds)
        $("count").textContent = data.error ? "cannot read the log yet: " + data.error : "Reading the log…";
        setTimeout(load, 300);
        return;
      }
      if (data.sessions.length === 0 && state.offset > 0 && data.matching > 0) {
        state.offset = Math.max(0, Math.floor((data.matching - 1) / PAGE) * PAGE);
        again = true;
      } else render(data);
    } catch (e) {
      $("count").textContent = "cannot load sessions: " + e.message;
    } finally {
      inflight = false;
      if (again) { again = false; load(); }
    }
  };

  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => {
      const key = th.dataset.sort;
      if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
      else { state.sort = key; state.order = ["id", "title", "cwd", "model", "agent"].includes(key) ? "asc" : "desc"; }
      state.offset = 0; seen = new Map(); keepInUrl(); load();
    });
  }
  // Full-text search of the filter's words (/api/search): the sessions whose content
  // matches, each with its matching snippets. Debounced; an answer to an older query is
  // dropped (the request is aborted).
  const HITS = 50;
  let searching = null, searchTimer = null;
  const snippet = (h) => {
    // plain text with the matched ranges as <mark>, built from text nodes
    const out = ES.el("span", { className: "snippet" });
    let at = 0;
    for (const [a, b] of h.marks) {
      if (a < at || b > h.snippet.length) continue;
      if (a > at) ES.appendText(out, h.snippet.slice(at, a));
      out.appendChild(ES.el("mark", null, h.snippet.slice(a, b)));
      at = b;
    }
    if (at < h.snippet.length) ES.appendText(out, h.snippet.slice(at));
    return out;
  };
  const renderHits = (q, hits) => {
    const bySession = new Map();
    for (const h of hits) {
      if (!bySession.has(h.session_id)) bySession.set(h.session_id, []);
      bySession.get(h.session_id).push(h);
    }
    const frag = document.createDocumentFragment();
    for (const [sid, hs] of bySession) {
      const href = "/session?id=" + encodeURIComponent(sid);
      const items = hs.map((h) => ES.el("li", { className: "hit", dataset: { seq: String(h.seq) } },
        ES.el("a", { href: href + "&seq=" + h.seq, className: "where" }, `seq ${h.seq} · ${h.type} · ${ES.when(h.ts)}`), " ", snippet(h)));
      frag.appendChild(ES.el("div", { className: "hitsession", dataset: { session: sid } },
        ES.el("a", { href, className: "sid", title: ES.plain(sid) }, sid),
        ES.el("ul", null, ...items)));
    }
    $("hitlist").replaceChildren(frag);
    $("hitcount").textContent = hits.length
      ? `${ES.num(bySession.size)} session${bySession.size === 1 ? "" : "s"}, ${ES.num(hits.length)}${hits.length >= HITS ? "+" : ""} event${hits.length === 1 ? "" : "s"}`
      : "none";
    $("hits").hidden = false;
    document.body.dataset.searched = q;
    contentSessions = bySession.size;
    if (lastData) render(lastData); // the count line names the content matches too
  };
  const runSearch = async () => {
    searchTimer = null;
    const q = state.q.trim();
    if (searching) searching.abort();
    if (!q) { $("hits").hidden = true; $("hitlist").replaceChildren(); delete document.body.dataset.searched; contentSessions = 0; return; }
    const ctl = searching = new AbortController();
    try {
      const r = await fetch("/api/search?" + new URLSearchParams({ q, limit: HITS }),
                            { headers: { Accept: "application/json" }, signal: ctl.signal });
      const body = await r.json().catch(() => ({}));
      if (ctl !== searching) return;
      if (!r.ok) {
        $("hitlist").replaceChildren(ES.el("p", { className: "note" }, "Cannot search: " + (body.error || r.status)));
        $("hitcount").textContent = "";
        $("hits").hidden = false;
        document.body.dataset.searched = q;
        return;
      }
      renderHits(q, body.hits);
    } catch (e) {
      if (e.name !== "AbortError") $("hitcount").textContent = "cannot search: " + e.message;
    }
  };
  const searchSoon = (ms) => { clearTimeout(searchTimer); searchTimer = setTimeout(runSearch, ms); };

  let typing = null;
  $("state").value = state.state;
  $("state").addEventListener("change", () => { state.state = $("state").value; state.offset = 0; seen = new Map(); keepInUrl(); load(); });
  $("filter").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = $("filter").value; state.offset = 0; seen = new Map(); keepInUrl(); load(); }, 120);
    searchSoon(300);
  });
  const go = (offset) => { state.offset = Math.max(0, offset); seen = new Map(); keepInUrl(); load(); window.scrollTo(0, 0); };
  $("first").addEventListener("click", () => go(0));
  $("prev").addEventListener("click", () => go(state.offset - PAGE));
  $("next").addEventListener("click", () => go(state.offset + PAGE));
  $("last").addEventListener("click", () => go(Math.floor(Math.max(0, matching - 1) / PAGE) * PAGE));

  // New commits: reload the page of the table, at most a few times a second.
  const live = $("live");
  let timer = null;
  const es = new EventSource("/api/sessions/stream");
  es.addEventListener("open", () => { live.className = "live on"; live.textContent = "live"; });
  es.addEventListener("error", () => { live.className = "live off"; live.textContent = "reconnecting"; });
  es.addEventListener("changed", () => {
    if (timer) return;
    timer = setTimeout(() => { timer = null; load(); }, 250);
    if (state.q.trim() && !searchTimer) searchSoon(1000); // new events may match: search again, at most once a second
  });

  ES.info();
  load();
  runSearch();
})();
