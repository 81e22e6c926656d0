"""``workflow-mcp serve`` without ``--http`` refuses every HTTP-only option given on its command line
(exit 2, naming it) instead of serving stdio as if it had not been typed. Real CLI processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_mcp.cli import HTTP_ONLY_OPTIONS, cli

CLI = str(Path(sys.executable).with_name("workflow-mcp"))

# Each HTTP-only option with a value it accepts (the default's own value where there is one: typing it
# still means the user expects an HTTP server).
GIVEN = {
    "--host": "127.0.0.1",
    "--port": "8765",
    "--allowed-host": "proxy.internal",
    "--max-connections": "8",
    "--max-client-runs": "1",
    "--max-client-connections": "2",
    "--max-sessions": "4",
    "--max-client-sessions": "1",
    "--session-idle-timeout": "60",
    "--header-timeout": "5",
}


def serve(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    return subprocess.run(
        [CLI, "serve", *argv],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_table_names_every_http_only_option_of_serve() -> None:
    params = cli.commands["serve"].params
    assert sorted(p.opts[0] for p in params if p.name in HTTP_ONLY_OPTIONS) == sorted(GIVEN)
    # Every option whose help says it is for HTTP is in the table, and only those.
    http_help = {p.opts[0] for p in params if (getattr(p, "help", None) or "").startswith("HTTP")}
    assert http_help == set(GIVEN)


@pytest.mark.parametrize(("option", "value"), list(GIVEN.items()))
def test_an_http_only_option_without_http_is_refused_naming_it(
    tmp_path: Path, option: str, value: str
) -> None:
    done = serve(tmp_path, option, value)
    assert done.returncode == 2
    assert done.stdout == ""  # stdout is JSON-RPC's: nothing else is ever written there
    assert done.stderr == (
        f"workflow-mcp: {option} is an option of the HTTP server and would change nothing on stdio: add "
        f"--http to serve Streamable HTTP, or drop {option}\n"
    )
    assert not (tmp_path / "state").exists()  # refused before anything was opened


def test_several_http_only_options_are_named_together_and_stdio_options_are_not(tmp_path: Path) -> None:
    done = serve(
        tmp_path, "--max-runs", "2", "--port", "9000", "--trust", str(tmp_path), "--max-sessions", "3"
    )
    assert done.returncode == 2
    assert "--port, --max-sessions are options of the HTTP server" in done.stderr
    assert "--max-runs" not in done.stderr and "--trust" not in done.stderr


def test_serve_http_on_a_port_already_taken_exits_2_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path, "--http", "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"workflow-mcp: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert done.stdout == ""
