"""The bubblewrap sandbox around the realm worker (``sandbox="bwrap"``).

The escape table (test_escapes.py, test_hostile_values.py) runs inside it through the
``realm_sandbox`` fixture. Here plain Node code — full ``process``, ``fs`` and ``net``, as code that
escaped the realm would hold them — runs under the very profile the worker runs under
(:func:`~workflow_mcp.realm.sandbox.sandbox_argv`, the one function that builds both command lines),
and must not read ``$HOME`` or any file outside its binds, write outside its private ``/tmp``, see
other processes or open a socket. A missing bwrap, and a bwrap that cannot create namespaces, are
clear errors, never a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.errors import SandboxUnavailableError
from workflow_mcp.realm import worker as worker_module
from workflow_mcp.realm.sandbox import SANDBOX_TMP_BYTES, no_fork_filter, sandbox_argv
from workflow_mcp.realm.worker import RealmWorker, node_path, worker_script

from helpers import BWRAP_MISSING, arun, pid_alive, run_source

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=BWRAP_MISSING)

BOUND_S = 30

# Plain Node (not the realm): each attempt reports what happened, as an escaped workflow would see it.
PROBE = r"""
const fs = require('node:fs')
const net = require('node:net')
const [home, secret, hostPid, port] = process.argv.slice(2)
const out = {}
const attempt = (name, fn) => { try { out[name] = 'ok:' + String(fn()) } catch (e) { out[name] = 'denied:' + e.code } }
attempt('readHome', () => fs.readdirSync(home).length)
attempt('readSecret', () => fs.readFileSync(secret, 'utf8'))
attempt('readPasswd', () => fs.readFileSync('/etc/passwd', 'utf8').length)
attempt('writeRoot', () => fs.writeFileSync('/planted', 'x'))
attempt('writeBesideNode', () => fs.writeFileSync(process.execPath + '.planted', 'x'))
attempt('writeBesideSecret', () => fs.writeFileSync(secret + '.planted', 'x'))
attempt('writeTmp', () => { fs.writeFileSync('/tmp/mine', 'x'); return fs.readFileSync('/tmp/mine', 'utf8') })
attempt('signalHost', () => process.kill(Number(hostPid), 0))
out.rootEntries = fs.readdirSync('/').sort()
out.pids = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)
out.env = Object.keys(process.env).filter((k) => k !== 'PWD')
out.cwd = process.cwd()
const socket = net.connect({ host: '127.0.0.1', port: Number(port) })
socket.setTimeout(5000, () => { out.tcp = 'timeout'; socket.destroy(); done() })
socket.on('connect', () => { out.tcp = 'CONNECTED'; socket.destroy(); done() })
socket.on('error', (e) => { out.tcp = 'denied:' + e.code; done() })
function done() { process.stdout.write(JSON.stringify(out) + '\n') }
"""


def run_sandboxed(
    command: list[str], readable: list[str], timeout: float = BOUND_S
) -> subprocess.CompletedProcess[str]:
    """``command`` under the worker's sandbox profile, its seccomp program included, to the end."""
    fd = no_fork_filter()
    try:
        argv = sandbox_argv(command, readable=readable, seccomp_fd=fd)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={}, pass_fds=(fd,))
    finally:
        os.close(fd)


