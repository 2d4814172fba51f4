"""Refresh docs/img/dashboard-*.png from what `make run` shows: the demo store, served, signed in.

    .venv/bin/python scripts/dashboard_screenshots.py

Runs scripts/demo.sh (the tour, then `cairn serve`) on a throwaway home, reads the URL and token it
prints, signs in with Debian's chromium (scripts/setup_browser.sh) through Playwright and saves the
main pages at a desktop width. The README shows these, so they show a newcomer's first store.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
PAGES = {
    "lessons": "/ui/lessons",
    "lesson": "/ui/lesson?"
    + urllib.parse.urlencode({"scope": "repo::acme/widget", "key": "flaky-e2e", "v1": 1, "v2": 2}),
    "review": "/ui/review",
    "audit": "/ui/audit",
    "scopes": "/ui/scopes",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("chromium is missing: run scripts/setup_browser.sh")
    port = free_port()
    home = tempfile.mkdtemp(prefix="cairn-shots-")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CAIRN_DEMO_HOME": home,
        "CAIRN_DEMO_PORT": str(port),
    }
    env.pop("CAIRN_TOKEN", None)
    demo = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "demo.sh")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        token = None
        assert demo.stdout is not None
        for line in demo.stdout:
            if m := re.search(r"Sign in with this token: (cairn_\S+)", line):
                token = m.group(1)
                break
        if token is None:
            sys.exit("the demo did not print a token")
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800}, base_url=base)
            deadline = time.monotonic() + 60
            while True:
                try:
                    page.goto("/ui/signin")
                    break
                except Exception:  # noqa: BLE001 - the server is still starting
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            page.get_by_label("Token").fill(token)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/ui/lessons**")
            OUT.mkdir(parents=True, exist_ok=True)
            for name, path in PAGES.items():
                page.goto(path)
                target = OUT / f"dashboard-{name}.png"
                page.screenshot(path=str(target), full_page=True)
                print(f"wrote {target.relative_to(ROOT)}")
            browser.close()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
