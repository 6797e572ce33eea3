"""Copy sessions between two stores (SQLite to PostgreSQL and back): how a user outgrows one
machine.

Each session goes through the JSONL format, the store's own lossless interchange (export
writes it byte for byte as the reference does; import reads it back, validates it and
rebuilds the same hash chain): every seq, ts, payload (as its canonical text) and the
session's meta are kept, so the hashes are the same ones. The JSONL format carries no
creation time, so the import is given the source row's ``created_at``
(:func:`eventstore.bulk.import_jsonl`, ``created_at``): the target's ``sessions`` row holds
the same id, ``created_at`` and meta, hence the same ``meta_hash``, the same listing order,
and the same checkpoint entry. Positions are the target's own (a session's events are
stored together), so a whole checkpoint of the source verifies the copy when it was taken
of the state copied (no write since) and the target held nothing else.

Sessions are copied one by one (each in one transaction, or in chunks for a long one, as
any import), oldest first (by ``created_at``, then id, the order of the listing), so that
the target stores them in the order of their dates as ``verify`` expects; within a
session, events keep their seq (= position) order. The copy is checked: the source's
stored hash chain first (a session whose stored hashes, or whose ``sessions`` row's
``meta_hash``, do not verify is not copied: the copy would hide the tampering behind a
fresh, valid chain and hash), the target's heads afterwards.

A session already in the target with the same events is left as it is, so a copy that was
interrupted can simply be run again; a session already there with other events is an
error (nothing of it is written). A session already there with the same events but
another ``created_at`` (copied by an eventstore that did not keep it, or imported from its
file) keeps its row, which the store never changes: its :class:`CopyResult` says so in
``note``. So does a copied session dated more than :data:`~eventstore.integrity.CLOCK_SLACK`
before a session the target held already: stored after it, verify names it as a session
added later with a past date (copy into an empty store to move a store).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import EventStoreError, SessionNotFound
from .store import EventStore

__all__ = ["CopyError", "CopyResult", "copy_sessions"]

#: Bytes of one session's JSONL kept in memory on the way; more goes to a temporary file.
SPOOL_BYTES = 16 * 1024 * 1024


class CopyError(EventStoreError):
    """A session could not be copied (its source fails its hash chain, or the target holds
    other events under its id). ``session_id`` names it."""

    _init_args = ("session_id", "reason")

    def __init__(self, session_id: str, reason: str):
        self.session_id = session_id
        self.reason = reason
        super().__init__(f"session {session_id!r}: {reason}")


@dataclass
class CopyResult:
    """One copied session: its id, its number of events, its head hash, whether it was
    already in the target (``skipped``), and ``note``: empty, or one sentence about its
    ``created_at`` (a target row that holds another one, or a date that verify will find
    out of order in the target)."""

    session_id: str
    events: int
    head: str
    skipped: bool
    note: str = ""


def _ordered_ids(src: EventStore, session_ids: Iterable[str] | None) -> list[str]:
    """The ids to copy, oldest first (the listing's order: by created_at, then id)."""
    infos = src.sessions()
    if session_ids is None:
        return [i.id for i in infos]
    wanted = set(session_ids)
    known = {i.id for i in infos}
    for sid in dict.fromkeys(session_ids):
        if sid not in known:
            raise SessionNotFound(sid)
    return [i.id for i in infos if i.id in wanted]


def copy_sessions(src: EventStore, dst: EventStore, session_ids: Iterable[str] | None = None,
                  progress: Callable[[CopyResult], None] | None = None) -> list[CopyResult]:
    """Copy the sessions ``session_ids`` (all when None) from ``src`` to ``dst`` and return
    one :class:`CopyResult` per session, in the order copied (oldest first: by
    ``created_at``, then id). Each session's ``created_at`` is kept.

    ``progress`` is called after each session. Raises :class:`SessionNotFound` (an id not in
    ``src``), :class:`CopyError` (a session whose stored hashes or ``meta_hash`` do not verify in ``src``, or
    whose copy's head differs), :class:`~eventstore.errors.ImportConflict` (``dst`` holds
    other events under the id), :class:`~eventstore.errors.DatabaseError`. Sessions copied
    before an error stay copied.
    """
    from . import audit
    from .bulk import import_jsonl
    from .chain import session_hash_changes
    from .export import export_session
    from .integrity import CLOCK_SLACK

    results = []
    ids = _ordered_ids(src, session_ids)
    rows = {row[0]: row for row in src.backend.sessions_in_storage_order()}
    # rows the target held before (a skipped session, or an unfinished import this copy completes)
    already = {row[0]: row[1] for row in dst.backend.sessions_in_storage_order()}
    newest = max(((float(c), i) for i, c in already.items() if isinstance(c, (int, float))), default=None)
    for sid in ids:
        changed = session_hash_changes(*rows[sid])
        if changed:
            raise CopyError(sid, f"its sessions row does not verify ({' and '.join(changed)} changed since it "
                                 f"was created, or its meta_hash is missing); run eventstore verify")
        before = audit.verify(src.backend, [sid])
        broken = [f for f in before.findings if f.kind in ("hash", "seq")]
        if broken:
            raise CopyError(sid, f"its stored events do not verify ({broken[0]}); run eventstore verify")
        events, head = before.heads[sid]
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as buf:
            export_session(src, sid, buf)
            buf.seek(0)
            report = import_jsonl(dst, buf, name=f"{sid} (copied)", created_at=rows[sid][1])
        after = audit.verify(dst.backend, [sid]).heads[sid]
        if after != (events, head):
            raise CopyError(sid, f"the copy's head {after} differs from the source's {(events, head)}")
        note = ""
        if sid in already and float(already[sid]) != float(rows[sid][1]):
            note = (f"its created_at here ({already[sid]!r}) differs from the source's ({rows[sid][1]!r}): it was "
                    f"stored before this copy (imported, or copied without its created_at) and keeps its row")
        elif sid not in already and newest is not None and float(rows[sid][1]) < newest[0] - CLOCK_SLACK:
            note = (f"it is dated {newest[0] - float(rows[sid][1]):.0f} s before session {newest[1]!r}, stored here "
                    f"before it: verify reports it as a session added later with a past date")
        result = CopyResult(sid, events, head, skipped=report.status == "skipped", note=note)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
