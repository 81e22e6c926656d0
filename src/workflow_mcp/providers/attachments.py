"""Image attachments of one agent call (``run_agent(attachments=…)``, the ``agent_run`` MCP tool):
read, bounded and checked once, before anything starts, into
:class:`~workflow_mcp.providers.base.ImageInput` values.

An attachment is a JSON object, one of::

    {"type": "image", "path": "shots/login.png"}                   # a file (relative to the base)
    {"type": "image", "data": "<base64>", "mimeType": "image/png"}  # the bytes themselves

Rules (each refusal an :class:`AttachmentError` naming ``attachments[i]`` and the key):

- ``type`` is ``image``; exactly one of ``path`` and ``data``; ``mimeType`` is required with
  ``data`` and, with ``path``, must agree with the file when given;
- the type is one of :data:`IMAGE_TYPES` (what the OpenAI and Anthropic APIs take: PNG, JPEG, GIF,
  WebP), *told from the bytes* (their signature), never from a file name;
- each image is at most :data:`MAX_IMAGE_BYTES` (5 MiB: the Anthropic Messages API's per-image
  limit, the tighter of the two), and a call has at most :data:`MAX_IMAGES` (20);
- a ``path`` is resolved by the caller's ``resolve`` (the MCP server passes its file scope, so a path
  outside the project roots or inside the state directory is refused by that scope's rule) and must
  name a regular file; the file is read from one descriptor opened without blocking or following a
  last symbolic link and checked to be that file still, so a FIFO, a device or a file swapped for a
  link after the scope looked is refused, never waited on or read.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidInputError
from .base import ImageInput

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "AttachmentError",
    "image_type",
    "read_attachments",
]

IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types an attachment may have (the OpenAI and Anthropic APIs' common set)."""
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024
"""Bytes per image at most (the Anthropic Messages API's 5 MB per-image limit)."""
MAX_IMAGES: Final = 20
"""Images per agent call at most."""


class AttachmentError(InvalidInputError):
    """Raised when an attachment breaks a rule (module docstring); ``where`` is ``attachments[i]``
    or ``attachments[i].KEY``. Nothing was started or recorded."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def image_type(data: bytes) -> str | None:
    """The image type the bytes' signature says (one of :data:`IMAGE_TYPES`), else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _default_resolve(raw: str, base: str) -> str:
    return os.path.realpath(os.path.join(base, os.path.expanduser(raw)))


def read_attachments(
    attachments: Sequence[Mapping[str, Any] | ImageInput] | None,
    *,
    base: str,
    resolve: Callable[[str, str], str] | None = None,
) -> tuple[ImageInput, ...]:
    """The images of ``attachments`` (JSON objects as in the module docstring, or ready
    :class:`~workflow_mcp.providers.base.ImageInput` values, checked the same way), read and checked.

    ``base`` anchors relative paths; ``resolve(raw, base)`` returns the real path to read or raises
    (the MCP server's file scope: :class:`~workflow_mcp.errors.PathRefusedError`); default: any path.

    Raises:
        AttachmentError: a rule is broken (module docstring), naming ``attachments[i].KEY``.
        PathRefusedError: ``resolve`` refused a path.
    """
    if attachments is None:
        return ()
    if isinstance(attachments, str | bytes | Mapping) or not isinstance(attachments, Sequence):
        raise AttachmentError("attachments", 'must be a list of {"type": "image", …} objects')
    if len(attachments) > MAX_IMAGES:
        raise AttachmentError(
            "attachments", f"{len(attachments)} images, more than the limit of {MAX_IMAGES} per agent call"
        )
    return tuple(
        _one(item, f"attachments[{i}]", base, resolve or _default_resolve)
        for i, item in enumerate(attachments)
    )


def _one(
    item: Mapping[str, Any] | ImageInput, where: str, base: str, resolve: Callable[[str, str], str]
) -> ImageInput:
    if isinstance(item, ImageInput):
        return _checked(item.data, item.mime_type, item.name, where, "data")
    if not isinstance(item, Mapping):
        raise AttachmentError(
            where, 'must be an object: {"type": "image", "path": …} or {"type": "image", "data": …}'
        )
    unknown = sorted(set(item) - {"type", "path", "data", "mimeType", "name"})
    if unknown:
        raise AttachmentError(
            f"{where}.{unknown[0]}", "unknown key; expected type, path, data, mimeType, name"
        )
    if item.get("type") != "image":
        raise AttachmentError(
            f"{where}.type", f'must be "image" (the only attachment type), got {item.get("type")!r}'
        )
    path, data, mime = item.get("path"), item.get("data"), item.get("mimeType")
    if (path is None) == (data is None):
        raise AttachmentError(where, "give exactly one of path (a file) and data (base64)")
    if mime is not None and mime not in IMAGE_TYPES:
        raise AttachmentError(f"{where}.mimeType", f"must be one of {', '.join(IMAGE_TYPES)}, got {mime!r}")
    name = item.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        raise AttachmentError(f"{where}.name", "must be a non-empty string")
    if path is not None:
        if not isinstance(path, str) or not path:
            raise AttachmentError(f"{where}.path", "must be a non-empty file path")
        raw = _read_file(path, resolve(path, base), f"{where}.path")
        return _checked(raw, mime, name or os.path.basename(path), where, "path")
    if not isinstance(data, str):
        raise AttachmentError(f"{where}.data", "must be a base64 string")
    if mime is None:
        raise AttachmentError(f"{where}.mimeType", f"is required with data: one of {', '.join(IMAGE_TYPES)}")
    if len(data) > (MAX_IMAGE_BYTES * 4) // 3 + 8:
        raise AttachmentError(f"{where}.data", _too_big(len(data) * 3 // 4))
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AttachmentError(f"{where}.data", f"is not valid base64 ({exc})") from None
    return _checked(raw, mime, name or "image", where, "data")


_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_file(path: str, real: str, where: str) -> bytes:
    """The bytes of the regular file at ``real`` (the path ``resolve`` allowed), read from the one
    descriptor every check looks at, so a file swapped after ``resolve`` looked is never read: opened
    without blocking (a FIFO or a device never holds the server) and without following a symbolic
    link at its last component; refused unless that descriptor is a regular file and, on Linux, is
    still at ``real`` (a folder on the way replaced by a link leads elsewhere)."""
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        raise AttachmentError(where, f"{path!r} is not a file that can be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AttachmentError(where, f"{path!r} is not a regular file")
        if os.path.isdir("/proc/self/fd") and os.readlink(f"/proc/self/fd/{fd}") != real:
            raise AttachmentError(where, f"{path!r} was replaced while it was opened; send it again")
        if info.st_size > MAX_IMAGE_BYTES:
            raise AttachmentError(where, _too_big(info.st_size))
        with open(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_IMAGE_BYTES + 1)
    finally:
        os.close(fd)


def _checked(raw: bytes, mime: str | None, name: str, where: str, key: str) -> ImageInput:
    if len(raw) > MAX_IMAGE_BYTES:
        raise AttachmentError(f"{where}.{key}", _too_big(len(raw)))
    found = image_type(raw)
    if found is None:
        raise AttachmentError(
            f"{where}.{key}",
            f"is not an image of an allowed type ({', '.join(IMAGE_TYPES)}): its bytes say so",
        )
    if mime is not None and mime != found:
        raise AttachmentError(f"{where}.mimeType", f"says {mime} but the bytes are {found}")
    return ImageInput(data=raw, mime_type=found, name=name)


def _too_big(size: int) -> str:
    return f"{size} bytes, more than the limit of {MAX_IMAGE_BYTES} bytes (5 MiB) per image"
