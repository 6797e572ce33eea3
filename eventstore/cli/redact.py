"""``eventstore redact``: remove fields of a stored event, keeping the proof of the rest
(docs/redaction.md); with ``--found``, what ``eventstore scan`` finds. What a redaction did is
printed by :func:`eventstore.cli.secrets.report`, for both."""

from __future__ import annotations

import click

from .base import TEXT
from .common import open_existing_store
from .secrets import redact_found, redacted, report


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
        redact_found(ctx, (session_id,) if session_id is not None else (), reason, as_json)
        return
    if session_id is None or seq is None:
        raise click.UsageError("give SESSION_ID and SEQ (or --found)")
    if reason is None:
        raise click.UsageError("--reason is required: say why the fields are redacted")
    store = open_existing_store(ctx)
    done = store.redact(session_id, seq, list(paths) or None, reason=reason)
    report([redacted(done)], [], [done.erasure], as_json)

