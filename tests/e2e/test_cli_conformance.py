"""Every shared conformance case, run through the installed ``workflow-mcp`` executable by the
shared conformance tool (``conformance_tool.py``, a verbatim copy of ``shared/tools/conformance.py``),
exactly as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TOOL = HERE / "conformance_tool.py"
CASES = (HERE.parent / "conformance" / "cases").resolve()
SHARED = HERE.parents[2] / "shared"  # the shared folder lies beside the repository
SHARED_TOOL = SHARED / "tools" / "conformance.py"
OUR_HEADER_LINES = 3  # lines 2-4 of the copy are ours (ruff/format opt-outs and a note)


def cli() -> Path:
    path = Path(sys.executable).parent / "workflow-mcp"
    assert path.is_file(), f"the workflow-mcp executable is not installed next to {sys.executable}"
    return path


@pytest.mark.skipif(not SHARED_TOOL.is_file(), reason="the shared tool is not on this machine")
def test_the_copied_tool_is_the_shared_tool_verbatim_apart_from_its_header() -> None:
    ours = TOOL.read_text().splitlines()
    shared = SHARED_TOOL.read_text().splitlines()
    assert ours[0] == shared[0]
    assert ours[1 + OUR_HEADER_LINES :] == shared[1:]


@pytest.mark.timeout(900)
def test_the_installed_cli_passes_every_shared_conformance_case() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), str(cli()), str(CASES)],
        capture_output=True,
        text=True,
        timeout=840,
        cwd=HERE,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    summary = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1])
    assert summary is not None, done.stdout[-2000:]
    assert done.returncode == 0, done.stdout[-4000:]
    assert summary.group(2) == "0", done.stdout[-4000:]
    assert int(summary.group(1)) >= 78


@pytest.mark.skipif(
    not (SHARED / "conformance").is_dir(), reason="the shared folder is not beside the repository"
)
def test_every_shared_case_is_copied_verbatim_beside_the_project_s_own_cases() -> None:
    # The project's own oracle-measured cases (issue 11: runtime/label-*, boundary-*, errors-*,
    # realm-*) live in the same tree; every shared file is there byte for byte.
    shared = SHARED / "conformance"
    theirs = {p.relative_to(shared): p.read_bytes() for p in shared.rglob("*") if p.is_file()}
    ours = {p.relative_to(CASES): p.read_bytes() for p in CASES.rglob("*") if p.is_file()}
    assert {k: ours.get(k) for k in theirs} == theirs
    own = {k.parts[1] for k in ours.keys() - theirs.keys() if k.parts[0] == "runtime"}
    assert all((CASES / "runtime" / name / "case.json").is_file() for name in own)
