"""The ``eventstore`` command line (click).

The database is ``--db PATH`` (before the command), else ``$EVENTSTORE_DB``, else
``./eventstore.db``. Errors print one line to stderr (``error: ...``, or ``FILE:LINE:
reason`` for a bad JSONL line) and exit with status 1; usage errors exit with 2. Even
an error nobody foresaw is one line (``error: unexpected ...``); ``EVENTSTORE_DEBUG=1``
shows its traceback instead.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import math
import os
import re
import shlex
import sys

import click

from . import __version__
from .errors import EventStoreError, InvalidJSONL
from .store import EventStore
from .tailview import UNSAFE_CHARS, escape_char

EXIT_ERROR = 1


def _fail(message: str) -> None:
    click.echo(message if message.startswith("error:") else f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


class _Group(click.Group):
    """Turns the store's errors (and file errors) into one line on stderr, no traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InvalidJSONL as e:
            click.echo(str(e), err=True)
            sys.exit(EXIT_ERROR)
        except EventStoreError as e:
            _fail(str(e))
        except OSError as e:
            if e.errno == errno.EPIPE:  # the reader went away (| head): click exits quietly
                raise
            _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
        except KeyboardInterrupt:
            _fail("interrupted")
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug, or a database changed by hand: still one line
            if os.environ.get("EVENTSTORE_DEBUG"):
                raise
            _fail(f"unexpected {type(e).__name__}: {e} (EVENTSTORE_DEBUG=1 shows the traceback; "
                  "please report it)")


class _Utf8Text(click.ParamType):
    """A command-line word as UTF-8 text, even where the locale made Python decode argv as
    ASCII (non-ASCII bytes then arrive as surrogate escapes)."""

    name = "text"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            try:
                return os.fsencode(value).decode("utf-8")
            except UnicodeError:
                return value
        return value


TEXT = _Utf8Text()


def _store(ctx: click.Context, readonly: bool = False) -> EventStore:
    """The store of ``--db``. Commands that only read open an existing file read-only: they
    work on a file the user may only read, and never create a database at a mistyped path."""
    obj = ctx.find_root().obj
    if obj.get("store") is None:
        obj["store"] = EventStore.open(obj["db"], readonly=readonly)
        ctx.call_on_close(obj["store"].close)
    return obj["store"]


def _out():
    """stdout as bytes: exports are UTF-8 whatever the locale says."""
    sys.stdout.flush()
    return sys.stdout.buffer


def _when(ts: float | None) -> str:
    """``ts`` (seconds since the epoch) as UTC date and time; outside years 1 to 9999 (a
    ts in milliseconds, say), the number of seconds itself."""
    if ts is None:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError, TypeError):
        return f"ts {ts!r} (not a date)"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="EVENTSTORE_DB", default="eventstore.db", show_default=True,
              metavar="PATH", help="Database file, sqlite:// or postgresql:// URL; also $EVENTSTORE_DB.")
@click.version_option(__version__, prog_name="eventstore")
@click.pass_context
def cli(ctx: click.Context, db: str) -> None:
    """Append-only AI-agent session logs in SQLite or PostgreSQL."""
    ctx.obj = {"db": db, "store": None}


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the database, or upgrade it to the latest schema."""
    _store(ctx)
    from .schema import SCHEMA_REVISION

    click.echo(f"{ctx.obj['db']}: ready (schema revision {SCHEMA_REVISION})")


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run a scripted agent turn (with a real shell tool call) and show its log and messages."""
    from .demo import run_demo

    store = _store(ctx)
    s = run_demo(store)
    click.echo(f"Session {s.id} in {ctx.obj['db']}\n")
    click.echo("Event log (JSONL, as exported):")
    for ev in s.events():
        click.echo("  " + ev.to_jsonl())
    click.echo("\nDerived messages (the projection sent to the model):")
    click.echo(json.dumps(s.derive_messages(), indent=2, ensure_ascii=False))
    db = "" if ctx.obj["db"] == "eventstore.db" else f"--db {shlex.quote(ctx.obj['db'])} "
    click.echo(f"\nNext: eventstore {db}messages {s.id}   |   eventstore {db}export {s.id}")


