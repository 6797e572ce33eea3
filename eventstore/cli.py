"""The ``eventstore`` command line (click).

The database is ``--db PATH`` (before the command), else ``$EVENTSTORE_DB``, else
``./eventstore.db``. Errors print one line to stderr (``error: ...``, or ``FILE:LINE:
reason`` for a bad JSONL line) and exit with status 1; usage errors exit with 2. Even
an error nobody foresaw is one line (``error: unexpected ...``); ``EVENTSTORE_DEBUG=1``
shows its traceback instead.
"""

from __future__ import annotations

import collections
import datetime as _dt
import errno
import itertools
import json
import math
import os
import re
import shlex
import stat
import sys
import time
from collections.abc import Iterator

import click

from eventstore.core.store import EventStore
from eventstore.live.tailview import CONTROL_OR_NEWLINE, UNSAFE_CHARS, escape_char

from . import __version__
from .errors import DatabaseError, EventStoreError, InvalidJSONL, SessionNotFound, WalMismatch

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
        except KeyboardInterrupt as e:  # a command may say what was interrupted (and how to finish it)
            _fail(f"interrupted {e.args[0]}" if e.args else "interrupted")
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug, or a database changed by hand: still one line
            if os.environ.get("EVENTSTORE_DEBUG"):
                raise
            _fail(f"unexpected {type(e).__name__}: {e} (EVENTSTORE_DEBUG=1 shows the traceback; "
                  "please report it)")


class _Utf8Text(click.ParamType):
    """A command-line word as UTF-8 text, even where the locale made Python decode argv as
    ASCII (non-ASCII bytes then arrive as surrogate escapes); a word whose bytes are not
    UTF-8 is a usage error that names the first bad byte (no backend can store or send it)."""

    name = "text"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            try:
                value = os.fsencode(value).decode("utf-8")
            except UnicodeError:
                pass
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                c = ord(value[e.start])
                what = f"byte 0x{c - 0xDC00:02X}" if 0xDC80 <= c <= 0xDCFF else f"U+{c:04X}"
                self.fail(f"not UTF-8 text ({what} at character {e.start + 1})", param, ctx)
        return value


TEXT = _Utf8Text()


