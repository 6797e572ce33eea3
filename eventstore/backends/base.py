"""The backend contract: what the store asks of a database, in one small abstract class.

A backend (one per database: :mod:`eventstore.backends.sqlite`,
:mod:`eventstore.backends.postgres`) owns everything that depends on the database:
connections, transactions, locking, migrations, and translating the database's errors into
:mod:`eventstore.errors` by error code or constraint name, never by message text. The code
above it (validation, the JSON codec, the hash chain, ``EventStore``/``Session``, import
and export, ``verify``, ``follow``, the CLI) imports no driver and talks to the database
only through these methods. Like the recorders of ``eventsourcing``, a backend stores and
reads rows; it does not know what an event means.

Shapes used below (every ``payload`` is the stored JSON object text, canonical as
:func:`eventstore.log.codec.dumps` writes it; ``ts`` seconds since the epoch, a float):

* ``SessionEventRow = (seq, position, type, ts, payload)``: a session's event;
* ``EventRow = (position, session_id, seq, type, ts, payload)``: an event of any session;
* ``StoredRow = (seq, type, ts, payload, hash)``: what import compares and inserts
  (payload and hash may be ``str`` or UTF-8 ``bytes`` on the way in);
* ``SessionRow = (id, created_at, events, last_ts)``: the registry (``last_ts`` None for an
  empty session).

The guarantees a backend gives: appends are atomic; seqs are dense per session (0, 1, 2,
...); positions are dense across the store (1, 2, 3, ...) and grow in commit order (an
event committed later never has a smaller position); the database itself refuses UPDATE,
DELETE, TRUNCATE and any INSERT that overwrites or gaps (triggers, constraints), with the
error codes below.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import ClassVar, TypeVar
    T = TypeVar("T")

__all__ = [
    "Backend",
    "not_stored",
    "schema_differences",
    "Follower",
    "ImportLock",
    "ImportTransaction",
    "Refusal",
    "CODES",
]

# --- error codes ---------------------------------------------------------------------------
# The database's triggers raise these codes (SQLite: the RAISE message starts with the code
# and a colon, and the error's sqlite_errorname is SQLITE_CONSTRAINT_TRIGGER; PostgreSQL:
# the SQLSTATE). A backend recognises a refusal by its code, or by the constraint name
# below, never by the rest of the message.

UNKNOWN_SESSION = "ES001"  #: an event for a session that is not stored -> SessionNotFound
SEQ_NOT_NEXT = "ES002"  #: an event's seq is not its session's next -> SeqConflict
POSITION_NOT_NEXT = "ES003"  #: an event's position is not the next global one -> retry / AppendOnlyViolation
EVENTS_APPEND_ONLY = "ES004"  #: UPDATE, DELETE or TRUNCATE of events -> AppendOnlyViolation
SESSIONS_APPEND_ONLY = "ES005"  #: UPDATE, DELETE or TRUNCATE of sessions -> AppendOnlyViolation
# SQLite refuses these in triggers too, so that no INSERT OR REPLACE can overwrite through
# the unique key; PostgreSQL reports them as unique violations of the constraints named
# SESSIONS_PKEY and EVENT_ID_INDEX.
SESSION_EXISTS = "ES006"  #: a session id that is already stored -> SessionExists
EVENT_ID_TAKEN = "ES007"  #: an event_id already stored in the session -> IdempotencyConflict / import error
PAYLOAD_NOT_CANONICAL = "ES008"  #: payload is not JSON object text as JSON.stringify writes it
PAYLOAD_RESERVED_KEY = "ES009"  #: payload holds type/seq/ts, or an event_id that is not a string
SESSION_ROW_INVALID = "ES010"  #: a sessions row with a bad created_at or rowid (SQLite)
#: an importing row for a session that already holds events, or whose first_position is not
#: past every stored one: only an import that is creating the session may hide it
IMPORTING_ROW_INVALID = "ES011"
#: a write to the derived search tables that does not follow from the log (PostgreSQL)
SEARCH_ROW_INVALID = "ES012"

SESSIONS_PKEY = "sessions_pkey"  #: PostgreSQL: the primary key of sessions
EVENT_ID_INDEX = "events_session_event_id"  #: PostgreSQL: unique (session_id, event_id)

#: Every code, with what it means (for messages and docs).
CODES = {
    UNKNOWN_SESSION: "unknown session",
    SEQ_NOT_NEXT: "seq is not the next seq of its session",
    POSITION_NOT_NEXT: "position is not the next global position",
    EVENTS_APPEND_ONLY: "events are append-only",
    SESSIONS_APPEND_ONLY: "sessions are append-only",
    SESSION_EXISTS: "session already exists",
    EVENT_ID_TAKEN: "event_id is already stored in this session",
    PAYLOAD_NOT_CANONICAL: "payload must be the text of a JSON object as JSON.stringify writes it",
    PAYLOAD_RESERVED_KEY: "payload holds a key of the line itself (type, seq, ts) or a non-string event_id",
    SESSION_ROW_INVALID: "invalid sessions row",
    IMPORTING_ROW_INVALID: "only an import creating a session may hide it",
    SEARCH_ROW_INVALID: "the search tables are derived from the log",
}

#: Rows per page of :meth:`Backend.session_events` when the caller gives no limit.
PAGE = 1000



def schema_differences(have: dict[str, tuple[str, str]], want: dict[str, tuple[str, str]],
                       skip: Iterable[str] = ()) -> list[str]:
    """What differs between two schemas given as ``{name: (kind, normalised definition)}``
    (``have`` the database's, ``want`` a freshly migrated one's): one sentence per object
    extra, missing or changed, naming it; objects in ``skip`` are left out."""
    skip = set(skip)

    def named(kind: str, name: str) -> str:  # "index on events" + "x" -> "index x on events"
        word, _, rest = kind.partition(" on ")
        if name.startswith(word + " "):  # a name that says its kind already ("owner of events")
            return name
        return f"{word} {name}" + (f" on {rest}" if rest else "")

    out = []
    for name, (kind, ddl) in sorted(have.items()):
        if name not in want and name not in skip:
            out.append(f"extra {named(kind, name)}, not created by the migrations: {ddl[:200]}")
    for name, (kind, ddl) in sorted(want.items()):
        got = have.get(name)
        if name in skip:
            continue
        if got is None:
            out.append(f"{named(kind, name)} is missing")
        elif got[0] != kind:
            (word, _, rest), (got_word, _, got_rest) = kind.partition(" on "), got[0].partition(" on ")
            out.append(f"{word} {name} is on {got_rest}, the migrations put it on {rest}" if word == got_word
                       else f"{name} is a {got_word}, the migrations made it a {word}")
        elif got[1] != ddl:
            out.append(f"{named(kind, name)} differs from its definition in the migrations: {_where(got[1], ddl)}")
    return out


def _where(have: str, want: str, before: int = 40, after: int = 160) -> str:
    """``have`` when short, else the part of it around its first difference from ``want``
    (a long function body differs at its end as often as at its start)."""
    if len(have) <= before + after:
        return have
    at = next((i for i, (a, b) in enumerate(zip(have, want, strict=False)) if a != b), min(len(have), len(want)))
    start = max(0, min(at - before, len(have) - before - after))
    return ("…" if start else "") + have[start:start + before + after] + ("…" if start + before + after < len(have)
                                                                          else "")


MAX_COUNTER = 2**63 - 1  # the largest position or seq a database column holds (a signed 64-bit integer)


def counter_full(display: str, session_id: str, last_position: int | None, next_seq: int | None) -> Exception | None:
    """The error of an append that the database refused because a counter is full: the
    log's last ``position`` or the session's last seq is :data:`MAX_COUNTER`, so the next
    one cannot be stored (each backend asks after a data or constraint error, by state,
    not by the driver's message); None when neither is full."""
    from ..errors import DatabaseError

    if last_position is not None and last_position >= MAX_COUNTER:
        what = f"the log's last position is {last_position}, the largest a position can be"
    elif next_seq is not None and next_seq > MAX_COUNTER:
        what = f"its last seq is {next_seq - 1}, the largest a seq can be"
    else:
        return None
    return DatabaseError(f"{display}: session {session_id!r}: the append was refused: {what} (2**63-1), so no "
                         f"event can follow it; nothing was written")


def not_stored(session_id: str, seq: int, n: int = 1, stored: int = 0) -> Exception:
    """The error of an INSERT the database reported done although it stored only ``stored``
    of the ``n`` rows from ``seq`` on: a trigger that ignores rows (SQLite's
    ``RAISE(IGNORE)``, a PostgreSQL BEFORE trigger returning NULL). Nothing unstored is
    ever acknowledged."""
    from ..errors import DatabaseError

    seqs = f"seq {seq}" if n == 1 else f"seqs {seq}..{seq + n - 1}"
    kept = "nothing was appended" if not stored else f"the first {stored} were stored"
    return DatabaseError(f"session {session_id!r} {seqs}: the database reported the insert done but stored "
                         f"{stored} of {n} events (a trigger ignores them: run eventstore verify); {kept}")


class Refusal:
    """Why the database refused a row of an import: ``code`` (one of the codes above, or
    None for another refusal) and ``message`` (the database's words, for the user). A
    backend reports a unique violation of :data:`EVENT_ID_INDEX` as :data:`EVENT_ID_TAKEN`
    and one of :data:`SESSIONS_PKEY` as :data:`SESSION_EXISTS`."""

    __slots__ = ("code", "message")

    def __init__(self, code: str | None, message: str):
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"Refusal({self.code!r}, {self.message!r})"


class Backend(ABC):
    """One open database: the core contract every backend implements.

    Sixteen abstract methods: :meth:`open`, :meth:`close`, :meth:`create_session`,
    :meth:`session_meta`, :meth:`sessions`, :meth:`append`, :meth:`event_by_id`,
    :meth:`session_events`, :meth:`events_after`, :meth:`last_position`, :meth:`follower`,
    :meth:`import_transaction`, :meth:`import_lock`, :meth:`import_owner_alive`,
    :meth:`imports`, :meth:`messages_json`. The other methods here have defaults built on
    those (a backend overrides them for speed), and the optional capabilities
    (:mod:`.capabilities`: search, auditing reads, the viewer's index, the log's views, the
    SQL sandbox, roles) have generic fallbacks on the core (:mod:`.fallbacks`).

    Thread-safe (calls may come from several threads; a backend serializes them as it
    must). Every method raises :class:`~eventstore.errors.DatabaseError` when the database
    cannot be reached or stays locked past the busy timeout, besides the errors it names.
    """

    #: ``"sqlite"``, ``"postgresql"``, or another backend's name.
    name: ClassVar[str]
    #: What messages call the database: a file path, ``:memory:``, or the URL without password.
    display: str
    #: The schema revision :meth:`open` found and upgraded from (an older eventstore's
    #: database); None when the database was current, new, or opened read-only.
    upgraded_from: str | None = None

    # --- open, close ---------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def open(cls, url: str, *, busy_timeout: float, durability: str = "normal", write_queue: bool = True,
             readonly: bool = False, upgrade: bool = True) -> Backend:
        """Connect to ``url`` and bring the schema to the head revision (Alembic, once, even
        when several processes open a new database at once).

        ``busy_timeout`` (seconds) is how long a write waits for other writers;
        ``durability`` is ``"normal"`` or ``"full"`` (each backend says what they mean);
        ``write_queue`` is SQLite's (a backend ignores options that do not apply to it).
        With ``readonly``, nothing is created or migrated: the database must be at the head
        revision (or one that reads the same), and every write raises :class:`DatabaseError`.
        Without ``upgrade``, a database an older eventstore wrote raises
        :class:`SchemaOutdated` as a read-only open does, instead of being upgraded.
        Raises :class:`DatabaseError`
        (cannot connect, not an eventstore database, a newer schema, bad options).
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections, locks and threads. The backend cannot be used afterwards;
        closing twice is harmless."""

    def files(self) -> list[str]:
        """The real paths of the database's own files (export refuses to overwrite them);
        none for a server or an in-memory database."""
        return []

    # --- sessions ---------------------------------------------------------------------------

    @abstractmethod
    def create_session(self, session_id: str, created_at: float, meta_json: str) -> None:
        """Store a new session row. Raises :class:`SessionExists`."""

    @abstractmethod
    def session_meta(self, session_id: str) -> str | None:
        """The stored meta JSON object text of ``session_id``, or None when it is not stored
        or its import is unfinished."""

    @abstractmethod
    def sessions(self) -> list[tuple[str, float, int, float | None]]:
        """The registry: ``SessionRow`` for every session, oldest first (by created_at, id),
        leaving out unfinished imports."""

    # --- appends ----------------------------------------------------------------------------

    @abstractmethod
    def append(self, session_id: str, types: list[str], tss: list[float], payloads: list[str],
               expected_seq: int | None, *, salts: list[bytes] | None = None,
               commits: list[str] | None = None) -> tuple[int, int, str]:
        """Append a batch of events (non-empty lists of equal length) to ``session_id``
        atomically, and return ``(first seq, first position, last hash)``.

        ``salts`` (one per event) and ``commits`` (each payload's
        :func:`eventstore.log.commit.commit_json`, computed by the caller before the head is
        taken) make the events salted: each is stored with its salt, and hashed from its
        commit payload (docs/redaction.md). A backend without a ``salt`` column may store
        them unsalted (hashed from the payload itself), which ``verify`` also accepts.

        In one write transaction: take the session's head (next seq, next position, last
        hash, :func:`eventstore.log.chain.genesis_hash` for an empty session); with
        ``expected_seq``, refuse unless it is the next seq; build the rows with
        :func:`eventstore.log.chain.chain_rows` (``[type, ts, payload, hash, salt, ...]``);
        insert them at seqs ``seq0...`` and positions ``pos0...``; commit.
        Raises :class:`SeqConflict` (``expected_seq`` is not the head, or another writer took
        the seq; ``actual_seq`` read in the transaction), :class:`SessionNotFound`,
        :class:`AppendOnlyViolation` (any other refusal: a duplicate event_id (code ES007),
        a payload the database refuses), :class:`InvalidEvent` (text the database cannot
        hold), :class:`DatabaseError`.
        """

    def append_one(self, session_id: str, type_: str, ts: float, payload: str,
                   expected_seq: int | None, *, salt: bytes | None = None, commit: str | None = None,
                   ) -> tuple[int, int, str]:
        """:meth:`append` of one event (``salt`` and ``commit`` as there): ``(seq, position,
        hash)``. A backend may make this quicker (one INSERT of plain VALUES, hashed with
        :func:`eventstore.log.chain.chain_hash`)."""
        if salt is None:
            return self.append(session_id, [type_], [ts], [payload], expected_seq)
        return self.append(session_id, [type_], [ts], [payload], expected_seq, salts=[salt], commits=[commit])

    @abstractmethod
    def event_by_id(self, session_id: str, event_id: str) -> tuple[int, int, str, float, str] | None:
        """The event stored under idempotency key ``event_id`` in ``session_id``, as
        ``SessionEventRow``, or None (an index read)."""

    # --- reads ------------------------------------------------------------------------------

    def next_seq(self, session_id: str) -> int:
        """The seq the session's next event gets (its number of events; 0 when not stored).
        The default reads the last event."""
        rows = self.session_events(session_id, -1, None, 1, last=True)
        return rows[0][0] + 1 if rows else 0

    @abstractmethod
    def session_events(self, session_id: str, after_seq: int = -1, types: list[str] | None = None,
                       limit: int = PAGE, last: bool = False) -> list[tuple[int, int, str, float, str]]:
        """``SessionEventRow`` of ``session_id`` with ``seq > after_seq``, of ``types`` only
        (all when None or empty), in seq order, at most ``limit`` of them: the first ones, or
        with ``last`` the last ones (still in seq order). One index read, no transaction left
        open."""

    def session_payloads(self, session_id: str, types: list[str], limit: int | None = None,
                         last: bool = False, from_seq: int = 0) -> tuple[int, list[tuple[int, str, str]]]:
        """``(head, rows)``: the seq the session's next event gets (as :meth:`next_seq`),
        and ``(seq, type, payload)`` of its events of ``types`` with ``seq >= from_seq`` in
        seq order: all of them (``limit`` None), or at most ``limit``, the first ones or with
        ``last`` the last ones. What a reader of items needs (the Agents SDK session's read):
        :meth:`session_events` without the columns it does not use, and the head of the
        same snapshot. The backends read both in one statement; this default reads them one
        after the other (head first)."""
        head = self.next_seq(session_id)
        rows = self.session_events(session_id, from_seq - 1, types, 2**62 if limit is None else limit, last)
        return head, [(r[0], r[2], r[4]) for r in rows]

    @abstractmethod
    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        """``EventRow`` of every visible session with ``position > after_position``, in
        position order, at most ``limit``, stopping before the ``first_position`` of every
        unfinished import whose owner is not in ``dead_owners`` (those events become visible
        later; readers wait for them), and leaving out the events of every unfinished
        import. Barrier and rows are read in one snapshot. See :class:`eventstore.live.follow.DeadOwners`."""

    @abstractmethod
    def last_position(self, dead_owners: Collection[str] = ()) -> int:
        """The largest position a reader may have seen (0 for an empty store): the largest
        stored one, or the position before the first unfinished import whose owner is not
        in ``dead_owners``."""

    @abstractmethod
    def follower(self, poll_interval: float) -> Follower:
        """A reader on a connection of its own, for following commits (see :class:`Follower`);
        ``poll_interval`` (seconds) is how often a polling backend looks."""

    # --- imports (revision 0220; see eventstore.io.bulk) -----------------------------------

    @abstractmethod
    def import_transaction(self, session_id: str, body: Callable[[ImportTransaction], T]) -> T:
        """Call ``body(tx)`` inside one write transaction for the import of ``session_id``
        and commit what it did, or roll everything back when it raises (the exception goes
        on, translated when it is the database's). Returns what ``body`` returns."""

    @abstractmethod
    def import_lock(self, session_id: str) -> ImportLock | None:
        """Take the import lock of ``session_id`` for this process (waiting at most about a
        second for someone testing it), or return None when another importer holds it. The
        kernel or server releases it when the process dies (SQLite: ``flock`` on a file
        beside the database; PostgreSQL: a session advisory lock on a connection of its own)."""

    @abstractmethod
    def import_owner_alive(self, owner: str) -> bool:
        """Whether the import lock named ``owner`` (an :attr:`ImportLock.owner`) is still held."""

    @abstractmethod
    def imports(self) -> list[tuple[str, int, str, float]]:
        """``(session_id, first_position, owner, started_at)`` of every unfinished import."""

    # --- the projection ---------------------------------------------------------------------

    @abstractmethod
    def messages_json(self, session_id: str, upto_seq: int | None = None) -> str:
        """The session's chat messages as JSON array text, read from the ``messages`` view
        (``[]`` when there are none): the ``message`` column of its rows in seq order, joined
        with commas. With ``upto_seq``, only the rows of events with ``seq <= upto_seq``:
        what the model was sent at that point."""

    def messages_size(self, session_id: str, upto_seq: int | None = None) -> int:
        """The UTF-8 bytes of the ``message`` texts :meth:`messages_json` would join (the
        same rows), counted by the database without bringing them into memory: the viewer
        refuses a projection past its byte limit before reading it. The default reads them."""
        return len(self.messages_json(session_id, upto_seq).encode("utf-8", "surrogatepass"))

    # --- export -----------------------------------------------------------------------------

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        """``(type, seq, ts, payload)`` of the session's events with ``seq > after_seq``, in
        seq order, at most ``limit``: the stored payload text as it is (a row holding text
        that is not valid UTF-8 may come as ``bytes``). One short read each.

        With ``max_bytes``, a row comes only while the payload bytes of the rows before it
        are under ``max_bytes`` (the first always): a page bounded by bytes, not rows.
        Fewer than ``limit`` rows whose payloads add up to less than ``max_bytes`` means the
        session ends there. The default reads :meth:`session_events` and cuts the page."""
        out, size = [], 0
        for seq, _position, type_, ts, payload in self.session_events(session_id, after_seq, None, limit):
            if max_bytes is not None and out and size >= max_bytes:
                break
            out.append((type_, seq, ts, payload))
            size += len(payload.encode("utf-8", "surrogatepass")) if isinstance(payload, str) else len(payload)
        return out

    def export_chunks(self, session_id: str, meta_json: str) -> Iterator[tuple[list, int, int]]:
        """The session as JSONL, ``(pieces, bytes, events)`` at a time: ``pieces`` a list of
        ``bytes`` (or memoryviews) to write in order, ``bytes`` their length (about),
        ``events`` the events in them. The default formats :meth:`export_rows` pages with
        :func:`eventstore.log.line.chunks_from_rows`; a backend may build pages in SQL
        (SQLite does). Raises :class:`DatabaseError` for a stored payload export cannot write."""
        from eventstore.log.line import chunks_from_rows

        return chunks_from_rows(self, session_id, meta_json)


