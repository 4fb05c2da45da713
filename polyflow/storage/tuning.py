"""The tuning database: what the autotuner found best for a kernel, and every candidate it tried.

A tuning is keyed by what decides which options are fastest (`TuningKey`): the kernel (its
normalized source, hashed; the language; the entry: the C functions compiled or the TC
definition; the C defines or the TC argument shapes and dtypes), what it is compiled for (the
target, whether floats may be reassociated), the machine (CPU model, cores; for CUDA the GPU)
and the compiler's releases (polyflow, MLIR, isl). The value is the tuned choices (a dict of
`Options` fields that override the build's own), with the measured time of the default and of
the best, and, in a second table, every candidate tried with its time or why it failed.

The database is SQLite next to the compile cache by default (`default_tuning_url()`); a fleet of
service replicas shares one on PostgreSQL (`postgresql://...`, the same tables). Builds find it
through `POLYFLOW_TUNING_DB` (a URL or a path) and use a tuned result when one exists for their
key (`tuned_choices`); `export_json`/`import_json` move tunings between databases.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from polyflow.storage.cache import default_cache_dir, normalize_source, use_wal
from polyflow.target import host_cores
from polyflow.version import __version__

# The Options fields a tuning may set: the choices of the polyhedral stage and of the GPU
# mapping. Everything else (the language's semantics, the target, debugging) stays the build's.
TUNABLE_FIELDS = frozenset(
    {
        "schedule",
        "schedule_preset",
        "fusion",
        "tile",
        "tile_sizes",
        "tile_second_level",
        "wavefront",
        "wavefront_block",
        "point_distribution",
        "interleave",
        "index_split",
        "split",
        "parallel",
        "parallel_reductions",
        "micro_kernels",
        "micro_kernel_rows",
        "micro_kernel_vectors",
        "micro_kernel_transposed",
        "unroll",
        "contraction_tile_rows",
        "contraction_tile_columns",
        "contraction_tile_depth_bytes",
        "threads",
        "min_parallel_trip",
        "block",
        "grid",
        "shared_memory",
        "gpu_register_tile",
    }
)

SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS tunings (
        key TEXT PRIMARY KEY,
        scope TEXT NOT NULL,
        entry TEXT NOT NULL,
        description TEXT NOT NULL,
        choices TEXT NOT NULL,
        default_seconds DOUBLE PRECISION,
        best_seconds DOUBLE PRECISION,
        search TEXT NOT NULL,
        candidates INTEGER NOT NULL,
        tuning_seconds DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS tunings_scope ON tunings (scope)",
    """
    CREATE TABLE IF NOT EXISTS candidates (
        key TEXT NOT NULL,
        run TEXT NOT NULL,
        position INTEGER NOT NULL,
        choices TEXT NOT NULL,
        status TEXT NOT NULL,
        seconds DOUBLE PRECISION,
        compile_seconds DOUBLE PRECISION,
        message TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS candidates_key ON candidates (key)",
)

# PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against itself: two sessions creating the
# same table at once fail one with a unique violation (pg_type). Processes that open a fresh
# database together (a fleet's replicas, parallel builds) take this advisory lock first.
_SCHEMA_LOCK = 0x706F6C79666C6F77  # "polyflow"


