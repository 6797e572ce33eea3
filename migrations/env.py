"""Alembic environment: migrations run on the connection that eventstore.engine.upgrade
passes in (inside its BEGIN IMMEDIATE transaction), or on ``-x url=...`` from the command line."""

from alembic import context

from eventstore.engine import make_engine
from eventstore.schema import metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = make_engine(url)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with conn.begin():
            context.run_migrations()


run()
