"""Full-text search over the log, and token usage totals: database-neutral.

Both read what revisions 0100 and 0280 created (see docs/schema.md): a full-text index over
the text of every message event and message part (``assistant/part``: content, tool call
names and arguments, tool results) and of every thinking event (``assistant/thinking``: its
``thinking``), as the ``events_search_text`` view gives it, and the ``usage`` view
(one row per event that carries a ``usage`` object). Each backend keeps its index its own
way, both derived from the log and brought up to date by whoever searches, never by the
append (SQLite: an FTS5 table; PostgreSQL, revision 0200: a table of ``tsvector`` with a
GIN index), behind
:meth:`~eventstore.backends.capabilities.SearchIndex.search` (a backend without an index
searches by scanning: :class:`~eventstore.backends.fallbacks.ScanSearch`); this module makes the query's terms, the
snippets and the result types.
"""

from __future__ import annotations

from collections.abc import Callable

from .backends.capabilities import LogViews, SearchIndex
from .backends.search_terms import TOKEN, query_terms, query_words
from .errors import DatabaseError, QueryError, SessionNotFound
from .records import frozen_record

#: What :func:`search` puts around each matched term in a snippet.
MARK_START, MARK_END = "\x02", "\x03"
#: Hits are ranked among the newest this many matching events, so that a word found in
#: hundreds of thousands of events is not ranked across all of them (docs/benchmarks.md,
#: "Search").
RANK_WINDOW = 2000

#: The longest query :func:`search` takes, in words and in characters (a longer one is a
#: :class:`QueryError`, not a query the database may refuse or take long over).
MAX_QUERY_WORDS, MAX_QUERY_CHARS = 64, 2000
#: The largest ``limit`` a search passes on (a larger one asks for no more: SQL's LIMIT is a
#: 64-bit integer, and a search that hides unfinished imports asks for a multiple of it).
MAX_LIMIT = 2**31
#: A snippet's longest stretch of text between two tokens it shows, and its longest token
#: (characters): a snippet stays a few kilobytes, whatever the event holds.
SNIPPET_GAP, SNIPPET_TOKEN = 80, 80


@frozen_record  # @dataclass(frozen=True, slots=True), without importing dataclasses at start-up
class Hit:
    """One search result: the event (``session_id``, ``seq``, ``type``, ``ts`` in seconds),
    a ``snippet`` of its text with each match between :data:`MARK_START` and
    :data:`MARK_END`, and ``score`` (lower is a better match: BM25 on SQLite, minus
    ``ts_rank`` on PostgreSQL; on SQLite 0.0 for a hit found by scanning events not indexed
    yet, which PostgreSQL ranks as the others)."""

    __slots__ = ("session_id", "seq", "type", "ts", "snippet", "score")
    session_id: str
    seq: int
    type: str
    ts: float
    snippet: str
    score: float


def _index(store) -> SearchIndex:
    """The store's search capability (its backend's index, or the scanning fallback), which
    answers the core reads too."""
    return store.capability(SearchIndex)


def catch_up(store, progress: Callable[[int, int], None] | None = None) -> int:
    """Bring the search index up to date with the stored events; return how many message
    events it indexed now. Safe from several processes at once.

    ``progress(done, total)`` (positions) is called between batches. Raises
    :class:`QueryError` for a database without the index (older than revision 0100),
    :class:`DatabaseError` when the store cannot write (read-only, locked past the busy
    timeout, a PostgreSQL role without INSERT on ``events_search``).
    """
    return _index(store).search_catch_up(progress)


