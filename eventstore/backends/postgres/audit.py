"""The auditing reads (:class:`~eventstore.backends.capabilities.AuditReads`): guards, heap
order, rows as stored, one-snapshot heads, amcheck and the schema against a scratch copy.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from eventstore.errors import (
    DatabaseError,
)

from .. import base
from ..capabilities import (
    AuditReads,
)
from .connection import conninfo, first_line, open_connection
from .roles import roles_statements
from .statements import GUARDS, SEARCH_VECTOR


class PgAudit(AuditReads):
    """The auditing reads of :class:`~.backend.PostgresBackend`."""

    def guard_problems(self) -> list[str]:
        rows = self._read(
            "SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
            "WHERE c.relname = ANY(%s) "
            "AND c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal", (list(GUARDS),))
        found = {(r[0], r[1]): r[2] for r in rows}
        problems = []
        for table, names in GUARDS.items():
            for name in names:
                state = found.get((table, name))
                if state is None:
                    problems.append(f"trigger {name} on {table} is missing")
                elif state not in ("O", "A"):  # fires in origin sessions (O), or in every session (A)
                    how = "disabled" if state == "D" else "enabled only for replication sessions"
                    problems.append(f"trigger {name} on {table} is {how} "
                                    f"(ALTER TABLE {table} ENABLE TRIGGER {name})")
        return problems

    def integrity_findings(self, full: bool = False) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        try:
            with self._rlock:
                have = self._catalog(self._conn("r"), None)
                roles = _granted_roles(self._conn("r"))
                regrants = (self._conn("r").execute(_REGRANTS, ([x for x in roles if x],)).fetchall()
                            if roles else [])
        except psycopg.Error as e:
            return [("storage", f"{self.display}: the catalog cannot be read: {first_line(e)}")]
        out += [("schema", f"{who} holds {privilege} on the {what}, which `eventstore roles` revokes (REVOKE "
                           f"{privilege} ON {what.upper()} ... FROM {who.removeprefix('role ')})")
                for what, who, privilege in regrants]
        try:
            want = _expected_catalog(self.url, self.display, roles)
        except _NoScratch as e:
            out.append(("note", f"{self.display}: schema not compared: this role may not create the scratch schema "
                                f"it is compared with ({e}); run verify as the database's owner for it"))
        except (psycopg.Error, DatabaseError) as e:
            msg = first_line(e) if isinstance(e, psycopg.Error) else str(e)
            out.append(("schema", f"cannot build a scratch schema to compare with: {msg}"))
        else:
            skip = {f"{name} on {table}" for table, names in GUARDS.items() for name in names}
            # the owner and grants of an extra object are part of its own finding
            skip |= {key for key, (kind, _ddl) in have.items() if kind in ("owner", "grants") and key not in want
                     and key.split(" ", 2)[-1].removeprefix("function ") not in want}
            out += [("schema", m) for m in base.schema_differences(have, want, skip=skip)]
        out += self._amcheck(full)
        out += self._search_index_findings(full)
        return out

    def _search_index_findings(self, full: bool) -> list[tuple[str, str]]:
        """Whether the derived search index matches the log (revision 0200): its bound is
        not past the last event, every searchable event (``events_search_text``) up to the
        bound has its row, and every row is such an event's (session and type alike); with ``full``, each row's vector
        is the one its event's payload gives. The writer role may write the index (its
        searches catch it up), so an index out of step makes ``search`` miss or invent
        hits without any event being touched."""
        with self._rlock:
            conn = self._conn("r")
            try:
                through, last, missing, foreign = conn.execute("""
                    SELECT st.indexed_through, (SELECT coalesce(max(position), 0) FROM events),
                      (SELECT count(*) FROM events_search_text AS e WHERE e.position <= st.indexed_through
                          AND NOT EXISTS (SELECT 1 FROM events_search AS s WHERE s.position = e.position)),
                      (SELECT count(*) FROM events_search AS s LEFT JOIN events_search_text AS e
                                                                ON e.position = s.position
                        WHERE e.position IS NULL OR e.session_id <> s.session_id OR e.type <> s.type)
                    FROM events_search_state AS st""").fetchone()
                wrong = conn.execute("SELECT count(*) FROM events_search AS s JOIN events AS e USING (position) "
                                     f"WHERE s.tsv <> {SEARCH_VECTOR}").fetchone()[0] if full else 0
            except psycopg.Error as e:
                return [("storage", f"{self.display}: the search index cannot be read: {first_line(e)}")]
        out = []
        if through > last:
            out.append(f"its bound (position {through}) is past the last event (position {last})")
        if missing:
            out.append(f"{missing} searchable event(s) up to its bound have no row")
        if foreign:
            out.append(f"{foreign} row(s) belong to no searchable event (position, session or type)")
        if wrong:
            out.append(f"{wrong} row(s) hold another vector than their event's payload gives")
        return [("storage", f"the search index does not match the log: {m}: search may miss or invent hits "
                            f"(events_search, events_search_state: derived, written by whoever searches)")
                for m in out]

    def _amcheck(self, full: bool) -> list[tuple[str, str]]:
        """amcheck's B-tree checks of the indexes of events and sessions, where the extension
        is installed (CREATE EXTENSION amcheck); none otherwise."""
        with self._rlock:
            conn = self._conn("r")
            try:
                if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").fetchone() is None:
                    return []
                indexes = conn.execute(
                    "SELECT i.indexrelid::regclass::text FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid "
                    "JOIN pg_class AS ic ON ic.oid = i.indexrelid JOIN pg_am AS am ON am.oid = ic.relam "
                    "WHERE c.relname IN ('events', 'sessions') AND am.amname = 'btree' "
                    "AND c.relnamespace = current_schema()::regnamespace").fetchall()
            except psycopg.Error as e:
                return [("storage", f"{self.display}: amcheck: {first_line(e)}")]
            out = []
            for (index,) in indexes:
                try:
                    conn.execute("SELECT bt_index_check(%s::regclass, %s)", (index, full))
                except psycopg.Error as e:
                    out.append(("storage", f"amcheck bt_index_check({index}): {first_line(e)}"))
            return out

    @staticmethod
    def _catalog(conn: psycopg.Connection, schema: str | None) -> dict[str, tuple[str, str]]:
        """``{name: (kind, normalised definition)}`` of everything of ``schema`` (None: the
        current one) that decides what is stored and read (see ``_CATALOG``: definitions,
        owners, grants), with the schema's name taken out of the definitions; for the
        current schema also what the whole database holds that no migration creates (event
        triggers, publications of the schema's tables)."""
        with conn.cursor() as cur:
            ns = schema or cur.execute("SELECT current_schema()").fetchone()[0]
            owner = cur.execute("SELECT relowner FROM pg_class WHERE relname = 'events' AND relnamespace = "
                                "(SELECT oid FROM pg_namespace WHERE nspname = %s)", (ns,)).fetchone()
            params = {"ns": ns, "owner": owner[0] if owner else 0}
            rows = cur.execute(_CATALOG, params).fetchall()
            if schema is None:
                rows += cur.execute(_DATABASE_CATALOG, params).fetchall()
        prefix = pg_sql.Identifier(ns).as_string(None) + "."
        out = {}
        for kind, name, ddl in rows:
            ddl = _NORMALIZE.sub(" ", (ddl or "").replace(prefix, "").replace(ns + ".", "")).strip()
            if "alembic_version" in name:
                continue
            out[name if kind in ("table", "view", "materialized view", "sequence", "foreign table", "function",
                                 "trigger") or " on " in kind else f"{kind} {name}"] = (kind, ddl)
        return out

    def sessions_in_storage_order(self) -> list[tuple[str, Any]]:
        return self._read("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY ctid")

    def checkpoint_rows(self, at: dict[str, int] | None = None, position: int = 0) -> dict:
        conn = open_connection(self.url, self.display, autocommit=False)
        try:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            out = {"position": conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0],
                   "sessions": [tuple(r) for r in conn.execute(_CHECKPOINT_HEADS).fetchall()], "at": {}}
            if at:
                for sid, hash_, pos in conn.execute(
                        "SELECT e.session_id, e.hash, e.position FROM events AS e JOIN unnest(%s::text[], "
                        "%s::bigint[]) AS a(sid, seq) ON e.session_id = a.sid AND e.seq = a.seq",
                        (list(at), list(at.values()))).fetchall():
                    out["at"][sid] = (hash_, pos)
            out["counted"] = conn.execute("SELECT count(*) FROM events WHERE position <= %s", (position,)).fetchone()[0]
            return out
        except psycopg.Error as e:
            raise self._error(e) from None
        finally:
            conn.close()

    def orphan_session_ids(self) -> list[str]:
        return [r[0] for r in self._read(
            "SELECT DISTINCT e.session_id FROM events AS e "
            "WHERE NOT EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = e.session_id) ORDER BY 1")]

    def verify_rows(self, session_id: str) -> Iterator[tuple[int, int, str, float, Any, Any, Any]]:
        # A connection of its own (kept for the next session): one REPEATABLE READ READ ONLY
        # snapshot per session, streamed through a server-side cursor while other calls go on.
        with self._vlock:
            if self._v is None or self._v.closed or self._v_pid != os.getpid():
                self._v = open_connection(self.url, self.display, autocommit=False)
                self._v_pid = os.getpid()
            conn = self._v
            try:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                with conn.cursor(name="verify_rows") as cur:
                    cur.itersize = 2000
                    cur.execute("SELECT seq, position, type, ts, payload, hash, salt FROM events WHERE session_id = %s "
                                "ORDER BY seq", (session_id,))
                    for row in cur:
                        yield tuple(row)
            except psycopg.Error as e:
                raise self._error(e, session_id) from None
            finally:
                if not conn.closed:
                    conn.rollback()



