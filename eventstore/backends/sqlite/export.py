"""The export fast path: a page of JSONL lines built in SQL, and the byte-bounded rows.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from operator import truediv

from eventstore.log.line import (
    EXPORT_BUFFER,
    event_line,
    line_head,
    line_start,
    lines_bytes,
    meta_line,
    rewritten_payload,
)

from ...lazy import LazyPattern
from ..base import Backend


class SQLiteExport:
    """The export reads of :class:`~.backend.SQLiteBackend` (overriding the core's defaults)."""

    # --- export -------------------------------------------------------------------------------

    def export_rows(self, session_id: str, after_seq: int, limit: int,
                    max_bytes: int | None = None) -> list[tuple[str, int, float, str]]:
        sql = "SELECT type, seq, ts, payload FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        if max_bytes is None:
            return self._read(sql, (session_id, after_seq, limit))
        # SQLite hands rows over one at a time: stop taking them at the byte bound
        with self._lock:
            cur = self._connection().cursor()
            try:
                rows, size = [], 0
                for row in cur.execute(sql, (session_id, after_seq, limit)):
                    if size >= max_bytes:
                        break
                    rows.append(row)
                    p = row[3]
                    size += len(p) if type(p) is not str or p.isascii() else len(p.encode("utf-8", "surrogatepass"))
                return rows
            except sqlite3.Error as e:
                raise self._translate(e) from None
            finally:
                cur.close()

    def export_chunks(self, session_id: str, meta_json: str) -> Iterator[tuple[list, int, int]]:
        return _export_chunks(self, session_id, meta_json)


# --- export ------------------------------------------------------------------------------

# The fast export of a page: one query gathers the page's lines in SQLite, type and payload
# of each (``TYPE \x02 PAYLOAD``, joined by ``\n\x02{``: a control character never stands
# unescaped in a JSON text, so splitting at ``\x02{`` gives types and payloads without their
# "{"), and the exact bits of each ts (ts * 2**22 is an integer below 2**63 for
# 2**30 <= ts < 2**41, that is from 2004 on); :func:`eventstore.log.line.lines_bytes` then
# spells the lines (_fast_page). A page holding anything else (an older or odd ts, a payload
# of FAST_PAYLOAD bytes or more, a type that needs escapes, an array-index key) goes row by
# row (_EXPORT), which streams long payloads.
#
# The query does as little per row as it can: the payload's size is its byte length
# (length() of TEXT counts characters, after copying the text to NUL-terminate it; the CAST
# to BLOB only relabels the value), a long payload's line is a lone \x01 that _fast_page
# looks for in the page (count(line) would copy every line once more through the subquery;
# and a missing line could be made up for, in the split, by a type holding \x02{), and the
# ts range is checked in Python on the page's doubles rather than by a CASE per row.
EXPORT_PAGE = 500  # events per read query of an export (one short read transaction each)
FAST_PAYLOAD = 8192  # bytes: a longer payload goes row by row (memory: EXPORT_PAGE of these)
_FAST_OK = f"length(CAST(payload AS BLOB)) < {FAST_PAYLOAD}"
_EXPORT_FAST = (f"SELECT CAST(group_concat(line, char(10, 2, 123)) AS BLOB), group_concat(m), count(*) "
                f"FROM (SELECT CASE WHEN {_FAST_OK} THEN type || char(2) || payload ELSE char(1) END AS line, "
                f"CAST(ts * 4194304.0 AS INTEGER) AS m "
                f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq)")
_TS_SCALE = 4194304.0  # 2**22
_TS_MIN, _TS_MAX = 1073741824.0, 2199023255552.0  # 2**30, 2**41
# A payload the row-by-row path must write: a first key that may be an array index
# (JavaScript writes those first), or whitespace after the "{", which plain SQL could store
# before revision 0006 of the first release ("{ }", '{ "a":1}'; a line break or \r sends
# the page row by row anyway). A false hit, a type starting with '"' and a digit, a space
# or a tab, only costs speed.
_ROW_BY_ROW = LazyPattern(rb'\x02\{(?:"[0-9]|[ \t])')  # (compiled at first use)


def _fast_page(blob: bytes, mtext: str, first: int, n: int, plain_types: set[bytes]) -> bytes | None:
    """The JSONL text of ``n`` events from seq ``first`` (see _EXPORT_FAST), or None when
    the row-by-row path must write them."""
    import orjson  # (imported when used, as below: not at eventstore's start-up)

    if b"\x01" in blob:  # a long payload (or a type holding \x01, which needs an escape anyway)
        return None
    if blob.count(b"\n") != n - 1 or b"\r" in blob:  # a line break in a payload (or a type): row by row
        return None
    ts = list(map(truediv, orjson.loads("[" + mtext + "]"), itertools.repeat(_TS_SCALE)))  # exact: a power of 2
    # ts * 2**22 was exact only in that range: below it, CAST dropped bits; above it, CAST
    # stopped at 2**63 - 1, which comes back as 2**41
    if len(ts) != n or min(ts) < _TS_MIN or max(ts) >= _TS_MAX:
        return None
    parts = blob.split(b"\x02{")
    if len(parts) != 2 * n or _ROW_BY_ROW.search(blob) is not None:
        return None
    parts[-1] += b"\n"
    return lines_bytes(parts[0::2], first, ts, parts[1::2], plain_types)


# SQLite writes the end of each line (payload minus its "{", newline) as bytes, in C; a
# long payload (BIG_PAYLOAD characters and more) comes whole instead, and Python writes a
# view of it, so that no line is copied more than it must be.
BIG_PAYLOAD = 1 << 16
# A payload that does not start as JSON.stringify starts an object ('{"' or exactly '{}':
# whitespace before or just after the "{", or a BLOB, which plain SQL could store before
# revision 0006 of the first release) comes whole too, and is written anew.
_CANONICAL_START = "typeof(payload) = 'text' AND (payload GLOB '{\"*' OR payload = '{}')"
_EXPORT = (f"SELECT type, seq, ts, "
           f"CASE WHEN length(payload) < {BIG_PAYLOAD} AND {_CANONICAL_START} THEN CAST(CASE payload "
           f"WHEN '{{}}' THEN '}}' ELSE ',' || substr(payload, 2) END || char(10) AS BLOB) END, "
           f"CASE WHEN length(payload) >= {BIG_PAYLOAD} OR NOT ({_CANONICAL_START}) THEN CAST(payload AS BLOB) END "
           f"FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq")


def _export_chunks(backend: Backend, session_id: str, meta_json: str):
    """Yield ``(pieces, bytes, events)``: the session's lines as a list of byte strings (and
    memoryviews of stored payloads, not copied), about EXPORT_BUFFER bytes at a time.

    Pages of EXPORT_PAGE events, each one short read transaction: _fast_page writes a page in
    one piece when it can, else the page goes row by row."""
    out: list = [(meta_line(session_id, meta_json) + "\n").encode("utf-8")]
    size = len(out[0])
    pending = 0  # events in out
    heads: dict[str, str] = {}
    plain_types: set[bytes] = set()
    last = -1
    while True:
        got = 0
        with backend._lock:  # one short read transaction per page
            cur = backend._connection().cursor()
            try:
                blob, mtext, n = cur.execute(_EXPORT_FAST, (session_id, last, last + EXPORT_PAGE)).fetchone()
                if n == 0:
                    break
                data = _fast_page(blob, mtext, last + 1, n, plain_types)
                if data is not None:
                    got = n
                    out.append(data)
                    size += len(data)
                    pending += n
                else:
                    cur.execute(_EXPORT, (session_id, last, last + EXPORT_PAGE))
                    app = out.append
                    for t, seq, ts, tail, big in cur:
                        payload_head = tail if tail is not None else big
                        # A raw line break can stand in a stored payload only as whitespace
                        # between tokens (plain SQL wrote it): the line is written anew, not
                        # split in two.
                        broken = (b"\r" in tail or tail.find(b"\n", 0, len(tail) - 1) >= 0 if tail is not None
                                  else b"\n" in big or b"\r" in big or big[:2] != b'{"')
                        if payload_head[2:3].isdigit() or broken:  # an array-index key: JavaScript writes it first
                            raw = b"{" + bytes(tail[1:-1]) if tail is not None else bytes(big)
                            text = rewritten_payload(raw, session_id, seq) if broken else raw.decode()
                            line = (event_line(t, seq, ts, text) + "\n").encode("utf-8")
                            app(line)
                            size += len(line)
                            got += 1
                            pending += 1
                            continue
                        try:
                            head = heads[t]
                        except KeyError:
                            head = heads[t] = line_head(t)
                        app(line_start(head, seq, ts).encode())
                        if tail is not None:
                            app(tail)
                            size += len(tail) + 40
                        else:
                            app(b",")
                            app(memoryview(big)[1:])
                            app(b"\n")
                            size += len(big) + 40
                        got += 1
                        pending += 1
                        if size >= EXPORT_BUFFER:
                            yield out, size, pending
                            out = []
                            app = out.append
                            size = pending = 0
            except sqlite3.Error as e:
                raise backend._translate(e) from None
            finally:
                cur.close()
        last += EXPORT_PAGE
        if size >= EXPORT_BUFFER:
            yield out, size, pending
            out = []
            size = pending = 0
        if got < EXPORT_PAGE:
            break
    yield out, size, pending
