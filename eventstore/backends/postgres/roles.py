"""Roles: a writer that may only append and import, an auditor that may only read, a redactor
that may only read and redact (revision 0320's functions).
"""

from __future__ import annotations

import itertools

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from eventstore.errors import (
    DatabaseError,
)

from ..base import Backend
from ..capabilities import (
    Roles,
)
from .connection import first_line

# --- least privilege --------------------------------------------------------------------------

#: Functions of pg_catalog with effects beyond the tables that every role may call (PUBLIC
#: holds EXECUTE): writing WAL (``pg_logical_emit_message``), taking locks any other role's
#: work may wait for (advisory locks), signalling backends, large objects. Only their owner,
#: a superuser, can revoke them from PUBLIC (see :func:`roles_sql`).
SIDE_EFFECT_FUNCTIONS = ("proname LIKE 'pg\\_%advisory\\_%' OR proname LIKE 'lo\\_%' "
                         "OR proname IN ('pg_logical_emit_message', 'pg_terminate_backend', 'pg_cancel_backend', "
                         "'pg_notify', 'loread', 'lowrite')")
#: What the store itself calls of those (its owner and writer keep them): the durable flush
#: (docs/concurrency.md, "Durability"), the import lock, the migration lock and the insert
#: trigger's wake-up of followers.
STORE_FUNCTIONS = ("pg_logical_emit_message(boolean, text, text)", "pg_try_advisory_lock(integer, integer)",
                   "pg_advisory_xact_lock(bigint)", "pg_notify(text, text)")


#: The functions of a redaction (revision 0320): SECURITY DEFINER, EXECUTE only for the redactor.
REDACT_FUNCTIONS = ("es_redact_head(text)", "es_redact(text, bigint, text, text, bytea, bigint, double precision, "
                                            "text, bytea, text)")


