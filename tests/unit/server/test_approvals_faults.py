"""The source approvals file on a full disk: a clear error naming the
file, the disk and the code; the file keeps every approval it held; writing works again once space is
back. Real faults (a tiny tmpfs), no simulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_mcp.errors import FileWriteError
from workflow_mcp.server import SourceTrust

from store_faults import fill_disk, tiny_tmpfs

H1, H2 = "1" * 64, "2" * 64


def test_a_full_disk_refuses_the_approval_naming_the_file_and_keeps_the_earlier_ones(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "state", "64k") as home:
        path = home / "approvals.json"
        trust = SourceTrust(approvals_path=str(path))
        trust.approve(H1, name="kept", path=None, by=None)
        before = path.read_bytes()
        filler = fill_disk(home)
        with pytest.raises(FileWriteError) as exc:
            trust.approve(H2, name="new", path=None, by=None)
        message = str(exc.value)
        assert exc.value.code == "ENOSPC" and f"{path} could not be written" in message
        assert f"bytes free at {home})" in message and "keeps what it held before" in message
        assert path.read_bytes() == before and not trust.allows(H2, None, None)
        assert sorted(p.name for p in home.iterdir()) == ["approvals.json", "approvals.json.lock", "filler"]
        assert trust.allows(H1, None, None)
        filler.unlink()
        trust.approve(H2, name="new", path=None, by=None)  # space is back: it works again
        assert {a["sourceHash"] for a in json.loads(path.read_text())["approvals"]} == {H1, H2}


def test_a_revocation_that_cannot_be_written_is_refused_and_the_approval_stays(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "state", "64k") as home:
        trust = SourceTrust(approvals_path=str(home / "approvals.json"))
        trust.approve(H1, name="kept", path=None, by=None)
        filler = fill_disk(home)
        with pytest.raises(FileWriteError):
            trust.revoke(H1, by=None)
        assert SourceTrust(approvals_path=str(home / "approvals.json")).allows(H1, None, None)
        filler.unlink()
        assert trust.revoke(H1, by=None)


def test_a_damaged_file_that_cannot_be_copied_aside_on_a_full_disk_is_left_as_it_was(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "state", "64k") as home:
        path = home / "approvals.json"
        damaged = '{"version": 2, "approvals": [' + '{"sourceHash": "' + H1 + '", "by": null}, ' * 200
        path.write_text(damaged)  # cut short: not JSON
        filler = fill_disk(home)
        with pytest.raises(FileWriteError) as exc:
            SourceTrust(approvals_path=str(path)).load()
        assert exc.value.code == "ENOSPC" and "the copy of the damaged source approvals file" in str(
            exc.value
        )
        assert path.read_text() == damaged
        assert sorted(p.name for p in home.iterdir()) == ["approvals.json", "filler"]  # no partial copy
        filler.unlink()
        trust = SourceTrust(approvals_path=str(path))
        (problem,) = trust.load()
        assert "is damaged" in problem and list(home.glob("approvals.json.damaged-*"))
