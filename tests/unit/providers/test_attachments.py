"""Image attachments are read, bounded and checked once, before anything starts
(:mod:`workflow_mcp.providers.attachments`)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.errors import PathRefusedError
from workflow_mcp.providers.attachments import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    AttachmentError,
    image_type,
    read_attachments,
)
from workflow_mcp.providers.base import ImageInput
from workflow_mcp.server import FileScope

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 24
GIF = b"GIF89a" + b"\x00" * 24
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 16


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("data", "mime"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp"), (b"%PDF-1.7", None)],
)
def test_the_image_type_is_told_from_the_bytes(data: bytes, mime: str | None) -> None:
    assert image_type(data) == mime


def test_a_file_and_inline_data_both_become_images_with_the_type_their_bytes_say(tmp_path: Path) -> None:
    (tmp_path / "shot.bin").write_bytes(JPEG)  # the name says nothing: the bytes do
    images = read_attachments(
        [
            {"type": "image", "path": "shot.bin"},
            {"type": "image", "data": b64(PNG), "mimeType": "image/png", "name": "diagram"},
        ],
        base=str(tmp_path),
    )
    assert images == (
        ImageInput(data=JPEG, mime_type="image/jpeg", name="shot.bin"),
        ImageInput(data=PNG, mime_type="image/png", name="diagram"),
    )
    assert images[1].data_url == "data:image/png;base64," + b64(PNG)
    assert read_attachments(None, base=str(tmp_path)) == ()


@pytest.mark.parametrize(
    ("attachments", "where", "words"),
    [
        ({"type": "image"}, "attachments", "must be a list"),
        (["x.png"], "attachments[0]", "must be an object"),
        ([{"type": "file", "path": "a.png"}], "attachments[0].type", 'must be "image"'),
        ([{"type": "image"}], "attachments[0]", "exactly one of path"),
        ([{"type": "image", "path": "a.png", "data": "AA=="}], "attachments[0]", "exactly one of path"),
        ([{"type": "image", "url": "http://x"}], "attachments[0].url", "unknown key"),
        ([{"type": "image", "data": b64(PNG)}], "attachments[0].mimeType", "is required with data"),
        (
            [{"type": "image", "data": b64(PNG), "mimeType": "image/tiff"}],
            "attachments[0].mimeType",
            "one of",
        ),
        (
            [{"type": "image", "data": b64(PNG), "mimeType": "image/jpeg"}],
            "attachments[0].mimeType",
            "bytes are image/png",
        ),
        (
            [{"type": "image", "data": "not base64!", "mimeType": "image/png"}],
            "attachments[0].data",
            "not valid base64",
        ),
        (
            [{"type": "image", "data": b64(b"%PDF-1.7"), "mimeType": "image/png"}],
            "attachments[0].data",
            "not an image",
        ),
        ([{"type": "image", "path": "missing.png"}], "attachments[0].path", "is not a file"),
        ([{"type": "image", "path": ""}], "attachments[0].path", "non-empty file path"),
    ],
)
def test_an_attachment_that_breaks_a_rule_is_refused_naming_where(
    tmp_path: Path, attachments: Any, where: str, words: str
) -> None:
    with pytest.raises(AttachmentError) as caught:
        read_attachments(attachments, base=str(tmp_path))
    assert caught.value.where == where and words in caught.value.problem


def test_the_size_and_count_limits_are_refused_naming_the_limit(tmp_path: Path) -> None:
    big = PNG + b"\x00" * MAX_IMAGE_BYTES
    (tmp_path / "big.png").write_bytes(big)
    with pytest.raises(
        AttachmentError, match=r"attachments\[0\].path: .* more than the limit of 5242880 bytes"
    ):
        read_attachments([{"type": "image", "path": "big.png"}], base=str(tmp_path))
    with pytest.raises(AttachmentError, match=r"attachments\[0\].data: .* limit of 5242880 bytes"):
        read_attachments([{"type": "image", "data": b64(big), "mimeType": "image/png"}], base=str(tmp_path))
    exactly = PNG + b"\x00" * (MAX_IMAGE_BYTES - len(PNG))
    (tmp_path / "edge.png").write_bytes(exactly)
    assert (
        len(read_attachments([{"type": "image", "path": "edge.png"}], base=str(tmp_path))[0].data)
        == MAX_IMAGE_BYTES
    )
    many = [{"type": "image", "data": b64(PNG), "mimeType": "image/png"}] * (MAX_IMAGES + 1)
    with pytest.raises(AttachmentError, match="21 images, more than the limit of 20 per agent call"):
        read_attachments(many, base=str(tmp_path))
    assert len(read_attachments(many[:MAX_IMAGES], base=str(tmp_path))) == MAX_IMAGES


def test_a_path_outside_the_file_scope_is_refused_by_the_scopes_rule(tmp_path: Path) -> None:
    project, outside, state = tmp_path / "project", tmp_path / "outside", tmp_path / "state"
    for folder in (project, outside, state):
        folder.mkdir()
    (outside / "x.png").write_bytes(PNG)
    (project / "link.png").symlink_to(outside / "x.png")
    (state / "s.png").write_bytes(PNG)
    confined = FileScope.of(cwd=str(project), state_dir=str(state), confined=True)
    for raw in ("../outside/x.png", "link.png"):
        with pytest.raises(PathRefusedError, match="outside-roots"):
            read_attachments([{"type": "image", "path": raw}], base=str(project), resolve=confined.resolve)
    local = FileScope.of(cwd=str(project), state_dir=str(state), confined=False)
    with pytest.raises(PathRefusedError, match="state-dir"):
        read_attachments(
            [{"type": "image", "path": str(state / "s.png")}], base=str(project), resolve=local.resolve
        )
    assert read_attachments(
        [{"type": "image", "path": "../outside/x.png"}], base=str(project), resolve=local.resolve
    )


def _swapping(project: Path, swap: Any) -> Any:
    """The confined file scope's ``resolve``, which lets ``swap()`` replace what it allowed right after
    it looked: the race a client with a writable project folder would run, made certain."""
    confined = FileScope.of(cwd=str(project), state_dir=str(project / ".state"), confined=True)

    def resolve(raw: str, base: str) -> str:
        real = confined.resolve(raw, base)
        swap()
        return real

    return resolve


def test_a_file_swapped_for_a_link_after_the_scope_looked_is_refused_not_read(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "shots").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.png").write_bytes(PNG + b"outside the roots")
    (project / "shots" / "a.png").write_bytes(PNG)

    def last_component() -> None:
        (project / "shots" / "a.png").unlink()
        (project / "shots" / "a.png").symlink_to(outside / "secret.png")

    with pytest.raises(AttachmentError, match=r"attachments\[0\].path: 'shots/a.png' is not a file"):
        read_attachments(
            [{"type": "image", "path": "shots/a.png"}],
            base=str(project),
            resolve=_swapping(project, last_component),
        )
    (project / "shots" / "a.png").unlink()
    (project / "shots" / "a.png").write_bytes(PNG)
    (outside / "a.png").write_bytes(PNG + b"outside the roots")

    def folder_on_the_way() -> None:
        (project / "shots").rename(project / "moved")
        (project / "shots").symlink_to(outside)

    with pytest.raises(AttachmentError, match="was replaced while it was opened"):
        read_attachments(
            [{"type": "image", "path": "shots/a.png"}],
            base=str(project),
            resolve=_swapping(project, folder_on_the_way),
        )


@pytest.mark.timeout(10)
def test_a_fifo_or_a_device_is_refused_at_once_never_waited_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.png").write_bytes(PNG)

    def fifo() -> None:  # a FIFO with no writer: a blocking open would wait forever
        (project / "a.png").unlink()
        os.mkfifo(project / "a.png")

    with pytest.raises(AttachmentError, match=r"'a\.png' is not a regular file"):
        read_attachments(
            [{"type": "image", "path": "a.png"}], base=str(project), resolve=_swapping(project, fifo)
        )
    for device in ("/dev/zero", "/dev/null"):
        with pytest.raises(AttachmentError, match="is not a regular file"):
            read_attachments([{"type": "image", "path": device}], base=str(project))
