"""The ChildCheck seam of nested workflow() resolution: asked with the real path before the child is
read and with its hash before it runs; a refusal or a non-workflow file rejects the call without quoting
anything."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from workflow_mcp.definitions.profile import get_profile
from workflow_mcp.engine.nested import ChildResolver
from workflow_mcp.errors import SourceNotApprovedError, WorkflowLoadError

CHILD = "export const meta = { name: 'child', description: 'c' }\nreturn 1\n"


class Recorder:
    """A ChildCheck that records what it was asked and refuses what it is told to."""

    def __init__(self, refuse_run: bool = False) -> None:
        self.asked: list[tuple[str, ...]] = []
        self.refuse_run = refuse_run

    def readable(self, path: str) -> None:
        self.asked.append(("readable", path))

    def runnable(self, name: str, path: str, source_hash: str) -> None:
        self.asked.append(("runnable", name, path, source_hash))
        if self.refuse_run:
            raise SourceNotApprovedError(name, path, source_hash, nested=True)


def test_a_script_path_child_is_checked_by_its_real_path_before_reading_and_by_hash_before_running(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real" / "child.js"
    real.parent.mkdir()
    real.write_text(CHILD)
    (tmp_path / "link.js").symlink_to(real)
    check = Recorder()
    child = ChildResolver(str(tmp_path), None, get_profile(None), check).resolve({"scriptPath": "link.js"})
    digest = hashlib.sha256(CHILD.encode()).hexdigest()
    assert check.asked == [("readable", str(real)), ("runnable", "child", str(real), digest)]
    assert child.name == "child"


def test_a_refused_child_raises_the_checks_error(tmp_path: Path) -> None:
    (tmp_path / "child.js").write_text(CHILD)
    resolver = ChildResolver(str(tmp_path), None, get_profile(None), Recorder(refuse_run=True))
    with pytest.raises(SourceNotApprovedError, match="nested workflow 'child'"):
        resolver.resolve({"scriptPath": "child.js"})


def test_a_child_that_is_not_a_workflow_source_is_refused_without_quoting_it(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("const token = 'TOPSECRET'\n")
    with pytest.raises(WorkflowLoadError) as caught:
        ChildResolver(str(tmp_path), None, get_profile(None)).resolve({"scriptPath": "secret.txt"})
    assert caught.value.rule == "meta-first-statement" and "TOPSECRET" not in str(caught.value)
    assert "nested workflow: the file is not a workflow source" in str(caught.value)
