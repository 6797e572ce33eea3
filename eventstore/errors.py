"""The exception hierarchy: every error the store raises derives from EventStoreError.

Each survives pickling with its message and attributes (``__reduce__`` passes its own
arguments), so an error raised in a worker process (``multiprocessing``, a
``ProcessPoolExecutor``) reaches the parent as itself."""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error raised by eventstore."""


class SessionNotFound(EventStoreError, LookupError):
    """No session with this id is stored."""

    def __init__(self, session_id: str):
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found")

    def __reduce__(self):
        return type(self), (self.session_id,), self.__dict__


class SessionExists(EventStoreError):
    """A session with this id is already stored (ids are never reused)."""

    def __init__(self, session_id: str, detail: str = ""):
        self.session_id = session_id
        self.detail = detail
        super().__init__(f"session {session_id!r} already exists" + (f": {detail}" if detail else ""))

    def __reduce__(self):
        return type(self), (self.session_id, self.detail), self.__dict__


class SeqConflict(EventStoreError):
    """An append's ``expected_seq`` is not the session's next seq.

    Attributes: ``session_id``, ``expected_seq`` (what the caller asked for) and
    ``actual_seq`` (the seq the next event would really get, i.e. the session's length).
    """

    def __init__(self, session_id: str, expected_seq: int, actual_seq: int):
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(
            f"session {session_id!r}: expected seq {expected_seq}, but the next seq is {actual_seq}"
        )

    def __reduce__(self):
        return type(self), (self.session_id, self.expected_seq, self.actual_seq), self.__dict__


class IdempotencyConflict(EventStoreError):
    """An append's idempotency key (``event_id``) is already stored with other content (or,
    for ``append_many``, without the rest of its batch)."""

    def __init__(self, session_id: str, event_id: object, seq: int,
                 why: str = "with a different type or payload (payloads are compared as their "
                            "canonical JSON text, so key order counts)"):
        self.session_id = session_id
        self.event_id = event_id
        self.seq = seq
        self.why = why
        super().__init__(f"session {session_id!r}: event_id {event_id!r} is already stored at seq {seq} {why}")

    def __reduce__(self):
        return type(self), (self.session_id, self.event_id, self.seq, self.why), self.__dict__


class InvalidEvent(EventStoreError, ValueError):
    """An event or payload that the store refuses: not JSON, NaN/Infinity, a reserved key, a bad type."""


class InvalidJSONL(InvalidEvent):
    """A JSONL file that cannot be imported; ``str()`` is ``FILE:LINE: reason`` (``FILE:
    reason`` when the problem is the file as a whole).

    Attributes: ``path`` (str, ``-`` for stdin), ``line`` (1-based line number, 0 when the
    problem is the file as a whole) and ``reason``.
    """

    def __init__(self, path: str, line: int, reason: str):
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")

    def __reduce__(self):
        return type(self), (self.path, self.line, self.reason), self.__dict__


class ImportConflict(InvalidJSONL):
    """A file names a session that is already stored with other content (``FILE:LINE: reason``).

    Extra attribute: ``session_id``. Raised by import when the file's events differ from
    the stored ones (the line is the first that differs) or continue them without
    ``append=True`` (the line is the first event past the stored head).
    """

    def __init__(self, path: str, line: int, reason: str, session_id: str):
        self.session_id = session_id
        super().__init__(path, line, reason)

    def __reduce__(self):
        return type(self), (self.path, self.line, self.reason, self.session_id), self.__dict__


class AppendOnlyViolation(EventStoreError):
    """The database refused a write because it would change, remove, overwrite or gap the log."""


class DatabaseError(EventStoreError):
    """The database could not be opened, migrated or written (locked too long, not a database, ...)."""


class QueryError(EventStoreError):
    """A read-only SQL query (``eventstore sql``, :func:`eventstore.audit.query`) failed or
    was refused; a refusal's message starts with ``refused:`` and names what it refused."""
