"""Screenshots of imported sessions in `eventstore serve` for docs/web.md:
docs/img/web-imported-sessions.png (the sessions list), docs/img/web-claude-code.png (a
Claude Code session with its Task call and thinking) and docs/img/web-codex.png (a Codex
session with an apply_patch diff).

    PYTHONPATH=. python tests/web_screenshots.py    # needs the web extra, playwright and chromium

Imports the samples of tests/transcripts_data into a fresh database, serves it on a free
port and drives Debian's chromium.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "transcripts_data"
OUT = ROOT / "docs" / "img"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
CLAUDE = "e2c84b1f-6d3a-4a07-b5e9-93f1c0a7d258"
CODEX = "019aeb31-58f2-7a44-b1c9-d03e6f7a8b92"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cli = [sys.executable, "-m", "eventstore", "--db", str(Path(tmp) / "eventstore.db")]
        env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        subprocess.run([*cli, "import", str(DATA / "claude-code"), str(DATA / "codex")], check=True,
                       capture_output=True, env=env)
        server = subprocess.Popen([*cli, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
        try:
            url = server.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 820})
                page.goto(url + "/")
                page.wait_for_selector("body[data-loaded='1']")
                page.screenshot(path=str(OUT / "web-imported-sessions.png"))
                page.goto(f"{url}/session?id={CLAUDE}")
                page.wait_for_selector("body[data-loaded='1']")
                page.locator("details.thinking summary").first.click()
                page.wait_for_timeout(300)
                page.screenshot(path=str(OUT / "web-claude-code.png"))
                page.goto(f"{url}/session?id={CODEX}&call=call_eiDuYHzG6GiGcmfUMFL5omuP")  # an apply_patch call
                page.wait_for_selector("body[data-loaded='1']")
                page.wait_for_timeout(300)
                page.evaluate("document.getElementById('log').scrollBy(0, -120)")
                page.wait_for_timeout(300)
                page.evaluate("document.querySelectorAll('.item.target').forEach(e => e.classList.remove('target'))")
                page.screenshot(path=str(OUT / "web-codex.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
