"""Helpers the command modules share: opening the store of ``--db``, stdout as bytes, text
made safe for a terminal, dates, the progress bar, option callbacks. Imports click only
where a function needs it: the read commands use this module without click
(:mod:`eventstore.cli.fast`)."""

from __future__ import annotations

import datetime as _dt
import math
import os
import sys

from eventstore.core.store import EventStore
from eventstore.lazy import LazyPattern

from .tailview import CONTROL_OR_NEWLINE, UNSAFE_CHARS, escape_char

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from collections.abc import Callable

    import click

# Shown escaped in CSV written to a terminal (a tab and a newline are CSV's own).
UNSAFE = LazyPattern(f"[{UNSAFE_CHARS}]")  # (each compiled at first use: not at start-up)
# Shown escaped in a table cell: a tab and what no terminal should get raw (a newline is kept).
CONTROL = LazyPattern(f"[\t{UNSAFE_CHARS}]")
_SURROGATE = LazyPattern("[\ud800-\udfff]")


def db_shown(db: str, store: EventStore) -> str:
    """``db`` as a message shows it: a file as given, a URL without its password."""
    from eventstore.backends import is_postgres_url

    return store.display if is_postgres_url(db) else db


def open_store(ctx: click.Context, readonly: bool = False, redact_secrets: bool = False,
               upgrade: bool = True) -> EventStore:
    """The store of ``--db``. Commands that only read open an existing file read-only: they
    work on a file the user may only read, and never create a database at a mistyped path.
    ``redact_secrets`` and ``upgrade``: see :meth:`EventStore.open`."""
    obj = ctx.find_root().obj
    if obj.get("store") is None:
        store = obj["store"] = EventStore.open(obj["db"], readonly=readonly, durability=obj.get("durability", "normal"),
                                               upgrade=upgrade, redact_secrets=redact_secrets)
        ctx.call_on_close(store.close)
        say_if_upgraded(obj["db"], store)
    return obj["store"]


def open_existing_store(ctx: click.Context) -> EventStore:
    """The store of ``--db`` for a command that changes an existing database (``redact``):
    where there is no eventstore database (a missing file, a PostgreSQL database without
    eventstore's schema, another application's database) it is refused as a reading command
    refuses it, and nothing is created; an older eventstore's database is upgraded, as every
    writable open does."""
    from eventstore.errors import SchemaOutdated

    obj = ctx.find_root().obj
    if obj.get("store") is None:
        try:  # the read-only open's refusals, without its own store (it cannot write)
            EventStore.open(obj["db"], readonly=True, durability=obj.get("durability", "normal")).close()
        except SchemaOutdated:
            pass
    return open_store(ctx)


def say_if_upgraded(db: str, store: EventStore, echo: Callable[..., object] | None = None) -> None:
    """One line on stderr (through ``echo``, ``click.echo`` by default) when opening ``db``
    upgraded an older eventstore's database."""
    if store.upgraded_from is not None:
        if echo is None:
            import click

            echo = click.echo
        from eventstore.schema import SCHEMA_REVISION

        echo(f"{db_shown(db, store)}: upgraded from schema revision {store.upgraded_from} to "
             f"{SCHEMA_REVISION} (an older eventstore wrote it)", err=True)


def out_bytes():
    """stdout as bytes: exports are UTF-8 whatever the locale says."""
    sys.stdout.flush()
    return sys.stdout.buffer


def when(ts: float | None) -> str:
    """``ts`` (seconds since the epoch) as UTC date and time; outside years 1 to 9999 (a
    ts in milliseconds, say), the number of seconds itself."""
    if ts is None:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError, TypeError):
        return f"ts {ts!r} (not a date)"