def _release(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def machine_identity(target: str = "cpu") -> dict[str, str]:
    """What the key holds of the machine: the CPU model and the cores this process may use
    (tuned tile sizes and thread counts are the machine's), and for 'cuda' the GPU's name."""
    model = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    identity = {"cpu": model, "cores": str(host_cores())}
    if target == "cuda":
        identity["gpu"] = os.environ.get("POLYFLOW_TUNING_GPU") or _gpu_name()
    return identity


def _gpu_name() -> str:
    try:
        import cupy  # type: ignore[import-not-found]

        return str(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    except Exception:  # no CuPy, no driver, no device: GPU tunings of this machine share a key
        return "none"


@functools.cache
def compiler_releases() -> dict[str, str]:
    """polyflow's, MLIR's and isl's releases (not polyflow's code hash: tuned choices are
    options, valid for any build of a release, and a fix must not throw the tunings away)."""
    return {
        "polyflow": __version__,
        "mlir": _release("xtc-mlir-python-bindings"),
        "isl": _release("islpy"),
    }


@dataclass(frozen=True)
class TuningKey:
    """What a tuning is for (see the module docstring); `digest` names it in the database and
    `scope` names every tuning of the same kernel and inputs whatever its entry."""

    language: str  # "c" or "tc"
    source_hash: str
    entry: str  # C: the functions compiled, comma-separated ("" = every function); TC: its name
    inputs: tuple[str, ...]  # C: the defines, sorted; TC: "shape:dtype" per argument
    target: str
    reassociation: bool
    machine: tuple[tuple[str, str], ...]
    releases: tuple[tuple[str, str], ...]

    def describe(self) -> dict[str, Any]:
        described = asdict(self)
        described["machine"] = dict(self.machine)
        described["releases"] = dict(self.releases)
        described["inputs"] = list(self.inputs)
        return described

    @property
    def scope(self) -> str:
        described = self.describe()
        del described["entry"]
        return _digest(described)

    @property
    def digest(self) -> str:
        return _digest(self.describe())


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def source_hash(source: str) -> str:
    """The hash of `source` after `normalize_source` (line ends, trailing blanks)."""
    return hashlib.sha256(normalize_source(source).encode()).hexdigest()


def c_tuning_key(
    source: str,
    *,
    functions: Sequence[str] | None,
    defines: Iterable[str],
    target: str = "cpu",
    reassociation: bool = False,
) -> TuningKey:
    """The key of a C file's tuning: its text, the functions compiled through MLIR (None:
    every one that can be) and its preprocessor definitions."""
    return TuningKey(
        language="c",
        source_hash=source_hash(source),
        entry=",".join(sorted(functions)) if functions else "",
        inputs=tuple(sorted(defines)),
        target=target,
        reassociation=reassociation,
        machine=tuple(sorted(machine_identity(target).items())),
        releases=tuple(sorted(compiler_releases().items())),
    )


def c_tuning_key_of(
    source: str, options: Any, *, functions: Sequence[str] | None = None
) -> TuningKey:
    """`c_tuning_key` of C `source` built with `options` (an `Options`): its functions (or
    `functions`), defines, target and reassociation."""
    return c_tuning_key(
        source,
        functions=functions if functions is not None else options.functions,
        defines=options.defines,
        target=options.target,
        reassociation=options.reassociation,
    )


def tc_tuning_key(
    source: str,
    entry: str,
    shapes: Sequence[tuple[Sequence[int], str]],
    *,
    target: str = "cpu",
    reassociation: bool = False,
) -> TuningKey:
    """The key of a TC definition's tuning for arguments of these shapes and dtypes (NumPy
    dtype names)."""
    inputs = tuple(f"{'x'.join(str(n) for n in shape) or 'scalar'}:{dtype}" for shape, dtype in shapes)
    return TuningKey(
        language="tc",
        source_hash=source_hash(source),
        entry=entry,
        inputs=inputs,
        target=target,
        reassociation=reassociation,
        machine=tuple(sorted(machine_identity(target).items())),
        releases=tuple(sorted(compiler_releases().items())),
    )


@dataclass
class Tuning:
    """One tuning's result: the choices (Options fields) of the best candidate (empty: the
    defaults were best), the default's and the best's measured seconds, and how it was found."""

    key: str
    scope: str
    entry: str
    description: dict[str, Any]
    choices: dict[str, Any]
    default_seconds: float | None
    best_seconds: float | None
    search: str
    candidates: int
    tuning_seconds: float
    updated: float = field(default_factory=time.time)

    @property
    def speedup(self) -> float | None:
        if not self.default_seconds or not self.best_seconds:
            return None
        return self.default_seconds / self.best_seconds


@dataclass
class CandidateRecord:
    """One candidate a tuning run tried: its choices, and its time or why it has none
    (`status`: ok, wrong (its output differed from the default build's), pruned, failed,
    timeout)."""

    choices: dict[str, Any]
    status: str
    seconds: float | None = None
    compile_seconds: float | None = None
    message: str = ""
    created: float = field(default_factory=time.time)


def default_tuning_url() -> str:
    """`$POLYFLOW_TUNING_DB` (a URL, `postgresql://...` or `sqlite:///path`, or a path), else
    `tuning.sqlite3` in the compile cache's directory."""
    explicit = os.environ.get("POLYFLOW_TUNING_DB")
    if explicit:
        return explicit
    return str(default_cache_dir() / "tuning.sqlite3")


class TuningDB:
    """The tunings and their candidates in SQLite (a path or `sqlite:///path`) or PostgreSQL
    (`postgresql://...`, through psycopg); each call opens its own connection, so an instance
    may be used from threads and forked processes."""

    def __init__(self, url: str | Path | None = None) -> None:
        url = str(url) if url is not None else default_tuning_url()
        self.url = url
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        if not self.postgres:
            path = Path(url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.path: Path | None = path
        else:
            self.path = None
        with self._connection() as db:
            if self.postgres:
                db.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            else:
                use_wal(db)
            for statement in SCHEMA:
                db.execute(statement)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection whose block commits on success and rolls back on an exception."""
        if self.postgres:
            try:
                import psycopg  # type: ignore[import-not-found]
            except ImportError as exc:  # pragma: no cover - the fleet extra is missing
                raise RuntimeError(
                    "a PostgreSQL tuning database needs psycopg: pip install 'polyflow[fleet]'"
                ) from exc
            with psycopg.connect(self.url, connect_timeout=10) as db:
                yield _PostgresAdapter(db)
            return
        assert self.path is not None
        connection = sqlite3.connect(self.path, timeout=30.0)
        try:
            with connection:
                yield connection
        finally:
            connection.close()

    # ----- tunings

    def put(self, tuning: Tuning) -> None:
        """Store `tuning`, replacing an earlier one of the same key (the latest run wins)."""
        row = (
            tuning.key,
            tuning.scope,
            tuning.entry,
            json.dumps(tuning.description, sort_keys=True),
            json.dumps(tuning.choices, sort_keys=True),
            tuning.default_seconds,
            tuning.best_seconds,
            tuning.search,
            tuning.candidates,
            tuning.tuning_seconds,
            tuning.updated,
        )
        with self._connection() as db:
            db.execute(
                "INSERT INTO tunings (key, scope, entry, description, choices, default_seconds, "
                "best_seconds, search, candidates, tuning_seconds, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, entry = excluded.entry, "
                "description = excluded.description, choices = excluded.choices, "
                "default_seconds = excluded.default_seconds, best_seconds = excluded.best_seconds, "
                "search = excluded.search, candidates = excluded.candidates, "
                "tuning_seconds = excluded.tuning_seconds, updated = excluded.updated",
                row,
            )

    def get(self, key: TuningKey | str) -> Tuning | None:
        """The tuning stored under `key` (a key or its digest), or None."""
        digest = key.digest if isinstance(key, TuningKey) else key
        with self._connection() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM tunings WHERE key = ?", (digest,)).fetchall()
        return _tuning(rows[0]) if rows else None

    def in_scope(self, key: TuningKey) -> list[Tuning]:
        """Every tuning of `key`'s kernel and inputs, whatever entry it was tuned for."""
        with self._connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM tunings WHERE scope = ? ORDER BY updated DESC",
                (key.scope,),
            ).fetchall()
        return [_tuning(row) for row in rows]

    def all(self) -> list[Tuning]:
        with self._connection() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM tunings ORDER BY updated").fetchall()
        return [_tuning(row) for row in rows]

    def delete(self, key: TuningKey | str) -> None:
        digest = key.digest if isinstance(key, TuningKey) else key
        with self._connection() as db:
            db.execute("DELETE FROM tunings WHERE key = ?", (digest,))
            db.execute("DELETE FROM candidates WHERE key = ?", (digest,))

    # ----- candidates

    def add_candidates(self, key: TuningKey | str, run: str, records: Sequence[CandidateRecord]) -> None:
        """Record the candidates a run (`run`: its id) tried for `key`, in their order."""
        digest = key.digest if isinstance(key, TuningKey) else key
        rows = [
            (
                digest,
                run,
                position,
                json.dumps(r.choices, sort_keys=True),
                r.status,
                r.seconds,
                r.compile_seconds,
                r.message,
                r.created,
            )
            for position, r in enumerate(records)
        ]
        if not rows:
            return
        with self._connection() as db:
            db.executemany(
                "INSERT INTO candidates (key, run, position, choices, status, seconds, "
                "compile_seconds, message, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def candidates(self, key: TuningKey | str) -> list[CandidateRecord]:
        """The candidates recorded for `key`, oldest first (those of one instant in the order
        their run recorded them: PostgreSQL's sort keeps no order among ties)."""
        digest = key.digest if isinstance(key, TuningKey) else key
        with self._connection() as db:
            rows = db.execute(
                "SELECT choices, status, seconds, compile_seconds, message, created "
                "FROM candidates WHERE key = ? ORDER BY created, position",
                (digest,),
            ).fetchall()
        return [
            CandidateRecord(json.loads(c), s, sec, comp, m, created)
            for c, s, sec, comp, m, created in rows
        ]

    # ----- moving tunings between databases

    def export_json(self) -> dict[str, Any]:
        """Every tuning and its candidates, as JSON-ready data (`import_json` reads it)."""
        tunings = []
        for tuning in self.all():
            described = asdict(tuning)
            described["tried"] = [asdict(c) for c in self.candidates(tuning.key)]
            tunings.append(described)
        return {"format": "polyflow-tunings", "version": 1, "tunings": tunings}

    def import_json(self, data: Mapping[str, Any]) -> int:
        """Store the tunings of an `export_json` document (replacing those of the same keys);
        how many."""
        if data.get("format") != "polyflow-tunings":
            raise ValueError("not a polyflow tunings export (its 'format' is not 'polyflow-tunings')")
        count = 0
        for item in data.get("tunings", []):
            item = dict(item)
            tried = item.pop("tried", [])
            tuning = Tuning(**item)
            self.put(tuning)
            with self._connection() as db:
                db.execute("DELETE FROM candidates WHERE key = ?", (tuning.key,))
            self.add_candidates(tuning.key, "imported", [CandidateRecord(**c) for c in tried])
            count += 1
        return count


_COLUMNS = (
    "key, scope, entry, description, choices, default_seconds, best_seconds, search, "
    "candidates, tuning_seconds, updated"
)


def _tuning(row: Sequence[Any]) -> Tuning:
    key, scope, entry, description, choices, default, best, search, count, seconds, updated = row
    return Tuning(
        key, scope, entry, json.loads(description), json.loads(choices), default, best, search,
        int(count), float(seconds), float(updated),
    )


class _PostgresAdapter:
    """psycopg's connection with sqlite3's `?` placeholders (the SQL above is written once)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._connection.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)


def tuned_choices(key: TuningKey, *, url: str | None = None) -> Tuning | None:
    """The tuning a build of `key` uses: the one of its key; else, for a build of every
    function of a C file ("" entry), the only tuning of the same file and inputs. None where
    there is none, or the database cannot be read (a build never fails for it)."""
    url = url or default_tuning_url()
    if not url.startswith(("postgresql://", "postgres://")):
        if not Path(url.removeprefix("sqlite:///")).exists():
            return None  # nothing was ever tuned here: do not create the database for a build
    try:
        db = TuningDB(url)
        found = db.get(key)
        if found is None and key.language == "c" and key.entry == "":
            scoped = db.in_scope(key)
            if len({json.dumps(t.choices, sort_keys=True) for t in scoped}) == 1:
                found = scoped[0]
        return found
    except Exception:  # sqlite3/psycopg errors, a bad URL, a missing driver: build untuned
        return None


OptionsT = TypeVar("OptionsT")


def apply_choices(options: OptionsT, choices: Mapping[str, Any]) -> OptionsT:
    """`options` with the tuned `choices` (only `TUNABLE_FIELDS`; lists become tuples)."""
    update = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in choices.items()
        if name in TUNABLE_FIELDS
    }
    if not update:
        return options
    return type(options)(**{**options.model_dump(exclude_unset=True), **update})  # type: ignore[attr-defined]


def with_tuning(options: OptionsT, key: Callable[[], TuningKey]) -> tuple[OptionsT, Tuning | None]:
    """`options` with the tuned choices of the tuning of `key()`, where `options.tuned` asks for
    them, the build runs the polyhedral stage (the choices are its) and the database holds one;
    and that tuning (None: the options as given). The key is made only when it is looked up:
    most builds (-O2, `--no-tuned`, `polyflow cc`) hash nothing."""
    if not options.tuned or options.opt_level < 3:  # type: ignore[attr-defined]
        return options, None
    found = tuned_choices(key())
    if found is None:
        return options, None
    try:
        return apply_choices(options, found.choices), found
    except ValueError:  # written by another release's options model: build untuned
        return options, None


def tuning_note(tuning: Tuning) -> str:
    """What a build's report says of the tuned options it used."""
    shown = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(tuning.choices.items())) or "the defaults"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(tuning.updated))
    speed = f", {tuning.speedup:.2f}x the default" if tuning.speedup else ""
    return (
        f"using tuned options ({shown}) found by polyflow tune on {when} "
        f"({tuning.search} search, {tuning.candidates} candidates{speed}); --no-tuned ignores them"
    )


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)
