"""Screenshots of `eventstore serve` for the docs: docs/img/web-sessions.png and
docs/img/web-session.png (the demo session, with "What the model saw" open).

    python tools/web_screenshots.py        # needs the web extra, playwright and chromium

Builds a fresh database (`eventstore demo` plus the conformance fixtures), serves it on a
free port and drives Debian's chromium.
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
OUT = ROOT / "docs" / "img"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cli = [sys.executable, "-m", "eventstore", "--db", "eventstore.db"]
        env = {k: v for k, v in os.environ.items() if k != "EVENTSTORE_DB"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        demo = subprocess.run([*cli, "demo"], capture_output=True, text=True, check=True, cwd=tmp, env=env).stdout
        sid = demo.split()[1]
        subprocess.run([*cli, "import", str(ROOT / "tests" / "data")], capture_output=True, check=True,
                       cwd=tmp, env=env)
        server = subprocess.Popen([*cli, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=tmp, env=env)
        try:
            url = server.stdout.readline().split(" at ", 1)[1].split()[0]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 640}, device_scale_factor=1)
                page.goto(url)
                page.wait_for_selector("body[data-loaded='1']")
                page.screenshot(path=str(OUT / "web-sessions.png"))
                page.set_viewport_size({"width": 1280, "height": 820})
                page.goto(f"{url}session?id={sid}")
                page.wait_for_selector("body[data-loaded='1']")
                answer = page.locator(".item[data-kind=assistant]").nth(1)
                answer.hover()
                answer.locator("button", has_text="What the model saw").click()
                page.wait_for_selector("#panel-body .ctx-msg")
                answer.hover()
                page.screenshot(path=str(OUT / "web-session.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait()
    print("wrote", OUT / "web-sessions.png", "and", OUT / "web-session.png")


if __name__ == "__main__":
    main()
