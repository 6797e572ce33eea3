"""PostgreSQL: a batch of events is checked once per statement, not with queries per row.

Revision ID: 0240
Revises: 0230
Create Date: 2026-12-02

Until now ``events_guard_insert`` ran three queries for every row (the position lock, the
session's last seq, the largest position) and its payload check, and the foreign key
``events_session_fkey`` ran a fourth (a ``FOR KEY SHARE`` lock of the sessions row): 70 %
of the server's time for a batch of 100 events (``EXPLAIN ANALYZE``: 2.6 ms of 4 ms).
Now:

* ``events_guard_insert`` still checks a row with those queries (ES001, ES002, ES003,
  ES009; the lock first), but only a row that does not continue the row checked or
  accepted just before it in the same transaction. What it accepted is kept in the
  transaction-local setting ``eventstore.next``: ``'<next position> <next seq> <session
  id>'``. The trigger's ``WHEN`` clause lets a row through without calling the function
  when its position, seq and session are exactly those and its payload cannot hold a
  reserved key (the test the function makes before it parses a payload: a key starting
  with ``ty``, ``ts``, ``se``, ``ev`` or an escape), and moves the setting on by one. So the
  first row of a transaction (a single append) is checked as before, and the other 99 of
  a batch cost a few expressions each. The setting rolls back with a rolled-back statement
  or savepoint, as the rows do.
* ``position`` defaults to the setting's position (NULL when it is not set: the function
  fills it in, as before).
* ``events_guard_check`` (AFTER INSERT, once per statement, over the statement's rows as a
  transition table) proves what the setting only suggests, so that a setting forged with
  ``set_config`` (or an explicit position or seq that happens to match one) can get a
  statement refused, never stored: after taking the position lock it checks that the
  statement's positions are exactly the n numbers following a stored position (or 1..n),
  that each session's seqs are exactly the numbers following a stored seq of that
  session (or 0..), and that every session exists (ES003, ES002, ES001). Together with the
  primary key and ``events_key`` (no row may take a stored number) that is the invariant
  the row checks kept: positions 1..N and seqs 0..n-1 with no gap. It also sends the
  followers' NOTIFY: ``events_notify`` (trigger and function) is dropped.
* ``events_session_fkey`` is dropped: ``events_guard_insert`` and ``events_guard_check``
  refuse an event of an unknown session (ES001), and sessions cannot be deleted
  (``sessions_guard_delete``, ``sessions_guard_truncate``); ``verify`` reports events
  whose session is missing.

SQLite: nothing changes.
"""

revision = "0240"
down_revision = "0230"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing changes on SQLite."""


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
