"""Tests compile for real: the shared compile cache (polyflow/storage/cache.py) is off, because many
tests change the compiler in process (monkeypatched passes, extra pipeline stages), which no cache
key can see. The tests of the cache turn it on, each with a directory of its own."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# The session fixtures of a throwaway PostgreSQL server (tests/test_tuning_db.py); lazy: no test
# that does not ask for them starts one.
from postgres_server import postgres_server, postgres_url  # noqa: F401


def pytest_configure() -> None:
    os.environ["POLYFLOW_CACHE"] = "off"
    # and should one be turned on without a directory: never the user's own cache
    os.environ["POLYFLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="polyflow-test-cache-")


def pytest_unconfigure() -> None:
    shutil.rmtree(os.environ.get("POLYFLOW_CACHE_DIR", ""), ignore_errors=True)


@pytest.fixture
def compile_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiles run in this process, not in forked workers: for tests that watch calls to the
    stages, or change them in process (workers would count, or run, in theirs)."""
    from polyflow.drivers import compile as entry

    monkeypatch.setattr(entry, "worker_count", lambda: 1)
