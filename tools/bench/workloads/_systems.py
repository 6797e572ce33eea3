"""The baselines of each backend, as the workloads need them."""

from __future__ import annotations

from ..peers import agents_sdk, eventsourcing_lib, raw_psycopg, raw_sqlite


def raw_log(bench, name: str):
    """A raw driver's log of one session, on a database of its own (SQLite) or beside the
    store's tables (PostgreSQL: the same events table); returns (log, system name, closer)."""
    if bench.backend == "sqlite":
        conn = raw_sqlite.connect(bench.target(f"{name}-raw"))
        return raw_sqlite.Log(conn, name), raw_sqlite.NAME, conn.close
    from eventstore import EventStore

    url = bench.target(f"{name}-raw")
    EventStore.open(url).close()  # the schema, as the store makes it
    conn = raw_psycopg.connect(url, bench.durability)
    return raw_psycopg.Log(conn, name), raw_psycopg.NAME, conn.close


def sqlite_peers(bench) -> dict[str, str]:
    """The SQLite peers and why each one is skipped ('' when it runs)."""
    if bench.backend != "sqlite":
        return {}
    if not bench.peers:
        return {agents_sdk.NAME: "--no-peers", eventsourcing_lib.NAME: "--no-peers"}
    return {agents_sdk.NAME: agents_sdk.available(), eventsourcing_lib.NAME: eventsourcing_lib.available()}


def store_settings(store) -> str:
    """What an eventstore store's commits run: on SQLite ``journal_mode`` and ``synchronous``
    read back from its connection; on PostgreSQL the ``synchronous_commit`` level each
    append's commit waits for ("off" with ``may-lose-recent``)."""
    backend = getattr(store, "_backend", None)
    if backend is not None and backend.name == "postgresql":
        return f"synchronous_commit={backend._full_level or 'off'} at each commit"
    conn = getattr(backend, "_conn", None)
    if conn is None or not hasattr(conn, "in_transaction") or not hasattr(conn, "total_changes"):
        return ""
    return agents_sdk.settings(conn)
