// Shared helpers. Every stored string reaches the page through text nodes (textContent,
// createTextNode), never as HTML; control, bidi and other invisible characters are shown
// as visible escapes so they cannot reorder or hide what is around them.
"use strict";

const ES = {};

ES.UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;
ES.NAMED = { "\r": "\\r", "\x1b": "\\e" };

ES.escapeChar = (c) => ES.NAMED[c] || (c.charCodeAt(0) < 0x100
  ? "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")
  : "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

// Append `text` to `parent` as text nodes, unsafe characters as <span class="ctl">\u202e</span>.
ES.appendText = (parent, text) => {
  text = String(text);
  ES.UNSAFE.lastIndex = 0;
  if (!ES.UNSAFE.test(text)) { parent.appendChild(document.createTextNode(text)); return; }
  let last = 0;
  text.replace(ES.UNSAFE, (c, i) => {
    if (i > last) parent.appendChild(document.createTextNode(text.slice(last, i)));
    const s = document.createElement("span");
    s.className = "ctl";
    s.textContent = ES.escapeChar(c);
    s.title = "U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
    parent.appendChild(s);
    last = i + 1;
    return c;
  });
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
};

// One-line text for places like titles and ids: unsafe characters as escapes.
ES.plain = (text) => String(text).replace(ES.UNSAFE, ES.escapeChar);

// el("div", {className: "x"}, child, "text", ...): strings become text nodes.
ES.el = (tag, props, ...children) => {
  const e = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "text") ES.appendText(e, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c == null || c === false) continue;
    if (typeof c === "string") ES.appendText(e, c); else e.appendChild(c);
  }
  return e;
};

// A JSON value as a syntax-coloured <pre>, built from text nodes.
ES.jsonPre = (value, className = "json") => {
  const pre = document.createElement("pre");
  pre.className = className;
  const span = (cls, text) => { const s = document.createElement("span"); s.className = cls; ES.appendText(s, text); return s; };
  const walk = (v, indent) => {
    if (v === null || typeof v === "boolean") { pre.appendChild(span("j-lit", String(v))); return; }
    if (typeof v === "number") { pre.appendChild(span("j-num", String(v))); return; }
    if (typeof v === "string") { pre.appendChild(span("j-str", JSON.stringify(v))); return; }
    const pad = "\n" + "  ".repeat(indent + 1), end = "\n" + "  ".repeat(indent);
    if (Array.isArray(v)) {
      if (!v.length) { pre.appendChild(document.createTextNode("[]")); return; }
      pre.appendChild(document.createTextNode("["));
      v.forEach((x, i) => { pre.appendChild(document.createTextNode((i ? "," : "") + pad)); walk(x, indent + 1); });
      pre.appendChild(document.createTextNode(end + "]"));
      return;
    }
    const keys = Object.keys(v);
    if (!keys.length) { pre.appendChild(document.createTextNode("{}")); return; }
    pre.appendChild(document.createTextNode("{"));
    keys.forEach((k, i) => {
      pre.appendChild(document.createTextNode((i ? "," : "") + pad));
      pre.appendChild(span("j-key", JSON.stringify(k)));
      pre.appendChild(document.createTextNode(": "));
      walk(v[k], indent + 1);
    });
    pre.appendChild(document.createTextNode(end + "}"));
  };
  walk(value, 0);
  return pre;
};

ES.pad2 = (n) => String(n).padStart(2, "0");

// ts (seconds since the epoch) as local "YYYY-MM-DD HH:MM:SS"; "–" when missing.
ES.when = (ts) => {
  if (ts == null) return "–";
  const d = new Date(ts * 1000);
  if (isNaN(d)) return String(ts);
  return `${d.getFullYear()}-${ES.pad2(d.getMonth() + 1)}-${ES.pad2(d.getDate())} ` +
         `${ES.pad2(d.getHours())}:${ES.pad2(d.getMinutes())}:${ES.pad2(d.getSeconds())}`;
};
ES.time = (ts) => {
  const d = new Date(ts * 1000);
  if (isNaN(d)) return String(ts);
  return `${ES.pad2(d.getHours())}:${ES.pad2(d.getMinutes())}:${ES.pad2(d.getSeconds())}.` +
         String(d.getMilliseconds()).padStart(3, "0");
};

// A duration in seconds, short: 120 ms, 4.2 s, 3 min 05 s, 2 h 04 min.
ES.dur = (s) => {
  if (s == null || !isFinite(s)) return "";
  if (s < 0) return "-" + ES.dur(-s);
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + ES.pad2(Math.floor(s % 60)) + " s";
  return Math.floor(s / 3600) + " h " + ES.pad2(Math.floor((s % 3600) / 60)) + " min";
};

ES.num = (n) => (n == null ? "–" : Number(n).toLocaleString("en-US"));

ES.getJSON = async (url) => {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
  return body;
};

// The state badge: complete, interrupted, or running (open, with an event in the last 2 minutes).
ES.badge = (s) => {
  let cls = "complete", label = "complete", title = "every turn ended and every tool call has its result";
  if (!s.complete) {
    const recent = s.last_ts != null && Date.now() / 1000 - s.last_ts < 120;
    cls = recent ? "running" : "interrupted";
    label = recent ? "running" : "interrupted";
    const why = [];
    if (s.open_turn) why.push("a turn has not ended");
    if (s.dangling_calls) why.push(`${s.dangling_calls} tool call(s) without a result`);
    title = why.join("; ");
  }
  return ES.el("span", { className: "badge " + cls, title }, label);
};

ES.info = async () => {
  try {
    const info = await ES.getJSON("/api/info");
    const db = document.getElementById("db");
    if (db) { db.textContent = ES.plain(info.database); db.title = ES.plain(info.database); }
  } catch (e) { /* the page still works */ }
};
