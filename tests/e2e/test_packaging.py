"""The wheel `pip install .` builds (the README's quick start) holds every file of the package the
sources hold — the realm's worker script, the store's migrations, the run viewer's static files —
each once, at its path under ``workflow_mcp/``; and nothing from outside the package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "workflow_mcp"


def package_files() -> set[str]:
    """The files git tracks under ``src/workflow_mcp``, as wheel paths (``workflow_mcp/...``)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "src/workflow_mcp"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return {path.removeprefix("src/") for path in listed.split("\0") if path}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the package's files are read from git")
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("workflow_mcp-*.whl")
    return found


def test_the_wheel_holds_every_package_file_once(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if not n.startswith("workflow_mcp-")]
    assert len(names) == len(set(names)), "a file is in the wheel twice"
    expected = package_files()
    missing = sorted(expected - set(names))
    assert not missing, f"package files missing from the wheel: {missing[:20]}"
    outside = sorted(n for n in names if not n.startswith("workflow_mcp/"))
    assert not outside, f"files from outside the package: {outside[:20]}"
    for needed in (
        "workflow_mcp/realm/worker.js",
        "workflow_mcp/store/migrations/0001_initial.sql",
        "workflow_mcp/server/viewer/static/viewer.js",
    ):
        assert needed in names
