"""The ``eventstore sql`` connection: a READ ONLY transaction as a read-only role, with a
``statement_timeout``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.adapt import Loader
from psycopg.types.string import TextLoader

from eventstore.errors import (
    QueryError,
)

from ..capabilities import (
    MULTIPLE_STATEMENTS,
    QueryConnection,
    SqlSandbox,
)
from .connection import display_url, first_line, open_connection
from .statements import QUERY_TIMEOUT

_PLAIN = (str, int, float, bytes, bool, type(None))
_SQL_COMMENTS = re.compile(r"--[^\n]*|/\*.*?(\*/|$)", re.S)
#: Rows fetched per round trip of ``sql``'s server-side cursor (its client memory is one batch).
SQL_BATCH = 200
# The role ``sql`` runs as, when the login role may do more: the auditor of roles_sql (a role
# other than the owner that may SELECT events but not INSERT), else PostgreSQL's own
# pg_read_all_data (for a superuser). PostgreSQL then refuses every write, COPY to or from
# the server, and server programs: no statement is judged by its text.
_READ_ROLE = """
SELECT rolname FROM (
SELECT r.rolname FROM pg_class AS c, aclexplode(c.relacl) AS a JOIN pg_roles AS r ON r.oid = a.grantee
WHERE c.relname = 'events' AND c.relnamespace = current_schema()::regnamespace AND a.grantee <> c.relowner
GROUP BY r.rolname, r.rolsuper
HAVING NOT r.rolsuper AND bool_and(a.privilege_type = 'SELECT') AND r.rolname <> session_user
   AND pg_has_role(session_user, r.rolname, 'MEMBER')
UNION ALL
SELECT 'pg_read_all_data' FROM pg_roles WHERE rolname = session_user AND rolsuper
   AND to_regrole('pg_read_all_data') IS NOT NULL) AS r
ORDER BY rolname = 'pg_read_all_data', rolname <> 'eventstore_auditor', rolname LIMIT 1"""


class _NumberLoader(Loader):
    """numeric as an int when it is whole, else a float (NaN as float NaN)."""

    def load(self, data) -> int | float:
        text = bytes(data).decode("ascii")
        try:
            return int(text)
        except ValueError:
            return float(text)


class PgQueryConnection(QueryConnection):
    """``eventstore sql`` on PostgreSQL: every query runs alone (one statement) in a READ
    ONLY transaction as a role that may only read (the auditor of ``eventstore roles`` when
    the login role is a member of it, ``pg_read_all_data`` for a superuser; see
    ``_READ_ROLE``), so that PostgreSQL itself refuses whatever writes or acts outside the
    tables; its rows stream through a server-side cursor (:data:`SQL_BATCH` rows at a
    time); the time limit (:data:`QUERY_TIMEOUT`) holds for the whole query, fetching
    included; it is rolled back afterwards, so that not even a ``SET`` outlives it.

    A login role with more powers can undo ``SET ROLE`` inside its own query
    (``set_config('role', ...)``): give ``sql`` the auditor's own login for least privilege."""

    def __init__(self, url: str, busy_timeout: float, timeout: float | None = QUERY_TIMEOUT,
                 max_memory: int | None = None):
        self._display = display_url(url)
        self.timeout = timeout or None
        self._open_rows: Generator[tuple, None, None] | None = None
        self._conn = open_connection(url, self._display, autocommit=True)
        self._conn.execute(f"SET lock_timeout = {int(busy_timeout * 1000)}")
        if max_memory is not None:  # work_mem bounds each sort and hash (they spill to disk past it)
            current = self._conn.execute("SELECT setting::bigint * 1024 FROM pg_settings "
                                         "WHERE name = 'work_mem'").fetchone()[0]
            if max_memory < current:
                self._conn.execute(f"SET work_mem = '{max(64, int(max_memory) // 1024)}kB'")
        try:
            role = self._conn.execute(_READ_ROLE).fetchone()
        except psycopg.Error:  # (no events table here: the login role as it is)
            role = None
        if role is not None:
            self._conn.execute(pg_sql.SQL("SET ROLE {}").format(pg_sql.Identifier(role[0])))
        self._user = repr(self._conn.info.user) if role is None else f"{role[0]!r}, as which sql runs,"
        # Values as the CLI writes them: json/jsonb as their text, numeric as int or float.
        for name in ("json", "jsonb"):
            self._conn.adapters.register_loader(name, TextLoader)
        self._conn.adapters.register_loader("numeric", _NumberLoader)

    def query(self, sql: str, params: Iterable[Any] = ()) -> tuple[list[str], Iterator[tuple]]:
        conn = self._conn
        if self._open_rows is not None:  # the rows of the previous query, not read to the end: ended
            self._open_rows.close()
            self._open_rows = None
        params = tuple(params)
        text = _SQL_COMMENTS.sub("", sql).strip(" \t\r\n\f;")
        if not text:
            raise QueryError("the query is empty" if not sql.strip()
                             else "the query holds no statement (only comments or ';')")
        deadline = time.monotonic() + self.timeout if self.timeout else None
        # the time limit for the whole command: statement_timeout stops the server's work,
        # a cancel at the deadline stops a fetch in flight, and no fetch starts after it
        timer = threading.Timer(self.timeout, self._cancel) if self.timeout else None
        t0 = time.monotonic()
        try:
            conn.execute("BEGIN READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {int((self.timeout or 0) * 1000)}")
            if timer is not None:
                timer.daemon = True
                timer.start()
            conn.execute("SAVEPOINT eventstore_sql")
            cur: psycopg.Cursor | psycopg.ServerCursor = conn.cursor(name="eventstore_sql")
            try:
                cur.execute(sql, params or None)
            except (pg_errors.SyntaxError, pg_errors.FeatureNotSupported) as e:
                if e.diag.source_function == "exec_parse_message":
                    raise
                # not a query a cursor holds (SHOW, EXPLAIN, a data-modifying WITH...): run it
                # as it is, under the same transaction and role (its result is buffered)
                conn.execute("ROLLBACK TO SAVEPOINT eventstore_sql")
                cur = conn.cursor()
                cur.execute(sql, params or None, prepare=True)
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS:
                raise QueryError("refused: COMMIT, ROLLBACK and the like (eventstore sql runs each query in "
                                 "a read-only transaction of its own)")
            columns = [d.name for d in cur.description or ()]
        except psycopg.Error as e:
            self._rollback(timer)
            raise QueryError(*_query_error(e, self.timeout, self._user, time.monotonic() - t0)) from None
        except KeyboardInterrupt:
            self._rollback(timer)
            raise QueryError("interrupted (Ctrl-C)") from None
        except BaseException:
            self._rollback(timer)
            raise

        def rows() -> Iterator[tuple]:
            try:
                if cur.description is not None:
                    while True:
                        if deadline is not None and time.monotonic() >= deadline:
                            raise QueryError(f"the query was stopped after {self.timeout:g} s (its time limit, "
                                             f"fetching the rows included)", "time")
                        batch = cur.fetchmany(SQL_BATCH)
                        if not batch:
                            break
                        for row in batch:  # dates, intervals, uuids, arrays...: as PostgreSQL writes them
                            yield row if all(isinstance(v, _PLAIN) for v in row) else tuple(
                                v if isinstance(v, _PLAIN) else str(v) for v in row)
            except psycopg.Error as e:
                raise QueryError(*_query_error(e, self.timeout, self._user, time.monotonic() - t0)) from None
            finally:
                self._rollback(timer)

        self._open_rows = rows()
        return columns, self._open_rows

    def _cancel(self) -> None:
        try:
            self._conn.cancel()
        except psycopg.Error:
            pass

    def _rollback(self, timer: threading.Timer | None = None) -> None:
        if timer is not None:
            timer.cancel()
        try:
            self._conn.execute("ROLLBACK")
        except psycopg.Error:
            pass

    def close(self) -> None:
        if self._open_rows is not None:
            self._open_rows.close()
        self._conn.close()


