"""``python -m eventstore.cli``: the ``eventstore`` command."""

from eventstore.cli import main

main()
