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

# The tables as SQLAlchemy wrote them in the first release (less trailing spaces).
SQLITE_TABLES = {
    'sessions': r"""
CREATE TABLE sessions (
	id TEXT NOT NULL,
	created_at FLOAT NOT NULL,
	meta TEXT DEFAULT '{}' NOT NULL,
	PRIMARY KEY (id),
	CONSTRAINT sessions_id_not_empty CHECK (typeof(id) = 'text' AND id <> ''),
	CONSTRAINT sessions_meta_object CHECK (json_valid(meta) AND json_type(meta) = 'object')
)""",
    'events': r"""
CREATE TABLE events (
	position INTEGER NOT NULL,
	session_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	type TEXT NOT NULL,
	ts FLOAT NOT NULL,
	payload TEXT NOT NULL,
	hash TEXT NOT NULL,
	event_id TEXT GENERATED ALWAYS AS (payload ->> '$.event_id') VIRTUAL,
	PRIMARY KEY (position),
	CONSTRAINT events_key UNIQUE (session_id, seq),
	CONSTRAINT events_seq_integer CHECK (seq >= 0 AND CAST(seq AS INTEGER) = seq),
	CONSTRAINT events_type_text CHECK (type > '' AND type < x'' AND type <> 'session/meta'),
	CONSTRAINT events_ts_finite CHECK (ts BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308),
	CONSTRAINT events_payload_object CHECK (json_valid(payload) AND (payload >= '{' AND payload < '|' OR json_type(payload) = 'object')),
	CONSTRAINT events_hash_sha256 CHECK (length(hash) = 64),
	FOREIGN KEY(session_id) REFERENCES sessions (id)
)""",
}

SQLITE_INDEXES = {
    'events_event_id': r"""
CREATE UNIQUE INDEX events_event_id ON events (session_id, event_id) WHERE event_id IS NOT NULL""",
    'events_messages': r"""
CREATE INDEX events_messages ON events (session_id, seq) WHERE type = 'user/message' OR type = 'assistant/message' OR type = 'tool/result'""",
}

# The guards that make events and sessions append-only (names are stable: verify checks them).
SQLITE_TRIGGERS = {
    'events_guard_update': r"""
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'ES004: events are append-only: UPDATE refused'); END""",
    'events_guard_delete': r"""
CREATE TRIGGER events_guard_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'ES004: events are append-only: DELETE refused'); END""",
    'sessions_guard_update': r"""
CREATE TRIGGER sessions_guard_update BEFORE UPDATE ON sessions
BEGIN SELECT RAISE(ABORT, 'ES005: sessions are append-only: UPDATE refused'); END""",
    'sessions_guard_delete': r"""
CREATE TRIGGER sessions_guard_delete BEFORE DELETE ON sessions
BEGIN SELECT RAISE(ABORT, 'ES005: sessions are append-only: DELETE refused'); END""",
    'events_guard_insert': r"""
CREATE TRIGGER events_guard_insert BEFORE INSERT ON events
BEGIN
  SELECT RAISE(ABORT, 'ES001: unknown session')
    WHERE NEW.seq = 0 AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id);
  SELECT RAISE(ABORT, 'ES002: seq is not the next seq of its session')
    WHERE NEW.seq IS NOT coalesce((SELECT seq FROM events WHERE session_id = NEW.session_id
                                   ORDER BY seq DESC LIMIT 1) + 1, 0);
  SELECT RAISE(ABORT, 'ES003: position must be the next position, the largest stored one + 1 (give it explicitly)')
    WHERE NEW.position IS NOT coalesce((SELECT position FROM events ORDER BY position DESC LIMIT 1) + 1, 1);
  SELECT RAISE(ABORT, 'ES008: payload must be the text of a JSON object as JSON.stringify writes it')
    WHERE NOT (NEW.payload >= '{!' AND NEW.payload < '|') OR (NEW.payload > '{}' AND NEW.payload < '{~');
  SELECT RAISE(ABORT, 'ES009: payload holds a key of the line itself (type, seq, ts) or a non-string event_id, or spells event_id so that the event_id column does not see it (escaped, twice)')
    WHERE NEW.payload GLOB '*"[tse\][ysev\u]*'
      AND EXISTS (SELECT 1 FROM json_each(NEW.payload)
                  WHERE key IN ('type', 'seq', 'ts')
                     OR (key = 'event_id' AND (type <> 'text' OR value IS NOT NEW.event_id)));
  SELECT RAISE(ABORT, 'ES007: event_id is already stored in this session')
    WHERE NEW.event_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND event_id = NEW.event_id);
END""",
    'sessions_guard_insert': r"""
CREATE TRIGGER sessions_guard_insert BEFORE INSERT ON sessions
BEGIN
  SELECT RAISE(ABORT, 'ES006: session already exists')
    WHERE EXISTS (SELECT 1 FROM sessions WHERE id = NEW.id);
  SELECT RAISE(ABORT, 'ES005: a stored session has this rowid (sessions are append-only)')
    WHERE EXISTS (SELECT 1 FROM sessions WHERE rowid = NEW.rowid);
  SELECT RAISE(ABORT, 'ES010: created_at must be a number of seconds since the epoch')
    WHERE typeof(NEW.created_at) NOT IN ('real', 'integer');
END""",
    'sessions_guard_rowid': r"""
CREATE TRIGGER sessions_guard_rowid AFTER INSERT ON sessions
WHEN NEW.rowid < 1
BEGIN SELECT RAISE(ABORT, 'ES010: a session rowid must be positive (leave it out)'); END""",
}

