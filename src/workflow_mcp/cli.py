"""The ``workflow-mcp`` command line.

Exit codes: 0 success (a run completed, a file is valid), 1 failure (a run failed or was cancelled,
a file is invalid), 2 invalid input (bad arguments, a missing file, malformed JSON). No traceback
reaches the user: every expected error is one line on stderr that says what to fix.

A thin face over :class:`~workflow_mcp.service.WorkflowService` (an import-linter contract keeps it so):
every run, resume, cancel and store command goes through the service; ``validate`` and ``list`` read
definitions directly, as they touch no run and no store.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import os
import shlex
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, TextIO

import click
from click.core import ParameterSource

from ._safe_files import written_in_place
from .errors import (
    InvalidInputError,
    RunContinuedError,
    RunFailedError,
    RunNotConfirmedError,
    RunNotFoundError,
    WorkflowLoadError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)

if TYPE_CHECKING:
    from .service import PlanReport, PreparedRun, ProviderChoice, RunLimits, WorkflowService

__all__ = ["main"]


def _fail(message: str, code: int = 2) -> NoReturn:
    with contextlib.suppress(OSError, ValueError):  # a full or closed stderr still ends with the code
        click.echo(f"workflow-mcp: {message}", err=True)
    sys.exit(code)


def _os_error(exc: OSError) -> str:
    """``ENOSPC (No space left on device)``: the system's error code and its description."""
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    return f"{code} ({os.strerror(exc.errno) if exc.errno else exc})"


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


def _service(cwd: str | None = None, *, writing: bool = False) -> WorkflowService:
    """The service over the state database. ``writing``: the command records something, so a store
    that cannot be written (read-only, damaged) is refused here, before anything starts."""
    from .service import WorkflowService

    try:
        service = WorkflowService.open(
            cwd=cwd or os.getcwd(), home=None, notify=_notice, **_deployment_settings()
        )
    except WorkflowMcpError as exc:
        _fail(str(exc))
    for notice in service.store_notices:
        click.echo(f"workflow-mcp: warning: {notice}", err=True)
    if writing and (problem := service.store_problem()) is not None:
        _fail(str(problem))
    return service


# -- deployment options (sandbox): set on the commands that run workflows, read by _service -------
_SETTINGS_KEY = "workflow_mcp.deployment"


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep an option of :func:`_deployment_options` for :func:`_service` (the commands never see it)."""
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_SETTINGS_KEY, {})[param.name] = value
    return value


def _deployment_settings() -> dict[str, Any]:
    """The deployment options the current command was given (``{}`` outside a command)."""
    ctx = click.get_current_context(silent=True)
    return dict(ctx.meta.get(_SETTINGS_KEY, {})) if ctx is not None else {}


def _sandbox_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--sandbox none|bwrap`` on every command that runs workflow code."""
    return click.option(
        "--sandbox",
        type=click.Choice(["none", "bwrap"]),
        default=None,
        expose_value=False,
        callback=_remember,
        help="OS sandbox around the Node worker that runs workflow code: bwrap (bubblewrap: no network, "
        "no files but Node's, private /tmp) or none (default: the configuration's [realm] sandbox).",
    )(fn)


def _database_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--database-url`` on every command that reads or writes runs."""
    return click.option(
        "--database-url",
        "database_url",
        default=None,
        metavar="URL",
        expose_value=False,
        callback=_remember,
        help="The run database: postgresql://USER@HOST:PORT/DB, shared by several servers (default: "
        "$WORKFLOW_MCP_DATABASE_URL, else the SQLite file $WORKFLOW_MCP_HOME/state.db).",
    )(fn)


def _executor_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--executor local|ray`` and ``--ray-address`` on every command that runs agent calls."""
    fn = click.option(
        "--ray-address",
        "ray_address",
        default=None,
        metavar="HOST:PORT",
        expose_value=False,
        callback=_remember,
        help="The Ray cluster of --executor ray (default: the configuration's ray_address, else "
        "$RAY_ADDRESS, else a new local cluster).",
    )(fn)
    return click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default=None,
        expose_value=False,
        callback=_remember,
        help="Where live agent calls run: local (this process) or ray (a Ray task each, the provider "
        "built on the Ray worker; pip install 'workflow-mcp[ray]'). Default: the configuration's executor.",
    )(fn)


def _sqlite_only(command: str) -> None:
    """Refuse ``command`` (it reads the SQLite file itself) when a PostgreSQL database is in force."""
    from .service import DATABASE_URL_ENV, database_url

    if database_url(_deployment_settings().get("database_url")) is not None:
        _fail(
            f"`workflow-mcp {command}` works on the SQLite file; with --database-url or {DATABASE_URL_ENV} "
            "set, the runs are in PostgreSQL: check and back it up with its own tools (pg_amcheck, pg_dump)"
        )


def _notice(line: str) -> None:
    """What the service tells the user unasked (a recovery pass marked runs interrupted): one line on
    stderr, never stdout (in ``serve`` stdout carries only JSON-RPC). A closed stderr loses the line,
    never the command."""
    with contextlib.suppress(OSError):
        click.echo(f"workflow-mcp: {line}", err=True)


def _warn_if_damaged(service: WorkflowService) -> None:
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
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="Print {valid, meta, errors, warnings} as JSON.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    default=None,
    help="text (default), json (as --json), or github: workflow-command annotations "
    "(::error file=…,line=…) that a GitHub Actions log shows on the file and line.",
)
@click.option("--profile", default=None, help="Compatibility profile (default claude-code/2.1.332).")
def validate(paths: tuple[str, ...], as_json: bool, output_format: str | None, profile: str | None) -> None:
    """Check workflow files against the profile's loading rules, and resolve the agent types they ask
    for from the current directory (agent files that define nothing are reported too).

    Each PATH is a file or a directory; a directory stands for every discoverable workflow under it
    (each .js file whose folder is named `workflows`: .claude/workflows and plugins' workflows/).
    Exits 1 when any file is invalid, 2 when a PATH does not exist. With one file, --json prints that
    file's report; with more, {"valid": bool, "files": [report, ...]}."""
    from .definitions.load import validate_workflow
    from .definitions.profile import get_profile

    try:
        prof = get_profile(profile)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    fmt = output_format or ("json" if as_json else "text")
    files: list[str] = []
    for given in paths:
        resolved = _resolve(given)
        if os.path.isdir(resolved):
            found = _workflow_files(resolved)
            if not found:
                click.echo(f"workflow-mcp: warning: no workflow files under {given}", err=True)
            files += found
        elif len(paths) > 1 and not os.path.exists(resolved):
            _fail(f"{given}: no such file or directory")
        else:
            files.append(resolved)
    docs: list[dict[str, Any]] = []
    for path in files:
        try:
            report = validate_workflow(path, profile=prof)
        except WorkflowNotFoundError as exc:
            if fmt == "json" and len(paths) == 1:
                error = {"rule": "not-found", "message": str(exc), "path": path, "line": None, "column": None}
                click.echo(
                    json.dumps({"valid": False, "meta": None, "errors": [error], "warnings": []}, indent=2)
                )
            _fail(str(exc))
        doc: dict[str, Any] = dict(report.to_json())
        doc["path"] = path
        docs.append(doc)
        from .definitions.agents import check_agent_types

        agents = check_agent_types(report.warnings, os.getcwd(), profile=prof)
        doc["agentTypes"] = [u.to_json() for u in agents.uses]
        doc["agentFileProblems"] = [p.to_json() for p in agents.problems]
        if fmt == "text":
            _print_validation(path, doc, agents)
        elif fmt == "github":
            _print_annotations(path, doc, agents)
    valid = all(d["valid"] for d in docs)
    if fmt == "json":
        if len(paths) == 1 and len(docs) == 1 and not os.path.isdir(_resolve(paths[0])):
            single = {k: v for k, v in docs[0].items() if k != "path"}
            click.echo(json.dumps(single, ensure_ascii=False, indent=2))
        else:
            click.echo(json.dumps({"valid": valid, "files": docs}, ensure_ascii=False, indent=2))
    elif fmt == "github" or len(docs) > 1:
        bad = sum(not d["valid"] for d in docs)
        click.echo(f"{len(docs)} workflow file(s) checked, {bad} invalid", err=fmt == "text")
    sys.exit(0 if valid else 1)


