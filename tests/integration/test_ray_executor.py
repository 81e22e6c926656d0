"""Agent calls on a real Ray cluster (engine/executor.py): one local head (`ray start --head`, 2 CPUs)
shared by every Ray test (all of them are here; the cluster stops when they are done), joined in
process and by the CLI through its address.

The realm, the journal and the event store stay with the coordinator, so a fake-provider run gives the
same result and the same events on Ray as locally; the scheduler still bounds what is in flight;
cancelling a run ends its Ray tasks; a Ray worker killed mid-call is retried a bounded number of
times and never re-runs a call that completed; a missing ``ray`` or an unreachable address is a clear
error before any call (exit 2). An ``isolation: 'worktree'`` call has its worktree made, run in and
judged by the pinned runner of one node (proved with a command-line agent that logs its parent's pid);
the last test joins a second node and kills it mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import FakeProvider, MemoryStore, RunFailedError, RunOptions, WorkflowService, load_workflow
from workflow_mcp.engine.executor import (
    WORKER_LOSS_RETRIES,
    ExecutorUnavailableError,
    ProviderSpec,
    RayCluster,
    RayExecutor,
    check_remote_script,
)
from workflow_mcp.engine.run import run_workflow
from workflow_mcp.events import Event
from workflow_mcp.providers import AgentContext, AgentProvider, AgentRequest, AgentResult, CancelSignal
from workflow_mcp.providers.base import ProviderEvent
from workflow_mcp.providers.config import ProviderConfig, ProviderConfigError, load_config
from workflow_mcp.service import ProviderChoice, RunLimits

from helpers import arun

# Ray authenticates every client with a token: this cluster's own, in the environment the head, this
# process and the CLI runs share (tests move HOME, where Ray keeps its default token). Ray reads the
# mode when it is imported, so it is set first.
_SAVED_AUTH = {key: os.environ.get(key) for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def _restore_auth() -> None:
    for key, value in _SAVED_AUTH.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


try:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'workflow-mcp[ray]'")
except BaseException:  # skipped: leave the environment as it was
    _restore_auth()
    raise

HEAD_START_S = 120.0  # a loaded 2-core machine starts a head in 10-30 s
SOURCE = """export const meta = {
  name: 'ray-same',
  description: 'the same run locally and on Ray',
  phases: [{ title: 'Search' }, { title: 'Judge' }],
}
phase('Search')
const found = await parallel([0, 1, 2, 3].map((i) => () => agent(`find ${i}`, { label: `find:${i}` })))
log(`found ${found.length}`)
phase('Judge')
const verdict = await agent('judge the finds', {
  label: 'judge',
  schema: { type: 'object', properties: { keep: { type: 'boolean' } }, required: ['keep'] },
})
const lost = await agent('a flaky call', { label: 'flaky' })
let thrown = null
try { await agent('a broken call', { label: 'broken' }) } catch (e) { thrown = e.message }
return { found, verdict, lost, thrown }
"""
# The run's concurrency is 1 (one call in flight), so its event order is one order whatever the timing.
SCRIPT: dict[str, Any] = {
    "rules": [
        {"match": {"label": f"find:{i}"}, "respond": {"text": f"found {i}", "delayMs": 50}} for i in range(4)
    ]
    + [
        {
            "match": {"label": "judge"},
            "respond": {"result": {"keep": True}, "tokens": {"input": 3, "output": 5}},
        },
        {"match": {"label": "flaky"}, "respond": {"fail": "provider", "message": "backend said no"}},
        {"match": {"label": "broken"}, "respond": {"fail": "error", "message": "it broke"}},
    ]
}
EXPECTED = {
    "found": ["found 0", "found 1", "found 2", "found 3"],
    "verdict": {"keep": True},
    "lost": None,
    "thrown": "it broke",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _descendants(root: int) -> list[int]:
    """Every live process descended from ``root`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _ports() -> list[str]:
    """The ports of one Ray node's own processes, each free on loopback."""
    names = (
        "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port",
        "metrics-export-port", "node-manager-port", "object-manager-port",
    )  # fmt: skip
    return [f"--{name}={_free_port()}" for name in names]


def _start_node(argv: list[str], what: str) -> subprocess.Popen[str]:
    """Start ``ray start … --block`` in a process group of its own; return once it says it runs."""
    node = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the teardown ends exactly these processes
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    started = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert node.stdout is not None
        for line in node.stdout:
            lines.append(line)
            if "Ray runtime started" in line:
                started.set()
        started.set()  # the node exited: its output says why

    threading.Thread(target=read, daemon=True).start()
    if not started.wait(HEAD_START_S) or not any("Ray runtime started" in line for line in lines):
        _stop_node(node)
        raise RuntimeError(f"the Ray {what} did not start:\n" + "".join(lines[-30:]))
    return node


def _stop_node(node: subprocess.Popen[str]) -> None:
    """End exactly one node's processes: its process group (raylet, GCS) and every process descended
    from it (Ray's workers start sessions of their own). A graceful stop drains for 30 s; a test
    node holds nothing worth draining."""
    for pid in _descendants(node.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)
    node.wait(30)


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A Ray head on loopback (its own temp dir and ports), joined by this process; its address. Its
    health checks are quick (a node that dies is marked dead within about a second)."""
    temp = tempfile.mkdtemp(prefix="wfray-", dir="/tmp")  # short: Ray's socket paths are length-bound
    port = _free_port()
    ray_bin = str(Path(sys.executable).with_name("ray"))
    quick = {
        "health_check_period_ms": 300,
        "health_check_timeout_ms": 500,
        "health_check_failure_threshold": 2,
    }
    argv = [
        ray_bin, "start", "--head", "--block", "--num-cpus=2", "--object-store-memory=100000000",
        "--include-dashboard=false", f"--system-config={json.dumps(quick)}",
        "--disable-usage-stats", f"--temp-dir={temp}", "--node-ip-address=127.0.0.1", f"--port={port}",
        *_ports(),
    ]  # fmt: skip
    address = f"127.0.0.1:{port}"
    head: subprocess.Popen[str] | None = None
    try:
        head = _start_node(argv, "head")
        ray.init(address=address, log_to_driver=False, logging_level="warning")
        yield address
    finally:
        ray.shutdown()
        if head is not None:
            _stop_node(head)
        shutil.rmtree(temp, ignore_errors=True)
        _restore_auth()


@pytest.fixture(scope="module")
def cluster(ray_head: str) -> Iterator[RayCluster]:
    joined = RayCluster.connect(ray_head, runners=2)
    yield joined
    joined.close()


def _spec(tmp_path: Path, script: dict[str, Any] | None = SCRIPT) -> ProviderSpec:
    return ProviderSpec(name="fake", cwd=str(tmp_path), config=ProviderConfig(), fake_script=script)


def _comparable(events: list[Event], root: Path | None = None) -> list[tuple[Any, ...]]:
    """The events without what differs between two runs of one workflow: ids, times, places (and
    ``root``, the run's own directory, written ``TMP``)."""
    volatile = {
        "runId", "startedAt", "durationMs", "elapsedMs", "pid", "host", "cwd", "path", "workerPid",
        "rayNodeId", "rayWorkerPid",
    }  # fmt: skip

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in volatile}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str) and root is not None:
            return value.replace(str(root), "TMP")
        return value

    return [(e.sequence, e.type, e.phase_id, e.agent_id, clean(e.payload)) for e in events]


def test_a_fake_workflow_gives_the_same_result_events_and_journal_locally_and_on_ray(
    ray_head: str, tmp_path: Path
) -> None:
    path = tmp_path / "same.js"
    path.write_text(SOURCE)

    async def once(executor: str) -> tuple[Any, list[Event], list[Any]]:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path), executor=executor, ray_address=ray_head)
        try:
            handle = await service.start(
                str(path), provider=ProviderChoice("fake", SCRIPT), limits=RunLimits(concurrency=1)
            )
            result = await asyncio.wait_for(handle.result(), 60)
            journal = [
                (r.agent_id, r.ordinal, r.key, r.status, r.label, r.result_json, r.tokens)
                for r in service.store.journal(handle.run_id)
            ]
            return result, service.store.events(handle.run_id), journal
        finally:
            await service.shutdown()

    local = arun(once("local"))
    remote = arun(once("ray"))
    assert local[0] == remote[0] == EXPECTED
    assert _comparable(remote[1]) == _comparable(local[1])
    assert remote[2] == local[2] and len(local[2]) >= 6


def test_the_concurrency_limit_bounds_the_ray_calls_in_flight(cluster: RayCluster, tmp_path: Path) -> None:
    source = (
        "export const meta = { name: 'fan', description: 'a fan-out' }\n"
        "return await parallel(Array.from({ length: 12 }, (_, i) => () => agent(`c${i}`, { label: `c:${i}` })))\n"
    )
    script = {"default": {"echo": True, "delayMs": 150}}

    async def go() -> list[str]:
        cluster.peak_in_flight = 0
        handle = run_workflow(
            load_workflow(source=source),
            provider=FakeProvider(script),
            options=RunOptions(cwd=str(tmp_path), concurrency=3),
            executor=RayExecutor(cluster, _spec(tmp_path, script)),
        )
        return list(await asyncio.wait_for(handle.result(), 60))

    assert arun(go()) == [f"c{i}" for i in range(12)]
    assert cluster.peak_in_flight == 3
    assert cluster.in_flight == 0


class _Watched(RayExecutor):
    """A Ray executor that says when a call is running on a Ray worker (its first progress event)."""

    def __init__(self, cluster: RayCluster, spec: ProviderSpec) -> None:
        super().__init__(cluster, spec)
        self.running: asyncio.Event | None = None
        self.pids: list[int] = []

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        inner = context.emit

        async def emit(event: ProviderEvent) -> None:
            if "rayWorkerPid" in event.data:
                self.pids.append(int(event.data["rayWorkerPid"]))
                assert self.running is not None
                self.running.set()
            await inner(event)

        return await super().execute(provider, request, AgentContext(signal=context.signal, emit=emit))


def test_cancelling_the_run_ends_its_ray_task_before_the_run_ends(
    cluster: RayCluster, tmp_path: Path
) -> None:
    source = (
        "export const meta = { name: 'slow', description: 'one slow call' }\nreturn await agent('wait')\n"
    )
    script = {"default": {"echo": True, "delayMs": 120_000}}

    async def go() -> tuple[str, list[int], float]:
        executor = _Watched(cluster, _spec(tmp_path, script))
        executor.running = asyncio.Event()
        handle = run_workflow(
            load_workflow(source=source),
            provider=FakeProvider(script),
            options=RunOptions(cwd=str(tmp_path)),
            executor=executor,
        )
        await asyncio.wait_for(executor.running.wait(), 30)
        assert sum(await cluster.active_calls()) == 1
        loop = asyncio.get_running_loop()
        asked = loop.time()
        handle.cancel("stop")
        with pytest.raises(RunFailedError, match="stop"):
            await asyncio.wait_for(handle.result(), 30)
        return handle.status, await cluster.active_calls(), loop.time() - asked

    status, active, took = arun(go())
    assert status == "cancelled"
    assert active == [0, 0]  # the runner's own count: the provider call ended there too
    assert took < 10


def test_a_ray_worker_killed_mid_call_is_retried_and_completed_calls_never_run_again(
    cluster: RayCluster, tmp_path: Path
) -> None:
    script = {
        "rules": [{"match": {"label": "slow"}, "respond": {"text": "slow done", "delayMs": 1500}}],
        "default": {"echo": True},
    }
    spec = _spec(tmp_path, script)

    async def go() -> tuple[list[AgentResult], list[list[ProviderEvent]]]:
        seen: list[list[ProviderEvent]] = [[], [], []]
        running = asyncio.Event()

        def context(i: int) -> AgentContext:
            async def emit(event: ProviderEvent) -> None:
                seen[i].append(event)
                if i == 0 and "rayWorkerPid" in event.data:
                    running.set()

            return AgentContext(signal=CancelSignal(), emit=emit)

        fast = [AgentRequest(prompt=f"fast {i}", label=f"fast:{i}") for i in (1, 2)]
        done = await asyncio.gather(*(cluster.execute(spec, r, context(i + 1)) for i, r in enumerate(fast)))
        slow = asyncio.ensure_future(
            cluster.execute(spec, AgentRequest(prompt="s", label="slow"), context(0))
        )
        await asyncio.wait_for(running.wait(), 30)
        os.kill(int(seen[0][0].data["rayWorkerPid"]), signal.SIGKILL)
        return [await asyncio.wait_for(slow, 60), *done], seen

    results, seen = arun(go())
    assert [r.text for r in results] == ["slow done", "fast 1", "fast 2"]
    starts = [[e for e in events if "rayWorkerPid" in e.data] for events in seen]
    retries = [[e.text for e in events if e.kind == "retry"] for events in seen]
    assert [len(s) for s in starts] == [2, 1, 1]  # the killed call ran again; the completed ones never
    assert starts[0][0].data["rayWorkerPid"] != starts[0][1].data["rayWorkerPid"]
    assert len(retries[0]) == 1 and "died" in retries[0][0] and "(1 of 3)" in retries[0][0]
    assert retries[1:] == [[], []]


def test_a_call_whose_worker_keeps_dying_is_a_provider_failure_after_the_bounded_retries(
    cluster: RayCluster, tmp_path: Path
) -> None:
    script = {"default": {"echo": True, "delayMs": 60_000}}

    async def go() -> tuple[AgentResult, list[ProviderEvent]]:
        seen: list[ProviderEvent] = []

        async def emit(event: ProviderEvent) -> None:
            seen.append(event)
            if "rayWorkerPid" in event.data:  # every attempt's worker dies as soon as it runs the call
                os.kill(int(event.data["rayWorkerPid"]), signal.SIGKILL)

        cluster.retries = 1
        try:
            call = cluster.execute(
                _spec(tmp_path, script),
                AgentRequest(prompt="p", label="doomed"),
                AgentContext(signal=CancelSignal(), emit=emit),
            )
            return await asyncio.wait_for(call, 60), seen
        finally:
            cluster.retries = WORKER_LOSS_RETRIES
            await asyncio.wait_for(cluster.wait_ready(), 90)  # Ray restarts both runners for the next tests

    result, seen = arun(go())
    assert result.outcome == "provider_failed"
    assert result.message is not None and "died 2 times (at most 1 retries)" in result.message
    assert [e.kind for e in seen if e.kind == "retry"] == ["retry"]
    assert len({e.data["rayWorkerPid"] for e in seen if "rayWorkerPid" in e.data}) == 2  # two workers died


# -- worktree isolation on the node that runs the call ------------------------------------------
#: A command-line agent (the built-in ``cli`` provider runs it in the call's directory): it logs
#: ``<its parent's pid> <its directory>`` to $CALLS_LOG, then works as its prompt says: "wait first"
#: makes its first attempt in a directory say so on stderr and wait while its parent lives (the test
#: kills that Ray worker), "commit" commits a file, "shape" answers a wrong shape on its first attempt.
AGENT = """import os, subprocess, sys, time
from pathlib import Path
prompt = sys.stdin.read()
here, parent = os.getcwd(), os.getppid()
log = Path(os.environ["CALLS_LOG"])
with log.open("a") as out:
    out.write(f"{parent} {here}\\n")
seen = sum(1 for line in log.read_text().splitlines() if line.split(" ", 1)[1] == here)
if "wait first" in prompt and seen == 1:
    print("waiting", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 60
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(1)
if "commit" in prompt:
    Path("work.txt").write_text("the agent's work\\n")
    subprocess.run(["git", "add", "work.txt"], check=True)
    subprocess.run(["git", "-c", "commit.gpgsign=false", "commit", "-qm", "agent work"], check=True)
print('{"n": "x"}' if "shape" in prompt and seen == 1 else '{"n": 1}' if "shape" in prompt else "done")
"""
ISOLATED = """export const meta = { name: 'isolated', description: 'calls in worktrees' }
const work = await agent('commit the work', { label: 'work', isolation: 'worktree' })
const look = await agent('look, in shape', {
  label: 'look',
  isolation: 'worktree',
  schema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
})
return { work, look }
"""
_GIT_ID = {"NAME": "Agent", "EMAIL": "agent@example.invalid", "DATE": "2026-01-01T00:00:00Z"}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "README").write_text("base\n")
    subprocess.run([*git, "add", "README"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    return repo


def _cli_config(tmp_path: Path, log: Path) -> ProviderConfig:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    fixed = {f"GIT_{who}_{k}": v for who in ("AUTHOR", "COMMITTER") for k, v in _GIT_ID.items()}
    return ProviderConfig(
        settings={
            "cli": {"command": [sys.executable, str(agent)], "set_env": {"CALLS_LOG": str(log), **fixed}}
        }
    )


def _calls(log: Path) -> list[tuple[int, str]]:
    """``(the agent's parent pid, its directory)`` of each agent process, in order."""
    return [(int(pid), where) for pid, where in (line.split(" ", 1) for line in log.read_text().splitlines())]


def _worktree_events(events: list[Event]) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type == "artifact.created" and e.payload.get("kind") == "worktree"]


def test_an_isolated_call_on_ray_gets_its_worktree_made_judged_and_run_in_by_the_ray_worker_as_locally(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from workflow_mcp.engine.journal import records_from_events
    from workflow_mcp.providers.routing import build_router

    repo = _repo(tmp_path)

    async def once(executor: str) -> tuple[Any, list[Event], list[tuple[int, str]]]:
        log = tmp_path / f"{executor}.log"
        log.touch()
        config = _cli_config(tmp_path, log)
        router = build_router(provider="cli", config=config)
        try:
            handle = run_workflow(
                load_workflow(source=ISOLATED),
                provider=router,
                options=RunOptions(cwd=str(repo), worktree_root=str(tmp_path / "trees")),
                executor=RayExecutor(cluster, ProviderSpec(name="cli", cwd=str(repo), config=config))
                if executor == "ray"
                else None,
            )
            result = await asyncio.wait_for(handle.result(), 60)
            return result, list(handle.log.events), _calls(log)
        finally:
            await router.aclose()

    local = arun(once("local"))
    remote = arun(once("ray"))
    assert local[0] == remote[0] == {"work": "done", "look": {"n": 1}}
    assert _comparable(remote[1]) == _comparable(local[1])
    journal = [
        [
            (r.key, r.content_key, r.label, r.result, r.tokens, r.side_effects)
            for r in records_from_events(run[1])
        ]
        for run in (local, remote)
    ]
    assert journal[0] == journal[1] and len(journal[0]) == 2

    (kept_here,) = _worktree_events(local[1])
    (kept,) = _worktree_events(remote[1])  # the clean `look` worktree was removed on both
    assert kept["kept"] and kept["changed"] and kept["head"] == kept_here["head"]  # the same commit
    assert "rayNodeId" not in kept_here
    work, look, look_again = remote[2]
    # The worktree was made by the pinned runner of its node, in the very process that ran the agent.
    assert work == (kept["rayWorkerPid"], kept["path"]) and kept["rayWorkerPid"] != os.getpid()
    assert arun(cluster.pinned_pids()) == {kept["rayNodeId"]: kept["rayWorkerPid"]}
    assert kept["rayNodeId"] == ray.get_runtime_context().get_node_id()  # the one node of this cluster
    assert local[2][0] == (os.getpid(), kept_here["path"])  # locally: this process
    done = subprocess.run(
        ["git", "log", "-1", "--format=%s %H"], cwd=kept["path"], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["agent", "work", kept["head"]]
    # The schema re-ask ran again in the same (clean, then removed) worktree on the same worker.
    assert look[0] == look_again[0] == kept["rayWorkerPid"] and look[1] == look_again[1] != work[1]
    assert not Path(look[1]).exists() and not Path(look[1] + ".base.json").exists()


def test_a_ray_worker_killed_mid_call_retries_the_call_on_its_node_in_the_same_worktree(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from workflow_mcp.providers.routing import build_router

    repo = _repo(tmp_path)
    log = tmp_path / "calls.log"
    log.touch()
    config = _cli_config(tmp_path, log)
    source = (
        "export const meta = { name: 'retried', description: 'an isolated call whose worker dies' }\n"
        "return await agent('wait first, then commit', { label: 'work', isolation: 'worktree' })\n"
    )

    class Killing(RayExecutor):
        """Kills the Ray worker of the call's first attempt once the agent there says it waits."""

        def __init__(self) -> None:
            super().__init__(cluster, ProviderSpec(name="cli", cwd=str(repo), config=config))
            self.started: list[Mapping[str, Any]] = []
            self.retries: list[str] = []

        async def execute(
            self, provider: AgentProvider, request: AgentRequest, context: AgentContext
        ) -> AgentResult:
            async def emit(event: ProviderEvent) -> None:
                if "rayWorkerPid" in event.data:
                    self.started.append(event.data)
                elif event.kind == "retry":
                    self.retries.append(event.text)
                elif event.text == "waiting" and len(self.started) == 1:
                    os.kill(int(self.started[0]["rayWorkerPid"]), signal.SIGKILL)
                await context.emit(event)

            return await super().execute(provider, request, AgentContext(signal=context.signal, emit=emit))

    async def go() -> tuple[Any, list[Event]]:
        router = build_router(provider="cli", config=config)
        try:
            handle = run_workflow(
                load_workflow(source=source),
                provider=router,
                options=RunOptions(cwd=str(repo), worktree_root=str(tmp_path / "trees")),
                executor=executor,
            )
            return await asyncio.wait_for(handle.result(), 90), list(handle.log.events)
        finally:
            await router.aclose()

    executor = Killing()
    result, events = arun(go())
    assert result == "done"
    first, second = executor.started
    assert first["rayNodeId"] == second["rayNodeId"] and first["rayWorkerPid"] != second["rayWorkerPid"]
    assert len(executor.retries) == 1 and "died" in executor.retries[0]
    (kept,) = _worktree_events(events)
    # Both attempts ran in the one worktree, made by the first attempt's (killed) process.
    assert _calls(log) == [(first["rayWorkerPid"], kept["path"]), (second["rayWorkerPid"], kept["path"])]
    assert (kept["rayWorkerPid"], kept["rayNodeId"]) == (first["rayWorkerPid"], first["rayNodeId"])
    assert kept["kept"] and (Path(kept["path"]) / "work.txt").read_text() == "the agent's work\n"
    assert [e.type for e in events if e.type.startswith("agent.")] == [
        "agent.queued",
        "agent.started",
        "agent.completed",
    ]


def test_a_stalled_isolated_call_on_ray_is_retried_by_the_same_worker_in_the_same_worktree(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from workflow_mcp.providers.routing import build_router

    repo = _repo(tmp_path)
    log = tmp_path / "calls.log"
    log.touch()
    config = _cli_config(tmp_path, log)
    source = (
        "export const meta = { name: 'stalled', description: 'an isolated call that stalls once' }\n"
        "return await agent('wait first, then commit', { label: 'work', isolation: 'worktree', stallMs: 2000 })\n"
    )

    async def go() -> tuple[Any, list[Event]]:
        router = build_router(provider="cli", config=config)
        try:
            handle = run_workflow(
                load_workflow(source=source),
                provider=router,
                options=RunOptions(cwd=str(repo), worktree_root=str(tmp_path / "trees")),
                executor=RayExecutor(cluster, ProviderSpec(name="cli", cwd=str(repo), config=config)),
            )
            return await asyncio.wait_for(handle.result(), 60), list(handle.log.events)
        finally:
            await router.aclose()

    result, events = arun(go())
    assert result == "done"
    (stalled,) = [e.payload["message"] for e in events if e.type == "warning"]
    assert "stalled: no progress for 2000 ms" in stalled and "retrying (1 of 5)" in stalled
    (kept,) = _worktree_events(events)
    # The stalled attempt (its agent ended by the cancellation) and the retry: one worker, one worktree.
    assert _calls(log) == [(kept["rayWorkerPid"], kept["path"])] * 2
    assert kept["kept"] and (Path(kept["path"]) / "work.txt").is_file()


async def _ignore(event: ProviderEvent) -> None:
    return None


def test_a_gone_node_or_a_repository_missing_on_the_node_fails_the_isolated_call_naming_it(
    cluster: RayCluster, tmp_path: Path
) -> None:
    from workflow_mcp.engine.executor import Placement
    from workflow_mcp.engine.worktree import Worktree, WorktreeError

    missing = tmp_path / "not-here"
    with pytest.raises(WorktreeError) as raised:
        arun(cluster.create_worktree(str(missing), str(tmp_path / "trees"), "run_x", "ag_0001"))
    node = ray.get_runtime_context().get_node_id()
    assert f"repository at {missing} on the Ray node {node}" in str(raised.value)
    assert "same path on every node" in str(raised.value)
    with pytest.raises(WorktreeError, match=f"needs a git repository, and {tmp_path} is not inside one"):
        arun(
            cluster.create_worktree(str(tmp_path), str(tmp_path / "trees"), "run_x", "ag_0001")
        )  # git's word

    gone = Placement(node_id="ab" * 28, host="lost-host", pid=1)  # a node this cluster never had
    path = str(tmp_path / "trees" / "run_x" / "ag_0002")
    answer = arun(
        cluster.execute(
            _spec(tmp_path, {"default": {"echo": True}}),
            AgentRequest(prompt="p", label="stranded", cwd=path),
            AgentContext(signal=CancelSignal(), emit=_ignore),
            placement=gone,
        )
    )
    assert answer.outcome == "provider_failed" and answer.message is not None
    assert (
        f"the Ray node {'ab' * 28} (lost-host) that holds the call's worktree {path} is gone"
        in answer.message
    )
    info = arun(cluster.finish_worktree(Worktree(path=path, root=str(tmp_path), base="0" * 40), gone))
    assert info["kept"] is True and info["changed"] is True and info["rayNodeId"] == "ab" * 28
    assert f"could not be judged on the Ray node {'ab' * 28} (lost-host)" in str(info["error"])


STUB_AGENT = Path(__file__).resolve().parent / "providers" / "acp_stub_agent.py"


def test_a_human_checkpoint_of_a_provider_on_a_ray_worker_is_asked_of_the_run_and_answered_there(
    cluster: RayCluster, tmp_path: Path
) -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")
    from workflow_mcp.providers.policy import Policy
    from workflow_mcp.providers.routing import build_router

    config = ProviderConfig(
        settings={"acp": {"command": sys.executable, "args": [str(STUB_AGENT)]}},
        policy=Policy(approvals="ask"),
    )
    source = (
        "export const meta = { name: 'gated', description: 'an agent that runs commands' }\n"
        "return await agent('run touch a.txt', { label: 'runner' })\n"
    )
    asked: list[Any] = []

    async def yes(context: Any) -> bool | None:
        asked.append(context)
        return True

    async def run(cwd: Path, asker: Any) -> Any:
        cwd.mkdir()
        router = build_router(provider="acp", config=config)  # the coordinator's: capabilities only
        try:
            handle = run_workflow(
                load_workflow(source=source),
                provider=router,
                options=RunOptions(cwd=str(cwd)),
                executor=RayExecutor(cluster, ProviderSpec(name="acp", cwd=str(cwd), config=config)),
            )
            handle.set_checkpoint_asker(asker)
            await asyncio.wait_for(handle.wait(), 60)
            return handle
        finally:
            await router.aclose()

    live = arun(run(tmp_path / "live", yes))
    assert live.status == "completed" and (tmp_path / "live" / "a.txt").exists()  # the worker's agent ran it
    assert [(c["tool"], c["command"]) for c in asked] == [("execute", "touch a.txt")]
    (resolved,) = [e for e in live.log.events if e.type == "checkpoint.resolved"]
    assert (resolved.payload["decision"], resolved.payload["source"]) == ("allow", "elicitation")

    paused = arun(run(tmp_path / "nobody", None))
    assert paused.status == "paused" and not (tmp_path / "nobody" / "a.txt").exists()
    (pause,) = [e for e in paused.log.events if e.type == "run.paused"]
    assert pause.payload["reason"] == "checkpoint_required"
    assert pause.payload["checkpointContext"]["command"] == "touch a.txt"


def test_a_fake_sequence_is_refused_on_ray_naming_the_rule() -> None:
    with pytest.raises(ExecutorUnavailableError, match=r"rules\[1\]\.respond\.sequence.*--executor local"):
        check_remote_script(
            {"rules": [{"match": {}, "respond": {"text": "a"}}, {"respond": {"sequence": [{"text": "b"}]}}]}
        )
    check_remote_script({"default": {"echo": True}})  # nothing per-provider: accepted


def test_a_missing_ray_module_is_a_clear_error_naming_the_extra_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as when it is not installed
    path = tmp_path / "same.js"
    path.write_text(SOURCE)

    async def go() -> WorkflowService:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path), executor="ray")
        with pytest.raises(ExecutorUnavailableError, match=r"pip install 'workflow-mcp\[ray\]'"):
            await service.start(str(path), provider=ProviderChoice("fake", SCRIPT))
        await service.shutdown()
        return service

    assert arun(go()).store.list_runs() == []


def _cli(tmp_path: Path, *argv: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "home"), "RAY_ADDRESS": ""}
    code = f"{prelude}from workflow_mcp.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_runs_on_the_cluster_at_ray_address_with_the_local_result(
    ray_head: str, tmp_path: Path
) -> None:
    (tmp_path / "same.js").write_text(SOURCE)
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    done = _cli(
        tmp_path,
        "run",
        "same.js",
        "--fake-script",
        "script.json",
        "--executor",
        "ray",
        "--ray-address",
        ray_head,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == EXPECTED


def test_the_cli_refuses_an_unreachable_address_or_a_missing_ray_with_exit_2_before_any_call(
    tmp_path: Path,
) -> None:
    (tmp_path / "same.js").write_text(SOURCE)
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    run = ("run", "same.js", "--fake-script", "script.json", "--executor", "ray")
    address = f"127.0.0.1:{_free_port()}"  # nothing listens there
    unreachable = _cli(tmp_path, *run, "--ray-address", address)
    assert unreachable.returncode == 2
    assert f"cannot reach the Ray cluster at {address}" in unreachable.stderr
    assert "agent.started" not in unreachable.stderr
    missing = _cli(tmp_path, *run, prelude="import sys; sys.modules['ray'] = None; ")
    assert missing.returncode == 2
    assert "pip install 'workflow-mcp[ray]'" in missing.stderr and "Traceback" not in missing.stderr
    listed = _cli(tmp_path, "runs", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == {"runs": []}


def test_executor_and_ray_address_are_read_from_the_user_configuration_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(home))
    (home / "config.toml").write_text('executor = "ray"\nray_address = "10.1.2.3:6379"\n')
    conf = load_config(tmp_path)
    assert (conf.executor, conf.ray_address) == ("ray", "10.1.2.3:6379")
    (tmp_path / "workflow-mcp.toml").write_text('default = "fake"\n')
    assert load_config(tmp_path).executor == "ray"  # a project file keeps the user's choice
    (tmp_path / "workflow-mcp.toml").write_text('executor = "local"\n')
    with pytest.raises(ProviderConfigError, match=r"executor: .*only in the user configuration"):
        load_config(tmp_path)
    (tmp_path / "workflow-mcp.toml").unlink()
    (home / "config.toml").write_text('executor = "spark"\n')
    with pytest.raises(ProviderConfigError, match=r"executor: must be one of local, ray"):
        load_config(tmp_path)


# -- the shared runtime conformance cases, on Ray and locally ----------------------------------
CASES_DIR = Path(__file__).resolve().parents[1] / "conformance" / "cases" / "runtime"
ALL_CASES = sorted(d.name for d in CASES_DIR.iterdir() if (d / "case.json").is_file())
#: A spread of the cases (failure modes, a budgeted fan-out, a nested workflow, failures in a fan-out, a
#: pipeline, structured output) run on every test run; WORKFLOW_MCP_RAY_CASES=all runs every case
#: (143 of the 144 give on Ray what they give locally; the one with a fake `sequence` is refused by design).
SAMPLE = [
    "agent-failure-modes",
    "budget-admission-in-parallel",
    "nested-workflow",
    "parallel-failures-become-null",
    "pipeline-barrier-free",
    "schema-structured-output",
]
RAY_CASES = ALL_CASES if os.environ.get("WORKFLOW_MCP_RAY_CASES") == "all" else SAMPLE


def _runtime_cases() -> Any:
    """The conformance runner's own helpers (materialize a case exactly as it does)."""
    spec = importlib.util.spec_from_file_location(
        "ray_runtime_cases", CASES_DIR.parents[1] / "test_runtime_cases.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", RAY_CASES)
def test_a_runtime_conformance_case_gives_on_ray_what_it_gives_locally(
    name: str, ray_head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = _runtime_cases()
    case_dir = CASES_DIR / name
    case = json.loads((case_dir / "case.json").read_text())
    try:
        check_remote_script(case.get("fake"))
    except ExecutorUnavailableError as exc:
        pytest.skip(f"refused on Ray by design: {exc}")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    outcomes = []
    for executor in ("local", "ray"):
        tmp = tmp_path / executor
        tmp.mkdir()
        for key, value in cases.case_environment(case, tmp).items():
            monkeypatch.setenv(key, value)
        path = cases.materialize(case_dir, case, tmp)

        async def once(tmp: Path = tmp, path: Path = path, executor: str = executor) -> tuple[Any, ...]:
            service = WorkflowService(
                MemoryStore(),
                cwd=str(cases.run_dir(case, tmp)),
                home=cases.home_of(case, tmp),
                executor=executor,
                ray_address=ray_head,
            )
            launch = case.get("launch")
            try:
                handle = service.start_run(
                    service.find_workflow(launch).workflow if launch else load_workflow(path),
                    provider=FakeProvider(case.get("fake")),
                    args=case.get("args", cases.MISSING),
                    options=cases.options_for(case, tmp),
                )
                try:
                    result, message = await asyncio.wait_for(handle.result(), 60), None
                except RunFailedError as exc:
                    result, message = None, exc.message
                return handle.status, result, message, _comparable(service.events(handle.run_id), tmp)
            finally:
                await service.shutdown()

        outcome = arun(once())
        outcomes.append((outcome[0], outcome[1], str(outcome[2]).replace(str(tmp), "TMP"), outcome[3]))
    local, remote = outcomes
    assert remote[:3] == local[:3]
    # How a call's answer and the realm's next messages interleave is timing (a Ray call takes a few
    # ms more), so events are compared per agent call, each in its own order.
    mine, theirs = _per_agent(remote[3]), _per_agent(local[3])
    assert sorted(mine, key=str) == sorted(theirs, key=str)
    for agent, events in theirs.items():
        for ray_event, local_event in zip(mine[agent], events, strict=True):
            assert ray_event == local_event, agent


def _per_agent(events: list[tuple[Any, ...]]) -> dict[Any, list[tuple[Any, ...]]]:
    """Each agent's own events in order (without the realm delivery turn, which follows timing), and
    the other events' types."""
    out: dict[Any, list[tuple[Any, ...]]] = {}
    for _, kind, phase, agent, payload in events:
        if agent is None:
            out.setdefault(None, []).append((kind,))
        else:
            kept = {k: v for k, v in payload.items() if k != "turn"}
            out.setdefault(agent, []).append((kind, phase, kept))
    out[None] = sorted(out.get(None, []))
    return out


# Last in the module: it adds a node to the shared cluster and kills it.
def test_a_node_lost_mid_call_makes_its_isolated_call_a_provider_failure_naming_the_node(
    ray_head: str, cluster: RayCluster, tmp_path: Path
) -> None:
    ray_bin = str(Path(sys.executable).with_name("ray"))
    argv = [
        ray_bin, "start", "--block", f"--address={ray_head}", "--num-cpus=1", "--object-store-memory=80000000",
        "--disable-usage-stats", "--node-ip-address=127.0.0.1", *_ports(),
    ]  # fmt: skip
    head = ray.get_runtime_context().get_node_id()
    repo = _repo(tmp_path)
    root = str(tmp_path / "trees")
    worker = _start_node(argv, "worker node")
    try:
        deadline = time.monotonic() + 60
        while sum(1 for n in ray.nodes() if n["Alive"]) < 2:  # bounded: the new node registers
            assert time.monotonic() < deadline, "the second Ray node never joined"
            time.sleep(0.1)
        # Ties between nodes rotate, so the second placement at the latest lands on the new node.
        placed = [arun(cluster.create_worktree(str(repo), root, "run_lost", "ag_0001"))]
        if placed[0][1].node_id == head:
            placed.append(arun(cluster.create_worktree(str(repo), root, "run_lost", "ag_0002")))
        tree, placement = placed[-1]
        assert placement.node_id != head and Path(tree.path).is_dir()
        for other, where in placed[:-1]:
            assert arun(cluster.finish_worktree(other, where))["kept"] is False  # clean: removed

        async def go() -> AgentResult:
            running = asyncio.Event()

            async def emit(event: ProviderEvent) -> None:
                if "rayWorkerPid" in event.data:
                    assert event.data["rayNodeId"] == placement.node_id
                    running.set()

            call = asyncio.ensure_future(
                cluster.execute(
                    _spec(tmp_path, {"default": {"echo": True, "delayMs": 60_000}}),
                    AgentRequest(prompt="p", label="stranded", cwd=tree.path),
                    AgentContext(signal=CancelSignal(), emit=emit),
                    placement=placement,
                )
            )
            await asyncio.wait_for(running.wait(), 60)
            _stop_node(worker)  # the node and every process on it, mid-call
            return await asyncio.wait_for(call, 60)

        answer = arun(go())
        assert answer.outcome == "provider_failed" and answer.message is not None
        assert f"the Ray node {placement.node_id} (" in answer.message
        assert f"that holds the call's worktree {tree.path} is gone" in answer.message
        info = arun(cluster.finish_worktree(tree, placement))
        assert (info["kept"], info["changed"], info["rayNodeId"]) == (True, True, placement.node_id)
        assert f"could not be judged on the Ray node {placement.node_id}" in str(info["error"])
    finally:
        _stop_node(worker)
