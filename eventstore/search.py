"""Full-text search over the log, and token usage totals.

Both read what migration 0100 created: the FTS5 index ``events_search`` (message content,
tool call names and arguments, tool results; kept current by an insert trigger) and the
``usage`` view (one row per event that carries a ``usage`` object). See docs/schema.md.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from .errors import DatabaseError, QueryError

#: What :func:`search` puts around each matched term in a snippet.
MARK_START, MARK_END = "\x02", "\x03"

_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the event (``session_id``, ``seq``, ``type``, ``ts`` in seconds),
    a ``snippet`` of its text with each match between :data:`MARK_START` and
    :data:`MARK_END`, and ``score`` (BM25; lower is a better match)."""

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


def search(store, query: str, *, session_id: str | None = None, type: str | None = None,
           limit: int = 20, raw: bool = False, context: int = 16) -> list[Hit]:
    """The events whose text matches ``query``, best first (BM25), at most ``limit``.

    ``query`` is words that must all occur (see :func:`fts_query`); with ``raw`` it is an
    FTS5 query as it stands (``"a b" OR c*``, ``NEAR(a b)``). ``session_id`` and ``type``
    keep hits of that session or event type only; ``context`` is the snippet's length in
    tokens. Raises :class:`QueryError` for an empty or malformed query, or a database
    without the index (older than revision 0100: open it for writing once to upgrade).
    """
    match = query if raw else fts_query(query)
    if limit < 1:
        return []
    where, params = ["events_search MATCH ?"], [match]
    if session_id is not None:
        where.append("e.session_id = ?")
        params.append(session_id)
    if type is not None:
        where.append("e.type = ?")
        params.append(type)
    # The best rowids first (FTS5 ranks them without reading the events), then a snippet
    # for those few only.
    sql = f"""SELECT e.session_id, e.seq, e.type, e.ts,
                     snippet(events_search, 0, ?, ?, '…', ?), events_search.rank
              FROM events_search JOIN events AS e ON e.position = events_search.rowid
              WHERE {' AND '.join(where)}
              ORDER BY events_search.rank LIMIT ?"""
    try:
        rows = store._read(sql, (MARK_START, MARK_END, max(1, min(context, 64)), *params, limit))
    except (sqlite3.Error, DatabaseError) as e:  # a malformed raw query, or no index
        raise QueryError(_why(store, e, f"search {match!r}", "events_search")) from None
    return [Hit(*r) for r in rows]


def _why(store, e: Exception, what: str, name: str) -> str:
    if not store._read("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)):
        return (f"this database has no {name} yet (schema older than revision 0100): "
                "open it for writing once (eventstore init) to upgrade it")
    return f"{what}: {e}"


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
    database older than revision 0100, read as it is). Raises :class:`QueryError`."""
    if not store._read("SELECT 1 FROM sqlite_master WHERE name = 'usage'"):
        return {}
    try:
        rows = store._read("""SELECT session_id, count(*), sum(input_tokens), sum(output_tokens),
                                     sum(cache_read_tokens), sum(cache_creation_tokens)
                              FROM usage GROUP BY session_id""")
    except (sqlite3.Error, DatabaseError) as e:
        raise QueryError(_why(store, e, "usage", "usage")) from None
    return {r[0]: UsageTotals(*(int(v or 0) for v in r[1:])) for r in rows}
