"""Provider fan-out benchmark: N-way ``parallel()`` of real Codex turns (the openai-codex SDK's
bundled ``codex app-server``) against the loopback mock Responses API, through the engine.

    python benchmarks/providers.py [--widths 1,4,8,16,20] [--delay-ms 0] [--repeat 1]

Needs the codex extra (``pip install -e '.[test,codex]'``). The mock runs as a separate process
(``tests/mocks/mock_responses.py``) so it counts in neither group. For each width it prints the
wall time of a cold run (a new provider: app-server start included) and of a warm run (same
provider), the peak RSS and the process count of *our* processes (this Python process and the
Node realm worker) and of the *provider* processes (codex and its children), sampled from /proc
every 10 ms (Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workflow_mcp import load_workflow, run_workflow
from workflow_mcp.engine.run import RunOptions
from workflow_mcp.providers.codex import CodexProvider, CodexSettings

MOCK = Path(__file__).resolve().parents[1] / "tests" / "mocks" / "mock_responses.py"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def fan_out(width: int) -> str:
    return (
        "export const meta = { name: 'fan-out', description: 'N codex turns at once' }\n"
        f"const r = await parallel(Array.from({{ length: {width} }}, (_, i) => () => agent('task ECHO:t' + i)))\n"
        "return r.length\n"
    )


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def is_provider(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"codex" in cmd


@dataclass
class Peak:
    ours_rss: int = 0
    ours_procs: int = 0
    provider_rss: int = 0
    provider_procs: int = 0


class Sampler:
    """Samples our process tree every ``interval`` s on a thread until stopped (bounded by stop())."""

    def __init__(self, root: int, exclude: set[int], interval: float = 0.01) -> None:
        self.root, self.exclude, self.interval = root, exclude, interval
        self.peak = Peak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            tree = children()
            ours, provider = [self.root], []
            stack = list(tree.get(self.root, []))
            inside_provider: set[int] = set()
            while stack:
                pid = stack.pop()
                if pid in self.exclude:
                    continue
                if pid in inside_provider or is_provider(pid):
                    provider.append(pid)
                    inside_provider.update(tree.get(pid, []))
                else:
                    ours.append(pid)
                stack.extend(tree.get(pid, []))
            p = self.peak
            p.ours_rss = max(p.ours_rss, sum(rss(x) for x in ours))
            p.ours_procs = max(p.ours_procs, len(ours))
            p.provider_rss = max(p.provider_rss, sum(rss(x) for x in provider))
            p.provider_procs = max(p.provider_procs, len(provider))
            self._stop.wait(self.interval)


async def one_run(provider: CodexProvider, width: int, cwd: str) -> float:
    start = time.perf_counter()
    handle = run_workflow(
        load_workflow(source=fan_out(width)),
        provider=provider,
        options=RunOptions(concurrency=width, cwd=cwd),
    )
    result = await asyncio.wait_for(handle.result(), 300)
    assert result == width, result
    return time.perf_counter() - start


async def bench(
    width: int, home: Path, cwd: str, mock_pid: int, repeat: int, snapshot: bool
) -> tuple[float, float, Peak]:
    config = {"features": {"shell_snapshot": snapshot}}
    provider = CodexProvider(CodexSettings(codex_home=str(home), env=["MOCK_API_KEY"], config=config))
    try:
        with Sampler(os.getpid(), {mock_pid}) as sampler:
            cold = await one_run(provider, width, cwd)
            warm = min([await one_run(provider, width, cwd) for _ in range(repeat)])
        return cold, warm, sampler.peak
    finally:
        await provider.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="1,4,8,16,20")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="mock model latency per answer")
    parser.add_argument("--repeat", type=int, default=1, help="warm runs per width (best is reported)")
    parser.add_argument(
        "--shell-snapshot",
        action="store_true",
        help="codex -c features.shell_snapshot=true (a login shell per thread; the provider's default is off)",
    )
    args = parser.parse_args()
    os.environ["MOCK_API_KEY"] = "mock-key"
    mock = subprocess.Popen(
        [sys.executable, "-m", "mocks.mock_responses", "0", str(args.delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=MOCK.parents[1],  # tests/: the mocks are the package ``mocks`` there
    )
    try:
        assert mock.stdout is not None
        line = mock.stdout.readline().strip()  # "listening http://127.0.0.1:PORT/v1"
        base_url = line.split()[-1]
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "codex-home"
            home.mkdir()
            (home / "config.toml").write_text(
                'model = "mock-model"\nmodel_provider = "mock"\n[model_providers.mock]\nname = "Mock"\n'
                f'base_url = "{base_url}"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n'
                "request_max_retries = 0\nstream_max_retries = 0\n"
            )
            print(
                f"mock {base_url}, model latency {args.delay_ms:g} ms, cpus {os.cpu_count()}, "
                f"shell snapshot {'on' if args.shell_snapshot else 'off'}"
            )
            print("width  cold_s  warm_s  ours_peak_MB  ours_procs  provider_peak_MB  provider_procs")
            for width in (int(w) for w in args.widths.split(",")):
                cold, warm, peak = asyncio.run(
                    bench(width, home, tmp, mock.pid, args.repeat, args.shell_snapshot)
                )
                print(
                    f"{width:5d}  {cold:6.2f}  {warm:6.2f}  {peak.ours_rss / 2**20:12.1f}  {peak.ours_procs:10d}"
                    f"  {peak.provider_rss / 2**20:16.1f}  {peak.provider_procs:14d}"
                )
    finally:
        mock.terminate()
        mock.wait(timeout=10)


if __name__ == "__main__":
    main()
