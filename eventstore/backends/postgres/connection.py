"""Connecting: URLs, connection strings, passwords kept out of every message.
"""

from __future__ import annotations

import re
import time
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from eventstore.errors import (
    DatabaseError,
)


def conninfo(url: str) -> str:
    """The libpq URL for ``url`` (``postgresql+psycopg://`` becomes ``postgresql://``)."""
    scheme, rest = url.split("://", 1)
    return "postgresql://" + rest if scheme.lower() in ("postgresql+psycopg", "postgres") else url


# password= and sslpassword= (the client key's): their values are secrets
_PASSWORD_PARAM = re.compile(r"[?&][a-z]*password=", re.IGNORECASE)
_PASSWORD_VALUES = re.compile(r"[?&][a-z]*password=([^&]*)", re.IGNORECASE)
_URL_DELIMITERS = re.compile(r"[/?@#&=:%\s]+")
_HIDDEN = "***"
PERCENT_HINT = ("a password that holds / ? @ # % or a space must be percent-encoded in the URL: "
                "/ as %2F, ? as %3F, @ as %40, # as %23, % as %25, a space as %20")


def _userinfo(url: str) -> tuple[str, str | None, str | None, str]:
    """``(scheme, user, password, rest)`` of ``url``, where ``rest`` is what follows the
    ``user[:password]@``. A password may hold ``/ ? @ #`` and spaces, so it ends at the last
    ``@`` (before any ``password=`` parameter, whose value may hold ``@`` too) with a ``:``
    before it; an odd URL may then lose more than its password, never show part of it."""
    scheme, rest = conninfo(url).split("://", 1)
    cut = _PASSWORD_PARAM.search(rest)
    at = rest.rfind("@", 0, cut.start() if cut else len(rest))
    if at < 0:
        return scheme, None, None, rest
    user, colon, password = rest[:at].partition(":")
    return scheme, user, password if colon else None, rest[at + 1:]


def _secrets(url: str) -> list[str]:
    """What of ``url`` a message must not show, longest first: the password as this module
    reads it, as libpq reads it (the two differ when it holds an unencoded delimiter), any
    ``password=`` value, each percent-decoded too, and each of their pieces between URL
    delimiters of 3 characters or more (libpq may quote such a piece of a URL it cannot parse)."""
    found = [_userinfo(url)[2] or ""] + _PASSWORD_VALUES.findall(conninfo(url).split("://", 1)[1])
    try:
        read = conninfo_to_dict(conninfo(url))
        found += [read.get("password") or "", read.get("sslpassword") or ""]
    except (psycopg.Error, UnicodeError):
        pass
    found += [unquote(s) for s in found]
    pieces = [p for s in found for p in _URL_DELIMITERS.split(s) if len(p) >= 3]
    return sorted({s for s in found + pieces if s}, key=len, reverse=True)


def _hide(text: str, secrets: list[str], quoted: bool = False) -> str:
    """``text`` with each of ``secrets`` of 3 characters or more replaced by ``***``; with
    ``quoted``, every quoted token too (libpq quotes the piece of a URL it could not parse,
    or the host it could not resolve: for a URL it misread, that may be any piece of the
    password, even one character)."""
    for s in secrets:
        if len(s) >= 3:
            text = text.replace(s, _HIDDEN)
    return _QUOTED.sub(lambda m: m[1] + _HIDDEN + m[1], text) if quoted else text


_QUOTED = re.compile(r"([\"'])(.*?)\1")


def display_url(url: str) -> str:
    """``url`` without its password (for messages): the one of ``user:password@`` (up to the
    last ``@``, see :func:`_userinfo`) and any ``password=`` parameter. The rest stays as
    written, even in a URL libpq will refuse, but for any piece of a password in it."""
    scheme, user, _, rest = _userinfo(url)
    hosts, _, query = rest.partition("?")
    kept = [p for p in query.split("&") if p and not _PASSWORD_PARAM.match("&" + p)]
    shown = f"{scheme}://" + (f"{user}@" if user is not None else "") + hosts + ("?" + "&".join(kept) if kept else "")
    # (a byte that is not UTF-8 arrives as a lone surrogate, which no terminal can print)
    return _hide(shown, _secrets(url)).encode("utf-8", "backslashreplace").decode("utf-8")


def open_connection(url: str, display: str, autocommit: bool = True) -> psycopg.Connection:
    try:
        return psycopg.connect(conninfo(url), autocommit=autocommit, application_name="eventstore")
    except psycopg.Error as e:
        raise DatabaseError(f"{display}: cannot connect: {_connect_failure(url, e)}") from None
    except UnicodeEncodeError:  # (bytes of the command line that are not UTF-8)
        raise DatabaseError(f"{display}: cannot connect: the URL is not UTF-8 text") from None


def _connect_failure(url: str, e: psycopg.Error) -> str:
    """libpq's reason, without the password or any piece of it (libpq quotes pieces of a
    URL it cannot parse), and with :data:`PERCENT_HINT` when the URL has a password and
    libpq could not parse it (ProgrammingError) or read another password from it."""
    secrets = _secrets(url)
    misread = bool(secrets) and isinstance(e, psycopg.ProgrammingError)
    if secrets and not misread:
        password = _userinfo(url)[2]
        try:
            misread = password is not None and conninfo_to_dict(conninfo(url)).get("password") != unquote(password)
        except psycopg.Error:
            misread = True
    text = _hide(str(e).strip().replace(conninfo(url), display_url(url)), secrets, quoted=misread)
    text = text.splitlines()[0] if text else type(e).__name__
    return f"{text} ({PERCENT_HINT})" if misread else text


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def wait_flushed(conn: psycopg.Connection) -> None:
    """Return once the server's flushed WAL position passes its insert position of now: the
    flush confirmation of a role that may not call ``pg_logical_emit_message`` (a
    superuser's ``eventstore roles`` gives it to the owner and the writer only)."""
    target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    pause = 0.001
    while not conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (target,)).fetchone()[0]:
        time.sleep(pause)  # (the WAL writer flushes within wal_writer_delay, writers sooner)
        pause = min(pause * 2, 0.05)
