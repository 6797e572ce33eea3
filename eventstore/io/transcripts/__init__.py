"""Import real agents' transcripts as sessions: Claude Code and Codex CLI.

Each format has a converter (:mod:`.claude_code`, :mod:`.codex`) that turns the lines of one
transcript file into one or more :class:`~.common.Converted` sessions, ``(session id, meta,
[(type, payload, ts), ...])``, without touching a database; :mod:`.importer` stores them
through the store's public API (``create_session``, ``append_many`` with ``expected_seq``),
appending only what a grown file adds; :mod:`.detect` tells the formats apart.

See docs/import-export.md, "Agents' transcripts", for the mapping.
"""

from __future__ import annotations

#: Every format ``eventstore import --format`` names.
FORMATS = ("claude-code", "codex", "eventstore")
