"""The sessions listing as a user runs it: ``eventstore sessions`` of many sessions of 5
events each, against a plain Python script doing the same query with the same driver."""

from __future__ import annotations

import sys

from eventstore import EventStore

from .. import data
from ..harness import ES, command, process_figures

SUMMARY = "`eventstore sessions` of 20,000 sessions of 5 events as a command, against a plain script"
NAME = "Sessions listing (commands)"
QUERY = ("SELECT s.id, s.created_at, coalesce((SELECT max(seq) + 1 FROM events WHERE session_id = s.id), 0), "
         "(SELECT ts FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) FROM sessions AS s")
#: the plain script: the query, each row printed with its times as dates (DRIVER is filled in)
SCRIPT = """import DRIVER, sys, datetime
when = datetime.datetime.fromtimestamp
for r in DRIVER.connect(sys.argv[1]).execute(sys.argv[2]):
    print(r[0], r[2], when(r[1]), r[3] and when(r[3]))
"""


def plain_script(bench) -> str:
    """The plain script for the run's backend."""
    return SCRIPT.replace("DRIVER", "sqlite3" if bench.backend == "sqlite" else "psycopg")


def run(bench) -> None:
    """Time the listing as a command against the plain script."""
    count = bench.pick(200, 20_000)
    db = bench.target("sessions")
    with EventStore.open(db) as store:
        for k in range(count):
            store.create_session(f"s{k:06d}").append_many(data.take(data.agent_events(k), 5))
    plain = "plain Python script"
    process_figures(bench, NAME, f"sessions: {count:,} sessions of 5 events",
                    {ES: command("sessions", db=db), plain: [sys.executable, "-c", plain_script(bench), db, QUERY]},
                    {ES: "eventstore sessions (a table), stdout to /dev/null",
                     plain: "the same query, one print a row"})
