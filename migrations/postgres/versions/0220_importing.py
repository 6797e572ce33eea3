"""The importing table: sessions whose import has not finished yet.

Revision ID: 0220
Revises: 0210
Create Date: 2026-12-02

A large import commits in chunks, so that other writers get the lock between them
(docs/concurrency.md, "Large imports"). Until its last chunk commits, the session has a row
here and every reader of the store hides it (its sessions row and its events are stored,
but ``sessions()``, ``session(id)``, ``follow``, search, export and the viewer do not show
them; readers of positions stop before ``first_position``). The row is deleted when the
import completes: this table is bookkeeping, not part of the log, so it is not append-only.
``owner`` names the importer's lock (a ``flock`` on SQLite, a session advisory lock on
PostgreSQL) so that readers can tell a running import from an abandoned one.
"""
from alembic import op

revision = "0220"
down_revision = "0210"
branch_labels = None
depends_on = None

POSTGRESQL_IMPORTING = """
CREATE TABLE importing (
  session_id text PRIMARY KEY REFERENCES sessions (id),
  first_position bigint NOT NULL,
  owner text NOT NULL,
  started_at double precision NOT NULL
)"""

POSTGRESQL_GUARD = [r"""
CREATE FUNCTION es_importing_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id)
     OR NEW.first_position IS DISTINCT FROM (SELECT coalesce(max(position), 0) + 1 FROM events) THEN
    RAISE EXCEPTION 'eventstore: importing: only an import creating a session (no events yet, first_position the next position) may hide it'
      USING ERRCODE = 'ES011';
  END IF;
  RETURN NEW;
END $$""",
    "CREATE TRIGGER importing_guard_insert BEFORE INSERT ON importing FOR EACH ROW EXECUTE FUNCTION es_importing_guard()"]

# Roles granted on events (`eventstore roles`, or a DBA's own) get what they need here: a
# reader of events reads this table (every read consults it), a writer of events also
# writes it (an import adds and removes its row). PUBLIC and the owner aside.
POSTGRESQL_GRANTS = r"""
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee::regrole::text AS who, a.privilege_type AS what
             FROM pg_class AS c, aclexplode(c.relacl) AS a
            WHERE c.oid = 'events'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
              AND a.privilege_type IN ('SELECT', 'INSERT')
  LOOP
    IF g.what = 'SELECT' THEN
      EXECUTE format('GRANT SELECT ON importing TO %s', g.who);
    ELSE
      EXECUTE format('GRANT INSERT, UPDATE, DELETE ON importing TO %s', g.who);
    END IF;
  END LOOP;
END $$"""


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection
    conn.execute(POSTGRESQL_IMPORTING)
    for statement in POSTGRESQL_GUARD:
        conn.execute(statement)
    conn.execute(POSTGRESQL_GRANTS)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
