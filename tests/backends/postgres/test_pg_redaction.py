"""Redaction on PostgreSQL (revision 0320, docs/redaction-postgres.md): the one in-place change
the log accepts, made through SECURITY DEFINER functions that only the redactor role may
call, in one form that the trigger checks for every role; afterwards VACUUM FULL takes the
secret's bytes out of the table files. Attacks run as each role of the README's set-up
(tests/backends/postgres/test_pg_attacks.py's ``as_readme``) through plain psycopg."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_pg_attacks import refused, state
from test_postgres import owned_database

from eventstore import EventStore
from eventstore.backends.capabilities import Redactor
from eventstore.cli import cli
from eventstore.errors import AppendOnlyViolation, ConflictError, DatabaseError
from eventstore.log.codec import dumps
from eventstore.log.commit import commit_json, new_salts
from eventstore.search import catch_up, search

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pg_errors  # noqa: E402

SECRET = "sk-live-4f9Qz7WbX2mN8pLk3RtY6vHs"  # (a made-up key)
REASON = "secret: api key"
#: The redaction payload's key naming the redacted seq ("seq" itself is a key of the line,
#: which no payload may hold); the trigger names the event by its hash.
SEQ_KEY = "event_seq"
ARGS = "text, bigint, text, text, bytea, bigint, double precision, text, bytea, text"


@contextlib.contextmanager
def redactable(pg_server, superuser_roles: bool = False):
    """``(urls by role, tag)`` as test_pg_attacks.as_readme, and a redactor login
    ``red_TAG``; session 's' holds the secret in a tool result (seq 1) beside a message
    that mentions it in its content and tool call arguments (seq 2)."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        with EventStore.open(url) as store:
            s = store.create_session("s")
            s.append_many([("user/message", {"content": "print my key"}),
                           ("tool/result", {"tool_call_id": "c1", "content": f"OPENAI_API_KEY={SECRET}\nok"}),
                           ("assistant/message", {"content": f"your key is {SECRET}", "tool_calls": [
                               {"id": "c2", "type": "function",
                                "function": {"name": "sh", "arguments": json.dumps({"cmd": f"echo {SECRET}"})}}]}),
                           ("turn/end", {})])
        roles_url = pg_server.url(name) if superuser_roles else url
        r = CliRunner().invoke(cli, ["--db", roles_url, "roles", "--writer", f"w_{tag}", "--auditor", f"a_{tag}",
                                     "--redactor", f"r_{tag}"])
        assert r.exit_code == 0, r.output
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE agent_{tag} LOGIN IN ROLE w_{tag}")
            conn.execute(f"CREATE ROLE audit_{tag} LOGIN IN ROLE a_{tag}")
            conn.execute(f"CREATE ROLE red_{tag} LOGIN IN ROLE r_{tag}")
        yield {"owner": url, "writer": pg_server.url(name, f"agent_{tag}"),
               "auditor": pg_server.url(name, f"audit_{tag}"), "redactor": pg_server.url(name, f"red_{tag}"),
               "super": pg_server.url(name)}, tag


def _marked(payload: dict, paths: list[list], reason: str) -> dict:
    """``payload`` with the value at each path replaced by the marker (the design's form)."""
    out = json.loads(json.dumps(payload))
    for path in paths:
        node = out
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = f"[redacted: {reason}]"
    return out


def redaction_args(conn, sid: str, seq: int, paths: list[list], reason: str = REASON, *,
                   new_payload: dict | None = None, names: dict | None = None) -> tuple:
    """What ``Redactor.redact_event`` takes for a redaction of ``paths`` of event ``seq``, read
    through ``conn`` (the caller's side, as EventStore.redact computes it, without the
    digests and key salts of a salted event, which only verify reads): ``new_payload`` and
    ``names`` (keys of the redaction event's payload) override."""
    ts, payload, hash_ = conn.execute("SELECT ts, payload, hash FROM events WHERE session_id = %s AND seq = %s",
                                      (sid, seq)).fetchone()
    new = dumps(new_payload if new_payload is not None else _marked(json.loads(payload), paths, reason))
    rp = {SEQ_KEY: seq, "paths": paths, "reason": reason, "by": "tester", "hash": hash_, **(names or {})}
    salt = new_salts(1)[0]
    return sid, seq, hash_, new, None, ts + 1, dumps(rp), salt, commit_json(salt, rp)


def call_redact(conn, args: tuple) -> int:
    """Revision 0320's two functions, as PgRedactor calls them, in one transaction."""
    from eventstore.log.chain import chain_hash
    from eventstore.log.line import event_line

    sid, seq, old_hash, new, new_salt, ts, rp, salt, commit = args
    with conn.transaction():
        next_seq, last = conn.execute("SELECT next_seq, last_hash FROM es_redact_head(%s)", (sid,)).fetchone()
        h = chain_hash(last, event_line("redaction", next_seq, ts, commit))
        return conn.execute("SELECT es_redact(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                            (sid, seq, old_hash, new, new_salt, next_seq, ts, rp, salt, h)).fetchone()[0]


def events(url: str, sid: str = "s") -> list:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT seq, type, payload, hash, salt IS NULL FROM events WHERE session_id = %s "
                            "ORDER BY seq", (sid,)).fetchall()


