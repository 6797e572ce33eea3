"""The body of ``eventstore search``, written without click (:func:`read_hits`): the click
command (cli/search.py) runs it, and so does ``eventstore search`` without importing click
(:func:`plain_search`, through :mod:`eventstore.cli.fast`), so that a search starts
without click's import (docs/benchmarks.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import eventstore.search as search_lib
from eventstore.core.store import EventStore
from eventstore.errors import DatabaseError
from eventstore.search import MARK_END, MARK_START, catch_up, count
from eventstore.search import search as run_search

from . import fast, terminal_columns
from .common import one_line, out_bytes, stderr_is_terminal
from .table import fold, print_table, show_marks, styled, text_width
from .tailview import CONTROL_OR_NEWLINE

Echo = Callable[..., object]  # click.echo's signature: echo(message, err=False, nl=True)


def readonly(db: str) -> bool:
    """Whether the search opens ``db`` read-only: an SQLite file we may only read is searched
    as it is (the search scans what is not indexed)."""
    from eventstore.backends import is_postgres_url

    return not is_postgres_url(db) and not (os.path.isfile(db) and os.access(db, os.W_OK))


def read_hits(store: EventStore, query: str, session_id: str | None, type_: str | None, limit: int, raw: bool,
              as_json: bool, echo: Echo) -> Callable[[Echo], None]:
    """The search of ``store``, done (the index brought up to date first, with a progress line
    through ``echo`` on a terminal): a function that writes the hits with ``echo``."""
    if stderr_is_terminal():
        def progress(done: int, total: int) -> None:
            echo(f"\rindexing the events stored since the last search: {done:,}/{total:,}", err=True, nl=False)
    else:
        progress = None
    try:
        if catch_up(store, progress) and progress is not None:
            echo("", err=True)
    except DatabaseError:
        pass  # a file we may only read: search() scans what is not indexed
    hits = run_search(store, query, session_id=session_id, type=type_, limit=limit, raw=raw)
    n = 0
    window = search_lib.RANK_WINDOW  # (read at the call, as search() reads it)
    if len(hits) == limit and not as_json:
        # counted up to the ranking's window only: a common word is not counted through all its matches
        n = count(store, query, session_id=session_id, type=type_, raw=raw, at_most=window + 1)

    def write(echo: Echo) -> None:
        if n > limit:
            many = f"more than {window:,}" if n > window else f"{n:,}"
            echo(f"{many} matches; the best {limit} shown" + (f" (ranked among the newest {window:,})"
                                                              if n > window else ""), err=True)
        if as_json:
            import json

            echo(json.dumps([{"session_id": h.session_id, "seq": h.seq, "type": h.type, "ts": h.ts,
                              "snippet": h.snippet.replace(MARK_START, "**").replace(MARK_END, "**"),
                              "score": h.score} for h in hits], ensure_ascii=False))
        elif not hits:
            echo("no match")
        else:
            print_hits(hits)
    return write


def print_hits(hits: list) -> None:
    """The hits as a table on stdout (each snippet below its hit on a narrow terminal)."""
    marks = (MARK_START, MARK_END)
    rows = [[one_line(h.session_id), str(h.seq), one_line(h.type),
             "".join(p if p in marks else CONTROL_OR_NEWLINE.sub(" ", p)
                     for p in re.split(f"([{MARK_START}{MARK_END}])", h.snippet))] for h in hits]
    out = out_bytes()
    # on a terminal (or with $COLUMNS) the snippets fold to its width; into a pipe or a file, each hit is one line
    width = terminal_columns() if out.isatty() or os.environ.get("COLUMNS") else None
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


def plain_search(db: str, durability: str, query: str, session_id: str | None, type_: str | None, limit: int,
                 raw: bool, as_json: bool) -> Callable[[], None] | None:
    """``eventstore search`` without click (:mod:`eventstore.cli.fast`): the search of ``db``
    done, and a function that writes the hits; None for an empty query (click's usage error)."""
    if not raw and not query.split():
        return None
    # A search writes only its index: it leaves a database an older eventstore wrote as it is
    # (SchemaOutdated), as the other reading commands do, so that the older eventstore's
    # processes can go on using it.
    with EventStore.open(db, readonly=readonly(db), upgrade=False, durability=durability) as store:
        write = read_hits(store, query, session_id, type_, limit, raw, as_json, fast.echo)
    return lambda: write(fast.echo)
