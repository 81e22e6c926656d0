"""Who owns a run: a process identity that survives pid reuse, and whether it is still alive.

A pid alone is not an identity: after a crash the kernel may give the same pid to an unrelated
process. On Linux the identity is the boot id plus the process's start time in clock ticks
(``/proc/<pid>/stat`` field 22), so a reused pid, or the same pid after a reboot, reads as a
different process. Elsewhere only the pid is known, and a lease heartbeat older than the lease
(:func:`lease_s`: :data:`LEASE_TTL_S` unless ``$WORKFLOW_MCP_LEASE_S`` says otherwise) marks the owner
gone. Owners on another host are judged by the heartbeat alone.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass
from functools import cache

from ..errors import StoreError

__all__ = [
    "HEARTBEAT_S",
    "LEASE_ENV",
    "LEASE_TTL_S",
    "MAX_LEASE_S",
    "MIN_LEASE_S",
    "ProcessIdentity",
    "heartbeat_every",
    "lease_s",
    "owner_alive",
    "this_process",
]

#: How often an owner that runs something renews its lease (seconds).
HEARTBEAT_S = 5.0
#: A lease not renewed for this long (seconds) belongs to a gone owner, where no process identity can
#: be checked (another host, or a platform without ``/proc``).
LEASE_TTL_S = 30.0
#: The environment variable that sets the lease (seconds; :data:`MIN_LEASE_S` to :data:`MAX_LEASE_S`).
#: Each owner records its lease in its row, and is judged by that one: processes may differ.
LEASE_ENV = "WORKFLOW_MCP_LEASE_S"
MIN_LEASE_S = 1.0
MAX_LEASE_S = 3600.0


def lease_s() -> float:
    """The lease in force (seconds): ``$WORKFLOW_MCP_LEASE_S``, else :data:`LEASE_TTL_S`.

    Raises:
        StoreError: the variable is not a number of seconds from :data:`MIN_LEASE_S` to
            :data:`MAX_LEASE_S` (the message names it and the range).
    """
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return LEASE_TTL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not MIN_LEASE_S <= value <= MAX_LEASE_S:  # NaN fails both comparisons
        raise StoreError(
            f"{LEASE_ENV}={raw!r} is not a lease: give seconds from {MIN_LEASE_S:g} to {MAX_LEASE_S:g} "
            f"(default {LEASE_TTL_S:g}), the same on every server of one database"
        )
    return value


def heartbeat_every(lease: float) -> float:
    """How often (seconds) an owner renews a lease of ``lease`` seconds: :data:`HEARTBEAT_S`, or a
    sixth of a shorter lease, so five renewals can be missed before the owner is judged gone."""
    return min(HEARTBEAT_S, lease / 6)


@dataclass(frozen=True)
class ProcessIdentity:
    """``pid`` on ``host``; ``process`` is ``"<boot id>:<start ticks>"`` or ``""`` when unknown."""

    pid: int
    host: str
    process: str


@cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, str] | None:
    """``(state, start ticks)`` from ``/proc/<pid>/stat``; ``None`` when there is no such process.

    Raises:
        OSError: ``/proc`` cannot be read at all (not Linux).
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        if not os.path.isdir("/proc/self"):
            raise
        return None
    except ProcessLookupError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], fields[19]


def _identity(pid: int) -> str:
    try:
        found = _stat(pid)
    except OSError:
        return ""
    boot = _boot_id()
    return f"{boot}:{found[1]}" if found is not None and boot else ""


@cache
def _host() -> str:
    return socket.gethostname()


def this_process() -> ProcessIdentity:
    """The identity of the calling process (computed per call: a forked child is another process)."""
    pid = os.getpid()
    return ProcessIdentity(pid=pid, host=_host(), process=_identity(pid))


def owner_alive(owner: ProcessIdentity, heartbeat_at: float, now: float, lease: float = LEASE_TTL_S) -> bool:
    """Whether ``owner`` (whose lease was last renewed at ``heartbeat_at``, epoch seconds) still runs.

    Same host: the pid must exist, not be a zombie, and (where ``/proc`` tells) have the recorded start
    time; without ``/proc`` a live pid also needs a lease younger than ``lease`` seconds. Another
    host: the lease alone decides.
    """
    if owner.host != _host():
        return now - heartbeat_at < lease
    try:
        found = _stat(owner.pid)
    except OSError:  # no /proc: the pid, and a fresh lease against pid reuse
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return now - heartbeat_at < lease
    if found is None or found[0] in ("Z", "X", "x"):
        return False
    boot = _boot_id()
    return not (owner.process and boot and owner.process != f"{boot}:{found[1]}")
