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

#: The advisory lock class (first key) of import locks (eventstore.backends.postgres).
IMPORT_LOCK_CLASS = 1702063169

_SETTINGS = "SET search_path = pg_catalog, pg_temp"

# The SQL functions, their bodies as before written in the SQL-standard form: parsed when
# created, so that the objects they name are bound then (a caller's search_path, temporary
# types or operators decide nothing), and still inlined into the queries that call them
# (a SET search_path clause would stop that).
SQL_FUNCTIONS = [r"""
CREATE OR REPLACE FUNCTION es_json(payload text) RETURNS json LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN strpos(payload, '\u') = 0 THEN payload::json
            ELSE regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json END""",
r"""
CREATE OR REPLACE FUNCTION es_field(payload text, key text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN strpos(payload, '\u') = 0 THEN (payload::json -> key)::text
            ELSE replace((regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json
                          -> key)::text, '\/u', '\u') END""",
r"""
CREATE OR REPLACE FUNCTION es_usage_int(u json, key text) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN json_typeof(u -> key) = 'number' THEN round((u ->> key)::numeric)::bigint END""",
r"""
CREATE OR REPLACE FUNCTION es_search_text(payload text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE COST 5000
BEGIN ATOMIC
SELECT concat_ws(' ',
  CASE json_typeof(j -> 'content')
    WHEN 'string' THEN j ->> 'content'
    WHEN 'array' THEN (SELECT string_agg(CASE json_typeof(c) WHEN 'string' THEN c #>> '{}' ELSE c ->> 'text' END, ' ')
                         FROM json_array_elements(j -> 'content') AS c
                        WHERE json_typeof(c) = 'string'
                           OR (json_typeof(c) = 'object' AND json_typeof(c -> 'text') = 'string'))
  END,
  CASE WHEN json_typeof(j -> 'tool_calls') = 'array' THEN
    (SELECT string_agg(concat_ws(' ', CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'name' END,
                                      CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'arguments' END), ' ')
       FROM json_array_elements(j -> 'tool_calls') AS t WHERE json_typeof(t) = 'object')
  END)
FROM (SELECT es_json(payload) AS j) AS p;
END""",
r"""
CREATE OR REPLACE FUNCTION es_search_vector(payload text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_tsvector('simple'::regconfig,
                   regexp_replace(left(es_search_text(payload), 200000), '[!-/:-@[-`{-~]+', ' ', 'g'))""",
]


