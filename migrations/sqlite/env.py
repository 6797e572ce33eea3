"""Alembic environment of the SQLite databases (their revisions are in versions/ beside this
file; the other database's are in migrations/postgres/). Migrations run on the connection that
the backend passes in (inside its write transaction, see eventstore/backends/), or on
``-x url=...`` from the command line (an SQLAlchemy URL). A connection to another kind of
database is refused before any revision runs."""

from alembic import context
from sqlalchemy import create_engine

config = context.config

DIALECT = "sqlite"


def migrate(conn) -> None:
    if conn.dialect.name != DIALECT:
        raise RuntimeError(f"these are the migrations of {DIALECT} databases, not of {conn.dialect.name} ones")
    context.configure(connection=conn)


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        migrate(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    with engine.connect() as conn:
        migrate(conn)
        with conn.begin():
            context.run_migrations()


run()