def test_the_redactor_redacts_through_the_store(pg_server):
    """As the redactor: one call appends the redaction event (chained like any append) and
    marks the tool result's content; nothing else changes; the search index forgets the key;
    erase_old_versions says the owner must rewrite the tables (the redactor may not)."""
    with redactable(pg_server) as (url, tag):
        with EventStore.open(url["writer"]) as store:
            catch_up(store)
            assert sorted(h.seq for h in search(store, "sk-live-4f9Qz7WbX2mN8pLk3RtY6vHs")) == [1, 2]
        before = events(url["owner"])
        with EventStore.open(url["redactor"]) as store:
            red = store.capability(Redactor)
            with psycopg.connect(url["redactor"], autocommit=True) as conn:
                args = redaction_args(conn, "s", 1, [["content"]])
            assert red.redact_event(*args) == 4
            said = red.erase_old_versions()
            assert said is not None and f"role 'red_{tag}' may not" in said and "VACUUM (FULL, ANALYZE) events" in said
        after = events(url["owner"])
        assert after[:1] + after[2:4] == before[:1] + before[2:4]
        assert after[1] == (1, "tool/result", dumps({"tool_call_id": "c1", "content": f"[redacted: {REASON}]"}),
                            before[1][3], True)
        assert after[4][:2] == (4, "redaction") and json.loads(after[4][2])[SEQ_KEY] == 1 and not after[4][4]
        with EventStore.open(url["auditor"], readonly=True) as store:
            assert [h.seq for h in search(store, "sk-live-4f9Qz7WbX2mN8pLk3RtY6vHs")] == [2]
            assert [h.seq for h in search(store, "OPENAI_API_KEY")] == []
            assert [e.seq for e in store.session("s").events()] == [0, 1, 2, 3, 4]
        with EventStore.open(url["writer"]) as store:  # the writer's cached heads do not matter
            assert store.session("s").append("x", {}).seq == 5
        with EventStore.open(url["redactor"]) as store:  # the record names the login role, beside the OS user
            done = store.redact("s", 2, ["content"], reason="key")
            assert done.by.startswith(f"database role red_{tag} (OS user ")


def test_redact_event_refusals_are_the_stores_errors(pg_server):
    """A changed or missing event is a ConflictError naming session and seq; a role without
    the redactor's EXECUTE is told to get it; a form the trigger refuses is an
    AppendOnlyViolation; nothing is written by any of them."""
    with redactable(pg_server) as (url, tag):
        before = state(url["owner"])
        with psycopg.connect(url["owner"], autocommit=True) as conn:
            good = redaction_args(conn, "s", 1, [["content"]])
        with EventStore.open(url["redactor"]) as store:
            red = store.capability(Redactor)
            with pytest.raises(ConflictError, match=r"^session 's', seq 1: its stored hash is "):
                red.redact_event(good[0], good[1], "0" * 64, *good[3:])
            with pytest.raises(ConflictError, match=r"^session 's', seq 9: no such event$"):
                red.redact_event("s", 9, *good[2:])
            with pytest.raises(AppendOnlyViolation, match="ES004: .*not the old one with the redaction's paths marked"):
                red.redact_event(*good[:3], dumps({"tool_call_id": "c2", "content": "[redacted: secret: api key]"}),
                                 *good[4:])
        for role in ("writer", "auditor"):
            with EventStore.open(url[role]) as store:
                with pytest.raises(DatabaseError, match=f"role '(agent|audit)_{tag}' may not redact: grant it "
                                                        "eventstore_redactor"):
                    store.capability(Redactor).redact_event(*good)
        assert state(url["owner"]) == before