class ImportLock(ABC):
    """A held import lock (:meth:`Backend.import_lock`). ``owner`` is the text stored in the
    ``importing`` row, by which any process can ask whether the lock is still held."""

    owner: str

    @abstractmethod
    def release(self, unlink: bool) -> None:
        """Release the lock; with ``unlink``, also remove what names it (SQLite: the lock
        file), when no unfinished import refers to it any more."""


class Follower(ABC):
    """A reader on a connection of its own, for ``follow`` and ``tail -f``: it holds no read
    transaction between calls, so it may run for days beside writers."""

    @abstractmethod
    def events_after(self, after_position: int, limit: int,
                     dead_owners: Collection[str] = ()) -> list[tuple[int, str, int, str, float, str]]:
        """As :meth:`Backend.events_after`."""

    @abstractmethod
    def imports(self) -> list[tuple[str, int, str, float]]:
        """As :meth:`Backend.imports`."""

    @abstractmethod
    def session_events_after(self, session_id: str, after_seq: int,
                             limit: int) -> list[tuple[int, str, int, str, float, str]]:
        """``EventRow`` of ``session_id`` with ``seq > after_seq`` in seq order, at most ``limit``."""

    @abstractmethod
    def wait_for_commit(self, timeout: float | None) -> bool:
        """Block until something may have been committed since this follower's last read
        began, or ``timeout`` seconds pass (None: no limit); return False on timeout. May
        return True when nothing new is there (the caller reads and finds nothing); never
        sleeps through a commit that came after the last read began. (SQLite polls
        ``PRAGMA data_version``; PostgreSQL waits on LISTEN/NOTIFY.)"""

    @abstractmethod
    def close(self) -> None:
        """Give the connection back."""


