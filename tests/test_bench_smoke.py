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


def _tools_module(name: str):
    import importlib

    sys.path[:0] = [str(ROOT / "tools")]
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_bench_pg_peers_store_and_read_back_every_event(pg_url: str):
    """bench_pg's peers workload on a real server: every system reads back the session it
    filled (1 round of tiny sizes; no figure is asserted beyond being a positive time)."""
    import pytest
    pytest.importorskip("agents")
    pytest.importorskip("google.adk")
    pytest.importorskip("asyncpg")
    res = _tools_module("bench_pg").bench_peers(pg_url, n=3, batches=1, reads=1, rounds=1, events=20)
    assert res["skipped"] == {}
    assert res["checks"] == {"eventstore": 20, "eventstore messages": 20, "agents": 20, "adk": 20}
    assert set(res["append"]) == {"eventstore", "agents", "adk"} and set(res["batch"]) == {"eventstore", "agents"}
    assert all(v > 0 for w in ("append", "batch", "read") for v in res[w].values())


def test_bench_adk_sqlite_peer_appends_and_reads_back(tmp_path: Path):
    """bench.py's ADK peer on SQLite: filled events, timed appends and get_session agree."""
    import asyncio

    import pytest
    pytest.importorskip("google.adk")
    pytest.importorskip("aiosqlite")
    bench = _tools_module("bench")
    loop = asyncio.new_event_loop()
    peer = bench.AdkPeer(tmp_path / "adk.db", "s", loop, shipped=False)
    try:
        peer.fill(list(bench.projection_events(8, 0)))
        assert peer.time_appends([("assistant/chunk", bench.chunk(i)) for i in range(3)]) > 0
        _dt, n = peer.time_get_session()
        assert n == 11
    finally:
        peer.close()
        loop.close()


def test_bench_seam_compares_two_commits(tmp_path: Path):
    """tools/bench_seam.py runs bench.py of the commit before the seam and of this checkout,
    alternated, and tables both; its temporary worktree is gone afterwards."""
    import pytest
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "c921bc0^{commit}"]).returncode != 0:
        pytest.skip("c921bc0 is not in this clone (shallow?)")

    def seam_trees() -> set[str]:
        out = subprocess.run(["git", "-C", str(ROOT), "worktree", "list", "--porcelain"], capture_output=True,
                             text=True).stdout
        return {line for line in out.splitlines() if line.startswith("worktree ") and "bench-seam-" in line}

    before = seam_trees()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_seam.py"), "--rounds", "2", "--",
                           "--quick", "--no-peers", "--only", "batch"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| Batched appends")]
    assert {r.split(" | ")[2] for r in rows} == {"eventstore", "raw sqlite3"}
    assert all(r.endswith("x |") for r in rows)
    assert proc.stderr.count("before (c921bc0)") == 2 and proc.stderr.count("after (") == 2
    assert seam_trees() <= before


def test_bench_pg_writers_raw_cases_write_what_they_time(pg_url: str, monkeypatch):
    """bench_pg's raw writers: each process stores its warm-up row and the rows it timed, in
    the table of its case (events, with a session each; the plain table, without)."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))  # (the spawned writers import bench_pg)
    bench_pg = _tools_module("bench_pg")
    with psycopg_connect(pg_url) as conn:
        from eventstore import EventStore
        EventStore.open(pg_url).close()
        conn.execute(bench_pg._PLAIN_DDL)
        for system, table in ((bench_pg.RAW_EVENTS, "events"), (bench_pg.RAW_PLAIN, bench_pg.PLAIN)):
            for durability in bench_pg.DURABILITIES:
                before = conn.execute(f"SELECT count(*), count(DISTINCT session_id) FROM {table}").fetchone()
                res = bench_pg.bench_writers(pg_url, 2, 5, durability, system)
                after = conn.execute(f"SELECT count(*), count(DISTINCT session_id) FROM {table}").fetchone()
                assert (after[0] - before[0], after[1] - before[1]) == (12, 2), (system, durability)
                assert res["events_per_s"] > 0 and 0 < res["p50_ms"] <= res["p99_ms"]
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 4  # the plain table needs none


def test_bench_pg_contention_tables_every_case(pg_url: str, tmp_path: Path):
    """``bench.py --backend postgres --only contention --quick``: a row for 1 and 8 writers of
    every case, and the JSON holds the same."""
    out = tmp_path / "pg.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--backend", "postgres", "--pg-url", pg_url, "--only",
                           "contention", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    bench_pg = _tools_module("bench_pg")
    cases = [f"{m} | {s}" for m, s in bench_pg.writer_cases()]
    assert len(cases) == 8
    rows = [line for line in proc.stdout.splitlines() if line.startswith(tuple(f"| {c} | " for c in cases))]
    assert [r.split(" | ")[2] for r in rows] == ["1", "8"] * len(cases)
    assert all(r.endswith("x |") for r in rows[1::2])
    writers = json.loads(out.read_text())["writers"]
    assert list(writers) == cases
    assert all(len(w["1"]) == len(w["8"]) == 1 and w["8"][0]["events_per_s"] > 0 for w in writers.values())


def psycopg_connect(url: str):
    import psycopg
    return psycopg.connect(url, autocommit=True)


def test_bench_pg_parts_runs_small(pg_url: str):
    """tools/bench_pg_parts.py on a real server: a row of figures for every copy of the table."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_pg_parts.py"), "--pg-url", pg_url,
                           "--rounds", "1", "--count", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line.endswith("x |")]
    assert [r.split(" | ")[0] for r in rows] == ["| as migrated", "| no statement check (nor its NOTIFY)",
                                                 "| no statement check, no row guard (no position lock)"]