class DayCache:
    """:func:`when`, with each day's date formatted once (the ``sessions`` table formats two
    times a row: strftime cost as much as the rest of the row)."""

    def __init__(self) -> None:
        self.days: dict[int, str] = {}

    def __call__(self, ts: float | None) -> str:
        if not isinstance(ts, float) or not 0 <= ts < 253402300800:  # years 1970..9999
            return when(ts)
        whole = int(ts)
        if ts - whole >= 0.9999995:  # fromtimestamp rounds to microseconds: it may carry a second
            return when(ts)
        day, rem = divmod(whole, 86400)
        date = self.days.get(day)
        if date is None:
            date = self.days[day] = when(day * 86400.0)[:10]
        return f"{date} {rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"


def plural(n: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def printable(text: str) -> str:
    """Text safe to encode as UTF-8: a lone surrogate becomes its escape (``\\ud83d``)."""
    if text.isprintable():  # (no surrogate then: the common case, without the regex)
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def one_line(text: str) -> str:
    """``text`` on one line, safe for a terminal: control characters, newlines and lone
    surrogates as escapes (as ``sessions`` shows ids)."""
    return CONTROL_OR_NEWLINE.sub(escape_char, printable(text))


def shown(text: str) -> str:
    """``text`` safe for a terminal, newlines kept: tabs, control and bidi characters and lone
    surrogates as escapes (a name from the log in a finding)."""
    return CONTROL.sub(escape_char, printable(text))


def plain(value: object) -> object:
    """A query value as CSV and the table show it: a BLOB as lower-case hex, text printable."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, str):
        return printable(value)
    return value


def finite_seconds(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """An option's callback: a number of seconds must be finite (FloatRange lets nan through)."""
    if value is not None and not math.isfinite(value):
        import click

        raise click.BadParameter(f"{value} is not a finite number of seconds")
    return value


def named_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An export destination must name something: an empty one (an unset shell variable,
    say) is a usage error, as is a file name ending in a slash, like click's own check of
    -o naming a folder (it wrote a file in the current folder, or to stdout)."""
    import click

    if value is None:
        return None
    if value == "":
        raise click.BadParameter("it is empty; give a path" + (", or - for stdout" if param.name == "output" else ""))
    if param.name == "output" and value.endswith(("/", os.sep)):
        raise click.BadParameter(f"File {value!r} ends in a slash: a folder, not a file (several sessions: --out DIR)")
    return value


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (progress is shown only there)."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False


class Bar:
    """A rich progress bar on stderr when it is a terminal (events/s, files done); otherwise
    nothing at all. Messages go through :meth:`note` so they do not break the bar."""

    def __init__(self, what: str, files: int, total_bytes: int | None):
        self.what = what
        self.files = files
        self.events = 0
        self.done = 0
        self.progress = None
        if not stderr_is_terminal():
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.fields[done]}/{task.fields[files]} files"),
            TextColumn("{task.fields[events]:,} events"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task(what, total=total_bytes, done=0, files=files, events=0, rate="")
        self.progress.start()

    def advance(self, nbytes: int, events: int) -> None:
        """Count ``nbytes`` read and ``events`` stored."""
        self.events += events
        if self.progress is None:
            return
        task = self.progress.tasks[0]
        elapsed = task.elapsed or 0.0
        rate = f"{self.events / elapsed:,.0f} events/s" if elapsed > 0.2 else ""
        self.progress.update(self.task, advance=nbytes, events=self.events, rate=rate)

    def file_done(self) -> None:
        """Count one more file done."""
        self.done += 1
        if self.progress is not None:
            self.progress.update(self.task, done=self.done)

    def note(self, message: str) -> None:
        """Print ``message`` on stderr (above the bar, when there is one)."""
        if self.progress is not None:
            self.progress.console.print(message, markup=False, highlight=False, soft_wrap=True)
        else:
            import click

            click.echo(message, err=True)

    def close(self) -> None:
        """Take the bar away."""
        if self.progress is not None:
            self.progress.stop()


def write_durably(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, rename it over ``path``,
    then fsync the folder. Raises ``OSError`` naming ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise OSError(e.errno, e.strerror, path) from None

