"""``eventstore export`` (sessions as JSONL files) and ``copy`` (between stores)."""

from __future__ import annotations

import sys

import click

from eventstore.core.store import EventStore

from .base import EXIT_ERROR, TEXT, fail, lasting
from .common import Bar, db_shown, named_path, one_line, open_store, out_bytes, plural, say_if_upgraded


@click.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID]...", type=TEXT)
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), callback=named_path,
              help="One session to this file (default, and -: stdout).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR", callback=named_path,
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
        raise click.UsageError("with --out DIR, give SESSION_IDs or --all, not both" if all_
                               else "with --out DIR, give SESSION_IDs or --all")
    store = open_store(ctx, readonly=True)
    if out_dir is None:
        if output is not None and output != "-":
            n = export_session(store, session_ids[0], output)
            click.echo(f"{output}: {plural(n, 'event')}", err=True)
        else:
            out = out_bytes()
            export_session(store, session_ids[0], out)
            out.flush()
        return
    ids = [i.id for i in store.sessions()] if all_ else list(session_ids)
    bar = Bar("export", len(ids), None)
    try:
        written = export_sessions(store, out_dir, ids, progress=bar.advance,
                                  done=lambda *_: bar.file_done())
    except OSError as e:  # a full disk, say: what was written stays, and the count says how much
        where = f"{e.filename}: " if e.filename else ""
        fail(f"{where}{e.strerror or e}; export stopped after writing {bar.done} of {len(ids)} file(s) to {out_dir}")
    finally:
        bar.close()
    click.echo(f"exported {len(written)} session(s), {sum(n for _s, _p, n in written)} events, to {out_dir}",
               err=True)

# --- moving between databases, PostgreSQL roles ---------------------------------------------

@click.command("copy")
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
    from eventstore.core.copy import copy_sessions

    def done(r) -> None:
        sid = one_line(r.session_id)
        if r.status == "failed":
            click.echo(f"error: {one_line(str(r.error))}", err=True)
            return
        if r.status == "added":
            what = f"{plural(r.added, 'event')} added, {r.events} in all"
        else:
            what = f"{plural(r.events, 'event')} {'already there' if r.skipped else 'copied'}"
        click.echo(f"{sid}: {what} (head {r.head[:12]})")
        if r.note:
            click.echo(f"{sid}: note: {one_line(r.note)}", err=True)

    with EventStore.open(lasting(src), readonly=True) as source:
        for sid in session_ids:  # an unknown id is an error before DST is created
            source.session(sid)
        with EventStore.open(lasting(dst)) as target:
            say_if_upgraded(dst, target)
            try:
                results = copy_sessions(source, target, session_ids or None, progress=done)
            except KeyboardInterrupt:  # each session copied is kept, and one cut off is completed by the next run
                raise KeyboardInterrupt("while copying: running the same command again completes it") from None
            shown = db_shown(dst, target)
    by = {s: sum(r.status == s for r in results) for s in ("copied", "added", "skipped", "failed")}
    total = sum(r.added for r in results)
    click.echo(f"{plural(len(results), 'session')}: {by['copied']} copied, {by['added']} added to, "
               f"{by['skipped']} already there, {by['failed']} failed; {plural(total, 'event')} written to {shown}",
               err=True)
    if by["failed"]:
        sys.exit(EXIT_ERROR)


