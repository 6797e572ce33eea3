"""tools/bench.py must keep running: its quickest mode, peers skipped, as a real process.

No timing is asserted (speed is the benchmark's business, not a test's): only that every
workload produced a figure and that the tool's own correctness checks passed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "tools" / "bench.py"


def test_bench_quick_runs_every_workload(tmp_path: Path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-peers", "--markdown", "--json", str(out),
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())

    measured = {(r["section"].split(" (")[0], r["system"]) for r in result["rows"] if r["seconds"]}
    for section in ("Single appends", "Batched appends", "Bulk import and export", "Projection"):
        assert (section, "eventstore") in measured, section
    for section in ("Single appends", "Batched appends", "Bulk import and export"):
        assert (section, "raw sqlite3") in measured, section
    # --no-peers: the peers are listed as skipped, never measured
    peers = [r for r in result["rows"] if not r["system"].startswith(("eventstore", "raw sqlite3"))]
    assert peers and all(r["seconds"] is None and "skipped" in r["note"] for r in peers)

    checks = {c["check"]: c["ok"] for c in result["checks"]}
    assert any("byte-identical" in name for name in checks)
    assert all(checks.values()), checks
    assert {t["target"].split(" (")[0] for t in result["targets"]} >= {
        "single append >= 0.6x raw sqlite3 throughput"}
    assert result["contention"]["status"]  # the loadgen hook ran (or said n/a)
    assert result["machine"]["sqlite"]

    # the Markdown tables are what docs/benchmarks.md pastes
    assert "| case | system | time / op |" in proc.stdout
    assert "### Targets" in proc.stdout


def test_bench_agents_and_aio_lag_run(tmp_path: Path):
    """tools/bench_agents.py (which checks both sessions return the same items) and
    tools/aio_lag.py keep running; no figure is asserted."""
    import pytest
    pytest.importorskip("agents")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_agents.py"), "--turns", "5", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| get_items(limit=10) | EventStoreSession |" in proc.stdout
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "aio_lag.py"), "--hold", "0.2"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("largest loop lag") == 2


def test_aio_pg_runs(pg_url: str):
    """tools/aio_pg.py (the worker thread against psycopg's AsyncConnection) keeps running
    on a real server; no figure is asserted."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "aio_pg.py"), "--db", pg_url, "--n", "32",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("| worker thread |") == 3 and proc.stdout.count("| AsyncConnection") == 5


def test_bench_search_runs_small(tmp_path: Path):
    """tools/bench_search.py, on 3,000 events: every query and append row has a figure."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_search.py"), "--events", "3000", "--files", "2",
         "--repeat", "2", "--appends", "30", "--rounds", "1", "--work", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    assert len(rows) == 9 and all(" ms |" in r for r in rows)
    assert "| messages |" in proc.stdout and "| assistant/chunk |" in proc.stdout
    assert "indexed by the first search" in proc.stdout
