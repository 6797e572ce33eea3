"""The ``eventstore`` command line (click): a group of thin commands over the library.

The database is ``--db PATH`` (before the command), else ``$EVENTSTORE_DB``, else
``./eventstore.db``. Errors print one line to stderr (``error: ...``, or ``FILE:LINE:
reason`` for a bad JSONL line) and exit with status 1; usage errors exit with 2. Even
an error nobody foresaw is one line (``error: unexpected ...``); ``EVENTSTORE_DEBUG=1``
shows its traceback instead.

Each command lives in a module of this package, imported only when that command runs:
``eventstore --help`` lists the commands from :data:`COMMANDS` without importing them, and
alone it is written without importing click (:func:`help_text`), and the read commands of
:data:`eventstore.cli.fast.PLAIN` (``sessions``, ``search``, ``events``, ``messages``) run without it when their
command line is simple (:mod:`eventstore.cli.fast`). The click group itself is in
:mod:`eventstore.cli.group`.
"""

from __future__ import annotations

import sys

#: Every command: its name, ``module:function`` in this package, and its one-line help for
#: ``eventstore --help`` (the first paragraph of the function's docstring; a test checks).
COMMANDS: dict[str, tuple[str, str]] = {
    "checkpoint": ("auditing:checkpoint", "Write a checkpoint of the log: the global position, each session's event "
                                          "count, head hash and sessions row hash, and a Merkle root over them, "
                                          "optionally signed."),
    "context": ("reading:context", "Print what the model was sent: instructions, tools and messages, as one "
                                   "chat-completions request (JSON), retractions honoured."),
    "copy": ("exporting:copy_command", "Copy every session (or the SESSION_IDs given) from the store SRC to the "
                                       "store DST."),
    "demo": ("setup:demo", "Run a scripted agent turn (with a real shell tool call) and show its log and messages."),
    "events": ("reading:events", "Print a session's events as JSONL lines, in seq order."),
    "export": ("exporting:export", "Export sessions as JSONL, byte-identical to the reference format."),
    "import": ("importing:import_", "Import JSONL files: eventstore sessions, Claude Code transcripts, Codex "
                                    "rollouts."),
    "init": ("setup:init", "Create the database, or upgrade it to the latest schema."),
    "keygen": ("auditing:keygen", "Make an Ed25519 key pair for signing checkpoints: the private key in KEYFILE "
                                  "(mode 0600) and the public key in KEYFILE.pub (give it to `verify "
                                  "--public-key`)."),
    "messages": ("reading:messages", "Print the derived chat messages (the projection) as a JSON array."),
    "redact": ("redact:redact", "Redact fields of a stored event: they read as a marker, their bytes leave the "
                                "database."),
    "repair": ("auditing:repair", "Append what an interrupted session needs (never changing what is logged): a "
                                  "tool/result saying the call was interrupted for each dangling tool call, a "
                                  "step/end for an open step, a turn/end for an open turn."),
    "roles": ("setup:roles", "PostgreSQL: create the least-privilege roles (run it once as the tables' owner "
                             "with CREATEROLE, or as a superuser)."),
    "scan": ("secrets:scan", "Find secrets in stored events: API keys and tokens, private keys, JWTs, passwords "
                             "in URLs."),
    "search": ("search:search", "Full-text search over message content, tool call arguments, tool results and "
                                "thinking."),
    "serve": ("serve:serve", "Start the local, read-only web viewer and print its URL (Ctrl-C stops it)."),
    "sessions": ("reading:sessions", "List stored sessions: id, events, created, last event (UTC), and token "
                                     "totals (input, output, cache read, cache write) of sessions whose source "
                                     "recorded them."),
    "sql": ("sql:sql", "Run one read-only SQL QUERY (- reads it from stdin) and print the rows."),
    "tail": ("reading:tail", "Show a session (or, without SESSION_ID, every session) the way a chat UI does."),
    "verify": ("auditing:verify", "Check the whole database: the file (quick_check, its -wal), the schema against "
                                  "what the migrations create, the sessions, and the log: seqs gapless, the hash "
                                  "chain, the append-only triggers, streamed chunks against their message, the "
                                  "projection's validity for a chat API; with --checkpoint, that the log still "
                                  "extends each kept checkpoint."),
}


#: What ``eventstore --help`` prints above the command list at click's usual width (78: a
#: terminal of 80 columns or more, or not a terminal), so that ``--help`` need not import
#: click; a test checks it against click's own help.
HELP_HEAD = """\
Usage: eventstore [OPTIONS] COMMAND [ARGS]...

  Append-only AI-agent session logs in SQLite or PostgreSQL.

Options:
  --db PATH                       Database file, sqlite:// or postgresql://
                                  URL; also $EVENTSTORE_DB.  [default:
                                  eventstore.db]
  --durability [normal|full|may-lose-recent]
                                  Commands that write. SQLite: normal survives
                                  a crash of the process, full also power loss
                                  (an fsync per commit). PostgreSQL: normal
                                  and full wait for the server's durable flush
                                  (a server crash loses no acknowledged
                                  append); may-lose-recent (PostgreSQL only)
                                  returns at the asynchronous commit: a server
                                  crash may lose the last ~600 ms of appends,
                                  never corrupts. Also $EVENTSTORE_DURABILITY.
                                  [default: normal]
  --version                       Show the version and exit.
  -h, --help                      Show this message and exit.

"""
HELP_WIDTH = 78


