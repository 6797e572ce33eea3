"""The auditing reads (:class:`~eventstore.backends.capabilities.AuditReads`): guards,
storage order, rows as stored, one-snapshot heads, the storage and schema check.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator

from eventstore.errors import (
    DatabaseError,
)

from ...lazy import LazyPattern
from .. import base
from ..capabilities import AuditReads
from . import engine as _engine
from .statements import MAX_CURSOR

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any


class SQLiteAudit(AuditReads):
    """The auditing reads of :class:`~.backend.SQLiteBackend`."""

    def guard_problems(self) -> list[str]:
        from .schema import GUARDS

        stored = dict(self._read("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        out = []
        for name, ddl in GUARDS.items():
            if name not in stored:
                out.append(f"append-only trigger {name} is missing")
            elif _NORMALIZE.sub(" ", stored[name] or "").strip() != _NORMALIZE.sub(" ", ddl).strip():
                out.append(f"append-only trigger {name} differs from its definition")
        return out

    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        return _integrity_findings(self._read, self.display, full)

    @classmethod
    def unopened_findings(cls, url: str, full: bool = False) -> list[tuple[str, str]]:
        from .sandbox import connect_readonly

        try:
            path = _engine.database_path(url)
            if path is None or not os.path.isfile(path):
                return []
            conn = connect_readonly(path, authorizer=False)  # refuses a foreign -wal
        except DatabaseError:
            return []  # open()'s error says it
        try:
            def read(sql: str) -> list:
                try:
                    return conn.execute(sql).fetchall()
                except sqlite3.Error as e:
                    raise DatabaseError(str(e)) from None

            return _integrity_findings(read, path, full)
        finally:
            conn.close()

    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        return self._read("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY rowid")

    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        with self._lock:
            if self._forked or self._conn is None:
                self._connection()
            cur = self._cur
            try:
                cur.execute("BEGIN")  # one read snapshot for everything below
                try:
                    out = {"position": cur.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0],
                           "sessions": cur.execute(_CHECKPOINT_HEADS).fetchall(), "at": {}}
                    for sid, seq in (at or {}).items():
                        row = cur.execute("SELECT hash, position FROM events WHERE session_id = ? AND seq = ?",
                                          (sid, seq)).fetchone()
                        if row is not None:
                            out["at"][sid] = tuple(row)
                    out["counted"] = cur.execute("SELECT count(*) FROM events WHERE position <= ?",
                                                 (position,)).fetchone()[0]
                finally:
                    if self._conn.in_transaction:
                        cur.execute("COMMIT")
            except sqlite3.Error as e:
                raise self._translate(e) from None
        return out

    def orphan_session_ids(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT session_id FROM events WHERE session_id NOT IN "
                                         "(SELECT id FROM sessions) ORDER BY session_id")]

    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any, Any]]:
        # A connection of its own, in one read transaction (a snapshot) for the whole
        # session, so the store's lock is not held while the caller checks the rows. Stored
        # text is canonical JSON (valid UTF-8), so the C decoder reads it fastest; a page
        # holding text that is not UTF-8 (only a hand edit could put it there) is read again
        # with a tolerant decoder.
        from .sandbox import decode_text as _decode_text

        if self._file is None:
            yield from self._read(_VERIFY_ROWS, (session_id, -1, MAX_CURSOR))
            return
        try:
            conn = _engine.open_read_only(self._file, self.busy_timeout, isolation_level=None)
            conn.execute("BEGIN")
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open {self._file}: {e}") from None
        try:
            last = -1
            while True:
                try:
                    rows = conn.execute(_VERIFY_ROWS, (session_id, last, _VERIFY_PAGE)).fetchall()
                except sqlite3.Error as e:  # text that is not UTF-8, or a damaged page
                    if conn.text_factory is not str or not isinstance(e, sqlite3.OperationalError):
                        raise DatabaseError(f"cannot read {self._file}: {e}") from None
                    conn.text_factory = _decode_text
                    continue
                conn.text_factory = str
                yield from rows
                if len(rows) < _VERIFY_PAGE:
                    return
                last = rows[-1][0]
        finally:
            conn.close()



_VERIFY_ROWS = ("SELECT seq, position, type, ts, payload, hash, salt FROM events "
                "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")
_VERIFY_PAGE = 5000


_NORMALIZE = LazyPattern(r"\s+")  # (compiled at first use: not at start-up)


# --- following ----------------------------------------------------------------------------------

_SCHEMA_ROWS = ("SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
_CHECKPOINT_HEADS = """
SELECT s.id, s.created_at, s.meta,
       coalesce((SELECT seq FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) + 1, 0),
       (SELECT hash FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
FROM sessions AS s"""


def _schema_of(rows: list) -> dict[str, tuple[str, str]]:
    """``{name: (kind, normalised SQL)}`` of ``sqlite_master`` rows (type, name, tbl_name, sql);
    an index's or trigger's kind names its table."""
    return {name: (f"{type_} on {table}" if type_ in ("index", "trigger") else type_,
                   _NORMALIZE.sub(" ", sql or "").strip()) for type_, name, table, sql in rows}


def _integrity_findings(read: Callable[[str], list], display: str, full: bool) -> list[tuple[str, str]]:
    """:meth:`SQLiteBackend.integrity_findings` through ``read(sql) -> rows`` (which raises
    :class:`DatabaseError`): ``PRAGMA quick_check`` (``integrity_check`` with ``full``),
    then the schema against a freshly migrated one."""
    from .schema import GUARDS

    pragma = "integrity_check" if full else "quick_check"
    out: list[tuple[str, str]] = []
    try:
        rows = [r[0] for r in read(f"PRAGMA {pragma}(100)")]
    except DatabaseError as e:
        return [("storage", f"{display}: the database cannot be read: {e}")]
    if rows != ["ok"]:
        out += [("storage", f"PRAGMA {pragma}: {line}") for r in rows for line in str(r).splitlines() if line.strip()]
    try:
        have = _schema_of(read(_SCHEMA_ROWS))
    except DatabaseError as e:
        return out + [("storage", f"{display}: the schema cannot be read: {e}")]
    out += [("schema", m) for m in base.schema_differences(have, _expected_schema(), skip=GUARDS)]
    return out


_expected: dict[str, tuple[str, str]] | None = None


def _expected_schema() -> dict[str, tuple[str, str]]:
    """The schema (as :func:`_schema_of`) of a fresh in-memory database migrated to the head
    revision with the package's Alembic history (built once per process)."""
    global _expected
    if _expected is None:
        conn = _engine.connect(None, 1.0)
        try:
            _engine.upgrade(conn, ":memory:")
            _expected = _schema_of(conn.execute(_SCHEMA_ROWS).fetchall())
        finally:
            conn.close()
    return _expected
