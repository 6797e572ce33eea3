"""The exception hierarchy: every error the store raises derives from EventStoreError.

Each survives pickling with its message and attributes (the base class's ``__reduce__``
passes each error's own arguments, named in ``_init_args``), so an error raised in a worker
process (``multiprocessing``, a ``ProcessPoolExecutor``) reaches the parent as itself."""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error raised by eventstore."""

    # The attributes a subclass's __init__ takes, in order, when they are not its message:
    # pickling rebuilds the error from them (the default passes the message to __init__).
    _init_args: tuple[str, ...] = ()

    def __reduce__(self):
        if not self._init_args:
            return super().__reduce__()
        return type(self), tuple(getattr(self, name) for name in self._init_args), self.__dict__


class SessionNotFound(EventStoreError, LookupError):
    """No session with this id is stored."""

    _init_args = ("session_id",)

    def __init__(self, session_id: str):
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found")


class SessionExists(EventStoreError):
    """A session with this id is already stored (ids are never reused)."""

    _init_args = ("session_id", "detail")

    def __init__(self, session_id: str, detail: str = ""):
        self.session_id = session_id
        self.detail = detail
        super().__init__(f"session {session_id!r} already exists" + (f": {detail}" if detail else ""))


class SeqConflict(EventStoreError):
    """An append's ``expected_seq`` is not the session's next seq.

    Attributes: ``session_id``, ``expected_seq`` (what the caller asked for) and
    ``actual_seq`` (the seq the next event would really get, i.e. the session's length);
    ``detail``, when given, ends the message (what holds the seq expected).
    """

    _init_args = ("session_id", "expected_seq", "actual_seq", "detail")

    def __init__(self, session_id: str, expected_seq: int, actual_seq: int, detail: str = ""):
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        self.detail = detail
        super().__init__(
            f"session {session_id!r}: expected seq {expected_seq}, but the next seq is {actual_seq}"
            + (f": {detail}" if detail else "")
        )


class IdempotencyConflict(EventStoreError):
    """An append's idempotency key (``event_id``) is already stored with other content (or,
    for ``append_many``, without the rest of its batch)."""

    _init_args = ("session_id", "event_id", "seq", "why")

    def __init__(self, session_id: str, event_id: object, seq: int,
                 why: str = "with a different type or payload (payloads are compared as their "
                            "canonical JSON text, so key order counts)"):
        self.session_id = session_id
        self.event_id = event_id
        self.seq = seq
        self.why = why
        super().__init__(f"session {session_id!r}: event_id {event_id!r} is already stored at seq {seq} {why}")


class ConflictError(EventStoreError):
    """A redaction's event is not as the caller read it: no event at ``seq`` in the session,
    or one whose stored hash is no longer ``expected_hash`` (another redaction came first)."""

    _init_args = ("session_id", "seq", "why")

    def __init__(self, session_id: str, seq: int, why: str):
        self.session_id = session_id
        self.seq = seq
        self.why = why
        super().__init__(f"session {session_id!r}, seq {seq}: {why}")


class InvalidEvent(EventStoreError, ValueError):
    """An event or payload that the store refuses: not JSON, NaN/Infinity, a reserved key, a bad type."""


class InvalidJSONL(InvalidEvent):
    """A JSONL file that cannot be imported; ``str()`` is ``FILE:LINE: reason`` (``FILE:
    reason`` when the problem is the file as a whole).

    Attributes: ``path`` (str, ``-`` for stdin), ``line`` (1-based line number, 0 when the
    problem is the file as a whole), ``reason``, and ``seq``: the seq of the event the line
    holds where import knows it (a stored event it differs from, an event the database
    refused, the first event past a stored head), else None. A caller that imports a stream
    it made itself (:func:`eventstore.core.copy.copy_sessions`) names the event by ``seq``.
    """

    _init_args = ("path", "line", "reason", "seq")

    def __init__(self, path: str, line: int, reason: str, seq: int | None = None):
        self.path = path
        self.line = line
        self.reason = reason
        self.seq = seq
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


class ImportConflict(InvalidJSONL):
    """A file names a session that is already stored with other content (``FILE:LINE: reason``).

    Extra attribute: ``session_id``. Raised by import when the file's events differ from
    the stored ones (the line is the first that differs) or continue them without
    ``append=True`` (the line is the first event past the stored head).
    """

    _init_args = ("path", "line", "reason", "session_id", "seq")

    def __init__(self, path: str, line: int, reason: str, session_id: str, seq: int | None = None):
        self.session_id = session_id
        super().__init__(path, line, reason, seq)


class AppendOnlyViolation(EventStoreError):
    """The database refused a write because it would change, remove, overwrite or gap the log."""


class DatabaseError(EventStoreError):
    """The database could not be opened, migrated or written (locked too long, not a database, ...)."""


class QueryError(EventStoreError):
    """A read-only SQL query (``eventstore sql``,
    :meth:`eventstore.backends.capabilities.QueryConnection.query`) failed or was refused;
    a refusal's message starts with ``refused:`` and names what it refused.
    ``limit`` is ``"time"`` or ``"memory"`` when the query was stopped by that limit of its
    query connection (None otherwise)."""

    def __init__(self, message: str, limit: str | None = None):
        super().__init__(message)
        self.limit = limit


class CheckpointError(EventStoreError):
    """A checkpoint document or signing key that cannot be used: not JSON, not a
    checkpoint, a field of the wrong type, a key file that is no Ed25519 key."""


class SchemaOutdated(DatabaseError):
    """An eventstore database at an older schema revision, opened read-only (``verify``,
    ``sql``, an auditor's role): a read-only open does not upgrade it. Opening it once for
    writing (``eventstore init``, as the database's owner on PostgreSQL) upgrades it;
    ``revision`` is the one it is at, ``head`` the one this eventstore writes."""

    def __init__(self, message: str, revision: str, head: str):
        super().__init__(message)
        self.revision = revision
        self.head = head


class WalMismatch(DatabaseError):
    """The ``-wal`` file beside a database was written for another database (or another
    copy of it); the database was not opened, and nothing was read through the WAL."""
