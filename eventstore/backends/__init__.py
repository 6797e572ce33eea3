"""Database backends: the contract (:mod:`.base`) and one class per database.

:func:`backend_class` picks the class from what the user gave as ``--db``,
``$EVENTSTORE_DB`` or ``EventStore.open(target)``:

* a path, ``:memory:`` or an ``sqlite://`` URL -> :class:`eventstore.backends.sqlite.SQLiteBackend`;
* ``postgresql://user@host:port/db`` (libpq form) or ``postgresql+psycopg://...``
  (SQLAlchemy form) -> :class:`eventstore.backends.postgres.PostgresBackend`, imported only
  then (it needs the ``eventstore[postgres]`` extra).
"""

from __future__ import annotations

import os

from ..errors import DatabaseError
from .base import Backend

__all__ = ["Backend", "backend_class", "is_postgres_url", "open_backend"]

_POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")


def is_postgres_url(target: str | os.PathLike) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://``,
    ``postgresql+psycopg://``, ``postgres://``)."""
    return isinstance(target, str) and target.lower().startswith(_POSTGRES_SCHEMES)


def backend_class(target: str | os.PathLike) -> type[Backend]:
    """The backend class for ``target`` (see the module's docstring). Raises
    :class:`DatabaseError` for a URL of another database, or for PostgreSQL without its
    driver (the message says which ``pip install`` fixes it)."""
    if is_postgres_url(target):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise DatabaseError("PostgreSQL needs the psycopg driver: pip install 'eventstore[postgres]'") from None
        from .postgres import PostgresBackend

        return PostgresBackend
    text = os.fspath(target)
    if "://" in text and not text.lower().startswith("sqlite:"):
        scheme = text.split("://", 1)[0]
        raise DatabaseError(f"{scheme}:// databases are not supported: give an SQLite file (a path or "
                            f"sqlite:///PATH) or a postgresql:// URL")
    from .sqlite import SQLiteBackend

    return SQLiteBackend


def open_backend(target: str | os.PathLike, **options) -> Backend:
    """``backend_class(target).open(target, **options)`` (see :meth:`Backend.open`)."""
    cls = backend_class(target)
    return cls.open(target if is_postgres_url(target) else os.fspath(target), **options)
