"""The shared harness: rounds, figures, machine and load information, Markdown and JSON.

A workload calls :meth:`Bench.measure` with one callable per system; each call runs one
round of that system's block and returns the seconds of one unit (an append, an event, a
command). Rounds alternate the systems (the first one rotates), so load on a shared machine
falls on all of them alike. Ratios are taken between medians of the same run.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
ES = "eventstore"

#: Server settings of the throwaway PostgreSQL server: PostgreSQL's durable defaults (the
#: test server turns fsync off), so a commit waits for its WAL flush as in production. Its
#: data folder is on disk (the system's temporary folder), not in memory where the tests put
#: theirs: an fsync to a memory file system costs nothing, which would make every durable
#: commit look free and favour whoever flushes most often (SQLite's files are on disk too).
PG_DURABLE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}


@dataclass
class Figure:
    """One system's times in one case of a workload: seconds per ``unit``, one per round."""

    workload: str
    case: str
    system: str
    unit: str
    times: list[float] = field(default_factory=list)
    note: str = ""
    skipped: str = ""  # the reason, when the system did not run
    extra: dict = field(default_factory=dict)  # other figures (latency percentiles, ...)
    ratio: float | None = None  # this system's median / eventstore's, same case

    @property
    def median(self) -> float | None:
        """The median over the rounds (None when the system did not run)."""
        return statistics.median(self.times) if self.times else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def machine_info() -> dict:
    """The machine, the versions that matter, the commit measured and the load at start."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "cpu": cpu, "cores": os.cpu_count(), "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "commit": commit,
        "versions": {d: _version(d) for d in ("SQLAlchemy", "orjson", "psycopg", "openai-agents", "eventsourcing")},
        "load at start": load_average(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


class Bench:
    """One run: its options, its scratch folder, its databases and the figures taken.

    ``backend`` is ``sqlite`` or ``postgres``; ``quick`` picks tiny sizes (the smoke test);
    ``rounds`` is how many rounds each workload takes; ``peers=False`` skips the optional peers
    (the libraries eventstore is compared with; the raw drivers always run). On PostgreSQL, ``pg_url`` names an
    existing server (a new database in it per :meth:`target`); without it the first
    :meth:`target` starts a throwaway server (tests/pgserver.py) with durable settings.
    """

    def __init__(self, backend: str = "sqlite", *, quick: bool = False, rounds: int | None = None,
                 workdir: Path | None = None, pg_url: str | None = None, durability: str = "normal",
                 peers: bool = True):
        self.backend, self.quick, self.durability, self.peers = backend, quick, durability, peers
        self.rounds = rounds or (2 if quick else 5)
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="eventstore-bench-")
        self.workdir = Path(workdir or self._tmp.name)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pg_url, self._server, self._dbs = pg_url, None, 0
        self.figures: list[Figure] = []
        self.checks: list[dict] = []
        self.machine = machine_info()

    # -- sizes and places ---------------------------------------------------------------------

    def pick(self, quick, full):
        """``quick`` in quick mode, else ``full``."""
        return quick if self.quick else full

    def folder(self, name: str) -> Path:
        """A scratch folder ``name`` in the run's work folder."""
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def target(self, name: str) -> str:
        """A new, empty database for ``name``: a file path on SQLite, a URL on PostgreSQL."""
        if self.backend == "sqlite":
            path = self.folder(name) / f"{name}.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
            return str(path)
        import psycopg

        if self.pg_url is None:
            from tests.pgserver import PgServer  # the tests' throwaway server

            self._server = PgServer(settings=PG_DURABLE, parent=tempfile.gettempdir()).start()
            self.pg_url = self._server.url()
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                self.machine["postgres"] = conn.execute("SHOW server_version").fetchone()[0]
                self.machine["postgres settings"] = f"throwaway server, data in {self._server.folder.parent}, " \
                    + ", ".join(f"{k}={conn.execute(f'SHOW {k}').fetchone()[0]}" for k in PG_DURABLE)
        self._dbs += 1
        db = f"bench_{name}_{os.getpid()}_{self._dbs}".replace("-", "_")
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
            self.machine.setdefault("postgres", conn.execute("SHOW server_version").fetchone()[0])
        parts = urlsplit(self.pg_url)
        return urlunsplit(parts._replace(path="/" + db))

    def close(self) -> None:
        """Stop the throwaway server and remove the scratch folder."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- figures ------------------------------------------------------------------------------

    def measure(self, workload: str, case: str, systems: dict[str, Callable[[], float]], unit: str,
                notes: dict[str, str] | None = None, rounds: int | None = None) -> dict[str, Figure]:
        """Run every system's block ``rounds`` times, alternating; record and return the figures."""
        notes = notes or {}
        figs = {name: Figure(workload, case, name, unit, note=notes.get(name, "")) for name in systems}
        names = list(systems)
        for r in range(rounds or self.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                figs[name].times.append(systems[name]())
        self.figures.extend(figs.values())
        return figs

    def add(self, fig: Figure) -> Figure:
        """Record a figure a workload took itself."""
        self.figures.append(fig)
        return fig

    def skip(self, workload: str, case: str, system: str, reason: str) -> None:
        """Record that ``system`` did not run in ``case``, and why."""
        self.figures.append(Figure(workload, case, system, "", skipped=reason))

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        """Record a correctness check of the run (the smoke test asserts they all pass)."""
        self.checks.append({"check": what, "ok": bool(ok), "detail": str(detail)})

    def ratios(self) -> None:
        """Set each figure's ratio: its median over eventstore's (else the case's first system's)."""
        base: dict[tuple, float] = {}  # eventstore's median, else the case's first system's
        for f in self.figures:
            if f.times and (f.system == ES or (f.workload, f.case) not in base):
                base[(f.workload, f.case)] = f.median
        for f in self.figures:
            b = base.get((f.workload, f.case))
            f.ratio = f.median / b if b and f.times else None

    # -- output -------------------------------------------------------------------------------

    def as_json(self) -> dict:
        """Every figure with its rounds, the machine and the checks, as a JSON-ready dict."""
        self.ratios()
        return {"machine": self.machine, "backend": self.backend, "quick": self.quick, "rounds": self.rounds,
                "durability": self.durability, "figures": [asdict(f) | {"median": f.median} for f in self.figures],
                "checks": self.checks}

    def markdown(self, command: str) -> str:
        """The machine and one Markdown table per workload, headed by ``command``."""
        self.ratios()
        m = self.machine
        versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
        pg = f", PostgreSQL {m['postgres']}" if m.get("postgres") else ""
        lines = [f"Command: `{command}` ({m['started']}, commit {m['commit']})", "",
                 f"- Machine: {m['cpu']}, {m['cores']} cores, {m['os']}",
                 f"- Python {m['python']}, SQLite {m['sqlite']}{pg}; {versions}",
                 f"- Load average (1/5/15 min): {m['load at start']} at start, {m.get('load at end')} at end"]
        if m.get("postgres settings"):
            lines.append(f"- PostgreSQL: {m['postgres settings']}")
        workloads: dict[str, list[Figure]] = {}
        for f in self.figures:
            workloads.setdefault(f.workload, []).append(f)
        for w, figs in workloads.items():
            lines += ["", f"#### {w} ({self.backend}{', quick' if self.quick else ''}, {self.rounds} rounds)", "",
                      "| case | system | median | min | max | per second | ÷ eventstore | note |",
                      "|---|---|---|---|---|---|---|---|"]
            last = None
            for f in sorted(figs, key=lambda f: bool(f.skipped)):  # (stable: skipped rows last in a case)
                case = f.case if f.case != last else ""
                last = f.case
                if f.skipped:
                    lines.append(f"| {case} | {f.system} | — | — | — | — | — | skipped: {f.skipped} |")
                    continue
                extra = "; ".join(f"{k} {v}" for k, v in f.extra.items())
                note = "; ".join(x for x in (f.note, extra) if x)
                units = f.unit[:-1] + "ies" if f.unit.endswith("y") else f.unit + "s"
                rate = f"{1 / f.median:,.{0 if f.median < 0.1 else 2}f} {units}/s" if f.median else "—"
                ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "—"
                lines.append(f"| {case} | {f.system} | {fmt_time(f.median)} | {fmt_time(min(f.times))} | "
                             f"{fmt_time(max(f.times))} | {rate} | {ratio} | {note} |")
        if self.checks:
            bad = [c for c in self.checks if not c["ok"]]
            lines += ["", f"Checks: {len(self.checks) - len(bad)} of {len(self.checks)} passed"
                      + "".join(f"; FAILED {c['check']} ({c['detail']})" for c in bad)]
        return "\n".join(lines)


def fmt_time(s: float | None) -> str:
    """Seconds as µs, ms or s with three significant digits."""
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def percentiles(latencies: list[float]) -> dict[str, str]:
    """p50, p99 and max of latencies in seconds, as milliseconds for a table's note."""
    lat = sorted(latencies)
    if not lat:
        return {}
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    return {"p50": f"{q(0.5) * 1e3:.2f} ms", "p99": f"{q(0.99) * 1e3:.2f} ms", "max": f"{lat[-1] * 1e3:.1f} ms"}


def timed(fn: Callable[[], object], count: int) -> float:
    """Seconds of one unit when ``fn`` does ``count`` units."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) / count


#: Where the commands' bytecode is kept between runs. An installed package has its modules
#: compiled; with $PYTHONDONTWRITEBYTECODE (or a read-only checkout) every command would
#: compile eventstore's modules again, and time that instead of the command.
PYCACHE = Path(tempfile.gettempdir()) / f"eventstore-bench-pycache-{os.getuid() if hasattr(os, 'getuid') else 0}"
#: The ``eventstore`` script pip installs (its console-script template), run from the checkout.
SCRIPT = """import re
import sys
from eventstore.__main__ import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def command(*args: str, db: str | None = None) -> list[str]:
    """The argv of an ``eventstore`` command run as a user runs it: the installed script in a
    fresh interpreter (``--db DB`` first when ``db`` is given)."""
    script = PYCACHE / "bin" / "eventstore"
    if not script.exists() or script.read_text() != SCRIPT:
        script.parent.mkdir(parents=True, exist_ok=True)
        part = script.with_name(f"eventstore.{os.getpid()}")  # renamed whole: another run may be reading it
        part.write_text(SCRIPT)
        os.replace(part, script)
    return [sys.executable, str(script), *(["--db", db] if db is not None else []), *args]


@dataclass
class Run:
    """One finished process: wall seconds and CPU seconds (user + system)."""

    wall: float
    cpu: float


def command_env() -> dict[str, str]:
    """The commands' environment: the checkout on the path, bytecode kept in :data:`PYCACHE`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                  "PYTHONPYCACHEPREFIX": str(PYCACHE)}


def run_process(argv: list[str]) -> Run:
    """Run ``argv`` once (stdout to /dev/null) in :func:`command_env`; raises when it fails."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=command_env(), cwd=ROOT)
        _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not all children's
        dt = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            shown = " ".join(a if len(a) < 60 else a[:57].split("\n")[0] + "..." for a in argv)
            raise RuntimeError(f"{shown} failed ({proc.returncode}): {err.read().decode()[-500:]}")
    return Run(dt, usage.ru_utime + usage.ru_stime)


def peak_mib(argv: list[str]) -> float | None:
    """The peak resident memory of one run of ``argv`` in MiB, as GNU time reports it (None
    without /usr/bin/time). (A child's own rusage would count this process's memory: a
    child started by vfork shares it until its exec.)"""
    if not os.path.exists("/usr/bin/time"):
        return None
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=command_env(), cwd=ROOT, check=True)
        return int(out.read().split()[-1]) / 1024


