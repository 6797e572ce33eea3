"""PostgreSQL's search index becomes a derived table caught up by the searcher, as on SQLite.

Revision ID: 0200
Revises: 0150
Create Date: 2026-12-02

Revision 0100 indexed the message events on PostgreSQL with a GIN expression index on
``events`` (``es_search_vector(payload)``): computing the vector and writing the GIN entries
inside every append made a single append of a message event about 4.6 times as slow
(3.4 ms against 0.74 ms), against a budget of 15%. This revision drops that index and
keeps the vectors where SQLite keeps its FTS5 index: in a table derived from the log,
brought up to date by whoever searches (:func:`eventstore.search.catch_up`), so appends and
imports pay nothing.

* ``events_search(position, session_id, type, tsv)``: one row per message event
  (``user/message``, ``assistant/message``, ``tool/result``) at or below
  ``events_search_state.indexed_through``, ``position`` = ``events.position``, ``tsv`` =
  ``es_search_vector(payload)`` (revision 0100); a GIN index on ``tsv``, and a B-tree on
  ``(session_id, position)`` for searches within one session.
* ``events_search_state(indexed_through)``: the position up to which every message event
  is in ``events_search`` (one row).
* The table is filled here for the events already stored (the GIN index is built after the
  rows, which is faster than keeping it while they go in).
* Roles that may read ``events`` may read both tables; roles that may insert into
  ``events`` (the writer of ``eventstore roles``) may insert into ``events_search`` and
  update the state, so that their searches catch up. The log itself is not touched.

SQLite: nothing changes (its index was already caught up by the searcher since 0100).
"""

revision = "0200"
down_revision = "0150"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing changes on SQLite (its index was caught up by the searcher since 0100)."""


def downgrade() -> None:
    raise NotImplementedError("the event log is append-only: there is no downgrade")
