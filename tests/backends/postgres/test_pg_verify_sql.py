"""verify reads the whole PostgreSQL catalog, and ``sql`` has no way out (issue 30).

Each attack runs through plain psycopg as the role that would make it (the owner, the
writer, the auditor of ``eventstore roles``) on a database set up as the README says; then
``verify`` (as the owner) must name it, or PostgreSQL must refuse it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import PEAK, TESTS, new_sqlite_store

from eventstore import EventStore
from eventstore.cli import cli

psycopg = pytest.importorskip("psycopg")
from test_postgres import owned_database  # noqa: E402

ROOT = str(TESTS.parent)


@contextlib.contextmanager
def roles_database(pg_server):
    """A database owned by a CREATEROLE owner, migrated, with ``eventstore roles`` run and a
    login for each role: yields ``(owner URL, writer URL, auditor URL, tag)``; one session
    ``s`` with three events is stored."""
    with owned_database(pg_server, "CREATEROLE") as (tag, owner, name, url):
        w, a = f"w_{tag}", f"a_{tag}"
        r = CliRunner().invoke(cli, ["--db", url, "roles", "--writer", w, "--auditor", a])
        assert r.exit_code == 0, r.output
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE agent_{tag} LOGIN IN ROLE {w}")
            conn.execute(f"CREATE ROLE audit_{tag} LOGIN IN ROLE {a}")
        writer, auditor = pg_server.url(name, f"agent_{tag}"), pg_server.url(name, f"audit_{tag}")
        with EventStore.open(writer) as store:
            s = store.create_session("s", meta={"n": 1})
            s.append_many([("user/message", {"content": "hello world"}), ("turn/start", {}), ("turn/end", {})])
        yield url, writer, auditor, tag


def verify(url: str, *args: str):
    return CliRunner().invoke(cli, ["--db", url, "verify", *args])


def test_a_fresh_database_with_roles_verifies_clean(pg_server):
    with roles_database(pg_server) as (owner, _writer, _auditor, _tag):
        r = verify(owner)
        assert r.exit_code == 0, r.output
        assert "note" not in r.stderr


OWNER_ATTACKS = {
    "unlogged": ("ALTER TABLE events SET UNLOGGED", "schema: table events differs from its definition in the "
                                                    "migrations: UNLOGGED (not crash-safe)"),
    "rls": ("ALTER TABLE sessions ENABLE ROW LEVEL SECURITY", "schema: table sessions differs from its definition in "
                                                              "the migrations: row level security enabled"),
    "rls forced": ("ALTER TABLE sessions FORCE ROW LEVEL SECURITY", "row level security forced"),
    "policy": ("CREATE POLICY hide ON sessions AS RESTRICTIVE FOR SELECT USING (id <> 's')",
               "schema: extra policy hide on sessions, not created by the migrations: restrictive for r to PUBLIC "
               "using ((id <> 's'::text))"),
    "rule": ("CREATE RULE nothing AS ON INSERT TO events DO INSTEAD NOTHING",
             "schema: extra rule nothing on events, not created by the migrations: CREATE RULE nothing AS ON INSERT "
             "TO events DO INSTEAD NOTHING;"),
    "trigger disabled": ("ALTER TABLE events DISABLE TRIGGER ALL", "trigger: trigger events_guard_insert on events "
                                                                   "is disabled"),
    "function setting": ("ALTER FUNCTION es_field(text, text) SET search_path = pg_temp, public",
                         "SET search_path TO 'pg_temp', 'public'"),
    "function security definer": ("ALTER FUNCTION es_field(text, text) SECURITY DEFINER",
                                  "SECURITY DEFINER"),
    "column default": ("ALTER TABLE events ALTER COLUMN ts SET DEFAULT 0", "schema: table events differs"),
    "sequence": ("CREATE SEQUENCE spare", "schema: extra sequence spare"),
    "owner": ("ALTER TABLE sessions OWNER TO {w}", "schema: owner of sessions differs from its definition in the "
                                                   "migrations: w_"),
    "grant": ("GRANT UPDATE ON events TO {w}", "schema: grants on events differs"),
    "column grant": ("GRANT UPDATE (ts) ON events TO {a}", "; column ts: a_"),
    "revoke from auditor": ("REVOKE SELECT ON sessions FROM {a}", "schema: grants on sessions differs"),
    "function grant": ("GRANT EXECUTE ON FUNCTION es_field(text, text) TO {w} WITH GRANT OPTION",
                       "schema: grants on function es_field(payload text, key text) differs"),
    "schema grant": ("GRANT CREATE ON SCHEMA public TO {w}", "schema: grants on schema differs"),
    "database temporary": ("GRANT TEMPORARY ON DATABASE {db} TO {w}", "holds TEMPORARY on the database"),
    "database create": ("GRANT CREATE ON DATABASE {db} TO {a}", "holds CREATE on the database"),
    "database temporary to public": ("GRANT TEMPORARY ON DATABASE {db} TO PUBLIC",
                                     "PUBLIC holds TEMPORARY on the database"),
    "database temporary to a login": ("CREATE ROLE login_{w} LOGIN IN ROLE {w}; GRANT TEMPORARY ON DATABASE {db} TO "
                                      "login_{w}", "role 'login_w_"),
    "schema create to public": ("GRANT CREATE ON SCHEMA public TO PUBLIC", "PUBLIC holds CREATE on the schema"),
    "default privileges": ("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO {w}",
                           "schema: extra default privileges of owner_"),
    "publication": ("CREATE PUBLICATION leak FOR TABLE events", "schema: extra publication leak, not created by the "
                                                                "migrations: FOR TABLE events"),
    "inheritance": ("CREATE TABLE ghost () INHERITS (events)", "inherited by ghost"),
    "collation": ("ALTER TABLE importing ALTER COLUMN owner TYPE text COLLATE \"POSIX\"", "collate \"POSIX\""),
    "replica identity": ("ALTER TABLE events REPLICA IDENTITY FULL", "replica identity f"),
    "view option": ("ALTER VIEW messages SET (security_invoker = true)", "schema: view messages differs"),
}


@pytest.mark.parametrize("attack", sorted(OWNER_ATTACKS))
def test_verify_names_each_catalog_change_by_the_owner(pg_server, attack):
    """Each change of the catalog the owner (or, for a change of owner, a superuser) can
    make is a finding naming it; before, verify compared only columns, indexes, triggers,
    views and function bodies, and said OK."""
    sql, said = OWNER_ATTACKS[attack]
    with roles_database(pg_server) as (owner, _writer, _auditor, tag):
        url = pg_server.url(owner.rsplit("/", 1)[1]) if attack == "owner" else owner  # (a superuser's change)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.format(w=f"w_{tag}", a=f"a_{tag}", db=owner.rsplit("/", 1)[1]))
        r = verify(owner)
        assert r.exit_code == 1, r.output
        assert said in r.output, r.output


def test_verify_names_an_event_trigger(pg_server):
    """An event trigger (a superuser's) runs on every DDL: no migration creates one."""
    with roles_database(pg_server) as (owner, _writer, _auditor, tag):
        name = owner.rsplit("/", 1)[1]
        with pg_server.connect(name) as conn:
            conn.execute("CREATE FUNCTION public.noop_evt() RETURNS event_trigger LANGUAGE plpgsql "
                         "AS $$ BEGIN END $$")
            conn.execute("CREATE EVENT TRIGGER watch ON ddl_command_end EXECUTE FUNCTION public.noop_evt()")
        try:
            r = verify(owner)
            assert r.exit_code == 1
            assert "extra event trigger watch" in r.output, r.output
        finally:
            with pg_server.connect(name) as conn:
                conn.execute("DROP EVENT TRIGGER watch")


def test_a_checkpoint_listing_a_session_the_store_hides_is_a_finding(pg_server, tmp_path):
    """An importing row (here a superuser's, past every guard) hides a stored session from
    every reader: with a checkpoint that lists it, verify says so as a finding, never only a
    note; without one, an importing row whose first position is after the session's events
    is a finding too."""
    with roles_database(pg_server) as (owner, _writer, auditor, _tag):
        cp = tmp_path / "cp.json"
        assert CliRunner().invoke(cli, ["--db", auditor, "checkpoint", "-o", str(cp)]).exit_code == 0
        with pg_server.connect(owner.rsplit("/", 1)[1]) as conn:
            conn.execute("SET session_replication_role = replica")
            conn.execute("INSERT INTO importing (session_id, first_position, owner, started_at) "
                         "VALUES ('s', 1000, 'pg:1#x', 0)")
        assert CliRunner().invoke(cli, ["--db", auditor, "sessions"]).output.strip() == "no sessions"  # hidden
        r = verify(owner, "--checkpoint", str(cp))
        assert r.exit_code == 1
        assert (f"session s: checkpoint: {cp}: the store does not show the session: an importing row hides it "
                f"from every reader") in r.output, r.output
        assert "session s seq 0: session: hidden from readers by an importing row whose first position (1000) " \
               "is after its stored event at position 1" in r.output


def test_a_signature_not_checked_against_a_trusted_key_is_said(pg_server, tmp_path):
    with roles_database(pg_server) as (owner, _writer, auditor, _tag):
        key = tmp_path / "other.pem"
        assert CliRunner().invoke(cli, ["--db", auditor, "keygen", str(key)]).exit_code == 0
        cp = tmp_path / "cp.json"
        r = CliRunner().invoke(cli, ["--db", auditor, "checkpoint", "-o", str(cp), "--key", str(key)])
        assert r.exit_code == 0, r.output
        r = verify(auditor, "--checkpoint", str(cp))
        assert r.exit_code == 0, r.output
        assert (f"note: {cp}: its signature (key " in r.stderr
                and "was not checked against a trusted key" in r.stderr), r.stderr
        r = verify(auditor, "--checkpoint", str(cp), "--public-key", str(key) + ".pub")
        assert r.exit_code == 0 and "trusted key" not in r.stderr


def test_a_created_at_of_minus_1e308_is_a_finding_in_few_digits(pg_server):
    with roles_database(pg_server) as (owner, _writer, _auditor, _tag):
        with pg_server.connect(owner.rsplit("/", 1)[1]) as conn:
            conn.execute("SET session_replication_role = replica")
            conn.execute("INSERT INTO sessions (id, created_at, meta) VALUES ('ghost', -1e308, '{}')")
        r = verify(owner)
        assert r.exit_code == 1
        line = next(x for x in r.output.splitlines() if "ghost: session: created_at is" in x)
        assert "created_at is 1e+308 s before that of session 's'" in line, line
        assert max(len(w) for w in line.split()) < 40


def test_verify_prints_the_first_findings_and_a_count_by_kind(tmp_path):
    """One bad table gives a finding per event: verify prints the first 100, says how many
    more, counts them by kind; --all prints every one (SQLite: the CLI is the same)."""
    import sqlite3

    db = new_sqlite_store(tmp_path / "many.db")
    with EventStore.open(db) as store:
        store.create_session("s").append_many([("user/message", {"content": str(i)}) for i in range(250)])
    raw = sqlite3.connect(db)
    raw.execute("DROP TRIGGER events_guard_update")
    raw.execute("UPDATE events SET ts = ts + 1")
    raw.commit()
    raw.close()
    r = verify(str(db))
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 101 and lines[-1] == "... 151 more not shown (--all prints every finding)", lines[-3:]
    assert r.stderr.splitlines()[-1] == "verified 1 session, 250 events: 251 findings (hash 250, trigger 1)", r.stderr
    r = verify(str(db), "--all")
    assert len(r.stdout.splitlines()) == 251


def test_sqlite_an_importing_row_moved_onto_a_stored_session_is_a_finding(tmp_path):
    """With importing's UPDATE guard dropped (revision 0250), an UPDATE moves a row onto a
    stored session, which readers then hide; verify names it."""
    import sqlite3

    db = new_sqlite_store(tmp_path / "hide.db")
    with EventStore.open(db) as store:
        store.create_session("s").append("user/message", {"content": "hi"})
        store.create_session("n")
    raw = sqlite3.connect(db)
    raw.execute("INSERT INTO importing (session_id, first_position, owner, started_at) "
                "VALUES ('n', (SELECT max(position) + 1 FROM events), 'gone#1', 0)")
    raw.execute("DROP TRIGGER importing_guard_update")
    raw.execute("UPDATE importing SET session_id = 's'")
    raw.commit()
    raw.close()
    assert "s" not in CliRunner().invoke(cli, ["--db", str(db), "sessions"]).output.split()
    r = verify(str(db))
    assert r.exit_code == 1
    assert "session s seq 0: session: hidden from readers by an importing row" in r.output, r.output


# --- sql: PostgreSQL refuses, whatever the text ---------------------------------------------

def sql(url: str, query: str, *args: str):
    return CliRunner().invoke(cli, ["--db", url, "sql", query, *args])


def _events(url: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT position, session_id, seq, hash FROM events ORDER BY position").fetchall()


WAYS_OUT = [
    "/* /* */ x */ COPY (SELECT 1) TO PROGRAM 'touch {target}'",
    "/* /* */ x */ COPY events FROM PROGRAM 'true'",
    "COPY (SELECT 1) TO '{target}'",
    "DO $$BEGIN EXECUTE 'COPY (SELECT 1) TO ''{target}'''; END$$",
    "/* /* */ x */ INSERT INTO sessions (id, created_at) VALUES ('z', 1)",
    "WITH d AS (DELETE FROM events RETURNING 1) SELECT count(*) FROM d",
    "SELECT lo_export(lo_from_bytea(0, 'x'), '{target}')",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
    "CREATE TEMP TABLE t (a int)",
    "SELECT nextval('x')",
]


@pytest.mark.parametrize("login", ["auditor", "owner", "superuser"])
def test_sql_has_no_way_out_as_any_role(pg_server, tmp_path, login):
    """Through ``sql``, as the auditor's login, the owner's and a superuser's (which sql
    runs as the auditor): no write, no server file or program, no signal to another
    backend; the refusal is PostgreSQL's (``refused: ...``), and the log is unchanged."""
    target = tmp_path / "written-by-sql"
    with roles_database(pg_server) as (owner, writer, auditor, _tag):
        url = {"auditor": auditor, "owner": owner, "superuser": pg_server.url(owner.rsplit("/", 1)[1])}[login]
        with psycopg.connect(writer, autocommit=True) as bystander:  # (pg_terminate_backend must not reach it)
            before = _events(owner)
            for query in WAYS_OUT:
                r = sql(url, query.format(target=target))
                assert r.exit_code == 1, (query, r.output)
                assert "Traceback" not in r.output and not target.exists(), (query, r.output)
            assert bystander.execute("SELECT 1").fetchone() == (1,)
            assert _events(owner) == before
        r = sql(url, "SELECT count(*) AS n FROM events", "--csv")
        assert (r.exit_code, r.stdout) == (0, "n\n3\n"), r.output
        if login == "superuser":
            r = sql(url, "SELECT current_user AS u", "--csv")
            assert r.stdout.startswith("u\na_"), r.stdout  # (the auditor of `eventstore roles`)


@pytest.mark.parametrize("query", ["SELECT pg_logical_emit_message(false, 'x', repeat('y', 1000))",
                                   "SELECT pg_advisory_lock(1)", "SELECT pg_advisory_xact_lock(1)",
                                   "SELECT pg_notify('eventstore_events', 'x')"])
def test_sql_as_the_auditor_cannot_write_wal_take_locks_or_notify(pg_server, query):
    """Once a superuser has run `roles` (only one may revoke PUBLIC's EXECUTE on these)."""
    with roles_database(pg_server) as (owner, _writer, auditor, tag):
        name = owner.rsplit("/", 1)[1]
        r = CliRunner().invoke(cli, ["--db", pg_server.url(name), "roles", "--writer", f"w_{tag}",
                                     "--auditor", f"a_{tag}"])
        assert r.exit_code == 0, r.output
        r = sql(auditor, query)
        assert r.exit_code == 1 and "refused" in r.stderr, r.output


def _peak_rss_mib(argv: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``argv`` with stdout to /dev/null; its peak resident memory (MiB), measured by
    conftest's PEAK wrapper."""
    r = subprocess.run([sys.executable, "-c", PEAK, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env=env)
    err, _, last = r.stderr.rstrip(b"\n").rpartition(b"\n")
    assert last.startswith(b"peak-kb "), r.stderr[-2000:]
    return subprocess.CompletedProcess(argv, r.returncode, b"", err), int(last.split()[1]) / 1024


#: Rows of 1,000 characters the bounded-memory test streams: about 25 MB, fifty times or more the
#: rows one fetch holds (SQL_BATCH on PostgreSQL, 500 on SQLite) and three times the growth
#: the test allows.
BIG_ROWS = 25_000
BIG_QUERY = f"SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, {BIG_ROWS}) AS g"


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_sql_streams_a_large_result_in_bounded_memory(request, tmp_path, backend):
    """25 MB of rows: the process grows far less than that over the same command with a
    one-row result (a server-side cursor on PostgreSQL; SQLite's rows come from its cursor
    in batches too)."""
    if backend == "postgres":
        url = request.getfixturevalue("pg_store_url")
        query = BIG_QUERY
    else:
        url = str(new_sqlite_store(tmp_path / "big.db"))
        query = (f"WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {BIG_ROWS}) "
                 "SELECT g, printf('%.1000c', 'x') AS pad FROM s")
    env = {**os.environ, "PYTHONPATH": ROOT}
    command = [sys.executable, "-m", "eventstore", "--db", url, "sql", "--csv", "--timeout", "0"]
    r, base = _peak_rss_mib([*command, "SELECT 1 AS one"], env)
    assert r.returncode == 0, r.stderr
    r, peak = _peak_rss_mib([*command, query], env)
    assert r.returncode == 0, r.stderr
    data = BIG_ROWS * 1000 / 2**20
    assert peak - base < data / 3, f"peak RSS {peak:.0f} MiB ({base:.0f} MiB for one row) for a {data:.0f} MiB result"


def test_sql_time_limit_covers_fetching(pg_server):
    """Each FETCH of the cursor is short, the whole is not: --timeout stops the command."""
    import time

    with roles_database(pg_server) as (_owner, _writer, auditor, _tag):
        t0 = time.monotonic()
        r = sql(auditor, "SELECT pg_sleep(0.004), g FROM generate_series(1, 3000) AS g", "--timeout", "1.5")
        took = time.monotonic() - t0
        assert r.exit_code == 1
        assert "the query was stopped after --timeout 1.5 s" in r.stderr, r.stderr
        assert took < 6, took


# --- search without its index, and long queries ---------------------------------------------

def _asgi_get(app, path: str, query: str) -> tuple[int, dict]:
    """One GET through the viewer's ASGI app (no server): status and JSON body."""
    import asyncio

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
             "headers": [(b"host", b"127.0.0.1")], "scheme": "http", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 1), "root_path": "", "http_version": "1.1"}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_search_without_the_index_matches_words_with_short_snippets(request, tmp_path, backend):
    """A read-only store (the viewer) searches the events past the index: whole words as
    the index matches them (a prefix only with *), and a snippet of a few hundred
    characters from a 400 kB message, twice as long as the part PostgreSQL indexes.
    (PostgreSQL computes the vectors of those events: words already; the snippet was not
    bounded there either.)"""
    from eventstore.search import search
    from eventstore.web.app import create_app

    url = str(new_sqlite_store(tmp_path / "s.db")) if backend == "sqlite" else request.getfixturevalue("pg_store_url")
    with EventStore.open(url) as store:
        s = store.create_session("a")
        # (PostgreSQL indexes a message's first 200,000 characters: the needle is inside them,
        # the end far past them; SQLite's scan without the index folds the whole text)
        s.append("user/message", {"content": "start " + "y" * 100_000 + " Needle " + "-" * 300_000 + " end"})
        s.append("user/message", {"content": "needles, and src/search.py"})
    with EventStore.open(url, readonly=True) as store:
        assert [h.seq for h in search(store, "needle", update_index=False)] == [0]
        assert [h.seq for h in search(store, "edle", update_index=False)] == []
        assert sorted(h.seq for h in search(store, "needle*", update_index=False)) == [0, 1]
        assert [h.seq for h in search(store, "search.py", update_index=False)] == [1]
        [hit] = search(store, "needle", update_index=False)
        assert len(hit.snippet) < 500 and "Needle" in hit.snippet
        status, body = _asgi_get(create_app(store), "/api/search", "q=needle")
        assert status == 200 and len(json.dumps(body)) < 2000


def test_a_2000_word_search_is_a_clear_error(tmp_path):
    from eventstore.web.app import create_app

    db = new_sqlite_store(tmp_path / "s.db")
    with EventStore.open(db) as store:
        store.create_session("a").append("user/message", {"content": "w1 w2"})
    words = " ".join(f"w{i}" for i in range(2000))
    with EventStore.open(db, readonly=True) as store:
        status, body = _asgi_get(create_app(store), "/api/search", "q=" + words.replace(" ", "+"))
    assert status == 400 and body["error"].startswith("the search query is too long (2,000 words"), body
    r = CliRunner().invoke(cli, ["--db", str(db), "search", words])
    assert r.exit_code != 0 and "the search query is too long (2,000 words" in r.stderr, r.output
    assert "Traceback" not in r.output


def test_roles_set_up_by_a_superuser_verify_clean_as_an_owner_without_createrole(pg_server):
    """The reference schema is given the roles by the owner, who may not CREATE ROLE: the
    roles exist already, so only their grants are needed."""
    with owned_database(pg_server) as (tag, _owner, name, url):
        EventStore.open(url).close()
        r = CliRunner().invoke(cli, ["--db", pg_server.url(name), "roles", "--writer", f"w_{tag}",
                                     "--auditor", f"a_{tag}"])
        assert r.exit_code == 0, r.output
        r = verify(url)
        assert r.exit_code == 0 and "note" not in r.stderr, r.output


@pytest.mark.parametrize("login", ["writer", "auditor"])
def test_the_catalog_changes_are_refused_to_the_writer_and_the_auditor_or_named(pg_server, login):
    """The same changes through the writer's and the auditor's logins: PostgreSQL refuses
    each, or verify (as the owner) names what got through."""
    with roles_database(pg_server) as (owner, writer, auditor, tag):
        got_through = []
        with psycopg.connect(writer if login == "writer" else auditor, autocommit=True) as conn:
            for attack, (sql_text, said) in sorted(OWNER_ATTACKS.items()):
                try:
                    conn.execute(sql_text.format(w=f"w_{tag}", a=f"a_{tag}", db=owner.rsplit("/", 1)[1]))
                except psycopg.Error:
                    continue
                got_through.append((attack, said))
        r = verify(owner)
        assert r.exit_code == (1 if got_through else 0), (got_through, r.output)
        for attack, said in got_through:
            assert said.split(" of owner_")[0] in r.output or "default privileges" in r.output, (attack, r.output)
