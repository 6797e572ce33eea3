"""``eventstore search``: full-text search, hits as a table or JSON."""

from __future__ import annotations

import json
import os
import re
import shutil

import click

from eventstore.errors import DatabaseError

from .base import TEXT
from .common import one_line, open_store, out_bytes, stderr_is_terminal
from .table import fold, print_table, show_marks, styled, text_width
from .tailview import CONTROL_OR_NEWLINE


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
    """Full-text search over message content, tool call arguments and tool results.

    Every word of QUERY must occur (a word ending in * matches as a prefix). Hits come best
    first (BM25 on SQLite, ts_rank on PostgreSQL, among the newest 2,000 matches), each
    with its session, seq, type and a snippet around the match. The index is brought up to
    date first: the events stored since the last search are indexed (with a progress line
    when there are many); a reader that may not write it searches the rest unindexed.
    """
    from eventstore.backends import is_postgres_url
    from eventstore.search import MARK_END, MARK_START, RANK_WINDOW, catch_up, count
    from eventstore.search import search as run_search

    db = ctx.find_root().obj["db"]
    # An SQLite file we may only read is searched as it is (search() scans what is not indexed).
    readonly = not is_postgres_url(db) and not (os.path.isfile(db) and os.access(db, os.W_OK))
    store = open_store(ctx, readonly=readonly)
    if not raw and not query.split():
        raise click.UsageError("QUERY is empty: give the words to look for")
    if stderr_is_terminal():
        def progress(done: int, total: int) -> None:
            click.echo(f"\rindexing the events stored since the last search: {done:,}/{total:,}", err=True, nl=False)
    else:
        progress = None
    try:
        if catch_up(store, progress) and progress is not None:
            click.echo("", err=True)
    except DatabaseError:
        pass  # a file we may only read: search() scans what is not indexed
    hits = run_search(store, query, session_id=session_id, type=type_, limit=limit, raw=raw)
    if len(hits) == limit and not as_json:
        # counted up to the ranking's window only: a common word is not counted through all its matches
        n = count(store, query, session_id=session_id, type=type_, raw=raw, at_most=RANK_WINDOW + 1)
        if n > limit:
            many = f"more than {RANK_WINDOW:,}" if n > RANK_WINDOW else f"{n:,}"
            click.echo(f"{many} matches; the best {limit} shown" + (f" (ranked among the newest {RANK_WINDOW:,})"
                                                                    if n > RANK_WINDOW else ""), err=True)
    if as_json:
        click.echo(json.dumps([{"session_id": h.session_id, "seq": h.seq, "type": h.type, "ts": h.ts,
                                "snippet": h.snippet.replace(MARK_START, "**").replace(MARK_END, "**"),
                                "score": h.score} for h in hits], ensure_ascii=False))
        return
    if not hits:
        click.echo("no match")
        return
    marks = (MARK_START, MARK_END)
    rows = [[one_line(h.session_id), str(h.seq), one_line(h.type),
             "".join(p if p in marks else CONTROL_OR_NEWLINE.sub(" ", p)
                     for p in re.split(f"([{MARK_START}{MARK_END}])", h.snippet))] for h in hits]
    out = out_bytes()
    # on a terminal (or with $COLUMNS) the snippets fold to its width; into a pipe or a file, each hit is one line
    width = shutil.get_terminal_size().columns if out.isatty() or os.environ.get("COLUMNS") else None
    header = ["SESSION", "SEQ", "TYPE", "SNIPPET"]
    fixed = sum(max(text_width(c) for c in [header[i], *(r[i] for r in rows)]) + 2 for i in range(3))
    if width is not None and width - fixed < 40:  # too narrow for a snippet column: each snippet below its hit
        style = styled(out)
        lines = []
        for sid, seq, type_, snippet in rows:
            head = f"{sid}  seq {seq}  {type_}"
            lines.append(f"\x1b[1m{head}\x1b[0m" if style else head)
            lines.extend("    " + show_marks(line, marks, style)
                         for line in fold(snippet, width - 4, marks).split("\n"))
        out.write(("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))
    else:
        print_table(out, header, rows, right={1}, strip=True, layout_rows=None,
                    marks=marks, width=width)
    out.flush()
