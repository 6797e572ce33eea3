"""Attacks on PostgreSQL as every role, set up exactly as the README says: an owner (a login
role with CREATEROLE owning the database), ``eventstore roles`` run by it, a writer login and
an auditor login granted the two roles. Every attack goes through plain psycopg, not the
store, and must fail: refused by a privilege or a guard, the log unchanged, the other roles'
work not stopped. What only the owner (or a superuser) can do is left to ``verify``
(revision 0250; issue 30)."""

from __future__ import annotations

import contextlib
import threading

import pytest
from click.testing import CliRunner
from conftest import DATA
from test_postgres import owned_database

from eventstore import EventStore
from eventstore.cli import cli
from eventstore.search import catch_up, search

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pg_errors  # noqa: E402

H = "repeat('0', 64)"
REFUSED = psycopg.DatabaseError  # (a guard's ESnnn, or 42501: no privilege; see refused)


@contextlib.contextmanager
def as_readme(pg_server, superuser_roles: bool = False):
    """``(urls by role, tag)``: an owner's database with a stored session 's' (3 events),
    ``eventstore roles`` run by the owner (or, with ``superuser_roles``, by a superuser), and
    the logins ``agent_TAG`` (writer) and ``audit_TAG`` (auditor)."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        with EventStore.open(url) as store:
            s = store.create_session("s")
            s.append_many([("user/message", {"content": "hello world"}), ("turn/start", {}), ("turn/end", {})])
        roles_url = pg_server.url(name) if superuser_roles else url
        r = CliRunner().invoke(cli, ["--db", roles_url, "roles", "--writer", f"w_{tag}", "--auditor", f"a_{tag}"])
        assert r.exit_code == 0, r.output
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE agent_{tag} LOGIN IN ROLE w_{tag}")
            conn.execute(f"CREATE ROLE audit_{tag} LOGIN IN ROLE a_{tag}")
        yield {"owner": url, "writer": pg_server.url(name, f"agent_{tag}"),
               "auditor": pg_server.url(name, f"audit_{tag}"), "super": pg_server.url(name)}, tag


def state(url: str) -> list:
    with psycopg.connect(url, autocommit=True) as conn:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("events", "sessions", "importing", "events_search", "events_search_state")]


def refused(url: str, *sql: str, exc=REFUSED) -> None:
    """Each statement (run in one transaction after the ones before it) is refused."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in sql[:-1]:
            conn.execute(statement)
        with pytest.raises(exc) as e:
            conn.execute(sql[-1])
        assert e.value.sqlstate == "42501" or e.value.sqlstate.startswith("ES"), e.value


def _ins(sid: str, seq: int, position: int | None = None) -> str:
    cols = "position, " if position is not None else ""
    vals = f"{position}, " if position is not None else ""
    return (f"INSERT INTO public.events ({cols}session_id, seq, type, ts, payload, hash) "
            f"VALUES ({vals}'{sid}', {seq}, 'x', 1, '{{}}', {H})")


# Inserts that would gap, move far or hide: each must be refused whatever shadows the tables.
BAD_INSERTS = [
    (_ins("s", 5), "ES002"),                            # a gapped seq
    (_ins("s", 3, 2**63 - 2), "ES003"),                 # a far position: every later append would overflow
    (_ins("s", 3, 100), "ES003"),                       # a position gap
    (_ins("new", 0), "ES001"),                          # an unknown session
    ("INSERT INTO public.importing VALUES ('s', 4, 'x', 0)", "ES011"),  # hide a stored session
]


def _shadow_with_temp_tables(conn) -> None:
    """Temporary tables events, sessions and importing (pg_temp comes first in the default
    search_path) holding what would make each BAD_INSERTS row look right, and an operator
    ``=`` on text in pg_temp that says yes to everything."""
    conn.execute("CREATE TEMP TABLE events (LIKE public.events)")
    conn.execute("CREATE TEMP TABLE sessions (LIKE public.sessions)")
    conn.execute("CREATE TEMP TABLE importing (LIKE public.importing)")
    conn.execute("INSERT INTO pg_temp.events (position, session_id, seq, type, ts, payload, hash) "
                 f"VALUES (2^63::numeric - 3, 's', 4, 'x', 1, '{{}}', {H}), (99, 'new', 0, 'x', 1, '{{}}', {H})")
    conn.execute("INSERT INTO pg_temp.sessions (id, created_at, meta) VALUES ('new', 1, '{}')")
    conn.execute("CREATE FUNCTION pg_temp.yes(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'")
    conn.execute("CREATE OPERATOR pg_temp.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_temp.yes)")


