"""workflow-mcp over the Model Context Protocol.

    create_server(service, policy=, trust=, principal=, scope=)   the MCP server (tools, resources, prompt)
    run_server(service, http=, host=, port=, trust_dirs=, state_dir=, policy=, limits=, allowed_hosts=)
                                                         `workflow-mcp serve`
    ServerPolicy, SourceTrust, Principal, FileScope        limits, source approval, the caller, reachable files

Stdio (the default) carries only JSON-RPC on stdout; diagnostics go to stderr. Streamable HTTP binds
to loopback, requires a bearer token and bounds what clients may hold (see
:mod:`workflow_mcp.server.http`); over HTTP every path resolves only inside the project roots — the
``--trust`` directories and the serving directory — and no transport reaches the state directory (see
:class:`FileScope`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._auto_resume import AutoResumeSettings
from ..errors import WorkflowMcpError
from ..service import WorkflowService
from ._files import FileScope
from ._policy import LOCAL, Principal, ServerPolicy, SourceTrust
from .mcp import WorkflowMcpServer, create_server

if TYPE_CHECKING:
    from .http import HttpLimits

__all__ = [
    "LOCAL",
    "FileScope",
    "Principal",
    "ServerPolicy",
    "SourceTrust",
    "WorkflowMcpServer",
    "approvals_file",
    "create_server",
    "run_server",
    "serve_stdio",
]

APPROVALS_FILE = "approvals.json"


def approvals_file(state_dir: str) -> str:
    """The source approvals file of a server whose state directory is ``state_dir``
    (``workflow-mcp approvals`` edits it; see :class:`SourceTrust`)."""
    return os.path.join(state_dir, APPROVALS_FILE)


async def serve_stdio(server: WorkflowMcpServer) -> None:
    """Serve ``server`` on stdin/stdout until the client closes stdin (or SIGTERM), then cancel the runs
    this process still runs; they stay resumable (``workflow_run`` with ``resumeFromRunId``)."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    if main is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX loops
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, main.cancel)
    try:
        await server.run_stdio_async()
    finally:
        await asyncio.shield(server.aclose("the MCP client disconnected (the server's stdin closed)"))


async def _serving(
    server: WorkflowMcpServer,
    serve: Coroutine[Any, Any, None],
    auto_resume: AutoResumeSettings | None,
    owners: frozenset[str | None],
) -> None:
    """Run ``serve`` (the transport, in this task: its signal handlers cancel this task) with the
    server's automatic resume started first when ``auto_resume`` is given (the transport's
    ``aclose`` stops it); it also takes on the paused runs in the store that ``owners`` started."""
    if auto_resume is not None:
        server.start_auto_resume(auto_resume, owners=owners)
    await serve


def _freeze_startup_heap() -> None:
    """What start-up made (modules, tool schemas, the server) lives as long as the process: move it out
    of the collector's generations, so a full collection scans only what runs made since. On a warm
    server a full collection during a 1,000-call run took about 2.3x longer without this
    (benchmarks/mcp.py measures the run). Garbage made so far is collected first, so none is kept."""
    gc.collect()
    gc.freeze()


def run_server(
    service: WorkflowService,
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    trust_dirs: tuple[str, ...] = (),
    state_dir: str,
    policy: ServerPolicy | None = None,
    limits: HttpLimits | None = None,
    allowed_hosts: tuple[str, ...] = (),
    allow_inline: bool = False,
    auto_resume: AutoResumeSettings | None = None,
) -> int:
    """Run the server in this process until it stops; returns the exit status (0, or 2 for bad input).

    ``state_dir`` (``$WORKFLOW_MCP_HOME``) holds the source approvals and the generated HTTP token; no
    tool reaches it. The project roots are the ``trust_dirs`` and the service's directory; over HTTP
    every path resolves only inside them. ``limits`` bound the HTTP server (:class:`~.http.HttpLimits`);
    over HTTP, ``policy.max_client_runs`` defaults to an equal share of ``policy.max_runs`` among the
    configured tokens;
    ``allowed_hosts`` are the ``Host`` names it answers besides its own (``--allowed-host``);
    ``allow_inline`` runs every inline script without asking (``--allow-inline-scripts``, see
    :attr:`SourceTrust.allow_inline`); ``auto_resume`` resumes the server's usage-limit-paused runs
    after their reset (``--auto-resume``, :meth:`WorkflowMcpServer.start_auto_resume`; ``None``: never).
    """
    try:
        trust = SourceTrust(
            trusted_dirs=trust_dirs,
            approvals_path=approvals_file(state_dir),
            allow_inline=allow_inline,
        )
        trust.load()  # now, so a damaged approvals file is reported at start (on stderr), not mid-request
        scope = FileScope.of(cwd=service.cwd, trust_dirs=trust_dirs, state_dir=state_dir, confined=http)
        service.recover()
        if http:
            from ._shares import fair_share
            from .http import load_tokens, serve_http

            tokens = load_tokens(state_dir)
            policy = policy or ServerPolicy()
            if policy.max_client_runs is None and policy.max_runs is not None:
                # Each token's equal share of the runs, so no client can hold every slot.
                policy = replace(policy, max_client_runs=fair_share(policy.max_runs, len(tokens.owners)))
            server = create_server(service, policy=policy, trust=trust, principal=None, scope=scope)
            _freeze_startup_heap()
            asyncio.run(
                _serving(
                    server,
                    serve_http(
                        server,
                        host=host,
                        port=port,
                        tokens=tokens,
                        limits=limits,
                        allowed_hosts=allowed_hosts,
                    ),
                    auto_resume,
                    frozenset(tokens.owners.values()),  # its clients' runs, never the local user's
                )
            )
        else:
            server = create_server(service, policy=policy, trust=trust, principal=LOCAL, scope=scope)
            print(
                f"workflow-mcp: serving MCP on stdio (state {service.database})", file=sys.stderr, flush=True
            )
            _freeze_startup_heap()
            with contextlib.suppress(asyncio.CancelledError):
                asyncio.run(_serving(server, serve_stdio(server), auto_resume, frozenset({None})))
    except WorkflowMcpError as exc:
        print(f"workflow-mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