def run_command(argv: list[str]) -> float:
    """Seconds of one run of ``argv`` (stdout to /dev/null); raises when it fails."""
    return run_process(argv).wall


def process_figures(bench: Bench, workload: str, case: str, argvs: dict[str, list[str]], notes: dict[str, str],
                    per: int = 1, unit: str = "command") -> dict[str, Figure]:
    """Time each system's command as whole processes, rounds alternated after one uncounted
    run each (bytecode compiled, pages cached): the figure is the wall time (divided by
    ``per``), with the median CPU time, its ratio to eventstore's, and the peak memory of one
    more run, in the note."""
    runs: dict[str, list[Run]] = {name: [] for name in argvs}

    def block(name: str) -> Callable[[], float]:
        def once() -> float:
            r = run_process(argvs[name])
            runs[name].append(r)
            return r.wall / per
        return once

    for name in argvs:  # the warm-up
        run_process(argvs[name])
    figs = bench.measure(workload, case, {name: block(name) for name in argvs}, unit, notes)
    cpu = {name: statistics.median(r.cpu for r in rs) for name, rs in runs.items()}
    base = cpu.get(ES) or next(iter(cpu.values()))
    for name, fig in figs.items():
        peak = peak_mib(argvs[name])
        fig.extra = {"CPU": fmt_time(cpu[name] / per), "CPU ÷ eventstore": f"{cpu[name] / base:.2f}x"} | (
            {"peak": f"{peak:.0f} MiB"} if peak is not None else {}) | fig.extra
    return figs
