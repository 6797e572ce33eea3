"""``eventstore import``: the options and what is printed; :mod:`eventstore.io.importer` imports."""

from __future__ import annotations

import os
import sys

import click

from .base import EXIT_ERROR, TEXT
from .common import Bar, open_store


class FormatChoice(click.Choice):
    """``--format``'s choices: the formats registered now (:mod:`eventstore.io.transcripts`)."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self):
        from eventstore.io.transcripts import names

        return names()

    @choices.setter
    def choices(self, _value) -> None:
        pass


@click.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--format", "fmt", type=FormatChoice(),
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
@click.option("--redact-secrets", is_flag=True,
              help="Store each field holding a secret `eventstore scan` would find as [redacted: secret: KIND], "
                   "with a redaction event after its event: the secret never lands.")
@click.option("-v", "--verbose", is_flag=True, help="One line per file, not only for problems.")
@click.pass_context
def import_(ctx: click.Context, paths: tuple[str, ...], fmt: str | None, session_id: str | None, append: bool,
            salvage: bool, watch: bool, interval: float, redact_secrets: bool, verbose: bool) -> None:
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
    from eventstore.io.importer import ImportArgumentError, ImportRun, check_arguments, find_files

    files, unreadable = find_files(paths, note=lambda message: click.echo(message, err=True))
    try:
        streams = check_arguments(files, unreadable, session_id=session_id, watch=watch)
    except ImportArgumentError as e:
        raise click.UsageError(str(e)) from None
    store = open_store(ctx, redact_secrets=redact_secrets)
    bar = Bar("import", len(files), None if streams else sum(os.path.getsize(f) for f in files))
    run = ImportRun(store, fmt=fmt, session_id=session_id, append=append, salvage=salvage, verbose=verbose,
                    watching=watch, note=bar.note, progress=bar.advance, file_done=bar.file_done)
    try:
        totals = run.run(files, unreadable, streams)
    finally:
        bar.close()
    if watch:
        click.echo(f"watching {len(files)} file(s) every {interval:g} s; Ctrl-C stops", err=True)
        try:
            run.watch(paths, interval)
        except KeyboardInterrupt as e:  # the way to stop --watch
            if e.args:
                click.echo(f"interrupted {e.args[0]}", err=True)
    click.echo(totals.summary())
    if totals.failed:
        sys.exit(EXIT_ERROR)