def run_probe(tmp_path: Path) -> tuple[dict[str, Any], int]:
    """Run :data:`PROBE` under the sandbox profile against a listener on the host's loopback; returns
    what the probe saw and how many connections the listener accepted."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    script = tmp_path / "probe.js"
    script.write_text(PROBE)
    home = os.environ.get("HOME") or str(Path.home())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0)
        port = listener.getsockname()[1]
        proc = run_sandboxed(
            [os.path.abspath(node_path()), str(script), home, str(secret), str(os.getpid()), str(port)],
            readable=[str(script)],
        )
        accepted = 0
        try:
            while True:
                conn, _ = listener.accept()
                conn.close()
                accepted += 1
        except BlockingIOError:
            pass
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout)
    assert not secret.with_name("secret.txt.planted").exists()
    return seen, accepted


def test_code_with_full_node_cannot_read_home_or_files_outside_the_binds(tmp_path: Path) -> None:
    seen, _ = run_probe(tmp_path)
    assert seen["readHome"] == "denied:ENOENT"
    assert seen["readSecret"] == "denied:ENOENT"
    assert seen["readPasswd"] == "denied:ENOENT"
    # The root holds only /dev, /proc, /tmp and the top folders of the binds (Node, its libraries,
    # the script), nothing else: no /etc, no /home.
    argv = sandbox_argv([os.path.abspath(node_path())], readable=[str(tmp_path / "probe.js")], seccomp_fd=3)
    binds = [argv[i + 2] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert sorted(seen["rootEntries"]) == sorted({"dev", "proc", "tmp"} | {Path(b).parts[1] for b in binds})
    assert "etc" not in seen["rootEntries"]


def test_code_with_full_node_can_write_only_its_private_tmp(tmp_path: Path) -> None:
    seen, _ = run_probe(tmp_path)
    assert seen["writeRoot"] == "denied:EROFS"
    assert seen["writeBesideNode"] == "denied:EROFS"
    # The secret's folder lies under the host's /tmp: inside, that path is in the private /tmp, so the
    # write lands there and never on the host (run_probe checks the host's folder).
    assert seen["writeBesideSecret"] == "ok:undefined"
    assert not (tmp_path / "secret.txt.planted").exists()
    assert seen["writeTmp"] == "ok:x"
    assert seen["cwd"] == "/tmp"


def test_the_private_tmp_is_not_the_hosts(tmp_path: Path) -> None:
    marker = Path("/tmp") / f"workflow-mcp-host-marker-{os.getpid()}"
    marker.write_text("host")
    try:
        script = tmp_path / "look.js"
        script.write_text(
            "const fs = require('node:fs')\n"
            f"fs.writeFileSync('/tmp/from-sandbox-{os.getpid()}', 'x')\n"
            "process.stdout.write(JSON.stringify(fs.readdirSync('/tmp')))\n"
        )
        proc = run_sandboxed([os.path.abspath(node_path()), str(script)], readable=[str(script)])
        assert proc.returncode == 0, proc.stderr
        # Only its own file, and the empty folders leading to the bound script (which lives here).
        assert sorted(json.loads(proc.stdout)) == sorted([f"from-sandbox-{os.getpid()}", tmp_path.parts[2]])
        assert not Path(f"/tmp/from-sandbox-{os.getpid()}").exists()
    finally:
        marker.unlink()


FILL = r"""
const fs = require('node:fs')
const out = {}
const fill = (path) => {
  const chunk = Buffer.alloc(1 << 20)
  let written = 0
  try {
    const fd = fs.openSync(path, 'w')
    try { for (let i = 0; i < 1024; i++) written += fs.writeSync(fd, chunk) } finally { fs.closeSync(fd) }
    return { written, error: null }
  } catch (e) { return { written, error: e.code } }
}
out.tmp = fill('/tmp/fill')
out.dev = fill('/dev/fill')
out.shm = fill('/dev/shm/fill')
try { fs.writeFileSync('/dev/null', 'x'); out.devNull = 'ok' } catch (e) { out.devNull = e.code }
out.hostname = require('node:os').hostname()
process.stdout.write(JSON.stringify(out))
"""


def test_code_with_full_node_cannot_fill_memory_through_its_writable_file_systems(tmp_path: Path) -> None:
    # A tmpfs is memory the worker's memory cap (RLIMIT_DATA) does not count: an unbounded /tmp (by
    # default half the host's RAM) or a writable /dev would let an escape exhaust the host's memory.
    script = tmp_path / "fill.js"
    script.write_text(FILL)
    proc = run_sandboxed([os.path.abspath(node_path()), str(script)], readable=[str(script)])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["tmp"]["error"] == "ENOSPC"
    assert 0 < seen["tmp"]["written"] <= SANDBOX_TMP_BYTES
    assert seen["dev"] == {"written": 0, "error": "EROFS"}
    assert seen["shm"] == {"written": 0, "error": "EROFS"}
    assert seen["devNull"] == "ok"  # the devices still work
    assert seen["hostname"] == "workflow-realm"  # not the host's name either


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Linux ``/proc/PID/task/*/children``)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            queue += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_the_sandboxed_worker_holds_no_descriptor_of_the_host_but_its_pipes(tmp_path: Path) -> None:
    # Whatever the host has open (its state database, its listening socket, client connections) must
    # not reach the worker: bubblewrap hands on every descriptor it gets, so an escape would read or
    # write through one. Looked at from the host, in bwrap and in Node alike.
    async def scenario() -> dict[int, dict[str, str]]:
        state = (tmp_path / "state.db").open("wb")
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        os.set_inheritable(state.fileno(), True)  # even descriptors marked inheritable stay out
        os.set_inheritable(listener.fileno(), True)
        try:
            worker = await RealmWorker.spawn(sandbox="bwrap")
            try:
                held: dict[int, dict[str, str]] = {}
                for pid in _descendants(worker.pid):
                    fds = Path(f"/proc/{pid}/fd")
                    held[pid] = {fd.name: os.readlink(fd) for fd in fds.iterdir()}
                return held
            finally:
                await worker.close()
        finally:
            state.close()
            listener.close()

    held = arun(scenario())
    assert len(held) >= 2, held  # bwrap and Node (and bwrap's init in its pid namespace)
    for pid, fds in held.items():
        foreign = {fd: t for fd, t in fds.items() if t.startswith(("/", "socket:")) and t != "/dev/null"}
        assert foreign == {}, (pid, fds)  # pipes, Node's event loop and eventfds only
        assert all(fds[fd].startswith("pipe:") for fd in ("1", "2") if fd in fds), (pid, fds)


FORK = r"""
const cp = require('node:child_process')
const { Worker } = require('node:worker_threads')
const out = {}
const sync = cp.spawnSync(process.execPath, ['-e', '0'])
out.spawnSync = sync.error ? sync.error.code : 'ran:' + sync.status
try { cp.execFileSync(process.execPath, ['-e', '0']); out.execFile = 'ran' } catch (e) { out.execFile = e.code }
let started = 0
for (let i = 0; i < 64; i++) {
  try { const child = cp.spawn(process.execPath, ['-e', '0']); if (child.pid !== undefined) started++; child.on('error', () => {}) } catch (e) { out.spawnThrew = e.code; break }
}
out.started = started
out.pids = require('node:fs').readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length
const status = require('node:fs').readFileSync('/proc/self/status', 'utf8')
out.seccomp = /^Seccomp:\s*(\d)/m.exec(status)[1]
const worker = new Worker('require("node:worker_threads").parentPort.postMessage(6 * 7)', { eval: true })
worker.on('message', (n) => { out.thread = n; worker.terminate(); process.stdout.write(JSON.stringify(out)) })
worker.on('error', (e) => { out.thread = 'failed:' + e.message; process.stdout.write(JSON.stringify(out)) })
"""


def test_code_with_full_node_cannot_start_a_process_but_threads_still_run(tmp_path: Path) -> None:
    # A fork bomb from an escaped realm ends at its first fork (the seccomp filter, which binds root
    # too), so the worker's per-process memory cap bounds all it can hold; Node's own threads start.
    script = tmp_path / "fork.js"
    script.write_text(FORK)
    proc = run_sandboxed([os.path.abspath(node_path()), str(script)], readable=[str(script)])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["spawnSync"] == "EPERM"
    assert seen["execFile"] == "EPERM"
    assert seen["started"] == 0
    assert seen["pids"] <= 2  # bwrap's init and Node, nothing it tried to start
    assert seen["seccomp"] == "2"  # filter mode
    assert seen["thread"] == 42


def test_the_sandboxed_worker_runs_under_the_no_fork_filter() -> None:
    async def scenario() -> list[str]:
        worker = await RealmWorker.spawn(sandbox="bwrap")
        try:
            return [
                line
                for pid in _descendants(worker.pid)
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("Seccomp:")
                and Path(f"/proc/{pid}/exe").resolve() == Path(node_path()).resolve()
            ]
        finally:
            await worker.close()

    assert arun(scenario()) == ["Seccomp:\t2"]


def test_code_with_full_node_sees_no_other_process(tmp_path: Path) -> None:
    seen, _ = run_probe(tmp_path)
    assert seen["signalHost"] == "denied:ESRCH"
    assert len(seen["pids"]) <= 2, seen["pids"]  # bwrap's init and Node itself, nothing of the host


def test_code_with_full_node_cannot_open_a_socket_to_the_host(tmp_path: Path) -> None:
    seen, accepted = run_probe(tmp_path)
    assert seen["tcp"] == "denied:ECONNREFUSED"  # its loopback is its own, empty one
    assert accepted == 0


def test_code_with_full_node_gets_an_empty_environment(tmp_path: Path) -> None:
    seen, _ = run_probe(tmp_path)
    assert seen["env"] == []


def test_the_worker_runs_under_the_same_profile_the_probe_ran_under() -> None:
    bare = worker_module._argv(256)
    assert worker_module._argv(256, "bwrap", 7) == sandbox_argv(
        bare, readable=[worker_script()], seccomp_fd=7
    )


def test_a_sandboxed_run_completes_and_its_worker_is_gone_after() -> None:
    outcome = run_source("return await agent('hi')", sandbox="bwrap")
    assert outcome.status == "completed", outcome.error
    assert outcome.result == "hi"
    assert outcome.handle.realm_sandbox == "bwrap"
    pid = outcome.handle.realm_pid
    assert pid is not None and not pid_alive(pid)


def test_a_sandboxed_worker_keeps_its_memory_cap() -> None:
    async def scenario() -> tuple[bool, int]:
        worker = await RealmWorker.spawn(heap_mb=128, sandbox="bwrap")
        try:
            status = Path(f"/proc/{worker.pid}/limits").read_text()
            line = next(row for row in status.splitlines() if row.startswith("Max data size"))
            return worker.memory_limited, int(line.split()[3])
        finally:
            await worker.close()

    limited, soft = arun(scenario())
    assert limited is True
    assert soft == (128 + worker_module.MEMORY_OVERHEAD_MB) * 1024 * 1024


def test_a_missing_bwrap_is_an_error_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("WORKFLOW_MCP_BWRAP", raising=False)
    with pytest.raises(SandboxUnavailableError, match="install the package bubblewrap"):
        arun(RealmWorker.spawn(sandbox="bwrap"))
    outcome = run_source("return 1", sandbox="bwrap")
    assert outcome.status == "failed"
    assert outcome.error is not None and "bubblewrap" in outcome.error


def test_a_missing_libseccomp_is_an_error_naming_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from workflow_mcp.realm import sandbox as sandbox_module

    real = importlib.import_module

    def without_seccomp(name: str, *args: Any) -> Any:
        if name == "pyseccomp":
            raise RuntimeError("Unable to find libseccomp")  # what pyseccomp raises without the library
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_seccomp)
    sandbox_module._no_fork_program.cache_clear()
    try:
        with pytest.raises(SandboxUnavailableError, match="libseccomp2 and the Python package pyseccomp"):
            arun(RealmWorker.spawn(sandbox="bwrap"))
        outcome = run_source("return 1", sandbox="bwrap")
        assert outcome.status == "failed"
        assert outcome.error is not None and "libseccomp" in outcome.error
    finally:
        sandbox_module._no_fork_program.cache_clear()


def test_a_bwrap_override_that_is_not_executable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailableError, match="WORKFLOW_MCP_BWRAP names '/nonexistent/bwrap'"):
        arun(RealmWorker.spawn(sandbox="bwrap"))


SPAWN = """
import asyncio, sys, time
from workflow_mcp.errors import SandboxUnavailableError
from workflow_mcp.realm.worker import RealmWorker
started = time.monotonic()
try:
    asyncio.run(RealmWorker.spawn(sandbox="bwrap"))
