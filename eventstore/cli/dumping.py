"""The bodies of ``eventstore events`` and ``eventstore messages``, written without click:
the click commands (cli/reading.py) run them, and so does the command line without
importing click (:mod:`eventstore.cli.fast`)."""

from __future__ import annotations

from collections.abc import Callable

from eventstore.core.store import EventStore

from . import fast
from .common import out_bytes


def read_events(store: EventStore, session_id: str, types: tuple[str, ...], after_seq: int | None
                ) -> Callable[[], None]:
    """The session ``session_id`` of ``store`` looked up (:class:`SessionNotFound` here), and a
    function that writes its events (``types`` only, past ``after_seq``) as JSONL lines,
    read as they are written."""
    session = store.session(session_id)

    def write() -> None:
        out = out_bytes()
        for ev in session.events(after_seq=after_seq, types=types or None):
            out.write((ev.to_jsonl() + "\n").encode("utf-8"))
        out.flush()
    return write


def read_messages(store: EventStore, session_id: str, pretty: bool) -> Callable[[], None]:
    """The chat messages of the session ``session_id`` of ``store``, read (its projection, as
    a JSON array), and a function that writes them (indented with ``pretty``)."""
    text = store.session(session_id).messages_json()

    def write() -> None:
        shown = text
        if pretty:
            import json

            shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        out = out_bytes()
        out.write(shown.encode("utf-8") + b"\n")
        out.flush()
    return write


def plain_events(db: str, durability: str, session_id: str, types: tuple[str, ...], after_seq: int | None
                 ) -> Callable[[], None]:
    """``eventstore events`` without click (:mod:`eventstore.cli.fast`): the store of ``db``
    opened and the session found; a function that writes its events, then closes the store."""
    store = EventStore.open(db, readonly=True, durability=durability)
    try:
        write = read_events(store, session_id, types, after_seq)
    except BaseException:
        store.close()
        raise
    return lambda: fast.closing(store, write)


def plain_messages(db: str, durability: str, session_id: str, pretty: bool) -> Callable[[], None]:
    """``eventstore messages`` without click (:mod:`eventstore.cli.fast`): the messages of the
    session read from ``db``, and a function that writes them."""
    with EventStore.open(db, readonly=True, durability=durability) as store:
        return read_messages(store, session_id, pretty)
