"""`polyflow serve` / `python -m server`: run the compile service with uvicorn.

Every flag also comes from an environment variable (`POLYFLOW_SERVE_HOST`, `_PORT`, `_WORKERS`,
`_CACHE_DIR`, `_MAX_SOURCE_BYTES`, `_TIMEOUT`, `_MEMORY_LIMIT`, `_MAX_QUEUE`, `_API_KEY_FILE`,
`_ALLOW_RUN`, `_TUNING_DB` (else `POLYFLOW_TUNING_DB`), `_MAX_TUNE_SECONDS`, `_TUNE_MEMORY_LIMIT`,
`_RUN_SECONDS`);
a flag wins over its variable. Logs are JSON lines, one per request, with its request id.

`--allow-run` lets the service run submitted code: POST /v1/tune builds and runs the candidates
of a tuning, POST /v1/run a program against gcc (the explorer's Run; sandboxed: see
server/tuning.py and server/run.py). Without it the service only compiles.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from polyflow.storage.tuning import default_tuning_url


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"POLYFLOW_SERVE_{name}", default)


def _env_flag(name: str) -> bool:
    return (_env(name, "") or "").strip().lower() in ("1", "yes", "true", "on")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyflow serve",
        description="the compile service (each flag's default may be set by the environment "
        "variable POLYFLOW_SERVE_<FLAG>, e.g. POLYFLOW_SERVE_PORT)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default=_env("HOST", "127.0.0.1"), help="address to listen on")
    parser.add_argument("--port", type=int, default=int(_env("PORT", "8000") or 8000),
                        help="port to listen on")  # fmt: skip
    parser.add_argument("--workers", type=int, default=int(_env("WORKERS", "2") or 2),
                        help="compile worker processes")  # fmt: skip
    parser.add_argument("--cache-dir", default=_env("CACHE_DIR", None),
                        help="where the SQLite compile cache lives (none: the user cache dir)")  # fmt: skip
    parser.add_argument("--max-source-bytes", type=int,
                        default=int(_env("MAX_SOURCE_BYTES", str(1 << 20)) or 0),
                        help="largest source a request may send (larger: 413)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=float(_env("TIMEOUT", "120") or 120),
                        help="seconds one compile may take")  # fmt: skip
    parser.add_argument("--memory-limit", type=int,
                        default=int(_env("MEMORY_LIMIT", "4096") or 4096), metavar="MIB",
                        help="memory one compile may use, in MiB (0: no limit)")  # fmt: skip
    parser.add_argument("--max-queue", type=int, default=int(_env("MAX_QUEUE", "64") or 64),
                        help="compiles that may wait for a worker before 503")  # fmt: skip
    parser.add_argument("--api-key-file", default=_env("API_KEY_FILE", None),
                        help="one API key per line (blank lines and # comments ignored); "
                        "requests must then send one")  # fmt: skip
    tuning = parser.add_argument_group("tuning (POST /v1/tune)")
    tuning.add_argument("--allow-run", action="store_true", default=_env_flag("ALLOW_RUN"),
                        help="allow tunings, which build and run the submitted code (each "
                        "candidate in a process with a clean environment, a scratch directory "
                        "and resource limits); without it /v1/tune answers 403")  # fmt: skip
    tuning.add_argument("--tuning-db", metavar="URL",
                        default=_env("TUNING_DB", None) or default_tuning_url(),
                        help="the tuning database: a path, sqlite:///path or postgresql://... "
                        "(tunings go there; compiles use what it holds)")  # fmt: skip
    tuning.add_argument("--max-tune-seconds", type=float,
                        default=float(_env("MAX_TUNE_SECONDS", "600") or 600),
                        help="the largest budget of a tuning, in seconds")  # fmt: skip
    tuning.add_argument("--tune-memory-limit", type=int,
                        default=int(_env("TUNE_MEMORY_LIMIT", "4096") or 4096), metavar="MIB",
                        help="memory a tuning candidate (its build and its run) may use, in "
                        "MiB (0: no limit)")  # fmt: skip
    tuning.add_argument("--run-seconds", type=float,
                        default=float(_env("RUN_SECONDS", "10") or 10),
                        help="seconds one run of POST /v1/run (the explorer's Run) may take")  # fmt: skip
    return parser


def read_api_keys(path: Path) -> frozenset[str]:
    """The keys of an API key file: one per line; blank lines and lines starting with `#` are
    not keys. Warns on stderr when others than the owner may read the file."""
    if path.stat().st_mode & 0o077:
        print(
            f"polyflow serve: warning: {path} may be read by other users than its owner "
            f"(chmod 600 {path})",
            file=sys.stderr,
        )
    keys = (line.strip() for line in path.read_text().splitlines())
    return frozenset(key for key in keys if key and not key.startswith("#"))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import uvicorn

    from .app import ServeConfig, create_app

    keys: frozenset[str] = frozenset()
    if args.api_key_file:
        try:
            keys = read_api_keys(Path(args.api_key_file))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"polyflow serve: cannot read {args.api_key_file}: {exc}", file=sys.stderr)
            return 2
        if not keys:
            print(f"polyflow serve: no key in {args.api_key_file}", file=sys.stderr)
            return 2
    config = ServeConfig(
        workers=args.workers,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        max_source_bytes=args.max_source_bytes,
        timeout=args.timeout,
        max_queue=args.max_queue,
        memory_bytes=(args.memory_limit << 20) or None,
        api_keys=keys,
        allow_run=args.allow_run,
        tuning_db=args.tuning_db,
        max_tune_seconds=args.max_tune_seconds,
        tune_memory_bytes=(args.tune_memory_limit << 20) or None,
        run_seconds=args.run_seconds,
    )
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
