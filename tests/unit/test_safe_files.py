"""Writing into directories other programs can change: no link on the way is followed, a new file
never replaces one created meanwhile, a removal only removes the file that was read, and no
temporary file is left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from workflow_mcp._safe_files import (
    RACED,
    open_directory,
    opened_directory,
    read_file_in,
    remove_file_in,
    replace_file_in,
)


def test_a_link_anywhere_on_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "via").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(OSError) as middle:
        open_directory(str(tmp_path / "via" / "inner"))
    with pytest.raises(OSError) as last:
        open_directory(str(tmp_path / "via"), create=True)
    assert {middle.value.errno, last.value.errno} <= RACED  # Linux says ENOTDIR or ELOOP
    with pytest.raises(ValueError, match="absolute"):
        open_directory("relative/path")


def test_missing_directories_are_made_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_directory(str(tmp_path / "a" / "b"))
    with opened_directory(str(tmp_path / "a" / "b"), create=True, mode=0o700) as fd:
        replace_file_in(fd, "f.txt", b"hello", mode=0o600)
    assert (tmp_path / "a" / "b" / "f.txt").read_bytes() == b"hello"
    assert (tmp_path / "a" / "b" / "f.txt").stat().st_mode & 0o777 == 0o600 & ~_umask()


def test_a_new_file_never_replaces_one_that_exists_and_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("theirs")
    with opened_directory(str(tmp_path)) as fd:
        with pytest.raises(FileExistsError):
            replace_file_in(fd, "f.txt", b"mine", new=True)
        replace_file_in(fd, "g.txt", b"mine", new=True)
        replace_file_in(fd, "f.txt", b"replaced")  # replacing is asked for: it replaces
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt", "g.txt"]
    assert (tmp_path / "f.txt").read_text() == "replaced" and (tmp_path / "g.txt").read_text() == "mine"


def test_a_link_named_like_the_file_is_replaced_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").symlink_to(outside)
    with opened_directory(str(tmp_path / "d")) as fd:
        with pytest.raises(OSError) as exc:
            read_file_in(fd, "f.txt")
        assert exc.value.errno == errno.ELOOP
        replace_file_in(fd, "f.txt", b"new")
    assert outside.read_text() == "keep" and not (tmp_path / "d" / "f.txt").is_symlink()


def test_a_removal_removes_only_the_file_that_was_read(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one")
    with opened_directory(str(tmp_path)) as fd:
        data, st = read_file_in(fd, "f.txt")
        assert data == b"one"
        (tmp_path / "f.txt").rename(tmp_path / "aside.txt")
        (tmp_path / "f.txt").write_text("another")  # another file took the name
        assert not remove_file_in(fd, "f.txt", st)
        assert (tmp_path / "f.txt").read_text() == "another"
        _, now = read_file_in(fd, "f.txt")
        assert remove_file_in(fd, "f.txt", now) and not remove_file_in(fd, "f.txt", now)
    assert [p.name for p in tmp_path.iterdir()] == ["aside.txt"]


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.js")
    with opened_directory(str(tmp_path)) as fd, pytest.raises(OSError) as exc:
        read_file_in(fd, "pipe.js")  # returns at once: opened non-blocking, refused as not regular
    assert exc.value.errno == errno.EINVAL


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
