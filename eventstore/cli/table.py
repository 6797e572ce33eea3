"""The one table renderer of the command line (``sessions``, ``sql``, ``search``): streamed
line by line, columns as wide as their widest cell among the header and the first rows,
measured in terminal cells; a short result on a terminal may be laid out by rich to the
window, or the last column folded to a given width."""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection, Iterable

#: Rows read before the table's column widths are fixed.
TABLE_LAYOUT_ROWS = 1000
#: How a marked span (see :func:`print_table`'s ``marks``) starts and ends on a terminal.
MARKED, UNMARKED = "\x1b[1;7m", "\x1b[0m"


def styled(out) -> bool:
    """Whether text written to the binary stream ``out`` may carry styles: a terminal, and
    no ``$NO_COLOR``."""
    return out.isatty() and not os.environ.get("NO_COLOR")


def show_marks(text: str, marks: tuple[str, str], style: bool) -> str:
    """``text`` with its spans between ``marks`` shown bold and reversed (``style``) or with
    the marks dropped."""
    start, end = marks
    if style:
        return text.replace(start, MARKED).replace(end, UNMARKED)
    return text.replace(start, "").replace(end, "")


def fold(text: str, room: int, marks: tuple[str, str] | None = None) -> str:
    """``text`` on lines at most ``room`` terminal cells wide, broken at spaces (a word
    longer than ``room`` is cut where the line is full). ``marks`` take no room; a marked
    span that crosses a line break is closed at the line's end and opened again on the next
    line, so that each line can be shown alone."""
    room = max(room, 1)
    bare = str.maketrans("", "", "".join(marks)) if marks else None

    def width(t: str) -> int:
        return text_width(t.translate(bare) if bare else t)

    lines: list[str] = []
    line, used = "", 0
    for word in text.split(" "):
        w = width(word)
        if line and used + 1 + w <= room:
            line, used = line + " " + word, used + 1 + w
            continue
        if not word and (line or lines):  # a space at a break
            continue
        if line:
            lines.append(line)
            line, used = "", 0
        while w > room:  # a word longer than a line: cut where it fills the line
            cut, n = 0, 0
            while cut < len(word) and n + (c := width(word[cut])) <= room:
                n += c
                cut += 1
            cut = max(cut, 1)
            lines.append(word[:cut])
            word = word[cut:]
            w = width(word)
        line, used = word, w
    lines.append(line)
    if marks and len(lines) > 1:
        start, end = marks
        opened = False
        for i, ln in enumerate(lines):
            if opened:
                ln = start + ln
            last = max(ln.rfind(start), ln.rfind(end))
            opened = last >= 0 and ln[last] == start
            lines[i] = ln + end if opened else ln
    return "\n".join(lines)


def text_width(text: str) -> int:
    """``text``'s width in terminal cells (as rich measures it)."""
    if text.isascii() or all(" " <= c < "\x7f" or "\xa0" <= c < "\u0300" or "\u2010" <= c < "\u2028" for c in text):
        return len(text)  # (one cell each, as rich says, and no import of rich: the "…" of a search's snippets)
    from rich.cells import cell_len

    return cell_len(text)


def print_table(out, header: list[str], rows: Iterable[list[str | None]], *, right: Collection[int] = (),
                strip: bool = False, layout_rows: int | None = TABLE_LAYOUT_ROWS, fit: bool = False,
                min_widths: Iterable[int] | None = None, marks: tuple[str, str] | None = None,
                width: int | None = None) -> int:
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

    A span of a cell between ``marks`` (start, end) is shown bold and reversed on a
    terminal (the marks take no room; elsewhere they are dropped). With ``width`` (in
    terminal cells), the last column's cells of the first ``layout_rows`` rows are folded
    (see :func:`fold`) to the room the other columns leave on a line.
    """
    rows = iter(rows)
    first = list(rows if layout_rows is None else itertools.islice(rows, layout_rows))
    following = next(rows, None)
    terminal = out.isatty()
    if fit and terminal and following is None:
        _print_rich_table(header, first, marks)
        return len(first)
    style = styled(out)
    measure = text_width
    if marks is not None:
        bare = str.maketrans("", "", "".join(marks))

        def measure(text: str) -> int:
            return text_width(text.translate(bare))
    if width is not None and first:
        last = len(header) - 1
        room = width - sum(2 + max(measure(line) for c in [header[i], *(r[i] or "NULL" for r in first)]
                                   for line in c.split("\n")) for i in range(last))
        first = [[*cells[:last], None if cells[last] is None else fold(cells[last], room, marks)] for cells in first]
    widths = [max(measure(line) for line in c.split("\n")) for c in header]
    if min_widths is not None:
        widths = [max(w, m) for w, m in zip(widths, min_widths, strict=True)]
    for cells in first:
        for i, text in enumerate(cells):
            if text is None:
                widths[i] = max(widths[i], 4)
            elif "\n" in text:
                widths[i] = max(widths[i], *map(measure, text.split("\n")))
            else:
                widths[i] = max(widths[i], measure(text))
    null = "\x1b[2mNULL\x1b[0m" if style else "NULL"
    right = frozenset(right)

    def pad(text: str, n: int, w: int, i: int) -> str:
        if marks is not None:
            text = show_marks(text, marks, style)
        return " " * (w - n) + text if i in right else text + " " * (w - n)

    def lines(cells: list[str | None], *, bottom: bool = False) -> str:
        """The row's line(s): each cell padded to its column's width, a wider one to its own;
        a cell of fewer lines than its neighbour's at the top (at the bottom: the header)."""
        if not any(text is not None and "\n" in text for text in cells):
            line = "  ".join(pad(null, 4, w, i) if text is None else pad(text, measure(text), w, i)
                             for i, (text, w) in enumerate(zip(cells, widths, strict=True)))
            return line.rstrip(" ") if strip else line
        split = [[(null, 4)] if text is None else [(line, measure(line)) for line in text.split("\n")]
                 for text in cells]
        height = max(map(len, split))
        blank = [("", 0)]
        split = [blank * (height - len(c)) + c if bottom else c + blank * (height - len(c)) for c in split]
        text = "\n".join("  ".join(pad(line, n, w, i) for i, ((line, n), w) in enumerate(zip(row, widths, strict=True)))
                         for row in zip(*split, strict=True))
        return "\n".join(line.rstrip(" ") for line in text.split("\n")) if strip else text

    head = lines(header, bottom=True)  # rich's header: a short name on the last line of a tall one
    if style:  # bold, line by line (a multi-line name keeps each line bold)
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


def _print_rich_table(header: list[str], rows: list[list[str | None]], marks: tuple[str, str] | None) -> None:
    """A short result on a terminal: rich fits the table to the window."""
    import re

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(text: str) -> Text:
        if marks is None:
            return Text(text)
        out, on = Text(), False
        for part in re.split(f"([{re.escape(''.join(marks))}])", text):
            if part in marks:
                on = part == marks[0]
            else:
                out.append(part, style="bold reverse" if on else None)
        return out

    table = Table(box=None, pad_edge=False, header_style="bold", highlight=False)
    for c in header:
        table.add_column(Text(c))
    null = Text("NULL", style="dim")
    for cells in rows:
        table.add_row(*(null if text is None else cell(text) for text in cells))
    Console(highlight=False).print(table)
