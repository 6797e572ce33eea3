"""eventstore's benchmark package: one entry point, a shared harness, a module per workload
and per peer.

    python -m tools.bench list
    python -m tools.bench run append --backend postgres --rounds 5 --json append.json
    python -m tools.bench run all --quick

Every workload times eventstore and its baselines side by side in one run (the systems take
turns round by round, so background load falls on all of them alike) and prints a Markdown
table per workload: min, median and max over the rounds, and each system's median divided
by eventstore's. docs/benchmarks.md keeps the figures of record with their command.
"""