class ImportTransaction(ABC):
    """What an import does inside its one write transaction
    (:meth:`Backend.import_transaction`)."""

    #: Whether :meth:`insert` stores a row's salt (a sixth item, bytes or None; revision
    #: 0310): the importer then salts each event (docs/redaction.md); else rows come unsalted.
    stores_salts: ClassVar[bool] = False

    @abstractmethod
    def session_meta(self) -> str | None:
        """The session's stored meta JSON text, or None when it is not stored (an unfinished
        import's session is stored: see :meth:`importing`)."""

    @abstractmethod
    def importing(self) -> tuple[int, str] | None:
        """``(first_position, owner)`` of the session's unfinished import, or None."""

    @abstractmethod
    def begin_import(self, first_position: int, owner: str, started_at: float) -> None:
        """Store the session's ``importing`` row: it is hidden until :meth:`end_import`."""

    @abstractmethod
    def take_over(self, owner: str) -> None:
        """Make ``owner`` the owner of the session's unfinished import (its old owner is dead)."""

    @abstractmethod
    def end_import(self) -> None:
        """Delete the session's ``importing`` row: it is visible when this transaction commits."""

    @abstractmethod
    def create_session(self, created_at: float, meta_json: str) -> Refusal | None:
        """Insert the session row; return the database's :class:`Refusal` instead of raising
        when it refuses the row (the transaction stays usable)."""

    @abstractmethod
    def next_seq(self) -> int:
        """The session's next seq, as this transaction sees it."""

    @abstractmethod
    def next_position(self) -> int:
        """The next global position (the largest stored one + 1), as this transaction sees it."""

    @abstractmethod
    def stored(self, first_seq: int, last_seq: int) -> list[tuple[int, str, float, str, str]]:
        """``StoredRow`` of the session's events ``first_seq..last_seq`` in seq order."""

    @abstractmethod
    def insert(self, rows: list[tuple], position0: int) -> tuple[int, Refusal] | None:
        """Insert ``StoredRow`` ``rows`` (consecutive seqs; the row of seq ``s`` gets position
        ``position0 + s``); as fast as the database allows (SQLite: multi-row INSERTs;
        PostgreSQL: COPY). When the database refuses a row, return ``(its index, Refusal)``
        with the rows before it stored and none after it; else None."""

    @abstractmethod
    def event_id_seq(self, event_id: str) -> int | None:
        """The seq of the session's event stored under ``event_id``, or None."""

    def writers_waiting(self) -> bool:
        """Whether another writer waits for the lock this transaction holds (an import then
        ends its chunk and commits, and the backend lets the waiters in before the next one).
        Called between slices of rows, so it must be cheap. By default False: a backend that
        cannot tell keeps its chunks whole."""
        return False