def search(store, query: str, *, session_id: str | None = None, type: str | None = None,
           limit: int = 20, raw: bool = False, context: int = 16, update_index: bool = True) -> list[Hit]:
    """The events of ``store`` (an :class:`~eventstore.EventStore`) whose text matches
    ``query``, best first, at most ``limit``.

    ``query`` is words that must all occur (a word ending in ``*`` matches as a prefix;
    punctuation separates words, as in the indexed text); with ``raw`` it is the database's
    own query syntax as it stands (SQLite: FTS5, ``"a b" OR c*``, ``NEAR(a b)``;
    PostgreSQL: ``to_tsquery``, ``a & (b | c:*)``). ``session_id`` and ``type`` keep hits of
    that session or event type only; ``context`` is the snippet's length in tokens. Hits
    are ranked among the newest :data:`RANK_WINDOW` matching events (see :func:`count`).
    Brings the index up to date first (:func:`catch_up`; not with ``update_index=False``,
    for a reader that must not write); a store that cannot write, or is not asked to,
    searches the events past the index too (SQLite scans them and their hits come last;
    PostgreSQL computes their vectors and ranks them with the rest).
    Raises :class:`QueryError` for an empty or malformed query (one with no letter or digit,
    such as ``"`` or ``*``, is malformed on both databases), or a database without the
    index (older than revision 0100: open it for writing once to upgrade);
    :class:`SessionNotFound` when ``session_id`` names no session.
    """
    backend = _index(store)
    _check(backend, query, raw, session_id)
    if update_index:
        try:
            backend.search_catch_up()
        except DatabaseError:
            pass  # cannot write: the backend scans the events past the index
    if limit < 1:
        return []
    limit = min(limit, MAX_LIMIT)
    hidden = {r[0] for r in backend.imports()}  # unfinished imports (eventstore.io.bulk): not shown
    if session_id in hidden:
        return []
    rows = backend.search(query, raw=raw, session_id=session_id, type_=type, limit=limit + len(hidden) * limit,
                          rank_window=RANK_WINDOW)
    if hidden:
        rows = [r for r in rows if r[0] not in hidden][:limit]
    terms = query_terms(query, raw)
    return [Hit(sid, seq, t, ts, snippet(text or "", terms, context), score) for sid, seq, t, ts, text, score in rows]


def count(store, query: str, *, session_id: str | None = None, type: str | None = None, raw: bool = False,
          at_most: int | None = None) -> int:
    """How many indexed events match ``query`` (with the filters of :func:`search`); with
    ``at_most``, counting stops there (a common word's matches are not all counted: the
    answer is ``min(matches, at_most)``). Raises :class:`QueryError` and
    :class:`SessionNotFound` as :func:`search` does."""
    backend = _index(store)
    _check(backend, query, raw, session_id)
    return backend.search_count(query, raw=raw, session_id=session_id, type_=type, at_most=at_most)


def _check(backend, query: str, raw: bool, session_id: str | None) -> None:
    """The errors :func:`search` and :func:`count` raise before they ask the database."""
    if "\x00" in query:
        raise QueryError("the search query holds a NUL character (no indexed text holds one)")
    if len(query) > MAX_QUERY_CHARS or len(query_words(query)) > MAX_QUERY_WORDS:
        raise QueryError(f"the search query is too long ({len(query_words(query)):,} words, {len(query):,} "
                         f"characters): at most {MAX_QUERY_WORDS} words and {MAX_QUERY_CHARS:,} characters")
    if not raw:
        if not query_words(query):
            raise QueryError("the search query is empty")
        if not query_terms(query, False):
            raise QueryError(f"the search query {query!r} has no word to look for (words are letters and digits)")
    if session_id is not None and backend.session_meta(session_id) is None:
        raise SessionNotFound(session_id)


