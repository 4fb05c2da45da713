"""A throwaway PostgreSQL server for tests: `PostgresServer` starts a real one (initdb, pg_ctl) in a
temporary directory, listening only on a unix socket there, and the session fixture `postgres_url`
yields its URL (tests import it: `from postgres_server import postgres_url  # noqa: F401`).

As root (initdb and postgres refuse to run as root) the server runs as `nobody`; under pytest-xdist
each worker starts its own, in its own directory, so nothing is shared between them.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

PROGRAMS = ("initdb", "pg_ctl", "postgres")
DEBIAN_BINARIES = Path("/usr/lib/postgresql")
UNPRIVILEGED_USER = "nobody"
# The socket's name is .s.PGSQL.<port> in our own directory: any port is free there.
PORT = 5432
DATABASE = "tuning"
# A unix socket's path has room for 107 bytes.
SOCKET_PATH_MAX = 107


def temporary_parent(for_other_user: bool) -> Path:
    """Where the server's directory goes: the temporary directory, unless another user could not
    reach it or a socket path in it would be too long; then /tmp."""
    parent = Path(tempfile.gettempdir())
    too_long = len(str(parent)) + len("/polyflow-postgres-xxxxxxxx/.s.PGSQL.5432") > SOCKET_PATH_MAX
    unreachable = for_other_user and not all(
        path.stat().st_mode & stat.S_IXOTH for path in (parent, *parent.parents)
    )
    return Path("/tmp") if too_long or unreachable else parent


def find_postgres_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres together: PATH's, else the newest of
    Debian's /usr/lib/postgresql/<version>/bin; None where there is none."""
    found = [shutil.which(program) for program in PROGRAMS]
    if all(found):
        # Resolved: pg_ctl finds postgres beside its real path, so name that directory.
        directories = {Path(path).resolve().parent for path in found if path}
        if len(directories) == 1:
            return directories.pop()

    def version(directory: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", directory.parent.name))

    candidates = [
        directory
        for directory in DEBIAN_BINARIES.glob("*/bin")
        if all(os.access(directory / program, os.X_OK) for program in PROGRAMS)
    ]
    return max(candidates, key=version) if candidates else None


class PostgresServer:
    """A PostgreSQL server of its own in a fresh temporary directory, reachable only through a
    unix socket there with trust authentication; `stop` ends it and removes the directory."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.user: pwd.struct_passwd | None = (
            pwd.getpwnam(UNPRIVILEGED_USER) if os.geteuid() == 0 else None
        )
        parent = temporary_parent(for_other_user=self.user is not None)
        self.base = Path(tempfile.mkdtemp(prefix="polyflow-postgres-", dir=parent))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self.started = False
        if self.user is not None:
            # mkdtemp's 0700 directory is root's: hand it to the server's user.
            os.chown(self.base, self.user.pw_uid, self.user.pw_gid)

    def _run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL program as the server's user; raise with its output if it fails."""
        extra: dict[str, Any] = {}
        if self.user is not None:
            extra = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        # LC_ALL=C: initdb must not depend on the locales this machine happens to have.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        done = subprocess.run(
            [str(self.binaries / arguments[0]), *arguments[1:]],
            cwd=self.base,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            **extra,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(
                f"{arguments[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )
        return done

    def start(self) -> None:
        """initdb and start the server (fsync off: a test's data need not survive a crash)."""
        self._run(
            "initdb", "--pgdata", str(self.data), "--username", "postgres", "--auth", "trust",
            "--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions",
        )  # fmt: skip
        options = " ".join(
            f"-c {setting}"
            for setting in (
                "listen_addresses=''",  # no TCP at all: the socket in our directory only
                f"unix_socket_directories='{self.base}'",
                f"port={PORT}",
                "fsync=off",
                "synchronous_commit=off",
                "full_page_writes=off",
                "shared_buffers=16MB",
                "max_connections=50",
            )
        )
        self.started = True  # from here on, stop() must run pg_ctl stop even if start fails
        self._run(
            "pg_ctl", "start", "--pgdata", str(self.data), "--log", str(self.log),
            "--wait", "--timeout", "30", "--options", options,
        )  # fmt: skip

    def url(self, database: str = "postgres") -> str:
        """A psycopg (libpq) URL of `database` on this server."""
        return f"postgresql://postgres@/{database}?host={quote(str(self.base))}&port={PORT}"

    def create_database(self, name: str | None = None) -> str:
        """Create a database (a fresh unique name unless `name`) and return its URL."""
        import psycopg

        name = name or f"test_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once (its data is thrown away) and remove its directory."""
        try:
            if self.started:
                self._run(
                    "pg_ctl", "stop", "--pgdata", str(self.data), "--mode", "immediate", "--wait"
                )
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """This test process's PostgreSQL server; skips where PostgreSQL is not installed."""
    binaries = find_postgres_binaries()
    if binaries is None:
        pytest.skip(
            "PostgreSQL's initdb/pg_ctl/postgres are not installed (neither on PATH nor in "
            "/usr/lib/postgresql/*/bin): run scripts/setup.sh"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: run scripts/setup.sh (polyflow[fleet])")
    server = PostgresServer(binaries)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a database `tuning` on this test process's PostgreSQL server."""
    return postgres_server.create_database(DATABASE)