def _bad_redactions(conn) -> list[tuple[str, tuple]]:
    """Redactions in every form but the one allowed, each refused by the trigger."""
    out = []
    a = redaction_args(conn, "s", 2, [["content"]])
    payload = json.loads(conn.execute("SELECT payload FROM events WHERE session_id = 's' AND seq = 2").fetchone()[0])
    marked = _marked(payload, [["content"]], REASON)
    # another top-level value changes too
    out.append(("another key", redaction_args(conn, "s", 2, [["content"]],
                                              new_payload={**marked, "tool_calls": []})))
    # a key dropped, a key added, keys reordered
    out.append(("a key dropped", redaction_args(conn, "s", 2, [["content"]], new_payload={"content": marked["content"]})))
    out.append(("a key added", redaction_args(conn, "s", 2, [["content"]], new_payload={**marked, "x": 1})))
    out.append(("keys reordered", redaction_args(conn, "s", 2, [["content"]],
                                                 new_payload={"tool_calls": marked["tool_calls"],
                                                              "content": marked["content"]})))
    # another marker (reason), or a value that is no marker at all
    out.append(("another reason", redaction_args(conn, "s", 2, [["content"]],
                                                 new_payload={**marked, "content": "[redacted: other]"})))
    out.append(("a new value", redaction_args(conn, "s", 2, [["content"]], new_payload={**marked, "content": "hi"})))
    # a deep path: a sibling inside the touched value changes too
    deep = [["tool_calls", 0, "function", "arguments"]]
    d = _marked(payload, deep, REASON)
    d["tool_calls"][0]["function"]["name"] = "rm"
    out.append(("a sibling of a deep path", redaction_args(conn, "s", 2, deep, new_payload=d)))
    # paths that are not in the payload, or not in the design's shape
    out.append(("a missing key", redaction_args(conn, "s", 2, [["nope"]], new_payload=payload)))
    out.append(("an index past the end", redaction_args(conn, "s", 2, [["tool_calls", 5]], new_payload=payload)))
    out.append(("a string index", redaction_args(conn, "s", 2, [["tool_calls", "0", "id"]],
                                                 new_payload=_marked(payload, [["tool_calls", 0, "id"]], REASON))))
    out.append(("a path not a list", redaction_args(conn, "s", 2, ["content"], new_payload=marked)))
    out.append(("no paths", redaction_args(conn, "s", 2, [], new_payload=payload)))
    out.append(("no reason", redaction_args(conn, "s", 2, [["content"]], names={"reason": 5})))
    # the redaction event names another event, or another hash
    hash1 = conn.execute("SELECT hash FROM events WHERE session_id = 's' AND seq = 1").fetchone()[0]
    out.append(("another event's hash", redaction_args(conn, "s", 2, [["content"]], names={"hash": hash1})))
    out.append(("another hash", redaction_args(conn, "s", 2, [["content"]], names={"hash": "0" * 64})))
    assert a[3] == dumps(marked)
    return out


def test_the_trigger_refuses_every_other_form(pg_server):
    """The redactor (through es_redact) and the owner (its own INSERT of a redaction event
    and UPDATE, in one transaction) get every other form refused with ES004: nothing
    changes. The allowed form then goes through for both."""
    with redactable(pg_server) as (url, tag):
        before = state(url["owner"])
        for role in ("redactor", "owner"):
            with psycopg.connect(url[role], autocommit=True) as conn:
                for what, args in _bad_redactions(conn):
                    with pytest.raises(psycopg.DatabaseError) as e:
                        call_redact(conn, args)
                    assert e.value.sqlstate == "ES004", (role, what, e.value)
        assert state(url["owner"]) == before
        with psycopg.connect(url["redactor"], autocommit=True) as conn:
            assert call_redact(conn, redaction_args(conn, "s", 2, [["tool_calls", 0, "function", "arguments"]])) == 4
        with psycopg.connect(url["owner"], autocommit=True) as conn:
            assert call_redact(conn, redaction_args(conn, "s", 2, [["content"]])) == 5
        payload = json.loads(events(url["owner"])[2][2])
        assert payload["content"] == f"[redacted: {REASON}]"
        assert payload["tool_calls"][0]["function"] == {"name": "sh", "arguments": f"[redacted: {REASON}]"}
        before = state(url["owner"])
        for role in ("redactor", "owner"):  # a redaction event is the proof of one: never redacted itself
            with psycopg.connect(url[role], autocommit=True) as conn:
                with pytest.raises(psycopg.DatabaseError) as e:
                    call_redact(conn, redaction_args(conn, "s", 4, [["reason"]]))
                assert e.value.sqlstate == "ES004", (role, e.value)
        assert state(url["owner"]) == before


