"""The ``sessions`` listing, written without click: the command's body
(:func:`read_listing`), which the click command runs and so does ``eventstore sessions``
without importing click at all (:func:`plain_sessions`, through :mod:`eventstore.cli.fast`):
click's import alone takes longer than the whole listing of a small store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from eventstore.core.store import EventStore

from . import fast
from .common import DayCache, out_bytes, printable
from .table import print_table, text_width
from .tailview import CONTROL_OR_NEWLINE, escape_char

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from eventstore.core.store import SessionInfo
    from eventstore.search import UsageTotals


def read_sessions(store: EventStore) -> tuple[list[SessionInfo], dict[str, UsageTotals]]:
    """What the listing shows of ``store``: its sessions, and the token totals of those that
    recorded usage."""
    from eventstore.search import usage_totals

    return store.sessions(), usage_totals(store)


def read_listing(store: EventStore, as_json: bool) -> Callable[[Callable[..., object]], None]:
    """What ``eventstore sessions [--json]`` prints for ``store``, read: a function that
    writes it with ``echo`` (which writes a line of text, as ``click.echo``): a table of the
    sessions (streamed), or a JSON array with ``--json``."""
    infos, tokens = read_sessions(store)
    if not as_json:
        return lambda echo: print_sessions(infos, tokens, echo)
    # info: what the session's session/info events say (facts an import learned later)
    from eventstore.io.transcripts.common import all_info
    from eventstore.search import UsageTotals

    none = UsageTotals(0, 0, 0, 0, 0)
    info = all_info(store)

    def write(echo: Callable[..., object]) -> None:
        import json

        echo(json.dumps([{"id": i.id, "events": i.events, "created_at": i.created_at,
                          "last_ts": i.last_ts, "input_tokens": tokens.get(i.id, none).input_tokens,
                          "output_tokens": tokens.get(i.id, none).output_tokens,
                          "cache_read_tokens": tokens.get(i.id, none).cache_read_tokens,
                          "cache_creation_tokens": tokens.get(i.id, none).cache_creation_tokens,
                          "info": info.get(i.id, {})}
                         for i in infos], ensure_ascii=False))
    return write


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


def plain_sessions(db: str, durability: str, as_json: bool) -> Callable[[], None]:
    """``eventstore sessions`` without click (:mod:`eventstore.cli.fast`): the store of ``db``
    read, and a function that writes the listing."""
    with EventStore.open(db, readonly=True, durability=durability) as store:
        write = read_listing(store, as_json)
    return lambda: write(fast.echo)
