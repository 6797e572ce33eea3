"""Guards that no role can shadow or outlast; every helper table guarded; a position lock
that only writers can take.

Revision ID: 0250
Revises: 0240
Create Date: 2026-12-07

PostgreSQL:

* Every PL/pgSQL function of the schema (the guards, ``es_lock_head``) is created again with
  ``SET search_path = pg_catalog, pg_temp`` and names the schema's objects with the schema
  (the one the migration runs in: ``current_schema()``). Before, they named ``events`` and
  ``sessions`` bare and ran with the caller's ``search_path``, where ``pg_temp`` comes first:
  a role that could create a temporary table ``events`` made the insert guard read that
  table instead of the log (gapped seqs, far positions, a session hidden by ``importing``).
* The SQL functions (``es_json``, ``es_field``, ``es_usage_int``, ``es_search_text``,
  ``es_search_vector``) keep their bodies, written in the SQL-standard form (``RETURN`` /
  ``BEGIN ATOMIC``): parsed when created, so a caller's ``search_path`` (a temporary type
  ``json``, an operator in a schema of its own) decides nothing, and still inlined.
* The position lock is ``LOCK TABLE events_position_lock IN EXCLUSIVE MODE`` on a new, empty
  table, not ``pg_advisory_xact_lock``: PostgreSQL lets a role take that mode only with
  UPDATE, DELETE or TRUNCATE on the table, which only roles granted INSERT on ``events`` get
  (the grants are carried over here, and ``eventstore roles`` grants them), so a reader
  cannot take it and stop every writer. It is released at commit, like the advisory lock.
  ``es_try_position_lock()`` takes it without waiting (for the durable single append).
* ``importing`` is guarded for UPDATE (only ``owner`` and ``started_at`` may change, and only
  by the holder of the session's import lock: a take-over), DELETE (only while the row's
  owner holds the session's import lock: the import completing) and TRUNCATE (refused).
* ``events_search`` refuses UPDATE, DELETE and TRUNCATE, and takes from the log what an
  INSERT cannot choose: its session, type and vector are those of the message event at its
  position (an INSERT for any other position is refused). ``events_search_state`` refuses
  INSERT, DELETE and TRUNCATE, and an UPDATE that moves ``indexed_through`` back, past the
  last event, or past a message event that has no row.
* ``events_position_lock`` itself refuses every write.

SQLite: ``importing`` refuses an UPDATE of ``session_id`` or ``first_position`` (an UPDATE
could otherwise hide any stored session); the importer only changes ``owner`` (a take-over).
"""
from alembic import op

revision = "0250"
down_revision = "0240"
branch_labels = None
depends_on = None

SQLITE = [r"""
CREATE TRIGGER importing_guard_update BEFORE UPDATE ON importing
WHEN NEW.session_id IS NOT OLD.session_id OR NEW.first_position IS NOT OLD.first_position
BEGIN
  SELECT RAISE(ABORT, 'ES011: importing: only the owner of an unfinished import may change (a take-over)');
END"""]


def upgrade() -> None:
    bind = op.get_bind()
    for ddl in SQLITE:
        bind.exec_driver_sql(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
