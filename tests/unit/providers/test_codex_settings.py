"""The codex provider's settings and probe: validated before anything starts, and a login judged
from file and variable names only, never from a secret's value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.providers.codex import CodexProvider
from workflow_mcp.providers.config import ProviderConfigError
from workflow_mcp.providers.policy import DEFAULT_POLICY


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"colour": "red"}, "providers.codex.colour"),
        ({"model": 5}, "providers.codex.model"),
        ({"ephemeral": "yes"}, "providers.codex.ephemeral"),
        ({"max_workers": True}, "providers.codex.max_workers"),
        ({"env": ["OK", ""]}, "providers.codex.env"),
        ({"effort": "extreme"}, "providers.codex.effort"),
        ({"efforts": {"high": "extreme"}}, "providers.codex.efforts.high"),
    ],
)
def test_bad_codex_settings_name_the_file_and_key(settings: dict[str, Any], key: str) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        CodexProvider.create(settings, policy=DEFAULT_POLICY, source="/p/workflow-mcp.toml")
    assert caught.value.key == key and caught.value.path == "/p/workflow-mcp.toml"


def test_valid_settings_build_a_provider_without_starting_codex() -> None:
    provider = CodexProvider.create(
        {
            "model": "gpt-x",
            "effort": "low",
            "efforts": {"max": "high"},
            "config": {"a": {"b": 1}},
            "env": ["K"],
        },
        policy=DEFAULT_POLICY,
        source="cfg",
    )
    assert provider.settings.model == "gpt-x" and provider.capabilities.structured_output
    assert not provider.running  # nothing started


def test_a_configured_binary_that_does_not_exist_is_reported_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("openai_codex", reason="the codex extra is not installed")
    found = CodexProvider.probe({"bin": str(tmp_path / "no-codex")})
    assert not found.available and "not an executable file" in (found.problem or "")


def test_a_login_is_seen_from_the_auth_file_or_a_key_name_never_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai_codex", reason="the codex extra is not installed")
    for name in ("CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "codex-home"
    home.mkdir()
    logged_out = CodexProvider.probe({"codex_home": str(home)})
    assert logged_out.available and logged_out.logged_in is False and not logged_out.ready
    assert "codex login" in (logged_out.problem or "")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    by_key = CodexProvider.probe({"codex_home": str(home)})
    assert by_key.logged_in is True and by_key.login == "OPENAI_API_KEY is set"
    assert "sk-secret-value" not in repr(by_key)
    (home / "auth.json").write_text("{}")
    assert CodexProvider.probe({"codex_home": str(home)}).login == f"auth file {home / 'auth.json'}"


def test_a_codex_config_nested_too_deeply_to_read_is_no_login_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.toml").write_text("model_provider = " + "[" * 100_000 + "]" * 100_000)
    seen = CodexProvider.probe({"codex_home": str(tmp_path)})
    assert seen.logged_in is False