_NORMALIZE = re.compile(r"\s+")
_CHECKPOINT_HEADS = """
SELECT s.id, s.created_at, s.meta, coalesce(h.seq + 1, 0), h.hash
FROM sessions AS s
LEFT JOIN LATERAL (SELECT seq, hash FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) AS h ON true"""
# Every object of schema %(ns)s that decides what is stored and read, with its definition as
# PostgreSQL prints it: tables (persistence, row-level security, options, inheritance,
# columns with defaults and collations, constraints), sequences, indexes, triggers (and
# whether they fire), rules, policies, views, functions (their settings and SECURITY
# DEFINER are in pg_get_functiondef), operators; the owner and the grants of each. The
# owner of the schema's ``events`` (%(owner)s) is written "the owner", so that a database
# and its scratch copy, migrated by different roles, compare equal.
_ROLE = "CASE {0} WHEN 0 THEN 'PUBLIC' WHEN %(owner)s THEN 'the owner' ELSE pg_get_userbyid({0}) END"
_GRANTS = (f"(SELECT string_agg(g, ', ' ORDER BY g) FROM (SELECT {_ROLE.format('a.grantee')} || ' ' || "
           "a.privilege_type || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END AS g "
           "FROM aclexplode({0}) AS a) AS x)")
_REL_GRANTS = _GRANTS.format("""coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                                 c.relowner))""")
_FUNCTION_GRANTS = _GRANTS.format("""coalesce(p.proacl, acldefault('f'::"char", p.proowner))""")
_CATALOG = f"""
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(ns)s),
rel AS (SELECT c.* FROM pg_class AS c
        WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f'))
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                      WHEN 'f' THEN 'foreign table' ELSE 'table' END, c.relname,
       CASE c.relpersistence WHEN 'u' THEN 'UNLOGGED (not crash-safe); ' ELSE '' END
       || CASE WHEN c.relrowsecurity THEN 'row level security enabled; ' ELSE '' END
       || CASE WHEN c.relforcerowsecurity THEN 'row level security forced; ' ELSE '' END
       || CASE WHEN c.relkind IN ('r', 'p') AND c.relreplident <> 'd'
               THEN 'replica identity ' || c.relreplident::text || '; ' ELSE '' END
       || coalesce('with (' || array_to_string(c.reloptions, ', ') || '); ', '')
       || coalesce((SELECT 'inherits ' || string_agg(i.inhparent::regclass::text, ', ' ORDER BY i.inhseqno) || '; '
                    FROM pg_inherits AS i WHERE i.inhrelid = c.oid), '')
       || coalesce((SELECT 'inherited by ' || string_agg(i.inhrelid::regclass::text, ', ' ORDER BY 1) || '; '
                    FROM pg_inherits AS i WHERE i.inhparent = c.oid), '')
       || CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid)
            WHEN c.relkind = 'S' THEN (SELECT format('%%s start %%s increment %%s min %%s max %%s cache %%s%%s',
                                                      s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin,
                                                      s.seqmax, s.seqcache, CASE WHEN s.seqcycle THEN ' cycle' END)
                                        FROM pg_sequence AS s WHERE s.seqrelid = c.oid)
            ELSE (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                    || CASE WHEN a.attcollation <> 0 AND a.attcollation <> ty.typcollation
                                            THEN ' collate ' || a.attcollation::regcollation::text ELSE '' END
                                    || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                    || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
                                    || CASE a.attidentity::text WHEN '' THEN ''
                                            ELSE ' identity ' || a.attidentity::text END
                                    || CASE a.attgenerated WHEN 's' THEN ' stored' ELSE '' END, ', ' ORDER BY a.attnum)
                  FROM pg_attribute AS a LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                  JOIN pg_type AS ty ON ty.oid = a.atttypid
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
                 || coalesce((SELECT '; ' || string_agg(co.conname || ' ' || pg_get_constraintdef(co.oid), '; '
                                                        ORDER BY co.conname)
                              FROM pg_constraint AS co WHERE co.conrelid = c.oid), '') END
FROM rel AS c
UNION ALL
SELECT 'owner', 'of ' || c.relname, {_ROLE.format('c.relowner')} FROM rel AS c
UNION ALL
SELECT 'grants', 'on ' || c.relname,
       coalesce({_REL_GRANTS}, 'none')
       || coalesce((SELECT '; column ' || string_agg(a.attname || ': ' || {_GRANTS.format('a.attacl')}, '; '
                                                     ORDER BY a.attnum)
                    FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL), '')
FROM rel AS c
UNION ALL
SELECT 'index on ' || t.relname, ic.relname,
       pg_get_indexdef(ic.oid) || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
FROM pg_index AS i JOIN pg_class AS ic ON ic.oid = i.indexrelid JOIN pg_class AS t ON t.oid = i.indrelid
WHERE ic.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'trigger', tg.tgname || ' on ' || t.relname,
       pg_get_triggerdef(tg.oid) || CASE tg.tgenabled WHEN 'O' THEN '' WHEN 'D' THEN ' (disabled)'
                                      WHEN 'R' THEN ' (replica only)' ELSE ' (always)' END
FROM pg_trigger AS tg JOIN pg_class AS t ON t.oid = tg.tgrelid
WHERE t.relnamespace = (SELECT oid FROM ns) AND NOT tg.tgisinternal
UNION ALL
SELECT 'rule on ' || t.relname, r.rulename,
       pg_get_ruledef(r.oid) || CASE r.ev_enabled WHEN 'O' THEN '' WHEN 'D' THEN ' (disabled)'
                                 WHEN 'R' THEN ' (replica only)' ELSE ' (always)' END
FROM pg_rewrite AS r JOIN pg_class AS t ON t.oid = r.ev_class
WHERE t.relnamespace = (SELECT oid FROM ns) AND r.rulename <> '_RETURN'
UNION ALL
SELECT 'policy on ' || t.relname, p.polname,
       format('%%s for %%s to %%s using (%%s) with check (%%s)',
              CASE WHEN p.polpermissive THEN 'permissive' ELSE 'restrictive' END, p.polcmd,
              (SELECT string_agg({_ROLE.format('r')}, ', ' ORDER BY 1) FROM unnest(p.polroles) AS r),
              pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
FROM pg_policy AS p JOIN pg_class AS t ON t.oid = p.polrelid
WHERE t.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) ELSE 'aggregate or window function' END
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'owner', 'of function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       {_ROLE.format('p.proowner')}
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'grants', 'on function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       coalesce({_FUNCTION_GRANTS}, 'none')
FROM pg_proc AS p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'operator', o.oid::regoperator::text, o.oprcode::regprocedure::text
FROM pg_operator AS o WHERE o.oprnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'grants', 'on schema',
       coalesce((SELECT string_agg(g, ', ' ORDER BY g) FROM (
                   SELECT pg_get_userbyid(a.grantee) || ' ' || a.privilege_type AS g
                   FROM pg_namespace AS n, aclexplode(n.nspacl) AS a
                   WHERE n.oid = (SELECT oid FROM ns) AND a.grantee NOT IN (0, %(owner)s, n.nspowner)
                     AND NOT pg_has_role(a.grantee, n.nspowner, 'MEMBER')) AS x), 'none')
UNION ALL
SELECT 'default privileges', 'of ' || pg_get_userbyid(d.defaclrole) || ' for ' || d.defaclobjtype::text,
       {_GRANTS.format('d.defaclacl')}
FROM pg_default_acl AS d WHERE d.defaclnamespace = (SELECT oid FROM ns)"""
# What no migration creates anywhere in the database and changes what is stored or read:
# event triggers (they run on DDL), publications of the schema's tables (replication of
# the log elsewhere, and what UPDATE and DELETE need on a published table).
_DATABASE_CATALOG = """
SELECT 'event trigger', e.evtname, e.evtevent || ' runs ' || e.evtfoid::regprocedure::text
       || CASE e.evtenabled WHEN 'D' THEN ' (disabled)' ELSE '' END
FROM pg_event_trigger AS e
UNION ALL
SELECT 'publication', p.pubname,
       CASE WHEN p.puballtables THEN 'FOR ALL TABLES' ELSE
         'FOR TABLE ' || coalesce((SELECT string_agg(t.tablename, ', ' ORDER BY t.tablename)
                                   FROM pg_publication_tables AS t WHERE t.pubname = p.pubname
                                   AND t.schemaname = %(ns)s), '(none of this schema)') END
FROM pg_publication AS p
WHERE p.puballtables OR EXISTS (SELECT 1 FROM pg_publication_tables AS t WHERE t.pubname = p.pubname
                                                                     AND t.schemaname = %(ns)s)"""

