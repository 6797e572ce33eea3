"""Schema versions and the names both backends share.

The schema itself is defined by the migrations: one Alembic history per database
(``migrations/sqlite/versions/`` and ``migrations/postgres/versions/``, with the same
revision ids: a frozen baseline written out in full, then one revision per change; see
:func:`migrations_path`); docs/schema.md describes it column by column. Tables:

* ``sessions(id, created_at, meta, meta_hash)``: one row per session; ``created_at`` is
  seconds since the epoch (float); ``meta`` the JSON object text of the ``session/meta``
  line's other keys; ``meta_hash`` covers ``created_at`` and ``meta``
  (:func:`eventstore.log.chain.session_hash`), checked by ``verify``.
* ``events(position, session_id, seq, type, ts, payload, hash, event_id)``: the append-only
  log, keyed by ``(session_id, seq)`` (dense per session), ``position`` the dense global
  position in commit order, ``payload`` canonical JSON object text, ``hash`` the chained
  hash (:mod:`eventstore.log.chain`), ``event_id`` the payload's idempotency key (generated,
  unique per session).
* ``importing(session_id, first_position, owner, started_at)``: sessions whose chunked
  import has not finished (hidden from every reader; not part of the log, rows deleted when
  the import completes).
* views ``messages`` (the projection), ``tool_calls``, ``turns``, ``session_summary``.
"""

from __future__ import annotations

from .errors import DatabaseError, SchemaOutdated

#: The Alembic revision this package's code expects; opening a database upgrades to it.
SCHEMA_REVISION = "0370"

#: Revisions that a read-only open reads as they are, without asking for an upgrade: they
#: may differ from :data:`SCHEMA_REVISION` only in what applies to writes. None does now:
#: 0270 changed the projection's views and 0310 added the salt column every read of events
#: selects, so a read-only open of an older database asks for the upgrade.
READ_COMPATIBLE_REVISIONS: frozenset[str] = frozenset()

#: The last revision of the first release (its history 0001-0007 was replaced by the
#: baseline 0008): a database stamped with it is upgraded in place on a writable open.
LEGACY_REVISIONS = frozenset({"0007"})


#: The folder of each database's Alembic scripts (env.py and versions/) under ``migrations``.
MIGRATION_FOLDERS = {"sqlite": "sqlite", "postgresql": "postgres"}


def migrations_path(dialect: str) -> str:
    """The Alembic script location of ``dialect``'s databases ("sqlite" or "postgresql"):
    ``<dialect folder>`` in the installed ``eventstore/migrations`` (built from the
    repository's top-level ``migrations/``), or in that folder of a source checkout. Each
    database has a history of its own, with the same revision ids; a released revision
    never changes (tests/backends/test_migrations.py pins their hashes)."""
    from pathlib import Path  # (imported when used: eventstore's start-up)

    folder = MIGRATION_FOLDERS[dialect]
    here = Path(__file__).resolve().parent
    for base in (here / "migrations", here.parent / "migrations"):
        if (base / folder / "env.py").is_file():
            return str(base / folder)
    raise DatabaseError(f"the migration scripts are missing (looked in {here / 'migrations' / folder})")


def outdated(name: str, revision: str, who: str = "") -> SchemaOutdated:
    """The error of a read-only open of ``name``, an eventstore database at the older
    ``revision``: what upgrades it (``who``: whose open can, e.g. ``" as its owner"``)."""
    return SchemaOutdated(f"{name} is at schema revision {revision!r}, older than this eventstore's "
                          f"{SCHEMA_REVISION!r}: open it once for writing ('eventstore init'{who}) to "
                          f"upgrade it", revision, SCHEMA_REVISION)
