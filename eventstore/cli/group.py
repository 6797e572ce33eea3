"""The ``eventstore`` click group: the global options, and each command's module imported
only when that command runs (the command table is :data:`eventstore.cli.COMMANDS`)."""

from __future__ import annotations

import importlib

import click

from eventstore import __version__

from . import COMMANDS
from .base import EnvOption, invoke_reporting_errors, lasting


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
        command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
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