@pytest.mark.parametrize("sql, code", BAD_INSERTS)
def test_the_writer_cannot_shadow_the_guards(pg_server, sql, code):
    """Without TEMPORARY (revoked by `roles`) the writer cannot create the shadows; given it
    anyway (a set-up that left PUBLIC's), or a schema of its own put first in its
    search_path, the guards still read the log: each bad insert is refused by its code."""
    with as_readme(pg_server) as (url, tag):
        before = state(url["owner"])
        refused(url["writer"], "CREATE TEMP TABLE events (LIKE public.events)", exc=pg_errors.InsufficientPrivilege)
        refused(url["auditor"], "CREATE TEMP TABLE events (LIKE public.events)", exc=pg_errors.InsufficientPrivilege)
        refused(url["writer"], "CREATE SCHEMA mine", exc=pg_errors.InsufficientPrivilege)
        refused(url["writer"], "CREATE TABLE public.events2 (a int)", exc=pg_errors.InsufficientPrivilege)
        with psycopg.connect(url["super"], autocommit=True) as conn:  # what a careless DBA might give
            conn.execute(f"GRANT TEMPORARY ON DATABASE \"{url['owner'].rsplit('/', 1)[1]}\" TO w_{tag}")
            conn.execute(f"CREATE SCHEMA evil AUTHORIZATION agent_{tag}")
        with psycopg.connect(url["writer"], autocommit=True) as conn:
            _shadow_with_temp_tables(conn)
            conn.execute("CREATE TABLE evil.events (LIKE public.events)")
            conn.execute("CREATE TABLE evil.sessions (LIKE public.sessions)")
            conn.execute("CREATE FUNCTION evil.texteq(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'")
            conn.execute("CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq)")
            # a SECURITY DEFINER function of the writer's runs as the writer: no more rights
            conn.execute("CREATE FUNCTION evil.wipe() RETURNS void LANGUAGE sql SECURITY DEFINER "
                         "AS 'DELETE FROM public.importing; UPDATE public.events SET ts = 0'")
            for path in ("pg_temp, public", "evil, pg_temp, public, pg_catalog", "pg_temp, evil, pg_catalog, public"):
                conn.execute(f"SET search_path = {path}")
                with pytest.raises(psycopg.DatabaseError) as e:
                    conn.execute(sql)
                assert e.value.sqlstate == code, (path, e.value)
            with pytest.raises(REFUSED):
                conn.execute("SELECT evil.wipe()")
            with pytest.raises(psycopg.DatabaseError) as e:  # COPY goes through the same guards
                with conn.cursor().copy("COPY public.events (position, session_id, seq, type, ts, payload, hash) "
                                        "FROM STDIN") as copy:
                    copy.write_row((2**63 - 2, "s", 3, "x", 1.0, "{}", "0" * 64))
            assert e.value.sqlstate == "ES003"
        assert state(url["owner"]) == before


def test_helper_tables_refuse_every_change_but_the_importers(pg_server):
    """importing, events_search, events_search_state and the lock table: UPDATE, DELETE,
    TRUNCATE and forged INSERTs are refused for the writer (and everything for the
    auditor); a stored session cannot be hidden; searches find only what the log says."""
    with as_readme(pg_server) as (url, tag):
        with EventStore.open(url["writer"]) as store:  # a search as the writer catches the index up
            assert [h.seq for h in search(store, "hello")] == [0]
            abandoned = store.create_session("half")
            abandoned.append("user/message", {"content": "x"})
            catch_up(store)
        with psycopg.connect(url["super"], autocommit=True) as conn:  # an import that died (no lock held)
            conn.execute("ALTER TABLE importing DISABLE TRIGGER importing_guard_insert")
            conn.execute("INSERT INTO importing VALUES ('half', 4, 'pg:1#dead', 0)")
            conn.execute("ALTER TABLE importing ENABLE TRIGGER importing_guard_insert")
        before = state(url["owner"])
        for role in ("writer", "auditor"):
            for sql in ["UPDATE importing SET session_id = 's'",
                        "UPDATE importing SET first_position = 1",
                        "UPDATE importing SET owner = 'pg:1#other'",  # (holds no import lock)
                        "DELETE FROM importing",
                        "TRUNCATE importing",
                        "INSERT INTO importing VALUES ('s', 5, 'x', 0)",
                        "UPDATE events_search SET tsv = to_tsvector('simple', 'evil')",
                        "DELETE FROM events_search",
                        "TRUNCATE events_search",
                        "INSERT INTO events_search VALUES (2, 's', 'user/message', to_tsvector('simple', 'evil'))",
                        "UPDATE events_search_state SET indexed_through = 1000",
                        "UPDATE events_search_state SET indexed_through = 0",
                        "DELETE FROM events_search_state",
                        "INSERT INTO events_position_lock DEFAULT VALUES",
                        "TRUNCATE events_position_lock"]:
                refused(url[role], sql)
        assert state(url["owner"]) == before
        # a forged vector is replaced by the event's own
        with psycopg.connect(url["super"], autocommit=True) as conn:
            conn.execute("ALTER TABLE events_search DISABLE TRIGGER events_search_guard_delete")
            conn.execute("DELETE FROM events_search")
            conn.execute("ALTER TABLE events_search ENABLE TRIGGER events_search_guard_delete")
        with psycopg.connect(url["writer"], autocommit=True) as conn:
            conn.execute("INSERT INTO events_search VALUES (1, 'half', 'x', to_tsvector('simple', 'evil'))")
            assert conn.execute("SELECT session_id, type, tsv::text FROM events_search").fetchall() == [
                ("s", "user/message", "'hello':1 'world':2")]


