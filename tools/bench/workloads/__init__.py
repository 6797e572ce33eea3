"""The workloads, one module each, in the order ``run all`` runs them.

Each module has ``SUMMARY`` (one line for ``list``) and ``run(bench)``, which times
eventstore and its baselines on the same data with :meth:`tools.bench.harness.Bench.measure`.
"""

from __future__ import annotations

import importlib

NAMES = ("append", "batch", "writers", "import", "export", "read", "startup", "sessions", "search", "scan", "verify",
         "viewer", "conversation", "agents")


def load(name: str):
    """The module of workload ``name``."""
    if name not in NAMES:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{'import_' if name == 'import' else name}")
