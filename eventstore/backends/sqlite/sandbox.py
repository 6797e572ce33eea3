"""The read-only SQL sandbox of ``eventstore sql`` on SQLite.

:func:`connect_readonly` opens a database file so that nothing can be written through the
connection (a ``mode=ro`` URI, ``PRAGMA query_only``, and an authorizer that lets through
reads only: no INSERT/UPDATE/DELETE, no DDL, no ATTACH, no ``VACUUM INTO``, no PRAGMA that
sets anything). :class:`SQLiteQueryConnection` runs one statement at a time on it.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator

from ...errors import DatabaseError, QueryError
from ...lazy import LazyPattern
from ..capabilities import MULTIPLE_STATEMENTS, QueryConnection, SqlSandbox
from .engine import database_path as _database_path
from .engine import no_database, open_read_only, refuse_hard_links
from .walcheck import check_wal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SQLiteQueryConnection", "connect_readonly", "database_path", "query"]

# --- read-only connections -------------------------------------------------------------

#: PRAGMAs whose argument only names a table or index (or a row limit): reads, always allowed.
_INTROSPECTION_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
})
#: PRAGMAs allowed without an argument (with one, most of them would set something).
_READ_PRAGMAS = frozenset({
    "database_list", "collation_list", "function_list", "module_list", "pragma_list",
    "compile_options", "encoding", "page_count", "page_size", "freelist_count", "schema_version",
    "user_version", "application_id", "journal_mode", "data_version", "foreign_keys", "query_only",
    "auto_vacuum", "busy_timeout", "max_page_count",
})
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_ACTION_NAMES = {getattr(sqlite3, "SQLITE_" + n): n.replace("_", " ") for n in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE",
    "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER",
    "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH",
    "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT",
    "RECURSIVE")}


class _ReadOnlyGuard:
    """The authorizer of a read-only connection; remembers why it refused the last statement."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
            # SQLite asks this while it sets up a table-valued function such as
            # pragma_table_info('events'): an internal step, not a write. A real UPDATE of the
            # schema table still fails (read-only file, query_only, writable_schema refused).
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() not in _DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            what = f"the function {arg2}()"
        elif action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _INTROSPECTION_PRAGMAS or (arg2 is None and name in _READ_PRAGMAS):
                return sqlite3.SQLITE_OK
            what = f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}")
        elif action == sqlite3.SQLITE_ATTACH:
            # VACUUM attaches a temporary database (an empty file name) to rebuild the file.
            what = ("VACUUM (it rewrites the file)" if arg1 == ""
                    else "ATTACH (and VACUUM INTO, which attaches its target file)")
        elif arg1 in _SCHEMA_TABLES:
            # CREATE and DROP ask to write the schema table before they name themselves.
            what = "changing the schema"
        elif action == sqlite3.SQLITE_ALTER_TABLE:
            what = f"ALTER TABLE {arg2}"  # arg1 is the database's name
        else:
            what = _ACTION_NAMES.get(action, f"authorizer action {action}")
            if arg1:
                what += f" {arg1}"
        if self.refused is None:  # the statement's own action; later ones are its inner steps
            self.refused = what
        return sqlite3.SQLITE_DENY


