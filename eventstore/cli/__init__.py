"""The ``eventstore`` command line (click): a group of thin commands over the library.

The database is ``--db PATH`` (before the command), else ``$EVENTSTORE_DB``, else
``./eventstore.db``. Errors print one line to stderr (``error: ...``, or ``FILE:LINE:
reason`` for a bad JSONL line) and exit with status 1; usage errors exit with 2. Even
an error nobody foresaw is one line (``error: unexpected ...``); ``EVENTSTORE_DEBUG=1``
shows its traceback instead.

Each command lives in a module of this package, imported only when that command runs:
``eventstore --help`` lists the commands from :data:`COMMANDS` without importing them.
"""

from __future__ import annotations

import importlib
import sys

import click

from eventstore import __version__

from .base import EnvOption, invoke_reporting_errors, lasting

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
    "search": ("search:search", "Full-text search over message content, tool call arguments and tool results."),
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


class LazyGroup(click.Group):
    """The command group: a command's module is imported when the command is looked up to
    run (or for its own ``--help``), never to list the commands; the store's errors (and
    file errors) become one line on stderr, no traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, name = COMMANDS[cmd_name][0].split(":")
        command = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        self.add_command(command, cmd_name)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:  # "Did you mean": among every command, not only those loaded
            name = getattr(e, "command_name", None)  # (click 8.4's NoSuchCommand)
            if name is None:
                raise
            raise type(e)(name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, as click writes it, from :data:`COMMANDS`."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        listed = [self.commands.get(name) or click.Command(name, help=COMMANDS[name][1]) for name in names]
        rows = [(name, command.get_short_help_str(limit)) for name, command in zip(names, listed, strict=True)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        return invoke_reporting_errors(super().invoke, ctx)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", cls=EnvOption, envvar="EVENTSTORE_DB", default="eventstore.db", show_default=True,
              metavar="PATH", help="Database file, sqlite:// or postgresql:// URL; also $EVENTSTORE_DB.")
@click.option("--durability", cls=EnvOption, envvar="EVENTSTORE_DURABILITY",
              type=click.Choice(["normal", "full", "may-lose-recent"], case_sensitive=False), default="normal",
              show_default=True,
              help="Commands that write. SQLite: normal survives a crash of the process, full also power "
                   "loss (an fsync per commit). PostgreSQL: normal and full wait for the server's durable "
                   "flush (a server crash loses no acknowledged append); may-lose-recent (PostgreSQL only) "
                   "returns at the asynchronous commit: a server crash may lose the last ~600 ms of appends, "
                   "never corrupts. Also $EVENTSTORE_DURABILITY.")
@click.version_option(__version__, prog_name="eventstore")
@click.pass_context
def cli(ctx: click.Context, db: str, durability: str) -> None:
    """Append-only AI-agent session logs in SQLite or PostgreSQL."""
    ctx.obj = {"db": lasting(db), "store": None, "durability": durability}


def main() -> None:
    """Console entry point."""
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    cli(prog_name="eventstore")


def __getattr__(name: str) -> object:  # PEP 562: EventStore without importing the store for --help
    if name == "EventStore":
        from eventstore.core.store import EventStore

        return EventStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
