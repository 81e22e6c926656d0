"""The ``workflow-mcp`` command line.

Exit codes: 0 success (a run completed, a file is valid), 1 failure (a run failed or was cancelled,
a file is invalid), 2 invalid input (bad arguments, a missing file, malformed JSON). No traceback
reaches the user: every expected error is one line on stderr that says what to fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from .errors import (
    InvalidInputError,
    RunFailedError,
    WorkflowLoadError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)

__all__ = ["main"]


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"workflow-mcp: {message}", err=True)
    sys.exit(code)


def _resolve(path: str) -> str:
    """A relative ``path`` that does not exist from the working directory is tried from the invoking
    shell's ``$PWD`` too: a tool that starts workflow-mcp in another directory but passes paths
    relative to its own still names the file it means."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    shell_dir = os.environ.get("PWD")
    if shell_dir and os.path.isdir(shell_dir):
        candidate = os.path.join(shell_dir, path)
        if os.path.exists(candidate):
            return candidate
    return path


def _service(cwd: str | None = None, *, writing: bool = False) -> Any:
    """The service over the state database. ``writing``: the command records something, so a store
    that cannot be written (read-only, damaged) is refused here, before anything starts."""
    from .service import WorkflowService
    from .store.sqlite import SqliteStore

    try:
        store = SqliteStore()
    except WorkflowMcpError as exc:
        _fail(str(exc))
    for notice in store.notices:
        click.echo(f"workflow-mcp: warning: {notice}", err=True)
    if writing and (problem := store.write_problem()) is not None:
        _fail(str(problem))
    return WorkflowService(store, cwd=cwd or os.getcwd(), home=os.environ.get("HOME"), notify=_notice)


def _notice(line: str) -> None:
    """What the service tells the user unasked (a recovery pass marked runs interrupted): one line on
    stderr, never stdout (in ``serve`` stdout carries only JSON-RPC). A closed stderr loses the line,
    never the command."""
    with contextlib.suppress(OSError):
        click.echo(f"workflow-mcp: {line}", err=True)