def _jsonl_files(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Expand the import arguments: a folder means its ``*.jsonl`` files, recursively, sorted.

    Returns ``(files, failures)``: ``failures`` holds ``PATH: reason`` for each path that
    cannot be read (a missing path, a folder or subfolder without permission), so that the
    import reports it and exits non-zero while the other files still land.
    """
    files: list[str] = []
    failures: list[str] = []
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            errors: list[OSError] = []
            found = []
            for folder, subfolders, names in os.walk(p, onerror=errors.append):
                subfolders.sort()
                for n in names:
                    path = os.path.join(folder, n)
                    if not n.endswith(".jsonl"):
                        continue
                    if os.path.isfile(path):
                        found.append(path)
                    elif os.path.islink(path) and not os.path.exists(path):
                        failures.append(f"{path}: a symbolic link to nothing ({os.readlink(path)})")
            for e in errors:
                failures.append(f"{e.filename}: cannot read this folder: {e.strerror or e}")
            if not found and not errors:
                click.echo(f"{p}: no *.jsonl files in this folder", err=True)
            files.extend(sorted(found))
        else:
            try:
                os.stat(p)
            except FileNotFoundError:
                failures.append(f"{p}: no such file or folder")
            except OSError as e:  # ENAMETOOLONG, ENOTDIR, EACCES, ELOOP: say which
                failures.append(f"{p}: {e.strerror or e}")
            else:
                files.append(p)
    return files, failures


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False


class _Bar:
    """A rich progress bar on stderr when it is a terminal (events/s, files done); otherwise
    nothing at all. Messages go through :meth:`note` so they do not break the bar."""

    def __init__(self, what: str, files: int, total_bytes: int | None):
        self.what = what
        self.files = files
        self.events = 0
        self.done = 0
        self.progress = None
        if not _stderr_is_terminal():
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
        self.events += events
        if self.progress is None:
            return
        task = self.progress.tasks[0]
        elapsed = task.elapsed or 0.0
        rate = f"{self.events / elapsed:,.0f} events/s" if elapsed > 0.2 else ""
        self.progress.update(self.task, advance=nbytes, events=self.events, rate=rate)

    def file_done(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress.update(self.task, done=self.done)

    def note(self, message: str) -> None:
        if self.progress is not None:
            self.progress.console.print(message, markup=False, highlight=False, soft_wrap=True)
        else:
            click.echo(message, err=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--session-id", metavar="ID", help="The session id of a single file that has no session/meta line.")
@click.option("--append", is_flag=True,
              help="Add a file's events past the head of its stored session (the stored ones must match).")
@click.option("--salvage", is_flag=True,
              help="Keep the valid prefix of a file whose tail is bad (truncated, corrupt); report what was dropped.")
@click.option("-v", "--verbose", is_flag=True, help="One line per file, not only for problems.")
@click.pass_context
def import_(ctx: click.Context, paths: tuple[str, ...], session_id: str | None, append: bool, salvage: bool,
            verbose: bool) -> None:
    """Import JSONL session files; a folder means every *.jsonl below it, - is stdin.

    Each file is atomic: all its events or none (with --salvage, its valid prefix). A bad
    file is reported as FILE:LINE: reason and the other files still land; the exit status
    is then 1. A session already stored with the same events is skipped; with other events
    it is a conflict. Ends with a summary on stdout: files, sessions, events, skipped, failed.
    A progress bar shows on a terminal.
    """
    from .bulk import import_jsonl

    files, unreadable = _jsonl_files(paths)
    if session_id is not None and len(files) + len(unreadable) != 1:
        raise click.UsageError(f"--session-id goes with exactly one file ({len(files)} given)")
    if files.count("-") > 1:
        raise click.UsageError("- (stdin) can be read only once")
    store = _store(ctx)
    sizes = [0 if f == "-" else os.path.getsize(f) for f in files]
    bar = _Bar("import", len(files), None if "-" in files else sum(sizes))
    counts = {"imported": 0, "appended": 0, "skipped": 0, "failed": len(unreadable), "salvaged": 0}
    events = normalized = 0
    for message in unreadable:
        bar.note(message)
    try:
        for f in files:
            try:
                if f == "-":
                    rep = import_jsonl(store, sys.stdin.buffer, name="-", session_id=session_id,
                                       append=append, salvage=salvage, progress=bar.advance)
                else:
                    rep = import_jsonl(store, f, session_id=session_id, append=append, salvage=salvage,
                                       progress=bar.advance)
            except InvalidJSONL as e:
                bar.note(str(e))
                counts["failed"] += 1
                continue
            except (EventStoreError, OSError) as e:
                reason = f"{e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
                bar.note(f"{f}: {reason}")
                counts["failed"] += 1
                continue
            finally:
                bar.file_done()
            counts[rep.status] += 1
            events += rep.events
            normalized += rep.normalized
            sid = json.dumps(rep.session_id, ensure_ascii=False)
            if rep.dropped is not None:
                counts["salvaged"] += 1
                bar.note(f"{f}: salvaged {rep.events} events of session {sid}; {rep.dropped}")
            elif rep.status == "skipped":
                bar.note(f"{f}: skipped: session {sid} is already stored ({rep.note})")
            elif verbose:
                bar.note(f"{f}: {rep.status} session {sid}: {rep.events} events")
            if verbose and rep.normalized:
                bar.note(f"{f}: {rep.normalized} lines stored in canonical form (export writes them that way)")
    finally:
        bar.close()
    stored = counts["imported"] + counts["appended"]
    parts = [f"files: {len(files)}", f"sessions: {stored} ({counts['imported']} new, {counts['appended']} appended)",
             f"events: {events}", f"skipped: {counts['skipped']}", f"failed: {counts['failed']}"]
    if counts["salvaged"]:
        parts.append(f"salvaged: {counts['salvaged']}")
    if normalized:
        parts.append(f"normalized lines: {normalized}")
    click.echo(", ".join(parts))
    if counts["failed"]:
        sys.exit(EXIT_ERROR)


def _named_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An export destination must name something: an empty one (an unset shell variable,
    say) is a usage error, as is a file name ending in a slash, like click's own check of
    -o naming a folder (it wrote a file in the current folder, or to stdout)."""
    if value is None:
        return None
    if value == "":
        raise click.BadParameter("it is empty; give a path" + (", or - for stdout" if param.name == "output" else ""))
    if param.name == "output" and value.endswith(("/", os.sep)):
        raise click.BadParameter(f"File {value!r} ends in a slash: a folder, not a file (several sessions: --out DIR)")
    return value


@cli.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID]...", type=TEXT)
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), callback=_named_path,
              help="One session to this file (default, and -: stdout).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR", callback=_named_path,
              help="Write each session to DIR/<name>.jsonl (the name encodes the id safely).")
