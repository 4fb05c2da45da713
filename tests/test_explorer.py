"""The web explorer (server/static/) in a real headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright) against real `polyflow serve` processes on loopback: the page loads,
compiles the C and TC examples (badges beside the loops, the IR of each stage, an IR line's
source line highlighted), marks a C error at its line and column, restores a shared link, asks
for an API key, and runs a kernel against its baseline.

Each test saves a screenshot in tests/artifacts/explorer/ (git-ignored). Every wait is a
condition (Playwright's auto-waiting `expect`), never a fixed sleep."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from difftest import check_program_against_gcc

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "server" / "static"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / "artifacts" / "explorer"
API_KEY = "explorer-test-key-3f9a"
TIMEOUT_MS = 60_000  # compiles at -O3 take seconds, and the machine is shared

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium package",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

expect.set_options(timeout=TIMEOUT_MS)

# a program whose loops polyflow cannot fully raise (an indirect store, a while loop)
SCATTER_C = """#include <stdio.h>

void scatter(int n, double *a, const int *idx) {
  for (int i = 0; i < n; i++)
    a[idx[i]] = a[i] + 1.0;
  int k = 0;
  while (k < n) {
    a[k] = a[k] * 2.0;
    k += idx[k] % 3 + 1;
  }
}

int main(void) {
  double a[64];
  int idx[64];
  for (int i = 0; i < 64; i++) {
    a[i] = 0.5 * i;
    idx[i] = (i * 7) % 64;
  }
  scatter(64, a, idx);
  double sum = 0.0;
  for (int i = 0; i < 64; i++)
    sum += a[i] * (i + 1);
  printf("%.6f\\n", sum);
  return 0;
}
"""
BAD_C = SCATTER_C.replace("a[i] + 1.0;", "a[i] + b;")  # `b` is undeclared


@dataclass
class Service:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        """The JSON answer of one request (raises urllib's HTTPError on a status >= 400)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if key:
            request.add_header("authorization", f"Bearer {key}")
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(tmp: Path, *flags: str) -> Service:
    """`polyflow serve` on a free loopback port with its own cache and tuning database,
    returned once /v1/healthz answers (200, or 401 when it has keys)."""
    port = _free_port()
    log = tmp / "serve.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "polyflow", "serve",
                "--host", "127.0.0.1", "--port", str(port), "--workers", "2",
                "--cache-dir", str(tmp / "cache"), "--tuning-db", str(tmp / "tuning.db"),
                *flags,
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )  # fmt: skip
    service = Service(f"http://127.0.0.1:{port}", process, log)
    while True:
        try:
            urllib.request.urlopen(service.url + "/v1/healthz", timeout=5).close()
            return service
        except urllib.error.HTTPError as error:
            if error.code == 401:
                return service
            raise
        except (urllib.error.URLError, ConnectionError):
            pass
        # not listening yet: wait for the process to end (then fail), at most 0.1 s per try
        try:
            code = process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise RuntimeError(f"polyflow serve exited with {code}:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service that runs code (`--allow-run`), without API keys."""
    started = _start(tmp_path_factory.mktemp("explorer-serve"), "--allow-run")
    yield started
    started.process.terminate()
    started.process.wait(timeout=30)


@pytest.fixture(scope="module")
def keyed_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service with an API key file, which does not run code."""
    tmp = tmp_path_factory.mktemp("explorer-keyed")
    keys = tmp / "keys"
    keys.write_text(f"# the explorer test's key\n{API_KEY}\n")
    keys.chmod(0o600)
    started = _start(tmp, "--workers", "1", "--api-key-file", str(keys))
    yield started
    started.process.terminate()
    started.process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context's page (no stored API key), 1400x900; its screenshot is saved
    as tests/artifacts/explorer/<test>.png after the test, and uncaught page errors fail it."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    if opened.url != "about:blank":  # a skipped test opened nothing
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        opened.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
    context.close()
    assert not errors, f"the page raised: {errors}"


def _open(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def _compile(page: Page) -> dict[str, Any]:
    """Clicks Compile; returns the service's answer the page got, once the page shows it."""
    with page.expect_response(
        lambda r: r.url.endswith("/v1/compile") and r.request.method == "POST" and r.ok,
        timeout=TIMEOUT_MS,
    ) as answer:
        page.click("#compile")
    expect(page.locator("#status")).to_have_text(re.compile(r"^(cached: )?done in \d+ ms"))
    result: dict[str, Any] = answer.value.json()
    return result


def _example(page: Page, name: str, file: str) -> str:
    """Loads example `name` through the page's menu; returns the example file's text."""
    page.select_option("#examples", name)
    text = (STATIC / file).read_text()
    expect(page.locator("#source")).to_have_value(text)
    return text


def _line_of(text: str, fragment: str, start: int = 1) -> int:
    """The 1-based number of the first line at or after `start` that contains `fragment`."""
    for number, line in enumerate(text.splitlines(), 1):
        if number >= start and fragment in line:
            return number
    raise AssertionError(f"no line contains {fragment!r}")


def _gutter_badges(page: Page) -> dict[int, set[str]]:
    """The badges the gutter shows, by source line."""
    shown: dict[int, set[str]] = {}
    for line, kind in page.eval_on_selector_all(
        ".gutter .badge", "els => els.map(e => [Number(e.dataset.line), e.dataset.badge])"
    ):
        shown.setdefault(line, set()).add(kind)
    return shown


# ----------------------------------------------------------------------------- the tests


def test_examples_match_gcc_and_numpy(tmp_path: Path) -> None:
    """The page's examples are correct programs: the C ones print what gcc -O2's builds print
    (at -O3), the TC one computes NumPy's product."""
    import polyflow
    import polyflow.tc

    scatter = tmp_path / "scatter.c"
    scatter.write_text(SCATTER_C)
    for path in (STATIC / "example-matmul.c", STATIC / "example-stencil.c", scatter):
        check_program_against_gcc(path, tmp_path / path.stem, polyflow.Options(opt_level=3))
    matmul = polyflow.tc.define((STATIC / "example-matmul.tc").read_text(), "matmul")
    rng = np.random.default_rng(29)
    a = rng.standard_normal((40, 24), dtype=np.float32)
    b = rng.standard_normal((24, 33), dtype=np.float32)
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_page_loads(page: Page, service: Service) -> None:
    _open(page, service.url + "/")
    expect(page).to_have_title("polyflow explorer")
    expect(page.locator("#status")).to_contain_text("ready")
    matmul = (STATIC / "example-matmul.c").read_text()
    expect(page.locator("#source")).to_have_value(matmul)
    # one row per line in the editor, the gutter and the highlighted copy alike
    lines = len(matmul.split("\n"))
    expect(page.locator(".gutter .gutter-row")).to_have_count(lines)
    expect(page.locator(".src-line")).to_have_count(lines)
    expect(page.locator("#run")).to_be_enabled()  # the service was started with --allow-run
    for control in ("#language", "#entry", "#opt-level", "#tile-sizes", "#fusion", "#target"):
        expect(page.locator(control)).to_be_visible()
    expect(page.locator("#sizes")).to_be_disabled()  # C has no sizes
    # a file opened from disk replaces the source and sets the language by its extension
    tc = (STATIC / "example-matmul.tc").read_bytes()
    page.set_input_files("#upload", files=[{"name": "mm.tc", "mimeType": "text/plain", "buffer": tc}])
    expect(page.locator("#source")).to_have_value(tc.decode())
    expect(page.locator("#language")).to_have_value("tc")
    expect(page.locator("#sizes")).to_be_enabled()
    expect(page.locator(".src-line")).to_have_count(len(tc.decode().split("\n")))


def test_compile_c_example(page: Page, service: Service) -> None:
    """The matmul example: the gutter shows the service's badges beside the right lines, the
    stage tabs switch the IR, and an IR line's source line is highlighted when clicked."""
    _open(page, service.url + "/")
    source = _example(page, "c-matmul", "example-matmul.c")
    answer = _compile(page)

    # the gutter shows exactly the loops the service reported
    expected: dict[int, set[str]] = {}
    for loop in answer["explore"]["loops"]:
        kinds = set(loop["badges"]) | ({"why-not"} if loop["why_not"] else set())
        expected.setdefault(loop["line"], set()).update(kinds)
    assert _gutter_badges(page) == {line: k for line, k in expected.items() if k}

    # and what it reported is right for this program: every loop of matmul raised, its
    # loops parallel and tiled somewhere in the function
    first = _line_of(source, "for (int i = 0; i < n; i++)")
    last = _line_of(source, "c[i][j] += a[i][k] * b[k][j];")
    loops = [n for n in range(first, last) if "for (" in source.splitlines()[n - 1]]
    assert len(loops) == 5
    badges = _gutter_badges(page)
    for line in loops:
        expect(page.locator(f'.gutter .badge[data-line="{line}"][data-badge="raised"]')).to_have_count(1)
    in_matmul = set().union(*(badges.get(n, set()) for n in range(first, last + 1)))
    assert {"parallel", "tiled"} <= in_matmul, in_matmul
    tiled = page.locator('.gutter .badge[data-badge="tiled"]').first
    expect(tiled).to_have_attribute("title", re.compile(r"tiled"))

    # the stage tabs
    tabs = page.locator("#stage-tabs button")
    expect(tabs).to_have_count(4)
    page.click('#stage-tabs button[data-stage="affine"]')
    expect(page.locator('#stage-tabs button[data-stage="affine"]')).to_have_attribute("aria-selected", "true")
    expect(page.locator("#ir")).to_contain_text("affine.for")
    expect(page.locator("#ir .ir-line").first).to_be_visible()
    assert "loc(" not in page.locator("#ir").inner_text()  # shown without locations
    page.click('#stage-tabs button[data-stage="mlir"]')
    expect(page.locator("#ir")).not_to_contain_text("affine.for")
    expect(page.locator("#ir")).to_contain_text("scf.for")

    # an IR op beside its source line: the multiply of the product comes from the line of `*`
    page.click('#stage-tabs button[data-stage="affine"]')
    mulf = page.locator("#ir .ir-line[data-src-line]", has_text="arith.mulf").first
    expect(mulf).to_have_attribute("data-src-line", str(last))
    mulf.click()
    highlighted = page.locator(".src-line.highlight")
    expect(highlighted).to_have_count(1)
    expect(highlighted).to_have_attribute("data-line", str(last))
    expect(highlighted).to_have_text(source.splitlines()[last - 1])
    expect(highlighted).to_be_in_viewport()
    # another line moves the highlight
    zero = page.locator("#ir .ir-line[data-src-line]", has_text="arith.constant 0.0").first
    zero_line = int(zero.get_attribute("data-src-line") or 0)
    assert source.splitlines()[zero_line - 1].strip() == "c[i][j] = 0.0;"
    zero.click()
    expect(page.locator(".src-line.highlight")).to_have_attribute("data-line", str(zero_line))
    expect(page.locator(".src-line.highlight")).to_have_count(1)

    # the other way: the caret on a source line marks the IR lines that came from it
    line_height = float(page.eval_on_selector("#source", "e => parseFloat(getComputedStyle(e).lineHeight)"))
    top = float(page.eval_on_selector("#source", "e => parseFloat(getComputedStyle(e).paddingTop)"))
    page.locator("#source").evaluate("e => { e.scrollTop = 0; }")
    page.locator("#source").click(position={"x": 120, "y": top + (last - 0.5) * line_height})
    linked = page.locator("#ir .ir-line.linked")
    expect(linked.first).to_be_visible()
    assert set(linked.evaluate_all("els => els.map(e => e.dataset.srcLine)")) == {str(last)}

    # the schedule tree and the dependences of the rescheduled function
    page.click('#view-tabs button[data-view="schedule"]')
    expect(page.locator("#schedule-tree")).to_contain_text("matmul")
    expect(page.locator("#schedule-tree pre.tree")).to_contain_text("domain")
    page.click('#view-tabs button[data-view="dependences"]')
    expect(page.locator("#dependences table.deps tbody tr").first).to_be_visible()
    expect(page.locator("#dependences")).to_contain_text("flow")
    page.click('#view-tabs button[data-view="loops"]')
    expect(page.locator("#loops table.loops tbody tr")).to_have_count(len(answer["explore"]["loops"]))


def test_compile_tc_example(page: Page, service: Service) -> None:
    _open(page, service.url + "/")
    source = _example(page, "tc-matmul", "example-matmul.tc")
    expect(page.locator("#language")).to_have_value("tc")
    expect(page.locator("#sizes")).to_have_value("M=128,N=128,K=128")
    expect(page.locator("#sizes")).to_be_enabled()
    _compile(page)
    statement = _line_of(source, "C(m,n) +=!")
    # the statement's loops are raised and run in parallel
    raised = page.locator(f'.gutter .badge[data-line="{statement}"][data-badge="raised"]')
    expect(raised).to_have_count(1)
    expect(page.locator(f'.gutter .badge[data-line="{statement}"][data-badge="parallel"]')).to_have_count(1)
    page.click('#stage-tabs button[data-stage="affine-opt"]')
    op = page.locator(f'#ir .ir-line[data-src-line="{statement}"]').first
    expect(op).to_be_visible()
    op.click()
    expect(page.locator(".src-line.highlight")).to_have_attribute("data-line", str(statement))
    page.click('#view-tabs button[data-view="schedule"]')
    expect(page.locator("#schedule-tree")).to_contain_text("matmul")


def test_bad_c_gets_an_error_marker(page: Page, service: Service) -> None:
    _open(page, service.url + "/")
    page.fill("#source", BAD_C)
    page.fill("#entry", "")
    line = _line_of(BAD_C, "a[i] + b;")
    column = BAD_C.splitlines()[line - 1].index("b;") + 1
    page.click("#compile")
    marker = page.locator(".gutter .marker.error")
    expect(marker).to_have_count(1)
    expect(marker).to_have_attribute("data-line", str(line))
    expect(marker).to_have_attribute("data-column", str(column))
    expect(marker).to_have_attribute("title", re.compile(r"'b' undeclared"))
    expect(page.locator("#errors li")).to_have_text(re.compile(rf"{line}:{column}: 'b' undeclared"))
    expect(page.locator(f'.src-line[data-line="{line}"]')).to_have_class(re.compile(r"has-error"))
    # the marked character is the `b`
    expect(page.locator(f'.src-line[data-line="{line}"] .err-col')).to_have_text("b")
    expect(page.locator("#status")).to_have_class("error")
    expect(page.locator(".gutter .badge")).to_have_count(0)
    # clicking the message puts the caret on the error
    page.click("#errors li")
    assert page.evaluate("document.getElementById('source').selectionStart") == len(
        "\n".join(BAD_C.splitlines()[: line - 1]) + "\n"
    ) + column - 1

    # fixed, it compiles, the marker goes, and the loops say why they were not raised
    page.fill("#source", SCATTER_C)
    _compile(page)
    expect(page.locator(".gutter .marker.error")).to_have_count(0)
    expect(page.locator("#errors li")).to_have_count(0)
    indirect = _line_of(SCATTER_C, "for (int i = 0; i < n; i++)")
    expect(page.locator(f'.gutter .badge[data-line="{indirect}"][data-badge="raised"]')).to_have_count(1)
    why = page.locator(f'.gutter .badge[data-line="{indirect}"][data-badge="why-not"]')
    expect(why).to_have_text("why not?")
    expect(why).to_have_attribute("title", re.compile(r"store not raised: .*not affine"))
    loop = _line_of(SCATTER_C, "while (k < n)")
    expect(page.locator(f'.gutter .badge[data-line="{loop}"]')).to_have_count(1)
    why = page.locator(f'.gutter .badge[data-line="{loop}"][data-badge="why-not"]')
    expect(why).to_have_attribute("title", re.compile(r"not raised: while loop"))


def test_share_link_restores_source_options_and_result(
    page: Page, browser: Browser, service: Service
) -> None:
    _open(page, service.url + "/")
    source = _example(page, "c-stencil", "example-stencil.c")
    page.fill("#tile-sizes", "16,16")
    page.select_option("#fusion", "max")
    _compile(page)
    badges = _gutter_badges(page)
    assert badges, "the stencil got no badges"
    page.click("#share")
    link = page.locator("#share-link")
    expect(link).to_be_visible()
    expect(link).to_have_attribute("href", re.compile(r"/#key=[0-9a-f]{64}$"))
    href = link.get_attribute("href") or ""

    # a visitor opening the link sees the same page, compiled nowhere
    other = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        shared = other.new_page()
        compiles: list[str] = []
        shared.on("request", lambda r: compiles.append(r.url) if r.method == "POST" else None)
        _open(shared, href)
        expect(shared.locator("#status")).to_contain_text("shared result")
        expect(shared.locator("#source")).to_have_value(source)
        expect(shared.locator("#language")).to_have_value("c")
        expect(shared.locator("#entry")).to_have_value("jacobi")
        expect(shared.locator("#tile-sizes")).to_have_value("16,16")
        expect(shared.locator("#fusion")).to_have_value("max")
        expect(shared.locator("#opt-level")).to_have_value("3")
        expect(shared.locator("#stage-tabs button")).to_have_count(4)
        expect(shared.locator("#ir .ir-line").first).to_be_visible()
        assert _gutter_badges(shared) == badges
        # the query form of the link too
        key = href.rsplit("=", 1)[1]
        shared.goto(f"{service.url}/?key={key}")
        expect(shared.locator("body")).to_have_attribute("data-ready", "true")
        expect(shared.locator("#status")).to_contain_text(f"shared result {key[:12]}")
        expect(shared.locator("#source")).to_have_value(source)
        assert compiles == []
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shared.screenshot(path=str(ARTIFACTS / "test_share_link_opened.png"))
    finally:
        other.close()


def test_gradient_stage_and_its_share_link(page: Page, browser: Browser, service: Service) -> None:
    _open(page, service.url + "/")
    _example(page, "tc-matmul", "example-matmul.tc")
    page.fill("#grad", "matmul:A")
    answer = _compile(page)
    assert "grad" in answer["stages"] and "func.func" in answer["stages"]["grad"]
    tab = page.locator('#stage-tabs button[data-stage="grad"]')
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    expect(page.locator("#ir")).to_contain_text("func.func")
    page.select_option("#target", "cuda")  # the gradient compiles for the CPU: said, not sent
    page.click("#compile")
    expect(page.locator("#status")).to_contain_text("gradient")
    page.select_option("#target", "cpu")
    page.click("#share")
    link = page.locator("#share-link")
    expect(link).to_have_attribute("href", re.compile(r"/#key=[0-9a-f]{64}$"))
    other = browser.new_context()
    try:
        shared = other.new_page()
        _open(shared, link.get_attribute("href") or "")
        expect(shared.locator("#status")).to_contain_text("shared result")
        expect(shared.locator("#grad")).to_have_value("matmul:A")
        expect(shared.locator('#stage-tabs button[data-stage="grad"]')).to_be_visible()
    finally:
        other.close()
    page.screenshot(path=str(ARTIFACTS / "test_gradient_stage.png"))


def test_api_key(page: Page, keyed_service: Service) -> None:
    _open(page, keyed_service.url + "/")
    expect(page.locator("#status")).to_contain_text("API key")
    page.click("#compile")
    expect(page.locator("#status")).to_contain_text("needs an API key")
    expect(page.locator("#status")).to_have_class("error")
    expect(page.locator(".gutter .badge")).to_have_count(0)

    page.fill("#api-key", "not-the-key")
    page.locator("#api-key").dispatch_event("change")
    expect(page.locator("#status")).to_contain_text("refused")

    page.fill("#api-key", API_KEY)
    page.locator("#api-key").dispatch_event("change")
    expect(page.locator("#status")).to_contain_text("API key accepted")
    # this service does not run code: Run says so
    expect(page.locator("#run")).to_be_disabled()
    expect(page.locator("#run")).to_have_attribute("title", re.compile(r"--allow-run"))
    _compile(page)
    expect(page.locator(".gutter .badge").first).to_be_visible()
    # the key is kept in this browser
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#api-key")).to_have_value(API_KEY)
    expect(page.locator("#status")).to_contain_text("ready")


def _has_run(service: Service) -> bool:
    return "/v1/run" in service.call("GET", "/openapi.json")["paths"]


def test_run_against_the_baseline(page: Page, service: Service) -> None:
    if not _has_run(service):
        pytest.skip("this service has no POST /v1/run yet")
    _open(page, service.url + "/")
    _example(page, "c-matmul", "example-matmul.c")
    page.click("#run")
    result = page.locator("#run-result")
    expect(result.locator('[data-field="outputs_match"]')).to_have_text("yes ✓")
    expect(result.locator('[data-field="speedup"]')).to_have_text(re.compile(r"^\d+(\.\d+)?×$"))
    expect(result).to_contain_text("gcc")
    expect(page.locator("#status")).to_contain_text("outputs match")

    _example(page, "tc-matmul", "example-matmul.tc")
    page.click("#run")
    expect(result.locator('[data-field="outputs_match"]')).to_have_text("yes ✓")
    expect(result).to_contain_text("numpy")


def test_run_refuses_a_c_source_without_main(page: Page, service: Service) -> None:
    if not _has_run(service):
        pytest.skip("this service has no POST /v1/run yet")
    _open(page, service.url + "/")
    page.fill("#source", SCATTER_C[: SCATTER_C.index("int main")])
    page.fill("#entry", "scatter")
    page.click("#run")
    expect(page.locator("#status")).to_contain_text("main")
    expect(page.locator("#status")).to_have_class("error")
