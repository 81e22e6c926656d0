"""The ChildCheck seam of nested workflow() resolution: asked with the real path before the child is
read and with its hash before it runs; a refusal or a non-workflow file rejects the call without quoting
anything."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path

import pytest

from workflow_mcp.definitions.profile import get_profile
from workflow_mcp.engine.nested import ChildResolver
from workflow_mcp.engine.run import RunOptions, run_workflow
from workflow_mcp.errors import (
    PathRefusedError,
    SourceNotApprovedError,
    WorkflowLoadError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)
from workflow_mcp.providers import FakeProvider

from helpers import arun, finish, workflow

CHILD = "export const meta = { name: 'child', description: 'c' }\nreturn 1\n"


class Recorder:
    """A ChildCheck that records what it was asked and refuses what it is told to."""

    def __init__(self, refuse_run: bool = False, refuse_under: Path | None = None) -> None:
        self.asked: list[tuple[str, ...]] = []
        self.refuse_run = refuse_run
        self.refuse_under = refuse_under

    def readable(self, path: str) -> None:
        self.asked.append(("readable", path))
        if self.refuse_under is not None and Path(path).is_relative_to(self.refuse_under):
            raise PathRefusedError("outside-roots", path, roots=("the project",))

    def runnable(self, name: str, path: str, source_hash: str) -> None:
        self.asked.append(("runnable", name, path, source_hash))
        if self.refuse_run:
            raise SourceNotApprovedError(name, path, source_hash, nested=True)

    def not_found(self, error: WorkflowNotFoundError) -> WorkflowMcpError:
        return WorkflowNotFoundError(f"{error} (as the recorder sees it)")


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


def test_a_child_by_name_is_found_only_among_the_files_the_check_allows(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    personal = home / ".claude" / "workflows"
    personal.mkdir(parents=True)
    (personal / "child.js").write_text(CHILD)
    (personal / "broken.js").write_text("export const meta = { name: 'child', description: TOPSECRET }\n")
    (project / ".git").mkdir(parents=True)
    check = Recorder(refuse_under=home)
    resolver = ChildResolver(str(project), str(home), get_profile(None), check)
    with pytest.raises(WorkflowNotFoundError) as caught:
        resolver.resolve({"name": "child"})
    message = str(caught.value)
    assert message.endswith("(as the recorder sees it)")
    assert message.startswith("workflow('child'): no workflow with that name. Available: ")
    assert str(home) not in message and "TOPSECRET" not in message
    # Asked about the personal directory and refused it, so none of its files was listed or read.
    assert ("readable", str(personal.resolve())) in check.asked
    assert not any(str(personal / "child.js") in entry for entry in check.asked)
    # The same name in the project is found, and asked about before it runs.
    project_child = project / ".claude" / "workflows" / "child.js"
    project_child.parent.mkdir(parents=True)
    project_child.write_text(CHILD)
    assert resolver.resolve({"name": "child"}).path == str(project_child)
    assert check.asked[-1][:3] == ("runnable", "child", str(project_child.resolve()))


class HeldRead:
    """A ChildCheck whose first ``readable`` waits (bounded) until the test releases it: the test can
    release it only while the event loop is free, so ``held_the_loop`` says where resolution ran."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.held_the_loop = False

    def readable(self, path: str) -> None:
        if not self.entered.is_set():
            self.entered.set()
            self.held_the_loop = not self.release.wait(10)

    def runnable(self, name: str, path: str, source_hash: str) -> None:
        return None

    def not_found(self, error: WorkflowNotFoundError) -> WorkflowMcpError:
        return error


def test_resolving_a_child_leaves_the_event_loop_free_for_everything_else(tmp_path: Path) -> None:
    (tmp_path / "child.js").write_text(CHILD)
    check = HeldRead()

    async def scenario() -> str:
        handle = run_workflow(
            workflow("return await workflow({ scriptPath: 'child.js' })"),
            provider=FakeProvider(),
            options=RunOptions(cwd=str(tmp_path)),
            child_check=check,
        )
        assert await asyncio.to_thread(check.entered.wait, 15)
        check.release.set()  # reached only while the check waits in a worker thread
        return (await finish(handle)).status

    assert arun(scenario()) == "completed"
    assert not check.held_the_loop


def test_a_script_path_holding_a_nul_character_is_refused_as_not_a_path(tmp_path: Path) -> None:
    resolver = ChildResolver(str(tmp_path), None, get_profile(None), Recorder())
    with pytest.raises(WorkflowNotFoundError, match="not a path: it holds a NUL character"):
        resolver.resolve({"scriptPath": "child\x00.js"})
