"""A PostgreSQL password is never shown: not when it holds URL delimiters (``/ ? @ # %``, a
space) that libpq reads differently or cannot parse, not in ``sessions``, ``copy`` or
``EventStore.open``; a libpq keyword/value string is refused, not made an SQLite file; and
``demo``'s closing hint works with a database from ``$EVENTSTORE_DB``.

The CLI runs in process (click's CliRunner, in the test's folder); a real process where
what reaches the process's own stderr matters (libpq's output is not captured in process)
or its arguments are bytes. Against a real server (tests/pgserver.py). That server trusts local
connections, so a wrong password still connects: the failures here are a closed port and
URLs libpq cannot parse, and for a connection that works the printed URL is checked.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from conftest import new_sqlite_store

from eventstore import EventStore, demo
from eventstore.audit import integrity
from eventstore.cli import cli
from eventstore.errors import DatabaseError

PASSWORD = "Kw7/Zx9?Qv3@Jm%zz Hy5#Tb8"  # every delimiter, a bad % escape, pieces of 3 and of 2
PERCENT_HINT = "must be percent-encoded"


def leaks(text: str, password: str = PASSWORD) -> list[str]:
    """The parts of ``password`` found in ``text``: itself, each piece between URL delimiters
    of 3 characters or more, and any 4 characters in a row (pieces joined by a delimiter)."""
    pieces = [p for p in re.split(r"[/?@#&=:%\s]+", password) if len(p) >= 3]
    runs = {password[i:i + 4] for i in range(len(password) - 3)}
    return [s for s in [password, *pieces, *sorted(runs)] if s in text]


@pytest.fixture(scope="module")
def role(pg_server):
    """A login role whose password holds every URL delimiter, and a database it owns."""
    name = f"pwrole_{os.getpid()}"
    with pg_server.connect() as conn:
        conn.execute(f"DROP ROLE IF EXISTS {name}")
        conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'")
    db = pg_server.create_database()
    with pg_server.connect() as conn:
        conn.execute(f'ALTER DATABASE "{db}" OWNER TO {name}')
    with pg_server.connect(db) as conn:
        conn.execute(f"GRANT ALL ON SCHEMA public TO {name}")
    yield name, db
    pg_server.drop_database(db)
    with pg_server.connect() as conn:
        conn.execute(f"DROP ROLE IF EXISTS {name}")


def run(*argv: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI with ``argv`` run in process from the folder ``cwd``, with ``env`` added to
    the environment: its exit status, stdout and stderr."""
    with contextlib.chdir(cwd):
        r = CliRunner(env=env).invoke(cli, list(argv))
    return subprocess.CompletedProcess(argv, r.exit_code, r.stdout, r.stderr)


