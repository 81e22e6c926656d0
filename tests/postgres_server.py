"""A real PostgreSQL server in a temporary directory, for the tests of the PostgreSQL store.

``initdb`` and ``pg_ctl`` come from Debian's ``postgresql`` package (``/usr/lib/postgresql/<N>/bin``).
PostgreSQL refuses to run as root, and CI runs as root: then the server runs as the ``postgres`` system
user (created when absent) through ``runuser``, in a directory it owns. It listens on loopback only, at
a free port, with ``trust`` authentication for its one user (a throw-away test cluster).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PG_MISSING", "PostgresServer", "pg_bin", "running_postgres"]

PG_MISSING = (
    "PostgreSQL server binaries (initdb, pg_ctl) are not installed here; CI installs the Debian package "
    "postgresql"
)
_BOUND_S = 60


def pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<N>/bin`` holding ``initdb`` and ``pg_ctl`` (``$WORKFLOW_MCP_PG_BIN``
    first), or ``None``."""
    override = os.environ.get("WORKFLOW_MCP_PG_BIN")
    candidates = [Path(override)] if override else []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = [p for p in root.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: int(p.name), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running test cluster: ``url`` reaches its ``postgres`` database as superuser ``workflow``."""

    root: Path
    port: int
    runner: list[str]
    bin: Path

    @property
    def url(self) -> str:
        return f"postgresql://workflow@127.0.0.1:{self.port}/postgres"

    def schema_url(self, schema: str) -> str:
        """``url`` with ``search_path`` set to ``schema`` (a fresh namespace per test)."""
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def fresh_schema(self) -> str:
        """Create an empty schema and return a URL whose tables live in it."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return self.schema_url(name)

    def stop(self) -> None:
        subprocess.run(
            [
                *self.runner,
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=_BOUND_S,
            check=False,
        )


def _runner(root: Path) -> list[str]:
    """How to run the PostgreSQL programs: as ourselves, or (as root) as the ``postgres`` user."""
    if os.geteuid() != 0:
        return []
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
            check=True,
            capture_output=True,
            timeout=_BOUND_S,
        )
    shutil.chown(root, user="postgres")
    return ["runuser", "-u", "postgres", "--"]


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """Start a cluster (``initdb`` + ``pg_ctl start``), yield it, stop it and delete its files.

    Raises:
        RuntimeError: the binaries are missing or the server does not start (its log is included).
    """
    folder = pg_bin()
    if folder is None:
        raise RuntimeError(PG_MISSING)
    # Not under pytest's 0700 temporary root: the postgres user must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="workflow-mcp-pg-"))
    root.chmod(0o755)
    runner = _runner(root)
    port = _free_port()
    server = PostgresServer(root=root, port=port, runner=runner, bin=folder)
    try:
        subprocess.run(
            [*runner, str(folder / "initdb"), "-D", str(root / "data"), "-U", "workflow", "-A", "trust",
             "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, text=True, timeout=_BOUND_S,
        )  # fmt: skip
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} -c fsync=off "
            "-c max_connections=200"
        )
        started = subprocess.run(
            [*runner, str(folder / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-o", options,
             "-w", "-t", str(_BOUND_S), "start"],
            capture_output=True, text=True, timeout=_BOUND_S + 10,
        )  # fmt: skip
        if started.returncode != 0:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr.strip()} {log[-2000:]}")
        yield server
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"initdb failed: {exc.stderr}") from exc
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
