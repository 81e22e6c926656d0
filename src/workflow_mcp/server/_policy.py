"""Server policy: who is calling (:class:`Principal`), the limits a caller may not exceed
(:class:`ServerPolicy`), and which workflow sources may run without asking (:class:`SourceTrust`).

Security defaults (DESIGN.md, "Security defaults"): workflow source runs only after explicit approval
of its source hash, or when the file lies under a directory the server was told to trust; callers may
narrow limits but never widen the server's.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._safe_files import opened_directory, replace_file_in
from ..errors import FileWriteError, InvalidInputError
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
    #: Runs one scoped client (an HTTP bearer token) runs at once (``--max-client-runs N``), so one
    #: client cannot take every ``max_runs`` slot; the local user (stdio) has no share of its own.
    #: ``None``: no per-client cap (``run_server`` gives HTTP servers an equal share of ``max_runs``
    #: among the configured tokens unless told otherwise).
    max_client_runs: int | None = None


APPROVALS_VERSION = 2
_HASH = re.compile(r"^[0-9a-f]{64}$")
_V2_ENTRY = re.compile(r"\{[^{}]*\}")
_V1_ENTRY = re.compile(r'"([0-9a-f]{64})"\s*:\s*(\{[^{}]*\})')


@dataclass
class SourceTrust:
    """Which workflow sources may run: files under ``trusted_dirs`` (for everyone), and source hashes a
    principal approved before — for that principal only (``by``: its ``owner``; ``None`` is the local
    user), so one HTTP client's approval never lets another client run anything.

    Approvals are kept in ``approvals_path`` (``None``: in memory only), a JSON file written atomically
    with 0600 permissions::

        {"version": 2, "approvals": [{"sourceHash": "<sha256>", "by": "http:alice" | null,
                                      "name": "...", "path": "..." | null, "approvedAt": "..."}]}

    (version 1, ``{"approved": {"<sha256>": {"name", "path", "by", "approvedAt"}}}``, is read too: each
    entry stays with the principal that approved it). Each approval is re-read and merged under a lock
    before the file is written, so two servers sharing it lose nothing of each other's. A damaged file
    (not JSON, or entries that are not approvals) is copied beside itself as
    ``approvals.json.damaged-<UTC time>`` (0600) before anything is written; every approval still legible
    in it is kept, and a warning on stderr (also in :attr:`problems`) names the copy and says how many
    entries could not be read.
    """

    trusted_dirs: tuple[str, ...] = ()
    approvals_path: str | None = None
    #: ``workflow-mcp serve --allow-inline-scripts``: every inline ``script`` (a source with no file)
    #: runs without asking, for everyone. Only for a server whose clients are the user's own agents: an
    #: inline script is JavaScript the client wrote, run on this machine with the providers' powers.
    allow_inline: bool = False
    problems: list[str] = field(default_factory=list, repr=False)
    _approved: dict[tuple[str | None, str], dict[str, Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loaded: bool = field(default=False, repr=False)
    _stamp: tuple[int, int, int] | None = field(default=None, repr=False)

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

    def is_approved(self, source_hash: str, by: str | None) -> bool:
        """Whether the principal whose owner is ``by`` approved ``source_hash`` (the file is read again
        when another process changed it since, e.g. ``workflow-mcp approvals add`` or ``revoke``)."""
        self.load()
        self._refresh()
        with self._lock:
            return (by, source_hash) in self._approved

    def allows(self, source_hash: str, path: str | None, by: str | None) -> bool:
        """Whether this exact source may run without asking the principal whose owner is ``by``
        (``path`` ``None``: an inline script, which :attr:`allow_inline` lets run)."""
        if path is None and self.allow_inline:
            return True
        return self.trusted_dir_of(path) is not None or self.is_approved(source_hash, by)

    def approvals(self) -> list[dict[str, Any]]:
        """Every recorded approval (``{"sourceHash", "by", "name", "path", "approvedAt"}``), oldest
        first, as the file holds them now."""
        self.load()
        self._refresh()
        with self._lock:
            return sorted((dict(e) for e in self._approved.values()), key=lambda e: e["approvedAt"])

    def approve(self, source_hash: str, *, name: str, path: str | None, by: str | None) -> None:
        """Record that the principal whose owner is ``by`` approved ``source_hash`` (persisted when
        ``approvals_path`` is set, merged with what other processes wrote meanwhile).

        Raises:
            FileWriteError: the file cannot be written (a full disk names the free bytes); nothing is
                approved and the file keeps what it held.
        """
        entry = {"sourceHash": source_hash, "by": by, "name": name, "path": path, "approvedAt": utc_now()}
        self._change(lambda approved: approved.__setitem__((by, source_hash), entry))

    def revoke(self, source_hash: str, *, by: str | None) -> bool:
        """Forget that the principal whose owner is ``by`` approved ``source_hash``; ``False`` when it
        had not. Persisted like :meth:`approve`; a server sharing the file stops honouring it on its
        next check.

        Raises:
            FileWriteError: the file cannot be written; the approval stays (here and on disk).
        """
        found: list[bool] = []
        self._change(lambda approved: found.append(approved.pop((by, source_hash), None) is not None))
        return found[0]

    def _change(self, edit: Any) -> None:
        """Apply ``edit`` (a function of the approvals mapping) to what the file holds now, under the
        lock between processes, and write the result; in memory only without ``approvals_path``."""
        self.load()
        with self._lock:
            if self.approvals_path is None:
                edit(self._approved)
                return
            with _file_lock(self.approvals_path + ".lock"):
                # What is on disk is the truth (another process may have revoked what this one once
                # read); only this change is applied on top of it.
                on_disk = self._read(announce=True)
                edit(on_disk)
                body = {"version": APPROVALS_VERSION, "approvals": list(on_disk.values())}
                _write_private(self.approvals_path, json.dumps(body, indent=2, ensure_ascii=False))
                self._approved = on_disk
                self._stamp = _stamp_of(self.approvals_path)

    def _refresh(self) -> None:
        """Read the file again when it changed since this process last read or wrote it."""
        if self.approvals_path is None:
            return
        stamp = _stamp_of(self.approvals_path)
        with self._lock:
            if stamp == self._stamp:
                return
            with _file_lock(self.approvals_path + ".lock"):
                self._approved = self._read(announce=True)
                self._stamp = _stamp_of(self.approvals_path)

    def load(self) -> list[str]:
        """Read the approvals file once (later calls do nothing); returns the warnings it gave (see the
        class docstring for a damaged file).

        Raises:
            InvalidInputError: the file exists but cannot be read (e.g. its permissions), or its damaged
                content cannot be copied aside; the message names the file and what to do.
        """
        with self._lock:
            if self._loaded:
                return list(self.problems)
            self._loaded = True
            if self.approvals_path is not None:
                self._approved.update(self._read(announce=True))
                self._stamp = _stamp_of(self.approvals_path)
            return list(self.problems)

    def _read(self, *, announce: bool) -> dict[tuple[str | None, str], dict[str, Any]]:
        """The approvals on disk (``{}`` when there is no file). A damaged file is copied aside and
        what is legible in it returned."""
        assert self.approvals_path is not None
        path = self.approvals_path
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InvalidInputError(
                f"the source approvals file {path} cannot be read ({exc.strerror}); fix its permissions "
                "(it should be yours, mode 600) and start again"
            ) from exc
        text = raw.decode("utf-8", "replace")
        entries, damage = _parse_approvals(text)
        if damage is None:
            return entries
        backup = _back_up(path, raw)
        problem = (
            f"the source approvals file {path} is damaged ({damage}); a copy of it is at {backup}. "
            f"{len(entries)} approval(s) could still be read and are kept"
            + (
                "; anything else in the copy must be approved again (or restored from the copy)"
                if entries or text.strip()
                else ""
            )
        )
        self.problems.append(problem)
        if announce:
            with contextlib.suppress(OSError, ValueError):
                print(f"workflow-mcp: warning: {problem}", file=sys.stderr, flush=True)
        body = {"version": APPROVALS_VERSION, "approvals": list(entries.values())}
        _write_private(path, json.dumps(body, indent=2, ensure_ascii=False))
        return entries


def _stamp_of(path: str) -> tuple[int, int, int] | None:
    """What tells one version of the approvals file from another (it is always replaced whole)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _entry(value: Any, source_hash: str | None = None) -> dict[str, Any] | None:
    """A normalized approval from a parsed JSON value, or ``None`` when it is not one."""
    if not isinstance(value, dict):
        return None
    digest = source_hash if source_hash is not None else value.get("sourceHash")
    by, name, path = value.get("by"), value.get("name"), value.get("path")
    if (
        not isinstance(digest, str)
        or not _HASH.match(digest)
        or not (by is None or isinstance(by, str))
        or not isinstance(name, str)
        or not (path is None or isinstance(path, str))
    ):
        return None
    at = value.get("approvedAt")
    return {
        "sourceHash": digest,
        "by": by,
        "name": name,
        "path": path,
        "approvedAt": at if isinstance(at, str) else "",
    }


