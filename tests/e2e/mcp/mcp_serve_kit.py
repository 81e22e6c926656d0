"""End-to-end MCP parts: a real ``workflow-mcp serve`` process (stdio or Streamable HTTP) in a
temporary project, with its own WORKFLOW_MCP_HOME and HOME, and clients for it. Every wait is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_kit import BOUND_S, HELLO, STEPS

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
# A raw MCP initialize request, as an HTTP client without the SDK sends it.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ALICE = "alice=nKzLOLLWXUBACWqsgZUE1PzGCnSrlg2qw6ajg_EGv08"
BOB = "bob=11ZOyuMAuAdHa8Xl1cSUpIoq-wn5vk6JIKZHO875bNk"
"""Two clients' ``NAME=TOKEN`` entries (random 256-bit tokens, fixed so failures are reproducible)."""
STRANGER = "hJh1K3ihi8oTo9SZdUlPyAayljNE6OQ-mhj4HLRkd08"
"""A well-formed token the test servers do not know."""


def secret(entry: str) -> str:
    """The token of a ``NAME=TOKEN`` entry."""
    return entry.partition("=")[2] or entry


@dataclass
class Site:
    """A project (git root with .claude/workflows), a home and a state directory."""

    project: Path
    home: Path
    state: Path

    def workflow(self, name: str, source: str) -> Path:
        path = self.project / ".claude" / "workflows" / f"{name}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "WORKFLOW_MCP_HOME": str(self.state),
            "HOME": str(self.home),
        }
        if "PYTHONPATH" in os.environ:  # a source tree run against another checkout's environment
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update(extra)
        return env

    def stdio(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=CLI,
            args=["serve", "--trust", str(self.project), *args],
            env=self.env(),
            cwd=str(self.project),
        )


def make_site(tmp_path: Path) -> Site:
    s = Site(project=tmp_path / "project", home=tmp_path / "home", state=tmp_path / "state")
    (s.project / ".git").mkdir(parents=True)
    s.home.mkdir()
    s.workflow("hello", HELLO)
    s.workflow("steps", STEPS)
    return s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    url: str
    port: int
    proc: asyncio.subprocess.Process
    stderr: list[str]
    grew: asyncio.Condition

    async def stderr_line(self, needle: str) -> str:
        """The first stderr line containing ``needle``, waiting (bounded) for it to be written."""
        async with asyncio.timeout(BOUND_S), self.grew:
            while True:
                found = next((line for line in self.stderr if needle in line), None)
                if found is not None:
                    return found
                assert self.proc.returncode is None, f"the server exited: {''.join(self.stderr)}"
                await self.grew.wait()


@asynccontextmanager
async def http_server(
    site: Site,
    *,
    tokens: str | None = f"{ALICE},{BOB}",
    args: tuple[str, ...] = (),
    max_open_files: int | None = None,
    env: dict[str, str] | None = None,
    wrap: tuple[str, ...] = (),
) -> AsyncIterator[HttpServer]:
    """``workflow-mcp serve --http [args…]`` on a free loopback port; yields once it accepts connections.
    ``max_open_files`` sets the server process's RLIMIT_NOFILE (soft and hard); ``env`` adds variables;
    ``wrap`` is a command the server runs under (e.g. ``bwrap … --``), whose process ``proc`` is."""
    port = free_port()
    env = site.env(**({"WORKFLOW_MCP_TOKEN": tokens} if tokens else {}), **(env or {}))

    def limit_files() -> None:
        import resource

        assert max_open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (max_open_files, max_open_files))

    proc = await asyncio.create_subprocess_exec(
        *wrap,
        CLI,
        "serve",
        "--http",
        "--port",
        str(port),
        "--trust",
        str(site.project),
        *args,
        cwd=str(site.project),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=limit_files if max_open_files is not None else None,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                line = (await proc.stderr.readline()).decode()
                assert line, f"the server exited early: {''.join(lines)}"
                lines.append(line)
                if "serving MCP (Streamable HTTP)" in line:
                    break

        grew = asyncio.Condition()

        async def drain() -> None:
            assert proc.stderr is not None
            async for raw in proc.stderr:
                async with grew:
                    lines.append(raw.decode())
                    grew.notify_all()
            async with grew:
                grew.notify_all()

        drainer = asyncio.create_task(drain())
        yield HttpServer(url=f"http://127.0.0.1:{port}/mcp", port=port, proc=proc, stderr=lines, grew=grew)
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        with contextlib.suppress(NameError):
            await drainer


@asynccontextmanager
async def http_client(url: str, token: str, **kwargs: Any) -> AsyncIterator[Client]:
    """The SDK client over Streamable HTTP with ``Authorization: Bearer <token>``."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {secret(token)}"}, timeout=httpx2.Timeout(30, read=60)
        ) as h,
        Client(streamable_http_client(url, http_client=h), **kwargs) as client,
    ):
        yield client


class RawStdio:
    """``workflow-mcp serve`` driven with hand-written JSON-RPC lines, keeping every stdout line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stdout_lines: list[str] = []
        self._next = 0

    @classmethod
    async def start(cls, site: Site) -> RawStdio:
        proc = await asyncio.create_subprocess_exec(
            CLI,
            "serve",
            "--trust",
            str(site.project),
            cwd=str(site.project),
            env=site.env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()

    async def send_line(self, line: str) -> None:
        """Write one raw line (no JSON encoding: it may be anything)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read stdout (bounded) until its response; returns the response."""
        self._next += 1
        ident = self._next
        await self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return await self.response(ident)

    async def response(self, ident: int | str | None) -> dict[str, Any]:
        """Read stdout (bounded) until the response to ``ident`` (``None``: an error with id null)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(BOUND_S):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                assert line, "the server closed stdout"
                self.stdout_lines.append(line)
                message = json.loads(line)
                if message.get("id") == ident and ("result" in message or "error" in message):
                    return dict(message)

    async def initialize(self) -> dict[str, Any]:
        response = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response

    async def close(self) -> tuple[int, str]:
        """Close stdin (the client goes away) and wait for the exit; returns (status, stderr)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        async with asyncio.timeout(BOUND_S):
            rest, err = await asyncio.gather(self.proc.stdout.read(), self.proc.stderr.read())
            status = await self.proc.wait()
        self.stdout_lines += rest.decode().splitlines(keepends=True)
        return status, err.decode()