_expected: dict[str, dict[str, tuple[str, str]]] = {}  # per URL


class _NoScratch(Exception):
    """The role may not create the scratch schema (no CREATE on the database)."""


# What `eventstore roles` revoked on the database and the schema, granted again: CREATE or
# TEMPORARY on the database, CREATE on the schema, held by the writer or the auditor (%s), a
# role of theirs (a login), or PUBLIC where the tables' owner owns (or acts as) the database's
# or schema's owner
# (roles revokes PUBLIC's then). The schema comparison cannot see these: a scratch schema
# has no database ACL, and PUBLIC's grants are no object's.
_REGRANTS = """
WITH owner AS (SELECT relowner AS o FROM pg_class
                WHERE relname = 'events' AND relnamespace = current_schema()::regnamespace),
acl AS (
  SELECT 'database' AS what, a.grantee, a.privilege_type, d.datdba AS holder
    FROM pg_database AS d, aclexplode(d.datacl) AS a
   WHERE d.datname = current_database() AND a.privilege_type IN ('CREATE', 'TEMPORARY')
  UNION ALL
  SELECT 'schema', a.grantee, a.privilege_type, n.nspowner FROM pg_namespace AS n, aclexplode(n.nspacl) AS a
   WHERE n.oid = current_schema()::regnamespace AND a.privilege_type = 'CREATE')
SELECT DISTINCT acl.what,
       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE 'role ' || quote_literal(pg_get_userbyid(acl.grantee)) END,
       acl.privilege_type
  FROM acl, owner
 WHERE (acl.grantee = 0 AND pg_has_role(owner.o, acl.holder, 'USAGE'))
    OR (acl.grantee <> 0 AND acl.grantee <> acl.holder AND EXISTS (
         SELECT 1 FROM pg_roles AS r WHERE r.rolname = ANY(%s) AND pg_has_role(acl.grantee, r.oid, 'MEMBER')))
 ORDER BY 1, 2, 3"""