def _parse_approvals(text: str) -> tuple[dict[tuple[str | None, str], dict[str, Any]], str | None]:
    """``(approvals, damage)``: what ``text`` approves, and ``None`` or why it is damaged (then the
    approvals are those still legible: every flat JSON object in it that is one)."""
    found: dict[tuple[str | None, str], dict[str, Any]] = {}

    def keep(entry: dict[str, Any] | None) -> bool:
        if entry is None:
            return False
        found[(entry["by"], entry["sourceHash"])] = entry
        return True

    try:
        data = json.loads(text) if text.strip() else None
    except ValueError as exc:
        for match in _V1_ENTRY.finditer(text):
            with contextlib.suppress(ValueError):
                keep(_entry(json.loads(match.group(2)), match.group(1)))
        for match in _V2_ENTRY.finditer(text):
            with contextlib.suppress(ValueError):
                keep(_entry(json.loads(match.group(0))))
        return found, f"not JSON: {exc}"
    if data is None:
        return found, "empty"
    if isinstance(data, dict) and isinstance(data.get("approvals"), list):
        bad = sum(not keep(_entry(v)) for v in data["approvals"])
    elif isinstance(data, dict) and isinstance(data.get("approved"), dict):
        bad = sum(not keep(_entry(v, k if isinstance(k, str) else None)) for k, v in data["approved"].items())
    else:
        return found, 'not an approvals file: expected {"version": 2, "approvals": [...]}'
    return found, (f"{bad} entr{'y is' if bad == 1 else 'ies are'} not approvals" if bad else None)


