"""Full-text search over the log, and token usage totals.

Both read what migration 0100 created: the FTS5 index ``events_search`` over the text of
every message event (message content, tool call names and arguments, tool results), and the
``usage`` view (one row per event that carries a ``usage`` object). See docs/schema.md.

The index is derived from the log and brought up to date before each search
(:func:`catch_up`): appends never pay for it. A store that cannot write (a file opened
read-only) searches what is indexed and scans the events past it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from .errors import DatabaseError, QueryError

#: What :func:`search` puts around each matched term in a snippet.
MARK_START, MARK_END = "\x02", "\x03"
#: Hits are ranked (BM25) among the newest this many matching events: a word found in
#: hundreds of thousands of events still answers in milliseconds (tools/bench_search.py).
RANK_WINDOW = 2000
#: Positions indexed per write transaction of :func:`catch_up` (writers wait at most one).
CATCH_UP_BATCH = 20_000

_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the event (``session_id``, ``seq``, ``type``, ``ts`` in seconds),
    a ``snippet`` of its text with each match between :data:`MARK_START` and
    :data:`MARK_END`, and ``score`` (BM25; lower is a better match; 0.0 for a hit found by
    scanning events not indexed yet)."""

    session_id: str
    seq: int
    type: str
    ts: float
    snippet: str
    score: float


def fts_query(text: str) -> str:
    """A user's words as an FTS5 query: every word must occur (in any order); a word ending
    in ``*`` matches as a prefix; quotes and FTS5 operators are taken as text. Raises
    :class:`QueryError` for a query with no word."""
    words = []
    for w in _WORD.findall(text):
        prefix = w.endswith("*") and len(w) > 1
        w = w.rstrip("*") if prefix else w
        words.append('"' + w.replace('"', '""') + '"' + ("*" if prefix else ""))
    if not words:
        raise QueryError("the search query is empty")
    return " ".join(words)


def _require_index(store) -> None:
    if not store._read("SELECT 1 FROM sqlite_master WHERE name = 'events_search_state'"):
        raise QueryError("this database has no search index yet (schema older than revision 0100): "
                         "open it for writing once (eventstore init) to upgrade it")


def indexed_through(store) -> int:
    """The position up to which the index holds every message event."""
    return store._read("SELECT indexed_through FROM events_search_state")[0][0]


def catch_up(store, progress: Callable[[int, int], None] | None = None) -> int:
    """Index the message events stored since the last call; return how many.

    Works in write transactions of :data:`CATCH_UP_BATCH` positions; ``progress(done,
    total)`` is called after each (positions). Safe from several processes at once (each
    batch reads the state inside its transaction). Raises :class:`DatabaseError` when the
    store cannot write (read-only, locked past the busy timeout).
    """
    _require_index(store)
    done = 0
    total = None
    while True:
        def batch(cur: sqlite3.Cursor) -> tuple[int, int, int]:
            start = cur.execute("SELECT indexed_through FROM events_search_state").fetchone()[0]
            last = cur.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]
            if last <= start:
                return 0, start, last
            end = min(last, start + CATCH_UP_BATCH)
            cur.execute("INSERT INTO events_search (rowid, text) SELECT position, text FROM events_search_text "
                        "WHERE position > ? AND position <= ?", (start, end))
            n = cur.rowcount
            cur.execute("UPDATE events_search_state SET indexed_through = ?", (end,))
            return n, end, last

        n, end, last = store._transact(batch)
        done += n
        if total is None:
            total = last
        if progress is not None and end < total:
            progress(end, total)
        if end >= last:
            return done


def search(store, query: str, *, session_id: str | None = None, type: str | None = None,
           limit: int = 20, raw: bool = False, context: int = 16) -> list[Hit]:
    """The events whose text matches ``query``, best first, at most ``limit``.

    ``query`` is words that must all occur (see :func:`fts_query`); with ``raw`` it is an
    FTS5 query as it stands (``"a b" OR c*``, ``NEAR(a b)``). ``session_id`` and ``type``
    keep hits of that session or event type only; ``context`` is the snippet's length in
    tokens. Hits are ranked by BM25 among the newest :data:`RANK_WINDOW` matching events
    (see :func:`count`). Brings the index up to date first (:func:`catch_up`); a store
    that cannot write scans the events past the index instead (their hits come last).
    Raises :class:`QueryError` for an empty or malformed query, or a database without the
    index (older than revision 0100: open it for writing once to upgrade).
    """
    match = query if raw else fts_query(query)
    _require_index(store)
    try:
        catch_up(store)
    except DatabaseError:
        pass  # cannot write: the events past the index are scanned below
    if limit < 1:
        return []
    join, where, params = _filters(session_id, type)
    try:
        floor = store._read(f"SELECT events_search.rowid FROM events_search {join} WHERE events_search MATCH ? "
                            f"{where} ORDER BY events_search.rowid DESC LIMIT 1 OFFSET ?",
                            (match, *params, RANK_WINDOW - 1))
        best = store._read(f"SELECT events_search.rowid, bm25(events_search) AS score FROM events_search {join} "
                           f"WHERE events_search MATCH ? AND events_search.rowid >= ? {where} "
                           f"ORDER BY score LIMIT ?", (match, floor[0][0] if floor else 0, *params, limit))
        hits = []
        terms = _terms(query, raw)
        for position, score in best:
            sid, seq, t, ts, text = store._read(
                "SELECT e.session_id, e.seq, e.type, e.ts, x.text FROM events AS e "
                "JOIN events_search_text AS x ON x.position = e.position WHERE e.position = ?", (position,))[0]
            hits.append(Hit(sid, seq, t, ts, snippet(text, terms, context), score))
    except (sqlite3.Error, DatabaseError) as e:  # a malformed raw query
        raise QueryError(f"search {match!r}: {e}") from None
    if len(hits) < limit:
        hits += _scan_tail(store, query, session_id, type, limit - len(hits), raw)
    return hits


