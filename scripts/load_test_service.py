"""Load test of the compile service on loopback: concurrent clients mixing cache hits and misses.

    .venv/bin/python scripts/load_test_service.py [--clients 50] [--seconds 60] [--miss-rate 0.1]
                                                  [--workers 2] [--url http://127.0.0.1:PORT]

Without `--url` it starts `python -m server` on a free loopback port with a fresh cache and stops
it at the end. Each client loops until the time is up (and stops by itself: bounded in time, and
in count by `--max-requests`): with probability `--miss-rate` it sends a source nobody sent
before (a cache miss), else one of a few warmed sources (a hit). Every answer is checked: the
key must be the one computed here for that request (polyflow/storage/cache.py), so a lost or
mixed-up response counts as an error. Prints throughput and p50/p99 latency for hits and misses.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyflow.options import Options  # noqa: E402
from polyflow.storage.cache import cache_key  # noqa: E402

KERNEL = "void k{n}(int n, double a[256]) {{ for (int i = 0; i < n; i++) a[i] = {n} * a[i]; }}\n"


def expected_key(source: str, versions: dict[str, str]) -> str:
    options = Options().model_dump(mode="json")
    return cache_key(
        source=source,
        language="c",
        entry=None,
        target="cpu",
        options={**options, "sizes": None, "emit": []},
        versions=versions,
    )


def post(conn: http.client.HTTPConnection, source: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"language": "c", "source": source})
    conn.request("POST", "/v1/compile", body, {"content-type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--miss-rate", type=float, default=0.1)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--url", help="a running service (else one is started on loopback)")
    args = parser.parse_args(argv)

    server = None
    if args.url:
        url = urlparse(args.url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            host, port = "127.0.0.1", int(sock.getsockname()[1])
        cache_dir = tempfile.mkdtemp(prefix="polyflow-load-")
        server = subprocess.Popen(
            [sys.executable, "-m", "server", "--host", host, "--port", str(port),
             "--workers", str(args.workers), "--cache-dir", cache_dir, "--max-queue", "256"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection(host, port, timeout=5)
                conn.request("GET", "/v1/version")
                versions = json.loads(conn.getresponse().read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        warm = [KERNEL.format(n=n) for n in range(8)]
        for source in warm:  # compiled once before the clock starts: these are the hits
            status, body = post(conn, source)
            assert status == 200, body
        results: list[tuple[str, float, bool]] = []  # (kind, seconds, correct)
        lock = threading.Lock()
        counter = iter(range(1_000_000, 10_000_000))
        stop_at = time.monotonic() + args.seconds

        def client(seed: int) -> None:
            rng = random.Random(seed)
            conn = http.client.HTTPConnection(host, port, timeout=600)
            while time.monotonic() < stop_at:
                with lock:
                    if len(results) >= args.max_requests:
                        return
                    miss = rng.random() < args.miss_rate
                    source = KERNEL.format(n=next(counter)) if miss else rng.choice(warm)
                start = time.perf_counter()
                try:
                    status, body = post(conn, source)
                    correct = status == 200 and body["key"] == expected_key(source, versions)
                    correct = correct and body["cached"] == (not miss)
                except (OSError, http.client.HTTPException, ValueError):
                    conn = http.client.HTTPConnection(host, port, timeout=600)
                    correct = False
                with lock:
                    results.append(
                        ("miss" if miss else "hit", time.perf_counter() - start, correct)
                    )

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - began
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)

    wrong = sum(1 for _, _, ok in results if not ok)
    print(f"{len(results)} requests from {args.clients} clients in {elapsed:.1f} s: "
          f"{len(results) / elapsed:.1f} requests/s, {wrong} wrong or failed")  # fmt: skip
    for kind in ("hit", "miss"):
        times = sorted(t for k, t, _ in results if k == kind)
        if times:
            p50 = statistics.median(times)
            p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
            print(f"  {kind:4s}: {len(times):6d} requests, p50 {p50 * 1e3:8.1f} ms, "
                  f"p99 {p99 * 1e3:8.1f} ms")  # fmt: skip
    return 1 if wrong else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
