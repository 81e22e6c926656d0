"""Writing files into directories that other people's programs can change at the same time.

A path checked and then written is two steps: a symbolic link planted between them (a workflows
directory swapped for a link to ``~/.ssh``) sends the write elsewhere. Here every step works through
a file descriptor of the directory, reached component by component from ``/`` with ``O_NOFOLLOW``
(:func:`open_directory`), so no link is ever followed after the caller resolved the path, and each
file is created ``O_EXCL | O_NOFOLLOW`` and renamed into place inside that same directory
(``dir_fd=``). POSIX only (``openat``, ``renameat``, ``unlinkat``), as the rest of the package.

Errors are the operating system's ``OSError``: ``ELOOP`` when a component became a symbolic link,
``ENOTDIR`` when it is not a directory, ``ENOSPC``/``EDQUOT`` when the disk or quota is full.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from typing import TextIO

__all__ = [
    "RACED",
    "open_directory",
    "opened_directory",
    "read_file_in",
    "remove_file_in",
    "replace_file_in",
    "written_in_place",
]

#: The ``errno`` values meaning "a component of the path is not the directory it was": a link planted
#: in the path (``ELOOP``), or a file where a directory was (``ENOTDIR``).
RACED = frozenset({errno.ELOOP, errno.ENOTDIR})

#: ``linkat`` errors of a file system that has no hard links.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_directory(path: str, *, create: bool = False, mode: int = 0o777) -> int:
    """A file descriptor of the directory ``path`` (absolute and already resolved, e.g. by
    ``os.path.realpath``), opened one component at a time from ``/`` without following any link. With
    ``create``, missing components are made (``mode`` less the umask). The caller closes it.

    Raises:
        ValueError: ``path`` is not absolute.
        OSError: ``ELOOP`` (a component is now a symbolic link), ``ENOTDIR``, ``ENOENT`` (missing and
            not ``create``), ``EACCES``, ``ENOSPC``.
    """
    if not os.path.isabs(path):
        raise ValueError(f"open_directory needs an absolute path, got {path!r}")
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in [p for p in os.path.normpath(path).split(os.sep) if p]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made by another process meanwhile
                    os.mkdir(part, mode, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def opened_directory(path: str, *, create: bool = False, mode: int = 0o777) -> Iterator[int]:
    """:func:`open_directory` as a context manager that closes the descriptor."""
    fd = open_directory(path, create=create, mode=mode)
    try:
        yield fd
    finally:
        os.close(fd)


def replace_file_in(dir_fd: int, name: str, data: bytes, *, mode: int = 0o644, new: bool = False) -> None:
    """Write ``data`` as the file ``name`` of the directory ``dir_fd`` atomically: a new temporary file
    (``O_EXCL | O_NOFOLLOW``, ``mode`` less the umask) written, flushed to disk, then renamed over
    ``name`` inside the directory (a link named ``name`` is replaced, never followed), and the directory
    flushed. A reader sees the old file or the new one, never a part; on failure the temporary file is
    removed and ``name`` is untouched. With ``new``, ``name`` must not exist: the temporary file is
    linked to it (``linkat``, which never replaces), so a file another program created meanwhile stays.

    Raises:
        FileExistsError: ``new`` and ``name`` exists (nothing written).
        OSError: ``ENOSPC``/``EDQUOT`` (full), ``EROFS``, ``EACCES``, ``EISDIR`` (``name`` is a directory).
    """
    tmp = f".{name[:32]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            try:
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINKS:
                    raise
                # A file system without hard links (FAT, some network shares): check, then rename.
                if _exists(dir_fd, name):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name) from exc
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                os.unlink(tmp, dir_fd=dir_fd)
        else:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    with contextlib.suppress(OSError):  # the rename is done; a directory that cannot be synced keeps it
        os.fsync(dir_fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_file_in(dir_fd: int, name: str) -> tuple[bytes, os.stat_result]:
    """The content of the regular file ``name`` of ``dir_fd`` (never through a link) and its status.

    Raises:
        OSError: ``ELOOP`` (``name`` is a link), ``ENOENT``, ``EACCES``; ``EISDIR``/``EINVAL`` when it
            is not a regular file.
    """
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device must not be read (or block)
            raise OSError(errno.EINVAL, f"{name} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """What tells one file from another that took its name (an inode number alone can be reused at
    once): device, inode, type, size and change time."""
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_ctime_ns)


def remove_file_in(dir_fd: int, name: str, expected: os.stat_result) -> bool:
    """Remove ``name`` from ``dir_fd`` if it is still the file ``expected`` describes (same device,
    inode, size and change time; never a link); ``False`` (nothing removed) when it is gone or another file took its place.

    Raises:
        OSError: ``EACCES``, ``EROFS``.
    """
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if _identity(now) != _identity(expected):
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


@contextlib.contextmanager
def written_in_place(path: str, *, mode: int = 0o600) -> Iterator[TextIO]:
    """A UTF-8 text file that becomes ``path`` only when the block ends without an error: it is a new
    temporary file beside ``path`` (in the directory of its real path, reached without following links),
    flushed to disk and renamed over ``path`` at the end. When the block or a write fails (a full disk),
    the temporary file is removed and ``path`` keeps what it held. ``mode`` is applied exactly (not
    filtered by the umask): the content may be private.

    Raises:
        OSError: ``ENOSPC``/``EDQUOT``, ``EROFS``, ``EACCES``; ``ELOOP``/``ENOTDIR`` (a directory on the
            way changed).
    """
    real = os.path.realpath(path)
    folder, name = os.path.split(real)
    with opened_directory(folder) as dir_fd:
        tmp = f".{name[:32]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
