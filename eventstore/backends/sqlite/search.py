"""SQLite's side of search and usage (revisions 0100, 0280): the FTS5 index ``events_search``
over the ``events_search_text`` view (the message, message part and thinking events), kept
current by whoever searches (:func:`catch_up`), and the ``usage`` view's totals. The
functions take the :class:`SQLiteBackend` whose connection they use; see
:class:`eventstore.backends.base.Backend` for the contract.

The index is derived from the log and not kept by a trigger on ``events``: FTS5 writes a
segment per transaction, which would slow every append of a message event
(docs/benchmarks.md, "Investigations"); so appends and imports pay nothing, and the first
search after many writes pays for indexing them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ...errors import DatabaseError, QueryError
from ..base import Backend
from ..capabilities import SearchIndex  # (an SQLiteBackend: these read through its connection)
from ..search_terms import TOKEN as _TOKEN
from ..search_terms import query_terms, query_words

#: Positions indexed per write transaction of :func:`catch_up` (writers wait at most one).
CATCH_UP_BATCH = 20_000

def fts_query(text: str) -> str:
    """A user's words as an FTS5 query: every word must occur (in any order); a word ending
    in ``*`` matches as a prefix; quotes and FTS5 operators are taken as text. Raises
    :class:`QueryError` for a query with no word."""
    words = ['"' + w.replace('"', '""') + '"' + ("*" if prefix else "") for w, prefix in query_words(text)]
    if not words:
        raise QueryError("the search query is empty")
    return " ".join(words)


def _text(raw: bytes | str | None) -> str:
    """An event's searchable text, read as bytes: SQLite's JSON functions turn a lone
    surrogate of a payload (``"\\ud83d"``) into bytes that are not UTF-8, which the driver
    refuses to decode; here it stays that surrogate."""
    if raw is None or isinstance(raw, str):
        return raw or ""
    return raw.decode("utf-8", "surrogatepass") if _valid(raw) else raw.decode("utf-8", "replace")


def _valid(raw: bytes) -> bool:
    try:
        raw.decode("utf-8", "surrogatepass")
        return True
    except UnicodeDecodeError:
        return False


def _require_index(backend: Backend) -> None:
    if not backend._read("SELECT 1 FROM sqlite_master WHERE name = 'events_search_state'"):
        raise QueryError("this database has no search index yet (schema older than revision 0100): "
                         "open it for writing once (eventstore init) to upgrade it")


def _indexed_through(backend: Backend) -> int:
    return backend._read("SELECT indexed_through FROM events_search_state")[0][0]


def catch_up(backend: Backend, progress: Callable[[int, int], None] | None = None) -> int:
    """Index the searchable events (``events_search_text``) stored since the last call, in write transactions of
    :data:`CATCH_UP_BATCH` positions; safe from several processes at once (each batch reads
    the state inside its transaction)."""
    _require_index(backend)
    (through, last), = backend._read("SELECT (SELECT indexed_through FROM events_search_state), "
                                     "(SELECT coalesce(max(position), 0) FROM events)", ())
    if last <= through and not backend.readonly:  # up to date: no write transaction (a read-only store still refuses)
        return 0
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

        n, end, last = backend._transact(batch)
        done += n
        if total is None:
            total = last
        if progress is not None and end < total:
            progress(end, total)
        if end >= last:
            return done


def _filters(backend: Backend, session_id: str | None, type_: str | None) -> tuple[str, str, list]:
    """The join and conditions that keep the matches of ``session_id`` and ``type_``, and
    none of an unfinished import (hidden from readers: its matches must not take the
    ranking's window)."""
    hidden = bool(backend._read("SELECT 1 FROM importing LIMIT 1"))
    if session_id is None and type_ is None and not hidden:
        return "", "", []
    where, params = [], []
    if hidden:
        where.append("e.session_id NOT IN (SELECT session_id FROM importing)")
    if session_id is not None:
        where.append("e.session_id = ?")
        params.append(session_id)
    if type_ is not None:
        where.append("e.type = ?")
        params.append(type_)
    return "JOIN events AS e ON e.position = events_search.rowid", "AND " + " AND ".join(where), params


def search(backend: Backend, query: str, raw: bool, session_id: str | None, type_: str | None,
           limit: int, rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
    """BM25 among the newest ``rank_window`` indexed matches, then (for a store that could
    not catch up) the newest matches past the index, found by scanning."""
    match = query if raw else fts_query(query)
    _require_index(backend)
    if limit < 1:
        return []
    join, where, params = _filters(backend, session_id, type_)
    try:
        floor = backend._read(f"SELECT events_search.rowid FROM events_search {join} WHERE events_search MATCH ? "
                              f"{where} ORDER BY events_search.rowid DESC LIMIT 1 OFFSET ?",
                              (match, *params, rank_window - 1))
        best = backend._read(f"SELECT events_search.rowid, bm25(events_search) AS score FROM events_search {join} "
                             f"WHERE events_search MATCH ? AND events_search.rowid >= ? {where} "
                             f"ORDER BY score LIMIT ?", (match, floor[0][0] if floor else 0, *params, limit))
    except DatabaseError as e:  # a malformed raw query
        raise QueryError(f"search {match!r}: {e}") from None
    hits = []
    for position, score in best:
        sid, seq, t, ts, text = backend._read(
            "SELECT e.session_id, e.seq, e.type, e.ts, CAST((SELECT x.text FROM events_search_text AS x "
            "WHERE x.position = e.position) AS BLOB) FROM events AS e WHERE e.position = ?", (position,))[0]
        hits.append((sid, seq, t, ts, _text(text), score))
    if len(hits) < limit:
        hits += _scan_tail(backend, query, raw, session_id, type_, limit - len(hits))
    return hits


def count(backend: Backend, query: str, raw: bool, session_id: str | None, type_: str | None,
          at_most: int | None = None) -> int:
    match = query if raw else fts_query(query)
    _require_index(backend)
    join, where, params = _filters(backend, session_id, type_)
    sql = f"SELECT count(*) FROM events_search {join} WHERE events_search MATCH ? {where}"
    if at_most is not None:  # FTS5 stops reading the words' doclists at the limit
        sql = f"SELECT count(*) FROM (SELECT 1 FROM events_search {join} WHERE events_search MATCH ? {where} LIMIT ?)"
        params = (*params, max(at_most, 0))
    try:
        return backend._read(sql, (match, *params))[0][0]
    except DatabaseError as e:
        raise QueryError(f"search {match!r}: {e}") from None


#: Rows read per query while scanning the events past the index.
SCAN_BATCH = 500


def _fold(text: str) -> str:
    """``text`` as the index compares it: lower case, diacritics removed (unicode61's
    ``remove_diacritics``)."""
    if text.isascii():  # (NFKD leaves ASCII as it is, and it has no combining marks)
        return text.lower()
    import unicodedata  # (imported when used: eventstore's start-up)

    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def _phrases(query: str, raw: bool) -> list[tuple[list[str], bool]]:
    """The query as the index matches it: each word a phrase of tokens (``src/search.py`` is
    src, search, py in a row), the last a prefix for a word ending in ``*``; a raw query's
    words one token each (its operators aside)."""
    if raw:
        return [([_fold(t)], prefix) for t, prefix in query_terms(query, True)]
    out = []
    for word, prefix in query_words(query):
        tokens = _TOKEN.findall(_fold(word))
        if tokens:
            out.append((tokens, prefix))
    return out


def _matches(text: str, phrases: list[tuple[list[str], bool]]) -> bool:
    """Whether every phrase occurs in ``text`` as whole words (the last one as a prefix
    where asked), as the index would find them."""
    tokens = _TOKEN.findall(_fold(text))
    for words, prefix in phrases:
        n, last = len(words), len(words) - 1
        if not any(all(tokens[i + k] == w or (prefix and k == last and tokens[i + k].startswith(w))
                       for k, w in enumerate(words))
                   for i in range(len(tokens) - n + 1)):
            return False
    return True


def _scan_tail(backend: Backend, query: str, raw: bool, session_id: str | None, type_: str | None,
               limit: int) -> list[tuple[str, int, str, float, str, float]]:
    """Matches among the message, part and thinking events past the index, newest first:
    every word of ``query`` as a whole word, as the index matches it (a raw FTS5 query: its
    words, operators aside), read :data:`SCAN_BATCH` events at a time."""
    start = _indexed_through(backend)
    if start >= backend._read("SELECT coalesce(max(position), 0) FROM events")[0][0]:
        return []
    phrases = _phrases(query, raw)
    where, params = ["x.position > ?", "x.position < ?"], [start]
    if session_id is not None:
        where.append("x.session_id = ?")
        params.append(session_id)
    if type_ is not None:
        where.append("x.type = ?")
        params.append(type_)
    hits: list[tuple[str, int, str, float, str, float]] = []
    below = 2**63 - 1
    while len(hits) < limit:
        rows = backend._read(f"SELECT x.position, x.session_id, x.seq, x.type, e.ts, CAST(x.text AS BLOB) "
                             "FROM events_search_text AS x "
                             f"JOIN events AS e ON e.position = x.position "
                             f"WHERE {' AND '.join(where)} ORDER BY x.position DESC LIMIT ?",
                             (params[0], below, *params[1:], SCAN_BATCH))
        for position, sid, seq, t, ts, text in rows:
            text = _text(text)
            if _matches(text, phrases):
                hits.append((sid, seq, t, ts, text, 0.0))
                if len(hits) == limit:
                    break
            below = position
        if len(rows) < SCAN_BATCH:
            break
    return hits


def usage_totals(backend: Backend) -> list[tuple[str, int, int, int, int, int]]:
    if not backend._read("SELECT 1 FROM sqlite_master WHERE name = 'usage'"):
        return []
    rows = backend._read("""SELECT session_id, count(*), sum(input_tokens), sum(output_tokens),
                                   sum(cache_read_tokens), sum(cache_creation_tokens)
                            FROM usage GROUP BY session_id""")
    return [(r[0], *(int(v or 0) for v in r[1:])) for r in rows]


class SQLiteSearch(SearchIndex):
    """Full-text search of :class:`~.backend.SQLiteBackend` (the functions above)."""

    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        return catch_up(self, progress)

    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        return search(self, query, raw, session_id, type_, limit, rank_window)

    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None,
                     at_most: int | None = None) -> int:
        return count(self, query, raw, session_id, type_, at_most)