@click.option("--all", "all_", is_flag=True, help="Every stored session (with --out).")
@click.pass_context
def export(ctx: click.Context, session_ids: tuple[str, ...], output: str | None, out_dir: str | None,
           all_: bool) -> None:
    """Export sessions as JSONL, byte-identical to the reference format.

    One session goes to stdout or -o FILE; several (or --all) go to a folder with --out DIR,
    one file each, named from the session id so that no id can write outside DIR and each
    name maps back to its id (see docs/import-export.md).
    """
    from .export import export_session, export_sessions

    if out_dir is None:
        if all_:
            raise click.UsageError("--all needs --out DIR")
        if len(session_ids) != 1:
            raise click.UsageError("give one SESSION_ID (for several, or --all, use --out DIR)")
    elif output is not None:
        raise click.UsageError("-o FILE is for one session; --out DIR takes the files")
    elif all_ == bool(session_ids):
        raise click.UsageError("with --out DIR, give SESSION_IDs or --all (not both)")
    store = _store(ctx, readonly=True)
    if out_dir is None:
        if output is not None and output != "-":
            n = export_session(store, session_ids[0], output)
            click.echo(f"{output}: {n} events", err=True)
        else:
            out = _out()
            export_session(store, session_ids[0], out)
            out.flush()
        return
    ids = [i.id for i in store.sessions()] if all_ else list(session_ids)
    bar = _Bar("export", len(ids), None)
    try:
        written = export_sessions(store, out_dir, ids, progress=bar.advance,
                                  done=lambda *_: bar.file_done())
    finally:
        bar.close()
    click.echo(f"exported {len(written)} session(s), {sum(n for _s, _p, n in written)} events, to {out_dir}",
               err=True)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of a table.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List stored sessions: id, events, created, last event (UTC)."""
    infos = _store(ctx, readonly=True).sessions()
    if as_json:
        click.echo(json.dumps([{"id": i.id, "events": i.events, "created_at": i.created_at,
                                "last_ts": i.last_ts} for i in infos], ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("SESSION")
    table.add_column("EVENTS", justify="right")
    table.add_column("CREATED (UTC)")
    table.add_column("LAST EVENT (UTC)")
    for i in infos:
        table.add_row(Text(_CONTROL_OR_NEWLINE.sub(escape_char, _printable(i.id))), str(i.events),
                      _when(i.created_at), _when(i.last_ts))
    Console(soft_wrap=True).print(table) if infos else click.echo("no sessions")


@cli.command()
@click.argument("session_id", type=TEXT)
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only events of this type (repeatable).")
@click.option("--after", "after_seq", type=int, metavar="SEQ", help="Only events with seq > SEQ.")
@click.pass_context
def events(ctx: click.Context, session_id: str, types: tuple[str, ...], after_seq: int | None) -> None:
    """Print a session's events as JSONL lines, in seq order."""
    s = _store(ctx, readonly=True).session(session_id)
    out = _out()
    for ev in s.events(after_seq=after_seq, types=types or None):
        out.write((ev.to_jsonl() + "\n").encode("utf-8"))
    out.flush()


