"""The one table renderer of the command line (``sessions``, ``sql``): streamed line by line,
columns as wide as their widest cell among the header and the first rows, measured in
terminal cells; a short result on a terminal may be laid out by rich to the window."""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection, Iterable

#: Rows read before the table's column widths are fixed.
TABLE_LAYOUT_ROWS = 1000


def text_width(text: str) -> int:
    """``text``'s width in terminal cells."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def print_table(out, header: list[str], rows: Iterable[list[str | None]], *, right: Collection[int] = (),
                strip: bool = False, layout_rows: int | None = TABLE_LAYOUT_ROWS, fit: bool = False,
                min_widths: Iterable[int] | None = None) -> int:
    """Write a table of ``rows`` (each a list of cell texts, None for NULL) under ``header``
    to the binary stream ``out``; returns the row count.

    Each column is as wide as its widest cell among the header and the first
    ``layout_rows`` rows (None: all of them), and at least its ``min_widths`` (a caller
    that knows the widest cells lets the rows stream); a wider cell in a later row widens
    its own line only. Columns are two spaces apart, the columns numbered in ``right`` aligned
    right; ``strip`` drops the spaces at a line's end. A cell may hold several lines (the
    row is as tall as its tallest cell; the header's cells are aligned at the bottom).
    On a terminal the header is bold and NULL dim (unless ``$NO_COLOR``); with ``fit``, a
    result of at most ``layout_rows`` rows written to a terminal is laid out by rich to
    the window's width instead.
    """
    rows = iter(rows)
    first = list(rows if layout_rows is None else itertools.islice(rows, layout_rows))
    following = next(rows, None)
    terminal = out.isatty()
    if fit and terminal and following is None:
        _print_rich_table(header, first)
        return len(first)
    styled = terminal and not os.environ.get("NO_COLOR")
    widths = [max(text_width(line) for line in c.split("\n")) for c in header]
    if min_widths is not None:
        widths = [max(w, m) for w, m in zip(widths, min_widths, strict=True)]
    for cells in first:
        for i, text in enumerate(cells):
            if text is None:
                widths[i] = max(widths[i], 4)
            elif "\n" in text:
                widths[i] = max(widths[i], *map(text_width, text.split("\n")))
            else:
                widths[i] = max(widths[i], text_width(text))
    null = "\x1b[2mNULL\x1b[0m" if styled else "NULL"
    right = frozenset(right)

    def pad(text: str, n: int, w: int, i: int) -> str:
        return " " * (w - n) + text if i in right else text + " " * (w - n)

    def lines(cells: list[str | None], *, bottom: bool = False) -> str:
        """The row's line(s): each cell padded to its column's width, a wider one to its own;
        a cell of fewer lines than its neighbour's at the top (at the bottom: the header)."""
        if not any(text is not None and "\n" in text for text in cells):
            line = "  ".join(pad(null, 4, w, i) if text is None else pad(text, text_width(text), w, i)
                             for i, (text, w) in enumerate(zip(cells, widths, strict=True)))
            return line.rstrip(" ") if strip else line
        split = [[(null, 4)] if text is None else [(line, text_width(line)) for line in text.split("\n")]
                 for text in cells]
        height = max(map(len, split))
        blank = [("", 0)]
        split = [blank * (height - len(c)) + c if bottom else c + blank * (height - len(c)) for c in split]
        text = "\n".join("  ".join(pad(line, n, w, i) for i, ((line, n), w) in enumerate(zip(row, widths, strict=True)))
                         for row in zip(*split, strict=True))
        return "\n".join(line.rstrip(" ") for line in text.split("\n")) if strip else text

    head = lines(header, bottom=True)  # rich's header: a short name on the last line of a tall one
    if styled:  # bold, line by line (a multi-line name keeps each line bold)
        head = "\n".join(f"\x1b[1m{line}\x1b[0m" for line in head.split("\n"))
    chunk = [head]
    chunk.extend(map(lines, first))
    n = len(first)
    if following is not None:
        for cells in itertools.chain((following,), rows):
            chunk.append(lines(cells))
            n += 1
            if len(chunk) >= 1000:
                out.write(("\n".join(chunk) + "\n").encode("utf-8", "backslashreplace"))
                chunk = []
    out.write(("\n".join(chunk) + "\n").encode("utf-8", "backslashreplace"))
    return n


def _print_rich_table(header: list[str], rows: list[list[str | None]]) -> None:
    """A short result on a terminal: rich fits the table to the window."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold", highlight=False)
    for c in header:
        table.add_column(Text(c))
    null = Text("NULL", style="dim")
    for cells in rows:
        table.add_row(*(null if text is None else Text(text) for text in cells))
    Console(highlight=False).print(table)
