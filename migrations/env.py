"""Alembic environment: migrations run on the connection that the backend passes in
(inside its write transaction, see eventstore/backends/), or on ``-x url=...`` from the
command line (an SQLAlchemy URL)."""

from alembic import context
from sqlalchemy import create_engine

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    with engine.connect() as conn:
        context.configure(connection=conn)
        with conn.begin():
            context.run_migrations()


run()