@cli.command()
@click.argument("session_id", type=TEXT)
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.pass_context
def messages(ctx: click.Context, session_id: str, pretty: bool) -> None:
    """Print the derived chat messages (the projection) as a JSON array."""
    s = _store(ctx, readonly=True).session(session_id)
    text = s.messages_json()
    if pretty:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    out = _out()
    out.write(text.encode("utf-8") + b"\n")
    out.flush()


# --- auditing: sql, verify, repair ---------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(text: str) -> str:
    """Text safe to encode as UTF-8: a lone surrogate becomes its escape (``\\ud83d``)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _plain(value: object) -> object:
    """A query value as CSV and the table show it: a BLOB as lower-case hex, text printable."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, str):
        return _printable(value)
    return value


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


@cli.command()
@click.argument("query", metavar="QUERY", type=TEXT)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of objects, one per row.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row.")
@click.pass_context
def sql(ctx: click.Context, query: str, as_json: bool, as_csv: bool) -> None:
    """Run one read-only SQL QUERY (- reads it from stdin) and print the rows.

    The database is opened read-only: writes, DDL, ATTACH and PRAGMAs that set something are
    refused. Tables and views: events, sessions, messages, tool_calls, turns, session_summary
    (docs/schema.md). Prints a table, or with --json a JSON array of objects, with --csv CSV;
    NULL is null in JSON, empty in CSV; a BLOB is lower-case hex; an infinite REAL (1e400)
    is null in JSON, as JSON.stringify writes it.
    """
    from .backends import backend_class
    from .errors import QueryError
    from .schema import READ_COMPATIBLE_REVISIONS, SCHEMA_REVISION

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    fmt = "json" if as_json else "csv" if as_csv else None
    if query == "-":
        query = sys.stdin.read()
    conn = backend_class(ctx.obj["db"]).query_connection(ctx.obj["db"])
    ctx.call_on_close(conn.close)
    try:
        revision = next(conn.query("SELECT version_num FROM alembic_version")[1], (None,))[0]
    except QueryError:
        revision = None
    if revision != SCHEMA_REVISION and revision not in READ_COMPATIBLE_REVISIONS:  # (those read the same)
        click.echo(f"warning: {ctx.obj['db']} is at schema revision {revision or 'none'}, not "
                   f"{SCHEMA_REVISION}: run `eventstore init` to upgrade it (views may be missing)", err=True)
    columns, rows = conn.query(query)
    out = _out()
    if fmt == "json":
        names = _unique(columns)
        out.write(b"[")
        sep = b"\n"
        for row in rows:
            obj = dict(zip(names, map(_json_value, row), strict=True))
            # A lone surrogate can only stand inside a JSON string: its escape keeps the value.
            out.write(sep + _printable(json.dumps(obj, ensure_ascii=False)).encode("utf-8"))
            sep = b",\n"
        out.write(b"\n]\n" if sep != b"\n" else b"]\n")
    elif fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for i, row in enumerate(rows):
            w.writerow(["" if v is None else _plain(v) for v in row])
            if i % 1000 == 999:
                out.write(buf.getvalue().encode("utf-8"))
                buf.seek(0)
                buf.truncate()
        out.write(buf.getvalue().encode("utf-8"))
    else:
        _print_table(columns, list(rows))
    out.flush()