def test_an_update_without_its_redaction_event_fails_for_every_role(pg_server):
    """An UPDATE in the redaction's form is refused unless the session's last event is a
    redaction naming it that this transaction inserted: not one committed before, not one of
    another session, not one followed by another event, not one in another transaction;
    the owner too; a writer, auditor or redactor has no UPDATE at all (42501)."""
    with redactable(pg_server) as (url, tag):
        with psycopg.connect(url["owner"], autocommit=True) as conn:
            args = redaction_args(conn, "s", 1, [["content"]])
        new = args[3]
        update = "UPDATE events SET payload = %s, salt = NULL WHERE session_id = 's' AND seq = 1"
        for role in ("writer", "auditor", "redactor"):
            with psycopg.connect(url[role], autocommit=True) as conn:
                with pytest.raises(pg_errors.InsufficientPrivilege):
                    conn.execute(update, (new,))
                for sql in ("DELETE FROM events", "TRUNCATE events", "UPDATE events SET ts = 0",
                            "UPDATE events SET salt = NULL", "DELETE FROM sessions", "UPDATE sessions SET meta = '{}'",
                            "INSERT INTO events_search_state VALUES (2, 0)",
                            "UPDATE events_search SET tsv = to_tsvector('simple', 'x')"):
                    with pytest.raises(pg_errors.InsufficientPrivilege):
                        conn.execute(sql)
        from eventstore.log.chain import chain_hash
        from eventstore.log.line import event_line

        with psycopg.connect(url["owner"], autocommit=True) as conn:
            def insert(type_: str, payload: str, sid: str = "s") -> None:
                """The owner's own INSERT of the next event of ``sid``, chained."""
                seq, prev = conn.execute("SELECT coalesce(max(seq) + 1, 0), (array_agg(hash ORDER BY seq DESC))[1] "
                                         "FROM events WHERE session_id = %s", (sid,)).fetchone()
                h = chain_hash(prev or "0" * 64, event_line(type_, seq, 9.0, payload))
                conn.execute("INSERT INTO events (session_id, seq, type, ts, payload, hash) VALUES (%s, %s, %s, 9, "
                             "%s, %s)", (sid, seq, type_, payload, h))

            def refused(*steps) -> psycopg.DatabaseError:
                """Run ``steps`` (callables) in one transaction; the last must be refused."""
                with pytest.raises(psycopg.DatabaseError) as e, conn.transaction():
                    for step in steps:
                        step()
                return e.value

            def update() -> None:
                conn.execute("UPDATE events SET payload = %s, salt = NULL WHERE session_id = 's' AND seq = 1", (new,))

            def redaction_event() -> None:
                insert("redaction", args[6])

            refusals = {
                "no redaction event": refused(update),
                "one followed by another event": refused(redaction_event, lambda: insert("x", "{}"), update),
                "one inserted in a savepoint": refused(lambda: conn.execute("SAVEPOINT sp"), redaction_event,
                                                       lambda: conn.execute("RELEASE SAVEPOINT sp"), update),
                "the form and another column": refused(redaction_event, lambda: conn.execute(
                    "UPDATE events SET payload = %s, salt = NULL, ts = 0 WHERE session_id = 's' AND seq = 1", (new,))),
                "the salt kept": refused(redaction_event, lambda: conn.execute(
                    "UPDATE events SET payload = %s, salt = '\\x00' WHERE session_id = 's' AND seq = 1", (new,))),
            }
            conn.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES ('o', 1, '{}', %s)", ("0" * 64,))
            refusals["one of another session"] = refused(lambda: insert("redaction", args[6], "o"), update)
            redaction_event()  # committed on its own, in the session's last place
            refusals["one committed before"] = refused(update)
            assert {k: r.sqlstate for k, r in refusals.items()} == dict.fromkeys(refusals, "ES004"), refusals
            # the owner may still do it in the form (its own INSERT and UPDATE)
            with conn.transaction():
                redaction_event()
                update()
            assert json.loads(events(url["owner"])[1][2])["content"] == f"[redacted: {REASON}]"


