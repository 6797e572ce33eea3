"""eventstore: append-only AI-agent session logs in SQLite.

The public API::

    from eventstore import EventStore
    store = EventStore.open("agent.db")
    s = store.create_session()
    s.append("user/message", {"content": "1+1?"})
    s.derive_messages()

See the README for the whole tour and ``shared/spec/session-log.md`` for the format.

The classes that need SQLite and SQLAlchemy (:class:`EventStore` and the rest of the
store, :class:`ImportReport`) are imported on first use: ``import eventstore`` itself
loads only the exceptions, so the ``eventstore`` command's entry point
(:mod:`eventstore.__main__`) is in place, with its Ctrl-C handler, before the heavy
imports start.
"""

from __future__ import annotations

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

# typing.TYPE_CHECKING without importing typing (4 ms of the command's start, before its
# Ctrl-C handler is in place); type checkers read any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers and IDEs; at run time, __getattr__ below
    from .bulk import Dropped, ImportReport
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

# The public names that live in the heavy modules: {name: module}.
_LAZY = {"EventStore": "store", "Session": "store", "Event": "store", "SessionInfo": "store",
         "ImportReport": "bulk", "Dropped": "bulk"}


# The submodules, reachable as attributes after a bare ``import eventstore`` (as they were
# when this module imported the store eagerly).
_SUBMODULES = {"audit", "bulk", "checkpoint", "cli", "demo", "engine", "follow", "jsonl", "parse_worker",
               "projection", "schema", "search", "store", "tailview", "transcripts", "writelock"}


def __getattr__(name: str) -> object:  # PEP 562: called only for names not yet in the module
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
