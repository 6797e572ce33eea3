"""The SQLite backend, one concern per module:

* :mod:`.backend`: :class:`SQLiteBackend`, the core contract (connection, transactions, the
  append path, reads, following, imports, the projection);
* :mod:`.statements`: the SQL of the hot paths and the error codes of SQLite's refusals;
* :mod:`.engine`: opening connections, and locating and running the Alembic migrations;
* :mod:`.walcheck`, :mod:`.checkpoint`, :mod:`.writelock`, :mod:`.importlock`: the WAL's
  pairing mark, the store's checkpointer, the write queue's and the import's lock files;
* :mod:`.follower`, :mod:`.importer`, :mod:`.export`: followers, the import transaction,
  the export fast path;
* capabilities: :mod:`.search` (FTS5), :mod:`.audit` (with :mod:`.schema`'s guards),
  :mod:`.index` (the viewer's), :mod:`.views` (usage, info, titles), :mod:`.sandbox`
  (``eventstore sql``).
"""

from .backend import SQLiteBackend
from .statements import error_code

__all__ = ["SQLiteBackend", "error_code"]