def run_process(*argv: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    """The same in a real process: what libpq might write to the process's stderr itself is
    in its stderr too."""
    return subprocess.run([sys.executable, "-m", "eventstore", *argv], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=120)


def failing_urls(pg_server, role) -> dict[str, tuple[str, str]]:
    """URLs that cannot connect, by how they fail: ``(url, the password in it)``."""
    user, db = role
    hostport = f"127.0.0.1:{pg_server.port}"
    bare = PASSWORD.replace("%zz", "").replace(" ", "")  # no % or space: libpq parses it, wrongly
    return {
        "closed port, password percent-encoded":
            (f"postgresql://{user}:{quote(PASSWORD, safe='')}@127.0.0.1:1/{db}", PASSWORD),
        "closed port, password as a parameter":
            (f"postgresql://{user}@127.0.0.1:1/{db}?password={quote(PASSWORD)}", PASSWORD),
        "unparsable: the password as typed": (f"postgresql://{user}:{PASSWORD}@{hostport}/{db}", PASSWORD),
        "unparsable: / ? @ # not encoded": (f"postgresql://{user}:{bare}@{hostport}/{db}", bare),
        "unparsable: a parameter as typed": (f"postgresql://{user}@{hostport}/{db}?password={PASSWORD}", PASSWORD),
        # libpq parses these, but takes a piece of the password for the host or the port
        "misread: @ not encoded": (f"postgresql://{user}:Kw7@Hy5#Tb8@{hostport}/{db}", "Kw7@Hy5#Tb8"),
        "misread: / not encoded": (f"postgresql://{user}:Kw7/Zx9Qv3@{hostport}/{db}", "Kw7/Zx9Qv3"),
    }


def test_a_url_that_cannot_connect_shows_no_part_of_its_password(pg_server, role, tmp_path):
    src = new_sqlite_store(tmp_path / "src.db")
    with EventStore.open(str(src)) as store:
        store.create_session("s").append("note", {})
    for how, (url, password) in failing_urls(pg_server, role).items():
        with pytest.raises(DatabaseError) as e:
            EventStore.open(url)
        message = str(e.value)
        assert "cannot connect" in message and not leaks(message, password), (how, message)
        if how.startswith(("unparsable", "misread")):
            assert PERCENT_HINT in message and "%2F" in message, (how, message)
        else:
            assert PERCENT_HINT not in message, (how, message)
        for argv, how_run in ((["--db", url, "sessions"], run_process), (["copy", str(src), url], run),
                              (["copy", url, str(src)], run)):
            p = how_run(*argv, cwd=tmp_path)
            out = p.stdout + p.stderr
            assert p.returncode == 1 and "cannot connect" in p.stderr and not leaks(out, password), (how, argv, out)
            assert p.stderr.startswith(f"error: postgresql://{role[0]}@127.0.0.1:"), (how, argv, out)
    assert [n for n in os.listdir(tmp_path) if not n.startswith("src.db")] == []  # none named after a URL


def test_a_url_that_connects_is_shown_without_its_password(pg_server, role, tmp_path):
    user, db = role
    shown = f"postgresql://{user}@127.0.0.1:{pg_server.port}/{db}"
    src = new_sqlite_store(tmp_path / "src.db")
    with EventStore.open(str(src)) as store:
        store.create_session("s").append("note", {})
    encoded = f"postgresql://{user}:{quote(PASSWORD, safe='')}@127.0.0.1:{pg_server.port}/{db}"
    question = f"postgresql://{user}:Kw7?Zx9Qv3@127.0.0.1:{pg_server.port}/{db}"  # libpq reads a raw ? right
    # a parameter's value may hold an @ too: the user:password part ends before it
    at_in_parameter = shown + "?password=Kw7@Hy5Tb8"
    for url in (encoded, question, shown + f"?password={quote(PASSWORD, safe='')}", at_in_parameter):
        with EventStore.open(url) as store:
            assert store.display == shown
        p = run("copy", str(src), url, cwd=tmp_path)
        assert p.returncode == 0 and p.stderr.endswith(f"written to {shown}\n"), p.stderr
        p = run("--db", url, "sessions", cwd=tmp_path)
        assert p.returncode == 0 and "s" in p.stdout.split(), p.stdout + p.stderr
        p = run("--db", url, "init", cwd=tmp_path)
        assert p.returncode == 0 and p.stdout.startswith(f"{shown}: ready"), p.stdout + p.stderr
        out = p.stdout + p.stderr
        assert not leaks(out, "Kw7?Zx9Qv3") and not leaks(out, "Kw7@Hy5Tb8") and not leaks(out), out


KEYWORD_STRINGS = [
    "host=127.0.0.1 port=55432 user=u password=Kw7secret dbname=agents",
    "dbname=agents password='Kw7 secret' host=127.0.0.1",
    "  user = u password=Kw7\\ secret",
    "dbname=agents",
]


@pytest.mark.parametrize("value", KEYWORD_STRINGS)
def test_a_libpq_keyword_value_string_is_refused_everywhere(value, tmp_path):
    src = new_sqlite_store(tmp_path / "src.db")
    with EventStore.open(str(src)) as store:
        store.create_session("s").append("note", {})
    runs = [run("copy", str(src), value, cwd=tmp_path), run("copy", value, str(src), cwd=tmp_path),
            run("--db", value, "sessions", cwd=tmp_path), run("--db", value, "init", cwd=tmp_path),
            run("sessions", cwd=tmp_path, env={"EVENTSTORE_DB": value}),
            run("demo", cwd=tmp_path, env={"EVENTSTORE_DB": value})]
    for p in runs:
        assert p.returncode == 1 and p.stdout == "", p.stdout + p.stderr
        assert p.stderr.startswith("error: ") and "a libpq keyword/value string" in p.stderr, p.stderr
        assert "postgresql://user@host:port/db" in p.stderr and "secret" not in p.stderr, p.stderr
    with pytest.raises(DatabaseError) as e:
        EventStore.open(value)
    assert "postgresql://user@host:port/db" in str(e.value) and "secret" not in str(e.value)
    findings = [f.message for f in integrity.verify_database(value).findings]
    assert len(findings) == 1 and "a libpq keyword/value string" in findings[0] and "secret" not in findings[0]
    assert [n for n in os.listdir(tmp_path) if not n.startswith("src.db")] == []  # none named after it


def test_a_file_name_with_an_equals_sign_is_still_a_file(tmp_path):
    p = run("--db", "data=1.db", "init", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("data=1.db: ready"), p.stdout + p.stderr
    p = run("--db", "./host=1.db", "init", cwd=tmp_path)  # a keyword: ./ makes it a file
    assert p.returncode == 0, p.stdout + p.stderr
    assert {"data=1.db", "host=1.db"} <= set(os.listdir(tmp_path))


def test_demo_hint_omits_db_when_it_came_from_the_environment(pg_server, role, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "THINK_S", 0)  # the scripted model's pace (two seconds of sleep a run, three runs): not what is tested here
    monkeypatch.setattr(demo, "CHUNK_S", 0)
    user, db = role
    url = f"postgresql://{user}:{quote(PASSWORD, safe='')}@127.0.0.1:{pg_server.port}/{db}"
    shown = f"postgresql://{user}@127.0.0.1:{pg_server.port}/{db}"
    p = run("demo", cwd=tmp_path, env={"EVENTSTORE_DB": url})
    assert p.returncode == 0 and f" in {shown}\n" in p.stdout and not leaks(p.stdout + p.stderr), p.stdout + p.stderr
    next_line = p.stdout.splitlines()[-1]
    m = re.fullmatch(r"Next: eventstore messages (\S+)   \|   eventstore export (\S+)", next_line)
    assert m and m[1] == m[2], next_line
    p = run("messages", m[1], cwd=tmp_path, env={"EVENTSTORE_DB": url})  # the printed command, as printed
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    # given with --db, the hint names it (without the password)
    r = CliRunner().invoke(cli, ["--db", url, "demo"], catch_exceptions=False)
    assert r.exit_code == 0 and f"Next: eventstore --db {shown} messages " in r.output, r.output
    assert not leaks(r.output)
    # from the environment, a file too is left to the variable
    r = CliRunner(env={"EVENTSTORE_DB": str(tmp_path / "f.db")}).invoke(cli, ["demo"], catch_exceptions=False)
    assert r.exit_code == 0 and "Next: eventstore messages " in r.output, r.output


def test_an_sslpassword_and_a_url_that_is_not_utf8_show_no_secret(tmp_path):
    """``sslpassword=`` (the client key's) is hidden like ``password=``; a URL holding a byte
    that is not UTF-8 is one line that says so, without its password."""
    url = "postgresql://u:Secr3tPW@127.0.0.1:1/db?sslpassword=SSLSECRET&application_name=x"
    r = run_process("--db", url, "sessions", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error: postgresql://u@127.0.0.1:1/db?application_name=x: "
                                                     "cannot connect: "), r.stderr
    assert "SSLSECRET" not in r.stderr and "Secr3tPW" not in r.stderr
    with pytest.raises(DatabaseError) as e:
        EventStore.open(url)
    assert "SSLSECRET" not in str(e.value)
    proc = subprocess.run([sys.executable, "-m", "eventstore", "--db",
                           b"postgresql://u:Secr3t\xffPW@127.0.0.1:1/db", "sessions"],
                          capture_output=True, cwd=tmp_path, timeout=120)
    assert (proc.returncode, proc.stderr) == (1, b"error: postgresql://u@127.0.0.1:1/db: cannot connect: the URL is "
                                                 b"not UTF-8 text\n")
