"""``eventstore scan``: secrets in stored events; and what ``redact --found`` does with them."""

from __future__ import annotations

import json
import sys

import click

from eventstore.errors import EventStoreError
from eventstore.log.redaction import Redaction, nameable, path_text

from .base import EXIT_ERROR, TEXT, fail, invoke_reporting_errors
from .common import open_store, out_bytes, plural, printable, stderr_is_terminal
from .table import print_table
from .tailview import CONTROL_OR_NEWLINE, escape_char

#: ``scan``'s exit status when it finds a secret (as secret scanners do: a CI step fails).
EXIT_FOUND = 1
#: ``scan``'s exit status when it cannot scan (no such session, a database it cannot read):
#: not 1, so that a CI step tells "secrets found" from "nothing was scanned" (a usage error
#: exits 2 too, as for every command).
EXIT_SCAN_ERROR = 2


def _progress():
    """A progress line on stderr when it is a terminal, else None."""
    if not stderr_is_terminal():
        return None
    done = 0

    def progress(events: int) -> None:
        nonlocal done
        done += events
        click.echo(f"\rscanned {done:,} events", err=True, nl=False)
    return progress


def _cell(text: str) -> str:
    return CONTROL_OR_NEWLINE.sub(escape_char, printable(text))


@click.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID...]", type=TEXT)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of findings instead of a table.")
@click.pass_context
def scan(ctx: click.Context, session_ids: tuple[str, ...], as_json: bool) -> None:
    """Find secrets in stored events: API keys and tokens, private keys, JWTs, passwords in URLs.

    Scans every session (or the SESSION_IDs given): each string of each event's payload
    (message content, tool call arguments, tool results, nested parts) and the session's
    meta. Each finding names the session, the seq (meta for the session's meta), the field
    and the kind, with a masked preview: a few leading characters at most, never the secret.
    Exit status: 0 when the store is clean, 1 when something is found, 2 when it cannot
    scan (a session that is not stored, a database it cannot open or read, a usage error).
    `eventstore redact --found` redacts what scan finds.
    """
    try:  # an error is one line, as for every command, but its status is not the one of a finding
        found = invoke_reporting_errors(lambda ctx: _scan(ctx, session_ids, as_json), ctx)
    except SystemExit as e:
        if e.code == EXIT_ERROR:
            sys.exit(EXIT_SCAN_ERROR)
        raise
    if found:
        sys.exit(EXIT_FOUND)


def _scan(ctx: click.Context, session_ids: tuple[str, ...], as_json: bool) -> bool:
    """``scan``'s work: prints the findings; whether there are any."""
    from eventstore.audit.secrets import scan_store

    store = open_store(ctx, readonly=True)
    progress = _progress()
    findings = list(scan_store(store, session_ids or None, progress))
    if progress is not None:
        click.echo("", err=True)
    if as_json:
        click.echo(json.dumps([f.to_dict() for f in findings], ensure_ascii=False))
    elif findings:
        rows = ([_cell(f.session_id), "meta" if f.seq is None else str(f.seq), _cell(f.field), f.kind, _cell(f.preview)]
                for f in findings)
        print_table(out_bytes(), ["SESSION", "SEQ", "FIELD", "KIND", "PREVIEW"], rows, right=(1,), strip=True)
        in_events = [f for f in findings if f.seq is not None]
        events = len({(f.session_id, f.seq) for f in in_events})
        sessions = len({f.session_id for f in findings})
        metas = len({f.session_id for f in findings if f.seq is None})
        where = " and ".join(filter(None, [events and plural(events, "event"), metas and plural(metas, "meta")]))
        advice = "`eventstore redact --found` redacts those in events" if in_events else ""
        if metas:  # a session's meta is no event: no redaction can name it
            advice += ("; " if advice else "") + "a secret in a session's meta cannot be redacted (no event records it)"
        click.echo(f"{plural(len(findings), 'secret')} in {where} of {plural(sessions, 'session')}; {advice}",
                   err=True)
    else:
        click.echo("no secrets found")
    return bool(findings)


def _redactable(path: tuple) -> tuple:
    """``path`` up to the first key a redaction's path cannot name (:func:`nameable`): the
    part of it that can be redacted, empty when its top-level key is one."""
    return next((path[:i] for i, step in enumerate(path) if not nameable(step)), path)


def redact_found(ctx: click.Context, session_ids: tuple[str, ...], reason: str | None, as_json: bool) -> None:
    """``eventstore redact --found``: scan the sessions (all, or ``session_ids``) again and
    redact each secret-bearing field through :meth:`EventStore.redact`, one redaction (one
    ``redaction`` event) per event, its paths the fields found; the reason is ``reason`` or
    ``secret: KIND``. The old bytes are erased once, after every redaction
    (:meth:`EventStore.erase_redacted`). Prints what it did as a plain ``redact`` does (:func:`report`,
    the erasure's warning once); a secret in a session's meta cannot be redacted (the meta
    is no event), nor an event the store refuses to redact: each is said, the other events
    are still redacted, and the exit status is 1."""
    from eventstore.audit.secrets import scan_store
    from eventstore.log.redaction import check_reason

    from .common import open_existing_store

    if reason is not None:
        check_reason(reason)  # (once, not once per event)
    store = open_existing_store(ctx)
    if not hasattr(store, "redact"):
        fail("this eventstore cannot redact (EventStore.redact is missing)")
    by_event: dict[tuple[str, int | None], list] = {}
    for f in scan_store(store, session_ids or None, _progress()):
        by_event.setdefault((f.session_id, f.seq), []).append(f)
    done = []
    left = []
    for (sid, seq), found in by_event.items():
        kinds = ", ".join(dict.fromkeys(f.kind for f in found))
        if seq is None:
            left.append({"session_id": sid, "seq": None, "paths": _fields(found), "kind": kinds,
                         "error": "a secret in the session's meta cannot be redacted (the meta is not an event)"})
            continue
        why = reason or f"secret: {kinds}"
        # a key holding '"' cannot be named in a redaction's path (SQLite's JSON paths): its
        # parent is redacted instead; a top-level one is said, and the event's other fields redacted
        targets = [_redactable(f.path) for f in found]
        bad = [f for f, t in zip(found, targets, strict=True) if not t]
        if bad:
            left.append({"session_id": sid, "seq": seq, "paths": _fields(bad), "kind": kinds,
                         "error": "a top-level key holding '\"' cannot be redacted by path"})
            found = [f for f, t in zip(found, targets, strict=True) if t]
        paths = list(dict.fromkeys(t for t in targets if t))
        if not paths:
            continue
        try:
            one = store.redact(sid, seq, [list(p) for p in paths], reason=why, erase=False)
        except EventStoreError as e:  # said with the rest; the other events are still redacted
            left.append({"session_id": sid, "seq": seq, "paths": _fields(found), "kind": kinds, "error": str(e)})
            continue
        done.append(redacted(one, kinds))
    # one erasure for all the redactions (a table rewrite on PostgreSQL, a WAL checkpoint on SQLite)
    erasures = [store.erase_redacted()] if done else []
    report(done, left, erasures, as_json)
    if not as_json:
        if not done and not left:
            click.echo("no secrets found: nothing to redact")
        elif done:
            click.echo(f"{plural(len(done), 'event')} redacted; `eventstore verify` lists the redactions")
    if left:
        sys.exit(EXIT_ERROR)


def _fields(found: list) -> list[str]:
    """The fields of ``found`` (findings), each once: a field may hold secrets of several kinds."""
    return list(dict.fromkeys(f.field for f in found))


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
