"""A throwaway PostgreSQL server for the tests and benchmarks.

:class:`PgServer` runs ``initdb`` in a fresh temporary folder, starts the cluster with
``pg_ctl`` on a free 127.0.0.1 port (unix sockets in the same folder, ``fsync=off``: a
test database need not survive a power cut), hands out one new database per test, and
stops the cluster and removes the folder at the end.

The folder is made in ``/dev/shm`` where that is a writable memory file system (creating
and dropping a database there takes a tenth of the time it takes on a disk), else in the
usual temporary folder.

``initdb`` refuses to run as root, so under root every server command runs as the
``postgres`` user (``runuser``, or ``su`` where runuser is missing) and the folder belongs
to that user. The superuser of the cluster is the role ``postgres``; authentication is
``trust`` (only local connections reach it).

Used by ``tests/conftest.py`` (fixtures ``pg_server`` and ``pg_url``) and by
``python -m tools.bench run ... --backend postgres``.
"""

from __future__ import annotations

import glob
import itertools
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = "PostgreSQL is not installed (apt-get install postgresql, or set EVENTSTORE_PG_BINDIR)"
SUPERUSER = "postgres"


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries (initdb, pg_ctl) were found on this machine."""


def find_bindir() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``.

    Looks at ``$EVENTSTORE_PG_BINDIR``, then the PATH, then ``pg_config --bindir``, then
    Debian's ``/usr/lib/postgresql/<major>/bin`` (newest first).

    Raises:
        PostgresMissing: no folder has both programs.
    """
    candidates: list[Path] = []
    if os.environ.get("EVENTSTORE_PG_BINDIR"):
        candidates.append(Path(os.environ["EVENTSTORE_PG_BINDIR"]))
    for prog in ("pg_ctl", "initdb"):
        found = shutil.which(prog)
        if found:
            candidates.append(Path(found).resolve().parent)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10).stdout
            if out.strip():
                candidates.append(Path(out.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                    if Path(p).parent.name.isdigit() else 0, reverse=True)
    candidates.extend(Path(p) for p in debian)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    raise PostgresMissing(INSTALL_HINT)


def _scratch_dir() -> str | None:
    """``/dev/shm`` when it is a writable folder (memory: a throwaway cluster need not touch
    the disk), else None (the system's temporary folder)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("runuser"):
        return ["runuser", "-u", SUPERUSER, "--", *argv]
    return ["su", SUPERUSER, "-s", "/bin/sh", "-c", shlex.join(argv)]


class PgServer:
    """One PostgreSQL cluster in a temporary folder, on 127.0.0.1:``port``.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``settings`` are extra
    server settings (``name -> value``) added to the defaults in :attr:`SETTINGS`.
    """

    #: Server settings for a throwaway test cluster.
    SETTINGS = {
        "fsync": "off",
        "full_page_writes": "off",
        "synchronous_commit": "off",
        "max_connections": "200",
        "shared_buffers": "128MB",
    }

    def __init__(self, settings: dict[str, str] | None = None, parent: str | None = None):
        self.bindir = find_bindir()
        self.parent = parent  # the folder the cluster's folder is made in (default: _scratch_dir())
        self.settings = {**self.SETTINGS, **(settings or {})}
        self.folder: Path | None = None
        self.port: int | None = None
        self._names = itertools.count(1)

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> PgServer:
        """initdb and start the cluster; returns self once it accepts connections.

        Raises:
            RuntimeError: initdb or pg_ctl failed (the message holds the server log).
        """
        self.folder = Path(tempfile.mkdtemp(prefix="eventstore-pg-", dir=self.parent or _scratch_dir()))
        if os.geteuid() == 0:
            shutil.chown(self.folder, SUPERUSER, SUPERUSER)
        data = self.folder / "data"
        self._run([str(self.bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
                   "-E", "UTF8", "--locale=C", "--no-sync"], "initdb")
        last_error = ""
        for _ in range(5):  # the free port can be taken between looking and binding: try another
            self.port = _free_port()
            options = [f"-p {self.port}", f"-k {self.folder}", "-c listen_addresses=127.0.0.1"]
            options += [f"-c {k}={v}" for k, v in self.settings.items()]
            self._options = options
            proc = subprocess.run(_as_server_user([
                str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data),
                "-l", str(self.folder / "server.log"), "-o", " ".join(options)]),
                capture_output=True, text=True)
            if proc.returncode == 0:
                return self
            last_error = proc.stdout + proc.stderr + self.log()
        self.stop()
        raise RuntimeError(f"pg_ctl start failed:\n{last_error}")

    def restart(self) -> None:
        """Stop the cluster (``fast``: sessions are ended, the WAL is flushed) and start it
        again on the same port with the same settings; returns once it accepts connections."""
        self._run([str(self.bindir / "pg_ctl"), "restart", "-w", "-t", "60", "-m", "fast", "-D",
                   str(self.folder / "data"), "-l", str(self.folder / "server.log")], "pg_ctl restart")

    def halt(self) -> None:
        """Stop the cluster (``fast``), keeping its data: :meth:`resume` starts it again."""
        self._run([str(self.bindir / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.folder / "data")],
                  "pg_ctl stop")

    def resume(self) -> None:
        """Start a cluster :meth:`halt` stopped, on the same port with the same settings."""
        self._run([str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.folder / "data"),
                   "-l", str(self.folder / "server.log"), "-o", " ".join(self._options)], "pg_ctl start")

    def stop(self) -> None:
        """Stop the cluster (immediately: nothing in it is kept) and remove its folder."""
        if self.folder is None:
            return
        data = self.folder / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(_as_server_user([str(self.bindir / "pg_ctl"), "stop", "-w", "-m", "immediate",
                                            "-D", str(data)]), capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self, argv: list[str], what: str) -> None:
        proc = subprocess.run(_as_server_user(argv), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    def log(self) -> str:
        """The server log so far ('' when there is none)."""
        try:
            return (self.folder / "server.log").read_text(errors="replace")
        except (OSError, TypeError):
            return ""

    # -- databases ---------------------------------------------------------------------------

    def url(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        """A libpq URL of database ``dbname`` as role ``user`` (over TCP)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres", user: str = SUPERUSER, **kwargs):
        """A psycopg connection (autocommit) to ``dbname`` as ``user``."""
        import psycopg

        return psycopg.connect(self.url(dbname, user), autocommit=True, **kwargs)

    def create_database(self, name: str | None = None, template: str = "template0") -> str:
        """Create a new empty database and return its name (``test_<n>`` unless given)."""
        name = name or f"test_{next(self._names)}_{int(time.time() * 1000) % 100000}"
        with self.connect() as conn:  # (FILE_COPY: half the time of WAL_LOG here, where fsync is off)
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        return name

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, ending whatever sessions are still connected to it."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
