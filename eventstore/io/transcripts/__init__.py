"""Import real agents' transcripts as sessions, and the registry of JSONL formats.

Each transcript format is one module (:mod:`.claude_code`, :mod:`.codex`) with a converter
that turns the lines of one file into one or more :class:`~.common.Converted` sessions,
``(session id, meta, [(type, payload, ts), ...])``, without touching a database, and a
test of one parsed line that says the file is in its format. The module registers both
with :func:`register` and is named in :data:`MODULES`; detection (:mod:`.detect`), the
importer (:mod:`.importer`, :mod:`eventstore.io.importer`) and ``eventstore import
--format`` read the registry. ``eventstore``, the store's own JSONL, is registered here:
:mod:`eventstore.io.bulk` imports it.

See docs/import-export.md, "Agents' transcripts", for the mapping.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The modules that register the built-in transcript formats, imported on first use.
MODULES = ("eventstore.io.transcripts.codex", "eventstore.io.transcripts.claude_code")


@dataclass(frozen=True)
class TranscriptFormat:
    """One JSONL format: its ``name`` (``--format NAME``), ``looks_like(line)``, whether one
    parsed line (a dict) of a file's first lines shows the file is in this format, and
    ``convert(lines, path, stream=False)``, the file's ``(line number, dict)`` lines as a
    list of :class:`~.common.Converted` sessions (None for the store's own format)."""

    name: str
    looks_like: Callable[[dict], bool]
    convert: Callable[..., list[Any]] | None = None


_formats: dict[str, TranscriptFormat] = {}
_loaded = False


def register(fmt: TranscriptFormat) -> TranscriptFormat:
    """Add ``fmt`` to the registry (again: replaces the format of that name). Formats are
    asked in the order they were registered; the store's own format first. Returns ``fmt``."""
    _formats[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Take the format called ``name`` out of the registry (nothing if it is not there)."""
    _formats.pop(name, None)


def formats() -> list[TranscriptFormat]:
    """Every registered format, in the order detection asks them."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in MODULES:
            importlib.import_module(module)
    return list(_formats.values())


def names() -> list[str]:
    """The registered formats' names, sorted (``--format``'s choices)."""
    return sorted(f.name for f in formats())


def get(name: str) -> TranscriptFormat:
    """The format called ``name``; ``ValueError`` for a name not registered."""
    for f in formats():
        if f.name == name:
            return f
    raise ValueError(f"no JSONL format {name!r} (the formats are {', '.join(names())})")


def _eventstore_line(d: dict) -> bool:
    t = d.get("type")
    return t == "session/meta" or ("seq" in d and "ts" in d and isinstance(t, str))


register(TranscriptFormat("eventstore", _eventstore_line))