def test_the_index_rows_of_thinking_and_parts_are_the_logs(pg_server):
    """Thinking events and message parts have index rows (revision 0280) that the writer may
    insert, but their session, type and vector are taken from the log; a row for an event
    that is not searched is refused, and so is a bound past a thinking event with no row."""
    with as_readme(pg_server) as (url, tag):
        with EventStore.open(url["writer"]) as store:  # positions 4 to 6
            store.session("s").append_many([("assistant/thinking", {"thinking": "pondering wombats"}),
                                            ("assistant/part", {"message_id": "m", "content": "wombat part"}),
                                            ("turn/end", {})])
        with psycopg.connect(url["super"], autocommit=True) as conn:  # nothing indexed yet
            assert conn.execute("SELECT indexed_through FROM events_search_state").fetchone() == (0,)
        refused(url["writer"], "INSERT INTO events_search VALUES (6, 's', 'assistant/thinking', ''::tsvector)")
        refused(url["writer"], "UPDATE events_search_state SET indexed_through = 6")  # (no row for 1, 4, 5)
        with psycopg.connect(url["writer"], autocommit=True) as conn:
            conn.execute("INSERT INTO events_search VALUES (1, 's', 'x', ''::tsvector), "
                         "(4, 'other', 'user/message', to_tsvector('simple', 'evil')), "
                         "(5, 's', 'assistant/thinking', to_tsvector('simple', 'evil'))")
            conn.execute("UPDATE events_search_state SET indexed_through = 6")
            assert conn.execute("SELECT position, session_id, type, tsv::text FROM events_search "
                                "ORDER BY position").fetchall() == [
                (1, "s", "user/message", "'hello':1 'world':2"),
                (4, "s", "assistant/thinking", "'pondering':1 'wombats':2"),
                (5, "s", "assistant/part", "'part':2 'wombat':1")]
        with EventStore.open(url["auditor"], readonly=True) as store:  # reads the index only
            assert sorted((h.seq, h.type) for h in search(store, "wombats")) == [(3, "assistant/thinking")]


def test_the_auditor_cannot_stop_writers_or_readers(pg_server):
    """The auditor cannot take the position lock (LOCK TABLE needs UPDATE); an advisory lock
    on the old key, a share lock on the lock table or a long read stop no append, and a
    follower goes on."""
    with as_readme(pg_server) as (url, tag):
        with psycopg.connect(url["auditor"]) as aud:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                aud.execute("LOCK TABLE events_position_lock IN EXCLUSIVE MODE")
            aud.rollback()
            with pytest.raises(pg_errors.InsufficientPrivilege):
                aud.execute("SELECT * FROM events_search_state FOR UPDATE")  # (the catch-up's lock)
            aud.rollback()
            for sql in ("SELECT es_lock_head('s')", "SELECT es_try_position_lock()"):  # (PUBLIC may execute them)
                with pytest.raises(pg_errors.InsufficientPrivilege):
                    aud.execute(sql)
                aud.rollback()
            aud.execute("SELECT pg_advisory_xact_lock(28555852263026292)")  # the lock of revision 0240 and before
            aud.execute("LOCK TABLE events_position_lock IN ACCESS SHARE MODE")
            aud.execute("LOCK TABLE events IN ACCESS SHARE MODE")
            aud.execute("SELECT count(*) FROM events")
            done = threading.Event()

            def append() -> None:
                with EventStore.open(url["writer"], busy_timeout=20) as store:
                    store.session("s").append("x", {})
                    store.session("s").append_many([("y", {}), ("z", {})])
                done.set()

            t = threading.Thread(target=append)
            t.start()
            assert done.wait(30), "an append waited for the auditor's locks"
            t.join()
            with EventStore.open(url["auditor"], readonly=True) as store:
                seen = [e.seq for e in store.follow(idle_timeout=0.2)]
            assert seen == [0, 1, 2, 3, 4, 5]
            aud.rollback()