except SandboxUnavailableError as exc:
    print(f"{time.monotonic() - started:.2f} {exc}")
else:
    print("started")
"""


def test_a_bwrap_that_cannot_create_namespaces_is_a_clear_error_not_a_hang() -> None:
    # An outer sandbox that forbids further user namespaces: the worker's bwrap then cannot build
    # its own, as where unprivileged user namespaces are disabled.
    outer = ["bwrap", "--unshare-user", "--disable-userns", "--dev-bind", "/", "/", "--"]
    proc = subprocess.run(
        [*outer, sys.executable, "-c", SPAWN],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    seconds, _, message = proc.stdout.strip().partition(" ")
    assert message.startswith("bubblewrap could not create the worker's sandbox: "), proc.stdout
    assert "namespace" in message and "run without --sandbox bwrap" in message
    assert float(seconds) < 10


def test_the_escape_table_fixture_really_sandboxes_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    import helpers

    monkeypatch.setattr(helpers, "SANDBOX", "bwrap")
    outcome = run_source("return 1")
    assert outcome.handle.realm_sandbox == "bwrap"


def test_every_way_into_a_run_applies_the_configured_sandbox(tmp_path: Path) -> None:
    from workflow_mcp.providers import FakeProvider
    from workflow_mcp.service import WorkflowService
    from workflow_mcp.store import MemoryStore

    (Path(os.environ["WORKFLOW_MCP_HOME"]) / "config.toml").write_text('[realm]\nsandbox = "bwrap"\n')

    async def scenario() -> list[str]:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        try:
            one_call = service.run_agent("hi", provider=FakeProvider())  # the built-in agent_run
            assert await one_call.result() == "hi"
            own = service.start_run(
                service.agent_workflow(), provider=FakeProvider(), args={"prompt": "x", "options": {}}
            )
            await own.result()
            return [s for h in (one_call, own) if (s := h.realm_sandbox) is not None]
        finally:
            await service.shutdown()

    assert arun(scenario()) == ["bwrap", "bwrap"]


HOST = """
import asyncio, sys
from workflow_mcp.realm.worker import RealmWorker

