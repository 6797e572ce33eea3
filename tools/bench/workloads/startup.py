"""Start-up: ``eventstore --help`` and ``eventstore sessions`` on a small database as a user
runs them (a fresh interpreter each time), against a plain Python script with the same
driver: what a command costs before it does any work."""

from __future__ import annotations

import sys

from eventstore import EventStore

from .. import data
from ..harness import ES, command, process_figures
from .sessions import QUERY, plain_script

SUMMARY = "`eventstore --help` and `sessions` on 10 sessions as commands, against a plain script (same driver)"
NAME = "Start-up (commands)"
SESSIONS = 10


def run(bench) -> None:
    """Time --help and the listing of a small database against plain scripts."""
    db = bench.target("startup")
    with EventStore.open(db) as store:
        for k in range(SESSIONS):
            store.create_session(f"s{k:06d}").append_many(data.take(data.agent_events(k), 5))
    driver = "sqlite3" if bench.backend == "sqlite" else "psycopg"
    plain = "plain Python script"
    process_figures(bench, NAME, "--help",
                    {ES: command("--help"),
                     plain: [sys.executable, "-c", f"import {driver}"]},
                    {ES: "eventstore --help", plain: f"python -c 'import {driver}'"})
    process_figures(bench, NAME, f"sessions: {SESSIONS} sessions of 5 events",
                    {ES: command("sessions", db=db), plain: [sys.executable, "-c", plain_script(bench), db, QUERY]},
                    {ES: "eventstore sessions (a table)", plain: f"the same query ({driver}), one print a row"})