def test_roles_run_by_a_superuser_withhold_side_effect_functions(pg_server, tmp_path):
    """Run by a superuser, `roles` revokes PUBLIC's EXECUTE on the functions that act beyond
    the tables in this database: the auditor can no longer write WAL with
    pg_logical_emit_message or take advisory locks; the writer and the owner keep what
    the store calls (its durable appends, imports, chunked ones included, and follow still work)."""
    from eventstore.io.bulk import BATCH_ROWS

    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:
        f.write('{"type":"session/meta","id":"big"}\n')
        f.writelines(f'{{"type":"user/message","seq":{i},"ts":1,"content":"x"}}\n' for i in range(2 * BATCH_ROWS + 1))
    with as_readme(pg_server, superuser_roles=True) as (url, tag):
        for sql in ["SELECT pg_logical_emit_message(false, 'x', repeat('x', 1000))",
                    "SELECT pg_advisory_lock(1)", "SELECT pg_try_advisory_xact_lock(1)",
                    "SELECT pg_advisory_xact_lock(28555852263026292)", "SELECT pg_terminate_backend(1)",
                    "SELECT pg_cancel_backend(1)", "SELECT lo_create(0)",
                    "SELECT pg_notify('eventstore_events', 'x')"]:
            refused(url["auditor"], sql, exc=pg_errors.InsufficientPrivilege)
        with EventStore.open(url["writer"]) as store:
            store.session("s").append("x", {})
            store.import_jsonl(DATA / "demo.jsonl")
            store.import_jsonl(big)  # in chunks: each looks in pg_locks for waiting writers
            assert store.session("big").next_seq() == 2 * BATCH_ROWS + 1 and store.imports() == []
        with EventStore.open(url["auditor"], readonly=True) as store:
            assert len(list(store.follow(idle_timeout=0.2))) > 4
        with EventStore.open(url["owner"]) as store:
            store.session("s").append("y", {})


def test_the_owner_and_auditor_cannot_create_event_triggers_or_change_default_privileges(pg_server):
    """Event triggers need a superuser; ALTER DEFAULT PRIVILEGES for another role needs its
    membership (for one's own future objects it is allowed, and gives nothing on the log)."""
    with as_readme(pg_server) as (url, tag):
        for role in ("writer", "auditor"):
            refused(url[role], "CREATE FUNCTION public.et() RETURNS event_trigger LANGUAGE plpgsql AS 'BEGIN END'",
                    exc=pg_errors.InsufficientPrivilege)
        with psycopg.connect(url["owner"], autocommit=True) as conn:
            conn.execute("CREATE FUNCTION et() RETURNS event_trigger LANGUAGE plpgsql AS 'BEGIN END'")
        for role in ("writer", "auditor", "owner"):
            refused(url[role], "CREATE EVENT TRIGGER x ON ddl_command_start EXECUTE FUNCTION public.et()",
                    exc=pg_errors.InsufficientPrivilege)
        owner = url["owner"].split("//", 1)[1].split("@", 1)[0]
        for role in ("writer", "auditor"):
            refused(url[role], f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} GRANT ALL ON TABLES TO PUBLIC",
                    exc=pg_errors.InsufficientPrivilege)
        with psycopg.connect(url["writer"], autocommit=True) as conn:
            conn.execute("ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC")  # (its own future tables)
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("UPDATE events SET ts = 0")


def test_durable_by_default(pg_url):
    """The default durability commits every append durably: the store's commit waits for
    the flush (synchronous_commit at the durable level) unless opted out by name."""
    with EventStore.open(pg_url) as store:
        assert not store._backend.lossy
        assert store._backend._full_level == "on"
    with EventStore.open(pg_url, durability="may-lose-recent") as store:
        assert store._backend.lossy and store._backend._full_level is None


def test_a_store_in_a_schema_of_its_own(pg_server):
    """A store whose tables live in another schema (the URL's search_path): the guards name
    that schema, `roles` grants on it, and the writer appends there and nothing more."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA logs")
        here = "?options=-csearch_path%3Dlogs"
        with EventStore.open(url + here) as store:
            store.create_session("s").append("x", {})
        r = CliRunner().invoke(cli, ["--db", url + here, "roles", "--writer", f"w_{tag}", "--auditor", f"a_{tag}"])
        assert r.exit_code == 0, r.output
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE agent_{tag} LOGIN IN ROLE w_{tag}")
            body = conn.execute("SELECT pg_get_functiondef('logs.events_guard_insert'::regproc)").fetchone()[0]
            assert "FROM logs.events AS e" in body and "SET search_path TO 'pg_catalog', 'pg_temp'" in body
            assert conn.execute("SELECT to_regclass('public.events')").fetchone() == (None,)
        writer = pg_server.url(name, f"agent_{tag}") + here
        with EventStore.open(writer) as store:
            assert store.session("s").append("y", {}).seq == 1
        refused(writer, "INSERT INTO events (session_id, seq, type, ts, payload, hash) "
                        f"VALUES ('s', 5, 'x', 1, '{{}}', {H})")
        refused(writer, "UPDATE importing SET owner = 'x'", "DELETE FROM events_search")
