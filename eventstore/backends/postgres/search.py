"""Full-text search (:class:`~eventstore.backends.capabilities.SearchIndex`): a table of
``tsvector`` with a GIN index, caught up by whoever searches.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
from psycopg import errors as pg_errors

from eventstore.errors import (
    DatabaseError,
    QueryError,
)

from ..capabilities import (
    SearchIndex,
)
from .connection import first_line
from .statements import CATCH_UP, PAST_BOUND, SEARCH_BOUNDS, SEARCH_TEXT, SEARCH_VECTOR


class PgSearch(SearchIndex):
    """Full-text search of :class:`~.backend.PostgresBackend`."""

    # --- search and usage (revisions 0100, 0200) --------------------------------------------
    # The vectors live in events_search, derived from the log and caught up by whoever
    # searches (as on SQLite): appends pay nothing. A search reads the table up to
    # events_search_state.indexed_through and computes the vectors of the message events
    # past it on the fly (a role or a store that may not write the table still finds them).

    def _may_index(self) -> bool:
        """Whether this store may write the search index (not read-only; the role has
        INSERT on events_search and UPDATE on its state), asked once."""
        if self.readonly:
            return False
        if self._index_writable is None:
            self._index_writable = bool(self._one(
                "SELECT has_table_privilege('events_search', 'INSERT') "
                "AND has_table_privilege('events_search_state', 'UPDATE')")[0])
        return self._index_writable

    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index the searchable events stored since the last catch-up, in transactions of
        :data:`CATCH_UP_BATCH` positions, each holding the row lock of ``events_search_state``
        (concurrent searchers wait for each other's batch, then find it done; the insert
        also skips rows already there). Raises :class:`DatabaseError` when the store may
        not write the index (read-only, or a role without the grants: search scans then)."""
        if not self._may_index():
            raise DatabaseError(f"{self.display}: this store may not write the search index "
                                f"({'opened read-only' if self.readonly else 'no INSERT on events_search'})")
        # Nothing to index (the usual case): one read, and no row lock, whose transaction
        # would write and, on a durable server, wait for a WAL flush at its commit.
        through, last, _hidden = self._one(SEARCH_BOUNDS)
        if last <= through:
            return 0
        done, total = 0, None
        with self._rlock:
            conn = self._conn("r")
            while True:
                try:
                    with conn.transaction():
                        # (a row lock: a role that may not UPDATE the state cannot take it)
                        start = conn.execute("SELECT indexed_through FROM events_search_state FOR UPDATE"
                                             ).fetchone()[0]
                        last = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]
                        n, end = 0, start
                        if last > start:
                            end = min(last, start + CATCH_UP_BATCH)
                            n = conn.execute(CATCH_UP, (start, end)).rowcount
                            conn.execute("UPDATE events_search_state SET indexed_through = %s", (end,))
                except psycopg.Error as e:
                    raise self._error(e) from None
                done += n
                if total is None:
                    total = last
                if progress is not None and end < total:
                    progress(end, total)
                if end >= last:
                    break
        self._take_statistics(done)
        return done

    def _take_statistics(self, indexed: int) -> None:
        """ANALYZE events_search after a catch-up that indexed ``indexed`` events, when they
        are at least :data:`ANALYZE_AFTER` and more than a tenth of the rows its statistics
        last counted, and this role may (the table's or the database's owner). Without
        statistics (a big import, then a search before autovacuum got to the table) the
        planner takes every word for a rare one: a common word's search then reads all its
        matches instead of walking back from the newest (docs/benchmarks.md)."""
        if indexed < ANALYZE_AFTER:
            return
        counted, may = self._one(
            "SELECT c.reltuples, pg_has_role(c.relowner, 'USAGE') OR pg_has_role("
            "(SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') "
            "FROM pg_class AS c WHERE c.oid = 'events_search'::regclass")
        if not may or indexed * 10 < counted:
            return
        with self._rlock:
            try:
                self._conn("r").execute("ANALYZE events_search")
            except (pg_errors.LockNotAvailable, pg_errors.QueryCanceled):
                pass  # (another session analyzing it past the lock timeout: the statistics come from there)
            except psycopg.Error as e:
                raise self._error(e) from None

    def _search_read(self, query: str, raw: bool, sql: str, params: dict) -> list:
        """Rows of ``sql`` with the query as ``%(q)s`` (a ``to_tsquery`` text) and ``params``."""
        tsquery = query if raw else _tsquery(query)
        with self._rlock:
            conn = self._conn("r")
            try:
                # Never prepared: a prepared statement may get a generic plan, blind to how
                # common the words are (a bitmap scan of every match of a common word, where
                # walking back from the newest position reads a few rows).
                return conn.execute(sql, {**params, "q": tsquery}, prepare=False).fetchall()
            except pg_errors.SyntaxError as e:  # a malformed raw query
                raise QueryError(f"search {tsquery!r}: {first_line(e)}") from None
            except psycopg.Error as e:
                raise self._error(e) from None

    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        if limit < 1:
            return []
        through, last, hidden = self._one(SEARCH_BOUNDS)
        where_s, params = _search_filters("s", session_id, type_, hidden)
        where_e, _ = _search_filters("e", session_id, type_, hidden)
        # The newest matches (indexed, and past the index), ranked; the text (for the
        # snippet) of the best only. The tsquery and the bounds are constants the planner
        # sees. Both parts are cut at the bounds read first, so a catch-up or an append that
        # commits in between changes nothing; with the index caught up (the usual case) the
        # part past it is left out, and the plan does not look at events for it.
        past = "" if last <= through else f"""
                UNION ALL
                (SELECT e.position, {SEARCH_VECTOR} FROM {PAST_BOUND}
                    AND {SEARCH_VECTOR} @@ to_tsquery('simple', %(q)s) {where_e}
                  ORDER BY e.position DESC LIMIT %(window)s)"""
        rows = self._search_read(query, raw, f"""
            WITH window_ AS (
              SELECT position, tsv FROM (
                (SELECT s.position, s.tsv FROM events_search AS s
                  WHERE s.tsv @@ to_tsquery('simple', %(q)s) AND s.position <= %(through)s {where_s}
                  ORDER BY s.position DESC LIMIT %(window)s){past}) AS m
              ORDER BY position DESC LIMIT %(window)s),
            best AS (
              SELECT w.position, -ts_rank(w.tsv, to_tsquery('simple', %(q)s)) AS score
                FROM window_ AS w ORDER BY score, w.position DESC LIMIT %(limit)s)
            SELECT e.session_id, e.seq, e.type, e.ts, {SEARCH_TEXT}, b.score
              FROM best AS b JOIN events AS e ON e.position = b.position
             ORDER BY b.score, b.position DESC""",
                                 {**params, "window": rank_window, "limit": limit, "through": through, "last": last})
        return [(sid, seq, t, ts, text, float(score)) for sid, seq, t, ts, text, score in rows]

    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None,
                     at_most: int | None = None) -> int:
        through, last, hidden = self._one(SEARCH_BOUNDS)
        where_s, params = _search_filters("s", session_id, type_, hidden)
        where_e, _ = _search_filters("e", session_id, type_, hidden)
        # (as in search: the part past the index only when there is one)
        past = "" if last <= through else f"""
                 + (SELECT count(*) FROM (SELECT 1 FROM {PAST_BOUND}
                       AND {SEARCH_VECTOR} @@ to_tsquery('simple', %(q)s) {where_e} LIMIT %(at_most)s) AS past)"""
        n = self._search_read(query, raw, f"""
            SELECT (SELECT count(*) FROM (SELECT 1 FROM events_search AS s
                     WHERE s.tsv @@ to_tsquery('simple', %(q)s) AND s.position <= %(through)s {where_s}
                     LIMIT %(at_most)s) AS indexed){past}""",
                              {**params, "through": through, "last": last,
                               "at_most": None if at_most is None else max(at_most, 0)})[0][0]
        return n if at_most is None else min(n, at_most)


