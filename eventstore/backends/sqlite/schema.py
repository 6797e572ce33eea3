"""The current definitions of SQLite's append-only guards, which ``verify`` compares the
database's triggers with (the migrations install them; a test checks that a migrated
database holds exactly these). A revision that changes a trigger changes it here too."""

from __future__ import annotations

#: Triggers that make ``events`` and ``sessions`` append-only, and the guard of ``importing``,
#: by name (names are stable).
GUARDS = {
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
