"""Reading sessions: ``sessions``, ``events``, ``messages``, ``context`` and ``tail``."""

from __future__ import annotations

import json
import os

import click

from eventstore.core.store import EventStore
from eventstore.errors import SessionNotFound

from .base import TEXT
from .common import finite_seconds, open_store, out_bytes, printable


@click.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of a table.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List stored sessions: id, events, created, last event (UTC), and token totals
    (input, output, cache read, cache write) of sessions whose source recorded them."""
    from .listing import read_listing

    read_listing(open_store(ctx, readonly=True), as_json)(click.echo)


@click.command()
@click.argument("session_id", type=TEXT)
@click.option("--type", "types", multiple=True, metavar="TYPE", type=TEXT,
              help="Only events of this type (repeatable).")
@click.option("--after", "after_seq", type=int, metavar="SEQ", help="Only events with seq > SEQ.")
@click.pass_context
def events(ctx: click.Context, session_id: str, types: tuple[str, ...], after_seq: int | None) -> None:
    """Print a session's events as JSONL lines, in seq order."""
    from .dumping import read_events

    read_events(open_store(ctx, readonly=True), session_id, types, after_seq)()


@click.command()
@click.argument("session_id", type=TEXT)
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.pass_context
def messages(ctx: click.Context, session_id: str, pretty: bool) -> None:
    """Print the derived chat messages (the projection) as a JSON array."""
    from .dumping import read_messages

    read_messages(open_store(ctx, readonly=True), session_id, pretty)()


# --- live tailing ----------------------------------------------------------------------------

_STYLES = {"user": {"fg": "cyan", "bold": True}, "assistant": {"fg": "green", "bold": True},
           "tool": {"fg": "yellow"}, "dim": {"dim": True}}


def _wait_for_session(store: EventStore, session_id: str, timeout: float | None):
    """``tail -f`` of a session that is not stored yet: say so once, wait until another
    process creates it (the followers' wait for commits), and return its handle; None on
    Ctrl-C. Raises :class:`SessionNotFound` when ``timeout`` seconds pass first."""
    try:
        click.echo(f"waiting for session {printable(repr(session_id))} (Ctrl-C stops)", err=True)
        if not store.wait_for_session(session_id, timeout=timeout):
            raise SessionNotFound(session_id)
    except KeyboardInterrupt:
        return None
    return store.session(session_id)


@click.command()
@click.argument("session_id", required=False, type=TEXT)
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are committed (Ctrl-C stops).")
@click.option("-n", "--last", type=click.IntRange(min=0), metavar="N",
              help="Start with the last N events (default: all).")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS", callback=finite_seconds,
              help="With --follow: stop after SECONDS without a new event.")
@click.pass_context
def tail(ctx: click.Context, session_id: str | None, follow: bool, last: int | None, timeout: float | None) -> None:
    """Show a session (or, without SESSION_ID, every session) the way a chat UI does.

    Streamed assistant/chunk deltas appear as they arrive; with --follow, new events from
    any process are shown as they are committed. With --follow, a SESSION_ID not stored yet
    is waited for (said once on stderr), then followed; --timeout bounds that wait too.
    """
    from .tailview import TailView

    if timeout is not None and not follow:
        raise click.UsageError("--timeout goes with --follow")
    store = open_store(ctx, readonly=True)
    out = out_bytes()
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


@click.command()
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

    request = open_store(ctx, readonly=True).session(session_id).context_at(at_seq)
    text = json.dumps(request, indent=2, ensure_ascii=False) if pretty else dumps(request)
    out = out_bytes()
    out.write(printable(text).encode("utf-8") + b"\n")
    out.flush()


