"""The one in-place change the log accepts: a redaction, made through functions only the
``redactor`` role may call.

Revision ID: 0320
Revises: 0310
Create Date: 2026-12-07

A redaction (docs/redaction.md) appends a ``redaction`` event to a session and, in the same
transaction, replaces named fields of one earlier event's payload with the marker
``"[redacted: REASON]"`` and replaces its salt by the salts of the keys it keeps (or NULL).
Everything else stays refused.

* ``events_guard_update`` (the trigger) now runs ``es_redaction_guard()``: an UPDATE of
  ``events`` is accepted only when

  - no column but ``payload`` and ``salt`` changes, and ``salt`` becomes NULL or, where the
    event had one, the key salts it keeps: a JSON object (UTF-8), holding only entries of
    the old one when that was already such an object (their digests are checked by verify);
  - the event is not a ``redaction`` event (the proof of another redaction);
  - the session's last event is a ``redaction`` event inserted by this very transaction
    (its ``xmin`` is the transaction's id: no other transaction, role or setting can make
    that true), whose payload names this event by its stored hash (``hash``: the chain
    makes it one event's, of this session and seq) and holds a non-empty list of ``paths``
    and a ``reason`` (a string);
  - every path leads to a value of the old payload (object keys as strings, array indexes
    as non-negative integers; the first step a top-level key), and the new payload is the
    old one with each of those values replaced by the marker: the same top-level keys in
    the same order, every untouched top-level value byte for byte as stored, every touched
    one equal (as JSON) to the old value with the paths marked.

  Any other UPDATE is refused with ES004, for every role, the owner included (only
  switching the trigger off gets past it, which ``verify`` reports, and the hash chain
  names the event). DELETE and TRUNCATE stay refused as before.
* ``es_search_guard()`` (the search index's guard) also accepts an UPDATE of an
  ``events_search`` row whose event was changed by this transaction (a redaction): the row's
  session, type and vector are taken again from the log, so the index forgets the redacted
  words. Every other change of the index stays refused (ES012).
* ``es_redact_head(session)`` takes the position lock and returns the session's next seq and
  last hash (as ``es_lock_head``), and ``es_redact(...)`` appends the ``redaction`` event
  (its hash and salt computed by the client, as every append's) and updates the named event
  in one call. Both are ``SECURITY DEFINER`` (they run as the tables' owner, with
  ``search_path`` pinned), EXECUTE revoked from PUBLIC: ``eventstore roles`` grants it to
  the ``redactor`` role only, which holds no write privilege on any table.

SQLite: its own redaction rule (the triggers' one exception) is in the SQLite revision of
the same number.
"""
from alembic import op

revision = "0320"
down_revision = "0310"
branch_labels = None
depends_on = None

_SETTINGS = "SET search_path = pg_catalog, pg_temp"
_TYPES = "('user/message', 'assistant/message', 'tool/result', 'assistant/part', 'assistant/thinking')"
#: The signature of es_redact (the grants name it).
REDACT_ARGS = "text, bigint, text, text, bytea, bigint, double precision, text, bytea, text"


