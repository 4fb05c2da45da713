"""Every test session compiles into a compile cache of its own (polyflow/tune/cache.py), so no
result of an earlier run, or of the user's own builds, is read."""

from __future__ import annotations

import os
import tempfile


def pytest_configure() -> None:
    if "POLYFLOW_TEST_KEEP_CACHE_DIR" not in os.environ:
        os.environ["POLYFLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="polyflow-test-cache-")
