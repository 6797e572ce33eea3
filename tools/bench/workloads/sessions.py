"""The sessions listing as a user runs it: ``eventstore sessions``, and ``eventstore --help``,
each against a plain Python script doing the same query (the start-up a command costs)."""

from __future__ import annotations

import sys

from eventstore import EventStore

from .. import data
from ..harness import ES, command, run_command

SUMMARY = "`eventstore sessions` (sessions of 5 events) and `--help` as commands, against a plain script"
NAME = "Sessions listing (commands)"
QUERY = ("SELECT s.id, s.created_at, coalesce((SELECT max(seq) + 1 FROM events WHERE session_id = s.id), 0), "
         "(SELECT ts FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) FROM sessions AS s")
#: the plain script: the query, each row printed with its times as dates (DRIVER is filled in)
SCRIPT = """import DRIVER, sys, datetime
when = datetime.datetime.fromtimestamp
for r in DRIVER.connect(sys.argv[1]).execute(sys.argv[2]):
    print(r[0], r[2], when(r[1]), r[3] and when(r[3]))
"""


def run(bench) -> None:
    """Time the listing and --help as commands against plain scripts."""
    count = bench.pick(200, 20_000)
    db = bench.target("sessions")
    with EventStore.open(db) as store:
        for k in range(count):
            store.create_session(f"s{k:06d}").append_many(data.take(data.agent_events(k), 5))
    script = SCRIPT.replace("DRIVER", "sqlite3" if bench.backend == "sqlite" else "psycopg")
    plain = "plain Python script"
    bench.measure(NAME, f"sessions: {count:,} sessions of 5 events",
                  {ES: lambda: run_command(command("sessions", db=db)),
                   plain: lambda: run_command([sys.executable, "-c", script, db, QUERY])},
                  "command", {ES: "eventstore sessions (a table), stdout to /dev/null",
                              plain: "the same query, one print a row"})
    if bench.quick:  # (the smoke test's time is mostly interpreters starting)
        return
    bench.measure(NAME, "--help", {ES: lambda: run_command(command("--help", db=db)),
                                   plain: lambda: run_command([sys.executable, "-c", "import sqlite3"])},
                  "command", {ES: "eventstore --help", plain: "python -c 'import sqlite3'"})