def _workflow_files(directory: str) -> list[str]:
    """Every ``.js`` file under ``directory`` whose folder is named ``workflows`` (``.git`` and
    ``node_modules`` skipped), in path order."""
    out: list[str] = []
    for here, dirs, names in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "node_modules"))
        if os.path.basename(here) == "workflows":
            out += [os.path.join(here, n) for n in sorted(names) if n.endswith(".js")]
    return out


def _print_validation(path: str, doc: dict[str, Any], agents: Any) -> None:
    from .definitions.agents import BUILTIN_AGENTS as BUILTINS

    if doc["valid"]:
        meta = doc["meta"] or {}
        click.echo(f"valid: {meta.get('name')} — {meta.get('description')}")
    for use in agents.uses:
        d = use.definition
        if d is not None:
            click.echo(f"agent type {use.name!r}: {d.source}" + (f", {d.path}:{d.line}" if d.path else ""))
        else:
            click.echo(
                f"{path}:{use.line}: warning: agent type {use.name!r} does not resolve from {agents.cwd} "
                "(agent() would reject it): add .claude/agents/<file>.md with `name: "
                f"{use.name}` or use one of {', '.join(sorted(BUILTINS))}",
                err=True,
            )
    for problem in agents.problems:
        click.echo(f"{problem.path}:{problem.line}: warning: agent file skipped: {problem.message}", err=True)
    for e in doc["errors"]:
        where = f"{e.get('path') or path}"
        if e.get("line"):
            where += f":{e['line']}" + (f":{e['column']}" if e.get("column") else "")
        click.echo(f"{where}: error: {e['message']} [{e['rule']}]", err=True)
    for w in doc["warnings"]:
        line = f":{w['line']}" if w.get("line") else ""
        click.echo(f"{path}{line}: warning: {w['message']} [{w['rule']}]", err=True)


def _escape_data(text: str) -> str:
    """GitHub workflow-command message escaping (``%``, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """GitHub workflow-command property escaping (also ``:`` and ``,``)."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(level: str, path: str, line: int | None, column: int | None, title: str, message: str) -> str:
    """One GitHub Actions annotation: ``::error file=F,line=L,col=C,title=T::message``."""
    props = [f"file={_escape_property(os.path.relpath(path) if os.path.isabs(path) else path)}"]
    if line:
        props.append(f"line={line}")
        if column:
            props.append(f"col={column}")
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _print_annotations(path: str, doc: dict[str, Any], agents: Any) -> None:
    for e in doc["errors"]:
        click.echo(
            _annotation(
                "error",
                e.get("path") or path,
                e.get("line"),
                e.get("column"),
                f"workflow {e['rule']}",
                e["message"],
            )
        )
    for w in doc["warnings"]:
        click.echo(
            _annotation(
                "warning", path, w.get("line"), w.get("column"), f"workflow {w['rule']}", w["message"]
            )
        )
    for use in agents.uses:
        if use.definition is None:
            click.echo(
                _annotation(
                    "warning", path, use.line, None, "workflow agent-type",
                    f"agent type {use.name!r} does not resolve from {agents.cwd} (agent() would reject it)",
                )
            )  # fmt: skip


