"""eventstore: append-only AI-agent session logs in SQLite or PostgreSQL.

The public API::

    from eventstore import EventStore
    store = EventStore.open("agent.db")
    s = store.create_session()
    s.append("user/message", {"content": "1+1?"})
    s.derive_messages()

See the README for the whole tour and ``shared/spec/session-log.md`` for the format.
"""

from __future__ import annotations

from .bulk import Dropped, ImportReport
from .errors import (
    AppendOnlyViolation,
    DatabaseError,
    EventStoreError,
    IdempotencyConflict,
    ImportConflict,
    InvalidEvent,
    InvalidJSONL,
    QueryError,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from .store import Event, EventStore, Session, SessionInfo

__all__ = [
    "EventStore",
    "Session",
    "Event",
    "SessionInfo",
    "ImportReport",
    "Dropped",
    "EventStoreError",
    "SessionNotFound",
    "SessionExists",
    "SeqConflict",
    "IdempotencyConflict",
    "InvalidEvent",
    "InvalidJSONL",
    "ImportConflict",
    "AppendOnlyViolation",
    "DatabaseError",
    "QueryError",
]

__version__ = "0.1.0"
