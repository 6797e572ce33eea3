"""``eventstore redact``: remove fields of a stored event, keeping the proof of the rest
(docs/redaction.md); with ``--found``, what ``eventstore scan`` finds. :func:`report` prints
what a redaction did, for both."""

from __future__ import annotations

import json

import click

from eventstore.log.redaction import Redaction, path_text

from .base import TEXT
from .common import open_existing_store


@click.command()
@click.argument("session_id", required=False, metavar="[SESSION_ID]", type=TEXT)
@click.argument("seq", required=False, type=click.IntRange(min=0))
@click.option("--path", "paths", multiple=True, metavar="PATH", type=TEXT,
              help="A field to redact, e.g. content or tool_calls[0].function.arguments (repeatable; "
                   "default: the whole payload).")
@click.option("--reason", metavar="TEXT", type=TEXT, help="Why (recorded in the redaction event and the marker).")
@click.option("--found", is_flag=True,
              help="Redact every secret `eventstore scan` finds (in SESSION_ID only, when given); the reason "
                   "defaults to 'secret: KIND'.")
@click.option("--json", "as_json", is_flag=True,
              help="What was redacted, what was not and what is left to erase, as JSON.")
@click.pass_context
def redact(ctx: click.Context, session_id: str | None, seq: int | None, paths: tuple[str, ...], reason: str | None,
           found: bool, as_json: bool) -> None:
    """Redact fields of a stored event: they read as a marker, their bytes leave the database.

    A redaction event appended to the session records the seq, the paths, when, by whom and
    why; verify still proves every field that was not redacted. A field already redacted is
    left as it is (when every one named is, the redaction is refused). With --found, every
    secret `eventstore scan` reports is redacted (one redaction per event, its paths the
    fields found). A warning on stderr (and in --json's "warnings") says when the old bytes
    could not be erased from the database's files, and what to run.
    """
    if found:
        if seq is not None or paths:
            raise click.UsageError("--found redacts what scan finds: give at most a SESSION_ID, no SEQ or --path")
        from .secrets import redact_found

        redact_found(ctx, (session_id,) if session_id is not None else (), reason, as_json)
        return
    if session_id is None or seq is None:
        raise click.UsageError("give SESSION_ID and SEQ (or --found)")
    if reason is None:
        raise click.UsageError("--reason is required: say why the fields are redacted")
    store = open_existing_store(ctx)
    done = store.redact(session_id, seq, list(paths) or None, reason=reason)
    report([redacted(done)], [], [done.erasure], as_json)


def redacted(done: Redaction, kind: str | None = None) -> dict:
    """What ``redact`` reports of one redaction (``--json``'s ``redacted`` items); ``kind``:
    the kinds of secret ``--found`` found, None for a plain ``redact``."""
    return {"session_id": done.session_id, "seq": done.seq, "paths": [path_text(p) for p in done.paths],
            "already_redacted": [path_text(p) for p in done.already], "kind": kind, "reason": done.reason,
            "by": done.by, "redaction_seq": done.redaction_seq}


def report(done: list[dict], left: list[dict], erasures: list[str | None], as_json: bool) -> None:
    """Print the redactions ``done`` (items of :func:`redacted`) and those ``left`` undone
    (``session_id``, ``seq`` or None for the meta, ``paths``, ``kind``, ``error``): a line each,
    or with ``as_json`` one JSON object ``{"redacted", "not_redacted", "warnings"}``. Each
    distinct ``erasures`` sentence (:attr:`Redaction.erasure`: the old bytes are still in
    the database's files) is a warning, printed once on stderr whatever the format."""
    warnings = list(dict.fromkeys(e for e in erasures if e is not None))
    if as_json:
        click.echo(json.dumps({"redacted": done, "not_redacted": left, "warnings": warnings}, ensure_ascii=False))
    else:
        for d in done:
            already = f"; already redacted: {', '.join(d['already_redacted'])}" if d["already_redacted"] else ""
            click.echo(f"redacted session {d['session_id']!r} seq {d['seq']}: {', '.join(d['paths'])} "
                       f"({d['reason']}), by {d['by']}; recorded by the redaction event at seq {d['redaction_seq']}"
                       f"{already}")
        for d in left:
            where = "meta" if d["seq"] is None else f"seq {d['seq']}"
            click.echo(f"not redacted: session {d['session_id']!r} {where}: {', '.join(d['paths'])} ({d['kind']}): "
                       f"{d['error']}", err=True)
    for w in warnings:  # the old bytes may still be on disk: say what is left to do
        click.echo(f"warning: {w}", err=True)
