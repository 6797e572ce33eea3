"""``eventstore init``, ``demo`` and ``roles``: making a database ready."""

from __future__ import annotations

import json
import shlex

import click

from .base import TEXT, fail
from .common import db_shown, open_store


@click.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the database, or upgrade it to the latest schema."""
    store = open_store(ctx)
    from eventstore.schema import SCHEMA_REVISION

    click.echo(f"{db_shown(ctx.obj['db'], store)}: ready (schema revision {SCHEMA_REVISION})")


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run a scripted agent turn (with a real shell tool call) and show its log and messages."""
    from eventstore.demo import run_demo

    store = open_store(ctx)
    s = run_demo(store)
    shown = db_shown(ctx.obj["db"], store)
    click.echo(f"Session {s.id} in {shown}\n")
    click.echo("Event log (JSONL, as exported):")
    for ev in s.events():
        click.echo("  " + ev.to_jsonl())
    click.echo("\nDerived messages (the projection sent to the model):")
    click.echo(json.dumps(s.derive_messages(), indent=2, ensure_ascii=False))
    # Only a database given as --db is named: one from $EVENTSTORE_DB (or the default) is found
    # again by the next command as it was, while --db would override the variable with the
    # shown URL, which lacks the password.
    given = ctx.find_root().get_parameter_source("db") is click.core.ParameterSource.COMMANDLINE
    db = f"--db {shlex.quote(shown)} " if given else ""
    click.echo(f"\nNext: eventstore {db}messages {s.id}   |   eventstore {db}export {s.id}")

@click.command()
@click.option("--writer", default="eventstore_writer", show_default=True, type=TEXT, help="Name of the writer role.")
@click.option("--auditor", default="eventstore_auditor", show_default=True, type=TEXT, help="Name of the auditor role.")
@click.option("--redactor", default="eventstore_redactor", show_default=True, type=TEXT,
              help="Name of the redactor role.")
@click.option("--print", "print_only", is_flag=True, help="Print the SQL instead of running it.")
@click.pass_context
def roles(ctx: click.Context, writer: str, auditor: str, redactor: str, print_only: bool) -> None:
    """PostgreSQL: create the least-privilege roles (run it once as the tables' owner with
    CREATEROLE, or as a superuser).

    The writer role may only INSERT and SELECT (it cannot UPDATE, DELETE, TRUNCATE, ALTER,
    DROP or disable triggers): agents and `eventstore import` work as it. The auditor role
    may only SELECT: for `eventstore sql` and `verify`. The redactor role may SELECT and
    redact (`eventstore redact`), nothing else. All are NOLOGIN groups; grant them to login
    roles: GRANT eventstore_writer TO agent1.
    """
    from eventstore.backends import is_postgres_url

    db = ctx.find_root().obj["db"]
    if not is_postgres_url(db):
        fail("roles: --db must be a postgresql:// URL (SQLite has no roles: use file permissions)")
    from eventstore.backends.capabilities import Roles

    store = open_store(ctx)  # creates and migrates the schema first: the grants name its tables
    roles = store.capability(Roles)
    roles.check_role_names(writer, auditor, redactor)
    text = roles.roles_sql(writer, auditor, redactor)
    if print_only:
        click.echo(text, nl=False)
        return
    for notice in roles.apply_roles(text):
        click.echo(f"note: {notice}", err=True)
    click.echo(f"roles {writer} (INSERT, SELECT), {auditor} (SELECT) and {redactor} (SELECT, redact) are set up "
               f"on {store.display}")


