"""``eventstore import``: JSONL files, transcripts, stdin and pipes, --watch."""

from __future__ import annotations

import json
import os
import stat
import sys

import click

from eventstore.errors import DatabaseError, EventStoreError, InvalidJSONL, WalMismatch

from .base import EXIT_ERROR, TEXT
from .common import Bar, open_store, plural


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


@click.command("import")
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
    store = open_store(ctx)
    bar = Bar("import", len(files), None if streams else sum(os.path.getsize(f) for f in files))
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
                    bar.note(f"{f}: {r.status} session {sid}: {plural(r.events, 'event')}"
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
            bar.note(f"{f}: salvaged {plural(rep.events, 'event')} of session {sid}; {rep.dropped}")
        elif rep.status == "skipped" and not quiet:
            bar.note(f"{f}: skipped: session {sid} is already stored ({rep.note})")
        elif verbose or (watch and quiet and rep.events):
            bar.note(f"{f}: {rep.status} session {sid}: {plural(rep.events, 'event')}")
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

