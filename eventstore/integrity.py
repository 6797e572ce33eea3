"""Verify the whole database: storage, schema, sessions, the log, and kept checkpoints.

:func:`verify_database` (``eventstore verify``) wraps :func:`eventstore.audit.verify` (seqs,
the hash chain, the guard triggers, chunks, tool calls) with the checks of everything else
that decides what a reader sees:

* ``storage``: the file is an SQLite database, its ``-wal`` belongs to it
  (:mod:`eventstore.walcheck`), and ``PRAGMA quick_check`` (``integrity_check`` with
  ``full``) finds no damage;
* ``schema``: every table, index, trigger and view, compared by name and normalised SQL
  with what the project's own migrations create at the database's revision (built by
  migrating a fresh in-memory database): an extra ``BEFORE INSERT ... RAISE(IGNORE)``
  trigger, a redefined ``messages`` view, a renamed table, each is a finding naming it;
* ``session``: the ``sessions`` rows in insertion (rowid) order carry non-decreasing
  ``created_at`` (a session added later with a past date, a ghost, shows here);
* ``checkpoint``: the log extends each kept checkpoint (:mod:`eventstore.anchor`).

A database too damaged to read gives findings, never an exception: a session whose rows
cannot be read is a finding naming it.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from collections.abc import Iterable

from .anchor import check_checkpoint
from .audit import Finding, VerifyReport, connect_readonly, database_path, verify
from .engine import current_revision
from .errors import DatabaseError, SessionNotFound
from .schema import GUARDS, SCHEMA_REVISION
from .walcheck import wal_mismatch

__all__ = ["CLOCK_SLACK", "expected_schema", "verify_database"]

#: Seconds a session's ``created_at`` may be earlier than that of a session stored before
#: it (clock adjustments, a writer that stamped the time and then waited for the lock).
CLOCK_SLACK = 300.0

_SPACE = re.compile(r"\s+")


def _normalise(sql: str | None) -> str:
    return _SPACE.sub(" ", sql or "").strip()


@functools.lru_cache(maxsize=4)
def expected_schema(revision: str) -> dict[str, tuple[str, str, str]]:
    """``{name: (type, table, normalised SQL)}`` of every object the project's migrations
    create up to ``revision`` (SQLite's own ``sqlite_*`` objects left out), from a fresh
    in-memory database migrated with them."""
    from alembic import command
    from alembic.config import Config

    from .engine import make_engine, migrations_path

    engine = make_engine(":memory:")
    try:
        with engine.begin() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", migrations_path())
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            rows = conn.exec_driver_sql("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                        "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
    finally:
        engine.dispose()
    return {name: (type_, table, _normalise(sql)) for type_, name, table, sql in rows}


def _check_schema(conn: sqlite3.Connection) -> list[Finding]:
    out: list[Finding] = []

    def add(message: str) -> None:
        out.append(Finding("schema", None, None, message))

    revision = current_revision(conn)
    if revision is None:
        add("not an eventstore database: no alembic_version row (compared with the latest schema)")
    elif not re.fullmatch(r"\d{4}", revision) or revision > SCHEMA_REVISION:
        add(f"schema revision {revision!r} is unknown to this eventstore (its latest is {SCHEMA_REVISION})")
        return out
    try:
        want = expected_schema(revision or SCHEMA_REVISION)
    except Exception as e:  # an unknown revision string in alembic_version
        add(f"cannot build the schema of revision {revision!r} from the migrations: {e}")
        return out
    have = {name: (type_, table, _normalise(sql)) for type_, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")}
    for name, (type_, table, sql) in sorted(have.items()):
        if name not in want:
            on = f" on {table}" if type_ in ("index", "trigger") else ""
            add(f"extra {type_} {name}{on}, not created by the migrations: {sql[:200]}")
    for name, (type_, _table, sql) in sorted(want.items()):
        got = have.get(name)
        if name in GUARDS and (got is None or got[2] != sql):
            continue  # audit.verify's trigger check reports it
        if got is None:
            add(f"{type_} {name} is missing")
        elif got[0] != type_:
            add(f"{name} is a {got[0]}, the migrations made it a {type_}")
        elif got[2] != sql:
            add(f"{type_} {name} differs from its definition at revision {revision or SCHEMA_REVISION}: "
                f"{got[2][:200]}")
    return out


def _check_storage(conn: sqlite3.Connection, full: bool) -> list[Finding]:
    pragma = "integrity_check" if full else "quick_check"
    rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}(100)")]
    if rows == ["ok"]:
        return []
    return [Finding("storage", None, None, f"PRAGMA {pragma}: {line}")
            for r in rows for line in str(r).splitlines() if line.strip()]


def _check_sessions(conn: sqlite3.Connection) -> list[Finding]:
    out = []
    latest = None  # (created_at, id) of the latest-dated session stored so far
    for sid, created in conn.execute("SELECT id, created_at FROM sessions ORDER BY rowid"):
        if not isinstance(created, (int, float)):
            out.append(Finding("session", sid, None, f"created_at is not a number ({created!r})"))
            continue
        if latest is not None and created < latest[0] - CLOCK_SLACK:
            out.append(Finding("session", sid, None,
                               f"created_at is {latest[0] - created:.0f} s before that of session {latest[1]!r}, "
                               f"which was stored before it: a session added later with a past date"))
        if latest is None or created > latest[0]:
            latest = (created, sid)
    return out


def _walk(conn: sqlite3.Connection, session_ids: list[str] | None, report: VerifyReport) -> None:
    """audit.verify, and where the file is too damaged for it, session by session."""
    try:
        report_all = verify(conn, session_ids)
    except sqlite3.DatabaseError:
        pass
    else:
        report.findings.extend(report_all.findings)
        report.sessions, report.events, report.heads = report_all.sessions, report_all.events, report_all.heads
        return
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    try:
        ids = session_ids or [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY rowid")]
    except sqlite3.DatabaseError as e:
        report.findings.append(Finding("storage", None, None, f"the sessions table cannot be read: {e}"))
        return
    for sid in ids:
        try:
            one = verify(conn, [sid])
        except sqlite3.DatabaseError as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            report.findings.append(Finding("storage", sid, None, f"the session's events cannot be read: {e}"))
            report.sessions += 1
            continue
        report.findings.extend(f for f in one.findings if f.session_id is not None)
        report.sessions += one.sessions
        report.events += one.events
        report.heads.update(one.heads)


def verify_database(target: str | os.PathLike, session_ids: Iterable[str] | None = None, *,
                    full: bool = False, checkpoints: Iterable[tuple[str, dict]] = (),
                    trusted_key: str | None = None) -> VerifyReport:
    """Verify the database file ``target`` (a path or ``sqlite:///`` URL), read-only, and
    return a :class:`~eventstore.audit.VerifyReport`: storage, schema, sessions, the log of
    every session (or of ``session_ids``), and each ``(name, document)`` of
    ``checkpoints`` (see :func:`eventstore.anchor.check_checkpoint`; ``trusted_key``, 64 hex
    digits, is the Ed25519 public key they must be signed with). ``full`` runs
    ``PRAGMA integrity_check`` instead of ``quick_check``.

    Raises :class:`DatabaseError` when there is no file at ``target``, and
    :class:`SessionNotFound` for an unknown id in ``session_ids``; everything wrong with
    the file itself is a finding.
    """
    report = VerifyReport()
    add = report.findings.append
    path = database_path(target)
    try:
        why = wal_mismatch(path)
    except OSError as e:
        why = None
        add(Finding("storage", None, None, f"{path}: cannot read: {e.strerror or e}"))
    if why is not None:
        add(Finding("storage", None, None, f"{path}-wal does not belong to {path}: {why} (nothing was read "
                                           f"through it: move it aside to verify the file alone)"))
        return report
    try:
        conn = connect_readonly(path, authorizer=False)
    except DatabaseError as e:
        add(Finding("storage", None, None, str(e)))
        return report
    try:
        for step in (lambda: _check_storage(conn, full), lambda: _check_schema(conn)):
            try:
                report.findings.extend(step())
            except sqlite3.DatabaseError as e:
                add(Finding("storage", None, None, f"the database cannot be read: {e}"))
                return report
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"sessions", "events"} <= tables:
            return report  # the schema findings say what is missing
        ids = None if session_ids is None else list(dict.fromkeys(session_ids))
        if ids is not None:
            for sid in ids:
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is None:
                    raise SessionNotFound(sid)
        _walk(conn, ids, report)
        try:
            report.findings.extend(_check_sessions(conn))
        except sqlite3.DatabaseError as e:
            add(Finding("storage", None, None, f"the sessions table cannot be read: {e}"))
        for name, doc in checkpoints:
            try:
                problems = check_checkpoint(conn, doc, name=name, trusted_key=trusted_key)
            except sqlite3.DatabaseError as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                problems = [(None, None, f"{name}: the database cannot be read to compare: {e}")]
            report.findings.extend(Finding("checkpoint", sid, seq, msg) for sid, seq, msg in problems)
    finally:
        conn.close()
    return report
