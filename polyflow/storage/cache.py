"""The compile cache: content-addressed results in SQLite, shared by processes and restarts.

A key is the SHA-256 of everything that decides a compile's output (`cache_key`): the source
with its line endings and trailing blanks normalized, the language, the entry, the target, the
options (canonical JSON), and the versions of polyflow (its release and a hash of its code, so an
edited compiler never reads its old results), MLIR, isl and, for `-march=native`, the host CPU
(`compiler_versions`). A value is an opaque blob: the service stores its JSON response,
`polyflow build` its object file, the Python API the lowered MLIR. The database runs in WAL mode,
so readers never wait for the writer, and several worker processes or a restarted service share
it safely. Past `max_bytes`, the oldest results go first.

`polyflow build`, `polyflow.compile_c`, `polyflow.tc` and `polyflow serve` share the cache in
`default_cache_dir()`; `POLYFLOW_CACHE=off` (or `--no-cache`) turns it off for the first three.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from polyflow.target import target_of
from polyflow.version import __version__

DEFAULT_MAX_BYTES = 2 << 30

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


def caching_enabled() -> bool:
    """False when `POLYFLOW_CACHE` is `off` (or 0, no, false)."""
    return os.environ.get("POLYFLOW_CACHE", "on").strip().lower() not in ("off", "0", "no", "false")


def default_cache() -> CompileCache | None:
    """The shared cache in `default_cache_dir()`, or None when caching is off or the directory
    cannot be made (a read-only home: compile without a cache rather than fail)."""
    if not caching_enabled():
        return None
    try:
        return CompileCache()
    except (OSError, sqlite3.Error):
        return None


@functools.cache
def code_fingerprint(*packages: str) -> str:
    """A hash of the Python sources of `packages` (default: polyflow): a result compiled by other
    code never matches."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]
    for package in packages or ("polyflow",):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def compiler_versions(*, march: str = "", mtune: str = "") -> dict[str, str]:
    """What the key holds of the compiler and the machine compiled for: polyflow's release and
    code hash, MLIR's and isl's versions, and the target's facts (`polyflow.target`: the
    register width and caches, and the host CPU for 'native')."""
    return {**dict(_release_versions()), **target_of(march, mtune).fingerprint()}


@functools.cache
def _release_versions() -> tuple[tuple[str, str], ...]:
    def version_of(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "unknown"

    return (
        ("polyflow", __version__),
        ("polyflow_code", code_fingerprint()),
        ("mlir", version_of("xtc-mlir-python-bindings")),
        ("isl", version_of("islpy")),
    )


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


def module_key(module: Any, options: Any, product: str) -> str:
    """The key of what the pipeline makes (`product`) of an MLIR module: its bytecode, which
    holds the source locations (so diagnostics name the right lines), the options, and the
    compiler."""
    # bytecode, not text: a file of 2,000 functions writes it in 0.13 s, its text in 1.0 s
    data = io.BytesIO()
    module.operation.write_bytecode(data)
    settings = options.model_dump(mode="json")
    if options.debug_info:  # line tables find relative file names from the compile directory
        settings["compile_directory"] = os.getcwd()
    return cache_key(
        source=hashlib.sha256(data.getvalue()).hexdigest(),
        language="mlir-bytecode",
        entry=None,
        target=product,
        options=settings,
        versions=compiler_versions(march=options.march, mtune=options.mtune),
    )


def use_wal(db: sqlite3.Connection, patience: float = 30.0) -> None:
    """Put the SQLite database in WAL mode (readers and a writer at once), waiting out others.

    Switching fails at once with "database is locked" while another connection uses the file
    (SQLite calls no busy handler for it), as when processes open a fresh database together;
    the mode is the file's, so once one of them has switched the others find it set.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class CompileCache:
    """A key → blob store in one SQLite file; each call opens its own connection, so an
    instance may be shared by threads and used from forked processes."""

    def __init__(
        self, directory: Path | str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "compile-cache.sqlite3"
        with self._connect() as db:
            use_wal(db)
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
        same by construction); then, past `max_bytes`, drop the oldest results down to 3/4."""
        db = self._connect()
        try:
            with db:
                db.execute(
                    "INSERT OR IGNORE INTO results (key, value, created) VALUES (?, ?, ?)",
                    (key, value, time.time()),
                )
                (total,) = db.execute(
                    "SELECT COALESCE(SUM(length(value)), 0) FROM results"
                ).fetchone()
                if total > self.max_bytes:
                    self._evict(db, total - self.max_bytes * 3 // 4)
        finally:
            db.close()

    @staticmethod
    def _evict(db: sqlite3.Connection, excess: int) -> None:
        """Delete the oldest rows whose sizes add up to at least `excess` bytes."""
        doomed: list[str] = []
        for key, size in db.execute("SELECT key, length(value) FROM results ORDER BY created, key"):
            if excess <= 0:
                break
            doomed.append(key)
            excess -= size
        db.executemany("DELETE FROM results WHERE key = ?", [(key,) for key in doomed])

    def get_json(self, key: str) -> Any:
        """The JSON value stored under `key`, or None: also for a value that is not JSON or a
        database that cannot be read (a compile then runs, rather than fail)."""
        try:
            stored = self.get(key)
            return None if stored is None else json.loads(stored)
        except (sqlite3.Error, OSError, ValueError):
            return None

    def put_json(self, key: str, value: Any) -> None:
        """Store `value` as JSON; a database that cannot be written (full disk, locked past the
        timeout) leaves the result uncached rather than failing the compile."""
        try:
            self.put(key, json.dumps(value, separators=(",", ":")).encode())
        except (sqlite3.Error, OSError):
            pass

    def __len__(self) -> int:
        db = self._connect()
        try:
            (count,) = db.execute("SELECT COUNT(*) FROM results").fetchone()
        finally:
            db.close()
        return int(count)