class _EnvOption(click.Option):
    """An option that may come from an environment variable (``envvar=``): a bad value
    taken from the variable is reported as ``$VARIABLE``, not as an option nobody gave."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        if ctx is not None and isinstance(self.envvar, str) and \
                ctx.get_parameter_source(self.name) is click.core.ParameterSource.ENVIRONMENT:
            return f"${self.envvar}"
        return super().get_error_hint(ctx)


def _db_shown(db: str, store: EventStore) -> str:
    """``db`` as a message shows it: a file as given, a URL without its password."""
    from .backends import is_postgres_url

    return store.display if is_postgres_url(db) else db


def _lasting(db: str) -> str:
    """``db``, unless it names an in-memory database (``:memory:``, ``sqlite://``), which no
    command can use: it would be gone when the command ends. Exits with an error then."""
    if not db.strip():
        _fail("the database path is empty: give a file or a postgresql:// URL")
    if db == ":memory:" or db.lower() in ("sqlite://", "sqlite:///:memory:"):
        _fail(f"{db} is an in-memory database, which lasts only as long as one command: "
              "give a file or a postgresql:// URL")
    return db


def _store(ctx: click.Context, readonly: bool = False) -> EventStore:
    """The store of ``--db``. Commands that only read open an existing file read-only: they
    work on a file the user may only read, and never create a database at a mistyped path."""
    obj = ctx.find_root().obj
    if obj.get("store") is None:
        store = obj["store"] = EventStore.open(obj["db"], readonly=readonly, durability=obj.get("durability", "normal"))
        ctx.call_on_close(store.close)
        _say_if_upgraded(obj["db"], store)
    return obj["store"]


def _say_if_upgraded(db: str, store: EventStore) -> None:
    """One line on stderr when opening ``db`` upgraded an older eventstore's database."""
    if store.upgraded_from is not None:
        from .schema import SCHEMA_REVISION

        click.echo(f"{_db_shown(db, store)}: upgraded from schema revision {store.upgraded_from} to "
                   f"{SCHEMA_REVISION} (an older eventstore wrote it)", err=True)


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
@click.option("--db", cls=_EnvOption, envvar="EVENTSTORE_DB", default="eventstore.db", show_default=True,
              metavar="PATH", help="Database file, sqlite:// or postgresql:// URL; also $EVENTSTORE_DB.")
@click.option("--durability", cls=_EnvOption, envvar="EVENTSTORE_DURABILITY",
              type=click.Choice(["normal", "full", "may-lose-recent"], case_sensitive=False), default="normal",
              show_default=True,
              help="Commands that write. SQLite: normal survives a crash of the process, full also power "
                   "loss (an fsync per commit). PostgreSQL: normal and full wait for the server's durable "
                   "flush (a server crash loses no acknowledged append); may-lose-recent (PostgreSQL only) "
                   "returns at the asynchronous commit: a server crash may lose the last ~600 ms of appends, "
                   "never corrupts. Also $EVENTSTORE_DURABILITY.")
@click.version_option(__version__, prog_name="eventstore")
@click.pass_context
def cli(ctx: click.Context, db: str, durability: str) -> None:
    """Append-only AI-agent session logs in SQLite or PostgreSQL."""
    ctx.obj = {"db": _lasting(db), "store": None, "durability": durability}


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the database, or upgrade it to the latest schema."""
    store = _store(ctx)
    from .schema import SCHEMA_REVISION

    click.echo(f"{_db_shown(ctx.obj['db'], store)}: ready (schema revision {SCHEMA_REVISION})")


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run a scripted agent turn (with a real shell tool call) and show its log and messages."""
    from .demo import run_demo

    store = _store(ctx)
    s = run_demo(store)
    shown = _db_shown(ctx.obj["db"], store)
    click.echo(f"Session {s.id} in {shown}\n")
    click.echo("Event log (JSONL, as exported):")
    for ev in s.events():
        click.echo("  " + ev.to_jsonl())
    click.echo("\nDerived messages (the projection sent to the model):")
    click.echo(json.dumps(s.derive_messages(), indent=2, ensure_ascii=False))
    # Only a database given as --db is named: one from $EVENTSTORE_DB (or the default) is found
    # again by the next command as it was, while --db would override the variable with the
    # shown URL, which lacks the password.
    given = ctx.find_root().get_parameter_source("db") is click.core.ParameterSource.COMMANDLINE
    db = f"--db {shlex.quote(shown)} " if given else ""
    click.echo(f"\nNext: eventstore {db}messages {s.id}   |   eventstore {db}export {s.id}")


def _jsonl_files(paths: tuple[str, ...], quiet: bool = False) -> tuple[list[str], list[str]]:
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
            if not found and not errors and not quiet:
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


def _streams(files: list[str]) -> set[str]:
    """The import arguments that can be read only once: ``-`` (stdin), and paths that are not
    regular files (a FIFO, ``/dev/fd/N`` of a pipe, a device). A path that names the same
    one twice is a usage error: the second reading would find it empty, or wait forever."""
    out: set[str] = set()
    seen: dict[tuple[int, int], str] = {}
    for f in files:
        if f == "-":
            out.add(f)
            continue
        try:
            st = os.stat(f)
        except OSError:
            continue  # the import reports it
        if stat.S_ISREG(st.st_mode):
            continue
        if (st.st_dev, st.st_ino) in seen:
            twice = "" if seen[st.st_dev, st.st_ino] == f else f" (also as {seen[st.st_dev, st.st_ino]})"
            raise click.UsageError(f"{f} is not a regular file (a pipe or a device) and can be read only once; "
                                   f"it is given twice{twice}")
        seen[st.st_dev, st.st_ino] = f
        out.add(f)
    return out


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
@click.option("--format", "fmt", type=click.Choice(["claude-code", "codex", "eventstore"]),
              help="The files' format (default: detected from each file's first lines).")
@click.option("--session-id", metavar="ID", type=TEXT,
              help="The session id of a single eventstore file that has no session/meta line.")
@click.option("--append", is_flag=True,
              help="Add a file's events past the head of its stored session (the stored ones must match).")
@click.option("--salvage", is_flag=True,
              help="Keep the valid part of a file with bad lines (truncated, corrupt); report what was dropped.")
@click.option("--watch", is_flag=True,
              help="Keep importing as the files grow (and new files appear) until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True, metavar="SECONDS",
              help="With --watch: how often to look at the files' sizes and times.")
@click.option("-v", "--verbose", is_flag=True, help="One line per file, not only for problems.")
@click.pass_context
def import_(ctx: click.Context, paths: tuple[str, ...], fmt: str | None, session_id: str | None, append: bool,
            salvage: bool, watch: bool, interval: float, verbose: bool) -> None:
    """Import JSONL files: eventstore sessions, Claude Code transcripts, Codex rollouts.

    A folder means every *.jsonl below it, - is stdin. The format of each file is detected
    from its first lines unless --format says. Stdin, a pipe (<(command), a FIFO) or a
    device is read once, as it comes; --watch takes only regular files. Each session is
    atomic: all its new events or none (with --salvage, a file's valid part). A bad file is
    reported as FILE:LINE: reason and the other files still land; the exit status is then 1.
    Importing a transcript again appends only what its agent wrote since; --watch does so
    as the files grow. Ends with a summary on stdout: files, sessions, events, skipped,
    failed. A progress bar shows on a terminal.
    """
    from eventstore.io.bulk import import_jsonl
    from eventstore.io.transcripts.detect import detect, detect_file, head_reason, read_head, replay, undetected_reason
    from eventstore.io.transcripts.importer import Watcher, import_transcript

    files, unreadable = _jsonl_files(paths)
    if session_id is not None and len(files) + len(unreadable) != 1:
        raise click.UsageError(f"--session-id goes with exactly one file ({len(files)} given)")
    if files.count("-") > 1:
        raise click.UsageError("- (stdin) can be read only once")
    if watch and "-" in files:
        raise click.UsageError("--watch reads files; - (stdin) cannot be watched")
    streams = _streams(files)  # read once, as they come: stdin, pipes, devices
    if watch and streams:
        raise click.UsageError(f"--watch reads files again as they grow; {next(iter(streams))} is not a regular "
                               "file (a pipe or a device), which can be read only once: import it without --watch")
    store = _store(ctx)
    bar = _Bar("import", len(files), None if streams else sum(os.path.getsize(f) for f in files))
    counts = {"skipped": 0, "failed": len(unreadable), "salvaged": 0}
    totals = {"events": 0, "normalized": 0}
    stored: dict[str, set] = {"imported": set(), "appended": set()}  # session ids: one imported twice counts once

    def tally(status: str, sid: str) -> None:
        if status in stored:
            stored[status].add(sid)
        else:
            counts[status] += 1
    for message in unreadable:
        bar.note(message)

    def one(f: str, quiet: bool = False) -> None:
        """Import one file, count what happened, print what a user should see."""
        opened = None
        try:
            if f in streams:  # opened once (a pipe has no second reading): detection's bytes are read again
                source = sys.stdin.buffer if f == "-" else (opened := open(f, "rb"))
                head = read_head(source)
                source = replay(head, source)
                detected = detect(head.data)
            else:
                source = f
                detected = detect_file(f)
            kind = fmt or detected
            if kind is None:
                raise InvalidJSONL(f, *(head_reason(head) if f in streams else undetected_reason(f)))
            if detected is not None and detected != kind:  # --format is for files whose first lines do not say
                article = "an" if detected[0] in "aeiou" else "a"
                raise InvalidJSONL(f, 0, f"this is {article} {detected} file, not {kind}: give --format {detected}, "
                                         "or leave --format out")
            if kind != "eventstore" and session_id is not None:
                raise InvalidJSONL(f, 0, f"--session-id is for an eventstore file without a session/meta line: "
                                         f"a {kind} transcript names its sessions itself")
            if kind != "eventstore":
                rep = import_transcript(store, f, kind, salvage=salvage, stream=source if f in streams else None)
            else:
                rep = import_jsonl(store, source, name=f, session_id=session_id, append=append, salvage=salvage,
                                   progress=bar.advance)
        except InvalidJSONL as e:
            bar.note(str(e))
            counts["failed"] += 1
            return
        except RecursionError:  # a value nested deeper than a line reader caught (a converter's, the store's)
            bar.note(f"{f}: nested too deeply (a JSON value deeper than eventstore can follow); nothing of it "
                     "is stored")
            counts["failed"] += 1
            return
        except KeyboardInterrupt:  # what was stored of this file is kept; importing it again completes it
            what = (f"{f}{' (stdin)' if f == '-' else ''}: importing the same input" if f in streams
                    else f"{f}: running the same command")
            raise KeyboardInterrupt(f"while importing {what} again completes it") from None
        except (EventStoreError, OSError) as e:
            reason = f"{e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
            bar.note(f"{f}: {reason}")
            counts["failed"] += 1
            if isinstance(e, DatabaseError) and not isinstance(e, WalMismatch):
                watcher.forget(f)  # the database was away or busy, not the file at fault: the next look tries again
            return
        finally:
            if opened is not None:
                opened.close()
            bar.file_done()
        if kind != "eventstore":
            for r in rep.sessions:
                tally(r.status, r.session_id)
                totals["events"] += r.events
                sid = json.dumps(r.session_id, ensure_ascii=False)
                if verbose or (watch and quiet and r.events):
                    bar.note(f"{f}: {r.status} session {sid}: {_count(r.events, 'event')}"
                             + (f" ({r.held} lines wait for the rest of their message)" if r.held else "")
                             + (f" (the stored session holds the file's {r.total - r.ahead} events and {r.ahead} more)"
                                if r.ahead else ""))
            if rep.dropped:
                counts["salvaged"] += 1
                bar.note(f"{f}: salvaged: dropped {len(rep.dropped)} line(s): " + "; ".join(rep.dropped))
            if rep.waiting and verbose:
                bar.note(f"{f}: the last line is incomplete; it waits for the next run")
            if verbose and rep.folded:
                bar.note(f"{f}: where its lines went: {rep.folded_text()}")
            bar.advance(0 if f in streams else os.path.getsize(f), 0)
            return
        tally(rep.status, rep.session_id)
        totals["events"] += rep.events
        totals["normalized"] += rep.normalized
        sid = json.dumps(rep.session_id, ensure_ascii=False)
        if rep.dropped is not None:
            counts["salvaged"] += 1
            bar.note(f"{f}: salvaged {_count(rep.events, 'event')} of session {sid}; {rep.dropped}")
        elif rep.status == "skipped" and not quiet:
            bar.note(f"{f}: skipped: session {sid} is already stored ({rep.note})")
        elif verbose or (watch and quiet and rep.events):
            bar.note(f"{f}: {rep.status} session {sid}: {_count(rep.events, 'event')}")
        if rep.status == "imported" and rep.note and not quiet:  # completed an unfinished import
            bar.note(f"{f}: {rep.note}")
        if verbose and rep.normalized:
            bar.note(f"{f}: {rep.normalized} lines stored in canonical form (export writes them that way)")

    watcher = Watcher()
    try:
        for f in files:
            if f not in streams:
                list(watcher.due([f]))
            one(f)
    finally:
        bar.close()
    if watch:
        click.echo(f"watching {len(files)} file(s) every {interval:g} s; Ctrl-C stops", err=True)
        import time

        try:
            while True:
                time.sleep(interval)
                found, _unreadable = _jsonl_files(paths, quiet=True)
                for f in watcher.due(found):
                    one(f, quiet=True)
        except KeyboardInterrupt as e:  # the way to stop --watch
            if e.args:
                click.echo(f"interrupted {e.args[0]}", err=True)
    new, appended = stored["imported"], stored["appended"] - stored["imported"]
    parts = [f"files: {len(watcher.seen) if watch else len(files)}",
             f"sessions: {len(new) + len(appended)} ({len(new)} new, {len(appended)} appended)",
             f"events: {totals['events']}", f"skipped: {counts['skipped']}", f"failed: {counts['failed']}"]
    if counts["salvaged"]:
        parts.append(f"salvaged: {counts['salvaged']}")
    if totals["normalized"]:
        parts.append(f"normalized lines: {totals['normalized']}")
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
    from eventstore.io.export import export_session, export_sessions

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
            click.echo(f"{output}: {_count(n, 'event')}", err=True)
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
    except OSError as e:  # a full disk, say: what was written stays, and the count says how much
        where = f"{e.filename}: " if e.filename else ""
        _fail(f"{where}{e.strerror or e}; export stopped after writing {bar.done} of {len(ids)} file(s) to {out_dir}")
    finally:
        bar.close()
    click.echo(f"exported {len(written)} session(s), {sum(n for _s, _p, n in written)} events, to {out_dir}",
               err=True)


class _DayCache:
    """:func:`_when`, with each day's date formatted once (the ``sessions`` table formats two
    times a row: strftime cost as much as the rest of the row)."""

    def __init__(self) -> None:
        self.days: dict[int, str] = {}

    def __call__(self, ts: float | None) -> str:
        if not isinstance(ts, float) or not 0 <= ts < 253402300800:  # years 1970..9999
            return _when(ts)
        whole = int(ts)
        if ts - whole >= 0.9999995:  # fromtimestamp rounds to microseconds: it may carry a second
            return _when(ts)
        day, rem = divmod(whole, 86400)
        date = self.days.get(day)
        if date is None:
            date = self.days[day] = _when(day * 86400.0)[:10]
        return f"{date} {rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of a table.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List stored sessions: id, events, created, last event (UTC), and token totals
    (input, output, cache read, cache write) of sessions whose source recorded them."""
    from eventstore.io.transcripts.common import all_info

    from .search import UsageTotals, usage_totals

    store = _store(ctx, readonly=True)
    infos = store.sessions()
    tokens = usage_totals(store)
    none = UsageTotals(0, 0, 0, 0, 0)
    if as_json:  # info: what the session's session/info events say (facts an import learned later)
        info = all_info(store)
        click.echo(json.dumps([{"id": i.id, "events": i.events, "created_at": i.created_at,
                                "last_ts": i.last_ts, "input_tokens": tokens.get(i.id, none).input_tokens,
                                "output_tokens": tokens.get(i.id, none).output_tokens,
                                "cache_read_tokens": tokens.get(i.id, none).cache_read_tokens,
                                "cache_creation_tokens": tokens.get(i.id, none).cache_creation_tokens,
                                "info": info.get(i.id, {})}
                               for i in infos], ensure_ascii=False))
        return
    if not infos:
        click.echo("no sessions")
        return
    # Written line by line, columns padded to the widest cell (measured in terminal cells):
    # a rich Table of 200,000 rows took a minute and 670 MB to lay out.
    from rich.cells import cell_len

    ids = [CONTROL_OR_NEWLINE.sub(escape_char, _printable(i.id)) for i in infos]
    widths = [len(i) if i.isascii() else cell_len(i) for i in ids]
    id_width = max(7, max(widths))
    n_width = max(6, len(str(max(i.events for i in infos))))
    out = _out()
    bold = out.isatty() and not os.environ.get("NO_COLOR")
    header = f"{'SESSION'.ljust(id_width)}  {'EVENTS'.rjust(n_width)}  {'CREATED (UTC)':<19}  {'LAST EVENT (UTC)':<19}"
    token_cells = {sid: [f"{t.input_tokens:,}", f"{t.output_tokens:,}", f"{t.cache_read_tokens:,}",
                         f"{t.cache_creation_tokens:,}"] for sid, t in tokens.items()}
    if tokens:  # the token columns only where some session recorded usage, each as wide as its widest cell
        names = ("IN TOKENS", "OUT TOKENS", "CACHE READ", "CACHE WRITE")
        t_widths = [max(len(name), *(len(c[k]) for c in token_cells.values())) for k, name in enumerate(names)]
        header += "".join(f"  {name:>{w}}" for name, w in zip(names, t_widths, strict=True))
    lines = [click.style(header.rstrip(), bold=True) if bold else header.rstrip()]
    when = _DayCache()
    for sid, width, i in zip(ids, widths, infos, strict=True):
        line = (f"{sid}{' ' * (id_width - width)}  {i.events:>{n_width}}  "
                f"{when(i.created_at):<19}  {when(i.last_ts):<19}")
        if tokens:
            line += "".join(f"  {c:>{w}}" for c, w in zip(token_cells.get(i.id, ("-",) * 4), t_widths, strict=True))
        lines.append(line.rstrip())
        if len(lines) >= 2000:
            out.write(("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))
            lines = []
    if lines:
        out.write(("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))
    out.flush()


@cli.command()
@click.argument("session_id", type=TEXT)
@click.option("--type", "types", multiple=True, metavar="TYPE", type=TEXT,
              help="Only events of this type (repeatable).")
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
@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("query", metavar="QUERY", type=TEXT, callback=_query_word)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of objects, one per row.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row.")
@click.option("--timeout", type=click.FloatRange(min=0), default=30, show_default=True, metavar="SECONDS",
              callback=lambda c, p, v: _finite_seconds(c, p, v),
              help="Stop the query after SECONDS of work (0: no limit).")
@click.option("--max-memory", type=click.IntRange(min=1), default=1024, show_default=True, metavar="MIB",
              help="Stop the query when SQLite needs more than MIB mebibytes of memory.")
@click.pass_context
def sql(ctx: click.Context, query: str, as_json: bool, as_csv: bool, timeout: float, max_memory: int) -> None:
    """Run one read-only SQL QUERY (- reads it from stdin) and print the rows.

    The database is opened read-only: writes, DDL, ATTACH and PRAGMAs that set something are
    refused. Tables and views: events, sessions, messages, tool_calls, turns, session_summary
    (docs/schema.md). Prints a table, or with --json a JSON array of objects, with --csv CSV;
    NULL is null in JSON, empty in CSV; a BLOB is lower-case hex; an infinite REAL (1e400)
    is null in JSON, as JSON.stringify writes it. On a terminal, control characters in
    tables and CSV are shown as escapes. A table's column widths come from its first 1,000
    rows: a wider value in a later row widens its own line only. A query is stopped after
    --timeout seconds and when it needs more than --max-memory MiB.
    """
    from .backends import backend_class
    from .errors import QueryError
    from .schema import READ_COMPATIBLE_REVISIONS, SCHEMA_REVISION

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    fmt = "json" if as_json else "csv" if as_csv else None
    if query == "-":
        data = sys.stdin.buffer.read()
        try:
            query = data.decode("utf-8")
        except UnicodeDecodeError as e:
            _fail(f"-: the query is not UTF-8 text (byte 0x{data[e.start]:02X} at byte {e.start + 1})")
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
            _fail(f"the query was stopped after --timeout {timeout:g} s (give a larger --timeout, or 0 for no limit)")
        if e.limit == "memory":
            _fail(f"the query was stopped: it needed more than --max-memory {max_memory} MiB")
        raise


#: Printing a value takes a few times its size (hex for a BLOB, escapes, the line around it):
#: a value may hold at most this share of --max-memory.
SQL_VALUE_SHARE = 8


def _bounded(rows, max_value: int, deadline: float | None):
    """``rows``, raising :class:`QueryError` (``limit`` memory or time) at a value over
    ``max_value`` bytes, or once ``deadline`` (``time.monotonic()``) passes while printing."""
    from .errors import QueryError

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
    out = _out()
    terminal = out.isatty()
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
            cells = ["" if v is None else _plain(v) for v in row]
            if terminal:  # a terminal runs what it is sent: ESC, BEL, C1 and bidi controls go as escapes
                cells = [_UNSAFE.sub(escape_char, c) if isinstance(c, str) else c for c in cells]
            w.writerow(cells)
            if i % 1000 == 999:
                out.write(buf.getvalue().encode("utf-8"))
                buf.seek(0)
                buf.truncate()
        out.write(buf.getvalue().encode("utf-8"))
    else:
        _print_table(columns, rows)
    out.flush()


# Shown escaped in CSV written to a terminal (a tab and a newline are CSV's own).
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
# Shown escaped in a table cell: a tab and what no terminal should get raw (a newline is kept).
_CONTROL = re.compile(f"[\t{UNSAFE_CHARS}]")
TABLE_CELL_MAX = 300  # characters of a value shown in a table cell; --json and --csv show all


TABLE_LAYOUT_ROWS = 1000  # rows read before the table's column widths are fixed


def _table_cells(row: tuple) -> tuple[list[str | None], int]:
    """A row's values as its table cells show them (None for NULL), and how many were cut."""
    cells: list[str | None] = []
    cut = 0
    for v in row:
        if v is None:
            cells.append(None)
            continue
        text = _CONTROL.sub(escape_char, str(_plain(v) if isinstance(v, (str, bytes)) else v))
        if len(text) > TABLE_CELL_MAX:
            text = text[:TABLE_CELL_MAX] + f"… ({len(text) - TABLE_CELL_MAX} more)"
            cut += 1
        cells.append(text)
    return cells, cut


def _print_table(columns: list[str], rows: Iterator[tuple]) -> None:
    """Write ``rows`` as a table: a column as wide as its widest cell among the header and the
    first :data:`TABLE_LAYOUT_ROWS` rows (in terminal cells), two spaces between columns,
    NULL as ``NULL``; then the row count (and how many values were cut) on stderr.

    The rows are streamed: only the first :data:`TABLE_LAYOUT_ROWS` are held, as their
    cut cell texts, to fix the widths; a wider value in a later row widens its own line
    only. A result that fits in those rows, written to a terminal, is laid out by rich to
    the window's width, with a bold header and a dim NULL.
    """
    if not columns:
        return
    out = _out()
    header = [_CONTROL.sub(escape_char, _printable(c)) for c in columns]
    rows = iter(rows)
    cut = 0
    first: list[list[str | None]] = []
    for row in itertools.islice(rows, TABLE_LAYOUT_ROWS):
        cells, n = _table_cells(row)
        first.append(cells)
        cut += n
    following = next(rows, None)
    terminal = out.isatty()
    if terminal and following is None:
        _print_rich_table(header, first)
        count = len(first)
    else:
        count, cut = _stream_table(out, header, first, following, rows, cut,
                                   styled=terminal and not os.environ.get("NO_COLOR"))
    note = f"; {cut} long value{'' if cut == 1 else 's'} cut, see --json or --csv" if cut else ""
    click.echo(f"({count} row{'' if count == 1 else 's'}{note})", err=True)


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


def _stream_table(out, header: list[str], first: list[list[str | None]], following: tuple | None,
                  rows: Iterator[tuple], cut: int, *, styled: bool) -> tuple[int, int]:
    """Write the header, ``first`` and then ``following`` and the rest of ``rows`` line by
    line, with column widths fixed by the header and ``first``. Returns the row count and
    the count of cut values."""
    from rich.cells import cell_len

    def width(text: str) -> int:
        return len(text) if text.isascii() else cell_len(text)

    widths = [max(width(line) for line in c.split("\n")) for c in header]
    for cells in first:
        for i, text in enumerate(cells):
            if text is None:
                widths[i] = max(widths[i], 4)
            elif "\n" in text:
                widths[i] = max(widths[i], *map(width, text.split("\n")))
            else:
                widths[i] = max(widths[i], width(text))
    null = "\x1b[2mNULL\x1b[0m" if styled else "NULL"

    def lines(cells: list[str | None], *, bottom: bool = False) -> str:
        """The row's line(s): each cell padded to its column's width, a wider one to its own;
        a cell of fewer lines than its neighbour's at the top (at the bottom: the header)."""
        if not any(text is not None and "\n" in text for text in cells):
            return "  ".join(null + " " * (w - 4) if text is None else text + " " * (w - width(text))
                             for text, w in zip(cells, widths, strict=True))
        split = [[(null, 4)] if text is None else [(line, width(line)) for line in text.split("\n")]
                 for text in cells]
        height = max(map(len, split))
        blank = [("", 0)]
        split = [blank * (height - len(c)) + c if bottom else c + blank * (height - len(c)) for c in split]
        return "\n".join("  ".join(line + " " * (w - n) for (line, n), w in zip(row, widths, strict=True))
                         for row in zip(*split, strict=True))

    head = lines(header, bottom=True)  # rich's header: a short name on the last line of a tall one
    if styled:  # bold, line by line (a multi-line name keeps each line bold)
        head = "\n".join(f"\x1b[1m{line}\x1b[0m" for line in head.split("\n"))
    chunk = [head]
    chunk.extend(map(lines, first))
    count = len(first)
    if following is not None:
        for row in itertools.chain((following,), rows):
            cells, n = _table_cells(row)
            chunk.append(lines(cells))
            cut += n
            count += 1
            if len(chunk) >= 1000:
                out.write(("\n".join(chunk) + "\n").encode("utf-8", "backslashreplace"))
                chunk = []
    out.write(("\n".join(chunk) + "\n").encode("utf-8", "backslashreplace"))
    return count, cut


#: Findings ``verify`` prints without --all (one bad file can give one per event).
VERIFY_SHOWN = 100


def _finding_kinds(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> frozenset[str]:
    """``--ignore``'s comma lists as one set of :data:`eventstore.audit.verify.KINDS`."""
    from eventstore.audit.verify import KINDS

    kinds = frozenset(k.strip() for v in values for k in v.split(",") if k.strip())
    unknown = sorted(kinds - set(KINDS))
    if unknown:
        raise click.BadParameter(f"no finding kind {', '.join(unknown)} (the kinds: {', '.join(KINDS)})")
    return kinds


@cli.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID...]", type=TEXT)
@click.option("--head", is_flag=True,
              help="Print each session's head (SESSION_ID, events, hash of its last event) on stdout; "
                   "findings then go to stderr.")
@click.option("--checkpoint", "checkpoints", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Also prove that the log extends this checkpoint (from `eventstore checkpoint`; repeatable).")
@click.option("--public-key", type=click.Path(dir_okay=False), metavar="FILE",
              help="With --checkpoint: each checkpoint must be signed by this Ed25519 key (PEM).")
@click.option("--full", is_flag=True,
              help="SQLite: PRAGMA integrity_check (slower, thorough) instead of quick_check; PostgreSQL: "
                   "amcheck with heapallindexed (where installed).")
@click.option("--ignore", "ignored", multiple=True, metavar="KINDS", callback=_finding_kinds,
              help="Do not report findings of these kinds (comma-separated, repeatable), e.g. "
                   "chunks,tool_calls,dangling_call,orphan_result to check integrity only; their count "
                   "is still printed.")
@click.option("--all", "show_all", is_flag=True,
              help=f"Print every finding (by default the first {VERIFY_SHOWN} and a count by kind).")
@click.pass_context
def verify(ctx: click.Context, session_ids: tuple[str, ...], head: bool, checkpoints: tuple[str, ...],
           public_key: str | None, full: bool, ignored: frozenset[str], show_all: bool) -> None:
    """Check the whole database: the file (quick_check, its -wal), the schema against what
    the migrations create, the sessions, and the log: seqs gapless, the hash chain, the
    append-only triggers, streamed chunks against their message, the projection's validity
    for a chat API; with --checkpoint, that the log still extends each kept checkpoint.

    Checks every session, or the SESSION_IDs given. Prints one line per finding (the session,
    the seq, the kind, what is wrong), the first {VERIFY_SHOWN} unless --all, then how many of each
    kind, and exits 0 only when there is none. Reads only: the database is opened read-only.
    """
    from eventstore.audit import anchor, integrity

    docs = [(f, anchor.load_checkpoint(f)) for f in checkpoints]
    trusted = None if public_key is None else anchor.load_public_key(public_key)
    if trusted is not None and not docs:
        raise click.UsageError("--public-key goes with --checkpoint")
    report = integrity.verify_database(ctx.obj["db"], session_ids or None, full=full, checkpoints=docs,
                                       trusted_key=trusted)
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    # (when the database could not be opened, what says why is shown whatever its kind)
    skipped = [f for f in report.findings if f.kind in ignored and report.opened]
    report.findings = [f for f in report.findings if f not in skipped]
    shown = report.findings if show_all else report.findings[:VERIFY_SHOWN]
    for f in shown:  # a name from the log may hold control or bidi characters: escaped
        click.echo(_CONTROL.sub(escape_char, _printable(str(f))), err=head)
    if len(shown) < len(report.findings):
        click.echo(f"... {len(report.findings) - len(shown):,} more not shown (--all prints every finding)", err=head)
    if head:
        for sid, (n, h) in report.heads.items():
            click.echo(f"{_CONTROL.sub(escape_char, _printable(sid))}\t{n}\t{h}")
    status = "OK" if report.ok else f"{len(report.findings):,} finding{'' if len(report.findings) == 1 else 's'}"
    kinds = collections.Counter(f.kind for f in report.findings)
    extra = [", ".join(f"{kind} {n:,}" for kind, n in kinds.most_common())] if len(report.findings) > 1 else []
    if skipped:
        extra.append(f"{len(skipped)} of the ignored kinds not shown")
    if extra:
        status += f" ({'; '.join(extra)})"
    against = f", against {len(docs)} checkpoint{'' if len(docs) == 1 else 's'}" if docs else ""
    if not report.opened:
        click.echo("not verified: the database could not be opened", err=True)
    else:
        click.echo(f"verified {report.sessions} session{'' if report.sessions == 1 else 's'}, "
                   f"{report.events} events{against}: {status}", err=True)
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
    from eventstore.audit import verify as audit
    from eventstore.backends.capabilities import AuditReads

    store = _store(ctx)
    s = store.session(session_id)
    appended = s.repair()
    for ev in appended:
        what = f" for {ev.payload['tool_call_id']!r}" if ev.type == "tool/result" else ""
        click.echo(f"appended seq {ev.seq}: {ev.type}{_printable(what)}")
    if not appended:
        click.echo(f"session {_printable(session_id)}: nothing to repair")
    report = audit.verify(store.capability(AuditReads), [session_id])
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


def _wait_for_session(store: EventStore, session_id: str, timeout: float | None):
    """``tail -f`` of a session that is not stored yet: say so once, wait until another
    process creates it (the followers' wait for commits), and return its handle; None on
    Ctrl-C. Raises :class:`SessionNotFound` when ``timeout`` seconds pass first."""
    try:
        click.echo(f"waiting for session {_printable(repr(session_id))} (Ctrl-C stops)", err=True)
        if not store.wait_for_session(session_id, timeout=timeout):
            raise SessionNotFound(session_id)
    except KeyboardInterrupt:
        return None
    return store.session(session_id)


@cli.command()
@click.argument("session_id", required=False, type=TEXT)
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are committed (Ctrl-C stops).")
@click.option("-n", "--last", type=click.IntRange(min=0), metavar="N",
              help="Start with the last N events (default: all).")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS", callback=_finite_seconds,
              help="With --follow: stop after SECONDS without a new event.")
@click.pass_context
def tail(ctx: click.Context, session_id: str | None, follow: bool, last: int | None, timeout: float | None) -> None:
    """Show a session (or, without SESSION_ID, every session) the way a chat UI does.

    Streamed assistant/chunk deltas appear as they arrive; with --follow, new events from
    any process are shown as they are committed. With --follow, a SESSION_ID not stored yet
    is waited for (said once on stderr), then followed; --timeout bounds that wait too.
    """
    from eventstore.live.tailview import TailView

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
        try:
            s = store.session(session_id)
        except SessionNotFound:
            if not follow:
                raise
            s = _wait_for_session(store, session_id, timeout)
            if s is None:  # Ctrl-C while waiting: the usual way to stop --follow
                return
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
@click.argument("session_id", type=TEXT)
@click.option("--at", "at_seq", type=click.IntRange(min=0), metavar="SEQ",
              help="The request as it stood before the event at SEQ (default: the next request).")
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.pass_context
def context(ctx: click.Context, session_id: str, at_seq: int | None, pretty: bool) -> None:
    """Print what the model was sent: instructions, tools and messages, as one
    chat-completions request (JSON), retractions honoured. With --at SEQ, the request
    before the event at SEQ; for an assistant/message, the one that produced it."""
    from eventstore.log.codec import dumps

    request = _store(ctx, readonly=True).session(session_id).context_at(at_seq)
    text = json.dumps(request, indent=2, ensure_ascii=False) if pretty else dumps(request)
    out = _out()
    out.write(_printable(text).encode("utf-8") + b"\n")
    out.flush()


@cli.command()
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
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .backends import is_postgres_url
    from .search import MARK_END, MARK_START, RANK_WINDOW, catch_up, count
    from .search import search as run_search

    db = ctx.find_root().obj["db"]
    # An SQLite file we may only read is searched as it is (search() scans what is not indexed).
    readonly = not is_postgres_url(db) and not (os.path.isfile(db) and os.access(db, os.W_OK))
    store = _store(ctx, readonly=readonly)
    if not raw and not query.split():
        raise click.UsageError("QUERY is empty: give the words to look for")
    if _stderr_is_terminal():
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
        n = count(store, query, session_id=session_id, type=type_, raw=raw)
        if n > limit:
            click.echo(f"{n:,} matches; the best {limit} shown" + (f" (ranked among the newest {RANK_WINDOW:,})"
                                                                    if n > RANK_WINDOW else ""), err=True)
    if as_json:
        click.echo(json.dumps([{"session_id": h.session_id, "seq": h.seq, "type": h.type, "ts": h.ts,
                                "snippet": h.snippet.replace(MARK_START, "**").replace(MARK_END, "**"),
                                "score": h.score} for h in hits], ensure_ascii=False))
        return
    if not hits:
        click.echo("no match")
        return
    ids = [_one_line(h.session_id) for h in hits]
    snippets = []
    for h in hits:
        snippet = Text()
        for k, part in enumerate(re.split(f"[{MARK_START}{MARK_END}]", h.snippet)):
            snippet.append(CONTROL_OR_NEWLINE.sub(" ", part), style="bold reverse" if k % 2 else None)
        snippets.append(snippet)
    # on a terminal (or with $COLUMNS) the snippets wrap to its width; into a pipe or a file, each hit is one line
    wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    console = Console(soft_wrap=False, width=1_000_000 if wide else None)
    fixed = max(map(len, ids)) + 2 + max(len(str(h.seq)) for h in hits) + 2 + max(len(h.type) for h in hits) + 2
    if console.width - fixed < 40:  # too narrow for a snippet column: each snippet below its hit, indented
        from rich.padding import Padding

        for sid, h, snippet in zip(ids, hits, snippets, strict=True):
            console.print(Text(f"{sid}  seq {h.seq}  {h.type}", style="bold"), soft_wrap=True)
            console.print(Padding(snippet, (0, 0, 0, 4), expand=False))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    # an id and a type are for copying: kept whole on one line; the snippet takes the room left
    table.add_column("SESSION", no_wrap=True, min_width=max(map(len, ids)))
    table.add_column("SEQ", justify="right", no_wrap=True)
    table.add_column("TYPE", no_wrap=True, min_width=max(len(h.type) for h in hits))
    table.add_column("SNIPPET", overflow="fold")
    for sid, h, snippet in zip(ids, hits, snippets, strict=True):
        table.add_row(Text(sid), str(h.seq), h.type, snippet)
    console.print(table)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, type=TEXT,
              help="Address to listen on; anything but a loopback address shows the log to the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME", type=TEXT,
              help="A host name the viewer answers to, besides localhost and IP addresses (repeatable).")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the web browser.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, allow_hosts: tuple[str, ...], open_browser: bool) -> None:
    """Start the local, read-only web viewer and print its URL (Ctrl-C stops it).

    Sessions, each session as a chat, Replay at the recorded pace, live updates as other
    processes append. Needs the web extra: pip install '.[web]' in the checkout. See docs/web.md.
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
        names = ", ".join(["localhost", *web.url_names(sock), *allow_hosts])
        click.echo(f"warning: listening on {host}: anyone who can reach this machine on port "
                   f"{sock.getsockname()[1]} can read the whole log. It answers requests that name it by "
                   f"IP address or as {names} (--allow-host NAME adds a name): that check keeps a web page "
                   f"elsewhere from reading the log through a visitor's browser (DNS rebinding)", err=True)

    def ready() -> None:
        click.echo(f"eventstore viewer of {store.display} at {url}  (Ctrl-C stops)")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    # db_label: a URL without its password
    web.serve(store, sock, db_label=store.display, on_ready=ready, allow_hosts=allow_hosts)


# --- moving between databases, PostgreSQL roles ---------------------------------------------

@cli.command("copy")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID...]", type=TEXT)
def copy_command(src: str, dst: str, session_ids: tuple[str, ...]) -> None:
    """Copy every session (or the SESSION_IDs given) from the store SRC to the store DST.

    SRC and DST are SQLite files or postgresql:// URLs (DST is created and migrated if
    needed, once every SESSION_ID given is found in SRC). Every seq, ts, payload, meta,
    hash and each session's created_at is kept (a checkpoint of SRC, taken after its last
    write, verifies an empty DST after the copy);
    sessions go one by one, oldest first, each as one import, and are checked: a source
    session whose hash chain does not verify is refused. A session DST holds already is
    compared by its head hash: when DST holds its first events, the rest are added (none:
    it is already there), so an interrupted copy, or a session that grew in SRC since, is
    simply copied again. A session DST holds with other events, or cannot store, is
    reported on stderr and the others are copied; the exit status is then 1.
    """
    from eventstore.io.copy import copy_sessions

    def done(r) -> None:
        sid = _one_line(r.session_id)
        if r.status == "failed":
            click.echo(f"error: {_one_line(str(r.error))}", err=True)
            return
        if r.status == "added":
            what = f"{_count(r.added, 'event')} added, {r.events} in all"
        else:
            what = f"{_count(r.events, 'event')} {'already there' if r.skipped else 'copied'}"
        click.echo(f"{sid}: {what} (head {r.head[:12]})")
        if r.note:
            click.echo(f"{sid}: note: {_one_line(r.note)}", err=True)

    with EventStore.open(_lasting(src), readonly=True) as source:
        for sid in session_ids:  # an unknown id is an error before DST is created
            source.session(sid)
        with EventStore.open(_lasting(dst)) as target:
            _say_if_upgraded(dst, target)
            try:
                results = copy_sessions(source, target, session_ids or None, progress=done)
            except KeyboardInterrupt:  # each session copied is kept, and one cut off is completed by the next run
                raise KeyboardInterrupt("while copying: running the same command again completes it") from None
            shown = _db_shown(dst, target)
    by = {s: sum(r.status == s for r in results) for s in ("copied", "added", "skipped", "failed")}
    total = sum(r.added for r in results)
    click.echo(f"{_count(len(results), 'session')}: {by['copied']} copied, {by['added']} added to, "
               f"{by['skipped']} already there, {by['failed']} failed; {_count(total, 'event')} written to {shown}",
               err=True)
    if by["failed"]:
        sys.exit(EXIT_ERROR)


def _count(n: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _one_line(text: str) -> str:
    """``text`` on one line, safe for a terminal: control characters, newlines and lone
    surrogates as escapes (as ``sessions`` shows ids)."""
    return CONTROL_OR_NEWLINE.sub(escape_char, _printable(text))


@cli.command()
@click.option("--writer", default="eventstore_writer", show_default=True, type=TEXT, help="Name of the writer role.")
@click.option("--auditor", default="eventstore_auditor", show_default=True, type=TEXT, help="Name of the auditor role.")
@click.option("--print", "print_only", is_flag=True, help="Print the SQL instead of running it.")
@click.pass_context
def roles(ctx: click.Context, writer: str, auditor: str, print_only: bool) -> None:
    """PostgreSQL: create the least-privilege roles (run it once as the tables' owner with
    CREATEROLE, or as a superuser).

    The writer role may only INSERT and SELECT (it cannot UPDATE, DELETE, TRUNCATE, ALTER,
    DROP or disable triggers): agents and `eventstore import` work as it. The auditor role
    may only SELECT: for `eventstore sql` and `verify`. Both are NOLOGIN groups; grant them
    to login roles: GRANT eventstore_writer TO agent1.
    """
    from .backends import is_postgres_url

    db = ctx.find_root().obj["db"]
    if not is_postgres_url(db):
        _fail("roles: --db must be a postgresql:// URL (SQLite has no roles: use file permissions)")
    from .backends.capabilities import Roles

    store = _store(ctx)  # creates and migrates the schema first: the grants name its tables
    roles = store.capability(Roles)
    roles.check_role_names(writer, auditor)
    text = roles.roles_sql(writer, auditor)
    if print_only:
        click.echo(text, nl=False)
        return
    for notice in roles.apply_roles(text):
        click.echo(f"note: {notice}", err=True)
    click.echo(f"roles {writer} (INSERT, SELECT) and {auditor} (SELECT) are set up on {store.display}")


# --- checkpoints: what the log held, to keep elsewhere (eventstore.audit.anchor) -----------------

@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), callback=_named_path,
              help="Write the checkpoint to this file (default, and -: stdout).")
@click.option("--key", "key", type=click.Path(exists=True, dir_okay=False), metavar="KEYFILE",
              help="Sign it with this Ed25519 private key (PEM; make one with `eventstore keygen`).")
@click.pass_context
def checkpoint(ctx: click.Context, output: str | None, key: str | None) -> None:
    """Write a checkpoint of the log: the global position, each session's event count, head
    hash and sessions row hash, and a Merkle root over them, optionally signed. Keep it
    where the database's writers cannot reach; `eventstore verify --checkpoint FILE` later
    proves that the log still extends it (nothing in it changed, removed or cut off).
    """
    import io

    from eventstore.audit import anchor
    from eventstore.backends.capabilities import AuditReads

    store = _store(ctx, readonly=True)
    if output is not None and output != "-":
        from eventstore.io.export import check_not_the_store

        try:
            check_not_the_store(store, output, "the checkpoint")
        except OSError as e:
            _fail(f"{output}: {e.strerror}")
    doc = anchor.make_checkpoint(store.capability(AuditReads), key)
    if output is None or output == "-":
        out = _out()
        anchor.write_checkpoint(doc, out)
        out.flush()
        return
    buf = io.BytesIO()
    anchor.write_checkpoint(doc, buf)
    _write_durably(output, buf.getvalue())
    click.echo(f"{output}: checkpoint at position {doc['position']}, {doc['session_count']} session(s), "
               f"root {doc['root']}" + (", signed" if key else ""), err=True)


def _write_durably(path: str, data: bytes) -> None:
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


@cli.command()
@click.argument("keyfile", type=click.Path(dir_okay=False))
def keygen(keyfile: str) -> None:
    """Make an Ed25519 key pair for signing checkpoints: the private key in KEYFILE (mode
    0600) and the public key in KEYFILE.pub (give it to `verify --public-key`). An existing
    file is never replaced."""
    from eventstore.audit import anchor

    priv, pub = anchor.generate_key(keyfile)
    click.echo(f"private key: {priv}\npublic key:  {pub} ({anchor.load_public_key(pub)})")


def main() -> None:
    """Console entry point."""
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    cli(prog_name="eventstore")


if __name__ == "__main__":  # pragma: no cover
    main()
