"""Baseline: the whole schema, frozen (replaces revisions 0001-0007 of the first release).

Its DDL is written out here and never imports the package's current definitions: a later
change to the schema is a new revision. On SQLite it creates exactly the schema that the
first release's last revision (0007) left, but that every trigger's RAISE message starts
with its error code (``ES001: unknown session``; see eventstore/backends/base.py), which
the store reads instead of the message text. A database written by that release (stamped
``0007``) is brought here without running this revision: the SQLite backend checks that
its tables are these, then drops and recreates its indexes, triggers and views from the
dictionaries below (eventstore/backends/sqlite_engine.py, ``upgrade_legacy``).

Revision ID: 0008
Revises: (none: the baseline)
"""
from alembic import op

revision = "0008"
down_revision = None
branch_labels = None
depends_on = None

# pg_advisory_xact_lock key of the insert guard (the bytes b"esevent" as an integer).
POSITION_LOCK = 28555852263026292

_PG_MSG = "('user/message', 'assistant/message', 'tool/result')"

POSTGRESQL = [
    # PostgreSQL's JSON functions decode every string of a text they look into, and refuse
    # "\u0000" and a lone surrogate ("\ud83d"), both of which JSON.stringify writes: es_json
    # parses a copy in which each \u escape is written "\/u..." (a "/" and the letters;
    # JSON.stringify never writes "\/", so es_field can turn it back), es_field gives the
    # text of one top-level value exactly as stored (NULL when the key is missing). Both are
    # inlined into the queries that call them.
    r"""
CREATE FUNCTION es_json(payload text) RETURNS json LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN strpos(payload, '\u') = 0 THEN payload::json
            ELSE regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json END
$$""",
    r"""
CREATE FUNCTION es_field(payload text, key text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN strpos(payload, '\u') = 0 THEN (payload::json -> key)::text
            ELSE replace((regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json
                          -> key)::text, '\/u', '\u') END
$$""",
    """
CREATE TABLE sessions (
  id text NOT NULL,
  created_at double precision NOT NULL,
  meta text NOT NULL DEFAULT '{}',
  CONSTRAINT sessions_pkey PRIMARY KEY (id),
  CONSTRAINT sessions_id_not_empty CHECK (id <> ''),
  CONSTRAINT sessions_created_at_finite CHECK (created_at > '-Infinity' AND created_at < 'Infinity'),
  CONSTRAINT sessions_meta_object CHECK (json_typeof(meta::json) = 'object')
)""",
    # position: filled in by events_guard_insert when the INSERT leaves it out (NOT NULL is
    # checked after BEFORE triggers). event_id: the payload's idempotency key.
    """
CREATE TABLE events (
  position bigint NOT NULL,
  session_id text NOT NULL,
  seq bigint NOT NULL,
  type text NOT NULL,
  ts double precision NOT NULL,
  payload text NOT NULL,
  hash text NOT NULL,
  event_id text GENERATED ALWAYS AS (es_json(payload) ->> 'event_id') STORED,
  CONSTRAINT events_pkey PRIMARY KEY (position),
  CONSTRAINT events_key UNIQUE (session_id, seq),
  CONSTRAINT events_session_fkey FOREIGN KEY (session_id) REFERENCES sessions (id),
  CONSTRAINT events_seq_integer CHECK (seq >= 0),
  CONSTRAINT events_type_text CHECK (type <> '' AND type <> 'session/meta'),
  CONSTRAINT events_ts_finite CHECK (ts > '-Infinity' AND ts < 'Infinity'),
  CONSTRAINT events_payload_object CHECK (left(payload, 1) = '{' AND json_typeof(payload::json) = 'object'),
  CONSTRAINT events_hash_sha256 CHECK (length(hash) = 64)
)""",
    "CREATE UNIQUE INDEX events_session_event_id ON events (session_id, event_id) WHERE event_id IS NOT NULL",
    f"CREATE INDEX events_messages ON events (session_id, seq) WHERE type IN {_PG_MSG}",
    # The insert guard. It takes the transaction-scoped advisory lock POSITION_LOCK before it
    # reads anything, so every transaction that inserts events (the store, COPY, a plain
    # psql INSERT) holds it from its first event to its commit: inserts are serialized, each
    # statement of this function sees every event committed before (READ COMMITTED takes a
    # new snapshot per statement), and the global position grows densely in commit order.
    f"""
CREATE FUNCTION events_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  next_seq bigint;
  next_position bigint;
  bad record;
BEGIN
  PERFORM pg_advisory_xact_lock({POSITION_LOCK});
  SELECT e.seq + 1 INTO next_seq FROM events AS e
   WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL THEN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id) THEN
      RAISE EXCEPTION 'eventstore: unknown session %', quote_literal(NEW.session_id) USING ERRCODE = 'ES001';
    END IF;
    next_seq := 0;
  END IF;
  IF NEW.seq IS DISTINCT FROM next_seq THEN
    RAISE EXCEPTION 'eventstore: seq % is not the next seq (%) of session %', NEW.seq, next_seq,
      quote_literal(NEW.session_id) USING ERRCODE = 'ES002';
  END IF;
  SELECT coalesce(max(e.position), 0) + 1 INTO next_position FROM events AS e;
  IF NEW.position IS NULL THEN
    NEW.position := next_position;
  ELSIF NEW.position <> next_position THEN
    RAISE EXCEPTION 'eventstore: position % is not the next position (%); leave it out', NEW.position,
      next_position USING ERRCODE = 'ES003';
  END IF;
  -- A key of the line itself (type, seq, ts), a non-string or repeated event_id: looked for
  -- only when a key could start with t, s or e (or an escape), as eventstore writes payloads.
  IF NEW.payload ~ '"[tse\\\\][ysev\\\\u]' THEN
    SELECT bool_or(key IN ('type', 'seq', 'ts')) AS line_key,
           count(*) FILTER (WHERE key = 'event_id') AS ids,
           bool_or(key = 'event_id' AND json_typeof(value) <> 'string') AS bad_id
      INTO bad FROM json_each(es_json(NEW.payload));
    IF bad.line_key OR bad.ids > 1 OR bad.bad_id THEN
      RAISE EXCEPTION 'eventstore: payload holds a key of the line itself (type, seq, ts), or an event_id that is not one string'
        USING ERRCODE = 'ES009';
    END IF;
  END IF;
  RETURN NEW;
END
$$""",
    "CREATE TRIGGER events_guard_insert BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION events_guard_insert()",
    # An append that does not know its session's head takes the lock first and then reads
    # it (two statements in a function: the read sees every commit made before the lock).
    # next_seq is NULL when the session is not stored; last_hash NULL when it has no events.
    f"""
CREATE FUNCTION es_lock_head(sid text, OUT next_seq bigint, OUT last_hash text) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({POSITION_LOCK});
  SELECT e.seq + 1, e.hash INTO next_seq, last_hash FROM events AS e
   WHERE e.session_id = sid ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL AND EXISTS (SELECT 1 FROM sessions WHERE id = sid) THEN
    next_seq := 0;
  END IF;
END
$$""",
    # Followers LISTEN on eventstore_events: one NOTIFY per inserting statement, delivered
    # at commit (PostgreSQL folds equal notifications of a transaction into one).
    """
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('eventstore_events', '');
  RETURN NULL;
END
$$""",
    "CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION events_notify()",
    """
CREATE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: events are append-only: % refused', TG_OP USING ERRCODE = 'ES004';
END
$$""",
    "CREATE TRIGGER events_guard_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION events_refuse_change()",
    "CREATE TRIGGER events_guard_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION events_refuse_change()",
    "CREATE TRIGGER events_guard_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT EXECUTE FUNCTION events_refuse_change()",
    """
CREATE FUNCTION sessions_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: sessions are append-only: % refused', TG_OP USING ERRCODE = 'ES005';
END
$$""",
    "CREATE TRIGGER sessions_guard_update BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION sessions_refuse_change()",
    "CREATE TRIGGER sessions_guard_delete BEFORE DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION sessions_refuse_change()",
    "CREATE TRIGGER sessions_guard_truncate BEFORE TRUNCATE ON sessions FOR EACH STATEMENT EXECUTE FUNCTION sessions_refuse_change()",
    # The projection: the same rules and the same text as SQLite's view (one JSON text per
    # message, built by concatenating the payload's values as stored, so strings and numbers
    # come out byte for byte). Each value is read once per row (OFFSET 0 keeps the LATERAL
    # subquery from being folded into the outer expressions, which would read it again).
    # tool_calls is kept when JavaScript finds it truthy and it is not an empty array: a
    # number is falsy when it is 0 or rounds to 0 as a double (below 2**-1075).
    f"""
CREATE VIEW messages AS
SELECT
  e.session_id,
  e.seq,
  CASE e.type WHEN 'user/message' THEN 'user'
              WHEN 'assistant/message' THEN 'assistant'
              ELSE 'tool' END AS role,
  CASE e.type
    WHEN 'user/message' THEN
      coalesce('{{"role":"user","content":' || f.content || '}}', '{{"role":"user"}}')
    WHEN 'assistant/message' THEN
      '{{"role":"assistant","content":' || coalesce(nullif(f.content, 'null'), '""')
      || CASE WHEN f.tool_calls IS NULL OR f.tool_calls IN ('null', 'false', '[]', '""') THEN ''
              WHEN left(f.tool_calls, 1) IN ('-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9')
                   AND abs(f.tool_calls::numeric) < 2.4703282292062328e-324 THEN ''
              ELSE ',"tool_calls":' || f.tool_calls END
      || '}}'
    ELSE
      '{{"role":"tool"' || coalesce(',"tool_call_id":' || f.tool_call_id, '')
      || coalesce(',"content":' || f.content, '') || '}}'
  END AS message
FROM events AS e
CROSS JOIN LATERAL (
  SELECT es_field(e.payload, 'content') AS content,
         CASE WHEN e.type = 'assistant/message' THEN es_field(e.payload, 'tool_calls') END AS tool_calls,
         CASE WHEN e.type = 'tool/result' THEN es_field(e.payload, 'tool_call_id') END AS tool_call_id
  OFFSET 0
) AS f
WHERE e.type IN {_PG_MSG}
""",
    f"""
CREATE VIEW tool_calls AS
SELECT
  c.session_id,
  c.call_seq,
  c.call ->> 'id' AS call_id,
  c.call -> 'function' ->> 'name' AS name,
  c.call -> 'function' ->> 'arguments' AS arguments,
  r.seq AS result_seq,
  es_json(r.payload) ->> 'content' AS result,
  round((r.ts - c.call_ts)::numeric, 6)::double precision AS latency_s
FROM (
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, j.value AS call,
         (SELECT n.seq FROM events AS n
           WHERE n.session_id = a.session_id AND n.seq > a.seq
             AND n.type IN {_PG_MSG} AND n.type <> 'tool/result'
           ORDER BY n.seq LIMIT 1) AS next_seq
  FROM events AS a,
       json_array_elements(CASE WHEN json_typeof(es_json(a.payload) -> 'tool_calls') = 'array'
                                THEN es_json(a.payload) -> 'tool_calls' ELSE '[]' END) AS j
  WHERE a.type IN {_PG_MSG} AND a.type = 'assistant/message'
) AS c
LEFT JOIN events AS r
  ON r.session_id = c.session_id
 AND r.seq = (SELECT x.seq FROM events AS x
               WHERE x.session_id = c.session_id AND x.seq > c.call_seq
                 AND x.seq < coalesce(c.next_seq, 9223372036854775807)
                 AND x.type IN {_PG_MSG} AND x.type = 'tool/result'
                 AND es_json(x.payload) ->> 'tool_call_id' = c.call ->> 'id'
               ORDER BY x.seq LIMIT 1)
""",
    f"""
CREATE VIEW turns AS
SELECT
  b.session_id,
  b.start_seq,
  b.end_seq,
  b.started_at,
  e.ts AS ended_at,
  round((e.ts - b.started_at)::numeric, 6)::double precision AS duration_s,
  (SELECT count(*) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type = 'step/start') AS steps,
  (SELECT coalesce(sum(json_array_length(es_json(x.payload) -> 'tool_calls')), 0) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type IN {_PG_MSG} AND x.type = 'assistant/message'
      AND json_typeof(es_json(x.payload) -> 'tool_calls') = 'array') AS tool_calls,
  b.complete
FROM (
  SELECT w.session_id, w.seq AS start_seq, w.ts AS started_at,
         CASE WHEN w.next_type = 'turn/end' THEN w.next_seq
              WHEN w.next_seq IS NOT NULL THEN w.next_seq - 1
              ELSE (SELECT max(m.seq) FROM events AS m WHERE m.session_id = w.session_id)
         END AS end_seq,
         coalesce(w.next_type = 'turn/end', false)::int AS complete
  FROM (
    SELECT session_id, seq, type, ts,
           lead(seq) OVER (PARTITION BY session_id ORDER BY seq) AS next_seq,
           lead(type) OVER (PARTITION BY session_id ORDER BY seq) AS next_type
    FROM events
    WHERE type IN ('turn/start', 'turn/end')
  ) AS w
  WHERE w.type = 'turn/start'
) AS b
JOIN events AS e ON e.session_id = b.session_id AND e.seq = b.end_seq
""",
    f"""
CREATE VIEW session_summary AS
SELECT
  s.id AS session_id,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id) AS events,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id AND x.type IN {_PG_MSG}) AS messages,
  (SELECT coalesce(sum(json_array_length(es_json(x.payload) -> 'tool_calls')), 0) FROM events AS x
    WHERE x.session_id = s.id AND x.type IN {_PG_MSG} AND x.type = 'assistant/message'
      AND json_typeof(es_json(x.payload) -> 'tool_calls') = 'array') AS tool_calls,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq LIMIT 1) AS first_ts,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) AS last_ts
FROM sessions AS s
""",
]


def upgrade() -> None:
    # On the driver's connection (in the migration's transaction): the PL/pgSQL bodies hold
    # '%' and ':', which a bound statement would take for parameters.
    conn = op.get_bind().connection.driver_connection
    for ddl in POSTGRESQL:
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the baseline is the first revision: there is nothing to go back to")