def test_only_the_redactor_may_execute_the_functions(pg_server):
    """EXECUTE of es_redact and es_redact_head: not PUBLIC's, not the writer's or the
    auditor's; the redactor holds no write privilege on any table and cannot take the
    position lock itself; a SECURITY DEFINER function of its own runs as itself."""
    with redactable(pg_server) as (url, tag):
        before = state(url["owner"])
        for role in ("writer", "auditor"):
            with psycopg.connect(url[role], autocommit=True) as conn:
                for sql in ("SELECT es_redact_head('s')",
                            "SELECT es_redact('s', 1, 'h', '{}', NULL, 4, 1, '{}', NULL, repeat('0', 64))"):
                    with pytest.raises(pg_errors.InsufficientPrivilege):
                        conn.execute(sql)
        with psycopg.connect(url["super"], autocommit=True) as conn:
            grants = dict(conn.execute(
                "SELECT p.proname, (SELECT string_agg(CASE a.grantee WHEN 0 THEN 'PUBLIC' "
                "ELSE pg_get_userbyid(a.grantee) END, ',' ORDER BY 1) FROM aclexplode(p.proacl) AS a "
                "WHERE a.privilege_type = 'EXECUTE') FROM pg_proc AS p WHERE p.proname IN ('es_redact', 'es_redact_head')"
            ).fetchall())
            assert grants == {"es_redact": f"owner_{tag},r_{tag}", "es_redact_head": f"owner_{tag},r_{tag}"}
            privileges = conn.execute(
                "SELECT DISTINCT a.privilege_type FROM pg_class AS c, aclexplode(c.relacl) AS a "
                "WHERE c.relnamespace = 'public'::regnamespace AND a.grantee = %s::regrole", (f"r_{tag}",)).fetchall()
            assert privileges == [("SELECT",)]
        with psycopg.connect(url["redactor"], autocommit=True) as conn:
            for sql in ("LOCK TABLE events_position_lock IN EXCLUSIVE MODE", "SELECT es_lock_head('s')",
                        "SELECT es_try_position_lock()",
                        "INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                        "VALUES ('s', 4, 'redaction', 1, '{}', repeat('0', 64))",
                        "INSERT INTO events_search VALUES (1, 's', 'x', ''::tsvector)",
                        "UPDATE importing SET owner = 'x'", "CREATE TEMP TABLE events (a int)",
                        "CREATE TABLE public.mine (a int)",
                        f"CREATE FUNCTION public.es_redact({ARGS}) RETURNS bigint LANGUAGE sql AS 'SELECT 1'",
                        "ALTER TABLE events DISABLE TRIGGER events_guard_update"):
                with pytest.raises(pg_errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(sql)
            conn.execute(f"GRANT EXECUTE ON FUNCTION es_redact({ARGS}) TO agent_{tag}")  # (a warning: no grant option)
        with psycopg.connect(url["writer"], autocommit=True) as conn:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("SELECT es_redact('s', 1, 'h', '{}', NULL, 4, 1, '{}', NULL, repeat('0', 64))")
        assert state(url["owner"]) == before


def test_verify_finds_the_set_up_with_a_redactor_as_migrations_and_roles_make_it(pg_server):
    """`eventstore roles` with its redactor is the schema verify expects (grants on the
    functions included); a grant of EXECUTE to the writer is reported."""
    with redactable(pg_server) as (url, tag):
        with EventStore.open(url["owner"]) as store:
            from eventstore.backends.capabilities import AuditReads

            assert store.capability(AuditReads).integrity_findings() == []
        with psycopg.connect(url["owner"], autocommit=True) as conn:
            conn.execute(f"GRANT EXECUTE ON FUNCTION es_redact({ARGS}) TO w_{tag}")
        with EventStore.open(url["owner"]) as store:
            from eventstore.backends.capabilities import AuditReads

            found = store.capability(AuditReads).integrity_findings()
        assert any("es_redact(" in m and f"w_{tag}" in m for _, m in found), found


def _files(conn, datadir: Path, *tables: str) -> list[Path]:
    """The relation files (every segment) of ``tables`` and of their TOAST tables."""
    out = []
    for table in tables:
        for (rel,) in conn.execute("SELECT pg_relation_filepath(c.oid) FROM pg_class AS c WHERE c.oid = %s::regclass "
                                   "UNION ALL SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class AS c "
                                   "WHERE c.oid = %s::regclass AND c.reltoastrelid <> 0", (table, table)).fetchall():
            out += sorted(datadir.glob(rel + "*"))
    return out


def test_after_erasure_the_secret_is_in_no_table_file(pg_server):
    """The owner redacts every place the key is (short tool results and messages, a long
    result stored out of line in TOAST, the last event of the heap) and erase_old_versions
    rewrites the tables: after a CHECKPOINT the key's bytes are in none of the files of
    events, events_search, their TOAST tables or pg_statistic. A plain VACUUM would not do:
    it leaves the old row's bytes in the page's free space (the last event's here)."""
    import base64
    import os

    with redactable(pg_server) as (url, tag):
        with EventStore.open(url["writer"]) as store:
            noise = base64.b64encode(os.urandom(6000)).decode()  # (incompressible: stored as is, out of line)
            store.session("s").append_many([
                ("tool/result", {"tool_call_id": "c3", "content": noise + " " + SECRET + " tail"}),  # seq 4
                ("tool/result", {"tool_call_id": "c4", "content": (SECRET + " ") * 55})])  # seq 5, inline, last
            catch_up(store)
        datadir = Path(pg_server.folder) / "data"
        tables = ("events", "events_search", "pg_catalog.pg_statistic")
        with psycopg.connect(url["super"], autocommit=True) as conn:
            conn.execute("ANALYZE events")
            conn.execute("CHECKPOINT")
            toast_name = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class "
                                      "WHERE oid = 'events'::regclass").fetchone()[0]
            heap, toast = _files(conn, datadir, "events")[0], _files(conn, datadir, toast_name)[0]
            assert SECRET.encode() in heap.read_bytes() and SECRET.encode() in toast.read_bytes()
        with EventStore.open(url["owner"]) as store:
            red = store.capability(Redactor)
            with psycopg.connect(url["owner"], autocommit=True) as conn:
                for seq in (5, 4):  # (the old version of 5 is at the end of the heap's pages)
                    red.redact_event(*redaction_args(conn, "s", seq, [["content"]]))
            with psycopg.connect(url["super"], autocommit=True) as conn:
                conn.execute("VACUUM events")
                conn.execute("CHECKPOINT")
                assert conn.execute("SELECT count(*) FROM events WHERE payload LIKE %s AND seq > 2",
                                    (f"%{SECRET}%",)).fetchone() == (0,)
                assert SECRET.encode() in heap.read_bytes(), ("a plain VACUUM was expected to leave the old row's "
                                                              "bytes in the page's free space")
            with psycopg.connect(url["owner"], autocommit=True) as conn:
                for seq, paths in ((1, [["content"]]), (2, [["content"], ["tool_calls", 0, "function", "arguments"]])):
                    red.redact_event(*redaction_args(conn, "s", seq, paths))
            assert red.erase_old_versions() is None
        with psycopg.connect(url["super"], autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            files = _files(conn, datadir, *tables)
            assert len(files) >= 5 and heap not in files
            assert [f for f in files if SECRET.encode() in f.read_bytes()] == []
            assert not heap.exists() or SECRET.encode() not in heap.read_bytes()  # (truncated at the rewrite)


def _common_lexemes(conn) -> set[str]:
    """The most common words of the search index's vectors, as pg_stats shows them."""
    rows = conn.execute("SELECT most_common_elems::text::text[] FROM pg_stats "
                        "WHERE tablename = 'events_search' AND attname = 'tsv'").fetchall()
    return {w for (elems,) in rows for w in elems or ()}


def test_after_erasure_the_secret_is_not_in_the_search_index_statistics(pg_server):
    """ANALYZE of the search index (autovacuum's, or a big catch-up's) keeps its most common
    words in pg_statistic: the key's among them. erase_old_versions takes the index's
    statistics again, so after it the redacted key's word is in neither pg_stats nor the
    statistics table's file."""
    word = SECRET.split("-")[-1].lower()  # (the index's words are lower-cased, split at "-")
    with redactable(pg_server) as (url, _tag):
        with EventStore.open(url["writer"]) as store:
            catch_up(store)
        with psycopg.connect(url["super"], autocommit=True) as conn:
            conn.execute("ANALYZE events_search")
            assert word in _common_lexemes(conn)
        with EventStore.open(url["owner"]) as store:
            red = store.capability(Redactor)
            with psycopg.connect(url["owner"], autocommit=True) as conn:
                for seq, paths in ((1, [["content"]]), (2, [["content"], ["tool_calls", 0, "function", "arguments"]])):
                    red.redact_event(*redaction_args(conn, "s", seq, paths))
            assert red.erase_old_versions() is None
        with psycopg.connect(url["super"], autocommit=True) as conn:
            assert word not in _common_lexemes(conn)
            conn.execute("CHECKPOINT")
            files = _files(conn, Path(pg_server.folder) / "data", "pg_catalog.pg_statistic")
            assert files and [f for f in files if word.encode() in f.read_bytes()] == []


def test_erasure_that_cannot_take_the_lock_says_what_to_run(pg_server):
    """A reader that holds the log (a long transaction) keeps VACUUM FULL from its lock:
    erase_old_versions waits busy_timeout and says what remains and the command to run
    later; the redaction itself is committed."""
    with redactable(pg_server) as (url, tag):
        with psycopg.connect(url["auditor"]) as reader:
            reader.execute("SELECT count(*) FROM events").fetchone()  # (its transaction stays open)
            with EventStore.open(url["owner"], busy_timeout=0.3) as store:
                red = store.capability(Redactor)
                with psycopg.connect(url["owner"], autocommit=True) as conn:
                    red.redact_event(*redaction_args(conn, "s", 1, [["content"]]))
                said = red.erase_old_versions()
            reader.rollback()
        assert said is not None and "VACUUM FULL waited 0.3 s" in said and "VACUUM (FULL, ANALYZE) events" in said
        assert json.loads(events(url["owner"])[1][2])["content"] == f"[redacted: {REASON}]"


def test_roles_refuses_a_redactor_that_would_give_or_take_more(pg_server):
    """--redactor naming the writer or auditor, a writer or auditor that is a member of the
    redactor (it could redact), or a redactor that is a member of the writer (it could
    append) is refused before any grant."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        with pg_server.connect() as conn:
            conn.execute(f"CREATE ROLE red_{tag}")
            conn.execute(f"CREATE ROLE wkid_{tag} IN ROLE red_{tag}")
            conn.execute(f"CREATE ROLE wr_{tag}")
            conn.execute(f"CREATE ROLE rkid_{tag} IN ROLE wr_{tag}")
        cases = [([f"w_{tag}", f"a_{tag}", f"w_{tag}"], f"the redactor and writer roles must differ (both are 'w_{tag}')"),
                 ([f"w_{tag}", f"a_{tag}", f"a_{tag}"], "the redactor and auditor roles must differ"),
                 ([f"wkid_{tag}", f"a_{tag}", f"red_{tag}"], f"role 'wkid_{tag}' is a member of the redactor role "
                                                             f"'red_{tag}': as writer it would keep the redactor's "
                                                             "EXECUTE of es_redact"),
                 ([f"w_{tag}", f"wkid_{tag}", f"red_{tag}"], f"role 'wkid_{tag}' is a member of the redactor role"),
                 ([f"wr_{tag}", f"a_{tag}", f"rkid_{tag}"], f"role 'rkid_{tag}' is a member of the writer role "
                                                            f"'wr_{tag}': as redactor it would keep the writer's INSERT"),
                 ([f"w_{tag}", f"a_{tag}", owner], f"role {owner!r} owns the tables")]
        for (writer, auditor, redactor), said in cases:
            r = CliRunner().invoke(cli, ["--db", url, "roles", "--writer", writer, "--auditor", auditor,
                                         "--redactor", redactor])
            assert r.exit_code == 1 and r.stderr.startswith(f"error: {said}"), r.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s)",
                                (f"w_{tag}", f"a_{tag}")).fetchone() == (0,)
        r = CliRunner().invoke(cli, ["--db", url, "roles", "--writer", f"w_{tag}", "--auditor", f"a_{tag}",
                                     "--redactor", f"red_{tag}", "--print"])
        assert r.exit_code == 0 and 'GRANT EXECUTE ON FUNCTION "public".es_redact_head(text), "public".es_redact(' \
            in r.output and f'TO "red_{tag}";' in r.output, r.output


def test_a_database_made_by_main_upgrades_and_its_legacy_events_redact(pg_server, pg_url):
    """The pg_dump an earlier eventstore wrote (revision 0290) opens, upgrading in place to
    0370: its events are unsalted (legacy), and one of them redacts through the backend as
    any other (the redaction event's "hash" binds it); the trigger refuses another form."""
    import subprocess

    from conftest import DATA

    restore = subprocess.run([str(pg_server.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg_url,
                              "-f", str(DATA / "schema-0290.pg.sql")], capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    with EventStore.open(pg_url) as store:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0370",)
            assert conn.execute("SELECT count(*) FROM events WHERE salt IS NOT NULL").fetchone() == (0,)
            sid, seq, payload = conn.execute(
                "SELECT session_id, seq, payload FROM events WHERE type = 'user/message' ORDER BY position "
                "LIMIT 1").fetchone()
            rows = conn.execute("SELECT seq, payload, hash FROM events WHERE session_id = %s ORDER BY seq",
                                (sid,)).fetchall()
            bad = redaction_args(conn, sid, seq, [["content"]], new_payload={**json.loads(payload), "content": "x"})
            with pytest.raises(psycopg.DatabaseError) as e:
                call_redact(conn, bad)
            assert e.value.sqlstate == "ES004"
            args = redaction_args(conn, sid, seq, [["content"]])
        red = store.capability(Redactor)
        assert red.redact_event(*args) == len(rows)
        assert red.erase_old_versions() is None  # (the superuser owns the tables here)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            after = conn.execute("SELECT seq, payload, hash FROM events WHERE session_id = %s ORDER BY seq",
                                 (sid,)).fetchall()
    assert [r for r in after if r[0] != seq][:-1] == [r for r in rows if r[0] != seq]
    assert json.loads(after[seq][1])["content"] == f"[redacted: {REASON}]" and after[seq][2] == rows[seq][2]


#: Statements refused before revision 0320 for every role (the owner by the guards, the
#: others by privileges too), which must stay refused with a redactor in the set-up.
REFUSED_BEFORE = [
    "UPDATE events SET ts = 0", "UPDATE events SET payload = '{}'", "UPDATE events SET hash = repeat('1', 64)",
    "UPDATE events SET salt = NULL", "UPDATE events SET salt = '\\x00'::bytea", "UPDATE events SET seq = seq + 10",
    "UPDATE events SET payload = payload WHERE seq = 1", "DELETE FROM events", "DELETE FROM events WHERE seq = 3",
    "TRUNCATE events", "UPDATE sessions SET meta = '{}'", "DELETE FROM sessions", "TRUNCATE sessions, importing",
    "TRUNCATE importing",
    "INSERT INTO importing VALUES ('s', 5, 'x', 0)",
    "UPDATE events_search SET tsv = to_tsvector('simple', 'evil')", "UPDATE events_search SET tsv = tsv",
    "DELETE FROM events_search", "TRUNCATE events_search",
    "INSERT INTO events_search VALUES (4, 's', 'user/message', to_tsvector('simple', 'evil'))",
    "UPDATE events_search_state SET indexed_through = 1000", "DELETE FROM events_search_state",
    "INSERT INTO events_position_lock DEFAULT VALUES", "TRUNCATE events_position_lock",
    # inserts that would gap, move far or hide (as test_pg_attacks.BAD_INSERTS, past this session's head)
    *(f"INSERT INTO events ({cols}session_id, seq, type, ts, payload, hash) VALUES ({vals}, 'x', 1, '{{}}', "
      f"repeat('0', 64))" for cols, vals in [("", "'s', 9"), ("position, ", "9223372036854775806, 's', 5"),
                                             ("position, ", "100, 's', 5"), ("", "'new', 0")]),
    "INSERT INTO importing VALUES ('s', 6, 'x', 0)",
]


@pytest.mark.parametrize("role", ["writer", "auditor", "redactor", "owner"])
def test_what_was_refused_stays_refused_for_every_role(pg_server, role):
    """Every statement of REFUSED_BEFORE, run as each role (the redactor included) in a
    database where a redaction was made, is refused (ES guard code or 42501): nothing
    changes, and a redaction event committed earlier lends no UPDATE its form."""
    with redactable(pg_server) as (url, tag):
        with EventStore.open(url["writer"]) as store:
            catch_up(store)
        with EventStore.open(url["redactor"]) as store, psycopg.connect(url["redactor"], autocommit=True) as conn:
            store.capability(Redactor).redact_event(*redaction_args(conn, "s", 1, [["content"]]))
        before = state(url["owner"])
        for sql in REFUSED_BEFORE:
            refused(url[role], sql)
        assert state(url["owner"]) == before


def test_a_tables_owner_that_does_not_own_the_database_is_told_about_the_statistics(pg_server, pg_url):
    """The tables' owner may rewrite events and events_search but not pg_statistic (only the
    database's owner or a superuser may): erase_old_versions rewrites the tables and says
    which command the database's owner runs for the rest."""
    import uuid

    name, role = pg_url.rsplit("/", 1)[1], f"tables_{uuid.uuid4().hex[:8]}"
    with pg_server.connect(name) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    try:
        url = pg_server.url(name, role)
        with EventStore.open(url) as store:
            store.create_session("s").append("tool/result", {"tool_call_id": "c", "content": SECRET})
            red = store.capability(Redactor)
            with psycopg.connect(url, autocommit=True) as conn:
                red.redact_event(*redaction_args(conn, "s", 0, [["content"]]))
                relfile = conn.execute("SELECT pg_relation_filenode('events')").fetchone()[0]
                said = red.erase_old_versions()
                assert conn.execute("SELECT pg_relation_filenode('events')").fetchone()[0] != relfile  # rewritten
        assert said is not None and "stay in pg_statistic's file until the database's owner runs: psql -c " \
            "'VACUUM (FULL) pg_catalog.pg_statistic'" in said and f"role {role!r} does not own the database" in said
    finally:
        with pg_server.connect(name) as conn:
            conn.execute(f"DROP OWNED BY {role} CASCADE")
        with pg_server.connect() as conn:
            conn.execute(f"DROP ROLE {role}")


def test_the_redactor_of_a_superusers_roles_redacts_and_says_so(pg_server, monkeypatch):
    """A superuser's `eventstore roles` gives pg_logical_emit_message to the owner and the
    writer only: a redaction's transaction commits durably itself, so `redact` exits 0 and
    says what it redacted (it said the flush was unconfirmed before), without watching the
    WAL position (which waited for the WAL writer's next round, 200 ms, per redaction)."""
    import eventstore.backends.postgres.backend as pg_backend

    def no_watching(conn):
        raise AssertionError("the redaction watched the WAL position for its flush")

    monkeypatch.setattr(pg_backend, "wait_flushed", no_watching)
    with redactable(pg_server, superuser_roles=True) as (url, tag):
        with psycopg.connect(url["redactor"], autocommit=True) as conn:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("SELECT pg_logical_emit_message(true, 'x', '')")
        r = CliRunner().invoke(cli, ["--db", url["redactor"], "redact", "s", "1", "--path", "content",
                                     "--reason", "api key"])
        assert r.exit_code == 0, r.output
        assert "redacted session 's' seq 1: content (api key)" in r.output
        with EventStore.open(url["auditor"], readonly=True) as store:
            assert store.session("s").derive_messages()[1] == {"role": "tool", "tool_call_id": "c1",
                                                               "content": "[redacted: api key]"}


def test_redact_found_as_the_redactor_says_what_the_owner_must_run_once(pg_server):
    """As the redactor (not the tables' owner) the old row versions stay in the table files:
    `redact --found` says so once for all its redactions, on stderr and in --json's
    warnings, as a plain `redact` says it (it said nothing before)."""
    with redactable(pg_server) as (url, tag):
        r = CliRunner().invoke(cli, ["--db", url["redactor"], "redact", "--found", "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert [d["seq"] for d in out["redacted"]] == [1] and out["not_redacted"] == []
        [warning] = out["warnings"]
        assert f"role 'red_{tag}' may not" in warning and "VACUUM (FULL, ANALYZE) events" in warning
        assert r.stderr == f"warning: {warning}\n"
        with EventStore.open(url["writer"]) as store:
            store.session("s").append_many([("user/message", {"content": f"OPENAI_API_KEY={SECRET}"}),
                                            ("user/message", {"content": f"export OPENAI_API_KEY={SECRET}"})])
        r = CliRunner().invoke(cli, ["--db", url["redactor"], "redact", "--found"])
        assert r.exit_code == 0 and r.stderr == f"warning: {warning}\n", r.output
        assert [line.split(":")[0] for line in r.stdout.splitlines()[:2]] == \
            ["redacted session 's' seq 5", "redacted session 's' seq 6"], r.stdout
