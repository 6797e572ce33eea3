"""Redaction (:class:`~eventstore.backends.capabilities.Redactor`): the one in-place change of
the log, through revision 0320's ``SECURITY DEFINER`` functions, and the erasure of the old
row versions afterwards (docs/redaction-postgres.md).

A redaction is one transaction on the write connection: ``es_redact_head`` takes the
position lock and reads the session's head, the event's stored hash is checked, the
``redaction`` event's hash is computed here as every append's (from its commit payload),
and ``es_redact`` appends it and updates the event; the trigger ``events_guard_update``
accepts that UPDATE only in the redaction's form. A role needs EXECUTE on both functions
(the ``redactor`` role of ``eventstore roles``, or the tables' owner).

An UPDATE leaves the old row version in the table's file until VACUUM removes it, and a
plain VACUUM leaves its bytes in the page's free space: only a rewrite of the table
(``VACUUM FULL``) removes them from the files. The table's planner statistics
(``pg_statistic``) may hold whole payloads too: ANALYZE replaces them, and a rewrite of
``pg_statistic`` drops the old ones.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from eventstore.errors import ConflictError, DatabaseError, SessionNotFound
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.line import event_line

from ..capabilities import Redactor
from .connection import first_line
from .statements import DURABLE_COMMIT

#: Takes the position lock, then the session's head (next seq, last hash), as the owner.
REDACT_HEAD = "SELECT next_seq, last_hash FROM es_redact_head(%s)"
#: Appends the redaction event and updates the event (revision 0320).
REDACT = "SELECT es_redact(%s, %s, %s, %s, %s::bytea, %s, %s, %s, %s::bytea, %s)"
EVENT_HASH = "SELECT hash FROM events WHERE session_id = %s AND seq = %s"

#: What removes a redacted value's old bytes from the files (in this order): the log and the
#: search index rewritten (their TOAST and indexes with them), the statistics of the new
#: rows taken, and the statistics table rewritten (its old rows could hold whole payloads).
ERASE = ("VACUUM (FULL, ANALYZE) events", "VACUUM (FULL, ANALYZE) events_search")
ERASE_STATISTICS = "VACUUM (FULL) pg_catalog.pg_statistic"
# Whether the role may rewrite the tables (their owner, a member of it, or a superuser) and
# the statistics table (the database's owner, or a superuser).
MAY_ERASE = """
SELECT pg_has_role(c.relowner, 'USAGE') OR r.rolsuper,
       pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') OR r.rolsuper
FROM pg_class AS c, pg_roles AS r
WHERE c.oid = 'events'::regclass AND r.rolname = current_user"""

_OWNER_COMMAND = ("psql -c 'VACUUM (FULL, ANALYZE) events' -c 'VACUUM (FULL, ANALYZE) events_search' "
                  "-c 'VACUUM (FULL) pg_catalog.pg_statistic'")


class PgRedactor(Redactor):
    """The redaction of :class:`~.backend.PostgresBackend`."""

    def redact_event(self, session_id: str, seq: int, old_hash: str, new_payload_json: str,
                     new_salt: bytes | None, redaction_ts: float, redaction_payload_json: str,
                     redaction_salt: bytes, redaction_commit_json: str) -> int:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        with self._wlock:
            conn = self._conn("w")
            self._heads.pop(session_id, None)  # (the redaction event moves the head)
            try:
                with conn.transaction():
                    if not self.lossy:  # (the redactor may not call FLUSH's function: see DURABLE_COMMIT)
                        conn.execute(DURABLE_COMMIT, (self._sync_level,))
                    next_seq, last_hash = conn.execute(REDACT_HEAD, (session_id,)).fetchone()
                    if next_seq is None:
                        raise SessionNotFound(session_id)
                    row = conn.execute(EVENT_HASH, (session_id, seq)).fetchone()
                    if row is None:
                        raise ConflictError(session_id, seq, "no such event")
                    if row[0] != old_hash:
                        raise ConflictError(session_id, seq, f"its stored hash is {row[0]}, not {old_hash} (read "
                                                             f"it again)")
                    line = event_line("redaction", next_seq, redaction_ts, redaction_commit_json)
                    hash_ = chain_hash(last_hash or genesis_hash(session_id), line)
                    conn.execute(REDACT, (session_id, seq, old_hash, new_payload_json, new_salt, next_seq,
                                          redaction_ts, redaction_payload_json, redaction_salt, hash_))
            except pg_errors.InsufficientPrivilege as e:
                raise DatabaseError(f"{self.display}: {first_line(e)} (role "
                                    f"{conn.info.user!r} may not redact: grant it eventstore_redactor; `eventstore "
                                    f"roles`, run as the tables' owner, creates it)") from None
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            return next_seq

    def actor(self) -> str | None:
        return self._one("SELECT session_user", ())[0]

    def erase_old_versions(self) -> str | None:
        if self.readonly:
            raise DatabaseError(f"{self.display}: opened read-only")
        with self._wlock:
            conn = self._conn("w")
            try:
                tables, statistics = conn.execute(MAY_ERASE).fetchone()
            except psycopg.Error as e:
                raise self._error(e) from None
            if not tables:
                return (f"the old versions of the redacted rows stay in the table files of events and "
                        f"events_search until the tables' owner rewrites them (role {conn.info.user!r} may not): "
                        f"{_OWNER_COMMAND}")
            try:
                for sql in ERASE:
                    conn.execute(sql)
                if statistics:
                    conn.execute(ERASE_STATISTICS)
            except pg_errors.LockNotAvailable:
                return (f"the old versions of the redacted rows stay in the table files: VACUUM FULL waited "
                        f"{self.busy_timeout:g} s for readers and writers to let go of the tables; run it when "
                        f"the store is quiet: {_OWNER_COMMAND}")
            except psycopg.Error as e:
                return f"the old versions of the redacted rows may stay in the table files: {first_line(e)}"
            if not statistics:
                return (f"the planner's statistics of events were taken again, but their old rows stay in "
                        f"pg_statistic's file until the database's owner runs: psql -c 'VACUUM (FULL) "
                        f"pg_catalog.pg_statistic' (role {conn.info.user!r} does not own the database)")
        return None