def count(store, query: str, *, session_id: str | None = None, type: str | None = None, raw: bool = False) -> int:
    """How many indexed events match ``query`` (with the filters of :func:`search`)."""
    match = query if raw else fts_query(query)
    join, where, params = _filters(session_id, type)
    try:
        return store._read(f"SELECT count(*) FROM events_search {join} WHERE events_search MATCH ? {where}",
                           (match, *params))[0][0]
    except (sqlite3.Error, DatabaseError) as e:
        raise QueryError(f"search {match!r}: {e}") from None


def _filters(session_id: str | None, type_: str | None) -> tuple[str, str, list]:
    if session_id is None and type_ is None:
        return "", "", []
    where, params = [], []
    if session_id is not None:
        where.append("e.session_id = ?")
        params.append(session_id)
    if type_ is not None:
        where.append("e.type = ?")
        params.append(type_)
    return "JOIN events AS e ON e.position = events_search.rowid", "AND " + " AND ".join(where), params


def _scan_tail(store, query: str, session_id: str | None, type_: str | None, limit: int, raw: bool) -> list[Hit]:
    """Hits among the message events past the index (a store that could not catch up),
    newest first: every word of ``query`` as a case-insensitive substring (a raw FTS5
    query: its words, operators aside)."""
    start = indexed_through(store)
    if start >= store._read("SELECT coalesce(max(position), 0) FROM events")[0][0]:
        return []
    terms = _terms(query, raw)
    where, params = ["x.position > ?"], [start]
    for word, _prefix in terms:
        where.append("instr(lower(x.text), ?) > 0")
        params.append(word)
    if session_id is not None:
        where.append("x.session_id = ?")
        params.append(session_id)
    if type_ is not None:
        where.append("x.type = ?")
        params.append(type_)
    rows = store._read(f"SELECT x.session_id, x.seq, x.type, e.ts, x.text FROM events_search_text AS x "
                       f"JOIN events AS e ON e.position = x.position WHERE {' AND '.join(where)} "
                       f"ORDER BY x.position DESC LIMIT ?", (*params, limit))
    return [Hit(sid, seq, t, ts, snippet(text, terms), 0.0) for sid, seq, t, ts, text in rows]


_TOKEN = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer takes as a token (letters, digits)
_FTS_OPERATORS = {"and", "or", "not", "near"}


def _terms(query: str, raw: bool) -> list[tuple[str, bool]]:
    """The query's tokens as ``(lower-case token, is a prefix)``, as the index matches them."""
    out = []
    for w in _WORD.findall(query):
        prefix = w.endswith("*")
        tokens = [t.lower() for t in _TOKEN.findall(w)]
        if raw and len(tokens) == 1 and tokens[0] in _FTS_OPERATORS and w.isupper():
            continue
        out += [(t, prefix and k == len(tokens) - 1) for k, t in enumerate(tokens)]
    return out


def snippet(text: str, terms: list[tuple[str, bool]], context: int = 16) -> str:
    """About ``context`` tokens of ``text`` around its first match of ``terms`` (see
    :func:`_terms`), each matching token between :data:`MARK_START` and :data:`MARK_END`,
    ``…`` where text was cut."""
    tokens = list(_TOKEN.finditer(text))

    def hit(tok: str) -> bool:
        tok = tok.lower()
        return any(tok.startswith(t) if p else tok == t for t, p in terms)

    first = next((k for k, m in enumerate(tokens) if hit(m.group())), 0)
    lo = max(0, min(first - context // 4, len(tokens) - context))
    hi = min(len(tokens), lo + context)
    if not tokens:
        return text[:200]
    start = tokens[lo].start() if lo else 0
    end = tokens[hi - 1].end() if hi < len(tokens) else len(text)
    out, at = [], start
    for m in tokens[lo:hi]:
        if hit(m.group()):
            out += [text[at:m.start()], MARK_START, m.group(), MARK_END]
            at = m.end()
    out.append(text[at:end])
    return ("…" if start else "") + "".join(out) + ("…" if end < len(text) else "")


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """A session's token counts, summed over its model responses (the ``usage`` view)."""

    responses: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int


def usage_totals(store) -> dict[str, UsageTotals]:
    """``{session id: UsageTotals}`` for every session with recorded usage (empty for a
    database older than revision 0100, read as it is). Raises :class:`DatabaseError`."""
    if not store._read("SELECT 1 FROM sqlite_master WHERE name = 'usage'"):
        return {}
    rows = store._read("""SELECT session_id, count(*), sum(input_tokens), sum(output_tokens),
                                 sum(cache_read_tokens), sum(cache_creation_tokens)
                          FROM usage GROUP BY session_id""")
    return {r[0]: UsageTotals(*(int(v or 0) for v in r[1:])) for r in rows}
