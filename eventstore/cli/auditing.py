"""Auditing: ``verify``, ``repair``, ``checkpoint`` and ``keygen``."""

from __future__ import annotations

import collections
import sys

import click

from .base import EXIT_ERROR, TEXT, fail
from .common import named_path, open_store, out_bytes, printable, shown, write_durably

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


@click.command()
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
    Lists each redaction: the session, the seq, the paths, why, by whom, when, and what is
    still proven of the event.

    Checks every session, or the SESSION_IDs given. Prints one line per finding (the session,
    the seq, the kind, what is wrong), the first 100 unless --all, then how many of each
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
    listed = report.findings if show_all else report.findings[:VERIFY_SHOWN]
    for f in listed:  # a name from the log may hold control or bidi characters: escaped
        click.echo(shown(str(f)), err=head)
    if len(listed) < len(report.findings):
        click.echo(f"... {len(report.findings) - len(listed):,} more not shown (--all prints every finding)", err=head)
    for r in report.redactions:  # what each redaction removed, and what is still proven
        click.echo(shown(f"redaction: {r}"), err=head)
    if head:
        for sid, (n, h) in report.heads.items():
            click.echo(f"{shown(sid)}\t{n}\t{h}")
    status = "OK" if report.ok else f"{len(report.findings):,} finding{'' if len(report.findings) == 1 else 's'}"
    kinds = collections.Counter(f.kind for f in report.findings)
    extra = [", ".join(f"{kind} {n:,}" for kind, n in kinds.most_common())] if len(report.findings) > 1 else []
    if skipped:
        extra.append(f"{len(skipped)} of the ignored kinds not shown")
    if extra:
        status += f" ({'; '.join(extra)})"
    against = f", against {len(docs)} checkpoint{'' if len(docs) == 1 else 's'}" if docs else ""
    if report.redactions:
        status += f", {len(report.redactions)} redaction{'' if len(report.redactions) == 1 else 's'} listed"
    if not report.opened:
        click.echo("not verified: the database could not be opened", err=True)
    else:
        click.echo(f"verified {report.sessions} session{'' if report.sessions == 1 else 's'}, "
                   f"{report.events} events{against}: {status}", err=True)
    if not report.ok:
        sys.exit(EXIT_ERROR)


@click.command()
@click.argument("session_id", type=TEXT)
@click.pass_context
def repair(ctx: click.Context, session_id: str) -> None:
    """Append what an interrupted session needs (never changing what is logged): a tool/result
    saying the call was interrupted for each dangling tool call, a step/end for an open step,
    a turn/end for an open turn. Then verify the session; exit 1 if findings remain (what
    appending cannot fix). Run it only when the session's agent is not running.
    """
    from eventstore.audit import verify as audit

    store = open_store(ctx)
    s = store.session(session_id)
    appended = s.repair()
    for ev in appended:
        what = f" for {ev.payload['tool_call_id']!r}" if ev.type == "tool/result" else ""
        click.echo(f"appended seq {ev.seq}: {ev.type}{printable(what)}")
    if not appended:
        click.echo(f"session {printable(session_id)}: nothing to repair")
    from eventstore.backends.capabilities import AuditReads

    report = audit.verify(store.capability(AuditReads), [session_id])
    for f in report.findings:
        click.echo(printable(str(f)), err=True)
    if not report.ok:
        fail(f"{len(report.findings)} finding(s) remain that appending cannot repair")


# --- checkpoints: what the log held, to keep elsewhere (eventstore.audit.anchor) -----------------

@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), callback=named_path,
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

    store = open_store(ctx, readonly=True)
    if output is not None and output != "-":
        from eventstore.io.export import check_not_the_store

        try:
            check_not_the_store(store, output, "the checkpoint")
        except OSError as e:
            fail(f"{output}: {e.strerror}")
    from eventstore.backends.capabilities import AuditReads

    doc = anchor.make_checkpoint(store.capability(AuditReads), key)
    if output is None or output == "-":
        out = out_bytes()
        anchor.write_checkpoint(doc, out)
        out.flush()
        return
    buf = io.BytesIO()
    anchor.write_checkpoint(doc, buf)
    write_durably(output, buf.getvalue())
    click.echo(f"{output}: checkpoint at position {doc['position']}, {doc['session_count']} session(s), "
               f"root {doc['root']}" + (", signed" if key else ""), err=True)


@click.command()
@click.argument("keyfile", type=click.Path(dir_okay=False))
def keygen(keyfile: str) -> None:
    """Make an Ed25519 key pair for signing checkpoints: the private key in KEYFILE (mode
    0600) and the public key in KEYFILE.pub (give it to `verify --public-key`). An existing
    file is never replaced."""
    from eventstore.audit import anchor

    priv, pub = anchor.generate_key(keyfile)
    click.echo(f"private key: {priv}\npublic key:  {pub} ({anchor.load_public_key(pub)})")


