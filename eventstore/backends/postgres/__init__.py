"""The PostgreSQL backend (psycopg 3): ``postgresql://user@host:port/db`` or
``postgresql+psycopg://...``, one concern per module:

* :mod:`.backend`: :class:`PostgresBackend`, the core contract (connections and
  transactions, the append path, reads, imports, the projection, locating and running the
  Alembic migrations); its module docstring says how positions, appends, durability,
  errors and following work;
* :mod:`.statements`: the SQL of the hot paths, and refusals by SQLSTATE and constraint name;
* :mod:`.connection`: URLs and connection strings, passwords kept out of every message;
* :mod:`.follower`, :mod:`.importer`: LISTEN/NOTIFY followers, ``COPY`` imports and locks;
* capabilities: :mod:`.search` (``tsvector``), :mod:`.audit`, :mod:`.index` (the
  viewer's), :mod:`.views`, :mod:`.sandbox` (``eventstore sql``), :mod:`.roles`,
  :mod:`.redact` (the one in-place change, and VACUUM FULL after it).
"""

from .backend import PostgresBackend
from .connection import conninfo
from .roles import apply_roles, check_role_names, roles_sql
from .statements import LOCK_POSITIONS, MIGRATION_LOCK

__all__ = ["PostgresBackend", "apply_roles", "check_role_names", "conninfo", "LOCK_POSITIONS", "MIGRATION_LOCK",
           "roles_sql"]
