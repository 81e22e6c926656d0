"""Hostile configuration files (``workflow-mcp.toml`` in a repository a user runs workflows from):
each is refused with a ProviderConfigError naming the file and the rule, never a traceback or a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workflow_mcp.providers.config import MAX_CONFIG_BYTES, ProviderConfigError, load_config


def env(tmp: Path) -> dict[str, str]:
    return {"WORKFLOW_MCP_HOME": str(tmp / "state"), "HOME": str(tmp / "home")}


def refused(tmp_path: Path, data: bytes) -> ProviderConfigError:
    path = tmp_path / "workflow-mcp.toml"
    path.write_bytes(data)
    began = time.process_time()  # this process's CPU: the parsing work, which machine load does not stretch
    with pytest.raises(ProviderConfigError) as caught:
        load_config(tmp_path, env(tmp_path))
    assert time.process_time() - began < 5
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(str(path))
    return caught.value


def test_a_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    error = refused(tmp_path, b"# " + b"x" * MAX_CONFIG_BYTES + b"\n")
    assert f"over {MAX_CONFIG_BYTES:,} bytes" in str(error)


def test_a_file_that_is_not_utf8_names_the_byte_and_its_offset(tmp_path: Path) -> None:
    error = refused(tmp_path, b'default = "fake"\n# caf\xe9\n')
    assert "not UTF-8 (byte 0xe9 at offset 22)" in str(error)


@pytest.mark.parametrize("opener", ["[", "{ a = "], ids=["arrays", "inline-tables"])
def test_nesting_too_deep_for_the_parser_is_refused(tmp_path: Path, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    error = refused(tmp_path, ("x = " + opener * 50_000 + "1" + closer * 50_000 + "\n").encode())
    assert "nested too deeply" in str(error) or "not valid TOML" in str(error)


def test_a_config_at_the_size_limit_still_loads(tmp_path: Path) -> None:
    text = 'default = "fake"\n'
    padding = MAX_CONFIG_BYTES - len(text) - 3
    (tmp_path / "workflow-mcp.toml").write_text(text + "# " + "x" * padding + "\n")
    assert (tmp_path / "workflow-mcp.toml").stat().st_size == MAX_CONFIG_BYTES
    assert load_config(tmp_path, env(tmp_path)).default == "fake"
