"""The ``eventstore`` command's entry point, also run by ``python -m eventstore``."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":  # pragma: no cover - python -m eventstore
    main()
