"""The ``eventstore`` command line (click).

The database is ``--db PATH`` (before the command), else ``$EVENTSTORE_DB``, else
``./eventstore.db``. Errors print one line to stderr (``error: ...``, or ``FILE:LINE:
reason`` for a bad JSONL line) and exit with status 1; usage errors exit with 2.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from pathlib import Path

import click

from . import __version__
from .errors import EventStoreError, InvalidJSONL, SessionExists
from .store import EventStore

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
            _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
        except KeyboardInterrupt:
            _fail("interrupted")


def _store(ctx: click.Context) -> EventStore:
    obj = ctx.find_root().obj
    if obj.get("store") is None:
        obj["store"] = EventStore.open(obj["db"])
        ctx.call_on_close(obj["store"].close)
    return obj["store"]


def _out():
    """stdout as bytes: exports are UTF-8 whatever the locale says."""
    sys.stdout.flush()
    return sys.stdout.buffer


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="EVENTSTORE_DB", default="eventstore.db", show_default=True,
              metavar="PATH", help="Database file (or sqlite:// URL); also $EVENTSTORE_DB.")
@click.version_option(__version__, prog_name="eventstore")
@click.pass_context
def cli(ctx: click.Context, db: str) -> None:
    """Append-only AI-agent session logs in SQLite."""
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
    click.echo(f"\nNext: eventstore messages {s.id}   |   eventstore export {s.id}")


def _jsonl_files(paths: tuple[str, ...]) -> list[str]:
    files: list[str] = []
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            found = sorted(str(f) for f in Path(p).rglob("*.jsonl") if f.is_file())
            if not found:
                click.echo(f"{p}: no *.jsonl files in this folder", err=True)
            files.extend(found)
        elif os.path.exists(p):
            files.append(p)
        else:
            raise click.BadParameter(f"{p}: no such file or folder", param_hint="PATH")
    return files


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--session-id", help="Session id for a single file that has no session/meta line.")
@click.pass_context
def import_(ctx: click.Context, paths: tuple[str, ...], session_id: str | None) -> None:
    """Import JSONL session files; a folder means every *.jsonl below it, - is stdin.

    Each file is atomic: all its events or none. The other files still land when one fails.
    """
    files = _jsonl_files(paths)
    if session_id is not None and len(files) != 1:
        raise click.UsageError("--session-id goes with exactly one file")
    store = _store(ctx)
    done = failed = events = 0
    for f in files:
        try:
            if f == "-":
                sid = store.import_jsonl(sys.stdin.buffer, name="-", session_id=session_id)
            else:
                sid = store.import_jsonl(f, session_id=session_id)
        except InvalidJSONL as e:
            click.echo(str(e), err=True)
            failed += 1
            continue
        except SessionExists as e:
            click.echo(f"{f}: {e}", err=True)
            failed += 1
            continue
        n = store.session(sid).next_seq()
        events += n
        done += 1
        click.echo(f"{f}: session {sid}, {n} events")
    click.echo(f"imported {done} file(s), {events} events; {failed} failed")
    if failed:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.argument("session_id", required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (default: stdout).")
@click.option("--all", "all_", is_flag=True, help="Export every session, one file each, into --out.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Folder for --all.")
@click.pass_context
def export(ctx: click.Context, session_id: str | None, output: str | None, all_: bool, out_dir: str | None) -> None:
    """Export a session as JSONL, byte-identical to the reference format."""
    store = _store(ctx)
    if all_:
        if session_id or output:
            raise click.UsageError("--all takes --out DIR, not a session id or -o")
        if not out_dir:
            raise click.UsageError("--all needs --out DIR")
        from .jsonl import file_name_for

        os.makedirs(out_dir, exist_ok=True)
        infos = store.sessions()
        for info in infos:
            store.export_jsonl(info.id, os.path.join(out_dir, file_name_for(info.id)))
        click.echo(f"exported {len(infos)} session(s) to {out_dir}", err=True)
        return
    if not session_id:
        raise click.UsageError("give a SESSION_ID, or --all --out DIR")
    if out_dir:
        raise click.UsageError("--out goes with --all; use -o FILE for one session")
    if output:
        n = store.export_jsonl(session_id, output)
        click.echo(f"{output}: {n} events", err=True)
    else:
        out = _out()
        store.export_jsonl(session_id, out)
        out.flush()


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of a table.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List stored sessions: id, events, created, last event (UTC)."""
    infos = _store(ctx).sessions()
    if as_json:
        click.echo(json.dumps([{"id": i.id, "events": i.events, "created_at": i.created_at,
                                "last_ts": i.last_ts} for i in infos], ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("SESSION")
    table.add_column("EVENTS", justify="right")
    table.add_column("CREATED (UTC)")
    table.add_column("LAST EVENT (UTC)")
    for i in infos:
        table.add_row(i.id, str(i.events), _when(i.created_at), _when(i.last_ts))
    Console(soft_wrap=True).print(table) if infos else click.echo("no sessions")


@cli.command()
@click.argument("session_id")
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only events of this type (repeatable).")
@click.option("--after", "after_seq", type=int, metavar="SEQ", help="Only events with seq > SEQ.")
@click.pass_context
def events(ctx: click.Context, session_id: str, types: tuple[str, ...], after_seq: int | None) -> None:
    """Print a session's events as JSONL lines, in seq order."""
    s = _store(ctx).session(session_id)
    out = _out()
    for ev in s.events(after_seq=after_seq, types=types or None):
        out.write((ev.to_jsonl() + "\n").encode("utf-8"))
    out.flush()


@cli.command()
@click.argument("session_id")
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.pass_context
def messages(ctx: click.Context, session_id: str, pretty: bool) -> None:
    """Print the derived chat messages (the projection) as a JSON array."""
    s = _store(ctx).session(session_id)
    text = s.messages_json()
    if pretty:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    out = _out()
    out.write(text.encode("utf-8") + b"\n")
    out.flush()


def main() -> None:
    """Console entry point."""
    cli(prog_name="eventstore")


if __name__ == "__main__":  # pragma: no cover
    main()
