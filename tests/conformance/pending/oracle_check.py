"""Run pending runtime cases in real Claude Code (the shared oracle) and compare with their ``expect``.

usage: python3 tests/conformance/pending/oracle_check.py [CASE_DIR ...] [--version V] [--print] [--keep]

With no CASE_DIR every ``pending/runtime/*/`` case runs (none are left: every case has moved to
``cases/runtime/``, which any CASE_DIR may name). Each case is laid out the way
``tests/conformance/test_runtime_cases.py`` lays it out: ``files`` relative to the run's directory,
``HOME`` at ``<dir>/home`` (so ``home/.claude/agents/x.md`` is a personal agent), plus the two pending
layout fields described in ``pending/README.md``: ``cwd`` (the directory the run starts in, relative
to the run's directory) and ``gitDirs`` (directories to ``git init``). The workflow is saved as
``<cwd>/.claude/workflows/<meta.name>.js`` and started by name, as ``run_case.py`` does.

Prints one line per case (``agrees``/``disagrees`` and the differences), or with ``--print`` the
oracle's JSON output. Needs the oracle (``WORKFLOW_ORACLE_DIR``, default ``/work/shared/oracle``);
Claude Code is used as a black box only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ORACLE = Path(os.environ.get("WORKFLOW_ORACLE_DIR", "/work/shared/oracle"))
sys.path.insert(0, str(ORACLE))
import run_case  # type: ignore[import-not-found]  # noqa: E402

PENDING = Path(__file__).parent / "runtime"
MAIN_MODEL = run_case.DEFAULT_MODEL


def _lay_out(case: dict[str, Any], script: str, root: Path) -> tuple[Path, Path]:
    """Materialize the case under ``root``; returns (cwd, home)."""
    home = root / "home"
    (home / ".claude").mkdir(parents=True)
    for rel, text in case.get("files", {}).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text if isinstance(text, str) else json.dumps(text))
    for rel in case.get("gitDirs", []):
        (root / rel).mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(root / rel)], check=True)
    cwd = root / case.get("cwd", "")
    (cwd / ".claude" / "workflows").mkdir(parents=True, exist_ok=True)
    (cwd / ".claude" / "workflows" / (run_case.meta_name(script) + ".js")).write_text(script)
    return cwd, home


class _GitServer:
    """Serves bare repositories over git's smart HTTP protocol on 127.0.0.1 (``git http-backend`` behind
    the standard library's CGI handler), so a ``git`` marketplace can be added offline: Claude accepts only
    ``https://…``/``http://…`` git URLs, not ``file://`` or a bare repository's path."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="wfgit-"))
        self.base.chmod(0o755)  # the CGI child runs as nobody when the caller is root
        script = self.base / "cgi-bin" / "git"
        script.parent.mkdir()
        script.write_text(
            "#!/bin/sh\n"
            f"export GIT_PROJECT_ROOT={self.base}/repos GIT_HTTP_EXPORT_ALL=1 HOME={self.base}\n"
            "exec git -c safe.directory='*' http-backend\n"
        )
        script.chmod(0o755)
        (self.base / "repos").mkdir()
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def publish(self, folder: Path) -> str:
        """Commit ``folder`` as a repository and serve a bare clone of it; returns its URL."""
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
        subprocess.run([*git, "init", "-q", str(folder)], check=True)
        subprocess.run([*git, "-C", str(folder), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(folder), "commit", "-qm", "marketplace"], check=True)
        bare = self.base / "repos" / (folder.name + ".git")
        subprocess.run(["git", "clone", "-q", "--bare", str(folder), str(bare)], check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(self.base)], check=True)
        if self.proc is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "http.server", "--cgi", str(self.port), "--bind", "127.0.0.1"],
                cwd=self.base,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", self.port)) == 0:
                        break
                time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}/cgi-bin/git/{bare.name}"

    def close(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)


def _plugin_steps(case: dict[str, Any], claude: str, cwd: Path, root: Path, env: dict[str, str]) -> list[str]:
    """Run the case's ``plugins`` steps in the run's directory, in order: a list is a ``claude plugin …``
    command line (``{root}`` stands for the case's directory), ``{"write": {rel: text}}`` writes files (``{root}`` replaced) and
    ``{"remove": [rel]}`` deletes files or folders (relative to the case's directory), ``{"cd": rel}`` runs
    the following commands in another directory, ``{"git": rel}`` commits the folder ``rel`` and serves it
    as a git repository on loopback (later command lines name it ``{git:rel}``). Returns what each
    command printed."""
    out: list[str] = []
    here = cwd
    urls: dict[str, str] = {}
    server: _GitServer | None = None
    try:
        for step in case.get("plugins", []):
            if isinstance(step, dict):
                if "git" in step:
                    server = server or _GitServer()
                    urls[step["git"]] = server.publish(root / step["git"])
                if "cd" in step:
                    here = root / step["cd"]
                for rel, text in step.get("write", {}).items():
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_text(_substitute(text, root, urls))
                for rel in step.get("remove", []):
                    target = root / rel
                    shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
                continue
            argv = [claude, "plugin", *(_substitute(a, root, urls) for a in step)]
            done = subprocess.run(argv, cwd=here, env=env, capture_output=True, text=True, timeout=120)
            out.append(
                f"$ claude plugin {' '.join(step)} -> {done.returncode}: {(done.stdout + done.stderr).strip()}"
            )
            if done.returncode != 0:
                raise SystemExit("\n".join(out))
    finally:
        if server is not None:
            server.close()
    return out