# --- search -----------------------------------------------------------------------------------

#: Positions indexed per transaction of :meth:`PostgresBackend.search_catch_up`.
CATCH_UP_BATCH = 10_000
#: The fewest events a catch-up indexes before it takes the index's statistics again
#: (:meth:`PgSearch._take_statistics`).
ANALYZE_AFTER = 10_000
# What separates words in the indexed text (es_search_vector): whitespace and ASCII
# punctuation, "_" included.
_SEARCH_SPLIT = re.compile(r"[\s!-/:-@\[-`{-~]+")


def _tsquery(query: str) -> str:
    """A user's words as a ``to_tsquery`` text: every word must occur; a word ending in
    ``*`` matches as a prefix (``:*``); punctuation separates words as in the index, and no
    character of the query is taken as an operator. Raises :class:`QueryError` for a query
    with no word."""
    from ..search_terms import query_words

    parts = []
    for word, prefix in query_words(query):
        tokens = [t for t in _SEARCH_SPLIT.split(word) if t]
        for k, t in enumerate(tokens):
            parts.append("'" + t.replace("\\", "\\\\").replace("'", "''") + "'"
                         + (":*" if prefix and k == len(tokens) - 1 else ""))
    if not parts:
        raise QueryError("the search query has no word to look for")
    return " & ".join(parts)


def _search_filters(alias: str, session_id: str | None, type_: str | None, hidden: bool) -> tuple[str, dict]:
    """Conditions on ``alias`` that keep the matches of ``session_id`` and ``type_``, and
    (``hidden``: the store has unfinished imports) none of an unfinished import: hidden from
    readers, its matches must not take the ranking's window."""
    where, params = "", {}
    if hidden:
        where += f" AND {alias}.session_id NOT IN (SELECT session_id FROM importing)"
    if session_id is not None:
        where += f" AND {alias}.session_id = %(session)s"
        params["session"] = session_id
    if type_ is not None:
        where += f" AND {alias}.type = %(type)s"
        params["type"] = type_
    return where, params
