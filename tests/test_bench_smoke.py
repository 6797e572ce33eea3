"""The benchmark package keeps running: every workload in its quick mode, as a real process.

No timing is asserted (speed is the benchmark's business, not a test's): only that every
workload produced figures for eventstore and its raw baseline, that the package's own
correctness checks passed (export byte-identical, seqs gapless, the same messages and items
read back) and that the Markdown and JSON outputs hold them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS

ROOT = TESTS.parent


def bench(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "tools.bench", "run", *args, "--quick", "--rounds", "1",
                           "--json", str(out), "--workdir", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def measured(result: dict) -> dict[str, set[str]]:
    """workload -> the systems with a figure in it."""
    out: dict[str, set[str]] = {}
    for f in result["figures"]:
        if f["times"]:
            assert f["median"] > 0, f
            out.setdefault(f["workload"], set()).add(f["system"])
    return out


def test_every_workload_runs_on_sqlite(tmp_path: Path):
    """``run all --quick`` but the browser's workload (see the next test): every workload has
    figures for eventstore (and its raw baseline where it has one); an installed peer is
    measured, a missing one listed as skipped."""
    listed = subprocess.run([sys.executable, "-m", "tools.bench", "list"], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout
    names = [line.split()[0] for line in listed.splitlines()]
    assert "conversation" in names
    result, stdout = bench(tmp_path, *(name for name in names if name != "conversation"))
    systems = measured(result)
    assert set(systems) == {"Single appends", "Batched appends", "Concurrent writers", "Import", "Export",
                            "Read one session", "Start-up (commands)", "Sessions listing (commands)", "Search", "Scan",
                            "Verify", "Viewer",
                            "Agents SDK session"}
    for workload in ("Single appends", "Batched appends", "Concurrent writers", "Import", "Export", "Read one session"):
        assert {"eventstore", "raw sqlite3"} <= systems[workload], workload
    assert all("eventstore" in s for w, s in systems.items() if w != "Agents SDK session")
    assert "eventstore import (command)" in systems["Import"]
    for peer, module in (("Agents SDK SQLiteSession", "agents"), ("eventsourcing SQLite recorder", "eventsourcing")):
        for workload in ("Single appends", "Batched appends", "Read one session"):
            try:
                __import__(module)
            except ImportError:
                assert any(f["system"] == peer and f["skipped"] for f in result["figures"] if f["workload"] == workload)
            else:
                assert peer in systems[workload], (peer, workload)
    checks = {c["check"]: c["ok"] for c in result["checks"]}
    assert any("byte-identical" in name for name in checks) and any("gapless" in name for name in checks)
    assert all(checks.values()), checks
    assert result["machine"]["sqlite"] and result["machine"]["cores"] and result["machine"]["load at start"]
    # the Markdown tables are what docs/benchmarks.md pastes
    assert "| case | system | median | min | max | per second | ÷ eventstore | note |" in stdout
    assert "#### Concurrent writers" in stdout and "Load average" in stdout


@pytest.mark.slow
def test_the_conversation_workload_runs_in_a_browser(tmp_path: Path):
    """``run conversation --quick``: chromium opens the session through ``eventstore serve``
    (slow: the browser's start-up is most of it; listed as skipped without one)."""
    result, stdout = bench(tmp_path, "conversation")
    if importlib.util.find_spec("playwright") is None or not shutil.which("chromium"):
        assert all(f["skipped"] for f in result["figures"]), result["figures"]
        return
    assert measured(result) == {"Conversation view": {"eventstore"}}
    assert all(c["ok"] for c in result["checks"]) and "DOM nodes in the list" in stdout


def test_postgres_workloads_run(tmp_path: Path, pg_url: str):
    """Appends and import against raw psycopg on the fixtures' server (a database per case)."""
    result, _ = bench(tmp_path, "append", "import", "--backend", "postgres", "--pg-url", pg_url)
    assert measured(result) == {"Single appends": {"eventstore", "raw psycopg"},
                                "Import": {"eventstore", "eventstore import (command)", "raw psycopg COPY"}}
    assert all(c["ok"] for c in result["checks"])
