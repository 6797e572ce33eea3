"""Copy sessions between two stores (SQLite to PostgreSQL and back): how a user outgrows one
machine.

Each session goes through the JSONL format, the store's own lossless interchange (export
writes it byte for byte as the reference does; import reads it back, validates it and
rebuilds the same hash chain): every seq, ts, payload (as its canonical text) and the
session's meta are kept, so the hashes are the same ones. The JSONL format carries no
creation time, so the import is given the source row's ``created_at``
(:func:`eventstore.io.bulk.import_jsonl`, ``created_at``): the target's ``sessions`` row holds
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

A session already in the target is compared by its head: when the target holds the
source's first ``n`` events (the same meta, and the target's hash at seq ``n - 1`` equal to
the source's there, which the hash chain makes equal to the events before it; nothing else
of the target is read), the copy adds the events past them, through the import of the rest
of the session (:func:`eventstore.io.bulk.import_jsonl` with ``continues``), or leaves it as
it is when there are none: a copy that was interrupted, or a session that grew in the
source since, is simply copied again. A session the target holds with other events (a
hash that differs, more events than the source, other meta) is not copied and is reported;
so is a session the target cannot store (a NUL character in its id or in an event's type,
which PostgreSQL's text refuses); the other sessions are still copied. A session already
there with another ``created_at`` (copied by an eventstore that did not keep it, or
imported from its file) keeps its row, which the store never changes: its
:class:`CopyResult` says so in ``note``. So does a copied session dated more than
:data:`~eventstore.audit.integrity.CLOCK_SLACK` before a session the target held already: stored
after it, verify names it as a session added later with a past date (copy into an empty
store to move a store).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eventstore.backends.capabilities import AuditReads
from eventstore.core.store import EventStore
from eventstore.errors import EventStoreError, InvalidJSONL, SessionNotFound
from eventstore.log.chain import genesis_hash
from eventstore.log.codec import meta_difference

__all__ = ["CopyError", "CopyResult", "copy_sessions"]

#: Bytes of one session's JSONL kept in memory on the way; more goes to a temporary file.
SPOOL_BYTES = 16 * 1024 * 1024


class CopyError(EventStoreError):
    """A session that could not be copied: its source fails its hash chain, the target
    holds other events (or meta) under its id, or refused it. ``session_id`` names it,
    ``seq`` the event when one is at fault (else None), ``reason`` says why; ``str()`` is
    ``session 'ID' seq N: reason`` (``session 'ID': reason`` without a seq)."""

    _init_args = ("session_id", "reason", "seq")

    def __init__(self, session_id: str, reason: str, seq: int | None = None):
        self.session_id = session_id
        self.reason = reason
        self.seq = seq
        where = f"session {session_id!r}" + ("" if seq is None else f" seq {seq}")
        super().__init__(f"{where}: {reason}")


@dataclass
class CopyResult:
    """What the copy did with one session.

    ``status`` is ``"copied"`` (new in the target), ``"added"`` (the target held its first
    events: the rest were added), ``"skipped"`` (the target held all of them already) or
    ``"failed"`` (nothing more of it was written; ``error`` is the :class:`CopyError`).
    ``events`` is its number of events in the source and ``head`` the source's head hash
    (0 and ``""`` when the copy failed before reading them), ``added`` the number of events
    this copy stored, and ``note`` empty or one sentence about its ``created_at`` (a target
    row that holds another one, or a date that verify will find out of order in the
    target)."""

    session_id: str
    status: str
    events: int = 0
    head: str = ""
    added: int = 0
    note: str = ""
    error: CopyError | None = None

    @property
    def skipped(self) -> bool:
        """Whether the target held every event already."""
        return self.status == "skipped"


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

    A session that cannot be copied does not stop the others: its result has status
    ``"failed"`` and its :class:`CopyError` in ``error`` (its source's stored hashes or
    ``meta_hash`` do not verify, the target holds other events or meta under its id, the
    target refused its id or an event, the copy's head differs, or a database error while
    copying it). ``progress`` is called with each result as it is made. Raises
    :class:`SessionNotFound` (an id not in ``src``, before copying anything),
    :class:`~eventstore.errors.DatabaseError` (a store cannot be read before the first
    session), ``OSError`` (the temporary file of a long session). Sessions copied before an
    exception stay copied.
    """
    from eventstore.audit.integrity import CLOCK_SLACK, duration_text

    ids = _ordered_ids(src, session_ids)
    src_audit, dst_audit = src.capability(AuditReads), dst.capability(AuditReads)
    rows = {row[0]: row for row in src_audit.sessions_in_storage_order()}
    # rows the target held before (a skipped session, or an unfinished import this copy completes)
    already = {row[0]: row[1] for row in dst_audit.sessions_in_storage_order()}
    newest = max(((float(c), i) for i, c in already.items() if isinstance(c, (int, float))), default=None)
    # what the target holds of each session: (meta, events, head hash); an unfinished
    # import is resumed by the import of the whole session, which compares what it stored
    unfinished = {row[0] for row in dst.imports()}
    held = {sid: (meta, n, h) for sid, _c, meta, n, h in dst_audit.checkpoint_rows()["sessions"]
            if sid not in unfinished and sid in rows}
    # the source's hash at the target's last seq of each session the target holds events of
    at = {sid: n - 1 for sid, (_m, n, _h) in held.items() if n > 0}
    src_at = src_audit.checkpoint_rows(at)["at"] if at else {}

    results = []
    for sid in ids:
        try:
            result = _copy_one(src, dst, sid, rows[sid], held.get(sid), src_at.get(sid, (None,))[0])
        except CopyError as e:
            result = CopyResult(sid, "failed", error=e)
        except InvalidJSONL as e:  # import's FILE:LINE is a stream of our own: name the event by its seq
            result = CopyResult(sid, "failed", error=CopyError(sid, e.reason, e.seq))
        except EventStoreError as e:  # a database error, a refused id: this session's, named
            result = CopyResult(sid, "failed", error=CopyError(sid, str(e)))
        if result.status != "failed":
            if sid in already and float(already[sid]) != float(rows[sid][1]):
                result.note = (f"its created_at here ({already[sid]!r}) differs from the source's ({rows[sid][1]!r}): "
                               f"it was stored before this copy (imported, or copied without its created_at) and "
                               f"keeps its row")
            elif sid not in already and newest is not None and float(rows[sid][1]) < newest[0] - CLOCK_SLACK:
                result.note = (f"it is dated {duration_text(newest[0] - float(rows[sid][1]))} before session "
                               f"{newest[1]!r}, stored here before it: verify reports it as a session added later "
                               f"with a past date")
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def _same_events(src: EventStore, dst: EventStore, sid: str, n: int) -> bool:
    """Whether the target's ``n`` events of ``sid`` are the source's first ``n`` (type, seq,
    ts, payload), compared a page at a time."""
    after = -1
    while after < n - 1:
        a = src.export_rows(sid, after, min(1000, n - 1 - after))
        b = dst.export_rows(sid, after, min(1000, n - 1 - after))
        if not a or a != b:
            return False
        after = a[-1][1]
    return True