def decode_text(data: bytes) -> str:
    """Text from SQLite; tolerant of what SQLite's JSON functions make of a lone surrogate
    escape (its 3-byte CESU form, kept as the lone surrogate) and of other invalid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "backslashreplace")


def database_path(target: str | os.PathLike) -> str:
    """The file path of ``target`` (a path or an ``sqlite:///`` URL, as ``--db`` takes).

    Raises :class:`DatabaseError` for an in-memory database or a file that does not exist
    (a read-only connection never creates one).
    """
    path = _database_path(target)
    if path is None:
        raise DatabaseError("an in-memory database cannot be opened read-only: give a file")
    if not os.path.isfile(path):
        raise no_database(path)
    return path


def connect_readonly(target: str | os.PathLike, *, authorizer: bool = True,
                     busy_timeout: float = 5.0, max_memory: int | None = None) -> sqlite3.Connection:
    """Open the database file ``target`` (path or ``sqlite:///`` URL) read-only.

    The file is opened with a ``file:...?mode=ro`` URI and ``PRAGMA query_only = ON``; with
    ``authorizer`` (the default) an SQLite authorizer also refuses, at prepare time, every
    statement that is not a read: writes, DDL (temporary objects too), ATTACH and
    ``VACUUM INTO`` (both can create a file even on a read-only connection), transactions,
    PRAGMAs that set a value, ``load_extension()``. ``busy_timeout`` is in seconds;
    ``max_memory`` (bytes) caps what SQLite may allocate (``PRAGMA hard_heap_limit``, for
    the whole process): past it a statement fails with ``MemoryError``. A ``-wal`` written
    for another file is refused (:class:`WalMismatch`), never read through.
    The connection is in autocommit mode. Raises :class:`DatabaseError`.
    """
    path = database_path(target)
    refuse_hard_links(path)  # another name's -wal would go unread
    check_wal(path)
    try:
        conn = open_read_only(path, busy_timeout, isolation_level=None, factory=_ReadOnlyConnection)
        conn.text_factory = decode_text
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA query_only = ON")
        if max_memory is not None:
            conn.execute(f"PRAGMA hard_heap_limit = {int(max_memory)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # is it a database?
    except sqlite3.Error as e:
        raise DatabaseError(f"cannot open {path}: {e}") from None
    if authorizer:
        conn.guard = _ReadOnlyGuard()
        conn.set_authorizer(conn.guard)
    # SQLite runs a statement without returning to Python, so Ctrl-C (SIGINT) would wait for
    # the query to end, and an endless one never does. A Python callback every 100,000
    # virtual-machine steps lets the interpreter run its signal handler; the
    # KeyboardInterrupt it raises there makes SQLite stop the statement ("interrupted").
    conn.set_progress_handler(_let_signals_in, 100_000)
    return conn


def _let_signals_in() -> int:
    return 0


class _ReadOnlyConnection(sqlite3.Connection):
    """A connection that carries its authorizer, so :func:`query` can say what it refused."""

    guard: _ReadOnlyGuard | None = None


def query(conn: sqlite3.Connection, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
    """Run one SQL statement and return ``(column names, row iterator)``.

    Meant for a :func:`connect_readonly` connection: a statement it refuses raises
    :class:`QueryError` whose message starts with ``refused:`` and says what was refused.
    Any other SQL error (syntax, unknown table, several statements) raises
    :class:`QueryError` too, while preparing or while iterating the rows.
    """
    guard = getattr(conn, "guard", None)
    if guard is not None:
        guard.refused = None
    statements = _statements(sql)
    if not statements:
        raise QueryError("the query is empty" if not sql.strip()
                         else "the query holds no statement (only comments or ';')")
    if len(statements) > 1:
        raise QueryError(MULTIPLE_STATEMENTS)
    try:
        cur = conn.execute(statements[0], tuple(params))
    except (sqlite3.Error, sqlite3.Warning) as e:
        if guard is not None and guard.refused:
            raise QueryError(f"refused: the database is open read-only ({guard.refused} is not allowed)") from None
        raise QueryError(_query_error(e)) from None
    columns = [d[0] for d in cur.description or ()]

    def rows() -> Iterator[tuple]:
        try:
            while True:
                batch = cur.fetchmany(500)
                if not batch:
                    return
                yield from batch
        except sqlite3.Error as e:
            raise QueryError(_query_error(e)) from None
        finally:
            try:
                cur.close()
            except sqlite3.ProgrammingError:  # the connection went first (the reader of | head left)
                pass

    return columns, rows()


# SQL comments, to tell a statement of comments alone (SQLite runs nothing and says nothing).
# A "--" or "/*" inside a string literal makes this strip too much, but the literal's
# opening quote and the keyword before it stay: only comments, ';' and whitespace strip
# to nothing.
_SQL_COMMENTS = LazyPattern(r"(?s)--[^\n]*|/\*.*?(\*/|$)")  # (compiled at first use)


def _statements(sql: str) -> list[str]:
    """The statements of ``sql`` that hold more than comments and ';', each with its ';'.
    SQLite's own tokenizer (``sqlite3_complete``) says where a statement ends, so a ';' in
    a string literal, a quoted name, a comment or a trigger body ends none."""
    out, start = [], 0
    for end in (i + 1 for i, ch in enumerate(sql) if ch == ";"):
        if sqlite3.complete_statement(sql[start:end]):
            out.append(sql[start:end])
            start = end
    out.append(sql[start:])  # (the last statement needs no ';')
    return [s for s in out if _SQL_COMMENTS.sub("", s).strip(" \t\n\r\f;")]


def _query_error(e: Exception) -> str:
    code = getattr(e, "sqlite_errorcode", None)  # (the primary code is the low byte)
    if code == sqlite3.SQLITE_INTERRUPT:
        return "interrupted (Ctrl-C): the query was stopped"
    if code is not None and code & 0xFF == sqlite3.SQLITE_READONLY:
        return f"refused: the database is open read-only ({e})"
    return str(e)


class SQLiteQueryConnection(QueryConnection):
    """:class:`~eventstore.backends.capabilities.QueryConnection` over :func:`connect_readonly`.

    ``timeout`` (seconds, None: none) stops a statement that runs longer, counted from when
    :meth:`query` is called until its rows are read (a progress handler every 100,000
    virtual-machine steps, which also lets Ctrl-C in); ``max_memory`` (bytes) is SQLite's
    ``hard_heap_limit``. Either ends the query with :class:`QueryError` saying which limit."""

    def __init__(self, target: str | os.PathLike, busy_timeout: float = 5.0, timeout: float | None = None,
                 max_memory: int | None = None):
        self.connection = connect_readonly(target, busy_timeout=busy_timeout, max_memory=max_memory)
        self.timeout = timeout or None
        self.max_memory = max_memory
        self._deadline: float | None = None
        self._expired = False
        if self.timeout is not None:
            self.connection.set_progress_handler(self._tick, 100_000)

    def _tick(self) -> int:
        if self._deadline is not None and time.monotonic() > self._deadline:
            self._expired = True
            return 1  # SQLite stops the statement ("interrupted")
        return 0

    def query(self, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
        self._expired = False
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        columns, rows = self._limited(lambda: query(self.connection, sql, params))

        def limited_rows() -> Iterator[tuple]:
            it = iter(rows)
            while True:
                try:
                    batch = self._limited(lambda: list(itertools.islice(it, 500)))
                except StopIteration:  # pragma: no cover - islice never raises it
                    return
                if not batch:
                    return
                yield from batch

        return columns, limited_rows()

    def _limited(self, body):
        try:
            return body()
        except QueryError:
            if self._expired:
                raise QueryError(f"the query was stopped after {self.timeout:g} s (its time limit)", "time") from None
            raise
        except MemoryError:
            limit = f"{self.max_memory / 1048576:g} MiB" if self.max_memory else "the memory available"
            raise QueryError(f"the query was stopped: it needed more than {limit} (its memory limit)",
                             "memory") from None

    def close(self) -> None:
        self.connection.close()


class SQLiteSandbox(SqlSandbox):
    """The ``eventstore sql`` connection of :class:`~.backend.SQLiteBackend`."""

    @classmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = 30.0,
                         max_memory: int | None = None):
        return SQLiteQueryConnection(url, busy_timeout, timeout, max_memory)
