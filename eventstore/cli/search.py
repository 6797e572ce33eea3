"""``eventstore search``: full-text search, hits as a table or JSON. The body is
:mod:`eventstore.cli.searching`, which also runs without click."""

from __future__ import annotations

import click

from .base import TEXT
from .common import open_store
from .searching import read_hits, readonly


@click.command()
@click.argument("query", metavar="QUERY", type=TEXT)
@click.option("--session", "session_id", metavar="ID", type=TEXT, help="Only hits in this session.")
@click.option("--type", "type_", metavar="TYPE", type=TEXT,
              help="Only events of this type (user/message, assistant/message, tool/result).")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True, help="At most N hits.")
@click.option("--raw", is_flag=True, help="QUERY is the database's own syntax as it stands: FTS5 on SQLite "
              '("a b" OR c*, NEAR(a b)), to_tsquery on PostgreSQL (a & (b | c:*)).')
@click.option("--json", "as_json", is_flag=True, help="A JSON array of hits (matches marked **like this**).")
@click.pass_context
def search(ctx: click.Context, query: str, session_id: str | None, type_: str | None, limit: int, raw: bool,
           as_json: bool) -> None:
    """Full-text search over message content, tool call arguments, tool results and thinking.

    Every word of QUERY must occur (a word ending in * matches as a prefix). Hits come best
    first (BM25 on SQLite, ts_rank on PostgreSQL, among the newest 2,000 matches), each
    with its session, seq, type and a snippet around the match. The index is brought up to
    date first: the events stored since the last search are indexed (with a progress line
    when there are many); a reader that may not write it searches the rest unindexed.
    """
    store = open_store(ctx, readonly=readonly(ctx.find_root().obj["db"]), upgrade=False)  # (see plain_search)
    if not raw and not query.split():
        raise click.UsageError("QUERY is empty: give the words to look for")
    read_hits(store, query, session_id, type_, limit, raw, as_json, click.echo)(click.echo)
