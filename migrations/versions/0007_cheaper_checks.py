"""The CHECK constraints of ``events`` written with comparisons instead of function calls.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Every inserted row runs the table's CHECK constraints. Four of them called a function per
column (``typeof()`` three times, ``abs()``, ``json_type()``); SQLite's call of a built-in
function costs a few hundred CPU instructions. Measured with callgrind, in instructions per
event of ``append_many`` batches of 100 (the store's own connection): 69,551 before, 67,255
after; per row of 64-row INSERTs on a scratch copy with foreign keys on: 46,100 before,
42,200 after. Each new form refuses exactly the values the old one refused, after
the column's affinity has converted what it converts (``tests/test_append_only.py`` checks
this for many values of every type):

* ``seq >= 0 AND CAST(seq AS INTEGER) = seq`` for ``typeof(seq) = 'integer' AND seq >= 0``.
  The INTEGER affinity stores every integer-valued number as an integer. What it leaves is
  a REAL that is not an integer (``1.5`` casts to 1) or out of range (``1e20`` casts to
  2**63 - 1), TEXT or a BLOB (they sort after every number, and cast to a number that is
  not equal to them): none equals its cast.
* ``type > '' AND type < x'' AND type <> 'session/meta'`` for ``typeof(type) = 'text' AND
  type <> '' AND type <> 'session/meta'``. The TEXT affinity turns numbers into text; SQLite
  sorts all text before all BLOBs, so ``< x''`` (the empty BLOB) is "not a BLOB".
* ``ts BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308`` for ``typeof(ts) =
  'real' AND abs(ts) <= 1.7976931348623157e308``. The REAL affinity makes every number a
  REAL; TEXT and BLOBs sort after every number; SQLite stores NaN as NULL (NOT NULL refuses
  it); the infinities are outside the range.
* ``json_valid(payload) AND (payload >= '{' AND payload < '|' OR json_type(payload) =
  'object')`` for ``json_valid(payload) AND json_type(payload) = 'object'``: valid JSON text
  that starts with ``{`` is an object, so ``json_type()`` runs only for a payload that does
  not (never for one the store writes). It still accepts what the old form accepted and the
  insert guard has refused since 0006 (whitespace before the object, a BLOB): rows stored
  before 0006 may hold such payloads, and each stored row must satisfy the new constraint.

SQLite has no ALTER for a CHECK constraint. This revision edits the table's definition in
``sqlite_schema`` in place, in the migration's transaction, as SQLite's documentation
describes for changes that leave the stored rows valid ("Making Other Kinds Of Table Schema
Changes", https://www.sqlite.org/lang_altertable.html#otheralter): no row is copied, so the
upgrade takes the same time for any size of log. Every stored row satisfies the new
constraints, since each accepts exactly what the old one accepted. Where SQLite refuses the
edit (a build or connection in "defensive" mode, an authorizer), the old constraints stay:
they refuse the same rows, only slower. A new database gets the new constraints from
``eventstore.schema`` (0001 creates the tables from it), and this revision changes nothing.
"""

import sqlite3

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# (as 0001 created it, as eventstore.schema writes it now): written out, not imported, so
# that this revision means the same thing forever.
CHECKS = [
    ("CONSTRAINT events_seq_integer CHECK (typeof(seq) = 'integer' AND seq >= 0)",
     "CONSTRAINT events_seq_integer CHECK (seq >= 0 AND CAST(seq AS INTEGER) = seq)"),
    ("CONSTRAINT events_type_text CHECK (typeof(type) = 'text' AND type <> '' AND type <> 'session/meta')",
     "CONSTRAINT events_type_text CHECK (type > '' AND type < x'' AND type <> 'session/meta')"),
    ("CONSTRAINT events_ts_finite CHECK (typeof(ts) = 'real' AND abs(ts) <= 1.7976931348623157e308)",
     "CONSTRAINT events_ts_finite CHECK (ts BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308)"),
    ("CONSTRAINT events_payload_object CHECK (json_valid(payload) AND json_type(payload) = 'object')",
     "CONSTRAINT events_payload_object CHECK (json_valid(payload) AND (payload >= '{' AND payload < '|' "
     "OR json_type(payload) = 'object'))"),
]


_SAMPLES = ("SELECT 1 AS position, 'a' AS session_id, 0 AS seq, 'a' AS type, 0.0 AS ts, '{}' AS payload, "
            "'' AS hash UNION ALL SELECT 2, 'a', 1, 'a', 0.0, ' {}', ''")


def rewrite_checks(conn: sqlite3.Connection) -> bool:
    """Replace the old CHECK texts in the ``events`` definition, in the caller's open
    transaction on ``conn``. Returns True if the definition changed; False when there was
    nothing to change or SQLite refused to let its schema table be written (nothing is
    changed then). Raises ``sqlite3.Error`` for any other failure, with nothing changed.
    """
    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    new = ddl
    for old, cheap in CHECKS:
        new = new.replace(old, cheap)
    if new == ddl:
        return False
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute("SAVEPOINT rewrite_checks")

    def undo() -> None:
        try:
            conn.execute("PRAGMA writable_schema = OFF")
        finally:
            conn.execute("ROLLBACK TO rewrite_checks")
            conn.execute("RELEASE rewrite_checks")

    try:
        conn.execute("PRAGMA writable_schema = ON")
        try:
            conn.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'events'", (new,))
        except sqlite3.DatabaseError as e:
            if "not authorized" not in str(e) and "may not be modified" not in str(e):
                raise
            undo()
            return False
        if conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() != (new,):
            undo()  # the update was skipped (an authorizer answering SQLITE_IGNORE)
            return False
        conn.execute(f"PRAGMA schema_version = {version + 1}")  # other connections reload the schema
        conn.execute("PRAGMA writable_schema = OFF")
        # Parse the new definition now, and evaluate each new CHECK on two sample rows (the
        # second one takes json_type's branch): SQLite resolves a CHECK's functions only
        # when it runs it, so a bad one would otherwise fail every later append.
        conn.execute("SELECT position FROM events LIMIT 0").fetchall()
        for _old, cheap in CHECKS:
            conn.execute(f"SELECT {cheap.split(' CHECK ', 1)[1]} FROM ({_SAMPLES})").fetchall()
    except BaseException:
        undo()
        raise
    conn.execute("RELEASE rewrite_checks")
    return True


def upgrade() -> None:
    rewrite_checks(op.get_bind().connection.driver_connection)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
