"""The README's picture of the web explorer (docs/explorer.png): starts `polyflow serve` on a
free loopback port with a scratch cache, opens the page in headless Chromium (Debian's
/usr/bin/chromium), compiles the C matmul example, shows its affine-opt stage and highlights the
source line of the innermost multiply-add, and saves a 1400x900 screenshot.

    .venv/bin/python scripts/explorer_screenshot.py [--output docs/explorer.png]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_service(scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`polyflow serve` on loopback with its own cache (`--allow-run`: the Run button shows as
it does for its users; this script runs nothing); returned once /v1/healthz answers."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "polyflow", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1", "--cache-dir", str(scratch / "cache"),
            "--tuning-db", str(scratch / "tuning.db"), "--allow-run",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # one JSON line per request
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            urllib.request.urlopen(url + "/v1/healthz", timeout=5).close()
            return process, url
        except (urllib.error.URLError, ConnectionError):
            pass
        try:  # not listening yet: wait for the process to end, at most 0.1 s per try
            code = process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise SystemExit(f"polyflow serve exited with {code}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "explorer.png")
    args = parser.parse_args(argv)

    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory(prefix="explorer-shot-") as scratch:
        process, url = start_service(Path(scratch))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(url + "/")
                expect(page.locator("body")).to_have_attribute("data-ready", "true")
                page.select_option("#examples", "c-matmul")
                expect(page.locator("#source")).to_have_value(
                    (ROOT / "server" / "static" / "example-matmul.c").read_text()
                )
                page.click("#compile")
                expect(page.locator("#status")).to_contain_text("done in", timeout=120_000)
                page.click('#stage-tabs button[data-stage="affine-opt"]')
                fma = page.locator("#ir .ir-line[data-src-line]", has_text="arith.mulf").first
                fma.scroll_into_view_if_needed()
                fma.click()
                expect(page.locator(".src-line.highlight")).to_have_count(1)
                page.mouse.move(0, 0)
                args.output.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.output))
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