# The projection (messages) and the audit views (docs/schema.md).
SQLITE_VIEWS = {
    'messages': r"""
CREATE VIEW messages AS
SELECT
  session_id,
  seq,
  CASE type WHEN 'user/message' THEN 'user'
            WHEN 'assistant/message' THEN 'assistant'
            ELSE 'tool' END AS role,
  CASE type
    WHEN 'user/message' THEN
      coalesce('{"role":"user","content":' || (payload -> '$.content') || '}', '{"role":"user"}')
    WHEN 'assistant/message' THEN
      '{"role":"assistant","content":' || coalesce(nullif(payload -> '$.content', 'null'), '""')
      || CASE json_type(payload, '$.tool_calls')
           WHEN 'array' THEN coalesce(',"tool_calls":' || nullif(payload -> '$.tool_calls', '[]'), '')
           WHEN 'object' THEN ',"tool_calls":' || (payload -> '$.tool_calls')
           WHEN 'true' THEN ',"tool_calls":true'
           WHEN 'text' THEN coalesce(',"tool_calls":' || nullif(payload -> '$.tool_calls', '""'), '')
           WHEN 'integer' THEN iif(payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (payload -> '$.tool_calls'))
           WHEN 'real' THEN iif(payload ->> '$.tool_calls' = 0, '', ',"tool_calls":' || (payload -> '$.tool_calls'))
           ELSE '' END
      || '}'
    ELSE
      '{"role":"tool"' || coalesce(',"tool_call_id":' || (payload -> '$.tool_call_id'), '')
      || coalesce(',"content":' || (payload -> '$.content'), '') || '}'
  END AS message
FROM events
WHERE (type = 'user/message' OR type = 'assistant/message' OR type = 'tool/result')""",
    'tool_calls': r"""
CREATE VIEW tool_calls AS
SELECT
  c.session_id,
  c.call_seq,
  c.call ->> '$.id' AS call_id,
  c.call ->> '$.function.name' AS name,
  c.call ->> '$.function.arguments' AS arguments,
  r.seq AS result_seq,
  r.payload ->> '$.content' AS result,
  round(r.ts - c.call_ts, 6) AS latency_s
FROM (
  SELECT a.session_id, a.seq AS call_seq, a.ts AS call_ts, j.value AS call,
         (SELECT n.seq FROM events AS n
           WHERE n.session_id = a.session_id AND n.seq > a.seq
             AND (n.type = 'user/message' OR n.type = 'assistant/message' OR n.type = 'tool/result') AND n.type <> 'tool/result'
           ORDER BY n.seq LIMIT 1) AS next_seq
  FROM events AS a, json_each(a.payload, '$.tool_calls') AS j
  WHERE (a.type = 'user/message' OR a.type = 'assistant/message' OR a.type = 'tool/result') AND a.type = 'assistant/message'
    AND json_type(a.payload, '$.tool_calls') = 'array'
) AS c
LEFT JOIN events AS r
  ON r.session_id = c.session_id
 AND r.seq = (SELECT x.seq FROM events AS x
               WHERE x.session_id = c.session_id AND x.seq > c.call_seq
                 AND x.seq < coalesce(c.next_seq, 9223372036854775807)
                 AND (x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result') AND x.type = 'tool/result'
                 AND x.payload ->> '$.tool_call_id' = c.call ->> '$.id'
               ORDER BY x.seq LIMIT 1)""",
    'turns': r"""
CREATE VIEW turns AS
SELECT
  b.session_id,
  b.start_seq,
  b.end_seq,
  b.started_at,
  e.ts AS ended_at,
  round(e.ts - b.started_at, 6) AS duration_s,
  (SELECT count(*) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND x.type = 'step/start') AS steps,
  (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE x.session_id = b.session_id AND x.seq BETWEEN b.start_seq AND b.end_seq
      AND (x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result') AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array') AS tool_calls,
  b.complete
FROM (
  SELECT w.session_id, w.seq AS start_seq, w.ts AS started_at,
         CASE WHEN w.next_type = 'turn/end' THEN w.next_seq
              WHEN w.next_seq IS NOT NULL THEN w.next_seq - 1
              ELSE (SELECT max(m.seq) FROM events AS m WHERE m.session_id = w.session_id)
         END AS end_seq,
         coalesce(w.next_type = 'turn/end', 0) AS complete
  FROM (
    SELECT session_id, seq, type, ts,
           lead(seq) OVER (PARTITION BY session_id ORDER BY seq) AS next_seq,
           lead(type) OVER (PARTITION BY session_id ORDER BY seq) AS next_type
    FROM events
    WHERE type IN ('turn/start', 'turn/end')
  ) AS w
  WHERE w.type = 'turn/start'
) AS b
JOIN events AS e ON e.session_id = b.session_id AND e.seq = b.end_seq""",
    'session_summary': r"""
CREATE VIEW session_summary AS
SELECT
  s.id AS session_id,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id) AS events,
  (SELECT count(*) FROM events AS x WHERE x.session_id = s.id AND (x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result')) AS messages,
  (SELECT coalesce(sum(json_array_length(x.payload, '$.tool_calls')), 0) FROM events AS x
    WHERE x.session_id = s.id AND (x.type = 'user/message' OR x.type = 'assistant/message' OR x.type = 'tool/result') AND x.type = 'assistant/message'
      AND json_type(x.payload, '$.tool_calls') = 'array') AS tool_calls,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq LIMIT 1) AS first_ts,
  (SELECT x.ts FROM events AS x WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) AS last_ts
FROM sessions AS s""",
}


def upgrade() -> None:
    bind = op.get_bind()
    for group in (SQLITE_TABLES, SQLITE_INDEXES, SQLITE_TRIGGERS, SQLITE_VIEWS):
        for ddl in group.values():
            bind.exec_driver_sql(ddl)  # as written: no bind parameters (op.execute reads ':true' as one)


def downgrade() -> None:
    raise NotImplementedError("the baseline is the first revision: there is nothing to go back to")
