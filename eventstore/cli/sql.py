"""``eventstore sql``: one read-only query, its rows as a table, JSON or CSV."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator

import click

from .base import TEXT, fail
from .common import CONTROL, UNSAFE, finite_seconds, out_bytes, plain, printable, shown
from .table import print_table
from .tailview import escape_char

TABLE_CELL_MAX = 300  # characters of a value shown in a table cell; --json and --csv show all

def _json_value(value: object) -> object:
    """A query value as --json writes it: a BLOB as lower-case hex; a REAL that overflowed to
    Infinity as null, as JSON.stringify writes it (JSON has no Infinity; SQLite has no NaN)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _unique(columns: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        out.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return out


def _query_word(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """QUERY as given. The sql command takes a word it does not know as an option for its
    QUERY (one that opens with an SQL comment, ``-- note``); a word without a space, such as
    ``--jsn``, is a mistyped option, and is reported as one."""
    if value.startswith("-") and value != "-" and not any(c.isspace() for c in value):
        names = [n for p in ctx.command.params for n in getattr(p, "opts", ()) if n.startswith("-")]
        raise click.NoSuchOption(value, possibilities=names, ctx=ctx)
    return value


# Options may come before or after QUERY; a word that is no option of sql is QUERY (a query
# may open with an SQL comment, "-- note").
@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("query", metavar="QUERY", type=TEXT, callback=_query_word)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of objects, one per row.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row.")
@click.option("--timeout", type=click.FloatRange(min=0), default=30, show_default=True, metavar="SECONDS",
              callback=finite_seconds,
              help="Stop the query after SECONDS of work (0: no limit).")
@click.option("--max-memory", type=click.IntRange(min=1), default=1024, show_default=True, metavar="MIB",
              help="Stop the query when SQLite needs more than MIB mebibytes of memory.")
@click.pass_context
def sql(ctx: click.Context, query: str, as_json: bool, as_csv: bool, timeout: float, max_memory: int) -> None:
    """Run one read-only SQL QUERY (- reads it from stdin) and print the rows.

    The database is opened read-only: writes, DDL, ATTACH and PRAGMAs that set something are
    refused. Tables and views: events, sessions, messages, tool_calls, turns, session_summary,
    usage (docs/schema.md). Prints a table, or with --json a JSON array of objects, with --csv CSV;
    NULL is null in JSON, empty in CSV; a BLOB is lower-case hex; an infinite REAL (1e400)
    is null in JSON, as JSON.stringify writes it. On a terminal, control characters in
    tables and CSV are shown as escapes. A table's column widths come from its first 1,000
    rows: a wider value in a later row widens its own line only. A query is stopped after
    --timeout seconds and when it needs more than --max-memory MiB.
    """
    from eventstore.backends import backend_class
    from eventstore.errors import QueryError
    from eventstore.schema import READ_COMPATIBLE_REVISIONS, SCHEMA_REVISION

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    fmt = "json" if as_json else "csv" if as_csv else None
    if query == "-":
        data = sys.stdin.buffer.read()
        try:
            query = data.decode("utf-8")
        except UnicodeDecodeError as e:
            fail(f"-: the query is not UTF-8 text (byte 0x{data[e.start]:02X} at byte {e.start + 1})")
    conn = backend_class(ctx.obj["db"]).query_connection(ctx.obj["db"], timeout=timeout or None,
                                                         max_memory=max_memory * 1024 * 1024)
    ctx.call_on_close(conn.close)
    try:
        revision = next(conn.query("SELECT version_num FROM alembic_version")[1], (None,))[0]
    except QueryError:  # not an eventstore database, or a role that may not read it: the query will say
        pass
    else:
        if revision != SCHEMA_REVISION and revision not in READ_COMPATIBLE_REVISIONS:  # (those read the same)
            click.echo(f"warning: the database is at schema revision {revision or 'none'}, not "
                       f"{SCHEMA_REVISION}: run `eventstore init` to upgrade it (views may be missing)", err=True)
    try:
        _print_rows(conn, query, fmt, max_value=max_memory * 1024 * 1024 // SQL_VALUE_SHARE,
                    deadline=time.monotonic() + timeout if timeout else None)
    except QueryError as e:
        if e.limit == "time":
            fail(f"the query was stopped after --timeout {timeout:g} s (give a larger --timeout, or 0 for no limit)")
        if e.limit == "memory":
            fail(f"the query was stopped: it needed more than --max-memory {max_memory} MiB")
        raise


#: Printing a value takes a few times its size (hex for a BLOB, escapes, the line around it):
#: a value may hold at most this share of --max-memory.
SQL_VALUE_SHARE = 8


def _bounded(rows, max_value: int, deadline: float | None):
    """``rows``, raising :class:`QueryError` (``limit`` memory or time) at a value over
    ``max_value`` bytes, or once ``deadline`` (``time.monotonic()``) passes while printing."""
    from eventstore.errors import QueryError

    for row in rows:
        for v in row:
            if isinstance(v, (str, bytes)) and len(v) > max_value:
                raise QueryError(f"a value of {len(v):,} characters or bytes is more than this command "
                                 f"prints within its memory limit", "memory")
        if deadline is not None and time.monotonic() > deadline:
            raise QueryError("the time limit passed while the rows were printed", "time")
        yield row


def _print_rows(conn, query: str, fmt: str | None, max_value: int = 1 << 62, deadline: float | None = None) -> None:
    """Run ``query`` and write its rows to stdout as ``fmt`` (json, csv, or a table); a
    value over ``max_value`` bytes, or printing past ``deadline``, raises :class:`QueryError`."""
    columns, rows = conn.query(query)
    rows = _bounded(rows, max_value, deadline)
    out = out_bytes()
    terminal = out.isatty()
    if fmt == "json":
        names = _unique(columns)
        out.write(b"[")
        sep = b"\n"
        for row in rows:
            obj = dict(zip(names, map(_json_value, row), strict=True))
            # A lone surrogate can only stand inside a JSON string: its escape keeps the value.
            out.write(sep + printable(json.dumps(obj, ensure_ascii=False)).encode("utf-8"))
            sep = b",\n"
        out.write(b"\n]\n" if sep != b"\n" else b"]\n")
    elif fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for i, row in enumerate(rows):
            cells = ["" if v is None else plain(v) for v in row]
            if terminal:  # a terminal runs what it is sent: ESC, BEL, C1 and bidi controls go as escapes
                cells = [UNSAFE.sub(escape_char, c) if isinstance(c, str) else c for c in cells]
            w.writerow(cells)
            if i % 1000 == 999:
                out.write(buf.getvalue().encode("utf-8"))
                buf.seek(0)
                buf.truncate()
        out.write(buf.getvalue().encode("utf-8"))
    else:
        _print_table(columns, rows)
    out.flush()


def _table_cells(row: tuple) -> tuple[list[str | None], int]:
    """A row's values as its table cells show them (None for NULL), and how many were cut."""
    cells: list[str | None] = []
    cut = 0
    for v in row:
        if v is None:
            cells.append(None)
            continue
        text = CONTROL.sub(escape_char, str(plain(v) if isinstance(v, (str, bytes)) else v))
        if len(text) > TABLE_CELL_MAX:
            text = text[:TABLE_CELL_MAX] + f"… ({len(text) - TABLE_CELL_MAX} more)"
            cut += 1
        cells.append(text)
    return cells, cut


def _print_table(columns: list[str], rows: Iterator[tuple]) -> None:
    """Write ``rows`` as a table (:func:`eventstore.cli.table.print_table`, fitted to a
    terminal when short), each value cut at :data:`TABLE_CELL_MAX` characters and NULL as
    ``NULL``; then the row count (and how many values were cut) on stderr."""
    if not columns:
        return
    cut = 0

    def cells() -> Iterator[list[str | None]]:
        nonlocal cut
        for row in rows:
            texts, n = _table_cells(row)
            cut += n
            yield texts

    n = print_table(out_bytes(), [shown(c) for c in columns], cells(), fit=True)
    note = f"; {cut} long value{'' if cut == 1 else 's'} cut, see --json or --csv" if cut else ""
    click.echo(f"({n} row{'' if n == 1 else 's'}{note})", err=True)