def snippet(text: str, terms: list[tuple[str, bool]], context: int = 16) -> str:
    """About ``context`` tokens of ``text`` around its first match of ``terms`` (see
    :func:`query_terms`), each matching token between :data:`MARK_START` and :data:`MARK_END`,
    ``…`` where text was cut. Marker characters in ``text`` itself become U+FFFD, so every
    marker in the snippet is one this function put there."""
    if MARK_START in text or MARK_END in text:
        text = text.replace(MARK_START, "\ufffd").replace(MARK_END, "\ufffd")

    def hit(tok: str) -> bool:
        tok = tok.lower()
        return any(tok.startswith(t) if p else tok == t for t, p in terms)

    # tokens[k - base] is the text's token k; n is how many there are, or (when the text goes
    # on past the window) a number past the window's end
    window = _first_match(text, hit, context) if context >= 1 else None
    if window is None:  # no match (or no context): every token
        tokens = list(TOKEN.finditer(text))
        first = next((k for k, m in enumerate(tokens) if hit(m.group())), 0)
        base, n = 0, len(tokens)
    else:
        tokens, base, first = window
        n = base + len(tokens)
    lo = max(0, min(first - context // 4, n - context))
    hi = min(n, lo + context)
    if not n:
        return text[:200] + ("…" if len(text) > 200 else "")
    start = tokens[lo - base].start() if lo else 0
    end = tokens[hi - 1 - base].end() if hi < n else len(text)
    if start == 0 and tokens[0].start() > SNIPPET_GAP:  # (a long run of no word before the first)
        start = tokens[0].start() - SNIPPET_GAP // 2
    if end == len(text) and len(text) - tokens[hi - 1 - base].end() > SNIPPET_GAP:
        end = tokens[hi - 1 - base].end() + SNIPPET_GAP // 2
    out, at = [], start
    for m in tokens[lo - base:hi - base]:
        out.append(_clip(text[at:m.start()], SNIPPET_GAP))
        word = m.group()
        shown = word if len(word) <= SNIPPET_TOKEN else word[:SNIPPET_TOKEN] + "…"
        out += [MARK_START, shown, MARK_END] if hit(word) else [shown]
        at = m.end()
    out.append(_clip(text[at:end], SNIPPET_GAP))
    return ("…" if start else "") + "".join(out) + ("…" if end < len(text) else "")


def _first_match(text: str, hit: Callable[[str], bool], context: int) -> tuple[list, int, int] | None:
    """The tokens of ``text`` a snippet of ``context`` tokens around its first match can show,
    read no further than needed (a tool's output may be megabytes, its match at the start):
    ``(tokens, base, first)``, ``tokens`` being the text's tokens ``base`` on, from the
    ``context`` before the first match (token ``first``) to ``context`` after it, or to the
    text's end when it comes first. None when nothing matches."""
    before: list = []
    tokens = TOKEN.finditer(text)
    for k, m in enumerate(tokens):
        if hit(m.group()):
            window = before[-context:]
            window.append(m)
            for m in tokens:  # the context after it, and one more: the text goes on past the window
                window.append(m)
                if len(window) > len(before[-context:]) + context:
                    break
            return window, k - len(before[-context:]), k
        before.append(m)
        if len(before) > 2 * context:
            del before[:context]
    return None


def _clip(part: str, n: int) -> str:
    """``part`` with its middle cut out (``…``) when it is longer than ``n`` characters."""
    return part if len(part) <= n else part[:n // 2] + "…" + part[-(n // 2):]


def snippet_ranges(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """A :func:`snippet` as its plain text and the ``(start, end)`` offsets of each match in
    it (characters, end exclusive)."""
    text, ranges, at = [], [], 0
    for k, part in enumerate(marked.split(MARK_START)):
        if k:
            match, _, rest = part.partition(MARK_END)
            ranges.append((at, at + len(match)))
            text.append(match)
            at += len(match)
            part = rest
        text.append(part)
        at += len(part)
    return "".join(text), ranges


@frozen_record  # @dataclass(frozen=True, slots=True), without importing dataclasses at start-up
class UsageTotals:
    """A session's token counts, summed over its model responses (the ``usage`` view)."""

    __slots__ = ("responses", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
    responses: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int


def usage_totals(store) -> dict[str, UsageTotals]:
    """``{session id: UsageTotals}`` for every session of ``store`` with recorded usage
    (empty for a database older than revision 0100, read as it is). Raises
    :class:`DatabaseError`."""
    hidden = {r[0] for r in store.imports()}  # unfinished imports (eventstore.io.bulk): not shown
    return {r[0]: UsageTotals(*r[1:]) for r in store.capability(LogViews).usage_totals() if r[0] not in hidden}
