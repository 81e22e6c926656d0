"""Server policy: who is calling (:class:`Principal`), the limits a caller may not exceed
(:class:`ServerPolicy`), and which workflow sources may run without asking (:class:`SourceTrust`).

Security defaults (DESIGN.md, "Security defaults"): workflow source runs only after explicit approval
of its source hash, or when the file lies under a directory the server was told to trust; callers may
narrow limits but never widen the server's.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..events import utc_now

__all__ = ["DEFAULT_MAX_RUNS", "LOCAL", "Principal", "ServerPolicy", "SourceTrust"]

DEFAULT_MAX_RUNS = 16
"""Concurrent runs one server allows unless told otherwise (about 800 MB of Node workers)."""


@dataclass(frozen=True)
class Principal:
    """The caller of one request.

    ``owner`` is recorded on the runs it starts. A ``scoped`` principal (an HTTP bearer token) sees
    only runs with exactly its owner; an unscoped one (the local user on stdio) sees every run.
    """

    owner: str | None
    scoped: bool

    def may_see(self, run_owner: str | None) -> bool:
        return not self.scoped or run_owner == self.owner


LOCAL = Principal(owner=None, scoped=False)
"""The local user (stdio): sees every run, including the CLI's."""


@dataclass(frozen=True)
class ServerPolicy:
    """What the server allows. Each ``max_*`` is a ceiling applied to every run it starts or resumes
    (``WorkflowService`` applies it with ``RunLimits.within``; ``None``: no ceiling
    beyond the engine's own, e.g. profile claude-code/2.1.332's 1,000 agent calls)."""

    max_concurrency: int | None = None
    max_token_budget: int | None = None
    max_agents: int | None = None
    max_agent_timeout_ms: int | None = None
    #: Longest foreground wait of workflow_run / workflow_run_events / workflow_run_await.
    max_wait_ms: int = 25_000
    #: The providers callers may name; ``None``: every registered provider (see providers_list).
    providers: tuple[str, ...] | None = None
    #: Runs this server runs at once (``workflow-mcp serve --max-runs N``); each holds its own Node
    #: worker (about 50 MB). A call beyond it is refused with an isError result, nothing started.
    #: ``None``: no cap.
    max_runs: int | None = DEFAULT_MAX_RUNS
    #: ``workflow-mcp serve --confirm-above N``: workflow_run previews a new run (a dry run, as
    #: workflow_plan) and asks the user (form elicitation) before starting one that makes more than N
    #: agent calls; a client that cannot ask passes ``confirmAgentCalls``. ``None``: never asks.
    confirm_above: int | None = None


@dataclass
class SourceTrust:
    """Which workflow sources may run: files under ``trusted_dirs``, and source hashes approved before
    (kept in ``approvals_path``, a JSON file written with 0600 permissions; ``None`` keeps approvals in
    memory only)."""

    trusted_dirs: tuple[str, ...] = ()
    approvals_path: str | None = None
    _approved: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loaded: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        dirs = []
        for d in self.trusted_dirs:
            if not os.path.isdir(d):
                raise InvalidInputError(f"--trust {d!r} is not a directory")
            dirs.append(os.path.realpath(d))
        self.trusted_dirs = tuple(dirs)

    def trusted_dir_of(self, path: str | None) -> str | None:
        """The trusted directory that contains ``path`` (symbolic links resolved), or ``None``."""
        if path is None:
            return None
        real = os.path.realpath(path)
        for d in self.trusted_dirs:
            if real == d or real.startswith(d.rstrip(os.sep) + os.sep):
                return d
        return None

    def is_approved(self, source_hash: str) -> bool:
        self._load()
        with self._lock:
            return source_hash in self._approved

    def allows(self, source_hash: str, path: str | None) -> bool:
        """Whether this exact source may run without asking."""
        return self.trusted_dir_of(path) is not None or self.is_approved(source_hash)

    def approve(self, source_hash: str, *, name: str, path: str | None, by: str | None) -> None:
        """Record that the user approved ``source_hash`` (persisted when ``approvals_path`` is set)."""
        self._load()
        with self._lock:
            self._approved[source_hash] = {"name": name, "path": path, "by": by, "approvedAt": utc_now()}
            if self.approvals_path is not None:
                _write_private(self.approvals_path, json.dumps({"approved": self._approved}, indent=2))

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            if self.approvals_path is None or not os.path.exists(self.approvals_path):
                return
            try:
                data = json.loads(Path(self.approvals_path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InvalidInputError(
                    f"the source approvals file {self.approvals_path} is unreadable ({exc}); move it aside"
                ) from exc
            approved = data.get("approved") if isinstance(data, dict) else None
            if isinstance(approved, dict):
                self._approved.update({k: v for k, v in approved.items() if isinstance(v, dict)})


def _write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically with 0600 permissions."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", text=True)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