# Shown escaped in a table cell: a tab and what no terminal should get raw (a newline is kept).
_CONTROL = re.compile(f"[\t{UNSAFE_CHARS}]")
# Shown escaped in a one-line cell: the same and newlines.
_CONTROL_OR_NEWLINE = re.compile(f"[\t\n{UNSAFE_CHARS}]")
TABLE_CELL_MAX = 300  # characters of a value shown in a table cell; --json and --csv show all


def _print_table(columns: list[str], rows: list[tuple]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if not columns:
        return
    table = Table(box=None, pad_edge=False, header_style="bold", highlight=False)
    for c in columns:
        table.add_column(Text(_printable(c)))
    width = [len(c) for c in columns]
    cut = 0
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            if v is None:
                cells.append(Text("NULL", style="dim"))
                continue
            text = str(_plain(v) if isinstance(v, (str, bytes)) else v)
            text = _CONTROL.sub(escape_char, text)
            if len(text) > TABLE_CELL_MAX:
                text = text[:TABLE_CELL_MAX] + f"… ({len(text) - TABLE_CELL_MAX} more)"
                cut += 1
            width[i] = max(width[i], max(len(line) for line in text.split("\n")))
            cells.append(Text(text))
        table.add_row(*cells)
    console = Console(highlight=False)
    if not console.is_terminal:  # piped: as wide as the table needs, so cells are not wrapped
        console = Console(highlight=False, width=max(80, sum(width) + 2 * len(columns)))
    console.print(table)
    note = f"; {cut} long value{'' if cut == 1 else 's'} cut, see --json or --csv" if cut else ""
    click.echo(f"({len(rows)} row{'' if len(rows) == 1 else 's'}{note})", err=True)


@cli.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID...]", type=TEXT)
@click.option("--head", is_flag=True,
              help="Print each session's head (SESSION_ID, events, hash of its last event) on stdout; "
                   "findings then go to stderr.")