def tree(pid):
    out = [pid]
    for task in __import__("os").listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for child in f.read().split():
                out += tree(int(child))
    return out

async def main():
    worker = await RealmWorker.spawn(sandbox="bwrap")
    print(" ".join(map(str, tree(worker.pid))), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_sandboxed_worker_dies_with_its_host() -> None:
    import time

    host = subprocess.Popen([sys.executable, "-c", HOST], stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        pids = [int(p) for p in host.stdout.readline().split()]
        assert len(pids) >= 2, pids  # bwrap, and the sandbox under it (its init, then Node)
        assert all(pid_alive(p) for p in pids)
        host.kill()
        host.wait(BOUND_S)
        deadline = time.monotonic() + BOUND_S
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)  # a bounded poll for the kernel to deliver the parent-death signals
        assert not any(pid_alive(p) for p in pids), [p for p in pids if pid_alive(p)]
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(BOUND_S)


def test_an_unknown_sandbox_name_is_refused_naming_the_choices() -> None:
    from workflow_mcp.errors import InvalidInputError
    from workflow_mcp.realm.sandbox import check_sandbox

    assert check_sandbox("bwrap") == "bwrap"
    with pytest.raises(
        InvalidInputError, match=r"\[realm\] sandbox must be one of none, bwrap, got 'docker'"
    ):
        check_sandbox("docker", "[realm] sandbox")
