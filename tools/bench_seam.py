"""SQLite before and after the backend seam: the same ``tools/bench.py`` SQLite workloads on
two commits, side by side in one run.

The code before the seam (``--before``, default c921bc0, the last commit before the backend
contract) is checked out into a temporary ``git worktree``; the code after it is this checkout
(or ``--after REV``, checked out the same way). Each round runs ``tools/bench.py`` of one tree
and then of the other in a child process (each tree with its own copy of the tool, which
differs only in where it imports ``event_line`` from), the order swapped every round, so
load on a shared machine falls on both alike. The table gives, per operation and system, the
median over the rounds for before and after, the range (min to max of the rounds), and
after / before (below 1: after is faster). The raw sqlite3 rows are the control: their code
is the same in both trees, so their before/after spread is the noise of the run.

``--icount`` also counts instructions (load-independent) under valgrind, with each tree's own
tools: per event of ``append_many`` (``tools/batch_icount.py --only eventstore --batches
50``) and per single ``Session.append`` (``tools/append_variants.py --only api``, 2,000
appends minus 0, into a session of 1,000). ``--rounds 0 --icount`` counts only.

Usage (from the repository root)::

    python tools/bench_seam.py                       # 5 rounds of the default workloads
    python tools/bench_seam.py --rounds 7 --icount
    python tools/bench_seam.py -- --only append --sizes 1000   # bench.py arguments after --

Scratch databases only; the temporary worktree is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The default bench.py arguments: every SQLite workload but contention (a separate tool with
#: its own figures), sized so one run of one tree takes about a minute on a 2-core machine.
BENCH_ARGS = ["--no-peers", "--only", "append,batch,bulk,projection", "--sizes", "1000,10000",
              "--corpus", "200000", "--sessions", "20", "--repeat", "5", "--bulk-repeat", "2",
              "--chunks", "20000", "--projection-repeat", "10"]


def checkout(stack: ExitStack, rev: str) -> Path:
    """A temporary detached worktree of ``rev``, removed when ``stack`` closes."""
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-seam-"))) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), rev], check=True)
    stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)],
                   check=False)
    return folder


def run_bench(tree: Path, args: list[str]) -> dict[tuple[str, str, str], float]:
    """One run of ``tree``'s tools/bench.py: {(section, case, system): seconds per operation}."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        proc = subprocess.run([sys.executable, str(tree / "tools" / "bench.py"), *args, "--json", out.name],
                              cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"bench.py in {tree} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        data = json.loads(Path(out.name).read_text())
    return {(r["section"], r["case"], r["system"]): r["seconds"] for r in data["rows"] if r["seconds"]}


def icount(tree: Path, batches: int) -> int:
    """Instructions per event of append_many, from ``tree``'s tools/batch_icount.py."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, str(tree / "tools" / "batch_icount.py"), "--only", "eventstore",
                           "--batches", str(batches)], cwd=tree, env=env, capture_output=True, text=True)
    m = re.search(r"eventstore\s+([\d,]+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"batch_icount.py in {tree} failed:\n{proc.stdout}{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def icount_append(tree: Path, n: int = 2000) -> int:
    """Instructions of one ``Session.append``, from ``tree``'s tools/append_variants.py
    under callgrind: (``n`` appends minus 0) / ``n``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    total = []
    for count in (0, n):
        with tempfile.TemporaryDirectory(prefix="seam-icount-") as tmp:
            proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                                   str(tree / "tools" / "append_variants.py"), "--only", "api", "-n", str(count),
                                   "--prefill", "1000"], cwd=tmp, env=env, capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", proc.stderr)
        if proc.returncode != 0 or m is None:
            raise SystemExit(f"append_variants.py in {tree} failed under valgrind:\n{proc.stderr[-2000:]}")
        total.append(int(m.group(1)))
    return (total[1] - total[0]) // n


def fmt(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="c921bc0", help="commit before the seam (default c921bc0)")
    ap.add_argument("--after", help="commit after it (default: this checkout as it is)")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each tree, alternated (default 5)")
    ap.add_argument("--icount", action="store_true", help="also count instructions per event of append_many")
    ap.add_argument("--icount-runs", type=int, default=2, help="valgrind counts per tree (default 2)")
    ap.add_argument("--json", metavar="FILE", help="also write every round's figures to FILE")
    ap.add_argument("bench_args", nargs="*", help="arguments for bench.py (after --; default: %(default)s)",
                    default=BENCH_ARGS)
    a = ap.parse_args()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    counts: dict[str, list[int]] = {"before": [], "after": []}
    single: dict[str, list[int]] = {"before": [], "after": []}
    with ExitStack() as stack:
        trees = {"before": checkout(stack, a.before), "after": checkout(stack, a.after) if a.after else ROOT}
        revs = {k: subprocess.run(["git", "-C", str(t), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip() + ("" if k == "before" or a.after else " (checkout)")
                for k, t in trees.items()}
        load0 = os.getloadavg()[0]
        for i in range(a.rounds):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            for k in order:
                print(f"round {i + 1}/{a.rounds}: {k} ({revs[k]}) ...", file=sys.stderr, flush=True)
                runs[k].append(run_bench(trees[k], a.bench_args))
        if a.icount:
            for i in range(a.icount_runs):
                for k in (("before", "after") if i % 2 == 0 else ("after", "before")):
                    print(f"icount {i + 1}/{a.icount_runs}: {k} ...", file=sys.stderr, flush=True)
                    counts[k].append(icount(trees[k], 50))
                    single[k].append(icount_append(trees[k]))
        load1 = os.getloadavg()[0]
    keys = [k for k in runs["before"][0] if all(k in r for r in runs["before"] + runs["after"])] if a.rounds else []
    print(f"`python tools/bench_seam.py {' '.join(sys.argv[1:])}`\n")
    print(f"before: {revs['before']}, after: {revs['after']}; {a.rounds} rounds of each, alternated; "
          f"bench.py {' '.join(a.bench_args)}; load average {load0:.2f} at start, {load1:.2f} at end\n")
    if keys:
        print("| workload | case | system | before (median) | before (range) | after (median) | after (range) "
              "| after / before |")
        print("|---|---|---|---|---|---|---|---|")
    for key in keys:
        b = [r[key] for r in runs["before"]]
        f = [r[key] for r in runs["after"]]
        mb, mf = statistics.median(b), statistics.median(f)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {fmt(mb)} | {fmt(min(b))} to {fmt(max(b))} | {fmt(mf)} "
              f"| {fmt(min(f))} to {fmt(max(f))} | {mf / mb:.2f}x |")
    if a.icount:
        print("\n| instructions (callgrind), median of the runs | before | after | after / before | runs |")
        print("|---|---|---|---|---|")
        for label, got in (("per event of append_many, batches of 100 (`batch_icount.py`)", counts),
                           ("per single Session.append, session of 1,000 (`append_variants.py --only api`)", single)):
            cb, ca = statistics.median(got["before"]), statistics.median(got["after"])
            print(f"| {label} | {cb:,.0f} | {ca:,.0f} | {ca / cb:.3f}x | {', '.join(f'{c:,}' for c in got['before'])} "
                  f"before; {', '.join(f'{c:,}' for c in got['after'])} after |")
    if a.json:
        Path(a.json).write_text(json.dumps({"revs": revs, "args": a.bench_args, "icount": counts,
                                            "icount_append": single,
                                            "runs": {k: [[list(key) + [v] for key, v in r.items()] for r in rs]
                                                     for k, rs in runs.items()}}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
