"""Stored source approvals (``approvals.json``): per principal, merged between processes that share
the file, and a damaged file copied aside with every legible approval kept and a warning naming it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from workflow_mcp.server import SourceTrust

H1, H2, H3 = "1" * 64, "2" * 64, "3" * 64


def stored(path: Path) -> list[tuple[str, str | None]]:
    return sorted((a["sourceHash"], a["by"]) for a in json.loads(path.read_text())["approvals"])


def test_an_approval_counts_for_the_principal_that_gave_it_only(tmp_path: Path) -> None:
    trust = SourceTrust(approvals_path=str(tmp_path / "approvals.json"))
    trust.approve(H1, name="a", path=None, by="http:alice")
    assert trust.allows(H1, None, "http:alice")
    assert not trust.allows(H1, None, "http:bob") and not trust.allows(H1, None, None)


def test_two_servers_sharing_the_file_keep_each_others_approvals(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    one, two = SourceTrust(approvals_path=str(path)), SourceTrust(approvals_path=str(path))
    one.load(), two.load()  # both read the (missing) file before either writes
    one.approve(H1, name="a", path=None, by="http:alice")
    two.approve(H2, name="b", path=None, by=None)
    assert stored(path) == [(H1, "http:alice"), (H2, None)]
    assert SourceTrust(approvals_path=str(path)).allows(H1, None, "http:alice")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_version_1_files_keep_each_approval_with_whoever_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    entry = {"name": "a", "path": None, "approvedAt": "2026-01-01T00:00:00Z"}
    path.write_text(json.dumps({"approved": {H1: {**entry, "by": None}, H2: {**entry, "by": "http:bob"}}}))
    trust = SourceTrust(approvals_path=str(path))
    assert trust.load() == [] and list(tmp_path.glob("*.damaged-*")) == []
    assert (
        trust.allows(H1, None, None)
        and trust.allows(H2, None, "http:bob")
        and not trust.allows(H2, None, None)
    )


@pytest.mark.parametrize(
    ("content", "kept", "why"),
    [
        ("\x00\x01garbage", [], "not JSON"),
        ("", [], "empty"),
        ('["not", "approvals"]', [], "not an approvals file"),
        (
            json.dumps(
                {"version": 2, "approvals": [{"sourceHash": H1, "by": None, "name": "a"}, 7, {"by": 1}]}
            ),
            [(H1, None)],
            "2 entries are not approvals",
        ),
        (
            json.dumps({"version": 2, "approvals": [{"sourceHash": H1, "by": "http:a", "name": "a"}]})[:-2]
            + ', {"sourceHash": "'
            + H3,
            [(H1, "http:a")],
            "not JSON",
        ),
    ],
)
def test_a_damaged_file_is_copied_aside_and_what_is_legible_kept(
    tmp_path: Path,
    content: str,
    kept: list[tuple[str, str | None]],
    why: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "approvals.json"
    path.write_text(content)
    trust = SourceTrust(approvals_path=str(path))
    (problem,) = trust.load()
    (backup,) = tmp_path.glob("approvals.json.damaged-*")
    assert backup.read_text() == content and stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    assert str(path) in problem and str(backup) in problem and why in problem
    assert f"{len(kept)} approval(s) could still be read" in problem
    assert problem in capsys.readouterr().err
    assert stored(path) == kept
    # A later approval adds to what was kept; the copy stays as it was.
    trust.approve(H2, name="b", path=None, by=None)
    assert stored(path) == sorted([*kept, (H2, None)]) and backup.read_text() == content


def test_a_revocation_by_another_process_is_honoured_and_never_written_back(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    server, cli = SourceTrust(approvals_path=str(path)), SourceTrust(approvals_path=str(path))
    server.approve(H1, name="a", path=None, by=None)
    assert cli.revoke(H1, by=None) and not cli.revoke(H1, by=None)
    assert not server.allows(H1, None, None)
    server.approve(H2, name="b", path=None, by=None)  # writes its own change only, not its old view
    assert stored(path) == [(H2, None)]


def test_an_approval_added_by_another_process_is_seen_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    server = SourceTrust(approvals_path=str(path))
    assert not server.allows(H3, None, "http:alice")
    SourceTrust(approvals_path=str(path)).approve(H3, name="c", path=None, by="http:alice")
    assert server.allows(H3, None, "http:alice") and not server.allows(H3, None, None)
    assert [(a["sourceHash"], a["by"]) for a in server.approvals()] == [(H3, "http:alice")]


def test_allow_inline_lets_any_inline_script_run_but_never_a_file(tmp_path: Path) -> None:
    trust = SourceTrust(approvals_path=str(tmp_path / "approvals.json"), allow_inline=True)
    assert trust.allows(H1, None, None) and trust.allows(H1, None, "http:bob")
    assert not trust.allows(H1, str(tmp_path / "w.js"), None)
