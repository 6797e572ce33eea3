"""Optional capabilities of a backend, beside the core contract (:class:`~.base.Backend`).

A backend needs only the core to work: every capability here has a generic fallback built
on the core alone (:mod:`.fallbacks`). A backend that can do a capability faster, or more
strictly (an index, a read in one snapshot, a sandbox), subclasses it as well as
:class:`~.base.Backend`, and :func:`.fallbacks.capability` hands out the backend itself.

Whatever :func:`.fallbacks.capability` returns answers the capability's methods AND the
core contract's (a fallback forwards the core to its backend), so a caller that receives a
capability (``verify``, search, the viewer's index) needs nothing else.

The capabilities:

* :class:`SearchIndex`: full-text search (SQLite FTS5, PostgreSQL ``tsvector``);
* :class:`AuditReads`: the reads of ``verify`` and checkpoints (guards, storage order,
  hashes as stored, one-snapshot heads, storage and schema checks);
* :class:`SessionIndex`: the viewer's three reads that build its sessions index;
* :class:`LogViews`: the log's derived views (usage totals, ``session/info`` rows,
  summary titles) read by the database;
* :class:`SqlSandbox`: a read-only SQL connection for ``eventstore sql``;
* :class:`Roles`: database roles for writers and auditors (PostgreSQL);
* :class:`Redactor`: the one in-place change the log accepts, a redaction (docs/redaction.md);
  its fallback refuses (the change needs the database's own rule).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SearchIndex", "AuditReads", "SessionIndex", "LogViews", "SqlSandbox", "Roles", "Redactor",
           "QueryConnection",
           "MULTIPLE_STATEMENTS", "CAPABILITIES"]


class SearchIndex(ABC):
    """Full-text search over the searchable text of message, part and thinking events."""

    @abstractmethod
    def search_catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Bring the full-text index up to date with the stored message events and return
        how many it indexed now (0 for a backend whose index is kept current on insert).
        ``progress(done, total)`` (positions) may be called between batches. Raises
        :class:`QueryError` when the database has no index (older than revision 0100),
        :class:`DatabaseError` when the store cannot write."""

    @abstractmethod
    def search(self, query: str, *, raw: bool, session_id: str | None, type_: str | None, limit: int,
               rank_window: int) -> list[tuple[str, int, str, float, str, float]]:
        """The message, part and thinking events whose text matches ``query``, best first, at
        most ``limit``: ``(session_id, seq, type, ts, text, score)`` with ``text`` the
        searchable text of the event (the ``events_search_text`` view: content, tool call
        names and arguments, tool results; a thinking event's ``thinking``) and ``score`` lower for a
        better match (0.0 for a hit found without the index).

        ``query`` is the user's words, all of which must occur (a word ending in ``*``
        matches as a prefix; punctuation separates words); with ``raw`` it is the database's
        own query syntax (SQLite: FTS5; PostgreSQL: ``to_tsquery``). Hits are ranked among
        the newest ``rank_window`` matches. Uses the index as it stands (see
        :meth:`search_catch_up`); a backend whose index may lag scans the rest. Raises
        :class:`QueryError` (empty or malformed query, no index)."""

    @abstractmethod
    def search_count(self, query: str, *, raw: bool, session_id: str | None, type_: str | None,
                     at_most: int | None = None) -> int:
        """How many indexed message events match ``query`` (as :meth:`search`); with
        ``at_most``, counting stops there (the answer is at most ``at_most``), so that a
        common word is not counted through all its matches."""


