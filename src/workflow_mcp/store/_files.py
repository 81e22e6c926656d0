"""The files around the state database: the home directory, file modes, the damage marker.

The state home holds prompts, args and results, so it is created ``0700`` and ``state.db`` with its
``-wal``/``-shm`` files ``0600`` whatever the umask (DESIGN: "0700 home, 0600 files"). SQLite
gives the ``-wal`` and ``-shm`` files the database file's own mode, so creating ``state.db`` itself
``0600`` covers all three. Looser modes left by an older release are tightened on open when this user
owns the file; a shared directory (sticky or world-writable, e.g. ``/tmp``) is never changed, only
reported.

``state.db.damaged`` records that SQLite found the file damaged: every later open then writes nothing
to it until ``workflow-mcp store repair`` has rebuilt it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ..events import utc_now

__all__ = [
    "SIDE_FILES",
    "clear_damage",
    "create_private_file",
    "damage_marker",
    "mark_damaged",
    "prepare_home",
    "read_damage",
    "tighten_files",
    "unread_wal",
]

#: The files SQLite keeps next to the database in WAL mode.
SIDE_FILES = ("-wal", "-shm")


def prepare_home(home: Path) -> list[str]:
    """Create ``home`` (``0700``) or tighten it; returns notices for what could not be made private.

    Raises:
        OSError: ``home`` cannot be created.
    """
    if not home.exists():
        home.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(home, 0o700)  # mkdir's mode is filtered by the umask; chmod is not
        return []
    st = home.stat()
    if not st.st_mode & 0o077:
        return []
    shared = st.st_mode & (stat.S_ISVTX | stat.S_IWOTH)
    if st.st_uid == os.geteuid() and not shared:
        with contextlib.suppress(OSError):
            os.chmod(home, stat.S_IMODE(st.st_mode) & 0o700)
            return []
    return [
        f"the state directory {home} is readable by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
        "the database files in it are kept 0600, but prefer a private directory (chmod 700)"
    ]


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode ``0600`` unless it exists (SQLite treats an empty file as a new
    database, and copies its mode to the ``-wal``/``-shm`` files)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def tighten_files(path: Path) -> None:
    """Make ``path`` and its side files ``0600`` where this user owns them and they are looser."""
    for name in (str(path), *(f"{path}{s}" for s in SIDE_FILES)):
        with contextlib.suppress(OSError):
            st = os.stat(name)
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                os.chmod(name, 0o600)


def damage_marker(path: Path) -> Path:
    """Where the damage mark of the database ``path`` lives (``state.db.damaged``)."""
    return path.with_name(path.name + ".damaged")


def read_damage(path: Path) -> str | None:
    """The recorded damage of the database ``path`` (what SQLite said, and when), or ``None``."""
    try:
        return damage_marker(path).read_text(encoding="utf-8", errors="replace").strip() or "damaged"
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"its damage mark cannot be read ({exc.strerror or exc})"


def mark_damaged(path: Path, detail: str) -> None:
    """Record that the database ``path`` is damaged; best effort (a read-only directory keeps no mark,
    and the next open finds the damage again)."""
    marker = damage_marker(path)
    if marker.exists():
        return
    with contextlib.suppress(OSError):
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{detail} (found {utc_now()})\n")


def clear_damage(path: Path) -> None:
    """Forget the damage mark (after a repair)."""
    with contextlib.suppress(FileNotFoundError):
        damage_marker(path).unlink()


def unread_wal(path: Path) -> str | None:
    """What is lost when the database ``path`` is read as an immutable file (no ``-shm`` can be made
    next to it, e.g. on a read-only mount): SQLite then ignores the ``-wal`` file, so its changes,
    if it holds any, cannot be seen. ``None`` when there is no such file, or it is empty."""
    wal = Path(f"{path}-wal")
    try:
        if wal.stat().st_size == 0:
            return None
    except OSError:
        return None
    return (
        f"its newest changes are in {wal}, which SQLite reads only by creating {path.name}-shm next to it, "
        "and this location cannot be written; to read everything, copy the directory somewhere writable "
        "(`cp -a`) and point WORKFLOW_MCP_HOME at the copy"
    )
