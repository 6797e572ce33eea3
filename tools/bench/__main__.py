"""``python -m tools.bench``: list the workloads, or run some and print their tables.

    python -m tools.bench list
    python -m tools.bench run append batch --backend postgres --rounds 5 --json out.json
    python -m tools.bench run all --quick
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import time
import traceback

from .harness import Bench, load_average
from .workloads import NAMES, load


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (1 when a workload failed or a check did not pass)."""
    ap = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the workloads and what each measures")
    r = sub.add_parser("run", help="run workloads (or all) and print a Markdown table per workload")
    r.add_argument("workloads", nargs="+", metavar="WORKLOAD", help=f"{', '.join(NAMES)}, or all")
    r.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    r.add_argument("--rounds", type=int, help="rounds per case (default 5; 2 with --quick)")
    r.add_argument("--quick", action="store_true", help="tiny sizes: seconds for every workload (the smoke test)")
    r.add_argument("--json", metavar="FILE", help="also write every figure, the machine and the checks as JSON")
    r.add_argument("--pg-url", metavar="URL", help="an existing PostgreSQL server (a new database per case); "
                   "default: a throwaway server with durable settings")
    r.add_argument("--durability", default="normal", choices=("normal", "full", "may-lose-recent"))
    r.add_argument("--no-peers", action="store_true", help="skip the optional peers (Agents SDK, eventsourcing)")
    r.add_argument("--workdir", metavar="DIR", help="keep the scratch databases and corpora here")
    a = ap.parse_args(argv)
    if a.cmd == "list":
        for name in NAMES:
            print(f"{name:12} {load(name).SUMMARY}")
        return 0
    names = list(NAMES) if "all" in a.workloads else a.workloads
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        ap.error(f"unknown workload {', '.join(unknown)} (python -m tools.bench list)")
    from pathlib import Path

    bench = Bench(a.backend, quick=a.quick, rounds=a.rounds, workdir=Path(a.workdir) if a.workdir else None,
                  pg_url=a.pg_url, durability=a.durability, peers=not a.no_peers)
    failed = []
    # SIGTERM (`timeout`, `kill`) ends the run as Ctrl-C does, so the finally below still
    # stops the throwaway PostgreSQL server instead of leaving it running.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for name in names:
            t0, c0 = time.perf_counter(), _cpu()
            try:
                load(name).run(bench)
            except Exception as e:  # one workload's failure is reported; the others still run
                traceback.print_exc()
                failed.append(name)
                bench.check(f"{name} ran", False, f"{type(e).__name__}: {e}")
            print(f"== {name}: {time.perf_counter() - t0:.1f} s ({_cpu() - c0:.1f} s of CPU in this process and its "
                  "children)", file=sys.stderr, flush=True)
    finally:
        bench.machine["load at end"] = load_average()
        bench.close()
    shown = " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]) if x)
    print(bench.markdown(f"python -m tools.bench {shown}"))
    if a.json:
        Path(a.json).write_text(json.dumps(bench.as_json(), indent=1, ensure_ascii=False))
    return 1 if failed or not all(c["ok"] for c in bench.checks) else 0


if __name__ == "__main__":
    sys.exit(main())
