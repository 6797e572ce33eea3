"""The ``sessions`` listing, written without click: the command's body
(:func:`write_sessions`), and ``eventstore [--db PATH] [--durability D] sessions`` run
without importing click at all (:func:`run_sessions`), as ``--help`` is written: click's
import alone takes longer than the whole listing of a small store."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator

from eventstore.core.store import EventStore

from .common import DayCache, out_bytes, printable
from .table import print_table, text_width
from .tailview import CONTROL_OR_NEWLINE, escape_char

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from eventstore.core.store import SessionInfo
    from eventstore.search import UsageTotals

#: The choices of the global ``--durability`` (cli/group.py), as click takes them.
DURABILITIES = ("normal", "full", "may-lose-recent")


def read_sessions(store: EventStore) -> tuple[list[SessionInfo], dict[str, UsageTotals]]:
    """What the listing shows of ``store``: its sessions, and the token totals of those that
    recorded usage."""
    from eventstore.search import usage_totals

    return store.sessions(), usage_totals(store)


def write_sessions(store: EventStore, as_json: bool, echo: Callable[[str], object]) -> None:
    """What ``eventstore sessions [--json]`` prints for ``store``: a table of the sessions
    (streamed), or a JSON array with ``--json``; ``echo`` writes a line of text."""
    infos, tokens = read_sessions(store)
    if as_json:  # info: what the session's session/info events say (facts an import learned later)
        import json

        from eventstore.io.transcripts.common import all_info
        from eventstore.search import UsageTotals

        none = UsageTotals(0, 0, 0, 0, 0)
        info = all_info(store)
        echo(json.dumps([{"id": i.id, "events": i.events, "created_at": i.created_at,
                          "last_ts": i.last_ts, "input_tokens": tokens.get(i.id, none).input_tokens,
                          "output_tokens": tokens.get(i.id, none).output_tokens,
                          "cache_read_tokens": tokens.get(i.id, none).cache_read_tokens,
                          "cache_creation_tokens": tokens.get(i.id, none).cache_creation_tokens,
                          "info": info.get(i.id, {})}
                         for i in infos], ensure_ascii=False))
        return
    print_sessions(infos, tokens, echo)


def print_sessions(infos: list[SessionInfo], tokens: dict[str, UsageTotals], echo: Callable[[str], object]) -> None:
    """The table of the sessions (streamed to stdout), or ``no sessions`` through ``echo``."""
    if not infos:
        echo("no sessions")
        return
    # Streamed, so that memory does not grow with the sessions: the widest id, count and
    # token cells are known here, so no rows are held to lay the table out.
    ids = [i.id if i.id.isprintable() else CONTROL_OR_NEWLINE.sub(escape_char, printable(i.id)) for i in infos]
    header = ["SESSION", "EVENTS", "CREATED (UTC)", "LAST EVENT (UTC)"]
    widths = [max(map(text_width, ids)), len(str(max(i.events for i in infos))),
              19, 19]
    token_cells = {sid: [f"{t.input_tokens:,}", f"{t.output_tokens:,}", f"{t.cache_read_tokens:,}",
                         f"{t.cache_creation_tokens:,}"] for sid, t in tokens.items()}
    if tokens:  # the token columns only where some session recorded usage
        header += ["IN TOKENS", "OUT TOKENS", "CACHE READ", "CACHE WRITE"]
        widths += [max(len(c[k]) for c in token_cells.values()) for k in range(4)]
    when = DayCache()
    no_tokens = ["-"] * 4

    def rows() -> Iterator[list[str]]:
        for sid, i in zip(ids, infos, strict=True):
            row = [sid, str(i.events), when(i.created_at), when(i.last_ts)]
            yield row + token_cells.get(i.id, no_tokens) if tokens else row

    out = out_bytes()
    print_table(out, header, rows(), right={1, 4, 5, 6, 7}, strip=True, min_widths=widths, layout_rows=0)
    out.flush()


def plain_sessions_args(args: list[str]) -> tuple[str, str] | None:
    """``(db, durability)`` when ``args`` (the command line after ``eventstore``) is the
    table form of ``sessions`` with nothing for click to decide: at most ``--db PATH`` and
    ``--durability D`` (each once, ``--opt VALUE`` or ``--opt=VALUE``) before ``sessions``,
    values from ``$EVENTSTORE_DB`` and ``$EVENTSTORE_DURABILITY`` as click reads them, a
    database a command can use and a valid durability. None for anything else: click then
    parses the command line, and says what is wrong."""
    if not args or args[-1] != "sessions":
        return None
    given: dict[str, str] = {}
    rest = args[:-1]
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name not in ("--db", "--durability") or name in given:
            return None
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        if value.startswith("-"):
            return None
        given[name] = value
    db, durability = given.get("--db"), given.get("--durability")
    for var in ("EVENTSTORE_DB", "EVENTSTORE_DURABILITY"):
        if os.environ.get(var) == "":  # (an empty variable counts as unset; left to click)
            return None
    db = db if db is not None else os.environ.get("EVENTSTORE_DB", "eventstore.db")
    durability = (durability if durability is not None else os.environ.get("EVENTSTORE_DURABILITY", "normal")).lower()
    if durability not in DURABILITIES or not db.strip() or db == ":memory:" or db.lower() in (
            "sqlite://", "sqlite:///:memory:"):
        return None
    return db, durability


def run_sessions(args: list[str]) -> bool:
    """Run ``eventstore sessions`` without click when ``args`` allow it
    (:func:`plain_sessions_args`), printing exactly what the click command prints; False
    (nothing done, nothing printed) when click must run it. Any error before the table is
    written also leaves it to click, which opens the store again (read-only: no side
    effect) and reports the error as every command does; an error while writing is
    reported as every command reports it too."""
    plain = plain_sessions_args(args)
    if plain is None:
        return False
    db, durability = plain
    store = None
    try:
        store = EventStore.open(db, readonly=True, durability=durability)
        infos, tokens = read_sessions(store)
    except Exception:
        return False
    except KeyboardInterrupt as e:
        _report(e)
        return True
    finally:
        if store is not None:
            store.close()

    def echo(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        print_sessions(infos, tokens, echo)
    except (Exception, KeyboardInterrupt) as e:
        _report(e)
    return True


def _report(error: BaseException) -> None:
    """Report ``error``, raised while the table was written, as the click group does."""
    from .base import invoke_reporting_errors

    def reraise(_ctx: object) -> None:
        raise error

    try:
        invoke_reporting_errors(reraise, None)
    except OSError as e:  # a reader gone away (| head): click's own exit, status 1 and quiet
        import errno

        if e.errno != errno.EPIPE:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