class AuditReads(ABC):
    """What ``verify`` and checkpoints (:mod:`eventstore.audit`) read beyond the core."""

    @abstractmethod
    def guard_problems(self) -> list[str]:
        """One sentence per append-only guard (trigger) that is missing, disabled or differs
        from its definition; empty when all are in place."""

    @abstractmethod
    def orphan_session_ids(self) -> list[str]:
        """Ids of sessions that have events but no ``sessions`` row, sorted."""

    @abstractmethod
    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any, Any]]:
        """``(seq, position, type, ts, payload, hash, salt)`` of every stored row of
        ``session_id`` in seq order, read in one snapshot, as stored (a payload or hash edited
        by hand may be any value: text that is not UTF-8, a number, NULL; ``salt`` is bytes or
        None for an unsalted event: docs/redaction.md)."""

    @abstractmethod
    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        """What is wrong with the database beyond the rows, as ``(kind, message)`` with kind
        ``"storage"`` or ``"schema"``; empty when nothing is.

        ``schema``: every table, index, trigger, view (and on PostgreSQL function) compared
        by name and normalised definition with a scratch database migrated with the same
        Alembic history: each object extra, missing or changed is one message naming it.
        ``storage``: SQLite runs ``PRAGMA quick_check`` (``integrity_check`` with ``full``);
        PostgreSQL runs amcheck's ``bt_index_check`` when the extension is installed. A check
        that cannot run for lack of a privilege is ``("note", why)``, not a finding. Never
        raises for a damaged database: what cannot be read is a finding."""

    @classmethod
    def unopened_findings(cls, url: str, full: bool = False) -> list[tuple[str, str]]:
        """When :meth:`~.base.Backend.open` (read-only) refused ``url``: what
        :meth:`integrity_findings` can still say of it (SQLite: the storage check and the
        schema of a damaged, foreign or renamed file); none by default."""
        return []

    @abstractmethod
    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        """``(id, created_at, meta, meta_hash)`` of every session in the order the rows were
        stored (SQLite: rowid; PostgreSQL: the heap order), so that a session added later
        with a past date shows."""

    @abstractmethod
    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        """For checkpoints (:mod:`eventstore.audit.anchor`), read in ONE snapshot:

        ``{"position": the largest stored position (0: none),
        "sessions": [(id, created_at, meta, next_seq, last hash or None), ...] (every session),
        "at": {id: (hash, position)} of the event at seq ``at[id]`` of each session in ``at``
        that has it, "counted": the number of events at positions <= ``position``}``."""


class SessionIndex(ABC):
    """The viewer's index (``eventstore serve``): three reads that build every session's
    counts and state as of one position, each one query over the tables."""

    @abstractmethod
    def session_rows(self) -> list[tuple[str, float]]:
        """``(id, created_at)`` of every session, oldest first (by created_at, id)."""

    @abstractmethod
    def session_counts(self, upto_position: int) -> list[tuple[str, int, int, float, float]]:
        """For every session with events at positions ``<= upto_position``:
        ``(session_id, events, last_position, first_ts, last_ts)``, where ``first_ts`` is the
        ts of seq 0 and ``last_ts`` that of its last event up to that position. Any order."""

    @abstractmethod
    def state_rows(self, after_position: int, upto_position: int, limit: int) -> list[tuple[int, str, str, Any]]:
        """The events that decide a session's state and message counts (types
        ``turn/start``, ``turn/end``, ``user/message``, ``assistant/message``,
        ``tool/result``) with ``after_position < position <= upto_position``, in position
        order, at most ``limit``, as ``(position, session_id, type, extra)``: ``extra`` is
        the payload's ``tool_calls`` value as JSON text for an ``assistant/message`` (None
        when absent), the ``tool_call_id`` string for a ``tool/result``, None otherwise."""


class LogViews(ABC):
    """Reads of the log's derived views, answered by the database."""

    @abstractmethod
    def usage_totals(self) -> list[tuple[str, int, int, int, int, int]]:
        """Token totals per session from the ``usage`` view: ``(session_id, responses,
        input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens)`` for every
        session with recorded usage; empty for a database older than revision 0100."""

    @abstractmethod
    def info_rows(self) -> Iterable[tuple[str, str]]:
        """``(session_id, payload JSON text)`` of every ``session/info`` event of a visible
        session, by session and seq (the backends read them a page at a time)."""

    @abstractmethod
    def summary_titles(self, session_id: str | None = None) -> list[tuple[str, str]]:
        """``(session_id, title)`` of every stored ``claude/summary`` event whose ``leafUuid``
        is the ``event_id`` of an event of that session (the key of its line's first event,
        without ``:``, ``#`` or ``@``), in the summaries' (ts, position) order; only
        ``session_id``'s if given."""


