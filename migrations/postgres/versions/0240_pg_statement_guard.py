"""PostgreSQL: a batch of events is checked once per statement, not with queries per row.

Revision ID: 0240
Revises: 0230
Create Date: 2026-12-02

Until now ``events_guard_insert`` ran three queries for every row (the position lock, the
session's last seq, the largest position) and its payload check, and the foreign key
``events_session_fkey`` ran a fourth (a ``FOR KEY SHARE`` lock of the sessions row): 70 %
of the server's time for a batch of 100 events (``EXPLAIN ANALYZE``: 2.6 ms of 4 ms).
Now:

* ``events_guard_insert`` still checks a row with those queries (ES001, ES002, ES003,
  ES009; the lock first), but only a row that does not continue the row checked or
  accepted just before it in the same transaction. What it accepted is kept in the
  transaction-local setting ``eventstore.next``: ``'<next position> <next seq> <session
  id>'``. The trigger's ``WHEN`` clause lets a row through without calling the function
  when its position, seq and session are exactly those and its payload cannot hold a
  reserved key (the test the function makes before it parses a payload: a key starting
  with ``ty``, ``ts``, ``se``, ``ev`` or an escape), and moves the setting on by one. So the
  first row of a transaction (a single append) is checked as before, and the other 99 of
  a batch cost a few expressions each. The setting rolls back with a rolled-back statement
  or savepoint, as the rows do.
* ``position`` defaults to the setting's position (NULL when it is not set: the function
  fills it in, as before).
* ``events_guard_check`` (AFTER INSERT, once per statement, over the statement's rows as a
  transition table) proves what the setting only suggests, so that a setting forged with
  ``set_config`` (or an explicit position or seq that happens to match one) can get a
  statement refused, never stored: after taking the position lock it checks that the
  statement's positions are exactly the n numbers following a stored position (or 1..n),
  that each session's seqs are exactly the numbers following a stored seq of that
  session (or 0..), and that every session exists (ES003, ES002, ES001). Together with the
  primary key and ``events_key`` (no row may take a stored number) that is the invariant
  the row checks kept: positions 1..N and seqs 0..n-1 with no gap. It also sends the
  followers' NOTIFY: ``events_notify`` (trigger and function) is dropped.
* ``events_session_fkey`` is dropped: ``events_guard_insert`` and ``events_guard_check``
  refuse an event of an unknown session (ES001), and sessions cannot be deleted
  (``sessions_guard_delete``, ``sessions_guard_truncate``); ``verify`` reports events
  whose session is missing.

SQLite: nothing changes.
"""
from alembic import op

revision = "0240"
down_revision = "0230"
branch_labels = None
depends_on = None

# pg_advisory_xact_lock key of the insert guard (the baseline's POSITION_LOCK).
POSITION_LOCK = 28555852263026292

POSTGRESQL = [
    "ALTER TABLE events DROP CONSTRAINT events_session_fkey",
    "ALTER TABLE events ALTER COLUMN position SET DEFAULT "
    "nullif(split_part(current_setting('eventstore.next', true), ' ', 1), '')::bigint",
    # The row check: the baseline's, the session's head and the largest position read in one
    # statement after the lock, and what it accepted written to the setting.
    rf"""
CREATE OR REPLACE FUNCTION events_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  head record;
  bad record;
BEGIN
  PERFORM pg_advisory_xact_lock({POSITION_LOCK});
  SELECT (SELECT e.seq + 1 FROM events AS e WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1) AS seq,
         (SELECT coalesce(max(e.position), 0) + 1 FROM events AS e) AS position
    INTO head;
  IF head.seq IS NULL THEN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id) THEN
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
    SELECT bool_or(key IN ('type', 'seq', 'ts')) AS line_key,
           count(*) FILTER (WHERE key = 'event_id') AS ids,
           bool_or(key = 'event_id' AND json_typeof(value) <> 'string') AS bad_id
      INTO bad FROM json_each(es_json(NEW.payload));
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
    "DROP TRIGGER events_guard_insert ON events",
    # The WHEN clause: true (call the function) unless the row continues the setting and its
    # payload cannot hold a reserved key; then it moves the setting on and is false
    # (set_config returns the new value, never NULL). Casts to text are written out:
    # `bigint || text` is a SQL function, which would be inlined again for every statement.
    r"""
CREATE TRIGGER events_guard_insert BEFORE INSERT ON events FOR EACH ROW
WHEN (CASE WHEN NEW.position::text || ' ' || NEW.seq::text || ' ' || NEW.session_id = current_setting('eventstore.next', true)
                AND NEW.payload !~ '"(\\|t[ys\\]|s[e\\]|e[v\\])'
           THEN set_config('eventstore.next', (NEW.position + 1)::text || ' ' || (NEW.seq + 1)::text || ' ' || NEW.session_id,
                           true) IS NULL
           ELSE true END)
EXECUTE FUNCTION events_guard_insert()""",
    # The statement check, and the followers' NOTIFY (events_notify's, folded in: one statement
    # trigger fewer). One query in the usual case: the statement's extent and the position of
    # the event before its first seq (the event before its first position, unless another
    # session appended in between); a first event of a session, another session between, or
    # rows of several sessions take one more query. Each query runs only where an IF needs
    # it (an IF condition holding a subquery is a whole query).
    rf"""
CREATE FUNCTION events_guard_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  a record;
BEGIN
  PERFORM pg_advisory_xact_lock({POSITION_LOCK});
  SELECT s.*, (SELECT e.position FROM events AS e WHERE e.session_id = s.s_lo AND e.seq = s.q_lo - 1) AS before
    INTO a
    FROM (SELECT count(*) AS n, min(session_id) AS s_lo, max(session_id) AS s_hi, min(seq) AS q_lo, max(seq) AS q_hi,
                 min(position) AS p_lo, max(position) AS p_hi FROM new_events) AS s;
  IF a.n = 0 THEN
    RETURN NULL;
  END IF;
  IF a.s_lo <> a.s_hi THEN
    IF EXISTS (SELECT 1 FROM new_events AS n WHERE NOT EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = n.session_id)) THEN
      RAISE EXCEPTION 'eventstore: an event of an unknown session' USING ERRCODE = 'ES001';
    END IF;
    IF EXISTS (SELECT 1 FROM (SELECT session_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi
                                FROM new_events GROUP BY session_id) AS g
                WHERE g.hi - g.lo + 1 <> g.n
                   OR (g.lo > 0 AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.session_id = g.session_id
                                                                          AND e.seq = g.lo - 1))) THEN
      RAISE EXCEPTION 'eventstore: the seqs of a session do not follow its last one densely' USING ERRCODE = 'ES002';
    END IF;
    a.before := NULL;
  ELSE
    IF a.q_lo = 0 THEN
      IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = a.s_lo) THEN
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
    IF NOT EXISTS (SELECT 1 FROM events WHERE position = a.p_lo - 1) THEN
      RAISE EXCEPTION 'eventstore: positions % to % do not follow the largest stored one; leave them out', a.p_lo,
        a.p_hi USING ERRCODE = 'ES003';
    END IF;
  END IF;
  PERFORM pg_notify('eventstore_events', '');
  RETURN NULL;
END
$$""",
    "CREATE TRIGGER events_guard_check AFTER INSERT ON events REFERENCING NEW TABLE AS new_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION events_guard_check()",
    "DROP TRIGGER events_notify ON events",
    "DROP FUNCTION events_notify()",
]


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    for ddl in POSTGRESQL:
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
