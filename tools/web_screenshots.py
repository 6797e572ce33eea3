"""The screenshots of ``eventstore serve`` in the docs, all made anew:

* ``web-sessions.png`` and ``web-session.png``: the sessions page and the demo session,
  with "What the model saw" open (``eventstore demo`` plus the conformance fixtures);
* ``web-imported-sessions.png``, ``web-claude-code.png`` and ``web-codex.png``: the
  sessions list, a Claude Code session with its Task call and thinking, and a Codex session
  with an ``apply_patch`` diff (the samples of tests/transcripts_data imported).

    python -m tools.web_screenshots [--out DIR]    # needs the web extra, playwright and chromium

Each set is made in a fresh database, served on a free port and shown in Debian's chromium;
the images go to docs/img (or DIR).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "transcripts_data"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
CLAUDE = "e2c84b1f-6d3a-4a07-b5e9-93f1c0a7d258"
CODEX = "019aeb31-58f2-7a44-b1c9-d03e6f7a8b92"
CODEX_PATCH_CALL = "call_eiDuYHzG6GiGcmfUMFL5omuP"  # an apply_patch call


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@contextmanager
def _served(cli: list[str], cwd: str) -> Iterator[str]:
    """``eventstore serve`` of ``cli``'s database on a free port: its URL, ending in "/"."""
    server = subprocess.Popen([*cli, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=cwd,
                              env=_env())
    try:
        yield server.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/") + "/"
    finally:
        server.terminate()
        server.wait()


def demo_shots(browser, out: Path, tmp: str) -> list[Path]:
    """The sessions page and the demo session with "What the model saw" open."""
    cli = [sys.executable, "-m", "eventstore", "--db", "eventstore.db"]
    demo = subprocess.run([*cli, "demo"], capture_output=True, text=True, check=True, cwd=tmp, env=_env()).stdout
    sid = demo.split()[1]
    subprocess.run([*cli, "import", str(ROOT / "tests" / "data")], capture_output=True, check=True, cwd=tmp,
                   env=_env())
    with _served(cli, tmp) as url:
        page = browser.new_page(viewport={"width": 1200, "height": 640}, device_scale_factor=1)
        page.goto(url)
        page.wait_for_selector("body[data-loaded='1']")
        page.screenshot(path=str(out / "web-sessions.png"))
        page.set_viewport_size({"width": 1280, "height": 820})
        page.goto(f"{url}session?id={sid}")
        page.wait_for_selector("body[data-loaded='1']")
        answer = page.locator(".item[data-kind=assistant]").nth(1)
        answer.hover()
        answer.locator("button", has_text="What the model saw").click()
        page.wait_for_selector("#panel-body .ctx-msg")
        answer.hover()
        page.screenshot(path=str(out / "web-session.png"))
        page.close()
    return [out / "web-sessions.png", out / "web-session.png"]


def imported_shots(browser, out: Path, tmp: str) -> list[Path]:
    """The sessions list of imported samples, a Claude Code session and a Codex session."""
    cli = [sys.executable, "-m", "eventstore", "--db", "imported.db"]
    subprocess.run([*cli, "import", str(DATA / "claude-code"), str(DATA / "codex")], check=True,
                   capture_output=True, cwd=tmp, env=_env())
    with _served(cli, tmp) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 820})
        page.goto(url)
        page.wait_for_selector("body[data-loaded='1']")
        page.screenshot(path=str(out / "web-imported-sessions.png"))
        page.goto(f"{url}session?id={CLAUDE}")
        page.wait_for_selector("body[data-loaded='1']")
        page.locator("details.thinking summary").first.click()
        page.wait_for_timeout(300)
        page.screenshot(path=str(out / "web-claude-code.png"))
        page.goto(f"{url}session?id={CODEX}&call={CODEX_PATCH_CALL}")
        page.wait_for_selector("body[data-loaded='1']")
        page.wait_for_timeout(300)
        page.evaluate("document.getElementById('log').scrollBy(0, -120)")
        page.wait_for_timeout(300)
        page.evaluate("document.querySelectorAll('.item.target').forEach(e => e.classList.remove('target'))")
        page.screenshot(path=str(out / "web-codex.png"))
        page.close()
    return [out / "web-imported-sessions.png", out / "web-claude-code.png", out / "web-codex.png"]


def main(argv: list[str] | None = None) -> int:
    """The command line: make every screenshot; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m tools.web_screenshots", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", metavar="DIR", type=Path, default=ROOT / "docs" / "img",
                    help="where the images go (default: docs/img)")
    a = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        try:
            made = demo_shots(browser, a.out, tmp) + imported_shots(browser, a.out, tmp)
        finally:
            browser.close()
    print("wrote", ", ".join(str(path) for path in made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
