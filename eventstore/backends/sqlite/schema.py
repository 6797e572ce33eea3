"""The current definitions of SQLite's append-only guards, which ``verify`` compares the
database's triggers with (the migrations install them; a test checks that a migrated
database holds exactly these). A revision that changes a trigger changes it here too."""

from __future__ import annotations

#: Triggers that make ``events`` and ``sessions`` append-only, and the guard of ``importing``,
#: by name (names are stable).
GUARDS = {
    # revisions 0320 and 0340: the one UPDATE accepted is a redaction's, which changes the payload
    # (docs/redaction.md)
    'events_guard_update': r"""
CREATE TRIGGER events_guard_update BEFORE UPDATE ON events
WHEN NOT coalesce((
  SELECT NEW.position IS OLD.position AND NEW.session_id IS OLD.session_id AND NEW.seq IS OLD.seq
     AND NEW.type IS OLD.type AND NEW.ts IS OLD.ts AND NEW.hash IS OLD.hash
     AND NEW.payload IS NOT OLD.payload
     AND CASE WHEN NEW.salt IS NULL THEN 1
              WHEN OLD.salt IS NULL OR NOT json_valid(CAST(NEW.salt AS TEXT)) THEN 0
              WHEN json_type(CAST(NEW.salt AS TEXT)) <> 'object' THEN 0
              WHEN length(OLD.salt) = 16 THEN 1
              WHEN NOT json_valid(CAST(OLD.salt AS TEXT)) THEN 0
              ELSE NOT EXISTS (SELECT 1 FROM json_each(CAST(NEW.salt AS TEXT)) AS n WHERE NOT EXISTS (
                     SELECT 1 FROM json_each(CAST(OLD.salt AS TEXT)) AS o WHERE o.key = n.key AND o.value = n.value))
         END
     AND OLD.type <> 'redaction'
     AND r.type = 'redaction' AND r.seq > OLD.seq
     AND json_type(r.payload, '$.event_seq') = 'integer' AND json_extract(r.payload, '$.event_seq') = OLD.seq
     AND json_extract(r.payload, '$.hash') IS OLD.hash
     AND json_type(r.payload, '$.reason') = 'text'
     AND (OLD.salt IS NULL OR json_type(r.payload, '$.digests') = 'object')
     AND json_type(r.payload, '$.paths') = 'array'
     AND json_array_length(r.payload, '$.paths') BETWEEN 1 AND 32
     AND NOT EXISTS (SELECT 1 FROM json_each(r.payload, '$.paths') AS p
                     WHERE p.type <> 'array' OR json_array_length(p.value) < 1
                        OR json_type(p.value, '$[0]') <> 'text'
                        OR EXISTS (SELECT 1 FROM json_each(p.value) AS e
                                   WHERE NOT (e.type = 'integer' AND e.atom >= 0
                                              OR e.type = 'text' AND instr(e.atom, '"') = 0)))
     AND NOT EXISTS (SELECT 1 FROM json_each(r.payload, '$.paths') AS p
                     WHERE json_type(OLD.payload, '$' || (SELECT group_concat(CASE WHEN e.type = 'integer'
                                THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '')
                                FROM json_each(p.value) AS e)) IS NULL)
     AND NEW.payload IS json_set(OLD.payload, coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[1]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[2]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[3]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[4]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[5]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[6]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[7]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[8]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[9]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[10]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[11]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[12]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[13]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[14]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[15]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[16]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[17]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[18]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[19]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[20]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[21]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[22]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[23]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[24]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[25]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[26]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[27]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[28]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[29]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[30]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']', coalesce(('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[31]') AS e)), ('$' || (SELECT group_concat(CASE WHEN e.type = 'integer' THEN '[' || e.atom || ']' ELSE '."' || e.atom || '"' END, '') FROM json_each(r.payload, '$.paths[0]') AS e))), '[redacted: ' || json_extract(r.payload, '$.reason') || ']')
  FROM events AS r WHERE r.session_id = OLD.session_id ORDER BY r.seq DESC LIMIT 1), 0)
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
    # revision 0230: one read of the last row proves the head of a batch's later events
    'events_guard_insert': r"""
CREATE TRIGGER events_guard_insert BEFORE INSERT ON events
BEGIN
  SELECT CASE
      WHEN NEW.seq = 0 AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id)
        THEN RAISE(ABORT, 'ES001: unknown session')
      WHEN NEW.seq IS NOT coalesce((SELECT seq FROM events WHERE session_id = NEW.session_id
                                    ORDER BY seq DESC LIMIT 1) + 1, 0)
        THEN RAISE(ABORT, 'ES002: seq is not the next seq of its session')
      WHEN NEW.position IS NOT coalesce((SELECT position FROM events ORDER BY position DESC LIMIT 1) + 1, 1)
        THEN RAISE(ABORT, 'ES003: position must be the next position, the largest stored one + 1 (give it explicitly)')
    END
    WHERE ((SELECT session_id, seq + 1, position + 1 FROM events ORDER BY position DESC LIMIT 1)
           = (NEW.session_id, NEW.seq, NEW.position)) IS NOT 1;
  SELECT CASE
      WHEN NOT (NEW.payload BETWEEN '{!' AND '{}' OR NEW.payload >= '{~' AND NEW.payload < '|')
        THEN RAISE(ABORT, 'ES008: payload must be the text of a JSON object as JSON.stringify writes it')
      WHEN NEW.payload GLOB '*"[tse\][ysev\u]*'
           AND EXISTS (SELECT 1 FROM json_each(NEW.payload)
                       WHERE key IN ('type', 'seq', 'ts')
                          OR (key = 'event_id' AND (type <> 'text' OR value IS NOT NEW.event_id)))
        THEN RAISE(ABORT, 'ES009: payload holds a key of the line itself (type, seq, ts) or a non-string event_id, or spells event_id so that the event_id column does not see it (escaped, twice)')
      WHEN NEW.event_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND event_id = NEW.event_id)
        THEN RAISE(ABORT, 'ES007: event_id is already stored in this session')
    END;
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
    # revision 0220: an importing row may hide only a session its import is creating
    'importing_guard_insert': r"""
CREATE TRIGGER importing_guard_insert BEFORE INSERT ON importing
WHEN EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id)
  OR NEW.first_position IS NOT (SELECT coalesce(max(position), 0) + 1 FROM events)
BEGIN
  SELECT RAISE(ABORT, 'ES011: importing: only an import creating a session (no events yet, first_position the next position) may hide it');
END""",
    # revision 0250: an UPDATE changes only the owner (a take-over), never which session is hidden
    'importing_guard_update': r"""
CREATE TRIGGER importing_guard_update BEFORE UPDATE ON importing
WHEN NEW.session_id IS NOT OLD.session_id OR NEW.first_position IS NOT OLD.first_position
BEGIN
  SELECT RAISE(ABORT, 'ES011: importing: only the owner of an unfinished import may change (a take-over)');
END""",
}