def postgresql(s: str) -> list[str]:
    """The DDL, with the schema's name ``s`` (quoted as an identifier) in every reference."""
    lock = f"LOCK TABLE {s}.events_position_lock IN EXCLUSIVE MODE"
    # An import lock is held by the server process named in the owner ('pg:PID#...').
    held = (f"EXISTS (SELECT 1 FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.granted "
            f"AND l.classid = {IMPORT_LOCK_CLASS}::oid AND l.objid = hashtext(%s)::oid AND l.objsubid = 2 "
            r"AND l.pid::text = substring(%s from '^pg:(\d+)#'))")
    return [*SQL_FUNCTIONS,
        "CREATE TABLE events_position_lock ()",
        # Whoever may insert events may take the lock (UPDATE); PUBLIC and the owner aside.
        r"""
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee::regrole::text AS who
             FROM pg_class AS c, aclexplode(c.relacl) AS a
            WHERE c.oid = 'events'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
              AND a.privilege_type = 'INSERT'
  LOOP
    EXECUTE format('GRANT UPDATE ON events_position_lock TO %s', g.who);
  END LOOP;
END $$""",
        f"""
CREATE FUNCTION es_try_position_lock() RETURNS boolean LANGUAGE plpgsql {_SETTINGS} AS $$
BEGIN
  {lock} NOWAIT;
  RETURN true;
EXCEPTION WHEN lock_not_available THEN
  RETURN false;
END
$$""",
        rf"""
CREATE OR REPLACE FUNCTION events_guard_insert() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  head record;
  bad record;
BEGIN
  {lock};
  SELECT (SELECT e.seq + 1 FROM {s}.events AS e WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1) AS seq,
         (SELECT coalesce(max(e.position), 0) + 1 FROM {s}.events AS e) AS position
    INTO head;
  IF head.seq IS NULL THEN
    IF NOT EXISTS (SELECT 1 FROM {s}.sessions AS x WHERE x.id = NEW.session_id) THEN
      RAISE EXCEPTION 'eventstore: unknown session %', quote_literal(NEW.session_id) USING ERRCODE = 'ES001';
    END IF;
    head.seq := 0;
  END IF;
  IF NEW.seq IS DISTINCT FROM head.seq THEN
    RAISE EXCEPTION 'eventstore: seq % is not the next seq (%) of session %', NEW.seq, head.seq,
      quote_literal(NEW.session_id) USING ERRCODE = 'ES002';
  END IF;
  IF NEW.position IS NULL THEN
    NEW.position := head.position;
  ELSIF NEW.position <> head.position THEN
    RAISE EXCEPTION 'eventstore: position % is not the next position (%); leave it out', NEW.position,
      head.position USING ERRCODE = 'ES003';
  END IF;
  -- A key of the line itself (type, seq, ts), a non-string or repeated event_id: looked for
  -- only when a key could be one of those (its first two characters, or an escape).
  IF NEW.payload ~ '"(\\|t[ys\\]|s[e\\]|e[v\\])' THEN
    SELECT bool_or(j.key IN ('type', 'seq', 'ts')) AS line_key,
           count(*) FILTER (WHERE j.key = 'event_id') AS ids,
           bool_or(j.key = 'event_id' AND json_typeof(j.value) <> 'string') AS bad_id
      INTO bad FROM json_each({s}.es_json(NEW.payload)) AS j;
    IF bad.line_key OR bad.ids > 1 OR bad.bad_id THEN
      RAISE EXCEPTION 'eventstore: payload holds a key of the line itself (type, seq, ts), or an event_id that is not one string'
        USING ERRCODE = 'ES009';
    END IF;
  END IF;
  PERFORM set_config('eventstore.next', (NEW.position + 1)::text || ' ' || (NEW.seq + 1)::text || ' ' || NEW.session_id,
                     true);
  RETURN NEW;
END
$$""",
        rf"""
CREATE OR REPLACE FUNCTION events_guard_check() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  a record;
BEGIN
  {lock};
  SELECT s.*, (SELECT e.position FROM {s}.events AS e WHERE e.session_id = s.s_lo AND e.seq = s.q_lo - 1) AS before
    INTO a
    FROM (SELECT count(*) AS n, min(session_id) AS s_lo, max(session_id) AS s_hi, min(seq) AS q_lo, max(seq) AS q_hi,
                 min(position) AS p_lo, max(position) AS p_hi FROM new_events) AS s;
  IF a.n = 0 THEN
    RETURN NULL;
  END IF;
  IF a.s_lo <> a.s_hi THEN
    IF EXISTS (SELECT 1 FROM new_events AS n WHERE NOT EXISTS (SELECT 1 FROM {s}.sessions AS x WHERE x.id = n.session_id)) THEN
      RAISE EXCEPTION 'eventstore: an event of an unknown session' USING ERRCODE = 'ES001';
    END IF;
    IF EXISTS (SELECT 1 FROM (SELECT session_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi
                                FROM new_events GROUP BY session_id) AS g
                WHERE g.hi - g.lo + 1 <> g.n
                   OR (g.lo > 0 AND NOT EXISTS (SELECT 1 FROM {s}.events AS e WHERE e.session_id = g.session_id
                                                                             AND e.seq = g.lo - 1))) THEN
      RAISE EXCEPTION 'eventstore: the seqs of a session do not follow its last one densely' USING ERRCODE = 'ES002';
    END IF;
    a.before := NULL;
  ELSE
    IF a.q_lo = 0 THEN
      IF NOT EXISTS (SELECT 1 FROM {s}.sessions AS x WHERE x.id = a.s_lo) THEN
        RAISE EXCEPTION 'eventstore: unknown session %', quote_literal(a.s_lo) USING ERRCODE = 'ES001';
      END IF;
    END IF;
    IF a.q_hi - a.q_lo + 1 <> a.n OR (a.q_lo > 0 AND a.before IS NULL) THEN
      RAISE EXCEPTION 'eventstore: seqs % to % do not follow the last seq of session % densely', a.q_lo, a.q_hi,
        quote_literal(a.s_lo) USING ERRCODE = 'ES002';
    END IF;
  END IF;
  IF a.p_hi - a.p_lo + 1 <> a.n OR a.p_lo < 1 THEN
    RAISE EXCEPTION 'eventstore: positions % to % are not % numbers in a row', a.p_lo, a.p_hi, a.n USING ERRCODE = 'ES003';
  END IF;
  IF a.p_lo > 1 AND a.before IS DISTINCT FROM a.p_lo - 1 THEN
    IF NOT EXISTS (SELECT 1 FROM {s}.events AS e WHERE e.position = a.p_lo - 1) THEN
      RAISE EXCEPTION 'eventstore: positions % to % do not follow the largest stored one; leave them out', a.p_lo,
        a.p_hi USING ERRCODE = 'ES003';
    END IF;
  END IF;
  PERFORM pg_notify('eventstore_events', '');
  RETURN NULL;
END
$$""",
        f"""
CREATE OR REPLACE FUNCTION es_lock_head(sid text, OUT next_seq bigint, OUT last_hash text) LANGUAGE plpgsql
{_SETTINGS} AS $$
BEGIN
  {lock};
  SELECT e.seq + 1, e.hash INTO next_seq, last_hash FROM {s}.events AS e
   WHERE e.session_id = sid ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL AND EXISTS (SELECT 1 FROM {s}.sessions AS x WHERE x.id = sid) THEN
    next_seq := 0;
  END IF;
END
$$""",
        f"""
CREATE OR REPLACE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: events are append-only: % refused', TG_OP USING ERRCODE = 'ES004';
END
$$""",
        f"""
CREATE OR REPLACE FUNCTION sessions_refuse_change() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: sessions are append-only: % refused', TG_OP USING ERRCODE = 'ES005';
END
$$""",
        # importing: the insert check of 0220; an UPDATE is a take-over (the new owner holds
        # the session's import lock, the rest unchanged); a DELETE is the import completing
        # (the row's owner still holds the lock).
        rf"""
CREATE OR REPLACE FUNCTION es_importing_guard() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF EXISTS (SELECT 1 FROM {s}.events AS e WHERE e.session_id = NEW.session_id)
       OR NEW.first_position IS DISTINCT FROM (SELECT coalesce(max(e.position), 0) + 1 FROM {s}.events AS e) THEN
      RAISE EXCEPTION 'eventstore: importing: only an import creating a session (no events yet, first_position the next position) may hide it'
        USING ERRCODE = 'ES011';
    END IF;
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' THEN
    IF NEW.session_id IS DISTINCT FROM OLD.session_id OR NEW.first_position IS DISTINCT FROM OLD.first_position
       OR NOT {held % ('OLD.session_id', 'NEW.owner')} THEN
      RAISE EXCEPTION 'eventstore: importing: only an importer holding the session''s import lock may take it over (owner)'
        USING ERRCODE = 'ES011';
    END IF;
    RETURN NEW;
  ELSIF TG_OP = 'DELETE' THEN
    IF NOT {held % ('OLD.session_id', 'OLD.owner')} THEN
      RAISE EXCEPTION 'eventstore: importing: only the running import of session % may end it', quote_literal(OLD.session_id)
        USING ERRCODE = 'ES011';
    END IF;
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'eventstore: importing: % refused', TG_OP USING ERRCODE = 'ES011';
END
$$""",
        "CREATE TRIGGER importing_guard_update BEFORE UPDATE ON importing FOR EACH ROW EXECUTE FUNCTION es_importing_guard()",
        "CREATE TRIGGER importing_guard_delete BEFORE DELETE ON importing FOR EACH ROW EXECUTE FUNCTION es_importing_guard()",
        "CREATE TRIGGER importing_guard_truncate BEFORE TRUNCATE ON importing FOR EACH STATEMENT "
        "EXECUTE FUNCTION es_importing_guard()",
        # The search index: a row is what the log says of its position.
        f"""
CREATE FUNCTION es_search_guard() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  e record;
BEGIN
  IF TG_OP = 'INSERT' AND TG_TABLE_NAME = 'events_search' THEN
    SELECT x.session_id, x.type, x.payload INTO e FROM {s}.events AS x
     WHERE x.position = NEW.position AND x.type IN ('user/message', 'assistant/message', 'tool/result');
    IF NOT FOUND THEN
      RAISE EXCEPTION 'eventstore: events_search: position % is no message event', NEW.position USING ERRCODE = 'ES012';
    END IF;
    NEW.session_id := e.session_id;
    NEW.type := e.type;
    NEW.tsv := {s}.es_search_vector(e.payload);
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'events_search_state' THEN
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.indexed_through < OLD.indexed_through
       OR NEW.indexed_through > (SELECT coalesce(max(x.position), 0) FROM {s}.events AS x)
       OR EXISTS (SELECT 1 FROM {s}.events AS x
                   WHERE x.position > OLD.indexed_through AND x.position <= NEW.indexed_through
                     AND x.type IN ('user/message', 'assistant/message', 'tool/result')
                     AND NOT EXISTS (SELECT 1 FROM {s}.events_search AS i WHERE i.position = x.position)) THEN
      RAISE EXCEPTION 'eventstore: events_search_state: indexed_through may only move on to a position up to which every message event is indexed'
        USING ERRCODE = 'ES012';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'eventstore: %: % refused (derived from the log)', TG_TABLE_NAME, TG_OP USING ERRCODE = 'ES012';
END
$$""",
        "CREATE TRIGGER events_search_guard_insert BEFORE INSERT ON events_search FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_guard_update BEFORE UPDATE ON events_search FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_guard_delete BEFORE DELETE ON events_search FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_guard_truncate BEFORE TRUNCATE ON events_search FOR EACH STATEMENT "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_state_guard_insert BEFORE INSERT ON events_search_state FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_state_guard_update BEFORE UPDATE ON events_search_state FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_state_guard_delete BEFORE DELETE ON events_search_state FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_search_state_guard_truncate BEFORE TRUNCATE ON events_search_state FOR EACH STATEMENT "
        "EXECUTE FUNCTION es_search_guard()",
        # The lock table holds nothing: any write to it is refused (LOCK TABLE is not a write).
        "CREATE TRIGGER events_position_lock_guard_insert BEFORE INSERT ON events_position_lock FOR EACH ROW "
        "EXECUTE FUNCTION es_search_guard()",
        "CREATE TRIGGER events_position_lock_guard_truncate BEFORE TRUNCATE ON events_position_lock FOR EACH STATEMENT "
        "EXECUTE FUNCTION es_search_guard()",
    ]


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    for ddl in postgresql(schema):
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