#: The :class:`~eventstore.errors.QueryError` of a query of more than one statement (every
#: backend runs one at a time).
MULTIPLE_STATEMENTS = "the query holds more than one SQL statement: run them one at a time"


class QueryConnection(ABC):
    """A read-only SQL connection (:meth:`SqlSandbox.query_connection`)."""

    @abstractmethod
    def query(self, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
        """Run one statement: ``(column names, row iterator)`` (DB-API cursor rows). Raises
        :class:`QueryError`: ``refused: ...`` for anything that is not a read, the database's
        message for other errors, ``interrupted ...`` after Ctrl-C; while preparing or while
        the rows are iterated."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""


class SqlSandbox(ABC):
    """A sandboxed read-only SQL connection for ``eventstore sql``."""

    @classmethod
    @abstractmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = 30.0,
                         max_memory: int | None = None) -> QueryConnection:
        """A read-only connection to ``url`` where nothing that writes, creates or changes a
        setting gets through (SQLite: ``mode=ro``, ``query_only`` and an authorizer;
        PostgreSQL: a read-only transaction). ``timeout`` (seconds; None or 0: no limit)
        stops each query that runs longer; ``max_memory`` (bytes) bounds its memory. A query
        stopped by either raises :class:`QueryError` naming the limit. Raises
        :class:`DatabaseError` (no such database)."""


class Roles(ABC):
    """Database roles: a writer that may only append and import, an auditor that may only
    read, a redactor that may only read and redact (``eventstore roles``)."""

    @abstractmethod
    def check_role_names(self, writer: str, auditor: str, redactor: str | None = None) -> None:
        """Raises :class:`DatabaseError` when the names cannot be the roles (taken by
        something else, equal, not identifiers); ``redactor`` None: no redactor role."""

    @abstractmethod
    def roles_sql(self, writer: str, auditor: str, redactor: str | None = None) -> str:
        """The SQL that creates the roles and grants them what they may do on this database
        (the redactor: reading, and the redaction's functions; none when None)."""

    @abstractmethod
    def apply_roles(self, text: str) -> list[str]:
        """Run :meth:`roles_sql`'s ``text`` in one transaction; return the server's notices."""


class Redactor(ABC):
    """A redaction: one event's named fields replaced by a marker, together with the
    ``redaction`` event that records it, in one transaction (docs/redaction.md). The database
    accepts no other in-place change."""

    @abstractmethod
    def redact_event(self, session_id: str, seq: int, old_hash: str, new_payload_json: str,
                     new_salt: bytes | None, redaction_ts: float, redaction_payload_json: str,
                     redaction_salt: bytes, redaction_commit_json: str) -> int:
        """One transaction: event (session_id, seq) must exist with hash old_hash (else
        ConflictError naming session and seq); append the `redaction` event at the session's
        next seq, chained from the head like any append (its hash from redaction_commit_json);
        set event seq's payload to new_payload_json and its salt to new_salt (the key salts
        it keeps, or NULL). Returns the redaction event's seq. The database refuses the
        UPDATE in any other form."""

    def actor(self) -> str | None:
        """Who redacts as the database knows it (a PostgreSQL login role), for the record's
        ``by`` beside the OS user; None where the database has no users (SQLite)."""
        return None

    @abstractmethod
    def erase_old_versions(self) -> str | None:
        """After commit: remove the old bytes (SQLite: search index rows, secure_delete,
        TRUNCATE checkpoint; PostgreSQL: VACUUM events). Returns None, or a sentence saying
        what could not be done (e.g. the role may not VACUUM) and how to finish it."""


#: Every capability, in the order the docs list them.
CAPABILITIES = (SearchIndex, AuditReads, SessionIndex, LogViews, SqlSandbox, Roles, Redactor)