def _query_error(e: psycopg.Error, timeout: float | None = QUERY_TIMEOUT,
                 user: str | None = None, elapsed: float | None = None) -> tuple[str, str | None]:
    """The message of :class:`QueryError` for ``e`` (a query of role ``user`` that ran
    ``elapsed`` seconds), and which limit stopped the query."""
    if isinstance(e, pg_errors.ReadOnlySqlTransaction):
        # (the server names the statement's own command: SELECT for a data-modifying WITH)
        return f"refused: the query writes, and eventstore sql only reads ({e.diag.message_primary})", None
    if isinstance(e, pg_errors.InsufficientPrivilege):
        return (f"refused: {e.diag.message_primary or first_line(e)} (role {user or 'this role'} may not; "
                f"eventstore_auditor, which `eventstore roles` creates, may read every table)"), None
    if isinstance(e, pg_errors.ActiveSqlTransaction):
        return f"refused: {e.diag.message_primary or first_line(e)} (eventstore sql only reads)", None
    if isinstance(e, pg_errors.QueryCanceled):
        # statement_timeout and a cancel request share the SQLSTATE: the time says which
        if timeout and (elapsed is None or elapsed >= timeout * 0.95):
            return f"the query was stopped after {timeout:g} s (its time limit)", "time"
        when = f" after {elapsed:.1f} s" if elapsed is not None else ""
        before = f", before its time limit of {timeout:g} s" if timeout else ""
        return (f"the query was cancelled{when}{before} by a cancel request (pg_cancel_backend, an "
                f"administrator or the server): {e.diag.message_primary or first_line(e)}"), None
    if isinstance(e, pg_errors.OutOfMemory | pg_errors.DiskFull):
        return f"the query was stopped: {first_line(e)} (its memory limit)", "memory"
    if isinstance(e, pg_errors.SyntaxError) and e.diag.source_function == "exec_parse_message":
        # The server's Parse message refuses more than one statement (the parser's own
        # syntax errors come from scanner_yyerror / base_yyerror): as SQLite says it.
        return MULTIPLE_STATEMENTS, None
    return e.diag.message_primary or first_line(e), None




class PgSandbox(SqlSandbox):
    """The ``eventstore sql`` connection of :class:`~.backend.PostgresBackend`."""

    @classmethod
    def query_connection(cls, url: str, *, busy_timeout: float = 5.0, timeout: float | None = QUERY_TIMEOUT,
                         max_memory: int | None = None) -> QueryConnection:
        return PgQueryConnection(url, busy_timeout, timeout, max_memory)