@click.pass_context
def verify(ctx: click.Context, session_ids: tuple[str, ...], head: bool) -> None:
    """Check the log: seqs gapless, the hash chain, the append-only triggers, streamed chunks
    against their message, and the projection's validity for a chat API.

    Checks every session, or the SESSION_IDs given. Prints one line per finding (the session,
    the seq, the kind, what is wrong) and exits 0 only when there is none. Reads only: the
    database is opened read-only.
    """
    from . import audit

    store = _store(ctx, readonly=True)  # refuses, in one line, a file that is not an eventstore database
    report = audit.verify(store.backend, session_ids or None)
    for f in report.findings:  # a name from the log may hold control or bidi characters: escaped
        click.echo(_CONTROL.sub(escape_char, _printable(str(f))), err=head)
    if head:
        for sid, (n, h) in report.heads.items():
            click.echo(f"{_CONTROL.sub(escape_char, _printable(sid))}\t{n}\t{h}")
    status = "OK" if report.ok else f"{len(report.findings)} finding{'' if len(report.findings) == 1 else 's'}"
    click.echo(f"verified {report.sessions} session{'' if report.sessions == 1 else 's'}, "
               f"{report.events} events: {status}", err=True)
    if not report.ok:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.argument("session_id", type=TEXT)
@click.pass_context
def repair(ctx: click.Context, session_id: str) -> None:
    """Append what an interrupted session needs (never changing what is logged): a tool/result
    saying the call was interrupted for each dangling tool call, a step/end for an open step,
    a turn/end for an open turn. Then verify the session; exit 1 if findings remain (what
    appending cannot fix). Run it only when the session's agent is not running.
    """
    from . import audit

    store = _store(ctx)
    s = store.session(session_id)
    appended = s.repair()
    for ev in appended:
        what = f" for {ev.payload['tool_call_id']!r}" if ev.type == "tool/result" else ""
        click.echo(f"appended seq {ev.seq}: {ev.type}{_printable(what)}")
    if not appended:
        click.echo(f"session {_printable(session_id)}: nothing to repair")
    report = audit.verify(store.backend, [session_id])
    for f in report.findings:
        click.echo(_printable(str(f)), err=True)
    if not report.ok:
        _fail(f"{len(report.findings)} finding(s) remain that appending cannot repair")


# --- live tailing ----------------------------------------------------------------------------

_STYLES = {"user": {"fg": "cyan", "bold": True}, "assistant": {"fg": "green", "bold": True},
           "tool": {"fg": "yellow"}, "dim": {"dim": True}}


def _finite_seconds(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):  # FloatRange lets nan through
        raise click.BadParameter(f"{value} is not a finite number of seconds")
    return value


@cli.command()
@click.argument("session_id", required=False)
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are committed (Ctrl-C stops).")
@click.option("-n", "--last", type=click.IntRange(min=0), metavar="N",
              help="Start with the last N events (default: all).")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS", callback=_finite_seconds,
              help="With --follow: stop after SECONDS without a new event.")
