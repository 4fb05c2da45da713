"""The content-addressed compile cache (polyflow/tune/cache.py)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from polyflow.tune.cache import CompileCache, cache_key, normalize_source

BASE = {
    "source": "void f(void) {}\n",
    "language": "c",
    "entry": None,
    "target": "cpu",
    "options": {"opt_level": 3},
    "versions": {"polyflow": "0.1.0", "mlir": "22"},
}


def test_keys_ignore_line_ends_and_trailing_blanks_only() -> None:
    key = cache_key(**BASE)
    assert cache_key(**{**BASE, "source": "void f(void) {}  \r\n\r\n"}) == key
    assert normalize_source("a \r\nb\n\n") == "a\nb\n"
    for change in (
        {"source": "void g(void) {}\n"},
        {"language": "tc"},
        {"entry": "f"},
        {"target": "cuda"},
        {"options": {"opt_level": 2}},
        {"versions": {"polyflow": "0.2.0", "mlir": "22"}},
    ):
        assert cache_key(**{**BASE, **change}) != key, change


def test_values_survive_a_new_instance_and_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    CompileCache(tmp_path).put("k", b"value")
    again = CompileCache(tmp_path)
    assert again.get("k") == b"value" and again.get("other") is None and len(again) == 1
    mode = sqlite3.connect(again.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def _write_many(directory: str, start: int) -> None:
    cache = CompileCache(directory)
    for n in range(start, start + 50):
        cache.put(f"key{n}", str(n).encode())


def test_several_processes_write_at_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(tmp_path), 50 * w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    cache = CompileCache(tmp_path)
    assert len(cache) == 200 and cache.get("key137") == b"137"
