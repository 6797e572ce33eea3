"""The JSONL lines of stored rows, a page at a time: what export, ``copy`` and the viewer
write, and the default of :meth:`eventstore.backends.base.Backend.export_chunks`.

Below the backends (they import it; it imports only the codec and the errors): a backend
reads rows, these functions spell them as the reference ``save()`` does, bounded by bytes
so that memory does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eventstore.errors import DatabaseError
from eventstore.log.codec import dumps, loads
from eventstore.log.line import event_line, meta_line

__all__ = ["EXPORT_BUFFER", "PAGE_BYTES", "PAGE_ROWS", "chunks_from_rows", "rewritten_payload", "row_pages"]

EXPORT_BUFFER = 1 << 20  # bytes gathered before each write
PAGE_ROWS = 5_000  # events per read of rows, at most (one short read each) ...
PAGE_BYTES = 1 << 20  # ... and about this many payload bytes (one larger event comes alone)


def row_pages(backend: Any, session_id: str, after_seq: int = -1,
              limit: int | None = None) -> Iterator[list[tuple[str, int, float, str]]]:
    """The session's :meth:`~eventstore.backends.base.Backend.export_rows` after
    ``after_seq`` (at most ``limit`` in all), a page at a time: each page at most
    :data:`PAGE_ROWS` events and, past its first event, under :data:`PAGE_BYTES` of payload,
    cut by the backend's read, so a reader holds about a megabyte whatever the events hold
    (the export, the viewer's answers and ``copy`` all page so)."""
    last, left = after_seq, limit
    while left is None or left > 0:
        want = PAGE_ROWS if left is None else min(PAGE_ROWS, left)
        rows = backend.export_rows(session_id, last, want, PAGE_BYTES)
        if not rows:
            return
        yield rows
        last = rows[-1][1]
        if left is not None:
            left -= len(rows)


def chunks_from_rows(backend: Any, session_id: str, meta_json: str,
                     after_seq: int = -1) -> Iterator[tuple[list, int, int]]:
    """The session's JSONL as ``(pieces, bytes, events)`` (see
    :meth:`~eventstore.backends.base.Backend.export_chunks`), built from
    :func:`row_pages` (bounded by bytes), about :data:`EXPORT_BUFFER` bytes a chunk. With ``after_seq``, the meta line
    and only the events past that seq (what :func:`eventstore.io.bulk.import_jsonl` reads with
    ``continues``)."""
    out: list = [(meta_line(session_id, meta_json) + "\n").encode("utf-8")]
    size = len(out[0])
    pending = 0
    for rows in row_pages(backend, session_id, after_seq):
        for type_, seq, ts, payload in rows:
            text = payload if type(payload) is str and _canonical_start(payload) else None
            if text is None or "\n" in text or "\r" in text:
                raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
                text = rewritten_payload(raw, session_id, seq)
            line = (event_line(type_, seq, ts, text) + "\n").encode("utf-8")
            out.append(line)
            size += len(line)
            pending += 1
            if size >= EXPORT_BUFFER:
                yield out, size, pending
                out = []
                size = pending = 0
    yield out, size, pending


def _canonical_start(payload: str) -> bool:
    """Whether ``payload`` starts as JSON.stringify starts an object (``{"`` or exactly ``{}``)."""
    return payload.startswith('{"') or payload == "{}"


def rewritten_payload(raw: bytes, session_id: str, seq: int) -> str:
    """The canonical text of a stored payload (UTF-8 ``raw``) that export cannot write as
    it stands: a line break, whitespace before or just after the ``{``, or a BLOB, which
    plain SQL could store (the last two only before revision 0006). Raises
    :class:`DatabaseError` naming the event if it is not a JSON object after all."""
    try:
        payload = loads(raw.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        payload = e
    if not isinstance(payload, dict):
        raise DatabaseError(f"session {session_id!r} seq {seq}: the stored payload is not a JSON object "
                            f"that export can write ({str(payload)[:80] or type(payload).__name__})")
    return dumps(payload)
