"""Database backends: the core contract (:mod:`.base`), the optional capabilities
(:mod:`.capabilities`) with their generic fallbacks (:mod:`.fallbacks`), and one package per
database (:mod:`.sqlite`, :mod:`.postgres`); docs/backends.md draws the whole.

:func:`backend_class` picks the class from what the user gave as ``--db``,
``$EVENTSTORE_DB`` or ``EventStore.open(target)``:

* a path, ``:memory:`` or an ``sqlite://`` URL -> :class:`eventstore.backends.sqlite.SQLiteBackend`;
* ``postgresql://user@host:port/db`` (libpq form) or ``postgresql+psycopg://...``
  (SQLAlchemy form) -> :class:`eventstore.backends.postgres.PostgresBackend`, imported only
  then (it needs the ``postgres`` extra).

A libpq keyword/value string (``host=... dbname=...``) is refused (:func:`check_target`),
not taken as the name of an SQLite file: a text that starts with ``KEYWORD=`` for a libpq
connection keyword counts as one, even without spaces (a file of such a name is given as
``./host=x`` or ``sqlite:///host=x``); another ``word=`` (``data=1.db``) is a file.
"""

from __future__ import annotations

import os

from ..errors import DatabaseError
from ..lazy import LazyPattern
from .base import Backend

__all__ = ["Backend", "backend_class", "check_target", "is_postgres_url", "open_backend"]

_POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")


def is_postgres_url(target: str | os.PathLike) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://``,
    ``postgresql+psycopg://``, ``postgres://``)."""
    return isinstance(target, str) and target.lower().startswith(_POSTGRES_SCHEMES)


# libpq's connection keywords (PostgreSQL 17, "Parameter Key Words").
_LIBPQ_KEYWORDS = frozenset("""
    host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
    sslnegotiation sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir
    sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
    service target_session_attrs load_balance_hosts""".split())
_KEYWORD_START = LazyPattern(r"\s*([A-Za-z_]+)\s*=")  # (compiled at first use: not at start-up)
_PASSWORD_VALUE = LazyPattern(r"(?i)((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|\S)*)")


def check_target(target: str | os.PathLike) -> None:
    """Raises :class:`DatabaseError` when ``target`` is a libpq keyword/value string (see the
    module's docstring); the message shows it with its passwords hidden."""
    if not isinstance(target, str) or "=" not in target:
        return
    m = _KEYWORD_START.match(target)
    if m and m[1].lower() in _LIBPQ_KEYWORDS:
        shown = " ".join(_PASSWORD_VALUE.sub(r"\1***", target).split())
        raise DatabaseError(f"{shown}: a libpq keyword/value string; eventstore takes a "
                            f"postgresql://user@host:port/db URL (for an SQLite file of this name, put ./ before it)")


def backend_class(target: str | os.PathLike) -> type[Backend]:
    """The backend class for ``target`` (see the module's docstring). Raises
    :class:`DatabaseError` for a URL of another database, or for PostgreSQL without its
    driver (the message says which ``pip install`` fixes it), or for a libpq keyword/value
    string (:func:`check_target`)."""
    check_target(target)
    if is_postgres_url(target):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise DatabaseError("PostgreSQL needs the psycopg driver: pip install 'psycopg[binary]>=3.2' "
                                "(in the checkout of eventstore: pip install '.[postgres]')") from None
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
