"""The log's derived views (:class:`~eventstore.backends.capabilities.LogViews`): usage,
``session/info`` rows, summary titles.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..capabilities import LogViews

#: ``session/info`` events read per query by :meth:`info_rows` (one page in memory).
INFO_PAGE = 64


class SQLiteViews(LogViews):
    """The view reads of :class:`~.backend.SQLiteBackend`."""

    def summary_titles(self, session_id: str | None = None) -> list[tuple[str, str]]:
        summaries = """(SELECT ts, position, payload ->> '$.source.leafUuid' AS leaf,
                                 payload ->> '$.source.summary' AS title
                            FROM events
                           WHERE type = 'claude/summary' AND json_type(payload, '$.source.summary') = 'text'
                             AND json_type(payload, '$.source.leafUuid') = 'text'
                             AND session_id NOT IN (SELECT session_id FROM importing)) AS sm"""
        # (a line's uuid is the key of its first event; keys with ':', '#' or '@' are its others')
        if session_id is None:  # each summary's line, by the index on event_id alone
            return [tuple(r) for r in self._read(f"""
                SELECT t.session_id, sm.title FROM {summaries}
                  JOIN events AS t ON t.event_id = sm.leaf AND t.event_id NOT GLOB '*[:#@]*'
                 WHERE t.session_id NOT IN (SELECT session_id FROM importing)
                 ORDER BY sm.ts, sm.position, t.session_id""")]
        # One session: a probe of (session_id, event_id) per summary, never a pass over its events.
        rows = self._read(f"""
            SELECT sm.title FROM {summaries}
             WHERE EXISTS (SELECT 1 FROM events AS t
                            WHERE t.session_id = ? AND t.event_id = sm.leaf
                              AND t.event_id NOT GLOB '*[:#@]*')
               AND ? NOT IN (SELECT session_id FROM importing)
             ORDER BY sm.ts, sm.position""", (session_id, session_id))
        return [(session_id, r[0]) for r in rows]

    def info_rows(self) -> Iterator[tuple[str, str]]:
        after = ("", -1)
        while True:
            rows = self._read("SELECT session_id, seq, payload FROM events WHERE type = 'session/info' "
                              "AND (session_id, seq) > (?, ?) AND session_id NOT IN (SELECT session_id FROM importing) "
                              f"ORDER BY session_id, seq LIMIT {INFO_PAGE}", after)
            yield from ((sid, payload) for sid, _seq, payload in rows)
            if len(rows) < INFO_PAGE:
                return
            after = rows[-1][:2]

    def usage_totals(self) -> list[tuple[str, int, int, int, int, int]]:
        from . import search

        return search.usage_totals(self)