def _granted_roles(conn: psycopg.Connection) -> tuple[str, str, str | None] | None:
    """The writer, auditor and redactor of :func:`roles_sql` as the grants show them (the one
    role other than the owner that may INSERT into ``events``; the one that may only SELECT
    it and may not EXECUTE ``es_redact``; the one that may, or None for a set-up made
    before revision 0320), or None when the grants are not those of one such set."""
    rows = conn.execute(
        "SELECT pg_get_userbyid(a.grantee), bool_or(a.privilege_type = 'INSERT'), "
        "bool_or(EXISTS (SELECT 1 FROM pg_proc AS p, aclexplode(p.proacl) AS x WHERE p.proname = 'es_redact' "
        "AND p.pronamespace = c.relnamespace AND x.grantee = a.grantee AND x.privilege_type = 'EXECUTE')) "
        "FROM pg_class AS c, aclexplode(c.relacl) AS a WHERE c.relname = 'events' "
        "AND c.relnamespace = current_schema()::regnamespace AND a.grantee NOT IN (0, c.relowner) "
        "GROUP BY 1").fetchall()
    writers = [r[0] for r in rows if r[1]]
    auditors = [r[0] for r in rows if not r[1] and not r[2]]
    redactors = [r[0] for r in rows if not r[1] and r[2]]
    if len(writers) == len(auditors) == 1 and len(redactors) <= 1:
        return writers[0], auditors[0], (redactors[0] if redactors else None)
    return None


