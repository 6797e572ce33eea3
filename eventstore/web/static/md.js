// A small, safe Markdown renderer and the diff views. Everything is built as DOM nodes
// from text (ES.el, ES.appendText): no string ever becomes HTML, so HTML written in a
// message shows as text, and links are made only for http, https and mailto addresses.
"use strict";

const MD = {};

// The href of a Markdown link, or null when it is not an absolute http(s) or mailto URL
// (javascript:, data:, relative paths into this viewer...: shown as text instead).
MD.safeHref = (url) => {
  let u;
  try { u = new URL(url); } catch (e) { return null; }
  return ["http:", "https:", "mailto:"].includes(u.protocol) ? u.href : null;
};

// Inline Markdown: `code`, **bold**, __bold__ (not inside a word: window.__x__y), *italic*, [text](url), <https://autolink>.
// (_italic_ is left alone: it would mangle snake_case names.)
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|(?<!\w)__(?=\S)([\s\S]*?\S)__(?!\w)|\*(?=[^\s*])([^*]*?[^\s*])\*|\[([^\]\n]+)\]\(([^()\s]+)(?:\s+"[^"\n]*")?\)|<((?:https?|mailto):[^>\s]+)>/g;

MD.inline = (into, text) => {
  let at = 0, m;
  const re = new RegExp(INLINE.source, "g");
  const lines = (s) => { // soft line breaks stay breaks (agents write line by line)
    s.split("\n").forEach((part, i) => { if (i) into.appendChild(document.createElement("br")); if (part) ES.appendText(into, part); });
  };
  while ((m = re.exec(text))) {
    if (m.index > at) lines(text.slice(at, m.index));
    if (m[1]) into.appendChild(ES.el("code", null, m[2].replace(/^ (.*) $/, "$1")));
    else if (m[3] !== undefined || m[4] !== undefined) MD.inline(into.appendChild(document.createElement("strong")), m[3] ?? m[4]);
    else if (m[5] !== undefined) MD.inline(into.appendChild(document.createElement("em")), m[5]);
    else if (m[6] !== undefined) {
      const href = MD.safeHref(m[7]);
      if (href) MD.inline(into.appendChild(ES.el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow", title: ES.plain(href) })), m[6]);
      else lines(m[0]);
    } else {
      const href = MD.safeHref(m[8]);
      if (href) into.appendChild(ES.el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, m[8]));
      else lines(m[0]);
    }
    at = m.index + m[0].length;
  }
  if (at < text.length) lines(text.slice(at));
  return into;
};

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const HR = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;
const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());

// Block Markdown into `into`: paragraphs, headings, fenced code, lists, quotes, tables, rules.
MD.render = (into, text, depth = 0) => {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  const starts = (l) => FENCE.test(l) || HEADING.test(l) || HR.test(l) || ITEM.test(l) || QUOTE.test(l);
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) { i++; continue; }
    if ((m = FENCE.exec(line))) {
      const fence = m[1], body = [];
      for (i++; i < lines.length && !(lines[i].trim().startsWith(fence[0].repeat(fence.length)) && !lines[i].trim().slice(fence.length).trim()); i++) body.push(lines[i]);
      i++;
      into.appendChild(m[2] === "diff" || m[2] === "patch" ? MD.patch(body.join("\n")) : ES.el("pre", { className: "code" }, ES.el("code", null, body.join("\n"))));
    } else if ((m = HEADING.exec(line))) {
      MD.inline(into.appendChild(document.createElement("h" + Math.min(6, m[1].length + 2))), m[2]);
      i++;
    } else if (HR.test(line)) {
      into.appendChild(document.createElement("hr"));
      i++;
    } else if (QUOTE.test(line) && depth < 8) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      MD.render(into.appendChild(document.createElement("blockquote")), body.join("\n"), depth + 1);
    } else if ((m = ITEM.exec(line)) && depth < 8) {
      const ordered = /\d/.test(m[2]);
      const list = into.appendChild(document.createElement(ordered ? "ol" : "ul"));
      if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
      const indent = m[1].length;
      while (i < lines.length) {
        const it = ITEM.exec(lines[i]);
        if (!it || it[1].length !== indent || /\d/.test(it[2]) !== ordered) break;
        const body = [it[3]];
        for (i++; i < lines.length; i++) {
          const l = lines[i];
          if (!l.trim()) { if (i + 1 < lines.length && /^\s/.test(lines[i + 1]) && lines[i + 1].trim()) { body.push(""); continue; } break; }
          const sub = ITEM.exec(l);
          if (sub && sub[1].length <= indent) break;
          if (!sub && !/^\s/.test(l) && starts(l)) break;
          body.push(l.replace(new RegExp("^\\s{0," + (indent + 4) + "}"), ""));
        }
        const li = list.appendChild(document.createElement("li"));
        if (body.length === 1) MD.inline(li, body[0]); else MD.render(li, body.join("\n"), depth + 1);
      }
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
      const table = ES.el("table", { className: "md-table" });
      const head = table.appendChild(document.createElement("thead")).appendChild(document.createElement("tr"));
      for (const c of cells(line)) MD.inline(head.appendChild(document.createElement("th")), c);
      const tbody = table.appendChild(document.createElement("tbody"));
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) {
        const tr = tbody.appendChild(document.createElement("tr"));
        for (const c of cells(lines[i])) MD.inline(tr.appendChild(document.createElement("td")), c);
      }
      into.appendChild(ES.el("div", { className: "md-table-wrap" }, table));
    } else {
      const body = [line];
      for (i++; i < lines.length && lines[i].trim() && !starts(lines[i]); i++) body.push(lines[i]);
      MD.inline(into.appendChild(document.createElement("p")), body.join("\n"));
    }
  }
  return into;
};

