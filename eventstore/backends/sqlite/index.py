"""The viewer's index reads (:class:`~eventstore.backends.capabilities.SessionIndex`).
"""

from __future__ import annotations

from ..capabilities import SessionIndex
from .statements import MAX_CURSOR

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any


class SQLiteIndex(SessionIndex):
    """The viewer's index of :class:`~.backend.SQLiteBackend`: one query each."""

    # --- the viewer's index ----------------------------------------------------------------------

    def session_rows(self) -> list[tuple[str, float]]:
        return self._read("SELECT id, created_at FROM sessions WHERE id NOT IN (SELECT session_id FROM importing) "
                          "ORDER BY created_at, id")

    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        # count, max(seq) and max(position) come from the (session_id, seq) index alone; the
        # two joins are index look-ups.
        return self._read(_COUNTS_SQL, (min(upto_position, MAX_CURSOR),))

    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        return self._read(_STATE_SQL, (min(after_position, MAX_CURSOR), min(upto_position, MAX_CURSOR), limit))


_COUNTS_SQL = """
SELECT a.session_id, a.n, a.last_position, f.ts, l.ts
FROM (SELECT session_id, count(*) AS n, max(seq) AS last_seq, max(position) AS last_position
      FROM events WHERE position <= ? AND session_id NOT IN (SELECT session_id FROM importing)
      GROUP BY session_id) AS a
JOIN events AS f ON f.session_id = a.session_id AND f.seq = 0
JOIN events AS l ON l.session_id = a.session_id AND l.seq = a.last_seq"""

_STATE_SQL = """
SELECT position, session_id, type,
       CASE WHEN type IN ('assistant/message', 'assistant/part') THEN payload -> '$.tool_calls'
            WHEN type = 'tool/result' THEN payload ->> '$.tool_call_id' END
FROM events
WHERE position > ? AND position <= ?
  AND type IN ('turn/start', 'turn/end', 'user/message', 'assistant/message', 'tool/result', 'assistant/part')
  AND session_id NOT IN (SELECT session_id FROM importing)
ORDER BY position LIMIT ?"""