def _apply_roles_to_scratch(conn, statements: list[str]) -> None:
    """:func:`roles_statements` on the scratch schema, one at a time; a statement this role
    may not run (CREATE ROLE without CREATEROLE, for roles that exist already since the
    database's grants name them) is left out."""
    for statement in statements:
        conn.exec_driver_sql("SAVEPOINT es_roles")
        try:
            conn.connection.driver_connection.execute(statement)  # (as written: no placeholders)
        except pg_errors.InsufficientPrivilege:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT es_roles")
        else:
            conn.exec_driver_sql("RELEASE SAVEPOINT es_roles")


def _expected_catalog(url: str, display: str,
                      roles: tuple[str, str, str | None] | None = None) -> dict[str, tuple[str, str]]:
    """The catalog (as :meth:`PostgresBackend._catalog`) of a scratch schema migrated to the
    head revision with the package's Alembic history, and given ``roles`` (writer, auditor,
    redactor or None) by :func:`roles_sql` as ``eventstore roles`` does, in one transaction that is rolled
    back: nothing is left in the database (built once per process, URL and roles)."""
    key = f"{url}\0{roles}"
    if key in _expected:
        return _expected[key]
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from eventstore.schema import migrations_path

    scratch = f"eventstore_scratch_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    engine = create_engine("postgresql+psycopg://", poolclass=NullPool,
                           creator=lambda: psycopg.connect(conninfo(url), application_name="eventstore verify"))
    try:
        with engine.connect() as conn:
            tx = conn.begin()
            try:
                conn.exec_driver_sql(f'CREATE SCHEMA "{scratch}"')
                conn.exec_driver_sql(f'SET LOCAL search_path TO "{scratch}"')
                cfg = Config()
                cfg.set_main_option("script_location", migrations_path("postgresql"))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                if roles is not None:
                    _apply_roles_to_scratch(conn, roles_statements(roles[0], roles[1], schema=scratch,
                                                                             redactor=roles[2]))
                _expected[key] = PgAudit._catalog(conn.connection.driver_connection, scratch)
            finally:
                tx.rollback()
    except Exception as e:
        orig = e if isinstance(e, psycopg.Error) else getattr(e, "orig", None)
        if isinstance(orig, pg_errors.InsufficientPrivilege):
            raise _NoScratch(first_line(orig)) from None
        if isinstance(orig, psycopg.Error):
            raise DatabaseError(f"{display}: {first_line(orig)}") from None
        raise
    finally:
        engine.dispose()
    return _expected[key]
