"""The viewer's index reads (:class:`~eventstore.backends.capabilities.SessionIndex`).
"""

from __future__ import annotations

from typing import Any

from ..capabilities import (
    SessionIndex,
)
from .statements import COUNTS_SQL, STATE_SQL


class PgIndex(SessionIndex):
    """The viewer's index of :class:`~.backend.PostgresBackend`: one query each."""

    # --- the viewer's index -------------------------------------------------------------------

    def session_rows(self) -> list[tuple[str, float]]:
        return [tuple(r) for r in self._read("SELECT id, created_at FROM sessions WHERE id NOT IN "
                                             "(SELECT session_id FROM importing) ORDER BY created_at, id")]

    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        return [tuple(r) for r in self._read(COUNTS_SQL, (upto_position,))]

    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        return [tuple(r) for r in self._read(STATE_SQL, (after_position, upto_position, limit))]