def postgresql(s: str) -> list[str]:
    """The DDL, with the schema's name ``s`` (quoted as an identifier) in every reference."""
    lock = f"LOCK TABLE {s}.events_position_lock IN EXCLUSIVE MODE"
    refuse = "USING ERRCODE = 'ES004'"
    return [
        rf"""
CREATE FUNCTION es_redaction_guard() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  r record;
  rp jsonb;
  want jsonb;
  node jsonb;
  path jsonb;
  step jsonb;
  steps text[];
  touched text[] := '{{}}';
  kept jsonb;
  salt_ok boolean := NEW.salt IS NULL OR NEW.salt IS NOT DISTINCT FROM OLD.salt;
BEGIN
  IF NOT salt_ok AND OLD.salt IS NOT NULL THEN  -- key salts: a JSON object, of the old ones' entries only
    BEGIN
      kept := convert_from(NEW.salt, 'UTF8')::jsonb;
      salt_ok := jsonb_typeof(kept) = 'object'
                 AND (length(OLD.salt) = 16 OR convert_from(OLD.salt, 'UTF8')::jsonb @> kept);
    EXCEPTION WHEN OTHERS THEN
      salt_ok := false;
    END;
  END IF;
  IF to_jsonb(NEW) - 'payload' - 'salt' - 'event_id' IS DISTINCT FROM to_jsonb(OLD) - 'payload' - 'salt' - 'event_id'
     OR NOT salt_ok OR OLD.type = 'redaction' THEN
    RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (a redaction changes only the payload and the salt, of an event other than a redaction)'
      {refuse};
  END IF;
  SELECT x.type, x.payload, x.xmin = pg_current_xact_id()::xid AS mine INTO r FROM {s}.events AS x
   WHERE x.session_id = OLD.session_id ORDER BY x.seq DESC LIMIT 1;
  IF r.type IS DISTINCT FROM 'redaction' OR NOT r.mine THEN
    RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (session %, seq %: no redaction event appended in this transaction)',
      quote_literal(OLD.session_id), OLD.seq {refuse};
  END IF;
  rp := {s}.es_json(r.payload)::jsonb;
  IF rp ->> 'hash' IS DISTINCT FROM OLD.hash
     OR jsonb_typeof(rp -> 'reason') IS DISTINCT FROM 'string' OR jsonb_typeof(rp -> 'paths') IS DISTINCT FROM 'array'
     OR jsonb_array_length(rp -> 'paths') = 0 THEN
    RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (session %, seq %: the last redaction event names another event, or has no paths or reason)',
      quote_literal(OLD.session_id), OLD.seq {refuse};
  END IF;
  want := {s}.es_json(OLD.payload)::jsonb;
  FOR path IN SELECT j.value FROM jsonb_array_elements(rp -> 'paths') AS j LOOP
    IF jsonb_typeof(path) IS DISTINCT FROM 'array' OR jsonb_array_length(path) = 0
       OR jsonb_typeof(path -> 0) IS DISTINCT FROM 'string' THEN
      RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (session %, seq %: a redaction path is a list starting with a top-level key)',
        quote_literal(OLD.session_id), OLD.seq {refuse};
    END IF;
    node := want;
    steps := '{{}}';
    FOR step IN SELECT j.value FROM jsonb_array_elements(path) AS j LOOP
      IF jsonb_typeof(node) = 'object' AND jsonb_typeof(step) = 'string' AND node ? (step #>> '{{}}') THEN
        node := node -> (step #>> '{{}}');
      ELSIF jsonb_typeof(node) = 'array' AND jsonb_typeof(step) = 'number' AND step::text ~ '^[0-9]{{1,9}}$'
            AND step::text::int < jsonb_array_length(node) THEN
        node := node -> step::text::int;
      ELSE
        RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (session %, seq %: redaction path % is not in the payload)',
          quote_literal(OLD.session_id), OLD.seq, path::text {refuse};
      END IF;
      steps := steps || (step #>> '{{}}');
    END LOOP;
    want := jsonb_set(want, steps, to_jsonb('[redacted: ' || (rp ->> 'reason') || ']'), false);
    touched := touched || (path ->> 0);
  END LOOP;
  IF EXISTS (
    SELECT 1
      FROM (SELECT j.key, j.value, j.n FROM json_each({s}.es_json(OLD.payload)) WITH ORDINALITY AS j(key, value, n)) AS o
      FULL JOIN (SELECT j.key, j.value, j.n FROM json_each({s}.es_json(NEW.payload)) WITH ORDINALITY AS j(key, value, n)) AS w
        ON w.n = o.n
     WHERE o.key IS DISTINCT FROM w.key
        OR (o.key <> ALL (touched) AND o.value::text IS DISTINCT FROM w.value::text)
        OR (o.key = ANY (touched) AND w.value::jsonb IS DISTINCT FROM want -> o.key)) THEN
    RAISE EXCEPTION 'eventstore: events are append-only: UPDATE refused (session %, seq %: the new payload is not the old one with the redaction''s paths marked)',
      quote_literal(OLD.session_id), OLD.seq {refuse};
  END IF;
  RETURN NEW;
END
$$""",
        "DROP TRIGGER events_guard_update ON events",
        "CREATE TRIGGER events_guard_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION es_redaction_guard()",
        # (revision 0280's guard, and the UPDATE of an index row whose event a redaction changed)
        f"""
CREATE OR REPLACE FUNCTION es_search_guard() RETURNS trigger LANGUAGE plpgsql {_SETTINGS} AS $$
DECLARE
  e record;
BEGIN
  IF TG_OP = 'INSERT' AND TG_TABLE_NAME = 'events_search' THEN
    SELECT x.session_id, x.type, x.payload INTO e FROM {s}.events AS x
     WHERE x.position = NEW.position AND x.type IN {_TYPES};
    IF NOT FOUND THEN
      RAISE EXCEPTION 'eventstore: events_search: position % is no searchable event', NEW.position USING ERRCODE = 'ES012';
    END IF;
    NEW.session_id := e.session_id;
    NEW.type := e.type;
    NEW.tsv := {s}.es_event_vector(e.type, e.payload);
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'events_search' THEN
    SELECT x.session_id, x.type, x.payload INTO e FROM {s}.events AS x
     WHERE x.position = OLD.position AND x.type IN {_TYPES} AND x.xmin = pg_current_xact_id()::xid;
    IF NOT FOUND OR NEW.position IS DISTINCT FROM OLD.position THEN
      RAISE EXCEPTION 'eventstore: events_search: UPDATE refused (a row is taken again from the log only by the redaction of its event)'
        USING ERRCODE = 'ES012';
    END IF;
    NEW.session_id := e.session_id;
    NEW.type := e.type;
    NEW.tsv := {s}.es_event_vector(e.type, e.payload);
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'events_search_state' THEN
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.indexed_through < OLD.indexed_through
       OR NEW.indexed_through > (SELECT coalesce(max(x.position), 0) FROM {s}.events AS x)
       OR EXISTS (SELECT 1 FROM {s}.events AS x
                   WHERE x.position > OLD.indexed_through AND x.position <= NEW.indexed_through
                     AND x.type IN {_TYPES}
                     AND NOT EXISTS (SELECT 1 FROM {s}.events_search AS i WHERE i.position = x.position)) THEN
      RAISE EXCEPTION 'eventstore: events_search_state: indexed_through may only move on to a position up to which every searchable event is indexed'
        USING ERRCODE = 'ES012';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'eventstore: %: % refused (derived from the log)', TG_TABLE_NAME, TG_OP USING ERRCODE = 'ES012';
END
$$""",
        f"""
CREATE FUNCTION es_redact_head(sid text, OUT next_seq bigint, OUT last_hash text) LANGUAGE plpgsql
SECURITY DEFINER {_SETTINGS} AS $$
BEGIN
  {lock};
  SELECT e.seq + 1, e.hash INTO next_seq, last_hash FROM {s}.events AS e
   WHERE e.session_id = sid ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL AND EXISTS (SELECT 1 FROM {s}.sessions AS x WHERE x.id = sid) THEN
    next_seq := 0;
  END IF;
END
$$""",
        # The UPDATE is checked by es_redaction_guard (the trigger), whoever runs it; this only
        # puts the two statements in one call and refreshes the event's index row.
        f"""
CREATE FUNCTION es_redact(sid text, target_seq bigint, old_hash text, new_payload text, new_salt bytea,
                          redaction_seq bigint, redaction_ts double precision, redaction_payload text, redaction_salt bytea,
                          redaction_hash text) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER {_SETTINGS} AS $$
DECLARE
  target record;
BEGIN
  {lock};
  SELECT e.position, e.hash INTO target FROM {s}.events AS e WHERE e.session_id = sid AND e.seq = target_seq;
  IF NOT FOUND OR target.hash IS DISTINCT FROM old_hash THEN
    RAISE EXCEPTION 'eventstore: session %, seq %: no such event with hash %', quote_literal(sid), target_seq, old_hash
      {refuse};
  END IF;
  INSERT INTO {s}.events (session_id, seq, type, ts, payload, hash, salt)
  VALUES (sid, redaction_seq, 'redaction', redaction_ts, redaction_payload, redaction_hash, redaction_salt);
  UPDATE {s}.events SET payload = new_payload, salt = new_salt WHERE session_id = sid AND seq = target_seq;
  UPDATE {s}.events_search SET tsv = tsv WHERE position = target.position;
  RETURN redaction_seq;
END
$$""",
        "REVOKE ALL ON FUNCTION es_redact_head(text) FROM PUBLIC",
        f"REVOKE ALL ON FUNCTION es_redact({REDACT_ARGS}) FROM PUBLIC",
    ]


def upgrade() -> None:
    conn = op.get_bind().connection.driver_connection  # as written (no bind parameters)
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    for ddl in postgresql(schema):
        conn.execute(ddl)


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