def _substitute(arg: str, root: Path, urls: dict[str, str]) -> str:
    for rel, url in urls.items():
        arg = arg.replace("{git:" + rel + "}", url)
    return arg.replace("{root}", str(root))


def _environment(home: Path, port: int, case: dict[str, Any], work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(
        {
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": "dummy",
            "ANTHROPIC_MODEL": MAIN_MODEL,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "CLAUDE_CODE_WORKFLOW_PREFIX_STAGGER_MS": "0",
            "TMPDIR": str(work / "tmp"),
        }
    )
    if '"fail": "error"' in json.dumps(case.get("fake", {})):
        env["CLAUDE_ASYNC_AGENT_STALL_TIMEOUT_MS"] = os.environ.get("WORKFLOW_ORACLE_STALL_MS", "3000")
    for name, value in case.get("env", {}).items():  # e.g. CLAUDE_CONFIG_DIR: "{root}/home/cfg"
        env[name] = value.replace("{root}", str(work / "case"))
    concurrency = case.get("options", {}).get("concurrency")
    if concurrency is not None:
        env["CLAUDE_CODE_WORKFLOW_MAX_CONCURRENT_AGENTS"] = str(concurrency)
    return env


def _read_outcome(stream: Path, res: dict[str, Any]) -> None:
    notification = None
    for line in stream.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("subtype") == "task_notification":
            notification = event
    if notification is None:
        res["status"] = res["status"] or "no-notification"
        return
    res["status"] = notification.get("status")
    res["summary"] = notification.get("summary")
    try:
        out = json.loads(Path(notification["output_file"]).read_text())
    except (OSError, ValueError, RecursionError) as exc:
        res["notes"].append(f"output_file unreadable: {exc!r}")
        return
    res["result"] = out.get("result")
    res["result_present"] = "result" in out
    res["logs"] = out.get("logs")
    res["phases"] = run_case.phase_titles(out.get("workflowProgress"))


def run(case_dir: Path, version: str, timeout: int, keep: bool) -> dict[str, Any]:
    case = json.loads((case_dir / "case.json").read_text())
    script = (case_dir / "workflow.js").read_text()
    work = Path(tempfile.mkdtemp(prefix="wfpending-"))
    (work / "tmp").mkdir()
    cwd, home = _lay_out(case, script, work / "case")
    wf_input: dict[str, Any] = {"name": case.get("launch") or run_case.meta_name(script)}
    if "args" in case:
        wf_input["args"] = case["args"]
    log = work / "mock.jsonl"
    config = {
        "workflow_input": wf_input,
        "fake": case.get("fake", {}),
        "config_dir": case.get("env", {})
        .get("CLAUDE_CONFIG_DIR", str(home / ".claude"))
        .replace("{root}", str(work / "case")),
        "default_model": MAIN_MODEL,
        "provider_fail_status": 500,
        "log": str(log),
        "hang_s": 100,
        "log_bodies": bool(os.environ.get("WORKFLOW_ORACLE_LOG_BODIES")),
    }
    (work / "mock.json").write_text(json.dumps(config))
    with open(work / "mock.err", "w") as mock_err:
        mock = subprocess.Popen(
            [sys.executable, str(ORACLE / "mock_model.py"), str(work / "mock.json")],
            stdout=subprocess.PIPE,
            stderr=mock_err,
            text=True,
            start_new_session=True,
        )
    assert mock.stdout is not None
    port = int(mock.stdout.readline().split()[1])
    res: dict[str, Any] = {"status": None, "result": None, "logs": None, "summary": None, "notes": []}
    env = _environment(home, port, case, work)
    res["plugin_steps"] = _plugin_steps(case, run_case.claude_bin(version), cwd, work / "case", env)
    cmd = [run_case.claude_bin(version), "-p", "RUNWF", "--output-format", "stream-json", "--verbose"]
    cmd += ["--allowedTools", "Workflow"]
    stream = work / "stream.jsonl"
    started = time.time()
    with open(stream, "w") as out, open(work / "claude.err", "w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            res["status"] = "timeout"
    os.killpg(mock.pid, signal.SIGTERM)
    mock.wait()
    res["elapsed_s"] = round(time.time() - started, 1)
    _read_outcome(stream, res)
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    firsts = [e for e in lines if e.get("first")]
    res["provider_calls"] = len(firsts)
    res["provider_requests"] = [{k: e.get(k) for k in ("prompt", "label", "model", "effort")} for e in firsts]
    res["version"] = version
    res["workdir"] = str(work) if keep else None
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="*", type=Path)
    parser.add_argument("--version", default=run_case.DEFAULT_VERSION)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--print", action="store_true", help="print the oracle output as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    waiting = sorted(d for d in PENDING.iterdir() if (d / "case.json").is_file()) if PENDING.is_dir() else []
    dirs = args.cases or waiting
    failed = 0
    for case_dir in dirs:
        res = run(case_dir, args.version, args.timeout, args.keep)
        if args.print:
            print(json.dumps(res, ensure_ascii=False))
            continue
        expect = json.loads((case_dir / "case.json").read_text()).get("expect", {})
        diffs = run_case.compare(res, expect)
        failed += bool(diffs)
        print(f"{case_dir.name}: {'disagrees' if diffs else 'agrees'} {'; '.join(diffs)}".rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