def roles_statements(writer: str = "eventstore_writer", auditor: str = "eventstore_auditor",
                     database: str | None = None, schema: str = "public", redactor: str | None = None) -> list[str]:
    """The SQL statements that create (or update) the roles of a least-privilege set-up,
    to run as the tables' owner (with CREATEROLE) or a superuser:

    * ``writer`` may INSERT and SELECT the tables and SELECT the views: enough for
      ``eventstore`` (appends, import, export, follow); it does not own anything, so it
      cannot ALTER, DROP, TRUNCATE or disable triggers, and the triggers refuse its UPDATE
      and DELETE. It may also take the position lock (UPDATE on the empty
      ``events_position_lock``, revision 0250), INSERT into the derived search index
      ``events_search`` and UPDATE ``events_search_state`` (its searches catch the index up;
      the guards take each row from the log), and write ``importing`` as an import does
      (the guards let only the import lock's holder change or end a row);
    * ``auditor`` may only SELECT: enough for ``eventstore sql``, ``verify`` and ``search``;
    * ``redactor`` (when given) may SELECT and EXECUTE the two functions of a redaction
      (:data:`REDACT_FUNCTIONS`, ``SECURITY DEFINER``, revision 0320): it appends a
      ``redaction`` event and marks the named fields of one event, and nothing else (no
      INSERT, UPDATE or DELETE of any table; the trigger checks the redaction's form).

    None keeps CREATE on the schema or the database, nor TEMPORARY on the database:
    PUBLIC's TEMPORARY is revoked when the role running this owns the database (or is a
    superuser), which every role of the database then loses but the owner. Run by a
    superuser, it also revokes from PUBLIC the :data:`SIDE_EFFECT_FUNCTIONS` of this database
    and grants back to the tables' owner and the writer the :data:`STORE_FUNCTIONS`;
    otherwise it says so in a NOTICE. README.md ("Least privilege") lists every grant.

    All are NOLOGIN groups: grant them to login roles (``GRANT eventstore_writer TO
    agent1``), or give them a password and LOGIN yourself.
    """
    ident = pg_sql.Identifier
    w, a, s = (ident(writer).as_string(None), ident(auditor).as_string(None), ident(schema).as_string(None))
    r = ident(redactor).as_string(None) if redactor else None
    readers = f"{a}, {r}" if r else a  # (the roles that may only read the tables)
    everyone = f"{w}, {readers}"
    db = ident(database).as_string(None) if database else None
    redact_functions = ", ".join(f"{s}.{f}" for f in REDACT_FUNCTIONS)
    q = next(t for t in (f"$es{n}$" if n else "$$" for n in itertools.count()) if t not in everyone)  # (a body quote)
    lines = [f"DO {q} BEGIN CREATE ROLE {x} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END {q};"
             for x in (w, a, r) if x]
    if db:
        lines += [
            f"GRANT CONNECT ON DATABASE {db} TO {everyone};",
            f"REVOKE CREATE, TEMPORARY ON DATABASE {db} FROM {everyone};",
            # PUBLIC's TEMPORARY (every role's, by default): only the database's owner may revoke it
            f"DO {q} BEGIN IF pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), "
            f"'USAGE') THEN REVOKE TEMPORARY ON DATABASE {db} FROM PUBLIC; ELSE RAISE NOTICE 'TEMPORARY on "
            f"database % is left to PUBLIC: only its owner or a superuser may revoke it', current_database(); "
            f"END IF; END {q};",
        ]
    lit = pg_sql.Literal(schema).as_string(None)
    owner = f"(SELECT quote_ident(tableowner) FROM pg_tables WHERE schemaname = {lit} AND tablename = 'events')"
    lines += [
        f"GRANT USAGE ON SCHEMA {s} TO {everyone};",
        f"REVOKE CREATE ON SCHEMA {s} FROM {everyone};",
        f"DO {q} BEGIN IF has_schema_privilege('public', {pg_sql.Literal(schema).as_string(None)}, 'CREATE') AND "
        f"pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = {pg_sql.Literal(schema).as_string(None)}), "
        f"'USAGE') THEN REVOKE CREATE ON SCHEMA {s} FROM PUBLIC; END IF; END {q};",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {everyone};",
        f"GRANT SELECT, INSERT ON {s}.events, {s}.sessions TO {w};",
        f"GRANT UPDATE ON {s}.events_position_lock TO {w};",
        # the search index is derived (revision 0200): the writer's searches catch it up
        f"GRANT SELECT, INSERT ON {s}.events_search TO {w};",
        f"GRANT SELECT, UPDATE ON {s}.events_search_state TO {w};",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.importing TO {w};",
        f"GRANT SELECT ON {s}.alembic_version, {s}.messages, {s}.messages_uncut, {s}.tool_calls, {s}.turns, "
        f"{s}.session_summary, {s}.usage, {s}.events_search_text TO {w};",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {readers};",
        # only the redactor may redact (the migration revoked PUBLIC's EXECUTE)
        f"REVOKE ALL ON FUNCTION {redact_functions} FROM {w}, {a};",
        *([f"GRANT EXECUTE ON FUNCTION {redact_functions} TO {r};"] if r else []),
        # Functions with effects beyond the tables: PUBLIC's EXECUTE, which only a superuser may
        # revoke (in this database: pg_proc is per database).
        f"""DO {q}
DECLARE f regprocedure;
BEGIN
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RAISE NOTICE USING MESSAGE = 'PUBLIC keeps EXECUTE on pg_logical_emit_message, the advisory lock '
                 || 'functions, pg_terminate_backend, pg_cancel_backend, pg_notify and lo_*: only a superuser '
                 || 'may revoke it';
    RETURN;
  END IF;
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace
                                                   AND ({SIDE_EFFECT_FUNCTIONS}) LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc AS p JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass
             AND d.objid = p.oid AND d.deptype = 'e' JOIN pg_extension AS x ON x.oid = d.refobjid
            WHERE x.extname = 'dblink' LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
  EXECUTE format('GRANT EXECUTE ON FUNCTION {", ".join(STORE_FUNCTIONS)} TO %s, '
                 || '{w.replace("%", "%%").replace("'", "''")}', {owner});
END {q};""",
    ]
    return lines


def roles_sql(writer: str = "eventstore_writer", auditor: str = "eventstore_auditor",
              database: str | None = None, schema: str = "public", redactor: str | None = None) -> str:
    """:func:`roles_statements` as one plain text (a statement may span lines), as
    ``eventstore roles`` prints and runs it."""
    return "\n".join(roles_statements(writer, auditor, database, schema, redactor)) + "\n"