@click.pass_context
def tail(ctx: click.Context, session_id: str | None, follow: bool, last: int | None, timeout: float | None) -> None:
    """Show a session (or, without SESSION_ID, every session) the way a chat UI does.

    Streamed assistant/chunk deltas appear as they arrive; with --follow, new events from
    any process are shown as they are committed.
    """
    from .tailview import TailView

    if timeout is not None and not follow:
        raise click.UsageError("--timeout goes with --follow")
    store = _store(ctx, readonly=True)
    out = _out()
    color = out.isatty() and not os.environ.get("NO_COLOR")

    def write(text: str, style: str | None) -> None:
        if color and style and text.strip():
            text = click.style(text, **_STYLES[style])
        out.write(text.encode("utf-8", "backslashreplace"))

    if session_id is not None:
        s = store.session(session_id)
        after = None if last is None else max(-1, s.next_seq() - last - 1)
        events = s.follow(after, idle_timeout=timeout) if follow else s.events(after_seq=after)
    else:
        after = None if last is None else max(0, store.last_position() - last)
        events = store.follow(after, idle_timeout=timeout if follow else 0)
    view = TailView(write, show_session=session_id is None)
    try:
        for ev in events:
            view.feed(ev)
            if follow:
                out.flush()
    except KeyboardInterrupt:  # the usual way to stop --follow
        pass
    finally:
        view.finish()
        out.flush()


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but a loopback address shows the log to the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the web browser.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, open_browser: bool) -> None:
    """Start the local, read-only web viewer and print its URL (Ctrl-C stops it).

    Sessions, each session as a chat, Replay at the recorded pace, live updates as other
    processes append. Needs: pip install 'eventstore[web]'. See docs/web.md.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from .web import MISSING_EXTRA

        _fail(MISSING_EXTRA)
    from . import web

    store = _store(ctx, readonly=True)
    try:
        sock = web.listen(host, port)
    except OSError as e:
        _fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    url = web.url_of(sock)
    if not web.is_loopback(host):
        click.echo(f"warning: listening on {host}: anyone who can reach this machine on port "
                   f"{sock.getsockname()[1]} can read the whole log", err=True)

    def ready() -> None:
        click.echo(f"eventstore viewer of {store.backend.display} at {url}  (Ctrl-C stops)")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    web.serve(store, sock, db_label=store.backend.display, on_ready=ready)  # a URL without its password


# --- moving between databases, PostgreSQL roles ---------------------------------------------

@cli.command("copy")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID...]", type=TEXT)
def copy_command(src: str, dst: str, session_ids: tuple[str, ...]) -> None:
    """Copy every session (or the SESSION_IDs given) from the store SRC to the store DST.

    SRC and DST are SQLite files or postgresql:// URLs (DST is created and migrated if
    needed). Every seq, ts, payload, meta and hash is kept; sessions go one by one in the
    order of their first event, each in one transaction, and are checked: a source session
    whose hash chain does not verify is refused. Sessions already in DST with the same events
    are skipped, so an interrupted copy can be run again.
    """
    from .copy import copy_sessions

    with EventStore.open(src, readonly=True) as source, EventStore.open(dst) as target:
        def done(r) -> None:
            what = "already there" if r.skipped else "copied"
            click.echo(f"{_printable(r.session_id)}: {r.events} events {what} (head {r.head[:12]})")

        results = copy_sessions(source, target, session_ids or None, progress=done)
    total = sum(r.events for r in results)
    click.echo(f"{len(results)} session{'' if len(results) == 1 else 's'}, {total} events in {dst}", err=True)


@cli.command()
@click.option("--writer", default="eventstore_writer", show_default=True, help="Name of the writer role.")
@click.option("--auditor", default="eventstore_auditor", show_default=True, help="Name of the auditor role.")
@click.option("--print", "print_only", is_flag=True, help="Print the SQL instead of running it.")
@click.pass_context
def roles(ctx: click.Context, writer: str, auditor: str, print_only: bool) -> None:
    """PostgreSQL: create the least-privilege roles (run as the database's owner).

    The writer role may only INSERT and SELECT (it cannot UPDATE, DELETE, TRUNCATE, ALTER,
    DROP or disable triggers): agents and `eventstore import` work as it. The auditor role
    may only SELECT: for `eventstore sql` and `verify`. Both are NOLOGIN groups; grant them
    to login roles: GRANT eventstore_writer TO agent1.
    """
    from .backends import is_postgres_url

    db = ctx.find_root().obj["db"]
    if not is_postgres_url(db):
        _fail("roles: --db must be a postgresql:// URL (SQLite has no roles: use file permissions)")
    from .backends.postgres import apply_roles, roles_sql

    store = _store(ctx)  # creates and migrates the schema first: the grants name its tables
    text = roles_sql(writer, auditor, store.backend.database_name())
    if print_only:
        click.echo(text, nl=False)
        return
    apply_roles(store.backend, text)
    click.echo(f"roles {writer} (INSERT, SELECT) and {auditor} (SELECT) are set up on {store.backend.display}")


def main() -> None:
    """Console entry point."""
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    cli(prog_name="eventstore")


if __name__ == "__main__":  # pragma: no cover
    main()
