"""The shared discovery conformance case (cases/discovery/case.json), run through the public API."""

from __future__ import annotations

import json
import os
from pathlib import Path

from workflow_mcp.definitions import find_workflows

CASE = json.loads((Path(__file__).parent / "cases" / "discovery" / "case.json").read_text())


def materialize(tmp_path: Path) -> Path:
    root = tmp_path.resolve()
    for rel, text in CASE["files"].items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / CASE["git_root"] / ".git").mkdir()
    return root


def test_the_discovery_case_lists_exactly_the_expected_workflows_in_order(tmp_path: Path) -> None:
    root = materialize(tmp_path)
    found = find_workflows(root / CASE["cwd"], home=root / CASE["home"])
    got = [
        {"name": w.name, "source": w.source, "path": os.path.relpath(w.path, root)} for w in found.workflows
    ]
    assert got == CASE["expect"]["workflows"]


def test_the_discovery_case_reports_near_misses_invalid_files_and_shadowed_definitions(
    tmp_path: Path,
) -> None:
    root = materialize(tmp_path)
    found = find_workflows(root / CASE["cwd"], home=root / CASE["home"])

    def paths(kind: str) -> list[str]:
        return sorted(os.path.relpath(d.path, root) for d in found.diagnostics if d.kind == kind)

    assert paths("near-miss") == CASE["expect"]["skipped_near_misses"]
    assert paths("invalid") == CASE["expect"]["invalid"]
    assert paths("shadowed") == CASE["expect"]["shadowed"]
    assert paths("unreadable") == []
    assert len(found.diagnostics) == 6