def check_role_names(backend: Backend, writer: str, auditor: str, redactor: str | None = None) -> None:
    """Refuse role names that :func:`roles_sql` would harm or could not limit: the same name
    for two roles, a name that starts or ends with a space (a look-alike), a role that owns
    the tables or runs this (its grants would be revoked), a superuser or a member of the
    tables' owner (no grant limits it), a writer or auditor that is a member of the redactor
    (it could redact) or a redactor that is a member of the writer (it could append).
    Raises :class:`DatabaseError`."""
    if writer == auditor:
        raise DatabaseError(f"the writer and auditor roles must differ (both are {writer!r})")
    if redactor is not None and redactor in (writer, auditor):
        other = "writer" if redactor == writer else "auditor"
        raise DatabaseError(f"the redactor and {other} roles must differ (both are {redactor!r})")
    names = (writer, auditor, redactor) if redactor is not None else (writer, auditor)
    for name in names:
        if not name.strip() or name != name.strip():
            raise DatabaseError(f"role name {name!r}: no role name starts or ends with a space here (a look-alike "
                                f"of another role)")
    with backend._rlock:
        conn = backend._conn("r")
        try:
            owner, me = conn.execute("SELECT tableowner, current_user FROM pg_tables WHERE tablename = 'events' "
                                     "AND schemaname = current_schema()").fetchone()
            # existing roles that are superusers, or members of the tables' owner
            powers = dict(conn.execute(
                "SELECT rolname, rolsuper FROM pg_roles WHERE rolname = ANY(%s) "
                "AND (rolsuper OR pg_has_role(oid, (SELECT oid FROM pg_roles WHERE rolname = %s), 'MEMBER'))",
                (list(names), owner)).fetchall())

            def member(who: str | None, of: str | None) -> bool:
                """Whether role ``who`` is (through any chain) a member of role ``of`` (a
                superuser is refused below, as such)."""
                return who is not None and of is not None and conn.execute(
                    "SELECT 1 FROM pg_roles AS a JOIN pg_roles AS w ON w.rolname = %s WHERE a.rolname = %s "
                    "AND NOT a.rolsuper AND pg_has_role(a.oid, w.oid, 'MEMBER')", (of, who)).fetchone() is not None

            # an auditor or redactor that is a member of the writer keeps its INSERT; a writer
            # or auditor that is a member of the redactor could redact
            inherits = [(who, of, role, what) for who, of, role, what in (
                (auditor, writer, "auditor", "writer's INSERT"), (redactor, writer, "redactor", "writer's INSERT"),
                (writer, redactor, "writer", "redactor's EXECUTE of es_redact"),
                (auditor, redactor, "auditor", "redactor's EXECUTE of es_redact")) if member(who, of)]
        except psycopg.Error as e:
            raise backend._error(e) from None
    for who, of, role, what in inherits:
        kind = "writer" if of == writer else "redactor"
        raise DatabaseError(f"role {who!r} is a member of the {kind} role {of!r}: as {role} it would keep the "
                            f"{what}; name a role that is not one of the {kind}'s (by default "
                            f"eventstore_{role})")
    for name in names:
        if name in (owner, me):
            why = (f"{'owns the tables' if name == owner else 'is the role running this'}: the set-up would revoke "
                   f"its privileges")
        elif name in powers:
            why = ("is a superuser, whom no privilege limits" if powers[name] else
                   "is a member of the tables' owner: it keeps the owner's powers (ALTER, DROP, switching triggers "
                   "off) whatever is granted")
        else:
            continue
        raise DatabaseError(f"role {name!r} {why}; name a new role for --writer, --auditor and --redactor (by "
                            f"default eventstore_writer, eventstore_auditor and eventstore_redactor)")


def apply_roles(backend: Backend, text: str) -> list[str]:
    """Run :func:`roles_sql`'s ``text`` on ``backend``'s database, in one transaction, and
    return the notices it raised: what it had to leave to PUBLIC (only a superuser or the
    database's owner may revoke it). Raises :class:`DatabaseError` (not allowed to create
    roles or grant: run it as the database's owner with CREATEROLE, or as a superuser)."""
    notices: list[str] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "NOTICE" and diag.message_primary:
            notices.append(diag.message_primary)

    with backend._wlock:
        conn = backend._conn("w")
        conn.add_notice_handler(notice)
        try:
            with conn.transaction():
                conn.execute(text)
        except pg_errors.InsufficientPrivilege as e:
            raise DatabaseError(f"{backend.display}: cannot set up the roles: {first_line(e)}: run it once as a "
                                "role with CREATEROLE that owns the tables, or as a superuser") from None
        except psycopg.Error as e:
            raise DatabaseError(f"{backend.display}: cannot set up the roles: {first_line(e)}") from None
        finally:
            conn.remove_notice_handler(notice)
    return notices




class PgRoles(Roles):
    """The roles of :class:`~.backend.PostgresBackend` (the functions above)."""

    # --- roles (the Roles capability; the functions below do the work) -----------------------

    def check_role_names(self, writer: str, auditor: str, redactor: str | None = None) -> None:
        check_role_names(self, writer, auditor, redactor)

    def roles_sql(self, writer: str, auditor: str, redactor: str | None = None) -> str:
        return roles_sql(writer, auditor, self.database_name(), self.schema_name(), redactor)

    def apply_roles(self, text: str) -> list[str]:
        return apply_roles(self, text)
