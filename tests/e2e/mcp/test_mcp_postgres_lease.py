"""Two ``workflow-mcp serve --http`` processes on one PostgreSQL database, as on two hosts: server A runs
under another host name (bubblewrap's own UTS namespace), so server B cannot check A's process and judges
it by its lease alone — A's ``WORKFLOW_MCP_LEASE_S`` (short here), recorded with its claim; B keeps the
default. While A renews its lease, A's run reads ``running`` through B; once A is killed with SIGKILL
and its lease expires, ``workflow_run_status`` through B reads ``interrupted`` — nobody calls recovery
— and B resumes the run."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys

import anyio
import pytest

from mcp_kit import BOUND_S, PARK, call, data, wait_for_event
from mcp_serve_kit import ALICE, Site, http_client, http_server

pytestmark = pytest.mark.anyio

LEASE_S = 3
ELSEWHERE = "workflow-mcp-elsewhere"
QUICK = {"default": {"text": "done"}}


def other_host() -> tuple[str, ...]:
    """A command prefix that runs a process under another host name (bwrap, sharing everything else)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap (bwrap) is not installed; CI installs the Debian package bubblewrap")
    wrap = (
        bwrap,
        "--dev-bind",
        "/",
        "/",
        "--unshare-uts",
        "--hostname",
        ELSEWHERE,
        "--die-with-parent",
        "--",
    )
    says = [sys.executable, "-c", "import socket; print(socket.gethostname())"]
    probe = subprocess.run([*wrap, *says], capture_output=True, text=True, timeout=BOUND_S, check=False)
    if probe.stdout.strip() != ELSEWHERE:
        pytest.skip(f"bwrap cannot give a process its own host name here: {probe.stderr.strip()}")
    return wrap


async def test_a_dead_server_s_run_reads_interrupted_through_another_once_its_lease_expires(
    site: Site, postgres_url: str
) -> None:
    args, env = ("--database-url", postgres_url), {"WORKFLOW_MCP_LEASE_S": str(LEASE_S)}
    async with (
        http_server(site, args=args, env=env, wrap=other_host()) as a,
        http_server(site, args=args) as b,  # the default 30 s lease: B judges A by the lease A recorded
        http_client(a.url, ALICE) as on_a,
        http_client(b.url, ALICE) as on_b,
    ):
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(on_a, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK})
            )["runId"]
            await wait_for_event(on_b, rid, "agent.started")
            # A renews its lease (every LEASE_S / 6 s): a wait longer than a lease still sees it run.
            waited = data(
                await call(on_b, "workflow_run_await", {"runId": rid, "waitMs": (LEASE_S + 1) * 1000})
            )
            assert waited["status"] == "running"
            assert data(await call(on_b, "workflow_run_status", {"runId": rid}))["status"] == "running"

            a.proc.send_signal(signal.SIGKILL)
            await a.proc.wait()
            # B's wait ends when A's lease expires: the run is interrupted, and reads so everywhere.
            waited = data(await call(on_b, "workflow_run_await", {"runId": rid, "waitMs": 20_000}))
            assert waited["status"] == "interrupted"
            assert data(await call(on_b, "workflow_run_status", {"runId": rid}))["status"] == "interrupted"

            page = data(await call(on_b, "workflow_run_events", {"runId": rid, "after": 0, "limit": 1000}))
            (ended,) = [e for e in page["events"] if e["type"] == "run.interrupted"]
            reason = ended["payload"]["reason"]
            assert ELSEWHERE in reason and f"(lease {LEASE_S} s)" in reason, reason
            renewed_ago = float(reason.split("last renewed ")[1].split(" s ago")[0])
            assert renewed_ago >= LEASE_S  # never judged gone before its lease expired

            resumed = data(
                await call(
                    on_b,
                    "workflow_run",
                    {"resumeFromRunId": rid, "provider": "fake", "fakeScript": QUICK, "waitMs": 20_000},
                )
            )
            assert resumed["status"] == "completed", resumed
