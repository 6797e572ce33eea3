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

from .errors import (
    AppendOnlyViolation,
    CheckpointError,
    ConflictError,
    DatabaseError,
    EventStoreError,
    IdempotencyConflict,
    ImportConflict,
    InvalidEvent,
    InvalidJSONL,
    QueryError,
    SchemaOutdated,
    SeqConflict,
    SessionExists,
    SessionNotFound,
    WalMismatch,
)

# typing.TYPE_CHECKING without importing typing; type checkers read any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers and IDEs; at run time, __getattr__ below
    from eventstore.core.aio import AsyncEventStore, AsyncSession
    from eventstore.core.store import Event, EventStore, Session, SessionInfo
    from eventstore.io.bulk import Dropped, ImportReport

__all__ = [
    "EventStore",
    "Session",
    "Event",
    "SessionInfo",
    "AsyncEventStore",
    "AsyncSession",
    "ImportReport",
    "Dropped",
    "EventStoreError",
    "SessionNotFound",
    "SessionExists",
    "SeqConflict",
    "ConflictError",
    "IdempotencyConflict",
    "InvalidEvent",
    "InvalidJSONL",
    "ImportConflict",
    "AppendOnlyViolation",
    "DatabaseError",
    "QueryError",
    "CheckpointError",
    "SchemaOutdated",
    "WalMismatch",
]

__version__ = "0.1.0"


# PEP 562: each name is imported on first use, so that a command (eventstore --help) loads
# only what it needs.
_LAZY = {"EventStore": "eventstore.core.store", "Session": "eventstore.core.store", "Event": "eventstore.core.store",
         "SessionInfo": "eventstore.core.store", "ImportReport": "eventstore.io.bulk", "Dropped": "eventstore.io.bulk",
         "AsyncEventStore": "eventstore.core.aio", "AsyncSession": "eventstore.core.aio"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
