"""Tests compile for real: the shared compile cache (polyflow/storage/cache.py) is off, because many
tests change the compiler in process (monkeypatched passes, extra pipeline stages), which no cache
key can see. The tests of the cache turn it on, each with a directory of its own."""

from __future__ import annotations

import os
import tempfile


def pytest_configure() -> None:
    os.environ["POLYFLOW_CACHE"] = "off"
    # and should one be turned on without a directory: never the user's own cache
    os.environ["POLYFLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="polyflow-test-cache-")