// --- diffs --------------------------------------------------------------------------------

const diffLine = (pre, cls, sign, text) => {
  const row = pre.appendChild(ES.el("span", { className: "dl " + cls }));
  ES.appendText(row, sign + text + "\n");
};

// The lines of `a` and `b` as a line diff (longest common subsequence; above a size where
// that costs too much, every old line removed and every new line added).
MD.diff = (a, b, title) => {
  const x = String(a ?? "").split("\n"), y = String(b ?? "").split("\n");
  const pre = ES.el("pre", { className: "diff" });
  if (title) diffLine(pre, "file", "", title);
  const n = x.length, m = y.length;
  if (n * m > 400000) {
    for (const l of x) diffLine(pre, "del", "-", l);
    for (const l of y) diffLine(pre, "add", "+", l);
    return pre;
  }
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { diffLine(pre, "ctx", " ", x[i]); i++; j++; }
    else if (j < m && (i >= n || L[i][j + 1] >= L[i + 1][j])) { diffLine(pre, "add", "+", y[j]); j++; }
    else { diffLine(pre, "del", "-", x[i]); i++; }
  }
  return pre;
};

// A patch as written (unified diff, or Codex's "*** Begin Patch" format) with its lines
// coloured by their first character.
MD.patch = (text) => {
  const pre = ES.el("pre", { className: "diff" });
  for (const l of String(text).split("\n")) {
    const cls = /^(\*\*\* |diff |index |--- |\+\+\+ )/.test(l) ? "file" : l.startsWith("@@") ? "hunk"
      : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "ctx";
    diffLine(pre, cls, "", l);
  }
  return pre;
};

// The patch text inside a Codex shell command (`apply_patch <<'PATCH' ... PATCH`), or null.
MD.findPatch = (s) => {
  if (typeof s !== "string") return null;
  const a = s.indexOf("*** Begin Patch");
  if (a < 0) return null;
  const e = s.indexOf("*** End Patch", a);
  return e < 0 ? s.slice(a) : s.slice(a, e + "*** End Patch".length);
};