@cli.command(name="list")
@click.argument("directory", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print {workflows, diagnostics} as JSON.")
def list_(directory: str | None, as_json: bool) -> None:
    """List the workflows visible from DIRECTORY (default: the current directory)."""
    from .definitions.discover import find_workflows

    cwd = directory or os.getcwd()
    if not os.path.isdir(cwd):
        _fail(f"{cwd!r} is not a directory")
    found = find_workflows(cwd)
    doc: dict[str, Any] = dict(found.to_json())
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    for w in doc["workflows"]:
        source = (
            w["source"] if "plugin" not in w else f"plugin {w['plugin']} {w['pluginVersion'] or ''}".rstrip()
        )
        click.echo(f"{w['name']}\t{source}\t{w['description']}\t{w['path']}")
    for d in doc["diagnostics"]:
        click.echo(f"{d['kind']}: {d['path']}: {d['message']}", err=True)


def _read_args(args_json: str | None, args_file: str | None) -> Any:
    from .service import MISSING

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
    """One strict JSON value (no NaN/Infinity, no lone surrogates, nested at most
    :data:`~workflow_mcp.definitions.profile.MAX_VALUE_DEPTH` levels, as every face takes args), or exit 2."""
    from .definitions.profile import MAX_VALUE_DEPTH

    try:
        value = json.loads(text, parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        _fail(f"{origin} is nested deeper than {MAX_VALUE_DEPTH} levels, the most args may nest")
    except UnicodeEncodeError:
        _fail(f"{origin} contains a lone UTF-16 surrogate (\\ud800-\\udfff), which UTF-8 cannot carry")
    except ValueError as exc:
        _fail(f'{origin} is not valid JSON ({exc}); pass one JSON value, e.g. \'{{"files": ["a.ts"]}}\'')
    if _depth(value) > MAX_VALUE_DEPTH:
        _fail(f"{origin} is nested deeper than {MAX_VALUE_DEPTH} levels, the most args may nest")
    return value


def _depth(value: Any, level: int = 0) -> int:
    from .definitions.profile import MAX_VALUE_DEPTH

    if level > MAX_VALUE_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _choice(name: str | None, fake_script: str | None) -> ProviderChoice:
    """The provider a run asks for: ``--provider NAME`` (``--fake-script F`` scripts the fake and
    implies ``--provider fake``; with another provider it is refused); neither: the configuration decides (workflow-mcp.toml; without one the first ready of
    codex/claude/acp, announced on stderr). The service builds it before any agent runs, refusing bad
    configuration with the file and key named (exit 2)."""
    from .service import ProviderChoice, read_fake_script

    if fake_script is None:
        return ProviderChoice(name)
    if name not in (None, "fake"):
        _fail(f"--fake-script applies only to --provider fake, not --provider {name}")
    try:
        return ProviderChoice("fake", read_fake_script(fake_script))
    except WorkflowMcpError as exc:
        _fail(str(exc))


#: ``(option, lowest, highest, help)`` of the limits ``run`` and ``resume`` share.
_LIMITS = (
    ("--concurrency", 1, 4096, "Agents running at once."),
    ("--token-budget", 0, 2**53, "budget.total in output tokens."),
    ("--max-agents", 1, 1000, "Lower the 1,000-call cap."),
    ("--agent-timeout-ms", 1, 2**40, "Bound each provider call."),
    ("--sync-timeout-ms", 1, 2**31 - 1, "Synchronous JS limit (30000)."),
    ("--heap-mb", 16, 1 << 20, "Realm heap limit in MB (1024)."),
)


_LIMIT_KEYS = tuple(name.removeprefix("--").replace("-", "_") for name, *_ in _LIMITS)
"""The ``RunLimits`` field each option fills (click's parameter names)."""


def _limit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The limit options ``run`` and ``resume`` share (a resume may only narrow the run's own), handed
    to the command as one ``limits`` (:class:`~workflow_mcp.service.RunLimits`)."""

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        from .service import RunLimits

        return fn(limits=RunLimits(**{key: kwargs.pop(key) for key in _LIMIT_KEYS}), **kwargs)

    for name, lowest, highest, text in reversed(_LIMITS):
        command = click.option(name, type=click.IntRange(min=lowest, max=highest), default=None, help=text)(
            command
        )
    return command


@cli.command(name="providers")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document: config, default, providers.")
def providers_(as_json: bool) -> None:
    """List agent providers — registered, named in the configuration, and presets — with the
    capability matrix: state (ready, not logged in, unavailable: not found or not usable), version, login, and yes/no/? for
    structured output, images, sandbox, network control, sessions/resume, token usage, streaming."""
    from .service import provider_report

    try:
        doc = provider_report(os.getcwd())
    except WorkflowMcpError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    auto = doc["autoPick"]
    click.echo(
        f"config: {doc['config'] or 'none'}; default: {doc['default'] or (auto and f'{auto} (auto)') or 'none'}"
    )
    click.echo("\t".join(("provider", "state", "version", "login", *_MATRIX.values(), "use")))
    for info in doc["providers"]:
        state = (
            "unavailable"
            if not info["available"]
            else "not logged in"
            if info["loggedIn"] is False
            else "ready"
        )
        login = {True: "logged in", False: "not logged in", None: "login n/a"}[info["loggedIn"]]
        caps = info["capabilities"]
        marks = ({True: "yes", False: "no", None: "?"}[caps[key]] for key in _MATRIX)
        use = info["use"] if info["use"] != info["name"] else "-"
        if info["origin"] == "preset":
            use = f"{use} (preset)"
        line = "\t".join((info["name"], state, info["version"] or "-", login, *marks, use))
        if info["login"]:
            line += f"\t({info['login']})"
        click.echo(line)
        if info["problem"]:
            install = f" — install: {info['install']}" if info["install"] and not info["available"] else ""
            click.echo(f"  {info['problem']}{install}")


_MATRIX: Final = {
    "structuredOutput": "structured",
    "images": "images",
    "sandboxControl": "sandbox",
    "networkControl": "network",
    "sessionResume": "sessions",
    "tokenUsage": "usage",
    "streaming": "streaming",
}
"""The capability columns of ``workflow-mcp providers``: JSON key -> column title (``?``: the
provider does not declare it, or it depends on the agent program)."""


_EVENTS_OPTION = click.option(
    "--events",
    "events_mode",
    type=click.Choice(["jsonl", "progress", "none"]),
    default=None,
    help="stderr: JSONL events (default when not a TTY), a live progress view (TTY default), or nothing.",
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
@_limit_options
@click.option("--profile", default=None, help="Compatibility profile (default claude-code/2.1.332).")
@click.option(
    "--resume-from",
    default=None,
    metavar="RUN_ID",
    help="Reuse the journal of an earlier run (this file, args and limits; `resume` continues a run as it was).",
)
@click.option("--policy", type=click.Choice(["content", "prefix"]), default="content", help="Resume policy.")
@click.option(
    "--confirm-above",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Preview the run first (`plan`); ask before starting it when it would make more than N agent calls.",
)
@_EVENTS_OPTION
@_sandbox_option
@_database_option
@_executor_option
def run(
    target: str,
    args_json: str | None,
    args_file: str | None,
    provider: str | None,
    fake_script: str | None,
    limits: RunLimits,
    profile: str | None,
    resume_from: str | None,
    policy: str,
    confirm_above: int | None,
    events_mode: str | None,
) -> None:
    """Run a workflow file (or a saved workflow by name); print its final value as JSON."""
    import asyncio

    target = _resolve(target)
    args = _read_args(args_json, _resolve(args_file) if args_file is not None else None)
    if policy != "content" and resume_from is None:
        _fail("--policy applies only with --resume-from RUN_ID")
    choice = _choice(provider, _resolve(fake_script) if fake_script is not None else None)
    service = _service(writing=True)

    async def prepare() -> PreparedRun:
        if confirm_above is not None:
            await service.confirm_preview(
                target,
                above=confirm_above,
                confirm=_ask_on_terminal,
                provider=choice.name,
                fake_script=choice.fake_script,
                args=args,
                limits=limits,
                profile=profile,
                cwd=os.getcwd(),
            )
        return await service.prepare_run(
            target,
            provider=choice,
            args=args,
            limits=limits,
            profile=profile,
            cwd=os.getcwd(),
            resume_from=resume_from,
            policy=policy,  # type: ignore[arg-type]  # click.Choice checked it
        )

    sys.exit(asyncio.run(_execute(service, prepare, _mode(events_mode), invalid="invalid workflow")))


async def _ask_on_terminal(report: PlanReport) -> str | None:
    """``run --confirm-above``: show the preview and ask on the terminal (``None``: go ahead)."""
    for line in report.lines():
        click.echo(f"workflow-mcp: {line}", err=True)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return (
            "there is no terminal to ask; check the preview with `workflow-mcp plan`, then raise "
            "--confirm-above or leave it out"
        )
    if click.confirm("workflow-mcp: start this run?", default=False, err=True):
        return None
    return "you declined"


@cli.command()
@click.argument("target", metavar="PATH_OR_NAME")
@click.argument("args_json", required=False, metavar="[ARGS_JSON]")
@click.option(
    "--args-file", type=str, default=None, help="Read the workflow's args (one JSON value) from a file."
)
@click.option(
    "--provider",
    default=None,
    help="Route the calls as a run with this provider would (default: the configuration decides).",
)
@click.option(
    "--fake-script", default=None, help="Script the dry run's answers (JSON, the fake provider's format)."
)
@_limit_options
@click.option("--profile", default=None, help="Compatibility profile (default claude-code/2.1.332).")
@click.option("--json", "as_json", is_flag=True, help="Print the preview as one JSON document.")
@_sandbox_option
@_database_option
def plan(
    target: str,
    args_json: str | None,
    args_file: str | None,
    provider: str | None,
    fake_script: str | None,
    limits: RunLimits,
    profile: str | None,
    as_json: bool,
) -> None:
    """Preview a run's cost without running any agent: a dry run on the synthesizing fake provider that
    counts the agent calls (in all, per phase, per provider and model after routing), estimates tokens
    and cost (from past runs of the workflow, else per-model defaults in [estimates]) and says whether
    the run would reach the 1,000-call cap or its token budget. Nothing is recorded. Exit 0 when the
    dry run completed, 1 when it failed or timed out (the preview then covers what ran), 2 bad input."""
    import asyncio

    from .service import read_fake_script

    target = _resolve(target)
    args = _read_args(args_json, _resolve(args_file) if args_file is not None else None)
    script = None
    if fake_script is not None:
        try:
            script = read_fake_script(_resolve(fake_script))
        except WorkflowMcpError as exc:
            _fail(str(exc))
    service = _service()

    async def preview() -> PlanReport:
        try:
            return await service.plan(
                target,
                provider=provider,
                fake_script=script,
                args=args,
                limits=limits,
                profile=profile,
                cwd=os.getcwd(),
            )
        finally:
            await service.shutdown("workflow-mcp stopped")

    try:
        report = asyncio.run(preview())
    except WorkflowLoadError as exc:
        _fail(f"invalid workflow: {exc}")
    except WorkflowMcpError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        click.echo("\n".join(report.lines()))
    sys.exit(0 if report.dry_run["status"] == "completed" else 1)


def _mode(events_mode: str | None) -> str:
    return events_mode or ("progress" if sys.stderr.isatty() else "jsonl")


def _tty_checkpoint_asker(view: Any) -> Callable[[Mapping[str, Any]], Awaitable[bool | None]]:
    """Put a run's human checkpoints to the user at the terminal (yes / no; end of input or Ctrl-C
    at the prompt: no answer, so the run pauses with checkpoint_required)."""
    import asyncio

    lock = asyncio.Lock()  # one question at a time

    async def ask(context: Mapping[str, Any]) -> bool | None:
        what = context.get("command") or context.get("title") or context.get("tool")
        question = f"workflow-mcp: agent [{context.get('label')}] asks permission to {context.get('tool')}: {what}. Allow?"
        async with lock:
            showing = view is not None and view.showing
            if showing:
                view.stop()
            try:
                return bool(await asyncio.to_thread(click.confirm, question, default=False, err=True))
            except (click.Abort, EOFError, OSError):
                return None
            finally:
                if showing:
                    view.start()

    return ask


async def _execute(
    service: WorkflowService, prepare: Callable[[], Awaitable[PreparedRun]], mode: str, *, invalid: str
) -> int:
    """Prepare a run (its worker starts while its source is read, and checks it: one Node process per
    run), launch it, show its events, print its value; the providers it used are closed at the end.
    Returns the exit code. ``invalid`` starts the message of a workflow that does not load."""
    import asyncio

    from .cli_watch import LiveRunView

    try:
        service.recover()
        try:
            prepared = await prepare()
        except WorkflowLoadError as exc:
            _fail(f"{invalid}: {exc}")
        except RunNotConfirmedError as exc:
            _fail(str(exc), code=1)
        except WorkflowMcpError as exc:
            _fail(str(exc))
        view = LiveRunView(prepared.workflow.meta.name) if mode == "progress" else None
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
            handle = service.launch(prepared, on_event=on_event)
        except WorkflowMcpError as exc:
            _fail(str(exc))
        if mode != "jsonl":  # JSONL's every event names the run; the other modes say it once, first
            with contextlib.suppress(OSError, ValueError):
                click.echo(f"workflow-mcp: run {handle.run_id} started", err=True)
        if sys.stdin.isatty() and sys.stderr.isatty():
            service.answer_checkpoints(handle.run_id, _tty_checkpoint_asker(view))
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
        try:
            click.echo(json.dumps(value, ensure_ascii=False))
        except OSError as exc:
            _fail(
                f"run {handle.run_id} completed, but its result could not be written to standard output: "
                f"{_os_error(exc)}; it is stored: `workflow-mcp runs show {handle.run_id} --json`",
                1,
            )
        return 0
    finally:
        await service.shutdown("workflow-mcp stopped")  # closes the providers: no agent process outlives us


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
    help="Agent provider: fake, codex, or any registered name (default: the run's own).",
)
@click.option("--fake-script", default=None, help="Script for the fake provider (JSON).")
@_limit_options
@click.option("--allow-side-effects", is_flag=True, help="Reuse recorded worktree (write-capable) calls too.")
@click.option(
    "--allow-edits", is_flag=True, help="Claude runs: accept a live copy that differs from the saved script."
)
@click.option(
    "--wait",
    is_flag=True,
    help="A run paused for a usage limit: wait until the limit resets (its resetsAt), then resume.",
)
@click.option(
    "--checkpoint-reply",
    "checkpoint_replies",
    multiple=True,
    metavar="ID=allow|deny",
    help="Answer a human checkpoint the run paused on (checkpoint_required; the id is its "
    "checkpointContext.checkpointId). Repeatable; recorded decisions replay without asking.",
)
@_EVENTS_OPTION
@_sandbox_option
@_database_option
@_executor_option
def resume(
    target: str,
    live_copy: str | None,
    policy: str | None,
    provider: str | None,
    fake_script: str | None,
    limits: RunLimits,
    allow_side_effects: bool,
    allow_edits: bool,
    wait: bool,
    checkpoint_replies: tuple[str, ...],
    events_mode: str | None,
) -> None:
    """Continue a stored run (interrupted, cancelled, paused or failed) from its journal, with its
    stored script, args, limits, profile, directory and provider (a fake keeps its script); the limit
    options may only narrow the run's own. Or import a Claude Code run (its wf_*.json record or
    transcript directory) and continue it here.

    Completed calls are replayed, never run again; a new run records what was replayed and what ran
    live. Claude's files are only read, never written."""
    import asyncio

    from .service import RunOverrides

    chosen = None if provider is None and fake_script is None else _choice(provider, fake_script)
    service = _service(writing=True)
    replies: dict[str, str] = {}
    for reply in checkpoint_replies:
        cid, sep, decision = reply.partition("=")
        if not sep or decision.strip() not in ("allow", "deny"):
            _fail(f"--checkpoint-reply {reply!r}: write it as ID=allow or ID=deny")
        replies[cid.strip()] = decision.strip()
    if os.path.exists(target):
        if replies:
            _fail("--checkpoint-reply applies only to a stored run of ours, not to a Claude Code run")

        def prepare() -> Awaitable[PreparedRun]:
            return service.prepare_claude_resume(
                target,
                live_copy,
                provider=chosen,
                policy=policy or "prefix",  # type: ignore[arg-type]  # click.Choice checked it
                allow_side_effects=allow_side_effects,
                allow_edits=allow_edits,
            )

        sys.exit(asyncio.run(_execute(service, prepare, _mode(events_mode), invalid="invalid workflow")))
    if live_copy is not None:
        _fail(f"{target!r} is a stored run of ours: WORKFLOW_JS applies only to Claude Code runs")
    overrides = RunOverrides(
        limits=limits,
        provider=chosen,
        policy=policy or "content",  # type: ignore[arg-type]  # click.Choice checked it
        checkpoint_replies=replies,
    )

    async def prepare_ours() -> PreparedRun:
        try:
            if wait:
                pause = service.seconds_until_reset(target)
                if pause > 0:
                    click.echo(
                        f"workflow-mcp: run {target} paused for a usage limit; waiting {pause:.0f} s for it "
                        "to reset (Ctrl-C stops waiting)",
                        err=True,
                    )
                    await asyncio.sleep(pause)
            return await service.prepare_resume(target, overrides)
        except RunNotFoundError:
            raise RunNotFoundError(target, also_not_a_file=True) from None

    sys.exit(
        asyncio.run(
            _execute(
                service,
                prepare_ours,
                _mode(events_mode),
                invalid=f"the stored script of {target} no longer loads",
            )
        )
    )


@cli.group()
def runs() -> None:
    """Inspect stored runs."""


@runs.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", type=click.IntRange(min=1), default=50)
@_database_option
def runs_list(as_json: bool, limit: int) -> None:
    """Recent runs, newest first, with their projected status."""
    service = _service()
    service.recover()
    items = [r.to_json() for r in service.list_runs(limit)]
    _warn_if_damaged(service)
    if as_json:
        click.echo(json.dumps({"runs": items}, ensure_ascii=False, indent=2))
        return
    click.echo("RUN\tSTATUS\tWORKFLOW\tPROVIDER\tCREATED")
    for r in items:
        damaged = f"\tdamaged: {', '.join(r['damaged'])}" if r.get("damaged") else ""
        provider = r["provider"] or "-"
        click.echo(f"{r['runId']}\t{r['status']}\t{r['workflow']}\t{provider}\t{r['createdAt']}{damaged}")


@runs.command(name="show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@_database_option
def runs_show(run_id: str, as_json: bool) -> None:
    """The projected state of one run."""
    service = _service()
    service.recover()
    try:
        state = service.status(run_id).to_json()
        damaged = service.damaged_columns(run_id)
        damaged_events = service.damaged_events(run_id)
        damaged_journal = service.damaged_journal(run_id)
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    _warn_if_damaged(service)
    if damaged:
        state["damaged"] = list(damaged)
    if damaged_events:
        state["damagedEvents"] = [
            {"sequence": e.sequence, "columns": e.payload["damaged"]["columns"]} for e in damaged_events
        ]
    if damaged_journal:
        state["damagedJournal"] = [
            {"agentId": e.agent_id, "ordinal": e.ordinal, "columns": list(e.columns)} for e in damaged_journal
        ]
    if as_json:
        click.echo(json.dumps(state, ensure_ascii=False, indent=2))
        return
    click.echo(f"{state['runId']}  {state['workflow'].get('name')}  {state['status']}")
    if damaged:
        click.echo(
            f"  damaged record: {', '.join(damaged)} cannot be read as stored (shown with U+FFFD or left "
            "out); `workflow-mcp store repair` rewrites them, keeping the original in its backup"
        )
    if damaged_events:
        cells = "; ".join(f"{d['sequence']} ({', '.join(d['columns'])})" for d in state["damagedEvents"][:20])
        click.echo(
            f"  damaged events: {cells} are read as stand-ins recording the damage (invalid bytes as "
            "U+FFFD); `workflow-mcp store repair` rewrites them, keeping the original in its backup"
        )
    if damaged_journal:
        entries = "; ".join(
            f"{e.agent_id or '(unreadable agent id)'} ({', '.join(e.columns)})" for e in damaged_journal[:20]
        )
        click.echo(
            f"  damaged journal entries: {entries} are not replayed (their calls run again on resume); "
            "`workflow-mcp store repair` rebuilds them from the run's events"
        )
    for ph in state["phases"]:
        click.echo(f"  phase {ph['title']}: {ph['status']}")
    c = state["counts"]
    click.echo(
        f"  agents: {c['completed']} completed, {c['cached']} replayed, {c['failed']} failed, "
        f"{c['cancelled']} cancelled, {c['running']} running, {c['queued']} queued"
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
    if state["status"] == "paused":
        for line in _paused_lines(state):
            click.echo(f"  {line}")
    elif state["status"] == "interrupted":
        click.echo(f"  interrupted: its process died; resume it with: workflow-mcp resume {state['runId']}")


def _paused_lines(state: dict[str, Any]) -> list[str]:
    """What ``runs show`` says of a paused run: why (``pausedReason``, with ``resetsAt`` or the
    checkpoint's request) and the command that continues it."""
    run_id, reason = state["runId"], state.get("pausedReason") or "unknown"
    resume = f"workflow-mcp resume {run_id}"
    if reason == "checkpoint_required" and isinstance(state.get("checkpointContext"), dict):
        cp = state["checkpointContext"]
        asked = " ".join(str(cp[k]) for k in ("tool", "command") if cp.get(k)) or str(cp.get("title") or "")
        return [
            f"paused: checkpoint_required: {cp.get('label') or 'an agent'} asks permission to {asked}",
            f"answer it with: {resume} --checkpoint-reply {cp.get('checkpointId')}=allow (or =deny)",
        ]
    if reason == "usage_limit":
        resets = state.get("resetsAt")
        when = f", resets at {resets}" if resets else ""
        return [f"paused: usage_limit{when}", f"resume it with: {resume} (--wait: once the limit resets)"]
    if reason == "auth_required":
        return ["paused: auth_required: the provider needs a login", f"log in, then resume it with: {resume}"]
    return [f"paused: {reason}", f"resume it with: {resume}"]


@runs.command(name="events")
@click.argument("run_id")
@click.option(
    "--after", type=click.IntRange(min=0, max=2**62), default=0, help="Only events after this sequence."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON event per line.")
@_database_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until the run ends.")
def runs_events(run_id: str, after: int, as_json: bool, follow: bool) -> None:
    """The durable events of one run (with --follow, also those still to come, until it ends)."""
    import asyncio

    service = _service()

    def show(events: list[Any]) -> None:
        for e in events:
            if as_json:
                click.echo(json.dumps(e.to_json(), ensure_ascii=False))
            else:
                click.echo(
                    f"{e.sequence:6d} {e.timestamp} {e.type} {json.dumps(e.payload, ensure_ascii=False)[:160]}"
                )

    try:
        events = service.events(run_id, after)
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    _warn_if_damaged(service)
    show(events)
    if not follow:
        return

    from .state import TERMINAL

    async def follow_events(cursor: int) -> None:
        # The durable cursor: each answer continues after the last event printed, so none is skipped
        # or repeated; the loop ends once the run has ended and every event of it is printed.
        while True:
            batch = await service.wait_events(run_id, cursor, 500, wait_ms=1000)
            show(batch)
            if batch:
                cursor = batch[-1].sequence
            elif service.run_status(run_id) in TERMINAL:  # ended, and its last event printed
                return

    try:
        asyncio.run(follow_events(events[-1].sequence if events else after))
    except KeyboardInterrupt:
        sys.exit(130)


@runs.command(name="watch")
@click.argument("run_id")
@_database_option
def runs_watch(run_id: str) -> None:
    """Watch one run live: phases with progress bars, running agents with their clocks, the queue,
    recent logs, tokens and the final status. Exits 0 once the run completed, 1 when it ended otherwise."""
    import asyncio

    from .cli_watch import watch_run

    service = _service()
    service.recover()
    try:
        final = asyncio.run(watch_run(service, run_id))
    except WorkflowNotFoundError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0 if final.status == "completed" else 1)


@runs.command(name="cancel")
@click.argument("run_id")
@click.option("--reason", default="cancelled by the user", help="Recorded in run.cancellation_requested.")
@_database_option
def runs_cancel(run_id: str, reason: str) -> None:
    """Cancel a running run (also one owned by another workflow-mcp process), or give up on a paused
    or interrupted one: it becomes cancelled and is never resumed."""
    service = _service()
    try:
        outcome = service.cancel(run_id, reason)
    except (WorkflowNotFoundError, RunContinuedError) as exc:
        _fail(str(exc))
    if outcome == "closed":
        click.echo(f"{run_id}: cancelled; it had ended paused or interrupted and will not be resumed")
    elif outcome == "requested":
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
@_database_option
def runs_export(run_ids: tuple[str, ...], out_path: str | None) -> None:
    """Write runs (all, or RUN_ID...) and their events as JSON lines, even from a damaged database.

    Lines: {"kind": "run", "run": {...}}, then {"kind": "event", "event": {...}} per event, and
    {"kind": "problem", "runId", "message"} for each part that could not be read. Only reads. Exit 0
    when everything was read, 1 when something could not be."""
    from .service import export_runs

    _sqlite_only("runs export")
    try:
        with contextlib.ExitStack() as stack:
            out: Any = sys.stdout
            if out_path is not None and _regular_or_missing(out_path):
                # A new 0600 file renamed over --out at the end: prompts and args go here, and a failed
                # export (a full disk) leaves an earlier file as it was.
                out = stack.enter_context(written_in_place(out_path, mode=0o600))
            elif out_path is not None:  # a FIFO or a device (/dev/stdout): written as it is
                fd = os.open(out_path, os.O_WRONLY)
                out = stack.enter_context(os.fdopen(fd, "w", encoding="utf-8"))
            report = export_runs(list(run_ids) or None, out)
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        if out_path is None:
            _fail(
                f"cannot write standard output: {_os_error(exc)}; the export written there is incomplete", 1
            )
        _fail(f"cannot write --out {out_path!r}: {_os_error(exc)}; nothing was changed there", 1)
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
@_database_option
def store_check() -> None:
    """Run SQLite's integrity check and read every run's record and events. Exit 0 sound, 1 damaged
    (damaged pages: then nothing more is written to it; damaged cells of a run's record or of its
    events: `store repair` rewrites them)."""
    from .service import check_store, damaged_cells, state_database

    _sqlite_only("store check")
    path = state_database()
    try:
        problems = check_store()
        cells = damaged_cells() if not problems else []
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    if cells:
        for line in cells[:20]:
            click.echo(f"{path}: {line}", err=True)
        more = f" (and {len(cells) - 20} more)" if len(cells) > 20 else ""
        click.echo(
            f"workflow-mcp: {path}: {len(cells)} damaged run record(s), event logs or journals{more}; their runs are "
            "still listed and shown (a damaged event as a stand-in naming its sequence and columns). Stop other workflow-mcp processes, then run `workflow-mcp store repair` to "
            "rewrite them (the original is kept in a backup)",
            err=True,
        )
        sys.exit(1)
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
@_database_option
def store_repair() -> None:
    """Copy state.db to state.db.bak-<timestamp>, rebuild it (VACUUM INTO, or run by run when pages
    are damaged), check the result and put it in place. Stop every other workflow-mcp process first."""
    from .service import repair_store, state_database

    _sqlite_only("store repair")
    path = state_database()
    try:
        report = repair_store()
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    how = "VACUUM INTO" if report.method == "vacuum" else "salvaging run by run"
    click.echo(
        f"{path}: rebuilt by {how}: {report.runs} run(s) and {report.events} event(s) kept; "
        f"the original is at {report.backup}"
    )
    for problem in report.problems:
        click.echo(f"workflow-mcp: {problem}", err=True)


def _regular_or_missing(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError as exc:
        _fail(f"cannot write --out {path!r}: {_os_error(exc)}")


@cli.group()
def approvals() -> None:
    """Source approvals: the workflow sources the MCP server runs without asking (per client), kept in
    $WORKFLOW_MCP_HOME/approvals.json. Pre-approve here what a headless client (one that cannot show
    an approval question) will run."""


_CLIENT_OPTION = click.option(
    "--client",
    default=None,
    metavar="NAME",
    help="The HTTP client (the NAME of its NAME=TOKEN entry) the approval is for; default: the local "
    "user (stdio servers and the CLI).",
)


def _trust() -> Any:
    from .server import SourceTrust, approvals_file
    from .service import state_database

    home = state_database().parent
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # as the store would create it
    return SourceTrust(approvals_path=approvals_file(str(home)))


def _approval_target(path: str | None, sha256: str | None) -> tuple[str, str, str | None]:
    """``(source_hash, name, path)`` of what ``approvals add|revoke`` names: a workflow file, or a
    source hash (of an inline script: SHA-256 of its UTF-8 text)."""
    if (path is None) == (sha256 is None):
        _fail("name one workflow FILE or --sha256 HASH")
    if sha256 is not None:
        digest = sha256.strip().lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            _fail(f"--sha256 {sha256!r} is not a SHA-256 (64 hexadecimal digits)")
        return digest, "", None
    from .definitions.load import load_workflow

    assert path is not None
    file = os.path.abspath(_resolve(path))
    workflow = load_workflow(file, check_syntax=False)  # WorkflowLoadError / not found: exit 2 in main
    return workflow.source_hash, workflow.meta.name, workflow.path or file


@approvals.command(name="list")
@click.option("--json", "as_json", is_flag=True, help='Print {"approvals": [...]} as JSON.')
def approvals_list(as_json: bool) -> None:
    """Every approval: source hash, the client it is for, the workflow's name and file, and when."""
    trust = _trust()
    entries = trust.approvals()
    if as_json:
        click.echo(json.dumps({"approvals": entries}, indent=2, ensure_ascii=False))
        return
    if not entries:
        click.echo("no approvals")
    for e in entries:
        who = "local user" if e["by"] is None else f"client {e['by'].removeprefix('http:')}"
        what = " ".join(x for x in (e["name"] or "(by hash)", e["path"] or "") if x)
        click.echo(f"{e['sourceHash']}  {who}  {what}  {e['approvedAt']}")


@approvals.command(name="add")
@click.argument("path", required=False, metavar="[FILE]")
@click.option(
    "--sha256", default=None, metavar="HASH", help="Approve this source hash (e.g. an inline script's)."
)
@_CLIENT_OPTION
def approvals_add(path: str | None, sha256: str | None, client: str | None) -> None:
    """Approve the exact current source of FILE (or --sha256 HASH) so workflow_run runs it without
    asking; a changed file needs approving again. A running server sees it on its next call."""
    digest, name, file = _approval_target(path, sha256)
    by = None if client is None else f"http:{client}"
    _trust().approve(digest, name=name, path=file, by=by)
    who = "the local user" if by is None else f"client {client}"
    click.echo(f"approved {digest} ({name or 'by hash'}) for {who}")


@approvals.command(name="revoke")
@click.argument("path", required=False, metavar="[FILE]")
@click.option("--sha256", default=None, metavar="HASH", help="Revoke this source hash.")
@_CLIENT_OPTION
def approvals_revoke(path: str | None, sha256: str | None, client: str | None) -> None:
    """Withdraw the approval of FILE's current source (or --sha256 HASH). Exit 1 when there was none."""
    digest, _, _ = _approval_target(path, sha256)
    by = None if client is None else f"http:{client}"
    who = "the local user" if by is None else f"client {client}"
    if not _trust().revoke(digest, by=by):
        _fail(f"{digest} is not approved for {who}; nothing to revoke", 1)
    click.echo(f"revoked {digest} for {who}")


#: The ``serve`` parameters only a Streamable HTTP server has (binding, Host checks, connection and
#: session limits, per-client shares): a stdio server has one client on one pipe.
HTTP_ONLY_OPTIONS = (
    "host",
    "port",
    "allowed_hosts",
    "max_connections",
    "max_client_runs",
    "max_client_connections",
    "max_sessions",
    "max_client_sessions",
    "session_idle_timeout",
    "header_timeout",
)


def _refuse_http_options(ctx: click.Context) -> None:
    """Exit 2 naming each HTTP-only option given on the command line of a stdio ``serve``: it would
    change nothing, and a user who typed it expects it to."""
    given = [
        p.opts[0]
        for p in ctx.command.params
        if p.name in HTTP_ONLY_OPTIONS and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE
    ]
    if given:
        options = ", ".join(given)
        _fail(
            f"{options} {'is an option' if len(given) == 1 else 'are options'} of the HTTP server and would "
            f"change nothing on stdio: add --http to serve Streamable HTTP, or drop {options}"
        )


@cli.command()
@click.option(
    "--http", "use_http", is_flag=True, help="Serve Streamable HTTP (bearer token) instead of stdio."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="HTTP bind address; keep it loopback unless remote clients need it (0.0.0.0 or :: answers "
    "this machine's name and addresses; more names with --allowed-host).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="HTTP port.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]|*",
    help="HTTP: also answer requests whose Host header is NAME (with the port, or none behind a proxy) or "
    "NAME:PORT (repeatable). '*' answers any Host (bearer tokens still required; refused on loopback). "
    "Loopback names, the bound address and, for 0.0.0.0/::, this machine's name and the address a "
    "connection arrived on are always answered.",
)
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
    "--max-client-runs",
    type=click.IntRange(1),
    default=None,
    help="HTTP: runs one client (bearer token) runs at once; more are refused until one of its runs ends. "
    "Default: an equal share of --max-runs among the configured tokens.",
)
@click.option(
    "--max-client-connections",
    type=click.IntRange(1),
    default=None,
    help="HTTP: requests and streams one client may have open at once; beyond it 429. Default: an equal "
    "share of half of --max-connections among the configured tokens (the rest is headroom for idle "
    "keep-alive and unauthenticated connections).",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(1),
    default=256,
    show_default=True,
    help="HTTP: Streamable HTTP sessions (handshake-era clients) held at once; a new one beyond it gets 503.",
)
@click.option(
    "--max-client-sessions",
    type=click.IntRange(1),
    default=None,
    help="HTTP: sessions one client may hold; beyond it 429. Default: an equal share of --max-sessions "
    "among the configured tokens.",
)
@click.option(
    "--session-idle-timeout",
    type=click.FloatRange(1, 7 * 86400),
    default=1800.0,
    show_default=True,
    metavar="SECONDS",
    help="HTTP: a session with no request in flight (no call, no open stream) for this long is closed; the "
    "client then opens a new one.",
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
@click.option(
    "--confirm-above",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Preview each new run (a dry run, as workflow_plan) and ask the user before starting one that "
    "makes more than N agent calls.",
)
@click.option(
    "--allow-inline-scripts",
    "allow_inline",
    is_flag=True,
    help="Run every inline workflow_run script without asking for approval. RISK: the client then runs "
    "any JavaScript it writes on this machine, with the providers' powers; only for a stdio server whose "
    "client is your own agent (refused with --http).",
)
@click.option(
    "--auto-resume/--no-auto-resume",
    "auto_resume",
    default=None,
    help="Resume the runs that paused for a usage limit (this server's, and those in the store of the local "
    "user on stdio, or of its tokens over HTTP) once the limit has reset (their "
    "resetsAt), at most [auto_resume] attempts times with backoff; never a run paused for a login or a "
    "checkpoint. Default: the configuration's [auto_resume] enabled (off).",
)
@_sandbox_option
@_database_option
@_executor_option
def serve(
    use_http: bool,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    trust_dirs: tuple[str, ...],
    max_runs: int,
    max_connections: int,
    max_client_runs: int | None,
    max_client_connections: int | None,
    max_sessions: int,
    max_client_sessions: int | None,
    session_idle_timeout: float,
    header_timeout: float,
    confirm_above: int | None,
    allow_inline: bool,
    auto_resume: bool | None,
) -> None:
    """Serve the workflow tools over MCP: stdio (default; stdout carries only JSON-RPC) or Streamable
    HTTP at http://HOST:PORT/mcp (token from WORKFLOW_MCP_TOKEN or $WORKFLOW_MCP_HOME/http-token)."""
    from .server import ServerPolicy, run_server

    if not use_http:
        _refuse_http_options(click.get_current_context())
    for d in trust_dirs:
        if not os.path.isdir(d):
            _fail(f"--trust {d!r} is not a directory")
    if allow_inline and use_http:
        _fail(
            "--allow-inline-scripts is for a stdio server whose client is your own agent; over HTTP every "
            "token holder could run any JavaScript here. Pre-approve scripts with `workflow-mcp approvals "
            "add --client NAME --sha256 H` instead"
        )
    limits = None
    if use_http:  # stdio never loads the HTTP side (its first answer must not wait for it)
        from .server.http import HttpLimits

        limits = HttpLimits(
            max_connections=max_connections,
            max_client_connections=max_client_connections,
            max_sessions=max_sessions,
            max_client_sessions=max_client_sessions,
            session_idle_s=session_idle_timeout,
            header_timeout_s=header_timeout,
        )
    service = _service()
    from ._auto_resume import auto_resume_settings

    enabled, resume_settings = auto_resume_settings(service.cwd)
    sys.exit(
        run_server(
            service,
            http=use_http,
            host=host,
            port=port,
            trust_dirs=trust_dirs,
            state_dir=service.state_dir,
            policy=ServerPolicy(
                max_runs=max_runs, max_client_runs=max_client_runs, confirm_above=confirm_above
            ),
            limits=limits,
            allowed_hosts=allowed_hosts,
            allow_inline=allow_inline,
            auto_resume=resume_settings if (enabled if auto_resume is None else auto_resume) else None,
        )
    )


# -- the workflow library ----------------------------------------------------------------------
@cli.group()
def library() -> None:
    """Create, version, tag, draft, describe, list and delete workflows. The file written is exactly the
    source given (Claude Code runs it unchanged); versions, tags, category and drafts live in the state
    database (the SQLite file, or the PostgreSQL database of --database-url). Refusals exit 1 with a
    typed reason, e.g. `... [already_exists]`."""


_LIBRARY_NEXT_STEPS: Final = (
    ("call workflow_list to see what exists", "`workflow-mcp library list` shows what exists"),
    (
        "call workflow_delete again to see the current target",
        "run the same `workflow-mcp library delete` without --confirm to see the current target",
    ),
    (
        "call workflow_delete again",
        "run the same `workflow-mcp library delete` without --confirm for a new token",
    ),
    ("delete it with workflow_delete first", "delete it with `workflow-mcp library delete NAME` first"),
    ("create one with workflow_create_draft", "create one with `workflow-mcp library create FILE --draft`"),
    ("create one with workflow_create", "create one with `workflow-mcp library create FILE`"),
)
"""The library's next steps name its MCP tools; on the command line each is the command that does it."""


def _library_words(text: str) -> str:
    """``text`` (a library message or hint) with each MCP tool it tells the caller to use replaced by
    the ``workflow-mcp library`` command that does the same (:data:`_LIBRARY_NEXT_STEPS`)."""
    for tool, command in _LIBRARY_NEXT_STEPS:
        text = text.replace(tool, command)
    return text


def _library_failed(exc: WorkflowMcpError, as_json: bool, source: str | None = None) -> NoReturn:
    """Report a refused library call and exit 1: ``workflow-mcp: MESSAGE [reason]`` (``--json``: also
    the ``{"reason", "message", "errors"}`` document on stdout), then each loader error of an
    invalid source as ``SOURCE:LINE:COLUMN: error: …`` (``source``: the file given, or ``<stdin>``)."""
    from .errors import LibraryError

    if isinstance(exc, LibraryError):
        if as_json:
            click.echo(json.dumps(exc.to_json(), ensure_ascii=False, indent=2))
        if exc.reason == "invalid_source" and source is not None and exc.errors:
            message = f"{source}: the source breaks {len(exc.errors)} loading rule(s); nothing was written"
        else:
            message = _library_words(exc.detail)
        click.echo(f"workflow-mcp: {message} [{exc.reason}]", err=True)
        for e in exc.errors:
            line = f":{e['line']}" + (f":{e['column']}" if e.get("column") else "") if e.get("line") else ""
            where = source or e.get("path") or "<source>"
            click.echo(f"{where}{line}: error: {e['message']} [{e['rule']}]", err=True)
        sys.exit(1)
    _fail(str(exc), 1)


def _tags(text: str) -> list[str]:
    return [t for t in (part.strip() for part in text.split(",")) if t] if text else []


@library.command(name="create")
@_database_option
@click.argument("file", metavar="FILE|-")
@click.option("--version", "version", default=None, help="Semantic version (default 1.0.0 for a new name).")
@click.option("--tags", default="", help="Comma-separated tags, e.g. ops,release.")
@click.option("--category", default=None, help="Category.")
@click.option("--author", default=None, help="Author.")
@click.option("--personal", is_flag=True, help="Write to ~/.claude/workflows instead of the project.")
@click.option("--draft", is_flag=True, help="Keep it as a draft in the library only (no file).")
@click.option("--expires-in", type=click.IntRange(min=1), default=None, help="Draft expiry, in seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def library_create(
    file: str,
    version: str | None,
    tags: str,
    category: str | None,
    author: str | None,
    personal: bool,
    draft: bool,
    expires_in: int | None,
    as_json: bool,
) -> None:
    """Validate FILE (or stdin with -) and store it: as .claude/workflows/<slug>.js, or as a draft."""
    if version is not None and draft:
        _fail("--version is for permanent workflows; a draft has none (drop --draft or --version)")
    if expires_in is not None and not draft:
        _fail("--expires-in is for drafts (add --draft)")
    if file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(_resolve(file), encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"cannot read {file}: {exc}")
    service = _service(writing=True)
    try:
        if draft:
            saved = service.library.create_draft(
                text, tags=_tags(tags), category=category, author=author, expires_in_s=expires_in,
                personal=personal,
            )  # fmt: skip
            d = saved.draft
            doc: dict[str, Any] = {
                "status": saved.status, "draftId": d.draft_id, "name": d.name, "runAs": f"{d.name}@draft",
                "createdAt": d.created_at, "expiresAt": d.expires_at,
            }  # fmt: skip
            run_as = shlex.quote(f"{d.name}@draft")
            line = f"draft {saved.status}: {d.name} ({d.draft_id}); run it with: workflow-mcp run {run_as}"
        else:
            created = service.library.create(
                text, version=version, tags=_tags(tags), category=category, author=author, personal=personal
            )
            e = created.entry
            doc = {
                "status": "created", "name": e.name, "version": e.version, "file": created.file,
                "sourceHash": e.source_hash, "previousVersion": created.previous_version,
                "promotedDraft": created.promoted_draft,
            }  # fmt: skip
            line = f"created {e.name}@{e.version}: {created.file}"
    except WorkflowMcpError as exc:
        _library_failed(exc, as_json, "<stdin>" if file == "-" else file)
    finally:
        service.store.close()
    click.echo(json.dumps(doc, ensure_ascii=False, indent=2) if as_json else line)


@library.command(name="list")
@_database_option
@click.option("--query", default=None, help="Case-insensitive text in the name or description.")
@click.option("--category", default=None, help="Case-insensitive text in the category.")
@click.option("--tag", "tag_list", multiple=True, help="A tag that must be present (repeat for several).")
@click.option("--drafts", is_flag=True, help="Include drafts.")
@click.option("--json", "as_json", is_flag=True, help="Print {workflows, filters, hint} as JSON.")
def library_list(
    query: str | None, category: str | None, tag_list: tuple[str, ...], drafts: bool, as_json: bool
) -> None:
    """The workflows visible from here, with their library version, tags and category."""
    service = _service()
    try:
        found = service.list_workflows()
        listing = service.library.list(
            found.workflows, query=query, category=category, tags=tag_list, include_drafts=drafts
        )
    except WorkflowMcpError as exc:
        _library_failed(exc, as_json)
    finally:
        service.store.close()
    rows: list[dict[str, Any]] = [
        {
            "name": w.name,
            "kind": w.kind,
            "version": w.version,
            "tags": list(w.tags),
            "category": w.category,
            "source": w.source,
            "path": w.path,
            "description": w.description,
        }
        for w in listing.workflows
    ]
    if as_json:
        click.echo(
            json.dumps(
                {"workflows": rows, "filters": listing.filters, "hint": listing.hint},
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    for r in rows:
        name = f"{r['name']}@draft" if r["kind"] == "draft" else r["name"]
        click.echo(
            f"{name}\t{r['version'] or '-'}\t{','.join(r['tags']) or '-'}\t{r['category'] or '-'}\t{r['description']}"
        )
    if listing.hint:
        click.echo(f"workflow-mcp: {_library_words(listing.hint)}", err=True)


@library.command(name="describe")
@_database_option
@click.argument("name")
@click.option("--version", "version", default=None, help="A stored version (default: the current file).")
@click.option("--draft", is_flag=True, help="The draft of NAME.")
@click.option("--source", "source_only", is_flag=True, help="Print only the source.")
@click.option("--json", "as_json", is_flag=True, help="Print the source and metadata as JSON.")
def library_describe(name: str, version: str | None, draft: bool, source_only: bool, as_json: bool) -> None:
    """A workflow's current (or a stored version's, or its draft's) source and library metadata, with the
    global instructions."""
    service = _service()
    try:
        d = service.library.describe(name, version=version, draft=draft)
    except WorkflowMcpError as exc:
        _library_failed(exc, as_json)
    finally:
        service.store.close()
    if source_only:
        click.echo(d.source, nl=False)
        return
    doc = {
        "name": d.name, "kind": d.kind, "version": d.version, "current": d.current, "scope": d.scope,
        "file": d.file, "tags": list(d.tags), "category": d.category, "author": d.author, "fields": d.fields,
        "versions": list(d.versions), "draftId": d.draft_id, "createdAt": d.created_at,
        "expiresAt": d.expires_at, "sourceHash": d.source_hash, "globalInstructions": d.global_instructions,
        "source": d.source,
    }  # fmt: skip
    if as_json:
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    label = f"{d.name}@{d.version}" if d.version else (f"{d.name}@draft" if d.kind == "draft" else d.name)
    click.echo(f"{label} ({d.kind}{', current' if d.current else ''}{', ' + d.file if d.file else ''})")
    click.echo(
        f"versions: {', '.join(d.versions) or '-'}; tags: {', '.join(d.tags) or '-'}; category: {d.category or '-'}"
    )
    if d.global_instructions is not None:
        click.echo(f"global instructions:\n{d.global_instructions}")
    click.echo(d.source, nl=False)


@library.command(name="delete")
@_database_option
@click.argument("name")
@click.option("--version", "version", default=None, help="One stored version (default: the current file).")
@click.option("--draft", is_flag=True, help="Delete the draft of NAME.")
@click.option("--personal", is_flag=True, help="Look in ~/.claude/workflows only.")
@click.option("--yes", is_flag=True, help="Do not ask (the target is still printed).")
@click.option("--confirm", "token", default=None, help="The token a non-interactive first call printed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def library_delete(
    name: str, version: str | None, draft: bool, personal: bool, yes: bool, token: str | None, as_json: bool
) -> None:
    """Delete a workflow's file (or one stored version, or its draft) after confirmation: asked on a
    terminal; otherwise the first call prints a single-use token (valid 10 minutes) to pass back with
    --confirm. Nothing outside the workflows directories is ever removed."""
    service = _service(writing=True)
    lib = service.library
    try:
        if token is None:
            prompt = lib.prepare_delete(
                name, version=version, draft=draft, personal=True if personal else None
            )
            interactive = sys.stdin.isatty() and not as_json
            if not yes and not interactive:
                asked: dict[str, Any] = {
                    "status": "confirmation_required", "name": prompt.name, "version": prompt.version,
                    "file": prompt.file, "confirmToken": prompt.token, "expiresAt": prompt.expires_at,
                }  # fmt: skip
                if as_json:
                    click.echo(json.dumps(asked, ensure_ascii=False, indent=2))
                else:
                    click.echo(prompt.message)
                    click.echo(
                        f"to delete it, run: workflow-mcp library delete {shlex.quote(name)} --confirm {prompt.token}"
                    )
                return
            click.echo(prompt.message, err=True)
            if not yes and not click.confirm("Delete?", default=False, err=True):
                lib.discard_delete(prompt.token)
                _fail(f"not deleted: {name!r} [cancelled]", 1)
            token = prompt.token
        deleted = lib.confirm_delete(token)
    except WorkflowMcpError as exc:
        _library_failed(exc, as_json)
    finally:
        service.store.close()
    doc: dict[str, Any] = {
        "status": "deleted", "name": deleted.name, "kind": deleted.kind, "version": deleted.version,
        "file": deleted.file, "removedFile": deleted.removed_file, "removedDirectory": deleted.removed_directory,
    }  # fmt: skip
    what = f"{deleted.name}@{deleted.version}" if deleted.version else deleted.name
    click.echo(
        json.dumps(doc, ensure_ascii=False, indent=2)
        if as_json
        else f"deleted {what}" + (f" ({deleted.file})" if deleted.file else "")
    )


# -- the run viewer -------------------------------------------------------------------------------
@cli.command(name="ui")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default)."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8766,
    show_default=True,
    help="HTTP port (0: any free port).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="A connection that sends no complete request (head and body) within this time of connecting "
    "or of its previous response is closed.",
)
@_database_option
def ui(host: str, port: int, header_timeout: float) -> None:
    """Serve the run viewer for your runs at http://HOST:PORT/ui/ and print its sign-in URL (it opens
    nothing by itself). The URL carries a token made for this process; stop with Ctrl-C."""
    import asyncio

    from .server.http import HttpLimits, serve_viewer

    service = _service()
    service.recover()

    def ready(url: str) -> None:
        click.echo(f"workflow-mcp: the run viewer is at {url}", err=True)
        click.echo(url)

    try:
        limits = HttpLimits(header_timeout_s=header_timeout)
        asyncio.run(serve_viewer(service, host=host, port=port, on_ready=ready, limits=limits))
    except KeyboardInterrupt:
        sys.exit(130)


class _Diagnostics(io.TextIOBase):
    """Standard error for diagnostics that must never stop the program: a line that cannot be written
    (stderr redirected to a file on a full disk, a closed pipe) is dropped, and :attr:`dropped` counts
    them. Everything else (encoding, ``fileno``, ``isatty``) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self.dropped = 0

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            self.dropped += 1
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self.dropped += 1

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._stream.errors


def main() -> None:
    """Console entry point: expected errors become one line on stderr; unexpected ones too, with the
    traceback only when ``WORKFLOW_MCP_DEBUG`` is set. A diagnostic that cannot be written (stderr on a
    full disk) is dropped: it never stops a command or a server."""
    if sys.stderr is not None and not isinstance(sys.stderr, _Diagnostics):
        sys.stderr = _Diagnostics(sys.stderr)
    try:
        cli(standalone_mode=True)
    except (InvalidInputError, WorkflowLoadError, WorkflowNotFoundError) as exc:
        _fail(str(exc))
    except WorkflowMcpError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except OSError as exc:
        if os.environ.get("WORKFLOW_MCP_DEBUG"):
            raise
        # Not a file the command names (those are reported where they are written): its output.
        where = f"writing {exc.filename}" if exc.filename else "writing to standard output or error"
        _fail(
            f"{where} failed: {_os_error(exc)}; whatever the command stored stays stored "
            "(`workflow-mcp runs list`)",
            1,
        )
    except Exception as exc:  # the top-level handler: never show a traceback by default
        if os.environ.get("WORKFLOW_MCP_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set WORKFLOW_MCP_DEBUG=1 for details)", 1)


if __name__ == "__main__":  # pragma: no cover
    main()
