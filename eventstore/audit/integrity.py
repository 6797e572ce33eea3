"""Verify the whole database: storage, schema, sessions, the log, and kept checkpoints.

:func:`verify_database` (``eventstore verify``) wraps :func:`eventstore.audit.verify.verify` (seqs,
the hash chain, the guard triggers, chunks, tool calls) with the checks of everything else
that decides what a reader sees, on any backend:

* ``storage`` and ``schema``: :meth:`~eventstore.backends.capabilities.AuditReads.integrity_findings`
  (SQLite: ``PRAGMA quick_check``/``integrity_check`` and the ``-wal`` check at open;
  PostgreSQL: amcheck where installed) and every table, index, trigger, view (and
  PostgreSQL function) compared by name and normalised definition with a scratch database
  migrated with the project's own migrations: an extra ``BEFORE INSERT`` trigger that
  drops rows, a redefined ``messages`` view, a renamed table, each is a finding naming it;
* ``session``: each ``sessions`` row matches its ``meta_hash`` (an edited ``meta`` or
  ``created_at`` is named; a row without one was not written by the store), and the rows
  in the order they were stored carry non-decreasing ``created_at`` (a session added
  later with a past date, a ghost, shows here);
* ``checkpoint``: the log extends each kept checkpoint (:mod:`eventstore.audit.anchor`).

A database too damaged to open or read gives findings, never an exception: a session whose
rows cannot be read is a finding naming it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from eventstore.audit.anchor import check_checkpoint
from eventstore.audit.verify import Finding, VerifyReport, verify
from eventstore.backends import backend_class, open_backend
from eventstore.backends.base import Backend
from eventstore.backends.capabilities import AuditReads
from eventstore.backends.fallbacks import capability
from eventstore.errors import DatabaseError, SchemaOutdated, SessionNotFound, WalMismatch
from eventstore.log.chain import session_hash_changes

__all__ = ["CLOCK_SLACK", "duration_text", "verify_database"]

#: Seconds a session's ``created_at`` may be earlier than that of a session stored before
#: it (clock adjustments, a writer that stamped the time and then waited for the lock).
CLOCK_SLACK = 300.0


def duration_text(s: float) -> str:
    """A duration as a person reads it: ``"400 s"``, ``"12 days"``, ``"3e+300 s"`` (never a
    number of hundreds of digits)."""
    if s < 1e6:
        return f"{s:.0f} s"
    if s < 1e11:  # about 3,000 years
        return f"{s / 86400:,.0f} days"
    return f"{s:.3g} s"


def _check_sessions(backend: AuditReads) -> list[Finding]:
    out = []
    latest = None  # (created_at, id) of the latest-dated session stored so far
    for sid, created, meta, meta_hash in backend.sessions_in_storage_order():
        changed = session_hash_changes(sid, created, meta, meta_hash)
        if meta_hash is None:
            out.append(Finding("session", sid, None, "meta_hash is missing: the row was not written by "
                                                     "eventstore (added by hand), or its hash removed"))
        elif changed:
            out.append(Finding("session", sid, None, f"{' and '.join(changed)} changed since the session was "
                                                     f"created (they no longer match its meta_hash)"))
        if not isinstance(created, (int, float)):
            out.append(Finding("session", sid, None, f"created_at is not a number ({created!r})"))
            continue
        if latest is not None and created < latest[0] - CLOCK_SLACK:
            out.append(Finding("session", sid, None,
                               f"created_at is {duration_text(latest[0] - created)} before that of session "
                               f"{latest[1]!r}, which was stored before it: a session added later with a past date"))
        if latest is None or created > latest[0]:
            latest = (created, sid)
    return out


def _walk(backend: AuditReads, session_ids: list[str] | None, report: VerifyReport) -> None:
    """audit.verify, and where the database is too damaged for it, session by session."""
    try:
        report_all = verify(backend, session_ids)
    except SessionNotFound:
        raise
    except DatabaseError:
        pass
    else:
        report.findings.extend(report_all.findings)
        report.notes.extend(report_all.notes)
        report.sessions, report.events, report.heads = report_all.sessions, report_all.events, report_all.heads
        report.redactions.extend(report_all.redactions)
        return
    try:
        ids = session_ids or [r[0] for r in backend.sessions_in_storage_order()]
    except DatabaseError as e:
        report.findings.append(Finding("storage", None, None, f"the sessions table cannot be read: {e}"))
        return
    for sid in ids:
        try:
            one = verify(backend, [sid])
        except DatabaseError as e:
            report.findings.append(Finding("storage", sid, None, f"the session's events cannot be read: {e}"))
            report.sessions += 1
            continue
        report.findings.extend(f for f in one.findings if f.session_id is not None)
        report.redactions.extend(one.redactions)
        report.sessions += one.sessions
        report.events += one.events
        report.heads.update(one.heads)


def verify_database(target: str | os.PathLike | Backend | AuditReads, session_ids: Iterable[str] | None = None, *,
                    full: bool = False, checkpoints: Iterable[tuple[str, dict]] = (),
                    trusted_key: str | None = None) -> VerifyReport:
    """Verify the database ``target`` (an SQLite path, ``sqlite:///`` or ``postgresql://``
    URL, opened read-only, or an open :class:`Backend`) and return a
    :class:`~eventstore.audit.verify.VerifyReport`: storage, schema, sessions, the log of every
    session (or of ``session_ids``), and each ``(name, document)`` of ``checkpoints`` (see
    :func:`eventstore.audit.anchor.check_checkpoint`; ``trusted_key``, 64 hex digits, is the
    Ed25519 public key they must be signed with). ``full`` runs the slower storage check
    (SQLite ``integrity_check``).

    Raises :class:`SessionNotFound` for an unknown id in ``session_ids``; everything wrong
    with the database itself (cannot be opened: a foreign ``-wal``, not a database, not an
    eventstore schema) is a finding.
    """
    report = VerifyReport()
    add = report.findings.append
    if isinstance(target, (Backend, AuditReads)):
        backend, owned = target, False
    else:
        try:
            backend, owned = open_backend(target, readonly=True), True
        except DatabaseError as e:
            report.opened = False
            add(Finding("schema" if isinstance(e, SchemaOutdated) else "storage", None, None, str(e)))
            try:
                cls = backend_class(target)
            except DatabaseError:  # (no database at all: another scheme, a libpq keyword/value string)
                return report
            # nothing is read through a foreign -wal; an older revision's schema is as it should be
            if not isinstance(e, (WalMismatch, SchemaOutdated)):
                for kind, message in cls.unopened_findings(os.fspath(target), full):
                    add(Finding(kind, None, None, message))
            return report
    owner, backend = backend, capability(backend, AuditReads)  # a bare core backend gets the generic reads
    try:
        for kind, message in backend.integrity_findings(full):
            if kind == "note":
                report.notes.append(message)
            else:
                add(Finding(kind, None, None, message))
        ids = None if session_ids is None else list(dict.fromkeys(session_ids))
        _walk(backend, ids, report)
        try:
            report.findings.extend(_check_sessions(backend))
        except DatabaseError as e:
            add(Finding("storage", None, None, f"the sessions table cannot be read: {e}"))
        for name, doc in checkpoints:
            sig = doc.get("signature")
            if trusted_key is None and isinstance(sig, dict):
                report.notes.append(f"{name}: its signature (key {str(sig.get('public_key', ''))[:16]}…) was not "
                                    f"checked against a trusted key: anyone can sign a checkpoint; give the "
                                    f"signer's public key (--public-key) to prove who made it")
            try:
                problems = check_checkpoint(backend, doc, name=name, trusted_key=trusted_key)
            except DatabaseError as e:
                problems = [(None, None, f"{name}: the database cannot be read to compare: {e}")]
            report.findings.extend(Finding("checkpoint", sid, seq, msg) for sid, seq, msg in problems)
    finally:
        if owned:
            owner.close()
    return report
