"""The compile cache: content-addressed results in SQLite, shared by processes and restarts.

A key is the SHA-256 of everything that decides a compile's output (`cache_key`): the source
with its line endings and trailing blanks normalized, the language, the entry, the target, the
options (canonical JSON), and the versions of polyflow and MLIR. A value is an opaque blob (the
service stores its JSON response). The database runs in WAL mode, so readers never wait for the
writer, and several worker processes or a restarted service share it safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_dir() -> Path:
    """`$POLYFLOW_CACHE_DIR`, else `$XDG_CACHE_HOME/polyflow`, else `~/.cache/polyflow`."""
    explicit = os.environ.get("POLYFLOW_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polyflow"


def normalize_source(source: str) -> str:
    """The source with `\\r\\n` line ends, trailing blanks and trailing empty lines removed: edits
    that cannot change a compile do not change its key."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n") + "\n"


def cache_key(
    *,
    source: str,
    language: str,
    entry: str | None,
    target: str,
    options: Mapping[str, Any],
    versions: Mapping[str, str],
) -> str:
    """The hex SHA-256 naming one compile's result (see the module docstring)."""
    described = {
        "source": normalize_source(source),
        "language": language,
        "entry": entry,
        "target": target,
        "options": dict(options),
        "versions": dict(versions),
    }
    text = json.dumps(described, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(text.encode()).hexdigest()


class CompileCache:
    """A key → blob store in one SQLite file; each call opens its own connection, so an
    instance may be shared by threads and used from forked processes."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "compile-cache.sqlite3"
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        # autocommit off: the `with` block commits; a busy writer is waited for, not failed on
        return sqlite3.connect(self.path, timeout=30.0)

    def get(self, key: str) -> bytes | None:
        """The blob stored under `key`, or None."""
        db = self._connect()
        try:
            row = db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        return None if row is None else bytes(row[0])

    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key` (the first writer of a key wins; values of one key are the
        same by construction)."""
        db = self._connect()
        try:
            with db:
                db.execute(
                    "INSERT OR IGNORE INTO results (key, value, created) VALUES (?, ?, ?)",
                    (key, value, time.time()),
                )
        finally:
            db.close()

    def __len__(self) -> int:
        db = self._connect()
        try:
            (count,) = db.execute("SELECT COUNT(*) FROM results").fetchone()
        finally:
            db.close()
        return int(count)