def terminal_columns() -> int:
    """The terminal's columns as :func:`shutil.get_terminal_size` reads them (``$COLUMNS``
    first, else stdout's terminal, else 80), without importing :mod:`shutil`."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
        columns = columns or 80
    return columns


def help_width() -> int:
    """The width click lays ``--help`` out to: the terminal's columns
    (:func:`terminal_columns`), at most 80, less 2, at least 50."""
    return max(min(terminal_columns(), 80) - 2, 50)


def short_help(text: str, limit: int) -> str:
    """A command's line in the list of ``--help``, as click makes it from the command's help:
    the first sentence of the first paragraph, shortened at a word to ``limit`` with "..."."""
    words = text.partition("\n\n")[0].split()
    if words and words[0] == "\b":
        words = words[1:]
    for i, word in enumerate(words):  # a period ends the sentence unless a lowercase word follows
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][0].islower()):
            words = words[:i + 1]
            break
    text = " ".join(words)
    if len(text) <= limit:
        return text
    if limit < 3:
        return "..."
    kept = ""  # the most words that fit with "..." (textwrap.shorten's answer, without importing it)
    for word in words:
        if len(kept) + bool(kept) + len(word) + 3 > limit:
            break
        kept = f"{kept} {word}" if kept else word
    if kept:
        return kept + "..."
    import textwrap  # the first word alone is too long: textwrap cuts it

    return textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False)


def help_text() -> str:
    """``eventstore --help`` at :data:`HELP_WIDTH`, without importing click or any command."""
    names = sorted(COMMANDS)
    first = min(max(map(len, names)), 30) + 2
    limit = HELP_WIDTH - 6 - max(map(len, names))
    rows = [f"  {name:<{first}}{short_help(COMMANDS[name][1], limit)}".rstrip() for name in names]
    return HELP_HEAD + "Commands:\n" + "\n".join(rows) + "\n"


def utf8_text(value: str) -> str:
    """A command-line word as UTF-8 text, even where the locale made Python decode argv as
    ASCII (non-ASCII bytes then arrive as surrogate escapes). Raises ``UnicodeEncodeError``
    for a word whose bytes are not UTF-8 (the click parameter type, cli/base.py's
    ``Utf8Text``, names the first bad byte)."""
    if isinstance(value, str) and not value.isascii():
        import os

        try:
            value = os.fsencode(value).decode("utf-8")
        except UnicodeError:
            pass
        value.encode("utf-8")
    return value


def interrupt_again(unraisable: object, previous: object) -> None:
    """``sys.unraisablehook`` while a command runs. Python raises a Ctrl-C's
    KeyboardInterrupt in whatever Python code runs next; in a callback that cannot raise
    (importlib's weakref callback that drops a module's import lock after its first import,
    a ``__del__``, a gc callback) it would be printed as "Exception ignored" and lost, and
    ``tail -f`` would go on waiting. Such a Ctrl-C is delivered again, from a new thread:
    interrupting from this hook would raise it in the hook, where it is lost too. Anything
    else goes to the hook there was (``previous``)."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        import _thread

        _thread.start_new_thread(_thread.interrupt_main, ())
        return
    previous(unraisable)


def main() -> None:
    """Console entry point."""
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: interrupt_again(unraisable, previous)
    try:
        run()
    except KeyboardInterrupt:  # before a command reports it itself: while importing, parsing
        sys.stderr.write("error: interrupted\n")
        sys.exit(1)
    finally:
        sys.unraisablehook = previous


def run() -> None:
    """The command of ``sys.argv``: ``--help`` alone, a read command's fast path, or click."""
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    # --help alone: click's own text, written without importing click
    if sys.argv[1:] in (["--help"], ["-h"]) and sys.stdout is not None and help_width() == HELP_WIDTH:
        try:
            sys.stdout.write(help_text())
            sys.stdout.flush()
        except OSError as e:  # status 1 and no traceback; a reader gone away is no error (as in click)
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (Python's flush at exit)
            if not isinstance(e, BrokenPipeError):
                sys.stderr.write(f"error: writing the help: {e.strerror or e}\n")
            sys.exit(1)
        return
    if len(sys.argv) > 1:  # a read command with a simple command line, without importing click
        from .fast import run_plain

        if run_plain(sys.argv[1:]):
            return
    from .group import cli

    cli(prog_name="eventstore")


def __getattr__(name: str) -> object:  # PEP 562: the store and the click group only when asked for
    if name == "EventStore":
        from eventstore.core.store import EventStore

        return EventStore
    if name in ("cli", "LazyGroup"):
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
