"""What every command shares and ``--help`` needs: errors as one line and an exit status,
the UTF-8 text parameter, options read from the environment. Imports only click and
:mod:`eventstore.errors`, so that ``eventstore --help`` stays quick."""

from __future__ import annotations

import errno
import os
import sys

import click

from eventstore.errors import EventStoreError, InvalidJSONL

from . import utf8_text

EXIT_ERROR = 1


def fail(message: str) -> None:
    """Print ``error: message`` on stderr and exit with :data:`EXIT_ERROR`."""
    click.echo(message if message.startswith("error:") else f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def invoke_reporting_errors(invoke, ctx: click.Context):
    """``invoke(ctx)``, with the store's errors (and file errors) turned into one line on
    stderr and exit status 1, no traceback; ``EVENTSTORE_DEBUG=1`` shows an unforeseen
    error's traceback instead."""
    try:
        return invoke(ctx)
    except InvalidJSONL as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_ERROR)
    except EventStoreError as e:
        fail(str(e))
    except OSError as e:
        if e.errno == errno.EPIPE:  # the reader went away (| head): click exits quietly
            raise
        fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
    except KeyboardInterrupt as e:  # a command may say what was interrupted (and how to finish it)
        fail(f"interrupted {e.args[0]}" if e.args else "interrupted")
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except Exception as e:  # a bug, or a database changed by hand: still one line
        if os.environ.get("EVENTSTORE_DEBUG"):
            raise
        fail(f"unexpected {type(e).__name__}: {e} (EVENTSTORE_DEBUG=1 shows the traceback; please report it)")


class Utf8Text(click.ParamType):
    """A command-line word as UTF-8 text, even where the locale made Python decode argv as
    ASCII (non-ASCII bytes then arrive as surrogate escapes); a word whose bytes are not
    UTF-8 is a usage error that names the first bad byte (no backend can store or send it)."""

    name = "text"

    def convert(self, value, param, ctx):
        try:
            return utf8_text(value)
        except UnicodeEncodeError as e:
            c = ord(e.object[e.start])
            what = f"byte 0x{c - 0xDC00:02X}" if 0xDC80 <= c <= 0xDCFF else f"U+{c:04X}"
            self.fail(f"not UTF-8 text ({what} at character {e.start + 1})", param, ctx)


TEXT = Utf8Text()


class EnvOption(click.Option):
    """An option that may come from an environment variable (``envvar=``): a bad value
    taken from the variable is reported as ``$VARIABLE``, not as an option nobody gave."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        if ctx is not None and isinstance(self.envvar, str) and \
                ctx.get_parameter_source(self.name) is click.core.ParameterSource.ENVIRONMENT:
            return f"${self.envvar}"
        return super().get_error_hint(ctx)


def lasting(db: str) -> str:
    """``db``, unless it names an in-memory database (``:memory:``, ``sqlite://``), which no
    command can use: it would be gone when the command ends. Exits with an error then."""
    if not db.strip():
        fail("the database path is empty: give a file or a postgresql:// URL")
    if db == ":memory:" or db.lower() in ("sqlite://", "sqlite:///:memory:"):
        fail(f"{db} is an in-memory database, which lasts only as long as one command: "
             "give a file or a postgresql:// URL")
    return db
