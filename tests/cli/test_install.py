"""A plain (non-editable) ``pip install`` into a fresh virtual environment, used from
another folder: the newcomer's path. Slow-ish (it installs the dependencies), so it can be
skipped with ``-m "not install"``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv

import pytest
from conftest import DATA, FIXTURES, TESTS

ROOT = TESTS.parent

pytestmark = pytest.mark.install


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    # The running pip installs into the new environment (--python): it needs no pip of its own,
    # and making one (ensurepip) took a third of this fixture's CPU time. --no-compile: pip
    # would compile every module of every dependency (most of the install's time); the commands
    # below compile what they import, once (sh() lets them write their bytecode).
    venv.EnvBuilder(with_pip=False).create(base / "venv")
    bindir = base / "venv" / ("Scripts" if os.name == "nt" else "bin")
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install", "-q",
                          "--no-compile", str(ROOT)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return bindir / "eventstore", elsewhere


def sh(exe, cwd, *args):
    """The installed command, run as a newcomer's shell would: no EVENTSTORE_DB, no PYTHONPATH,
    and Python writing its bytecode (into the new environment)."""
    env = {k: v for k, v in os.environ.items() if k not in ("EVENTSTORE_DB", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, env=env)


def test_installed_package_is_not_the_checkout(installed):
    exe, cwd = installed
    python = exe.parent / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as sh() runs the command
    where = subprocess.run([str(python), "-c", "import eventstore, sys; print(eventstore.__file__)"],
                           cwd=cwd, capture_output=True, text=True, check=True, env=env).stdout
    assert str(ROOT) not in where and "site-packages" in where


def test_installed_under_a_name_of_its_own(installed):
    """The distribution is agent-eventstore (the index's "eventstore" is someone else's
    package); the import package and the command are eventstore."""
    exe, cwd = installed
    python = exe.parent / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import importlib.metadata as m; d = m.distribution('agent-eventstore'); "
            "print(d.metadata['Name'], sorted(e.name for e in d.entry_points if e.group == 'console_scripts'), "
            "sorted(d.metadata.get_all('Provides-Extra')))")
    out = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, check=True, env=env).stdout
    assert out.split(" ", 1)[0] == "agent-eventstore"
    assert "['eventstore']" in out
    for extra in ("postgres", "web", "openai-agents", "pydantic-ai"):
        assert f"'{extra}'" in out
    missing = subprocess.run([str(python), "-c", "import importlib.metadata as m; m.distribution('eventstore')"],
                             cwd=cwd, capture_output=True, text=True, env=env)
    assert missing.returncode != 0


INSTALL_LINE = re.compile(r"pip install[^\n`]*")


def test_no_install_line_names_the_index_package():
    """Every pip install line of the README, the docs and the package's own messages
    installs from the checkout (or names real dependencies), never the index's unrelated
    "eventstore"."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "eventstore").rglob("*.py"))]
    lines = [(f.name, m.group(0)) for f in files for m in INSTALL_LINE.finditer(f.read_text())]
    assert len(lines) > 10
    bad = [(name, line) for name, line in lines if re.search(r"pip install\s+(?:-\S+\s+)*['\"]?eventstore\b(?![-/])", line)]
    assert bad == []
    assert any("'.[postgres]'" in line for _, line in lines) and any("'.[openai-agents]'" in line for _, line in lines)
    assert 'name = "agent-eventstore"' in (ROOT / "pyproject.toml").read_text()


def test_demo_from_another_folder(installed):
    exe, cwd = installed
    result = sh(exe, cwd, "demo")
    assert result.returncode == 0, result.stderr.decode()
    assert b'"content":"2"' in result.stdout
    assert (cwd / "eventstore.db").is_file()


def test_every_fixture_through_the_installed_cli(installed, tmp_path):
    exe, cwd = installed
    db = str(tmp_path / "fixtures.db")
    result = sh(exe, cwd, "--db", db, "import", str(DATA))
    assert result.returncode == 0, result.stderr.decode()
    for name in FIXTURES:
        original = (DATA / f"{name}.jsonl").read_bytes()
        sid = json.loads(original.split(b"\n", 1)[0])["id"]
        assert sh(exe, cwd, "--db", db, "export", sid).stdout == original, name
        messages = json.loads(sh(exe, cwd, "--db", db, "messages", sid).stdout)
        assert messages == json.loads((DATA / f"{name}.messages.json").read_bytes()), name


def test_errors_have_no_traceback(installed):
    exe, cwd = installed
    result = sh(exe, cwd, "--db", "x.db", "export", "missing")
    assert result.returncode == 1
    assert result.stderr.startswith(b"error: no database at ") and b"x.db" in result.stderr
    assert sh(exe, cwd, "--db", "x.db", "init").returncode == 0
    result = sh(exe, cwd, "--db", "x.db", "export", "missing")
    assert result.returncode == 1
    assert result.stderr == b"error: session 'missing' not found\n"


def test_the_viewer_ships_its_pages_and_names_its_extra(installed, tmp_path):
    """The static files install with the package; without the web extra (not installed
    here), `eventstore serve` says which pip install it needs."""
    exe, cwd = installed
    python = exe.parent / "python"
    names = subprocess.run([str(python), "-c", "import eventstore.web, pathlib; print(' '.join(sorted(p.name for p in "
                            "(pathlib.Path(eventstore.web.__file__).parent / 'static').iterdir())))"],
                           cwd=cwd, capture_output=True, text=True, check=True).stdout.split()
    assert {"sessions.html", "session.html", "style.css", "common.js", "chat.js", "session.js", "sessions.js"} <= set(names)
    result = sh(exe, cwd, "--db", str(tmp_path / "v.db"), "serve")
    assert result.returncode == 1
    assert result.stderr.decode().strip() == ("error: the web viewer needs Starlette and uvicorn: pip install starlette "
                                              "uvicorn (in the checkout of eventstore: pip install '.[web]')")


def test_the_package_ships_each_databases_migrations(installed):
    """Both Alembic histories (migrations/sqlite, migrations/postgres) install inside the
    package, whole: the same revision files as the checkout, each history at SCHEMA_REVISION."""
    from eventstore.schema import SCHEMA_REVISION

    exe, cwd = installed
    python = exe.parent / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import json, pathlib; from alembic.config import Config; from alembic.script import ScriptDirectory; "
            "from eventstore.schema import migrations_path\n"
            "out = {}\n"
            "for d in ('sqlite', 'postgresql'):\n"
            "    cfg = Config(); cfg.set_main_option('script_location', migrations_path(d))\n"
            "    out[d] = [migrations_path(d), ScriptDirectory.from_config(cfg).get_heads(),\n"
            "              sorted(p.name for p in (pathlib.Path(migrations_path(d)) / 'versions').glob('*.py'))]\n"
            "print(json.dumps(out))")
    out = json.loads(subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, check=True,
                                    env=env).stdout)
    for dialect, folder in (("sqlite", "sqlite"), ("postgresql", "postgres")):
        where, heads, files = out[dialect]
        assert "site-packages" in where and str(ROOT) not in where
        assert heads == [SCHEMA_REVISION]
        assert files == sorted(p.name for p in (ROOT / "migrations" / folder / "versions").glob("*.py"))
