"""SQLite's errors, translated once, at the store's edge, into the :class:`StoreError` tree.

SQLite names each failure with a result code (``exc.sqlite_errorname``, Python ≥ 3.11): ``SQLITE_FULL``
(no space; also a write cut short by the file-size limit), ``SQLITE_IOERR_*`` (``EFBIG`` under
``RLIMIT_FSIZE`` surfaces as ``SQLITE_IOERR_WRITE``), ``SQLITE_READONLY*``, ``SQLITE_CORRUPT*`` and
``SQLITE_NOTADB`` (damaged pages or header), ``SQLITE_BUSY``/``SQLITE_LOCKED`` (another process
holds the lock past the busy timeout). The facts a message needs (free bytes, the limit) are read
from the operating system when the error happens.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import StoreCorruptError, StoreError, StoreFullError, StoreReadOnlyError

__all__ = ["disk_full_error", "is_corruption", "translate"]

# A file system with less than this left is full for SQLite's purposes (a WAL frame is a page plus a
# header; a checkpoint may need several pages at once).
_NEARLY_FULL = 1 << 20
# A write that would cross the file-size limit is cut short or refused (EFBIG), so the file stops a
# little below the limit: within this many bytes of it, the limit is the cause.
_LIMIT_MARGIN = 128 << 10


def _name(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


def is_corruption(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file is damaged (``SQLITE_CORRUPT*``, ``SQLITE_NOTADB``)."""
    name = _name(exc)
    if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB":
        return True
    text = str(exc)
    return "malformed" in text or "file is not a database" in text


def _free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _file_size_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def disk_full_error(path: Path) -> StoreFullError | None:
    """The :class:`StoreFullError` that explains a failed write to ``path`` now, or ``None`` when
    neither the disk nor the file-size limit is the cause."""
    directory = path.parent
    free = _free_bytes(directory)
    limit = _file_size_limit()
    if free is not None and free < _NEARLY_FULL:
        return StoreFullError(str(path), directory=str(directory), free_bytes=free)
    if limit is not None:
        sizes = []
        for suffix in ("", "-wal", "-shm"):
            try:
                sizes.append(os.path.getsize(f"{path}{suffix}"))
            except OSError:
                continue
        if sizes and max(sizes) + _LIMIT_MARGIN >= limit:
            return StoreFullError(str(path), directory=str(directory), free_bytes=free, file_size_limit=limit)
    return None


def translate(exc: sqlite3.Error, path: Path, what: str) -> StoreError:
    """The store error for ``exc`` raised while doing ``what`` (e.g. ``"storing events of run R"``)."""
    name = _name(exc)
    if is_corruption(exc):
        return StoreCorruptError(str(path), f"{exc} while {what}")
    if name.startswith("SQLITE_READONLY"):
        return StoreReadOnlyError(str(path), f"SQLite refused to write ({exc}) while {what}")
    if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
        full = disk_full_error(path)
        if full is not None:
            return full
        if name == "SQLITE_FULL":
            return StoreFullError(str(path), directory=str(path.parent), free_bytes=_free_bytes(path.parent))
        return StoreError(
            f"the state database {path} could not be written or read ({exc}, {name}) while {what}"
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(
            f"the state database {path} stayed locked by another process while {what} ({exc}); try again"
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"{what} refused by the store: {exc}")
    return StoreError(f"the state database {path} failed while {what}: {exc}")
