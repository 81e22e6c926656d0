"""The OS sandbox around the realm worker: bubblewrap (``bwrap``, Debian package ``bubblewrap``).

Node's ``vm`` module is not a security boundary: code that escapes the realm's context holds the
worker's full ``process``, ``fs`` and ``net``. Under ``sandbox="bwrap"`` the worker runs in fresh
Linux namespaces (user, mount, pid, network, IPC, UTS, cgroup) where, even after such an escape:

- the root is an empty read-only tmpfs holding only the Node binary, the shared libraries it links
  (as ``ldd`` lists them) and the script it runs, each bound read-only at its own path; ``$HOME``,
  ``/etc`` and every other file are absent;
- ``/tmp`` is a private, empty tmpfs of at most :data:`SANDBOX_TMP_BYTES` (the only writable place;
  a tmpfs is memory the worker's memory cap does not count) that vanishes with the worker;
- ``/proc`` shows the sandbox's own processes only (a new pid namespace), ``/dev`` a minimal set,
  read-only (its devices still work; ``/dev/shm`` takes no file);
- the network namespace is empty (loopback only, not the host's): no socket reaches anything;
- the environment is empty, every capability is dropped, the worker cannot create further user
  namespaces (``--disable-userns``), runs in a new session (no terminal injection) and dies with its
  parent (``--die-with-parent``);
- it cannot start a process (:func:`no_fork_filter`: a seccomp filter, bwrap's ``--seccomp``, that
  fails ``fork``, ``vfork`` and every ``clone`` but a thread's with ``EPERM``), so a fork bomb ends at
  its first fork, and the worker's memory cap (``RLIMIT_DATA``, per process) bounds all the memory it
  holds. A filter binds root too: ``RLIMIT_NPROC`` would not (the kernel exempts uid 0).

Stdin, stdout and stderr stay the worker's only channel to the host. :func:`sandbox_argv` builds the
command line (with the descriptor :func:`no_fork_filter` opens); the realm worker and its tests use
that one function, so what the tests show of the
profile is what the worker runs under. Linux only (bubblewrap needs namespaces), bubblewrap ≥ 0.8
(``--disable-userns``).
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any, Final, Literal

from ..errors import InvalidInputError, SandboxUnavailableError

__all__ = [
    "SANDBOXES",
    "SANDBOX_HOSTNAME",
    "SANDBOX_TMP_BYTES",
    "Sandbox",
    "bwrap_path",
    "check_sandbox",
    "no_fork_filter",
    "sandbox_argv",
    "sandbox_failure",
]

Sandbox = Literal["none", "bwrap"]
SANDBOXES: Final[tuple[Sandbox, ...]] = ("none", "bwrap")
"""The sandboxes the worker can run under: ``none`` (the Node process as is) and ``bwrap``."""

SANDBOX_TMP_BYTES: Final = 16 * 1024 * 1024
"""The size of the sandbox's private ``/tmp`` (16 MiB; the realm writes no file, so this only bounds
what code that escaped it can hold in memory there)."""
SANDBOX_HOSTNAME: Final = "workflow-realm"
"""The host name the sandbox sees (its own UTS namespace; not the host's name)."""

_LDD_PATH = re.compile(r"(?:=>\s*|^\s*)(/\S+)\s+\(0x", re.MULTILINE)


def check_sandbox(value: str, where: str = "sandbox") -> Sandbox:
    """``value`` as a :data:`Sandbox`.

    Raises:
        InvalidInputError: it is not one of :data:`SANDBOXES` (``where`` names the option).
    """
    for known in SANDBOXES:
        if value == known:
            return known
    raise InvalidInputError(f"{where} must be one of {', '.join(SANDBOXES)}, got {value!r}")


def bwrap_path() -> str:
    """The ``bwrap`` executable: ``$WORKFLOW_MCP_BWRAP`` or the first on ``PATH``.

    Raises:
        SandboxUnavailableError: none is installed (the message names the Debian package).
    """
    override = os.environ.get("WORKFLOW_MCP_BWRAP")
    found = override if override and os.access(override, os.X_OK) else shutil.which("bwrap")
    if found is None:
        where = (
            f"WORKFLOW_MCP_BWRAP names {override!r}, which is not an executable file"
            if override
            else "no bwrap is on PATH"
        )
        raise SandboxUnavailableError(
            f"--sandbox bwrap needs bubblewrap, and {where}: install the package bubblewrap "
            "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
        )
    return found


@functools.lru_cache(maxsize=8)
def _libraries(binary: str) -> tuple[str, ...]:
    """The shared libraries ``binary`` loads, as ``ldd`` resolves them (the loader included); empty
    for a static binary."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(
            f"--sandbox bwrap lists the libraries of {binary} with ldd, which could not run: {exc} "
            "(Debian: ldd comes with libc-bin)"
        ) from exc
    return tuple(dict.fromkeys(_LDD_PATH.findall(out.stdout)))


_CLONE_THREAD: Final = 0x00010000  # <linux/sched.h>


@functools.cache
def _no_fork_program() -> bytes:
    """The compiled (BPF) seccomp program of :func:`no_fork_filter`, for this machine's architecture;
    built once by libseccomp (through ``pyseccomp``)."""
    try:
        seccomp: Any = importlib.import_module("pyseccomp")
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: libseccomp is not installed
        raise SandboxUnavailableError(
            f"--sandbox bwrap needs libseccomp to keep the worker from starting processes ({exc}): install "
            "the Debian package libseccomp2 and the Python package pyseccomp"
        ) from None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in ("fork", "vfork"):
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    # clone's first argument is its flags: a new thread (CLONE_THREAD) is allowed, a new process not.
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
    # clone3 passes its flags in memory a filter cannot read: ENOSYS makes the C library fall back to
    # clone (glibc does for threads and for posix_spawn), where the rule above decides.
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("workflow-realm-seccomp")
    try:
        with open(fd, "w+b", closefd=False) as handle:
            rules.export_bpf(handle)
            handle.seek(0)
            return handle.read()
    finally:
        os.close(fd)


def no_fork_filter() -> int:
    """A new readable descriptor (close-on-exec; the caller closes it once the child started) holding
    the sandbox's seccomp program, for bwrap's ``--seccomp FD``: pass it to the child with
    ``pass_fds``. The program fails ``fork`` and ``vfork``, and ``clone`` without ``CLONE_THREAD``,
    with ``EPERM`` (threads still start; Node's ``child_process`` gets ``EPERM``), and ``clone3`` with
    ``ENOSYS``; every other call is allowed. bwrap reads the descriptor before it runs the program,
    which never holds it.

    Raises:
        SandboxUnavailableError: libseccomp or pyseccomp is not installed.
    """
    program = _no_fork_program()
    fd = os.memfd_create("workflow-realm-seccomp")
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sandbox_argv(command: Sequence[str], *, readable: Sequence[str] = (), seccomp_fd: int) -> list[str]:
    """``command`` (a program and its arguments) wrapped in the bubblewrap profile described above.

    ``command[0]`` (an absolute path), its libraries and every path in ``readable`` (files, e.g. the
    script it runs) are the only files visible, each read-only at its own path. The sandboxed program
    starts in ``/tmp``. ``seccomp_fd`` is an open :func:`no_fork_filter` descriptor, which the caller
    passes to bwrap (``pass_fds``).

    Raises:
        SandboxUnavailableError: bwrap is not installed, or ``command[0]`` is not an absolute path.
    """
    program = command[0]
    if not os.path.isabs(program):
        raise SandboxUnavailableError(f"the sandboxed program must be an absolute path, got {program!r}")
    argv = [
        bwrap_path(),
        "--unshare-all",  # mount, pid, network, IPC, UTS and cgroup namespaces …
        "--unshare-user",  # … and a user namespace even for root (--unshare-all only tries one)
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--proc",
        "/proc",
        "--hostname",
        SANDBOX_HOSTNAME,
        "--dev",
        "/dev",
        "--size",
        str(SANDBOX_TMP_BYTES),
        "--tmpfs",
        "/tmp",
    ]
    # The binds come after /tmp's tmpfs, so a Node or a script installed under /tmp stays visible.
    for path in (program, *_libraries(os.path.realpath(program)), *readable):
        argv += ["--ro-bind", os.path.realpath(path), os.path.abspath(path)]
    argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--", *command]


def sandbox_failure(stderr: str) -> SandboxUnavailableError | None:
    """The error for a sandboxed process that ended before it started, from its ``stderr``: bwrap
    speaks first (``bwrap: …``) when it cannot build the sandbox, e.g. where unprivileged user
    namespaces are disabled. ``None`` when bwrap did not complain."""
    lines = [line for line in stderr.splitlines() if line.startswith("bwrap: ")]
    if not lines:
        return None
    said = lines[-1].removeprefix("bwrap: ")
    hint = ""
    if "namespace" in said.lower() or "permission" in said.lower():
        hint = (
            " (this kernel or container does not let this user create namespaces: enable unprivileged "
            "user namespaces, e.g. sysctl kernel.unprivileged_userns_clone=1 and "
            "user.max_user_namespaces > 0, or run without --sandbox bwrap)"
        )
    return SandboxUnavailableError(f"bubblewrap could not create the worker's sandbox: {said}{hint}")
