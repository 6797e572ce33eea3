"""The ``eventstore`` command's entry point, also run by ``python -m eventstore``.

It imports the command line (click, SQLAlchemy, the store: a few tenths of a second) inside
its own ``KeyboardInterrupt`` handler, so that a Ctrl-C while those modules are still
loading ends the way an interrupted command does: ``error: interrupted`` on stderr and exit
status 1. What it cannot reach: Python's own start-up before this module runs, the
interpreter's teardown after it returns (SIGINT is back to the default there, so the
process ends by the signal), and an interrupt SQLAlchemy's pool logs while it closes a
connection.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``eventstore`` command line (:func:`eventstore.cli.main`)."""
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover - python -m eventstore
    main()