_COPY = "the copy of the damaged source approvals file"


def _back_up(path: str, raw: bytes) -> str:
    """Copy ``raw`` (the damaged content of ``path``) beside it, 0600; returns the copy's path.

    Raises:
        FileWriteError: the disk or quota is full (the partial copy is removed; nothing is changed).
        InvalidInputError: the copy cannot be created otherwise (then nothing is changed).
    """
    stamp = utc_now().replace(":", "").replace("-", "")
    backup = f"{path}.damaged-{stamp}"
    try:
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        backup = f"{backup}-{os.getpid()}-{threading.get_ident()}"
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _write_failed(backup, os.path.dirname(os.path.abspath(backup)), exc, _COPY) from exc
        raise InvalidInputError(
            f"the source approvals file {path} is damaged and cannot be copied aside ({exc.strerror}); "
            "move it aside yourself and start again"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(backup)
        raise _write_failed(backup, os.path.dirname(os.path.abspath(backup)), exc, _COPY) from exc
    return backup


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """An exclusive lock between processes (``flock`` on ``path``, created 0600); nothing where the
    platform has no ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _write_failed(path, os.path.realpath(folder), exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically with 0600 permissions: a new temporary file in the same
    directory (reached without following links), flushed to disk, renamed over ``path``.

    Raises:
        FileWriteError: the disk or quota is full, the file system is read-only, or a directory on the
            way is a link; ``path`` keeps what it held.
    """
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    try:
        with opened_directory(folder, create=True, mode=0o700) as dir_fd:
            replace_file_in(dir_fd, os.path.basename(path), text.encode("utf-8"), mode=0o600)
    except OSError as exc:
        raise _write_failed(path, folder, exc) from exc


def _write_failed(
    path: str, folder: str, exc: OSError, what: str = "the source approvals file"
) -> FileWriteError:
    free: int | None = None
    with contextlib.suppress(OSError):
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
    return FileWriteError(
        what,
        path,
        code=errno.errorcode.get(exc.errno or 0, "EIO"),
        detail=exc.strerror or str(exc),
        directory=folder,
        free_bytes=free,
    )
