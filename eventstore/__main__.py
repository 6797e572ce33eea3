"""The ``eventstore`` command's entry point, also run by ``python -m eventstore``.

It imports the command line (click, SQLAlchemy, the store: a few tenths of a second) inside
its own ``KeyboardInterrupt`` handler, so that a Ctrl-C at any moment, even while those
modules are still loading, ends the way an interrupted command does: ``error:
interrupted`` on stderr and exit status 1, never a traceback.
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
