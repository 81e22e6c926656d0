"""What a stdio server loads on the way to its first answer: nothing of the HTTP side of its own, and
nothing its `initialize` answer does not need (jsonschema, the JavaScript parser).

The installed ``mcp`` SDK itself imports uvicorn, starlette and sse_starlette as soon as ``import mcp``
runs (modelcontextprotocol/python-sdk#1770), so the HTTP modules are judged against that floor, measured
in a fresh interpreter: a stdio server may load no HTTP module the SDK alone does not, and once the SDK
stops loading them the same test demands they are absent altogether.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from mcp_kit import connect
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

HTTP_STACK = ("uvicorn", "starlette", "sse_starlette", "h11", "httptools", "websockets", "python_multipart")
NOT_FOR_INITIALIZE = ("jsonschema", "tree_sitter", "tree_sitter_javascript", "workflow_mcp.server.http")

# `workflow-mcp serve` exactly, plus a note of every module it loaded, written as it exits.
SERVE_AND_NOTE_MODULES = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
from workflow_mcp.cli import main
sys.argv[0] = "workflow-mcp"
main()
"""


def modules_of_bare_sdk(env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys, mcp; print(json.dumps(sorted(sys.modules)))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return set(json.loads(out))


def http_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HTTP_STACK}


async def test_a_stdio_server_answers_initialize_without_loading_any_http_module_the_sdk_does_not(
    site: Site, tmp_path: Path
) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SERVE_AND_NOTE_MODULES)
    noted = tmp_path / "modules.json"
    env = site.env(MODULES_OUT=str(noted))
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(script), "serve", "--trust", str(site.project)],
        env=env,
        cwd=str(site.project),
    )
    async with connect(params, mode="legacy") as client:  # legacy: the `initialize` handshake
        assert client.server_info is not None and client.server_info.name == "workflow-mcp"

    loaded = set(json.loads(noted.read_text()))
    assert "workflow_mcp.server.mcp" in loaded  # the note is the stdio server's own
    assert http_modules(loaded) <= http_modules(modules_of_bare_sdk(env))
    assert [m for m in NOT_FOR_INITIALIZE if m in loaded] == []