def _copy_one(src: EventStore, dst: EventStore, sid: str, row: tuple, held: tuple | None,
              src_hash: str | None) -> CopyResult:
    """Copy one session; ``row`` is its source ``(id, created_at, meta, meta_hash)``, ``held``
    the target's ``(meta, events, head hash)`` of it (None: not there, or an unfinished
    import), ``src_hash`` the source's hash at the target's last seq. Raises CopyError,
    InvalidJSONL, EventStoreError."""
    from eventstore.audit import verify as audit
    from eventstore.io.bulk import import_jsonl
    from eventstore.io.export import export_session
    from eventstore.log.chain import session_hash_changes
    from eventstore.log.line import chunks_from_rows

    changed = session_hash_changes(*row)
    if changed:
        raise CopyError(sid, f"its sessions row does not verify ({' and '.join(changed)} changed since it "
                             f"was created, or its meta_hash is missing); run eventstore verify")
    src_audit = src.capability(AuditReads)
    before = audit.verify(src_audit, [sid])
    broken = [f for f in before.findings if f.kind in ("hash", "seq")]
    if broken:
        raise CopyError(sid, f"its stored events do not verify ({broken[0]}); run eventstore verify")
    events, head = before.heads[sid]
    def salts() -> dict[int, tuple[bytes | None, str]]:
        """The source's ``(salt, hash)`` by seq, read after the export (an append since then is
        in it): they go beside the JSONL stream, which carries neither, so that the copy's
        hashes are the source's (its stored hashes were verified above)."""
        return {r[0]: (None if r[6] is None else bytes(r[6]), r[5]) for r in src_audit.verify_rows(sid)}

    if held is None:
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as buf:
            export_session(src, sid, buf)
            buf.seek(0)
            # max_line=None: the lines are this store's own export, an event of any size
            report = import_jsonl(dst, buf, name=f"session {sid!r}", created_at=row[1], max_line=None,
                                  source_rows=salts().get)
        status = {"imported": "copied", "appended": "added"}.get(report.status, "skipped")
        added = report.events
    else:
        meta, n, h = held
        if meta != row[2]:
            raise CopyError(sid, f"the target holds it with other session/meta keys: "
                                 f"{meta_difference(meta, row[2], 'in the target', 'in the source')}")
        if n > events:
            raise CopyError(sid, f"the target holds {n} events, the source only {events}")
        own_chain = bool(n) and src_hash != h
        if own_chain and not _same_events(src, dst, sid, n):
            raise CopyError(sid, f"the target holds other events: the hash of its last event (of {n}) differs "
                                 f"from the source's", n - 1)
        # own_chain: the same events, salted by an import of their own (docs/redaction.md): the
        # rest chains from the target's head, and the target's hashes stay its own
        added = 0
        if n < events:  # the rest, chained to the target's head
            with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as buf:
                for pieces, _size, _n in chunks_from_rows(src, sid, row[2], after_seq=n - 1):
                    buf.writelines(pieces)
                buf.seek(0)
                added = import_jsonl(dst, buf, name=f"session {sid!r}", continues=(n, h) if n else
                                     (0, genesis_hash(sid)), max_line=None,
                                     source_rows=None if own_chain else salts().get).events
        status = "added" if added else "skipped"
    after = audit.verify(dst.capability(AuditReads), [sid]).heads[sid]
    if held is not None and own_chain and after[0] >= events:
        return CopyResult(sid, status, after[0], after[1], added)
    if after != (events, head):
        # An agent appended to the source after its check: the copy holds more, and is
        # right when its last hash is the source's at that seq (the chain vouches for the rest).
        grown = after[0] > events and src_audit.checkpoint_rows({sid: after[0] - 1})["at"].get(sid, (None,))[0] \
            == after[1]
        if not grown:
            raise CopyError(sid, f"after the copy the target's last event (of {after[0]}) does not match the "
                                 f"source's (of {events}): run eventstore verify on both")
        events, head = after
    return CopyResult(sid, status, events, head, added)