def _warn_if_damaged(service: Any) -> None:
    """A query on a damaged store still answers what it can, and says how to save the rest."""
    from .errors import StoreCorruptError

    problem = service.store_problem()
    if isinstance(problem, StoreCorruptError):
        click.echo(f"workflow-mcp: warning: {problem}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="workflow-mcp")
def cli() -> None:
    """Run Claude Code workflow files on any agent provider, durably."""


@cli.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print {valid, meta, errors, warnings} as JSON.")
@click.option("--profile", default=None, help="Compatibility profile (default claude-code/2.1.332).")
def validate(path: str, as_json: bool, profile: str | None) -> None:
    """Check one workflow file against the profile's loading rules, and resolve the agent types it asks
    for from the current directory (agent files that define nothing are reported too)."""
    from .definitions.load import validate_workflow
    from .definitions.profile import get_profile

    try:
        prof = get_profile(profile)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    path = _resolve(path)
    try:
        report = validate_workflow(path, profile=prof)
    except WorkflowNotFoundError as exc:
        if as_json:
            error = {"rule": "not-found", "message": str(exc), "path": path, "line": None, "column": None}
            click.echo(
                json.dumps({"valid": False, "meta": None, "errors": [error], "warnings": []}, indent=2)
            )
        _fail(str(exc))
    doc: dict[str, Any] = dict(report.to_json())
    from .definitions.agents import BUILTIN_AGENTS as BUILTINS
    from .definitions.agents import check_agent_types

    agents = check_agent_types(report.warnings, os.getcwd(), profile=prof)
    doc["agentTypes"] = [u.to_json() for u in agents.uses]
    doc["agentFileProblems"] = [p.to_json() for p in agents.problems]
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        if report.valid:
            meta = doc["meta"] or {}
            click.echo(f"valid: {meta.get('name')} — {meta.get('description')}")
        for use in agents.uses:
            d = use.definition
            if d is not None:
                click.echo(
                    f"agent type {use.name!r}: {d.source}" + (f", {d.path}:{d.line}" if d.path else "")
                )
            else:
                click.echo(
                    f"{path}:{use.line}: warning: agent type {use.name!r} does not resolve from {agents.cwd} "
                    "(agent() would reject it): add .claude/agents/<file>.md with `name: "
                    f"{use.name}` or use one of {', '.join(sorted(BUILTINS))}",
                    err=True,
                )
        for problem in agents.problems:
            click.echo(
                f"{problem.path}:{problem.line}: warning: agent file skipped: {problem.message}", err=True
            )
        for e in doc["errors"]:
            where = f"{e.get('path') or path}"
            if e.get("line"):
                where += f":{e['line']}" + (f":{e['column']}" if e.get("column") else "")
            click.echo(f"{where}: error: {e['message']} [{e['rule']}]", err=True)
        for w in doc["warnings"]:
            line = f":{w['line']}" if w.get("line") else ""
            click.echo(f"{path}{line}: warning: {w['message']} [{w['rule']}]", err=True)
    sys.exit(0 if report.valid else 1)


@cli.command(name="list")
@click.argument("directory", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print {workflows, diagnostics} as JSON.")
def list_(directory: str | None, as_json: bool) -> None:
    """List the workflows visible from DIRECTORY (default: the current directory)."""
    from .definitions.discover import find_workflows

    cwd = directory or os.getcwd()
    if not os.path.isdir(cwd):
        _fail(f"{cwd!r} is not a directory")
    found = find_workflows(cwd, os.environ.get("HOME"))
    doc: dict[str, Any] = dict(found.to_json())
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    for w in doc["workflows"]:
        click.echo(f"{w['name']}\t{w['source']}\t{w['description']}\t{w['path']}")
    for d in doc["diagnostics"]:
        click.echo(f"{d['kind']}: {d['path']}: {d['message']}", err=True)


def _read_args(args_json: str | None, args_file: str | None) -> Any:
    from .engine.run import MISSING

    if args_json is not None and args_file is not None:
        _fail("give the args either as ARGS_JSON or with --args-file, not both")
    text: str | None = args_json
    origin = "ARGS_JSON"
    if args_file is not None:
        try:
            text = Path(args_file).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            _fail(f"--args-file {args_file!r} is not UTF-8 text; save the JSON as UTF-8")
        except OSError as exc:
            _fail(f"cannot read --args-file {args_file!r}: {exc.strerror or exc}")
        origin = args_file
    if text is None:
        return MISSING
    return parse_args_json(text, origin)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_args_json(text: str, origin: str = "ARGS_JSON") -> Any:
    """One strict JSON value (no NaN/Infinity, no lone surrogates, nested at most 200 deep), or exit 2."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        _fail(f"{origin} is nested too deeply; args may nest at most a few hundred levels")
    except UnicodeEncodeError:
        _fail(f"{origin} contains a lone UTF-16 surrogate (\\ud800-\\udfff), which UTF-8 cannot carry")
    except ValueError as exc:
        _fail(f'{origin} is not valid JSON ({exc}); pass one JSON value, e.g. \'{{"files": ["a.ts"]}}\'')
    if _depth(value) > 200:
        _fail(f"{origin} is nested deeper than 200 levels")
    return value


def _depth(value: Any, level: int = 0) -> int:
    if level > 200:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _provider(name: str | None, fake_script: str | None) -> Any:
    """The provider for a run: ``fake`` (optionally scripted) directly; anything else through the
    registry and routing (workflow-mcp.toml, ``--provider`` overriding it; without either the
    first ready of codex/claude/acp, announced on stderr). Bad configuration exits 2 naming the
    file and key, before any agent runs."""
    from .providers.fake import FakeProvider

    if fake_script is not None and name != "fake":
        _fail("--fake-script applies only to --provider fake")
    if name == "fake":
        if fake_script is None:
            return FakeProvider()
        try:
            return FakeProvider.from_file(fake_script)
        except WorkflowMcpError as exc:
            _fail(str(exc))
    from .providers.routing import build_router

    try:
        # "routing" is what a configured run records as its provider: resume it through config.
        return build_router(
            provider=None if name == "routing" else name,
            cwd=os.getcwd(),
            on_pick=lambda notice: click.echo(notice, err=True),
        )
    except WorkflowMcpError as exc:
        _fail(str(exc))


@cli.command(name="providers")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document: config, default, providers.")
def providers_(as_json: bool) -> None:
    """List agent providers: availability (SDK or binary found, version), capabilities, whether
    each looks logged in (never showing a secret), and what the configuration here chooses."""
    from .providers.config import load_config
    from .providers.registry import discover
    from .providers.routing import AUTO_PICK_ORDER

    try:
        conf = load_config(os.getcwd())
    except WorkflowMcpError as exc:
        _fail(str(exc))
    infos = discover(conf.settings)
    auto = next(
        (i.name for n in AUTO_PICK_ORDER for i in infos if i.name == n and i.availability.ready), None
    )
    doc = {
        "config": conf.path,
        "default": conf.default,
        "autoPick": None if conf.configured else auto,
        "policy": conf.policy.to_mapping(),
        "providers": [i.to_json() for i in infos],
    }
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    click.echo(
        f"config: {conf.path or 'none'}; default: {conf.default or (auto and f'{auto} (auto)') or 'none'}"
    )
    for info in infos:
        a = info.availability
        caps = [k for k, v in info.to_json()["capabilities"].items() if v]
        state = "ready" if a.ready else ("available" if a.available else "unavailable")
        login = {True: "logged in", False: "not logged in", None: "login n/a"}[a.logged_in]
        line = f"{info.name}\t{state}\t{a.version or '-'}\t{login}\t{','.join(caps)}"
        if a.login:
            line += f"\t({a.login})"
        click.echo(line)
        if a.problem:
            click.echo(
                f"  {a.problem}" + (f" — install: {a.install}" if a.install and not a.available else "")
            )


@cli.command()
@click.argument("target", metavar="PATH_OR_NAME")
@click.argument("args_json", required=False, metavar="[ARGS_JSON]")
@click.option(
    "--args-file", type=str, default=None, help="Read the workflow's args (one JSON value) from a file."
)
@click.option(
    "--provider",
    default=None,
    help="Agent provider: fake, codex, or any registered name (default: configuration).",
)
@click.option("--fake-script", default=None, help="Script for the fake provider (JSON).")
@click.option(
    "--concurrency", type=click.IntRange(min=1, max=4096), default=None, help="Agents running at once."
)
@click.option(
    "--token-budget",
    type=click.IntRange(min=0, max=2**53),
    default=None,
    help="budget.total in output tokens.",
)
@click.option(
    "--max-agents", type=click.IntRange(min=1, max=1000), default=None, help="Lower the 1,000-call cap."
)
@click.option(
    "--agent-timeout-ms",
    type=click.IntRange(min=1, max=2**40),
    default=None,
    help="Bound each provider call.",
)
@click.option(
    "--sync-timeout-ms",
    type=click.IntRange(min=1, max=2**31 - 1),
    default=None,
    help="Synchronous JS limit (30000).",
)
@click.option(
    "--heap-mb", type=click.IntRange(min=16, max=1 << 20), default=None, help="Realm heap limit in MB (1024)."
)
@click.option("--profile", default=None, help="Compatibility profile (default claude-code/2.1.332).")
@click.option("--resume-from", default=None, metavar="RUN_ID", help="Reuse the journal of an earlier run.")
@click.option("--policy", type=click.Choice(["content", "prefix"]), default="content", help="Resume policy.")
@click.option(
    "--events",
    "events_mode",
    type=click.Choice(["jsonl", "progress", "none"]),
    default=None,
    help="stderr: JSONL events (default when not a TTY), a live progress view (TTY default), or nothing.",
)
def run(
    target: str,
    args_json: str | None,
    args_file: str | None,
    provider: str | None,
    fake_script: str | None,
    concurrency: int | None,
    token_budget: int | None,
    max_agents: int | None,
    agent_timeout_ms: int | None,
    sync_timeout_ms: int | None,
    heap_mb: int | None,
    profile: str | None,
    resume_from: str | None,
    policy: str,
    events_mode: str | None,
) -> None:
    """Run a workflow file (or a saved workflow by name); print its final value as JSON."""
    import asyncio

    from .definitions.profile import get_profile
    from .engine.run import RunOptions

    target = _resolve(target)
    fake_script = _resolve(fake_script) if fake_script is not None else None
    args = _read_args(args_json, _resolve(args_file) if args_file is not None else None)
    if policy != "content" and resume_from is None:
        _fail("--policy applies only with --resume-from RUN_ID")
    try:
        get_profile(profile)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    prov = _provider(provider, fake_script)
    service = _service(writing=True)
    options = RunOptions(
        concurrency=concurrency,
        token_budget=token_budget,
        sync_timeout_ms=sync_timeout_ms,
        max_agents=max_agents,
        agent_timeout_ms=agent_timeout_ms,
        heap_mb=heap_mb or 1024,
        profile=profile,
        cwd=os.getcwd(),
        home=os.environ.get("HOME"),
    )
    mode = events_mode or ("progress" if sys.stderr.isatty() else "jsonl")
    code = asyncio.run(_load_and_run(service, target, prov, args, options, resume_from, policy, mode))
    sys.exit(code)


async def _load_and_run(
    service: Any,
    target: str,
    provider: Any,
    args: Any,
    options: Any,
    resume_from: str | None,
    policy: str,
    mode: str,
) -> int:
    """Load ``target`` while the run's realm worker starts, check the syntax in that same worker,
    then run: one Node process per run."""
    import asyncio

    from .realm.worker import RealmWorker

    spawn = asyncio.create_task(RealmWorker.spawn(heap_mb=options.heap_mb))
    await asyncio.sleep(0)
    try:
        pending = service.prepare(target, profile=options.profile)
    except (WorkflowLoadError, WorkflowNotFoundError) as exc:
        with contextlib.suppress(Exception):
            await (await spawn).close()
        _fail(f"invalid workflow: {exc}" if isinstance(exc, WorkflowLoadError) else str(exc))
    except BaseException:
        # Never leave the spawn pending: asyncio.run would cancel it mid-creation, and Python 3.11
        # then waits forever for the half-made process transport.
        with contextlib.suppress(BaseException):
            await (await spawn).close()
        raise
    worker = await spawn
    try:
        workflow = pending.complete(await worker.check(pending.sources) if pending.sources else [])
    except WorkflowLoadError as exc:
        await worker.close()
        _fail(f"invalid workflow: {exc}")
    return await _run(service, workflow, provider, args, options, resume_from, policy, mode, worker)


async def _run(
    service: Any,
    workflow: Any,
    provider: Any,
    args: Any,
    options: Any,
    resume_from: str | None,
    policy: str,
    mode: str,
    worker: Any = None,
    replay: Any = None,
) -> int:
    import asyncio

    from .cli_progress import ProgressView
    from .providers.fake import FakeProvider

    service.recover()
    view = ProgressView(workflow.meta.name) if mode == "progress" else None

    quiet = [mode == "none"]

    def on_event(event: Any) -> None:
        # Showing events is a courtesy: a closed or broken stderr never stops the workflow.
        if quiet[0]:
            return
        try:
            if mode == "jsonl":
                sys.stderr.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
                sys.stderr.flush()
            elif view is not None:
                view.update(event)
        except (OSError, ValueError):
            quiet[0] = True

    try:
        handle = service.start_run(
            workflow,
            provider=provider,
            args=args,
            options=options,
            resume_from=resume_from,
            policy=policy,
            on_event=on_event,
            worker=worker,
            replay=replay,
            provider_config={"fakeScript": provider.script} if isinstance(provider, FakeProvider) else None,
        )
    except WorkflowMcpError as exc:
        _fail(str(exc))
    loop = asyncio.get_running_loop()
    # A closed terminal (SIGHUP) stops the run like Ctrl-C: cancelled, and resumable.
    for sig in (signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX loops
            loop.add_signal_handler(sig, handle.cancel, f"received {signal.Signals(sig).name}")
    if view is not None:
        view.start()
    try:
        value = await handle.result()
    except RunFailedError as exc:
        if view is not None:
            view.stop()
        click.echo(f"workflow-mcp: run {exc.run_id} {exc.status}: {exc.message}", err=True)
        if exc.status in ("cancelled", "paused"):
            click.echo(f"workflow-mcp: resume it with: workflow-mcp resume {exc.run_id}", err=True)
        elif handle.log.persist_error is not None:
            click.echo(
                f"workflow-mcp: run {exc.run_id} is stored up to its last recorded event; once the store "
                f"takes writes again it reads as interrupted: resume it with: workflow-mcp resume {exc.run_id}",
                err=True,
            )
        return 1
    if view is not None:
        view.stop()
    click.echo(json.dumps(value, ensure_ascii=False))
    return 0


@cli.command()
@click.argument("target", metavar="RUN_ID_OR_CLAUDE_RUN")
@click.argument("live_copy", required=False, metavar="[WORKFLOW_JS]")
@click.option(
    "--policy",
    type=click.Choice(["content", "prefix"]),
    default=None,
    help="Resume policy (default: content for our runs, prefix — Claude's rule — for Claude Code runs).",
)
@click.option(
    "--provider",
    default=None,
    help="Agent provider: fake, codex, or any registered name (default: configuration).",
)
@click.option("--fake-script", default=None, help="Script for the fake provider (JSON).")
@click.option("--allow-side-effects", is_flag=True, help="Reuse recorded worktree (write-capable) calls too.")
@click.option(
    "--allow-edits", is_flag=True, help="Claude runs: accept a live copy that differs from the saved script."
)
@click.option("--events", "events_mode", type=click.Choice(["jsonl", "progress", "none"]), default=None)
def resume(
    target: str,
    live_copy: str | None,
    policy: str | None,
    provider: str | None,
    fake_script: str | None,
    allow_side_effects: bool,
    allow_edits: bool,
    events_mode: str | None,
) -> None:
    """Continue a stored run (interrupted, cancelled or failed) from its journal, or import a Claude
    Code run (its wf_*.json record or transcript directory) and continue it here.

    Completed calls are replayed, never run again; a new run records what was replayed and what ran
    live. Claude's files are only read, never written."""
    import asyncio

    from .engine.run import RunOptions

    mode = events_mode or ("progress" if sys.stderr.isatty() else "jsonl")
    service = _service(writing=True)
    service.recover()
    if os.path.exists(target):
        from .engine.claude_import import import_claude_run

        try:
            imported = import_claude_run(
                service,
                target,
                live_copy,
                policy=policy or "prefix",  # type: ignore[arg-type]
                allow_side_effects=allow_side_effects,
                allow_edits=allow_edits,
            )
        except WorkflowMcpError as exc:
            _fail(str(exc))
        claude_provider = _provider(provider, fake_script)
        options = RunOptions(profile=imported.profile, cwd=os.getcwd(), home=os.environ.get("HOME"))
        sys.exit(
            asyncio.run(
                _run(
                    service,
                    imported.workflow,
                    claude_provider,
                    imported.args,
                    options,
                    imported.resumed_from,
                    imported.replay.policy,
                    mode,
                    replay=imported.replay,
                )
            )
        )
    from .definitions.load import load_workflow

    record = service.store.get_run(target)
    if record is None:
        _fail(f"no stored run {target!r} and no such file; `workflow-mcp runs list` shows the runs")
    stored_script = (record.options.get("providerConfig") or {}).get("fakeScript")
    if (provider or record.provider) == "fake" and fake_script is None and stored_script is not None:
        from .providers.fake import FakeProvider

        prov = FakeProvider(stored_script)  # answer the resumed calls as the first run did
    else:
        prov = _provider(provider or (record.provider or None), fake_script)
    try:
        workflow = load_workflow(record.workflow_path, source=record.source)
    except WorkflowLoadError as exc:
        _fail(f"the stored script of {target} no longer loads: {exc}")
    opts = dict(record.options)
    options = RunOptions(
        concurrency=opts.get("concurrency"),
        token_budget=opts.get("token_budget"),
        sync_timeout_ms=opts.get("sync_timeout_ms"),
        max_agents=opts.get("max_agents"),
        agent_timeout_ms=opts.get("agent_timeout_ms"),
        heap_mb=opts.get("heap_mb") or 1024,
        profile=record.profile or None,
        cwd=record.cwd or os.getcwd(),
        home=os.environ.get("HOME"),
    )
    args = service.args_of(target)
    sys.exit(asyncio.run(_run(service, workflow, prov, args, options, target, policy or "content", mode)))


@cli.group()
def runs() -> None:
    """Inspect stored runs."""


@runs.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", type=click.IntRange(min=1), default=50)
def runs_list(as_json: bool, limit: int) -> None:
    """Recent runs, newest first, with their projected status."""
    service = _service()
    service.recover()
    items = [r.to_json() for r in service.list_runs(limit)]
    _warn_if_damaged(service)
    if as_json:
        click.echo(json.dumps({"runs": items}, ensure_ascii=False, indent=2))
        return
    for r in items:
        click.echo(f"{r['runId']}\t{r['status']}\t{r['workflow']}\t{r['createdAt']}")


@runs.command(name="show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
def runs_show(run_id: str, as_json: bool) -> None:
    """The projected state of one run."""
    service = _service()
    service.recover()
    try:
        state = service.status(run_id).to_json()
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    _warn_if_damaged(service)
    if as_json:
        click.echo(json.dumps(state, ensure_ascii=False, indent=2))
        return
    click.echo(f"{state['runId']}  {state['workflow'].get('name')}  {state['status']}")
    for ph in state["phases"]:
        click.echo(f"  phase {ph['title']}: {ph['status']}")
    c = state["counts"]
    click.echo(
        f"  agents: {c['completed']} completed, {c['cached']} replayed, {c['failed']} failed, "
        f"{c['running']} running, {c['queued']} queued"
    )
    click.echo(
        f"  output tokens: {state['tokenUsage']['output']} (+{state['tokenUsage']['replayedOutput']} replayed)"
    )
    for line in state["logs"][-10:]:
        click.echo(f"  log: {line}")
    for tree in state.get("worktrees", []):
        click.echo(f"  kept worktree of {tree['label'] or tree['agentId']}: {tree['path']}")
    if "error" in state:
        click.echo(f"  error: {state['error'].get('message')}")
    if "result" in state:
        click.echo("  result: " + json.dumps(state["result"], ensure_ascii=False)[:2000])


@runs.command(name="events")
@click.argument("run_id")
@click.option(
    "--after", type=click.IntRange(min=0, max=2**62), default=0, help="Only events after this sequence."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON event per line.")
def runs_events(run_id: str, after: int, as_json: bool) -> None:
    """The durable events of one run."""
    service = _service()
    try:
        events = service.events(run_id, after)
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    _warn_if_damaged(service)
    for e in events:
        if as_json:
            click.echo(json.dumps(e.to_json(), ensure_ascii=False))
        else:
            click.echo(
                f"{e.sequence:6d} {e.timestamp} {e.type} {json.dumps(e.payload, ensure_ascii=False)[:160]}"
            )


@runs.command(name="cancel")
@click.argument("run_id")
@click.option("--reason", default="cancelled by the user", help="Recorded in run.cancellation_requested.")
def runs_cancel(run_id: str, reason: str) -> None:
    """Cancel a running run (also one owned by another workflow-mcp process)."""
    service = _service()
    try:
        outcome = service.cancel(run_id, reason)
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    if outcome == "requested":
        click.echo(f"{run_id}: cancellation requested; the owning process stops it within a second")
    elif outcome == "cancelling":
        click.echo(f"{run_id}: cancelling")
    else:
        click.echo(f"{run_id}: already {outcome}; nothing to cancel")
        sys.exit(1)


@runs.command(name="export")
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID]...")
@click.option(
    "--out", "out_path", default=None, metavar="FILE", help="Write to FILE (mode 0600), not stdout."
)
def runs_export(run_ids: tuple[str, ...], out_path: str | None) -> None:
    """Write runs (all, or RUN_ID...) and their events as JSON lines, even from a damaged database.

    Lines: {"kind": "run", "run": {...}}, then {"kind": "event", "event": {...}} per event, and
    {"kind": "problem", "runId", "message"} for each part that could not be read. Only reads. Exit 0
    when everything was read, 1 when something could not be."""
    from .store.salvage import export_runs
    from .store.sqlite import default_home

    path = default_home() / "state.db"
    if out_path is None:
        out = sys.stdout
    else:
        try:
            fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: prompts and args go here
            out = os.fdopen(fd, "w", encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write --out {out_path!r}: {exc.strerror or exc}")
    try:
        with contextlib.ExitStack() as stack:
            if out is not sys.stdout:
                stack.enter_context(out)
            report = export_runs(path, list(run_ids) or None, out)
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    where = f" to {out_path}" if out_path else ""
    click.echo(
        f"workflow-mcp: exported {report.runs} run(s) and {report.events} event(s){where}; "
        f"{len(report.problems)} problem(s)",
        err=True,
    )
    for problem in report.problems:
        click.echo(f"workflow-mcp: {problem}", err=True)
    sys.exit(1 if report.problems else 0)


@cli.group(name="store")
def store_group() -> None:
    """Check and repair the state database ($WORKFLOW_MCP_HOME/state.db)."""


@store_group.command(name="check")
def store_check() -> None:
    """Run SQLite's integrity check. Exit 0 sound, 1 damaged (then nothing more is written to it)."""
    from .store.salvage import check_store
    from .store.sqlite import default_home

    path = default_home() / "state.db"
    try:
        problems = check_store(path)
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    if not problems:
        click.echo(f"{path}: ok")
        return
    for problem in problems[:20]:
        click.echo(f"{path}: {problem}", err=True)
    click.echo(
        f"workflow-mcp: {path} is damaged; nothing more is written to it. Save what can be read with "
        "`workflow-mcp runs export --out runs.jsonl`, then run `workflow-mcp store repair`",
        err=True,
    )
    sys.exit(1)


@store_group.command(name="repair")
def store_repair() -> None:
    """Copy state.db to state.db.bak-<timestamp>, rebuild it (VACUUM INTO, or run by run when pages
    are damaged), check the result and put it in place. Stop every other workflow-mcp process first."""
    from .store.salvage import repair_store
    from .store.sqlite import default_home

    path = default_home() / "state.db"
    try:
        report = repair_store(path)
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    how = "VACUUM INTO" if report.method == "vacuum" else "salvaging run by run"
    click.echo(
        f"{path}: rebuilt by {how}: {report.runs} run(s) and {report.events} event(s) kept; "
        f"the original is at {report.backup}"
    )
    for problem in report.problems:
        click.echo(f"workflow-mcp: {problem}", err=True)


@cli.command()
@click.option(
    "--http", "use_http", is_flag=True, help="Serve Streamable HTTP (bearer token) instead of stdio."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address (keep it loopback).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="HTTP port.")
@click.option(
    "--trust",
    "trust_dirs",
    multiple=True,
    metavar="DIR",
    help="Run workflow files under DIR without asking the user to approve them (repeatable); over HTTP "
    "also a project root (paths resolve only inside the roots and the serving directory).",
)
@click.option(
    "--max-runs",
    type=click.IntRange(1),
    default=16,
    show_default=True,
    help="Runs at once (each holds a Node worker, about 50 MB); more are refused until one ends.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=256,
    show_default=True,
    help="HTTP: open connections plus in-flight requests; a request beyond it gets 503.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="HTTP: a connection that sends no complete request (head and body) within this time of connecting "
    "or of its previous response is closed.",
)
def serve(
    use_http: bool,
    host: str,
    port: int,
    trust_dirs: tuple[str, ...],
    max_runs: int,
    max_connections: int,
    header_timeout: float,
) -> None:
    """Serve the workflow tools over MCP: stdio (default; stdout carries only JSON-RPC) or Streamable
    HTTP at http://HOST:PORT/mcp (token from WORKFLOW_MCP_TOKEN or $WORKFLOW_MCP_HOME/http-token)."""
    from .server import ServerPolicy, run_server
    from .store.sqlite import default_home

    for d in trust_dirs:
        if not os.path.isdir(d):
            _fail(f"--trust {d!r} is not a directory")
    limits = None
    if use_http:  # stdio never loads the HTTP side (its first answer must not wait for it)
        from .server.http import HttpLimits

        limits = HttpLimits(max_connections=max_connections, header_timeout_s=header_timeout)
    service = _service()
    sys.exit(
        run_server(
            service,
            http=use_http,
            host=host,
            port=port,
            trust_dirs=trust_dirs,
            state_dir=str(default_home()),
            policy=ServerPolicy(max_runs=max_runs),
            limits=limits,
        )
    )


def main() -> None:
    """Console entry point: expected errors become one line on stderr; unexpected ones too, with the
    traceback only when ``WORKFLOW_MCP_DEBUG`` is set."""
    try:
        cli(standalone_mode=True)
    except (InvalidInputError, WorkflowLoadError, WorkflowNotFoundError) as exc:
        _fail(str(exc))
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:  # the top-level handler: never show a traceback by default
        if os.environ.get("WORKFLOW_MCP_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set WORKFLOW_MCP_DEBUG=1 for details)", 1)


if __name__ == "__main__":  # pragma: no cover
    main()
